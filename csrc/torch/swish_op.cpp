// The torchtrt_swish::swish schema (the only place it is defined) and its CPU implementation.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <Python.h>
#include <torch/library.h>

#include "kernels/swish_cpu.h"
#include "swish_common.h"

namespace torchtrt_swish {
namespace {

// Below this many elements per task, threading costs more than it saves.
constexpr int64_t kGRAIN = 32768;

at::Tensor swishCpu(at::Tensor const& x, at::Tensor const& bias)
{
    TORCH_CHECK(x.device().is_cpu(), "swish: CPU kernel called with x on ", x.device().str());
    Prepared const p = prepare(x, bias, /*allowDouble=*/true);
    at::Tensor y = at::empty(p.x.sizes(), p.x.options());
    int64_t const n = p.x.numel();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.x.scalar_type(), "swish_cpu", [&] {
        using Acc = at::opmath_type<scalar_t>;
        scalar_t const* xp = p.x.const_data_ptr<scalar_t>();
        scalar_t const* bp = p.bias.const_data_ptr<scalar_t>();
        scalar_t* yp = y.mutable_data_ptr<scalar_t>();
        at::parallel_for(0, n, kGRAIN, [&](int64_t begin, int64_t end) {
            cpu::swishForwardRange<scalar_t, Acc>(xp, bp, yp, begin, end, p.spec);
        });
    });
    return y;
}

std::tuple<at::Tensor, at::Tensor> swishBackwardCpu(at::Tensor const& grad, at::Tensor const& x, at::Tensor const& bias)
{
    checkBackward(grad, x, bias, /*allowDouble=*/true);
    at::Tensor const g = grad.contiguous();
    at::Tensor const xc = x.contiguous();
    at::Tensor dx = at::empty(xc.sizes(), xc.options());
    int64_t const n = xc.numel();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, xc.scalar_type(), "swish_backward_cpu", [&] {
        using Acc = at::opmath_type<scalar_t>;
        scalar_t const* gp = g.const_data_ptr<scalar_t>();
        scalar_t const* xp = xc.const_data_ptr<scalar_t>();
        scalar_t* dp = dx.mutable_data_ptr<scalar_t>();
        at::parallel_for(0, n, kGRAIN,
            [&](int64_t begin, int64_t end) { cpu::swishBackwardRange<scalar_t, Acc>(gp, xp, dp, begin, end); });
    });
    return {dx, biasGrad(g, bias)};
}

} // namespace

TORCH_LIBRARY(torchtrt_swish, m)
{
    // pt2_compliant: safe under torch.compile / torch.export (fake kernels and autograd live in ops.py).
    m.def("swish(Tensor x, Tensor bias) -> Tensor", {at::Tag::pt2_compliant_tag});
    m.def("swish_backward(Tensor grad, Tensor x, Tensor bias) -> (Tensor, Tensor)", {at::Tag::pt2_compliant_tag});
}

TORCH_LIBRARY_IMPL(torchtrt_swish, CPU, m)
{
    m.impl("swish", &swishCpu);
    m.impl("swish_backward", &swishBackwardCpu);
}

} // namespace torchtrt_swish

// A real (empty) Python module so `import torchtrt_swish._C` loads the library and runs the registrations above.
extern "C" PyObject* PyInit__C(void)
{
    static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "_C", "torchtrt_swish compiled ops", -1, nullptr};
    return PyModule_Create(&def);
}
