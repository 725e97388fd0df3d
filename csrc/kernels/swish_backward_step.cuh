// The backward's per-pack step, shared by the unfused backward (swish_backward.cu) and the fused one's kernels
// (swish_backward_rows_cols.cu, swish_backward_planes.cu; swish_backward_channels.cu takes gradPack's math in
// batches, swishGradAll).
#pragma once

#include "swish_backward_index.h"
#include "swish_math.cuh"

namespace torchtrt_swish {
namespace detail {

// dx for one (g, x) pack; gf receives g as floats, the bias gradient's summands.
template <typename T, int kVEC>
__device__ __forceinline__ Pack<T, kVEC> gradPack(Pack<T, kVEC> const& g, Pack<T, kVEC> const& x, float (&gf)[kVEC])
{
    float v[kVEC];
#pragma unroll
    for (int k = 0; k < kVEC; ++k)
    {
        gf[k] = Cvt<T>::toF(g.v[k]);
        v[k] = Cvt<T>::toF(x.v[k]);
    }
    swishGradAll<T>(gf, v);
    return packFrom<T>(v);
}
// One unrolled step of the backward: kUNROLL packs p = base + u * kTHREADS (all loads first, then math and
// stores); returns the sum of g over them for the fused kernels' bias gradient.
template <typename T, int kVEC>
__device__ __forceinline__ float backwardStep(Pack<T, kVEC> const* __restrict__ gp, Pack<T, kVEC> const* __restrict__ xp,
    Pack<T, kVEC>* __restrict__ dp, int64_t base, int64_t nPacks)
{
    using P = Pack<T, kVEC>;
    P gi[kUNROLL];
    P xi[kUNROLL];
#pragma unroll
    for (int u = 0; u < kUNROLL; ++u)
    {
        int64_t const p = stepPack(base, u);
        if (p < nPacks)
        {
            gi[u] = gp[p];
            xi[u] = xp[p];
        }
    }
    float acc = 0.0f;
#pragma unroll
    for (int u = 0; u < kUNROLL; ++u)
    {
        int64_t const p = stepPack(base, u);
        if (p < nPacks)
        {
            float gf[kVEC];
            dp[p] = gradPack<T, kVEC>(gi[u], xi[u], gf);
#pragma unroll
            for (int k = 0; k < kVEC; ++k)
            {
                acc += gf[k];
            }
        }
    }
    return acc;
}

} // namespace detail
} // namespace torchtrt_swish
