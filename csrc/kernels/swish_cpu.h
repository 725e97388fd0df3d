// The host-agnostic half of the CPU op: how a flat range splits into runs of one bias pattern, and the
// thread-count-independent plan, task ranges and fixed-order combine of the bias gradient. Header-only, no torch; the
// per-instruction-set summing loops live in csrc/torch/swish_cpu_vec.cpp.
//
// The elementwise math itself (x * sigmoid(x) + b and its gradient, vectorized) lives on the torch side in
// csrc/torch/swish_cpu_math.h: it is written with ATen's at::vec (its vector types and the fp16/bf16 conversions
// ATen's own activations use), which this directory must not include.
#pragma once

#include <algorithm>
#include <cstdint>

#include "bias_layout.h"

namespace torchtrt_swish {
namespace cpu {

//! Calls run(i, len, c, step) for consecutive runs covering [begin, end) of a contiguous x: element i + k of the
//! run has bias[c + k * step], step 0 (one bias value: scalar or dim-1 per-channel) or 1 (consecutive bias
//! values: last-dim or full). A range may start anywhere, mid-run included (a thread's chunk of parallel_for).
template <typename Run>
inline void forEachBiasRun(int64_t begin, int64_t end, BiasSpec spec, Run&& run)
{
    if (begin >= end)
    {
        return;
    }
    if (spec.channels == 1)
    {
        run(begin, end - begin, int64_t{0}, int64_t{0});
        return;
    }
    int64_t const q = begin / spec.inner;
    int64_t const r = begin - q * spec.inner;
    int64_t c = q % spec.channels;
    if (spec.inner == 1)
    {
        // The bias index advances with the element and wraps at channels: runs end at the wrap.
        for (int64_t i = begin; i < end; c = 0)
        {
            int64_t const len = std::min(end - i, spec.channels - c);
            run(i, len, c, int64_t{1});
            i += len;
        }
        return;
    }
    // Runs of constant bias, inner long except where the range cuts one.
    for (int64_t i = begin, left = spec.inner - r; i < end; left = spec.inner)
    {
        int64_t const len = std::min(end - i, left);
        run(i, len, c, int64_t{0});
        i += len;
        c = c + 1 == spec.channels ? 0 : c + 1;
    }
}

//! How the CPU bias gradient splits g, viewed as [outer, channels, inner], into tasks: blocks of rows, tiles of
//! channels and segments of the inner run, all fixed by the shape alone. Each task sums its elements in a fixed
//! order into its own partials and the partials are added in a fixed order, so dbias has the same bits whatever
//! the thread count (a reduction split by thread, like ATen's sum, rounds differently on 1, 2 or 3 threads).
struct BiasGradPlan
{
    int64_t outer{0};
    int64_t channels{1};
    int64_t inner{1};
    int64_t rowsPerBlock{1};
    int64_t rowBlocks{0};
    int64_t chansPerTile{1};
    int64_t chanTiles{0};
    int64_t segLen{1};
    int64_t segs{0};

