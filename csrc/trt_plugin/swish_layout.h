// The plugin's bias layout checks: the shared rule (classifyBias, csrc/kernels/bias_layout.h) plus what only the
// plugin needs, its policy (named layouts only) and build-time dimensions that are unknown within profile ranges.
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>
#include <string>

#include "kernels/bias_layout.h"

namespace torchtrt_swish {
namespace plugin {

//! Whether the plugin runs a bias so classified: broadcastable, kernel-indexable and a named layout (no block).
bool acceptedLayout(BiasClass const& c) noexcept;

//! Why the plugin rejects bias shape b (rank br) on x shape x (rank xr), classified as c.
std::string layoutRejection(BiasClass const& c, int64_t const* x, int32_t xr, int64_t const* b, int32_t br);

//! "[2, 3]", or "<invalid rank N>".
std::string dimsString(nvinfer1::Dims const& d);

//! A tensor's build-time dimensions (-1 unknown) and, when known, its optimization-profile bounds.
struct TensorRanges
{
    nvinfer1::Dims dims{};
    nvinfer1::Dims const* min{nullptr};
    nvinfer1::Dims const* max{nullptr};
};

//! What the ranges allow: some runtime shape accepted, every one accepted, and the first rejection's reason.
struct LayoutVerdict
{
    bool anyAccepted{false};
    bool allAccepted{true};
    std::string why;
};

//! Judge every runtime shape within the ranges by classifyBias on representative concrete shapes.
LayoutVerdict assessLayout(TensorRanges const& x, TensorRanges const& b);

} // namespace plugin
} // namespace torchtrt_swish
