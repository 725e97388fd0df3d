// The types of the kernels' public entry points (swish_kernel.h) besides the bias layout (bias_layout.h): what the
// torch op and the TensorRT plugin may see of csrc/kernels. Plain C++.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

namespace torchtrt_swish {

//! Element types every host supports. Math is always fp32; fp16/bf16 results are rounded once.
enum class DType : int32_t { kFLOAT32 = 0, kFLOAT16 = 1, kBFLOAT16 = 2 };

//! The DType of torch's name for it ("float32", "float16", "bfloat16"); false for any other name.
inline bool dtypeFromName(char const* name, DType& out)
{
    for (auto [text, t] : {std::pair{"float32", DType::kFLOAT32}, std::pair{"float16", DType::kFLOAT16},
             std::pair{"bfloat16", DType::kBFLOAT16}})
    {
        if (std::strcmp(name, text) == 0)
        {
            out = t;
            return true;
        }
    }
    return false;
}

} // namespace torchtrt_swish
