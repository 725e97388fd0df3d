// Input validation and bias preparation shared by the CPU and CUDA impls of torchtrt_swish::swish.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
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

//! The memory format the kernels keep: x's own when x is dense channels_last (3d) and not also contiguous, else
//! contiguous. Restated in torchtrt_swish/ops.py (_kept_format): the fake kernels must report the same strides.
inline at::MemoryFormat keptFormat(at::Tensor const& x)
{
    if (x.is_contiguous())
    {
        return at::MemoryFormat::Contiguous;
    }
    if (x.dim() == 4 && x.is_contiguous(at::MemoryFormat::ChannelsLast))
    {
        return at::MemoryFormat::ChannelsLast;
    }
    if (x.dim() == 5 && x.is_contiguous(at::MemoryFormat::ChannelsLast3d))
    {
        return at::MemoryFormat::ChannelsLast3d;
    }
    return at::MemoryFormat::Contiguous;
}

//! x's dims in memory order for fmt: channels last moves dim 1 to the end.
inline std::vector<int64_t> memoryOrder(int64_t rank, at::MemoryFormat fmt)
{
    std::vector<int64_t> order;
    for (int64_t d = 0; d < rank; ++d)
    {
        if (fmt == at::MemoryFormat::Contiguous || d != 1)
        {
            order.push_back(d);
        }
    }
    if (fmt != at::MemoryFormat::Contiguous)
    {
        order.push_back(1);
    }
    return order;
}

//! t (x dense in fmt, or a bias broadcastable to an x of rank xRank) with its dims in fmt's memory order, so the
//! kernels, which stream flat memory, see x as contiguous (channels last: [N, H, W, C], the bias a last-dim one).
inline at::Tensor kernelView(at::Tensor const& t, int64_t xRank, at::MemoryFormat fmt)
{
    if (fmt == at::MemoryFormat::Contiguous)
    {
        return t;
    }
    std::vector<int64_t> shape(static_cast<size_t>(xRank - t.dim()), 1);
    shape.insert(shape.end(), t.sizes().begin(), t.sizes().end());
    return t.reshape(shape).permute(memoryOrder(xRank, fmt));
}

//! The sizes of kernelView(t, xRank, fmt), computed without making the view (each view is a dispatched op, host time
//! on every call).
inline std::vector<int64_t> kernelSizes(at::IntArrayRef sizes, int64_t xRank, at::MemoryFormat fmt)
{
    // Callers checked the broadcast (checkBroadcast): a longer shape would make a vector of negative size.
    TORCH_INTERNAL_ASSERT(static_cast<int64_t>(sizes.size()) <= xRank, "kernelSizes: rank ", sizes.size(),
        " over x's rank ", xRank);
    std::vector<int64_t> padded(static_cast<size_t>(xRank - static_cast<int64_t>(sizes.size())), 1);
    padded.insert(padded.end(), sizes.begin(), sizes.end());
    if (fmt == at::MemoryFormat::Contiguous)
    {
        return padded;
    }
    std::vector<int64_t> out;
    for (int64_t const d : memoryOrder(xRank, fmt))
    {
        out.push_back(padded[static_cast<size_t>(d)]);
    }
    return out;
}

//! Whether kernelView(bias, xRank, fmt) lists bias's elements in bias's own row-major order: the permutation moves
//! only dims of size 1 past the others ([C, 1, 1] under channels last). Then bias itself, contiguous, is the kernel's
//! bias, and a contiguous dbias in bias's shape is the kernel's dbias.
inline bool kernelOrderIsBiasOrder(at::IntArrayRef biasSizes, int64_t xRank, at::MemoryFormat fmt)
{
    if (fmt == at::MemoryFormat::Contiguous)
    {
        return true;
    }
    int64_t const off = xRank - static_cast<int64_t>(biasSizes.size());
    int64_t last = -1;
    for (int64_t const d : memoryOrder(xRank, fmt))
    {
        if (d >= off && biasSizes[static_cast<size_t>(d - off)] != 1)
        {
            if (d < last)
            {
                return false;
            }
            last = d;
        }
    }
    return true;
}

