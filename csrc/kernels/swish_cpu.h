// CPU twin of swish_kernel.cu: the same formula on a range of flat indices, header-only, no torch.
//
// T is any element type convertible to and from the compute type Acc (float for fp32/fp16/bf16, double for
// fp64), so the torch op instantiates it with its own half types while this file stays host-agnostic. Callers
// split [begin, end) across threads; the inner loops are branch-free on the common layouts so they vectorize.
#pragma once

#include <cmath>
#include <cstdint>

#include "bias_layout.h"

namespace torchtrt_swish {
namespace cpu {

//! PyTorch's silu formula (x / (1 + exp(-x))) so special values match it exactly, plus the bias, rounded once.
template <typename Acc>
inline Acc swishBias(Acc x, Acc b)
{
    return x / (Acc(1) + std::exp(-x)) + b;
}

//! PyTorch's silu_backward formula: g * s * (1 + x * (1 - s)).
template <typename Acc>
inline Acc swishGrad(Acc g, Acc x)
{
    Acc const s = Acc(1) / (Acc(1) + std::exp(-x));
    return g * s * (Acc(1) + x * (Acc(1) - s));
}

//! y[i] = swish(x[i]) + bias[(i / inner) % channels] for i in [begin, end); contiguous buffers.
template <typename T, typename Acc>
void swishForwardRange(T const* x, T const* bias, T* y, int64_t begin, int64_t end, BiasSpec spec)
{
    if (spec.channels == 1)
    {
        Acc const b = static_cast<Acc>(bias[0]);
        for (int64_t i = begin; i < end; ++i)
        {
            y[i] = static_cast<T>(swishBias<Acc>(static_cast<Acc>(x[i]), b));
        }
        return;
    }
    if (spec.inner == 1)
    {
        // Last-dim and full layouts: the bias index advances with the element.
        int64_t c = begin % spec.channels;
        for (int64_t i = begin; i < end; ++i)
        {
            y[i] = static_cast<T>(swishBias<Acc>(static_cast<Acc>(x[i]), static_cast<Acc>(bias[c])));
            c = c + 1 == spec.channels ? 0 : c + 1;
        }
        return;
    }
    // Walk runs of constant bias so the inner loop has no division.
    int64_t i = begin;
    int64_t q = i / spec.inner;
    int64_t r = i - q * spec.inner;
    int64_t c = q % spec.channels;
    while (i < end)
    {
        int64_t const runEnd = i + (spec.inner - r) < end ? i + (spec.inner - r) : end;
        Acc const b = static_cast<Acc>(bias[c]);
        for (int64_t j = i; j < runEnd; ++j)
        {
            y[j] = static_cast<T>(swishBias<Acc>(static_cast<Acc>(x[j]), b));
        }
        i = runEnd;
        r = 0;
        c = c + 1 == spec.channels ? 0 : c + 1;
    }
}

//! dx[i] = swishGrad(g[i], x[i]) for i in [begin, end); contiguous buffers.
template <typename T, typename Acc>
void swishBackwardRange(T const* g, T const* x, T* dx, int64_t begin, int64_t end)
{
    for (int64_t i = begin; i < end; ++i)
    {
        dx[i] = static_cast<T>(swishGrad<Acc>(static_cast<Acc>(g[i]), static_cast<Acc>(x[i])));
    }
}

} // namespace cpu
} // namespace torchtrt_swish
