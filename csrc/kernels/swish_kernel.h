// The Swish-with-bias CUDA launchers: the only place the GPU math lives.
//
// Knows nothing of torch or TensorRT: raw pointers, element counts, the bias layout and a stream. The torch op
// (csrc/torch) and the TensorRT plugin (csrc/trt_plugin) both link the same compiled objects, so parity proven
// through the op on the GPU carries over to the plugin. One launcher per file: swish_forward.cu,
// swish_backward.cu, swish_backward_fused.cu (its planning in swish_backward_plan.h, its main kernels by strategy in
// swish_backward_rows_cols.cu and swish_backward_planes.cu; shared device code in swish_math.cuh,
// swish_backward_step.cuh, swish_backward_fused.cuh).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

#include "bias_layout.h"
#include "swish_types.h"

namespace torchtrt_swish {

//! y[i] = x[i] * sigmoid(x[i]) + bias[(i / spec.inner) % spec.channels] for i in [0, n).
//! x, bias and y are contiguous and of type dtype; n may exceed 2^31. Returns the launch error, if any.
cudaError_t launchSwishForward(DType dtype, void const* x, void const* bias, void* y, int64_t n, BiasSpec spec,
    cudaStream_t stream) noexcept;

//! dx[i] = g[i] * s * (1 + x[i] * (1 - s)) with s = sigmoid(x[i]): the fused input gradient, one pass.
cudaError_t launchSwishBackward(DType dtype, void const* grad, void const* x, void* dx, int64_t n,
    cudaStream_t stream) noexcept;

//! Scratch bytes launchSwishBackwardFused needs for this layout and these pointers' alignment, or 0 when it has no
//! fused path (n not a whole number of bias periods); then use launchSwishBackward plus a reduction.
size_t swishBackwardFusedWorkspace(DType dtype, int64_t n, BiasSpec spec, void const* grad, void const* x,
    void const* dx) noexcept;

//! dx as launchSwishBackward, plus dbias[c] = sum of grad over the elements whose bias is c (c < spec.channels),
//! from one read of grad and x. Accumulates in fp32 in a fixed order (deterministic). n > 0.
cudaError_t launchSwishBackwardFused(DType dtype, void const* grad, void const* x, void* dx, void* dbias, int64_t n,
    BiasSpec spec, void* workspace, size_t workspaceBytes, cudaStream_t stream) noexcept;

} // namespace torchtrt_swish
