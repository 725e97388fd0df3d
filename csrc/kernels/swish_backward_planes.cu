// The fused backward's planes kernel (planning: swish_backward_plan.h; launch and column sums:
// swish_backward_fused.cu). No torch, no TensorRT.
//
// Bias constant along "planes" of inner > 1 elements that are not the whole tensor: per-channel on dim 1 ([C,1,..]
// over NCHW-like x) and blocks ending before the last dim. Plane q = o * C + c holds elements [q * inner, +inner).
// A block streams one contiguous piece that starts on a plane boundary and on a pack boundary, so every access of
// x, g and dx is a whole aligned pack however `inner` relates to the pack width (7x7 and 14x14 planes included),
// with one round of loads per thread (kPLANE_PPT packs) as in the forward. g is reduced per plane in shared
// memory: each pack leaves the sum of its elements in its first plane (head) and in the next one (tail; inner >=
// the pack width, so a pack spans at most two planes); a plane's sum adds its packs' parts in pack order over a
// fixed number of lanes, then a fixed shuffle tree. The order depends on the shape only, so dbias is the same bits
// on every run. Block shapes (PlanesPlan::shape):
//   kSAMPLES: m whole samples ([C, inner] each): C sums per block, partial[block][c] (small planes: few partials);
//   kPLANES:  k whole planes: one sum per plane, at its plane index, i.e. partial[o][c];
//   kSPLIT:   planes longer than a block, split in `splits` pieces: partial[o * splits + s][c].
#include "swish_backward_fused.cuh"
#include "swish_backward_index.h"

namespace torchtrt_swish {
namespace detail {
namespace {

template <typename T, int kVEC>
__global__ void __launch_bounds__(kTHREADS, kMIN_BLOCKS) swishBackwardPlanesKernel(T const* __restrict__ g,
    T const* __restrict__ x, T* __restrict__ dx, PlanesPlan plan, float* __restrict__ partial)
{
    allowDependentLaunch();
    __shared__ float head[kPLANE_PACKS];
    __shared__ float tail[kPLANE_PACKS];
    using P = Pack<T, kVEC>;
    uint32_t const b = fromTheEnd();
    int const t = static_cast<int>(threadIdx.x);
    bool const split = plan.shape == PlanesShape::kSPLIT;
    PlanesBlock const blk = planesBlock(plan, b);
    int64_t const start = blk.start;
    int64_t const len = blk.len;
    int64_t const localPlanes = blk.planes;
    int const nFull = static_cast<int>(len / kVEC); // start is pack-aligned (planner), so packs are whole
    int const rem = static_cast<int>(len - static_cast<int64_t>(nFull) * kVEC); // last block only, n % kVEC != 0
    P const* gp = reinterpret_cast<P const*>(g + start);
    P const* xp = reinterpret_cast<P const*>(x + start);
    P* dp = reinterpret_cast<P*>(dx + start);
    P gi[kPLANE_PPT];
    P xi[kPLANE_PPT];
    if (nFull > 0)
    {
        // All loads first, unconditionally: a thread past the block's last pack reloads that pack (same cache line,
        // result unused). Behind `if (p < nFull)` the compiler placed the bf16 conversions right after each load
        // pair, so each pair waited for the one before.
#pragma unroll
        for (int u = 0; u < kPLANE_PPT; ++u)
        {
            int const p = min(planesPack(t, u), nFull - 1);
            gi[u] = gp[p];
            xi[u] = xp[p];
        }
    }
    float own = 0.0f; // kSPLIT: this thread's sum of g (one plane)
#pragma unroll
    for (int u = 0; u < kPLANE_PPT; ++u)
    {
        int const p = planesPack(t, u);
        if (p < nFull)
        {
            float gf[kVEC];
            dp[p] = gradPack<T, kVEC>(gi[u], xi[u], gf);
            if (split)
            {
#pragma unroll
                for (int k = 0; k < kVEC; ++k)
                {
                    own += gf[k];
                }
            }
            else
            {
                int const nHead = planesHeadCount(plan, static_cast<uint32_t>(p) * kVEC, kVEC);
                float h = 0.0f;
                float tl = 0.0f;
#pragma unroll
                for (int k = 0; k < kVEC; ++k)
                {
                    if (k < nHead)
                    {
                        h += gf[k];
                    }
                    else
                    {
                        tl += gf[k];
                    }
                }
                head[p] = h;
                tail[p] = tl;
            }
        }
    }
    if (rem > 0 && t == nFull % kTHREADS)
    {
        // The last pack of a tensor whose size is not a multiple of the pack width: element by element.
        uint32_t const e0 = static_cast<uint32_t>(nFull) * kVEC;
        int const nHead = split ? rem : planesHeadCount(plan, e0, rem);
        float h = 0.0f;
        float tl = 0.0f;
        for (int k = 0; k < rem; ++k)
        {
            int64_t const i = start + e0 + k;
            float gv[1] = {Cvt<T>::toF(g[i])};
            float v[1] = {Cvt<T>::toF(x[i])};
            swishGradAll<T>(gv, v);
            dx[i] = Cvt<T>::fromF(v[0]);
            if (k < nHead)
            {
                h += gv[0];
            }
            else
            {
                tl += gv[0];
            }
        }
        if (split)
        {
            own += h;
        }
        else
        {
            head[nFull] = h;
            tail[nFull] = tl;
        }
    }
    if (split)
    {
        __shared__ float warpSums[kWARPS];
        float const total = blockSum(own, warpSums);
        if (t == 0)
        {
            partial[planesSplitCell(plan, blk.q, blk.piece)] = total;
        }
        return;
    }
    __syncthreads();
    // Slot w (a channel in kSAMPLES, a plane in kPLANES) gathers its planes j = w, w + slots, ... in order; inside a
    // plane, lane l adds packs l, l + lanes, ...; then the lanes are added by an xor tree. All threads run the same
    // number of rounds so that every shuffle has the whole warp.
    int const lanes = plan.lanes;
    int const lane = planesLane(plan, t);
    int const groups = kTHREADS / lanes;
    int const slots = plan.slots;
    for (int w0 = 0; w0 < slots; w0 += groups)
    {
        int const w = planesSlot(plan, w0, t);
        float acc = 0.0f;
        if (w < slots)
        {
            for (int64_t j = w; j < localPlanes; j += slots)
            {
                int const pb = planesLastPack(plan, j, kVEC);
                for (int p = planesFirstPack(plan, j, kVEC) + lane; p <= pb; p = planesNextPack(plan, p))
                {
                    acc += planesTakesHead(plan, j, p, kVEC) ? head[p] : tail[p];
                }
            }
        }
        for (int o = lanes / 2; o > 0; o >>= 1)
        {
            acc += __shfl_xor_sync(0xffffffffU, acc, o);
        }
        int64_t const cell = planesSlotCell(plan, b, w, localPlanes);
        if (lane == 0 && cell >= 0)
        {
            partial[cell] = acc;
        }
    }
}

} // namespace

template <typename T>
void launchPlanesKernel(MainLaunch<T> const& l)
{
    byPackWidth(l, [&](auto v) {
        swishBackwardPlanesKernel<T, decltype(v)::value><<<l.grid, kTHREADS, 0, l.stream>>>(l.g, l.x, l.dx, l.plan.planes, l.partial);
    });
}

template void launchPlanesKernel(MainLaunch<float> const&);
template void launchPlanesKernel(MainLaunch<__half> const&);
template void launchPlanesKernel(MainLaunch<__nv_bfloat16> const&);

} // namespace detail
} // namespace torchtrt_swish
