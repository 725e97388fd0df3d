// The CPU op's index math walked (csrc/kernels/swish_cpu.h): the bias runs a thread's chunk of the forward splits
// into, wherever parallel_for cuts the tensor, and the task grid of the bias gradient.
#include "proof.h"

#include <vector>

#include "kernels/swish_cpu.h"

namespace torchtrt_swish {
namespace proof {

std::string proveBiasRuns(int64_t n, BiasSpec spec, std::vector<int64_t> const& cuts)
{
    Report r;
    std::vector<uint8_t> seen(static_cast<size_t>(n), 0);
    int64_t begin = 0;
    for (size_t k = 0; k <= cuts.size() && r.ok(); ++k)
    {
        int64_t const end = k < cuts.size() ? cuts[k] : n;
        int64_t next = begin; // runs must come in order and tile [begin, end)
        cpu::forEachBiasRun(begin, end, spec, [&](int64_t i, int64_t len, int64_t c, int64_t step) {
            if (!r.ok())
            {
                return;
            }
            if (i != next || len < 1 || i + len > end || (step != 0 && step != 1))
            {
                return r.fail("run [" + std::to_string(i) + ", +" + std::to_string(len) + ") step "
                    + std::to_string(step) + " in chunk [" + std::to_string(begin) + ", " + std::to_string(end) + ")");
            }
            for (int64_t e = 0; e < len; ++e)
            {
                int64_t const b = c + e * step;
                int64_t const want = ((i + e) / spec.inner) % spec.channels;
                if (b < 0 || b >= spec.channels || b != want)
                {
                    return r.fail("x[" + std::to_string(i + e) + "] gets bias[" + std::to_string(b) + "], wants bias["
                        + std::to_string(want) + "]");
                }
                ++seen[static_cast<size_t>(i + e)];
            }
            next = i + len;
        });
        if (r.ok() && next != end && begin < end)
        {
            r.fail("chunk [" + std::to_string(begin) + ", " + std::to_string(end) + ") covered to " + std::to_string(next));
        }
        begin = end;
    }
    for (int64_t i = 0; i < n && r.ok(); ++i)
    {
        if (seen[static_cast<size_t>(i)] != 1)
        {
            r.fail("x[" + std::to_string(i) + "] in " + std::to_string(seen[static_cast<size_t>(i)]) + " runs");
        }
    }
    return r.first;
}

std::string proveBiasGrad(int64_t outer, int64_t channels, int64_t inner)
{
    Report r;
    cpu::BiasGradPlan const p = cpu::planBiasGrad(outer, channels, inner);
    int64_t const n = outer * channels * inner;
    if (n == 0)
    {
        return p.tasks() == 0 ? "" : "tasks for an empty tensor";
    }
    if (p.rowBlocks > cpu::kBIAS_GRAD_MAX_ROW_BLOCKS)
    {
        return "row blocks " + std::to_string(p.rowBlocks);
    }
    // The plan may fold a single channel's rows into its inner run: index g as [p.outer, p.channels, p.inner].
    if (p.outer * p.channels * p.inner != n)
    {
        return "plan of " + std::to_string(p.outer * p.channels * p.inner) + " elements for " + std::to_string(n);
    }
    std::vector<uint8_t> read(static_cast<size_t>(n), 0);
    std::vector<uint8_t> cell(static_cast<size_t>(p.partials()), 0);
    for (int64_t t = 0; t < p.tasks() && r.ok(); ++t)
    {
        cpu::BiasGradTaskRange const q = cpu::biasGradTaskRange(p, t);
        if (q.row < 0 || q.row >= p.rowBlocks * p.segs || q.c0 >= q.c1 || q.o0 >= q.o1 || q.len < 1)
        {
            return "task " + std::to_string(t) + ": empty or past the partial rows";
        }
        // A plane of at most kBIAS_GRAD_CHUNK elements is whole in its task: the fused backward's shortRunsTask
        // (swish_cpu_vec.cpp) runs a task's planes of a row as one stretch of g.
        if (p.inner <= cpu::kBIAS_GRAD_CHUNK && (q.k0 != 0 || q.len != p.inner))
        {
            return "task " + std::to_string(t) + ": elements [" + std::to_string(q.k0) + ", +" + std::to_string(q.len)
                + ") of a plane of " + std::to_string(p.inner);
        }
        for (int64_t c = q.c0; c < q.c1; ++c)
        {
            if (++cell[static_cast<size_t>(q.row * p.channels + c)] > 1)
            {
                return "partial " + std::to_string(q.row * p.channels + c) + " written by two tasks";
            }
            for (int64_t o = q.o0; o < q.o1; ++o)
            {
                for (int64_t k = q.k0; k < q.k0 + q.len; ++k)
                {
                    int64_t const i = (o * p.channels + c) * p.inner + k;
                    if (i < 0 || i >= n || read[static_cast<size_t>(i)]++)
                    {
                        return "g[" + std::to_string(i) + "] read twice or outside g";
                    }
                }
            }
        }
    }
    for (int64_t i = 0; i < n; ++i)
    {
        if (read[static_cast<size_t>(i)] != 1)
        {
            return "g[" + std::to_string(i) + "] summed by no task";
        }
    }
    for (size_t c = 0; c < cell.size(); ++c)
    {
        if (cell[c] != 1)
        {
            return "partial " + std::to_string(c) + " never written, read by the combine";
        }
    }
    return r.first;
}

} // namespace proof
} // namespace torchtrt_swish