//! A dbias computed in kernelView(bias) order, back in bias's own shape, contiguous.
inline at::Tensor fromKernelView(at::Tensor const& db, at::Tensor const& bias, at::MemoryFormat fmt)
{
    if (fmt == at::MemoryFormat::Contiguous)
    {
        return db;
    }
    std::vector<int64_t> const order = memoryOrder(db.dim(), fmt);
    std::vector<int64_t> inverse(order.size());
    for (size_t i = 0; i < order.size(); ++i)
    {
        inverse[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
    }
    return db.permute(inverse).reshape(bias.sizes()).contiguous();
}

//! Inputs ready for a kernel: x dense in format, a contiguous bias the kernel can index with spec in x's memory
//! order.
struct Prepared
{
    at::Tensor x;
    at::Tensor bias;
    BiasSpec spec;
    at::MemoryFormat format{at::MemoryFormat::Contiguous};

    //! An uninitialized tensor shaped and laid out like x, for the kernel's output.
    at::Tensor emptyLikeX() const
    {
        return at::empty(x.sizes(), x.options().memory_format(format));
    }
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

inline BiasClass classify(at::IntArrayRef xs, at::IntArrayRef bs)
{
    return classifyBias(xs.data(), static_cast<int32_t>(xs.size()), bs.data(), static_cast<int32_t>(bs.size()));
}

inline BiasClass classify(at::Tensor const& x, at::Tensor const& bias)
{
    return classify(x.sizes(), bias.sizes());
}

//! bias's layout against x; refuses, for the forward and the backward alike, a bias that does not broadcast to x
//! without changing its shape.
inline BiasClass checkBroadcast(at::Tensor const& x, at::Tensor const& bias, char const* what)
{
    BiasClass checked = classify(x, bias);
    TORCH_CHECK(checked.broadcastable, what, ": expected bias broadcastable to x without changing x's shape, got bias ",
        dims(bias.sizes()), " for x ", dims(x.sizes()), ": ", checked.why);
    return checked;
}

//! The layout of the kernels' (x, bias) views in memory format fmt: the checked class itself when that order is x's.
inline BiasClass kernelClass(BiasClass const& checked, at::MemoryFormat fmt, at::IntArrayRef kx, at::IntArrayRef kb)
{
    return fmt == at::MemoryFormat::Contiguous ? checked : classify(kx, kb);
}

//! Validate (x, bias) and return x dense in keptFormat(x) plus a bias and spec in x's memory order; materializes
//! non-periodic bias shapes.
inline Prepared prepare(at::Tensor const& x, at::Tensor const& bias, bool allowDouble)
{
    checkDtypes(x, bias, allowDouble, "swish");
    BiasClass const checked = checkBroadcast(x, bias, "swish");
    Prepared p;
    p.format = keptFormat(x);
    p.x = x.contiguous(p.format);
    int64_t const rank = x.dim();
    std::vector<int64_t> const kx = kernelSizes(x.sizes(), rank, p.format);
    BiasClass const cls = kernelClass(checked, p.format, kx, kernelSizes(bias.sizes(), rank, p.format));
    if (cls.periodic)
    {
        p.bias = kernelOrderIsBiasOrder(bias.sizes(), rank, p.format) ? bias.contiguous()
                                                                      : kernelView(bias, rank, p.format).contiguous();
        p.spec = cls.spec;
    }
    else
    {
        // Broadcastable but not one block: rare, so pay one materialization rather than a strided kernel.
        p.bias = kernelView(bias, rank, p.format).expand(kx).contiguous();
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

//! Validate (grad, x, bias); returns bias's layout against x (checkBroadcast).
inline BiasClass checkBackward(at::Tensor const& grad, at::Tensor const& x, at::Tensor const& bias, bool allowDouble)
{
    checkDtypes(x, bias, allowDouble, "swish_backward");
    TORCH_CHECK(grad.scalar_type() == x.scalar_type(), "swish_backward: expected grad of dtype ",
        c10::toString(x.scalar_type()), ", got ", c10::toString(grad.scalar_type()));
    TORCH_CHECK(grad.device() == x.device(), "swish_backward: expected grad on ", x.device().str(), ", got ",
        grad.device().str());
    TORCH_CHECK(grad.sizes() == x.sizes(), "swish_backward: expected grad of shape ", dims(x.sizes()), ", got ",
        dims(grad.sizes()));
    return checkBroadcast(x, bias, "swish_backward");
}

} // namespace torchtrt_swish
