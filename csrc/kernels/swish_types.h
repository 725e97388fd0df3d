// The types of the kernels' public entry points (swish_kernel.h) besides the bias layout (bias_layout.h): what the
// torch op and the TensorRT plugin may see of csrc/kernels. Plain C++.
#pragma once

#include <cstdint>

namespace torchtrt_swish {

//! Element types every host supports. Math is always fp32; fp16/bf16 results are rounded once.
enum class DType : int32_t { kFLOAT32 = 0, kFLOAT16 = 1, kBFLOAT16 = 2 };

} // namespace torchtrt_swish
