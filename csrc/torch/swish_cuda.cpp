// CUDA implementation of torchtrt_swish::swish: validation here, math in csrc/kernels (no schema here).
//
// A .cpp, not a .cu: only the kernel object goes through nvcc, so torch headers never slow the CUDA build.
#include <c10/cuda/CUDAStream.h>
#include <ATen/cuda/EmptyTensor.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/swish_kernel.h"
#include "swish_common.h"

namespace torchtrt_swish {
namespace {

DType toDType(at::ScalarType t)
{
    switch (t)
    {
    case at::kFloat: return DType::kFLOAT32;
    case at::kHalf: return DType::kFLOAT16;
    case at::kBFloat16: return DType::kBFLOAT16;
    default: TORCH_CHECK(false, "swish: unsupported CUDA dtype ", c10::toString(t));
    }
}

//! An uninitialized CUDA tensor, allocated without a trip through the dispatcher (ATen's own kernels allocate their
//! outputs this way too; a dispatched at::empty is an op of its own, host time on every call).
at::Tensor emptyCuda(at::IntArrayRef sizes, at::TensorOptions const& like, at::MemoryFormat fmt)
{
    return at::detail::empty_cuda(sizes, like.dtype().toScalarType(), like.device(), fmt);
}

void checkLaunch(cudaError_t err, char const* what)
{
    TORCH_CHECK(err == cudaSuccess, what, ": CUDA launch failed: ", cudaGetErrorString(err));
}

at::Tensor swishCuda(at::Tensor const& x, at::Tensor const& bias)
{
    Prepared const p = prepare(x, bias, /*allowDouble=*/false);
    c10::cuda::CUDAGuard const guard(p.x.device());
    at::Tensor y = emptyCuda(p.x.sizes(), p.x.options(), p.format);
    checkLaunch(launchSwishForward(toDType(p.x.scalar_type()), p.x.const_data_ptr(), p.bias.const_data_ptr(),
                    y.mutable_data_ptr(), p.x.numel(), p.spec, c10::cuda::getCurrentCUDAStream()),
        "swish");
    return y;
}

std::tuple<at::Tensor, at::Tensor> swishBackwardCuda(at::Tensor const& grad, at::Tensor const& x,
    at::Tensor const& bias)
{
    BiasClass const checked = checkBackward(grad, x, bias, /*allowDouble=*/false);
    c10::cuda::CUDAGuard const guard(x.device());
    // dx keeps x's memory format; the kernels stream memory, so g is laid out like x (a copy only if it is not).
    at::MemoryFormat const fmt = keptFormat(x);
    at::Tensor const g = grad.contiguous(fmt);
    at::Tensor const xc = x.contiguous(fmt);
    at::Tensor dx = emptyCuda(xc.sizes(), xc.options(), fmt);
    int64_t const n = xc.numel();
    int64_t const rank = x.dim();
    DType const dt = toDType(xc.scalar_type());
    std::vector<int64_t> const kb = kernelSizes(bias.sizes(), rank, fmt);
    BiasClass const cls = kernelClass(checked, fmt, kernelSizes(x.sizes(), rank, fmt), kb);
    if (n > 0 && cls.periodic)
    {
        // One pass over (g, x) for dx and dbias when the layout has a fused kernel.
        size_t const ws = swishBackwardFusedWorkspace(dt, n, cls.spec, g.const_data_ptr(), xc.const_data_ptr(),
            dx.const_data_ptr());
        if (ws > 0)
        {
            at::Tensor scratch = emptyCuda(
                {static_cast<int64_t>((ws + 3) / 4)}, xc.options().dtype(at::kFloat), at::MemoryFormat::Contiguous);
            bool const inBiasOrder = kernelOrderIsBiasOrder(bias.sizes(), rank, fmt);
            at::Tensor dbias = emptyCuda(inBiasOrder ? bias.sizes() : at::IntArrayRef(kb), bias.options(),
                at::MemoryFormat::Contiguous);
            checkLaunch(launchSwishBackwardFused(dt, g.const_data_ptr(), xc.const_data_ptr(), dx.mutable_data_ptr(),
                            dbias.mutable_data_ptr(), n, cls.spec, scratch.mutable_data_ptr(), ws,
                            c10::cuda::getCurrentCUDAStream()),
                "swish_backward");
            return {dx, inBiasOrder ? dbias : fromKernelView(dbias, bias, fmt)};
        }
    }
    checkLaunch(launchSwishBackward(toDType(xc.scalar_type()), g.const_data_ptr(), xc.const_data_ptr(),
                    dx.mutable_data_ptr(), xc.numel(), c10::cuda::getCurrentCUDAStream()),
        "swish_backward");
    return {dx, biasGrad(g, bias)};
}

} // namespace

TORCH_LIBRARY_IMPL(torchtrt_swish, CUDA, m)
{
    m.impl("swish", &swishCuda);
    m.impl("swish_backward", &swishBackwardCuda);
}

} // namespace torchtrt_swish
