"""Python side of torchtrt_swish::swish: fake (meta) kernels, autograd, and the public wrapper.

The schema and the real kernels live in C++ (csrc/torch); this module only registers what torch.compile,
torch.export and autograd need on top of them.
"""
from __future__ import annotations

import torch

_OPS = torch.ops.torchtrt_swish
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def _check_inputs(x: torch.Tensor, bias: torch.Tensor, what: str) -> None:
    """The C++ checks, restated with torch._check so fake tensors fail the same way as real ones."""
    ok = x.dtype in _FLOATS or (x.dtype == torch.float64 and x.device.type in ("cpu", "meta"))
    torch._check(ok, lambda: f"{what}: expected x of dtype float32, float16 or bfloat16 (or float64 on CPU), "
                             f"got {x.dtype} on {x.device}")
    torch._check(bias.dtype == x.dtype,
                 lambda: f"{what}: expected bias of the same dtype as x ({x.dtype}), got {bias.dtype}")
    torch._check(bias.device == x.device,
                 lambda: f"{what}: expected bias on the same device as x ({x.device}), got {bias.device}")
    torch._check(bias.dim() <= x.dim(),
                 lambda: f"{what}: expected bias broadcastable to x without changing x's shape, got bias "
                         f"{list(bias.shape)} for x {list(x.shape)}")
    off = x.dim() - bias.dim()
    for j, b in enumerate(bias.shape):
        xd = x.shape[j + off]
        torch._check(b == 1 or b == xd,
                     lambda: f"{what}: expected bias broadcastable to x without changing x's shape, got bias "
                             f"{list(bias.shape)} for x {list(x.shape)}")


@torch.library.register_fake("torchtrt_swish::swish")
def _swish_fake(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    _check_inputs(x, bias, "swish")
    return x.new_empty(x.shape)  # the kernels always return a contiguous tensor


@torch.library.register_fake("torchtrt_swish::swish_backward")
def _swish_backward_fake(grad: torch.Tensor, x: torch.Tensor, bias: torch.Tensor):
    _check_inputs(x, bias, "swish_backward")
    torch._check(grad.shape == x.shape,
                 lambda: f"swish_backward: expected grad of shape {list(x.shape)}, got {list(grad.shape)}")
    return x.new_empty(x.shape), bias.new_empty(bias.shape)


def _setup_context(ctx, inputs, output) -> None:
    x, bias = inputs
    ctx.save_for_backward(x, bias)


def _backward(ctx, grad: torch.Tensor):
    x, bias = ctx.saved_tensors
    dx, dbias = _OPS.swish_backward(grad, x, bias)
    return (dx if ctx.needs_input_grad[0] else None), (dbias if ctx.needs_input_grad[1] else None)


def _backward_setup_context(ctx, inputs, output) -> None:
    grad, x, bias = inputs
    ctx.save_for_backward(grad, x)


def _double_backward(ctx, grad_dx: torch.Tensor | None, grad_dbias: torch.Tensor | None):
    """Gradient of (dx, dbias) = swish_backward(g, x, b), written in differentiable torch ops.

    With f(x) = x * s(x): dx = g * f'(x), f' = s (1 + x (1 - s)), f'' = s (1 - s) (2 + x (1 - 2 s));
    dbias = g summed to bias's shape, so its gradient w.r.t. g is grad_dbias broadcast back to x's shape.
    """
    grad, x = ctx.saved_tensors
    s = torch.sigmoid(x)
    d_grad = d_x = None
    if ctx.needs_input_grad[0]:
        d_grad = torch.zeros_like(x)
        if grad_dx is not None:
            d_grad = d_grad + grad_dx * (s * (1 + x * (1 - s)))
        if grad_dbias is not None:
            d_grad = d_grad + grad_dbias.expand(x.shape)
    if ctx.needs_input_grad[1] and grad_dx is not None:
        d_x = grad_dx * grad * (s * (1 - s) * (2 + x * (1 - 2 * s)))
    return d_grad, d_x, None


torch.library.register_autograd("torchtrt_swish::swish", _backward, setup_context=_setup_context)
torch.library.register_autograd("torchtrt_swish::swish_backward", _double_backward,
                                setup_context=_backward_setup_context)


def swish(x: torch.Tensor, bias: torch.Tensor | float) -> torch.Tensor:
    """y = x * sigmoid(x) + bias through the compiled op; a Python number bias becomes a scalar tensor."""
    if not isinstance(bias, torch.Tensor):
        bias = torch.tensor(bias, dtype=x.dtype, device=x.device)
    return _OPS.swish.default(x, bias)