    int64_t tasks() const
    {
        return rowBlocks * chanTiles * segs;
    }
    //! Partial sums: one per (row block, segment, channel).
    int64_t partials() const
    {
        return rowBlocks * segs * channels;
    }
};

// About this many elements per task: enough work to amortize a task, small enough to spread over threads.
constexpr int64_t kBIAS_GRAD_CHUNK = 16384;
// Bounds the partials buffer (row blocks x segments x channels) for tensors with many rows.
constexpr int64_t kBIAS_GRAD_MAX_ROW_BLOCKS = 256;
// Channels summed side by side per row when inner == 1: whole rows up to this width, so a task reads its rows as one
// stretch (tiles of 512 read [tokens, 768] in 2 KB pieces a row apart, which the prefetchers followed late: the
// backward took twice as long; performance notes).
constexpr int64_t kBIAS_GRAD_TILE = 16384;

inline int64_t ceilDiv(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

//! The task grid for g viewed as [outer, channels, inner] (a function of these three sizes only).
inline BiasGradPlan planBiasGrad(int64_t outer, int64_t channels, int64_t inner)
{
    BiasGradPlan p;
    if (channels == 1)
    {
        // One channel: a single run of every element, cut into segments (vectorized, and parallel).
        inner *= outer;
        outer = 1;
    }
    p.outer = outer;
    p.channels = channels;
    p.inner = inner;
    if (outer == 0 || channels == 0 || inner == 0)
    {
        return p; // nothing to sum: every dbias element is 0
    }
    p.segLen = inner < kBIAS_GRAD_CHUNK ? inner : kBIAS_GRAD_CHUNK;
    p.segs = ceilDiv(inner, p.segLen);
    int64_t const perRowTile = inner == 1 ? kBIAS_GRAD_TILE : std::max<int64_t>(1, kBIAS_GRAD_CHUNK / p.segLen);
    p.chansPerTile = std::min(channels, perRowTile);
    p.chanTiles = ceilDiv(channels, p.chansPerTile);
    p.rowsPerBlock = std::max<int64_t>(1, kBIAS_GRAD_CHUNK / (p.chansPerTile * p.segLen));
    if (ceilDiv(outer, p.rowsPerBlock) > kBIAS_GRAD_MAX_ROW_BLOCKS)
    {
        p.rowsPerBlock = ceilDiv(outer, kBIAS_GRAD_MAX_ROW_BLOCKS);
    }
    p.rowBlocks = ceilDiv(outer, p.rowsPerBlock);
    return p;
}

//! What task t of the plan covers: rows [o0, o1), channels [c0, c1), inner elements [k0, k0 + len); its sums go to
//! partial row `row` (row block * segs + segment).
struct BiasGradTaskRange
{
    int64_t o0, o1, c0, c1, k0, len, row;
};

inline BiasGradTaskRange biasGradTaskRange(BiasGradPlan const& p, int64_t t)
{
    int64_t const ct = t % p.chanTiles;
    int64_t const rs = t / p.chanTiles; // row block * segs + segment
    int64_t const sg = rs % p.segs;
    int64_t const rb = rs / p.segs;
    int64_t const c0 = ct * p.chansPerTile;
    int64_t const o0 = rb * p.rowsPerBlock;
    int64_t const k0 = sg * p.segLen;
    return BiasGradTaskRange{o0, std::min(p.outer, o0 + p.rowsPerBlock), c0, std::min(p.channels, c0 + p.chansPerTile),
        k0, std::min(p.inner, k0 + p.segLen) - k0, rs};
}

// Channels whose sums the combine keeps side by side while it walks the partial rows.
constexpr int64_t kBIAS_GRAD_COMBINE_CHANNELS = 256;

//! dbias[c] for c in [cBegin, cEnd): the partials added in row-block, then segment order, rounded once. The rows are
//! walked in order over a block of channels at a time (contiguous partials, not one column of them per channel), so
//! each channel's sum is still taken in row order: the same bits.
template <typename T, typename Acc>
void biasGradCombine(BiasGradPlan const& p, Acc const* partial, T* dbias, int64_t cBegin, int64_t cEnd)
{
    int64_t const rows = p.rowBlocks * p.segs;
    Acc s[kBIAS_GRAD_COMBINE_CHANNELS];
    for (int64_t c0 = cBegin; c0 < cEnd; c0 += kBIAS_GRAD_COMBINE_CHANNELS)
    {
        int64_t const n = std::min(kBIAS_GRAD_COMBINE_CHANNELS, cEnd - c0);
        for (int64_t i = 0; i < n; ++i)
        {
            s[i] = Acc(0);
        }
        for (int64_t r = 0; r < rows; ++r)
        {
            Acc const* row = partial + r * p.channels + c0;
            for (int64_t i = 0; i < n; ++i)
            {
                s[i] += row[i];
            }
        }
        for (int64_t i = 0; i < n; ++i)
        {
            dbias[c0 + i] = static_cast<T>(s[i]);
        }
    }
}

} // namespace cpu
} // namespace torchtrt_swish
