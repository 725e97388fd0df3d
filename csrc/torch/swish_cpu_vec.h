// The vectorized CPU kernels of the torch op, built once per instruction set (swish_cpu_vec.cpp) and picked at
// run time the way ATen picks its own CPU kernels (at::get_cpu_capability(), which honours ATEN_CPU_CAPABILITY).
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>

#include "kernels/bias_layout.h"
#include "kernels/swish_cpu.h"

namespace torchtrt_swish {
namespace cpu_vec {

//! One instruction set's kernels. Each works on the flat range [begin, end) of contiguous buffers of dtype, so a
//! caller may cut a tensor anywhere (threads' chunks); an element's result does not depend on where it was cut.
struct Kernels
{
    //! The instruction set's name as ATen's CPU_CAPABILITY spells it ("DEFAULT", "AVX2", "AVX512").
    char const* name;
    //! y[i] = x[i] * sigmoid(x[i]) + bias[(i / inner) % channels], computed in fp32 (fp64) and rounded once.
    void (*forward)(
        c10::ScalarType dtype, void const* x, void const* bias, void* y, int64_t begin, int64_t end, BiasSpec spec);
    //! dx[i] = g[i] * s * (1 + x[i] * (1 - s)), s = 1 / (1 + exp(-x[i])), computed in fp32 (fp64), rounded once.
    void (*backward)(c10::ScalarType dtype, void const* g, void const* x, void* dx, int64_t begin, int64_t end);
    //! Tasks [begin, end) of plan over g (cpu::biasGradTaskRange each, fp64 partials): the same bits on every
    //! instruction set.
    void (*biasGrad)(c10::ScalarType dtype, void const* g, cpu::BiasGradPlan const& plan, int64_t begin, int64_t end,
        double* partial);
    //! biasGrad's tasks that also write dx (as backward does) for their elements: g read from memory once.
    void (*backwardFused)(c10::ScalarType dtype, void const* g, void const* x, void* dx, cpu::BiasGradPlan const& plan,
        int64_t begin, int64_t end, double* partial);
    //! y[i] = the fp32 sigmoid the kernels use (its error bound is tested over every exponent of x).
    void (*sigmoid)(float const* x, float* y, int64_t n);
};

//! Whether the streaming loops prefetch a page ahead of each stream. Intel's L2 streamer stops at 4 KB page
//! boundaries, and there the prefetch keeps the loops at a copy's pace; on AMD Zen 4 the same prefetches made them
//! slower (docs/performance-notes.md, runs m4, m5). Other architectures keep it.
inline bool pagePrefetch()
{
#if defined(__x86_64__) || defined(__i386__)
    static bool const on = (__builtin_cpu_init(), !__builtin_cpu_is("amd"));
    return on;
#else
    return true;
#endif
}

//! Whether the AVX512 copy rounds fp32 to bf16 with AVX512_BF16's VCVTNE2PS2BF16 (one instruction for 32 elements
//! where ATen's vector code takes 16): built with it, and this CPU has it (AMD Zen 4 and the H200 host's Xeon do).
inline bool avx512Bf16()
{
#if defined(TORCHTRT_SWISH_AVX512BF16)
    static bool const on = (__builtin_cpu_init(), __builtin_cpu_supports("avx512bf16"));
    return on;
#else
    return false;
#endif
}

// One namespace per instruction set, named like ATen's CPU_CAPABILITY values; CMakeLists.txt builds swish_cpu_vec.cpp
// once for each with that macro and the matching -m flags. TORCHTRT_SWISH_CPU_X86 says the x86 ones were built.
namespace DEFAULT {
extern Kernels const kKernels;
} // namespace DEFAULT
#ifdef TORCHTRT_SWISH_CPU_X86
namespace AVX2 {
extern Kernels const kKernels;
} // namespace AVX2
namespace AVX512 {
extern Kernels const kKernels;
} // namespace AVX512
#endif

} // namespace cpu_vec
} // namespace torchtrt_swish
