// The Swish-with-bias CUDA launchers: the only place the GPU math lives.
//
// Knows nothing of torch or TensorRT: raw pointers, element counts, the bias layout and a stream. The torch op
// (csrc/torch) and the TensorRT plugin (csrc/trt_plugin) both link the same compiled object, so parity proven
// through the op on the GPU carries over to the plugin.
#pragma once

#include <cstdint>
#include <cuda_runtime_api.h>

#include "bias_layout.h"

namespace torchtrt_swish {

//! Element types every host supports. Math is always fp32; fp16/bf16 results are rounded once.
enum class DType : int32_t { kFLOAT32 = 0, kFLOAT16 = 1, kBFLOAT16 = 2 };

//! y[i] = x[i] * sigmoid(x[i]) + bias[(i / spec.inner) % spec.channels] for i in [0, n).
//! x, bias and y are contiguous and of type dtype; n may exceed 2^31. Returns the launch error, if any.
cudaError_t launchSwishForward(DType dtype, void const* x, void const* bias, void* y, int64_t n, BiasSpec spec,
    cudaStream_t stream) noexcept;

//! dx[i] = g[i] * s * (1 + x[i] * (1 - s)) with s = sigmoid(x[i]): the fused input gradient, one pass.
cudaError_t launchSwishBackward(DType dtype, void const* grad, void const* x, void* dx, int64_t n,
    cudaStream_t stream) noexcept;

} // namespace torchtrt_swish
