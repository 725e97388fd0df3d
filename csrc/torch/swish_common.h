// Input validation and bias preparation shared by the CPU and CUDA impls of torchtrt_swish::swish.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/sum_to_size.h>
#include <c10/util/Exception.h>

#include <vector>

#include "kernels/bias_layout.h"

namespace torchtrt_swish {

// Messages are assembled from strings only (std::to_string, c10::toString, Device::str): streaming integers
// through c10::str inside this library crashed in libstdc++'s num_put on the H200 image (torch 2.11, g++ 13).
inline std::string dims(at::IntArrayRef d)
{
    return shapeString(d.data(), static_cast<int32_t>(d.size()));
}

//! Inputs ready for a kernel: contiguous x, a contiguous bias the kernel can index with spec.
struct Prepared
{
    at::Tensor x;
    at::Tensor bias;
    BiasSpec spec;
};

inline void checkDtypes(at::Tensor const& x, at::Tensor const& bias, bool allowDouble, char const* what)
{
    auto const dt = x.scalar_type();
    bool const ok = dt == at::kFloat || dt == at::kHalf || dt == at::kBFloat16 || (allowDouble && dt == at::kDouble);
    TORCH_CHECK(ok, what, ": expected x of dtype float32, float16 or bfloat16", allowDouble ? " (or float64 on CPU)" : "",
        ", got ", c10::toString(dt), x.is_cuda() && dt == at::kDouble ? " (float64 is supported on CPU only)" : "");
    TORCH_CHECK(bias.scalar_type() == dt, what, ": expected bias of the same dtype as x (", c10::toString(dt),
        "), got ", c10::toString(bias.scalar_type()));
    TORCH_CHECK(bias.device() == x.device(), what, ": expected bias on the same device as x (", x.device().str(),
        "), got ", bias.device().str());
}

inline BiasClass classify(at::Tensor const& x, at::Tensor const& bias)
{
    auto const xs = x.sizes();
    auto const bs = bias.sizes();
    return classifyBias(xs.data(), static_cast<int32_t>(xs.size()), bs.data(), static_cast<int32_t>(bs.size()));
}

//! Validate (x, bias) and return contiguous tensors plus the bias spec; materializes non-periodic bias shapes.
inline Prepared prepare(at::Tensor const& x, at::Tensor const& bias, bool allowDouble)
{
    checkDtypes(x, bias, allowDouble, "swish");
    auto const xs = x.sizes();
    auto const bs = bias.sizes();
    BiasClass const cls = classify(x, bias);
    TORCH_CHECK(cls.broadcastable, "swish: expected bias broadcastable to x without changing x's shape, got bias ",
        dims(bs), " for x ", dims(xs), ": ", cls.why);
    Prepared p;
    p.x = x.contiguous();
    if (cls.periodic)
    {
        p.bias = bias.contiguous();
        p.spec = cls.spec;
    }
    else
    {
        // Broadcastable but not one block: rare, so pay one materialization rather than a strided kernel.
        p.bias = bias.expand(xs).contiguous();
        p.spec = BiasSpec{std::max<int64_t>(x.numel(), 1), 1};
    }
    return p;
}

//! dbias = g summed to bias's shape with PyTorch's own reduction (fp32 accumulation for half types): the CUDA impl's
//! fallback where no fused kernel covers the layout. The CPU impl has its own (ATen's CPU sum depends on the thread
//! count).
inline at::Tensor biasGrad(at::Tensor const& grad, at::Tensor const& bias)
{
    at::Tensor db = grad.sum_to_size(bias.sizes()).contiguous();
    // A full-shape bias makes sum_to_size a no-op view: outputs must never alias inputs.
    return db.is_alias_of(grad) ? db.clone() : db;
}

inline void checkBackward(at::Tensor const& grad, at::Tensor const& x, at::Tensor const& bias, bool allowDouble)
{
    checkDtypes(x, bias, allowDouble, "swish_backward");
    TORCH_CHECK(grad.scalar_type() == x.scalar_type(), "swish_backward: expected grad of dtype ",
        c10::toString(x.scalar_type()), ", got ", c10::toString(grad.scalar_type()));
    TORCH_CHECK(grad.device() == x.device(), "swish_backward: expected grad on ", x.device().str(), ", got ",
        grad.device().str());
    TORCH_CHECK(grad.sizes() == x.sizes(), "swish_backward: expected grad of shape ", dims(x.sizes()), ", got ",
        dims(grad.sizes()));
}

} // namespace torchtrt_swish
