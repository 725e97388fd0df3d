// Plain C++ (no CUDA headers) shared by the launchers, their host-side planning (swish_backward_plan.h) and the
// hosts: the element types, the block size and unroll depth, division by run-time constants and the grid limit. The planners' unit
// tests compile this with a host compiler alone.
#pragma once

#include <climits>
#include <cstdint>

#include "swish_types.h"

// FastDiv's division runs in kernels and, for the planners' tests, on the host.
#if defined(__CUDACC__)
#define TORCHTRT_SWISH_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define TORCHTRT_SWISH_HOST_DEVICE inline
#endif

namespace torchtrt_swish {

namespace detail {

constexpr int kTHREADS = 256;
constexpr int kWARPS = kTHREADS / 32;
// Independent 16-byte packs per thread per iteration of the backward kernels: enough bytes in flight to cover HBM
// latency.
constexpr int kUNROLL = 4;

// Bytes of one element.
inline int elementBytes(DType t)
{
    return t == DType::kFLOAT32 ? 4 : 2;
}

// Elements of one 16-byte pack.
inline int vecWidth(DType t)
{
    return 16 / elementBytes(t);
}

// Division by a run-time constant: multiply-high + shift for 32-bit dividends (Granlund-Montgomery), plain
// 64-bit division otherwise. Integer division per pack would otherwise cost more than the math it indexes.
struct FastDiv
{
    uint64_t d{1};
    uint32_t mul{1};
    uint32_t shift{0};
    uint32_t mul31{0x80000000U}; // div31's magic, ceil(2^(31 + shift) / d): below 2^32 for d < 2^31

    static FastDiv make(int64_t divisor)
    {
        FastDiv f;
        f.d = static_cast<uint64_t>(divisor);
        if (f.d > 0xffffffffULL)
        {
            return f; // div() takes the 64-bit path for such divisors
        }
        while ((uint64_t{1} << f.shift) < f.d)
        {
            ++f.shift;
        }
        f.mul = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << f.shift) - f.d)) / f.d + 1);
        if (f.d < (uint64_t{1} << 31))
        {
            f.mul31 = static_cast<uint32_t>(((uint64_t{1} << (31 + f.shift)) + f.d - 1) / f.d);
        }
        return f;
    }

    TORCHTRT_SWISH_HOST_DEVICE uint64_t div(uint64_t n) const
    {
        if (n <= 0xffffffffULL && d <= 0xffffffffULL)
        {
            auto const n32 = static_cast<uint32_t>(n);
            return (static_cast<uint64_t>(mulHi(n32, mul)) + n32) >> shift;
        }
        return n / d;
    }

    // n / d for n and d below 2^31, where the magic fits 32 bits: a multiply-high and a shift, no 64-bit carry.
    // n * mul31 / 2^(31 + shift) exceeds n / d by less than n / 2^(31 + shift) < 1 / d: never the next integer.
    TORCHTRT_SWISH_HOST_DEVICE uint32_t div31(uint32_t n) const
    {
        return mulHi(n + n, mul31) >> shift;
    }

    // n / d for callers that know n and d fit in 32 bits (block-local offsets).
    TORCHTRT_SWISH_HOST_DEVICE uint32_t div32(uint32_t n) const
    {
        return static_cast<uint32_t>((static_cast<uint64_t>(mulHi(n, mul)) + n) >> shift);
    }

private:
    static TORCHTRT_SWISH_HOST_DEVICE uint32_t mulHi(uint32_t a, uint32_t b)
    {
#if defined(__CUDA_ARCH__)
        return __umulhi(a, b);
#else
        return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
    }
};

// log2 of a power of two: a shift where a kernel would otherwise divide by a run-time power of two.
TORCHTRT_SWISH_HOST_DEVICE int log2Pow2(uint32_t v)
{
#if defined(__CUDA_ARCH__)
    return __ffs(static_cast<int>(v)) - 1;
#else
    return __builtin_ctz(v);
#endif
}

// Blocks for a grid of `blocks`, or 0 when that exceeds INT_MAX (more than any GPU's memory could feed): the
// launchers report 0 as an invalid configuration.
inline unsigned gridBlocks(int64_t blocks)
{
    return blocks > INT_MAX ? 0U : static_cast<unsigned>(blocks);
}

} // namespace detail
} // namespace torchtrt_swish
