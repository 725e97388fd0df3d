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

namespace torchtrt_swish {
namespace detail {
namespace {

template <typename T, int kVEC>
__global__ void __launch_bounds__(kTHREADS, kMIN_BLOCKS) swishBackwardPlanesKernel(T const* __restrict__ g,
    T const* __restrict__ x, T* __restrict__ dx, PlanesPlan plan, float* __restrict__ partial)
{
    __shared__ float head[kPLANE_PACKS];
    __shared__ float tail[kPLANE_PACKS];
    using P = Pack<T, kVEC>;
    uint32_t const b = fromTheEnd();
    int const t = static_cast<int>(threadIdx.x);
    bool const split = plan.shape == PlanesShape::kSPLIT;
    int64_t start;
    int64_t len;
    int64_t localPlanes = 1;
    if (split)
    {
        // 32-bit: blocks <= INT_MAX (a 64-bit division is a subroutine call ahead of the first load).
        auto const splits32 = static_cast<uint32_t>(plan.splits);
        uint32_t const q = b / splits32;
        uint32_t const piece = b - q * splits32;
        int64_t const off = static_cast<int64_t>(piece) * plan.blockElems;
        start = static_cast<int64_t>(q) * plan.inner + off;
        len = min(plan.blockElems, plan.inner - off);
    }
    else
    {
        start = static_cast<int64_t>(b) * plan.blockElems;
        len = min(plan.blockElems, plan.n - start);
        localPlanes = min(plan.blockPlanes, plan.planes - static_cast<int64_t>(b) * plan.blockPlanes);
    }
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
        // result unused). Behind `if (p < nFull)` the compiler placed the bf16 conversions (integer shifts) right
        // after each load pair, so each pair waited for the one before: 0.91 of the floor instead of fp16's 1.01.
#pragma unroll
        for (int u = 0; u < kPLANE_PPT; ++u)
        {
            int const p = min(t + u * kTHREADS, nFull - 1);
            gi[u] = gp[p];
            xi[u] = xp[p];
        }
    }
    float own = 0.0f; // kSPLIT: this thread's sum of g (one plane)
#pragma unroll
    for (int u = 0; u < kPLANE_PPT; ++u)
    {
        int const p = t + u * kTHREADS;
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
                uint32_t const e0 = static_cast<uint32_t>(p) * kVEC;
                uint32_t const j = plan.byInner.div32(e0);
                int const nHead = static_cast<int>(min(static_cast<uint32_t>(kVEC),
                    static_cast<uint32_t>(plan.inner) * (j + 1) - e0));
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
        uint32_t const j = split ? 0U : plan.byInner.div32(e0);
        int const nHead = split ? rem : static_cast<int>(min(static_cast<uint32_t>(rem),
            static_cast<uint32_t>(plan.inner) * (j + 1) - e0));
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
            auto const splits32 = static_cast<uint32_t>(plan.splits);
            uint32_t const q = b / splits32;
            uint32_t const piece = b - q * splits32;
            auto const c32 = static_cast<uint32_t>(plan.channels);
            uint32_t const o = q / c32;
            uint32_t const c = q - o * c32;
            partial[(static_cast<int64_t>(o) * plan.splits + piece) * plan.channels + c] = total;
        }
        return;
    }
    __syncthreads();
    // Slot w (a channel in kSAMPLES, a plane in kPLANES) gathers its planes j = w, w + slots, ... in order; inside a
    // plane, lane l adds packs l, l + lanes, ...; then the lanes are added by an xor tree. All threads run the same
    // number of rounds so that every shuffle has the whole warp.
    int const lanes = plan.lanes;
    int const lane = t & (lanes - 1);
    int const groups = kTHREADS / lanes;
    int const slots = plan.slots;
    int64_t const outBase = static_cast<int64_t>(b) * slots;
    for (int w0 = 0; w0 < slots; w0 += groups)
    {
        int const w = w0 + t / lanes;
        float acc = 0.0f;
        if (w < slots)
        {
            for (int64_t j = w; j < localPlanes; j += slots)
            {
                int64_t const e0 = j * plan.inner;
                int const pa = static_cast<int>(e0 / kVEC);
                int const pb = static_cast<int>((e0 + plan.inner - 1) / kVEC);
                for (int p = pa + lane; p <= pb; p += lanes)
                {
                    acc += static_cast<int64_t>(p) * kVEC >= e0 ? head[p] : tail[p];
                }
            }
        }
        for (int o = lanes / 2; o > 0; o >>= 1)
        {
            acc += __shfl_xor_sync(0xffffffffU, acc, o);
        }
        if (lane == 0 && w < slots && (plan.shape == PlanesShape::kSAMPLES || w < localPlanes))
        {
            partial[outBase + w] = acc;
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
