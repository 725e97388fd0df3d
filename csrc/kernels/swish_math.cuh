// Numerics and packing shared by the Swish kernels (csrc/kernels/swish_*.cu): launch constants, per-device attribute
// caches (perDevice), the fp32 math with exact division (forward and input gradient), 16-byte packs and the alignment
// check (the block size, FastDiv and the grid limit are plain C++ in launch_common.h). Internal to the kernel files:
// hosts include swish_kernel.h.
#pragma once

#include "launch_common.h"
#include "swish_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <numeric>

namespace torchtrt_swish {
namespace detail {

// A positive value per device, computed once per device by query(dev, value) (the queries are cheap, but not free per
// launch). No guess when the query fails: the caller gets the error.
template <typename Query>
cudaError_t perDevice(std::atomic<int> (&cache)[64], int& out, Query query)
{
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess)
    {
        return e;
    }
    int v = dev >= 0 && dev < 64 ? cache[dev].load(std::memory_order_relaxed) : 0;
    if (v == 0)
    {
        e = query(dev, v);
        if (e != cudaSuccess)
        {
            return e;
        }
        if (v <= 0)
        {
            return cudaErrorInvalidDevice;
        }
        if (dev >= 0 && dev < 64)
        {
            cache[dev].store(v, std::memory_order_relaxed);
        }
    }
    out = v;
    return cudaSuccess;
}

// Backward kernels hold two input packs per unrolled step: a cap of three resident blocks per SM (no spills) keeps
// more loads in flight than the registers bf16 takes uncapped.
constexpr int kMIN_BLOCKS = 3;

template <typename T>
struct Cvt;

template <>
struct Cvt<float>
{
    static __device__ __forceinline__ float toF(float v) { return v; }
    static __device__ __forceinline__ float fromF(float v) { return v; }
};

template <>
struct Cvt<__half>
{
    static __device__ __forceinline__ float toF(__half v) { return __half2float(v); }
    static __device__ __forceinline__ __half fromF(float v) { return __float2half_rn(v); }
};

template <>
struct Cvt<__nv_bfloat16>
{
    // bf16 is the top half of an fp32: a shift, written out so the compiler can schedule it freely (the header's
    // inline-asm conversion cannot be).
    static __device__ __forceinline__ float toF(__nv_bfloat16 v)
    {
        return __uint_as_float(static_cast<uint32_t>(__bfloat16_as_ushort(v)) << 16);
    }
    static __device__ __forceinline__ __nv_bfloat16 fromF(float v) { return __float2bfloat16_rn(v); }
};

// 1/v with a 1-ulp hardware approximation; subnormal results are kept (no .ftz), 1/inf = 0.
__device__ __forceinline__ float rcpApprox(float v)
{
    float r;
    asm("rcp.approx.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
}

// 1/v from the hardware estimate (MUFU.RCP) alone; its result is only used where v is a normal number with a normal
// reciprocal.
__device__ __forceinline__ float rcpApproxFtz(float v)
{
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
}

// 1 + exp(-v), bit-identical to __fadd_rn(1.0f, expf(-v)) (PyTorch's denominator) but written so that the compiler
// contracts expf's last multiply with the add into one FMA: expf ends by scaling the hardware exp2 of a remainder by
// a normal power of two, so that product is exact unless it overflows (the sum is inf either way) or underflows
// (below 2^-126: the sum is 1 either way).
__device__ __forceinline__ float onePlusExpNeg(float v)
{
    return 1.0f + expf(-v);
}

// The forward's fast-path bound on |x|: den = 1 + exp(-x) <= 1 + e^22 stays below 2^32 with room for expf's error.
constexpr float kDIV_FAST_MAX_ABS_X = 22.0f;
static_assert(kDIV_FAST_MAX_ABS_X * 1.4426950408889634 < 31.9, "1 + exp(kDIV_FAST_MAX_ABS_X) must stay below 2^32");

// q[k] = num[k] / den[k] rounded to nearest, bit-identical to __fdiv_rn, for the quotients swish divides: den =
// 1 + exp(-num) in the forward, num = 1 in the backward (den >= 1 or NaN in both). __fdiv_rn per element compiles
// to the hardware fast path (reciprocal estimate, one Newton step, one residual correction) behind a range check
// (FCHK) and a branch to a slow path; each branch is a convergence region, so a pack's divisions ran one after
// another, which made the fp32 kernels latency-bound at small sizes. Here the same fast path runs for the whole
// pack with no branch, and one range check per pack sends the pack to __fdiv_rn if any element is outside the
// range where the fast path is exact: den <= 2^32 and num <= 2^64. The backward checks den (false for NaN and for
// x below -22). The forward checks |num| <= 22, one compare instead of two: it implies den <= 1 + e^22 < 2^32, and
// it is false for NaN and both infinities (+inf has den 1, but its residual inf - inf is NaN). Tiny |x| needs no
// bound: below 2^-32 the denominator is exactly 2, and halving is exact at any magnitude, subnormals included. The
// residual is taken as den * q0 - num and subtracted, not as num - den * q0 and added: the same rounding (negation
// is exact), and 0 / den keeps its sign without a select. kUNIT: every num is 1 (the backward's 1 / den), so q0 is
// r1 itself (1 * r1 is exact, and a NaN r1 gives a NaN q either way); the compiler keeps a multiply by 1 written
// with __fmul_rn. tests/test_ops.py runs all 2^32 fp32 inputs of both the forward (with a zero and an inexact bias)
// and the backward against PyTorch's kernels on the GPU.
template <bool kUNIT = false, int kN>
__device__ __forceinline__ void divRnAll(float const (&num)[kN], float const (&den)[kN], float (&q)[kN])
{
    bool fast = true;
#pragma unroll
    for (int k = 0; k < kN; ++k)
    {
        float const r0 = rcpApproxFtz(den[k]);
        float const r1 = __fmaf_rn(r0, __fmaf_rn(-den[k], r0, 1.0f), r0);
        float const q0 = kUNIT ? r1 : __fmul_rn(num[k], r1);
        q[k] = __fmaf_rn(-r1, __fmaf_rn(den[k], q0, -num[k]), q0);
        fast &= kUNIT ? den[k] <= 0x1p32f : fabsf(num[k]) <= kDIV_FAST_MAX_ABS_X;
    }
    if (!fast)
    {
#pragma unroll
        for (int k = 0; k < kN; ++k)
        {
            q[k] = __fdiv_rn(num[k], den[k]);
        }
    }
}

// r[k] = 1 / d[k] to rcp.approx.f32's 1 ulp, bit-identical to rcpApprox, for d >= 1 or NaN (the half types'
// swish denominators). rcp.approx.f32 keeps subnormal results, so the compiler wraps each MUFU.RCP in two range
// compares, two selects and two scalings. Only d > 2^126 has a subnormal reciprocal (x < -87.3, where a bf16 result
// can still be nonzero), so one compare per element sends such a pack to rcpApprox and every other pack uses the
// hardware estimate alone, which is the same value there.
template <int kN>
__device__ __forceinline__ void rcpAll(float const (&d)[kN], float (&r)[kN])
{
    bool normal = true;
#pragma unroll
    for (int k = 0; k < kN; ++k)
    {
        r[k] = rcpApproxFtz(d[k]);
        normal &= d[k] <= 0x1p126f; // false for NaN
    }
    if (!normal)
    {
#pragma unroll
        for (int k = 0; k < kN; ++k)
        {
            r[k] = rcpApprox(d[k]);
        }
    }
}

// In place: v[k] = swish(v[k]) + b[k] for kN elements of one pack.
// fp32 outputs: PyTorch's silu formula and operation order (x / (1 + exp(-x))), IEEE divide, so results match
// F.silu(x) + b; the _rn intrinsics keep the compiler from contracting the bias add into an FMA.
// fp16/bf16 outputs: the same exp, then x * rcp(1 + e) + b in one FMA. Its fp32 error (a few fp32 ulps) is far
// below half an fp16/bf16 ulp, special values are unchanged (1/inf = 0, -inf * 0 = NaN), and it drops the
// divide's slow-path check that made the half kernels compute-bound.
template <typename T, int kN>
__device__ __forceinline__ void swishBiasAll(float (&v)[kN], float const (&b)[kN])
{
    if constexpr (sizeof(T) == 4)
    {
        float d[kN];
#pragma unroll
        for (int k = 0; k < kN; ++k)
        {
            d[k] = onePlusExpNeg(v[k]);
        }
        float q[kN];
        divRnAll(v, d, q);
#pragma unroll
        for (int k = 0; k < kN; ++k)
        {
            v[k] = __fadd_rn(q[k], b[k]);
        }
    }
    else
    {
        float d[kN];
#pragma unroll
        for (int k = 0; k < kN; ++k)
        {
            d[k] = onePlusExpNeg(v[k]);
        }
        float r[kN];
        rcpAll(d, r);
#pragma unroll
        for (int k = 0; k < kN; ++k)
        {
            v[k] = fmaf(v[k], r[k], b[k]);
        }
    }
}

// In place: x[k] becomes dx[k] = g[k] * s * (1 + x * (1 - s)), s = 1 / (1 + exp(-x)): PyTorch's silu_backward
// (exact reciprocal for fp32, the fast one for half types).
template <typename T, int kN>
__device__ __forceinline__ void swishGradAll(float const (&g)[kN], float (&x)[kN])
{
    float d[kN];
    float s[kN];
#pragma unroll
    for (int k = 0; k < kN; ++k)
    {
        d[k] = onePlusExpNeg(x[k]);
    }
    if constexpr (sizeof(T) == 4)
    {
        float one[kN];
#pragma unroll
        for (int k = 0; k < kN; ++k)
        {
            one[k] = 1.0f;
        }
        divRnAll<true>(one, d, s);
    }
    else
    {
        rcpAll(d, s);
    }
#pragma unroll
    for (int k = 0; k < kN; ++k)
    {
        x[k] = g[k] * s[k] * (1.0f + x[k] * (1.0f - s[k]));
    }
}

template <typename T, int kVEC>
struct alignas(sizeof(T) * kVEC) Pack
{
    T v[kVEC];
};

// One pack of T from kVEC floats (round to nearest).
template <typename T, int kVEC>
__device__ __forceinline__ Pack<T, kVEC> packFrom(float const (&v)[kVEC])
{
    Pack<T, kVEC> out;
#pragma unroll
    for (int k = 0; k < kVEC; ++k)
    {
        out.v[k] = Cvt<T>::fromF(v[k]);
    }
    return out;
}

inline bool aligned16(void const* p)
{
    return (reinterpret_cast<uintptr_t>(p) & 15U) == 0;
}

} // namespace detail
} // namespace torchtrt_swish
