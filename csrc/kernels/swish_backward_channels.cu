// The fused backward's channels kernel (planning: swish_backward_plan.h, planChannels; launch:
// swish_backward_fused.cu). No torch, no TensorRT.
//
// Bias constant along planes of inner > 1 elements (per-channel on dim 1, blocks before the last dim) of a tensor
// whose channels are short enough across the batch: a group of whole warps per channel loads the channel's column
// (its plane of every sample) in one round, writes dx and adds g by an xor tree per warp, then the group's warps in
// warp order, straight into dbias: one launch, no partial matrix, no column sums. The order depends on the shape
// only, so dbias is the same bits on every run.
#include "swish_backward_fused.cuh"
#include "swish_backward_index.h"

namespace torchtrt_swish {
namespace detail {
namespace {

constexpr int kCHANNEL_MATH_ELEMS = 8; // elements whose math runs as one batch (below)

// kBLOCK: the most threads a block of this instance has, which sets its register cap (at 1024 threads, 64 a thread:
// single-element packs spill there, so blocks up to kTHREADS threads get their own instance).
template <typename T, int kVEC, int kBLOCK>
__global__ void __launch_bounds__(kBLOCK) swishBackwardChannelsKernel(T const* __restrict__ g,
    T const* __restrict__ x, T* __restrict__ dx, ChannelsPlan plan, T* __restrict__ dbias)
{
    constexpr int kPER = channelThreadPacks(kVEC);
    // Pack offsets stay in registers for the stores, except under the 1024-thread instance's 64-register cap.
    constexpr bool kKEEP_OFFSETS = kBLOCK <= kTHREADS;
    using P = Pack<T, kVEC>;
    __shared__ float warpSums[kBLOCK / 32];
    int const t = static_cast<int>(threadIdx.x);
    ChannelsThread const th = channelsThread(plan, blockIdx.x, t);
    bool const active = th.c < plan.channels; // whole warps: a group is one channel
    P const* gp = reinterpret_cast<P const*>(g);
    P const* xp = reinterpret_cast<P const*>(x);
    P* dp = reinterpret_cast<P*>(dx);
    float acc = 0.0f;
    if (active)
    {
        P gi[kPER];
        P xi[kPER];
        uint32_t at[kPER];
        // All loads first, unconditionally: a lane past the column's last pack reloads that pack (result unused).
#pragma unroll
        for (int u = 0; u < kPER; ++u)
        {
            at[u] = channelsPack(plan, th.c, channelsLoadPack(plan, th.lane, u));
            gi[u] = gp[at[u]];
            xi[u] = xp[at[u]];
        }
        // The math in batches of kCHANNEL_MATH_ELEMS elements (one range check of the exact divide each, where a
        // branch per single-element pack serialized them; larger batches spill under the 1024-thread register cap),
        // then the stores and sums of the packs inside the column.
        constexpr int kBATCH = kCHANNEL_MATH_ELEMS / kVEC > 0 ? kCHANNEL_MATH_ELEMS / kVEC : 1; // packs per batch
#pragma unroll
        for (int u0 = 0; u0 < kPER; u0 += kBATCH)
        {
            float gf[kBATCH * kVEC];
            float v[kBATCH * kVEC];
#pragma unroll
            for (int u = 0; u < kBATCH; ++u)
            {
#pragma unroll
                for (int k = 0; k < kVEC; ++k)
                {
                    gf[u * kVEC + k] = Cvt<T>::toF(gi[u0 + u].v[k]);
                    v[u * kVEC + k] = Cvt<T>::toF(xi[u0 + u].v[k]);
                }
            }
            swishGradAll<T>(gf, v);
#pragma unroll
            for (int u = 0; u < kBATCH; ++u)
            {
                int const j = channelsColumnPack(plan, th.lane, u0 + u);
                if (j < plan.columnPacks)
                {
                    P out;
#pragma unroll
                    for (int k = 0; k < kVEC; ++k)
                    {
                        out.v[k] = Cvt<T>::fromF(v[u * kVEC + k]);
                        acc += gf[u * kVEC + k];
                    }
                    // The load's offset (j is inside the column), or recomputed where kept offsets spill.
                    dp[kKEEP_OFFSETS ? at[u0 + u] : channelsPack(plan, th.c, j)] = out;
                }
            }
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
    {
        acc += __shfl_xor_sync(0xffffffffU, acc, o);
    }
    if (plan.threads > 32)
    {
        if ((t & 31) == 0)
        {
            warpSums[t / 32] = acc;
        }
        __syncthreads();
        if (th.lane < 32)
        {
            acc = th.lane < plan.threads / 32 ? warpSums[channelsGroupWord(plan, t, th.lane)] : 0.0f;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
            {
                acc += __shfl_xor_sync(0xffffffffU, acc, o);
            }
        }
    }
    if (active && th.lane == 0)
    {
        dbias[th.c] = Cvt<T>::fromF(acc);
    }
}

} // namespace

template <typename T>
void launchChannelsKernel(MainLaunch<T> const& l)
{
    ChannelsPlan const& c = l.plan.chan;
    auto const threads = static_cast<unsigned>(c.blockThreads);
    auto launch = [&](auto v) {
        constexpr int kV = decltype(v)::value;
        if (threads <= kTHREADS)
        {
            swishBackwardChannelsKernel<T, kV, kTHREADS><<<l.grid, threads, 0, l.stream>>>(l.g, l.x, l.dx, c, l.dbias);
        }
        else
        {
            swishBackwardChannelsKernel<T, kV, kCHANNEL_THREADS><<<l.grid, threads, 0, l.stream>>>(l.g, l.x, l.dx, c,
                l.dbias);
        }
    };
    // Packs of 16 bytes down to one element: the widest that divides a plane (planChannels).
    constexpr int kV = 16 / sizeof(T);
    switch (l.plan.vec)
    {
    case kV: launch(std::integral_constant<int, kV>{}); break;
    case kV / 2: launch(std::integral_constant<int, kV / 2>{}); break;
    case kV / 4: launch(std::integral_constant<int, kV / 4>{}); break;
    default: launch(std::integral_constant<int, 1>{}); break;
    }
}

template void launchChannelsKernel(MainLaunch<float> const&);
template void launchChannelsKernel(MainLaunch<__half> const&);
template void launchChannelsKernel(MainLaunch<__nv_bfloat16> const&);

} // namespace detail
} // namespace torchtrt_swish
