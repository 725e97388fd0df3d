// The CPU op's elementwise kernels with ATen's at::vec, the way ATen writes its own activations (silu's
// x / (1 + exp(-x)) and silu_backward's formula, SLEEF's exp, fp16/bf16 widened to fp32 and narrowed once).
//
// CMakeLists.txt compiles this file once per instruction set, with -DCPU_CAPABILITY=<name> and that set's -m flags.
// Everything defined here is in a namespace of that name or has internal linkage, so the copies never collide
// (inline functions of the included headers are shared: CMakeLists.txt links the baseline objects first, so the kept
// copy runs on any CPU). Every copy is built with -ffp-contract=off: the formula is evaluated as written, never
// fused into an FMA in one loop and not in another, so a full vector and a tail give the same bits.
#include <ATen/Dispatch.h>
#include <ATen/cpu/vec/functional.h> // the fp16/bf16 <-> fp32 conversions (convert_to_float, convert_from_float)
#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <type_traits>

#include "kernels/swish_cpu.h"
#include "swish_cpu_vec.h"

#ifndef CPU_CAPABILITY
#error "swish_cpu_vec.cpp is built once per instruction set with -DCPU_CAPABILITY=<name> (see CMakeLists.txt)"
#endif

namespace torchtrt_swish {
namespace cpu_vec {
namespace CPU_CAPABILITY {
namespace {

using at::vec::Vectorized;

//! PyTorch's silu formula, so special values match F.silu exactly (silu(-inf) is NaN), plus the bias.
template <typename V>
inline V swishBias(V const& x, V const& b)
{
    return x / (V(1) + x.neg().exp()) + b;
}

//! PyTorch's silu_backward formula: g * s * (1 + x * (1 - s)).
template <typename V>
inline V swishGrad(V const& g, V const& x)
{
    V const one(1);
    V const s = one / (one + x.neg().exp());
    return g * s * (one + x * (one - s));
}

//! out[k] = op(a[k], b[k]) (or op(a[k], b[0]) when kBroadcastB) for k in [0, len), in the compute type (fp32 for
//! fp16/bf16, rounded once on the store). The tail goes through the same vector code as the body (partial loads
//! and stores), so an element's bits do not depend on where a thread's chunk or a bias run starts.
template <typename T, bool kBroadcastB, typename Op>
void map2(T const* a, T const* b, T* out, int64_t len, Op const& op)
{
    using V = Vectorized<T>;
    constexpr int64_t kW = V::size();
    auto body = [&](V const& av, V const& bv) -> V {
        if constexpr (std::is_same_v<T, c10::Half> || std::is_same_v<T, c10::BFloat16>)
        {
            using F = Vectorized<float>;
            auto [a0, a1] = at::vec::convert_to_float<T>(av);
            if constexpr (kBroadcastB)
            {
                F const bb(static_cast<float>(b[0]));
                return at::vec::convert_from_float<T>(op(a0, bb), op(a1, bb));
            }
            else
            {
                auto [b0, b1] = at::vec::convert_to_float<T>(bv);
                return at::vec::convert_from_float<T>(op(a0, b0), op(a1, b1));
            }
        }
        else
        {
            if constexpr (kBroadcastB)
            {
                return op(av, V(b[0]));
            }
            else
            {
                return op(av, bv);
            }
        }
    };
    int64_t k = 0;
    for (; k + kW <= len; k += kW)
    {
        body(V::loadu(a + k), kBroadcastB ? V() : V::loadu(b + k)).store(out + k);
    }
    if (k < len)
    {
        int64_t const n = len - k;
        body(V::loadu(a + k, n), kBroadcastB ? V() : V::loadu(b + k, n)).store(out + k, static_cast<int>(n));
    }
}

template <typename T>
void forwardTyped(void const* xv, void const* bv, void* yv, int64_t begin, int64_t end, BiasSpec spec)
{
    auto const* x = static_cast<T const*>(xv);
    auto const* bias = static_cast<T const*>(bv);
    auto* y = static_cast<T*>(yv);
    auto const op = [](auto const& xs, auto const& bs) { return swishBias(xs, bs); };
    cpu::forEachBiasRun(begin, end, spec, [&](int64_t i, int64_t len, int64_t c, int64_t step) {
        if (step == 0)
        {
            map2<T, true>(x + i, bias + c, y + i, len, op);
        }
        else
        {
            map2<T, false>(x + i, bias + c, y + i, len, op);
        }
    });
}

template <typename T>
void backwardTyped(void const* gv, void const* xv, void* dxv, int64_t begin, int64_t end)
{
    auto const* g = static_cast<T const*>(gv) + begin;
    auto const* x = static_cast<T const*>(xv) + begin;
    auto* dx = static_cast<T*>(dxv) + begin;
    map2<T, false>(g, x, dx, end - begin, [](auto const& gs, auto const& xs) { return swishGrad(gs, xs); });
}

//! Sum of p[0, len) in Acc with eight lanes chosen by position, combined pairwise: a fixed order that vectorizes
//! (in this file: each instruction set's copy gets its own, vectorized for it).
template <typename T, typename Acc>
inline Acc laneSum(T const* p, int64_t len)
{
    Acc lane[8] = {};
    int64_t i = 0;
    for (; i + 8 <= len; i += 8)
    {
        for (int j = 0; j < 8; ++j)
        {
            lane[j] += static_cast<Acc>(p[i + j]);
        }
    }
    for (int j = 0; i < len; ++i, ++j)
    {
        lane[j] += static_cast<Acc>(p[i]);
    }
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

//! Task t of the plan: partial[row * channels + c] for the channels of its tile (cpu::biasGradTaskRange).
template <typename T, typename Acc>
void biasGradTask(T const* g, cpu::BiasGradPlan const& p, int64_t t, Acc* partial)
{
    cpu::BiasGradTaskRange const r = cpu::biasGradTaskRange(p, t);
    Acc* acc = partial + r.row * p.channels;
    for (int64_t c = r.c0; c < r.c1; ++c)
    {
        acc[c] = Acc(0);
    }
    for (int64_t o = r.o0; o < r.o1; ++o)
    {
        T const* row = g + o * p.channels * p.inner;
        if (p.inner == 1)
        {
            for (int64_t c = r.c0; c < r.c1; ++c)
            {
                acc[c] += static_cast<Acc>(row[c]);
            }
        }
        else
        {
            for (int64_t c = r.c0; c < r.c1; ++c)
            {
                acc[c] += laneSum<T, Acc>(row + c * p.inner + r.k0, r.len);
            }
        }
    }
}

template <typename T>
void biasGradTyped(void const* gv, cpu::BiasGradPlan const& plan, int64_t begin, int64_t end, double* partial)
{
    for (int64_t t = begin; t < end; ++t)
    {
        biasGradTask<T, double>(static_cast<T const*>(gv), plan, t, partial);
    }
}

// The op checks dtype before any kernel runs (prepare, checkBackward), so the dispatch's own error is a backstop.
void forward(c10::ScalarType dtype, void const* x, void const* bias, void* y, int64_t begin, int64_t end, BiasSpec spec)
{
    AT_DISPATCH_FLOATING_TYPES_AND2(c10::kHalf, c10::kBFloat16, dtype, "swish_cpu",
        [&] { forwardTyped<scalar_t>(x, bias, y, begin, end, spec); });
}

void backward(c10::ScalarType dtype, void const* g, void const* x, void* dx, int64_t begin, int64_t end)
{
    AT_DISPATCH_FLOATING_TYPES_AND2(
        c10::kHalf, c10::kBFloat16, dtype, "swish_backward_cpu", [&] { backwardTyped<scalar_t>(g, x, dx, begin, end); });
}

void biasGrad(
    c10::ScalarType dtype, void const* g, cpu::BiasGradPlan const& plan, int64_t begin, int64_t end, double* partial)
{
    AT_DISPATCH_FLOATING_TYPES_AND2(c10::kHalf, c10::kBFloat16, dtype, "swish_bias_grad_cpu",
        [&] { biasGradTyped<scalar_t>(g, plan, begin, end, partial); });
}

} // namespace

#define TORCHTRT_SWISH_STR2(x) #x
#define TORCHTRT_SWISH_STR(x) TORCHTRT_SWISH_STR2(x)
Kernels const kKernels{TORCHTRT_SWISH_STR(CPU_CAPABILITY), &forward, &backward, &biasGrad};

} // namespace CPU_CAPABILITY
} // namespace cpu_vec
} // namespace torchtrt_swish
