// The CPU proofs of the kernels' index math (tests/backward_plan/*_proof.cpp), bound into _backward_plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/swish_backward_plan.h"

namespace torchtrt_swish {
namespace proof {

//! The first broken rule a walk found; empty while every rule holds.
struct Report
{
    std::string first;
    bool ok() const { return first.empty(); }
    void fail(std::string what)
    {
        if (first.empty())
        {
            first = std::move(what);
        }
    }
};

//! Walks every block and thread of the fused backward's plan for this layout (fused_proof.cpp); "" when it holds.
std::string proveFused(DType dtype, int64_t n, BiasSpec spec, bool aligned, int sms, detail::FusedPlan* plan);

//! The column sums of a [rows][channels] partial matrix as planSums plans them (fused_proof.cpp); "" when they hold.
std::string proveSums(int64_t rows, int64_t channels, int64_t* slices);

//! Walks every launch of the forward's plan (forward_proof.cpp); "" when it holds. edges: only the first two and last
//! two blocks of each launch, without the written-once check (tensors too large to walk: past 2^32 elements).
std::string proveForward(DType dtype, int64_t n, BiasSpec spec, bool io, bool biasAligned, int64_t l2Bytes,
    bool edges = false);

//! forEachBiasRun over the chunks [0, cuts[0]), [cuts[0], cuts[1]), ..., [cuts.back(), n) (cpu_proof.cpp).
std::string proveBiasRuns(int64_t n, BiasSpec spec, std::vector<int64_t> const& cuts);

//! The bias-gradient task grid of [outer, channels, inner] (cpu_proof.cpp).
std::string proveBiasGrad(int64_t outer, int64_t channels, int64_t inner);

} // namespace proof
} // namespace torchtrt_swish
