"""Compiled autograd (torch._dynamo.compiled_autograd) through the op's C++ autograd nodes.

With an eager forward, compiled autograd walks the op's own graph nodes (csrc/torch/swish_autograd.cpp) and needs
their compiled_args / apply_with_saved; with a compiled forward it meets AOTAutograd's node instead. Both must give
the fp64 reference's dx and dbias, and the compiled-autograd graph must hold the op's backward (so inductor can
decompose and fuse it), not run it outside the graph.
"""
from __future__ import annotations

import pytest
import torch
from torch._dynamo.backends.common import aot_autograd
from torch._dynamo.utils import counters
from torch._inductor.utils import run_and_get_code

import torchtrt_swish
from torchtrt_swish.dtypes import tolerance

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
C = 3


@pytest.fixture(autouse=True)
def _fresh_compile_state():
    """Each test compiles anew (dynamo's and compiled autograd's caches cleared) and counts only its own captures."""
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()


class Module(torch.nn.Module):
    """Both public entries: EfficientSwish with a per-channel bias, then swish with a bias over the last dim."""

    def __init__(self, width: int):
        super().__init__()
        self.act = torchtrt_swish.EfficientSwish(bias_shape=(C, 1, 1))
        self.bias = torch.nn.Parameter(torch.linspace(-0.5, 0.5, width))
        with torch.no_grad():
            self.act.bias.copy_(torch.linspace(-1.0, 1.0, C).view(C, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """swish(swish(x, b1), b2): two op uses whose grads chain through each other.

        Nothing in between: a Python scalar saved by an ATen node (x * 0.5) made torch 2.11's inductor call .item() on
        the float that compiled autograd passes for it (seen on CUDA; the scalar is MulBackward0's, not the op's)."""
        return torchtrt_swish.swish(self.act(x), self.bias.to(x.dtype))


def _inputs(device: str, dtype: torch.dtype):
    """(x, g) with x spread over swish's interesting range (negative tail, minimum, linear part)."""
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(2, C, 4, 5, generator=gen, dtype=torch.float64) * 4).to(device=device, dtype=dtype)
    g = torch.randn(2, C, 4, 5, generator=gen, dtype=torch.float64).to(device=device, dtype=dtype)
    return x.requires_grad_(), g


def _reference_grads(m: Module, x: torch.Tensor, g: torch.Tensor):
    """dx, d(act.bias), d(bias) of the module's formula x*sigmoid(x)+b, in fp64 PyTorch on the CPU."""
    xd = x.detach().to("cpu", torch.float64).requires_grad_()
    b1 = m.act.bias.detach().to("cpu", torch.float64).requires_grad_()
    b2 = m.bias.detach().to("cpu", torch.float64).requires_grad_()
    # The module runs in x's dtype: its biases are rounded to it first.
    b1r, b2r = b1.to(x.dtype).to(torch.float64), b2.to(x.dtype).to(torch.float64)
    h = xd * torch.sigmoid(xd) + b1r
    y = h * torch.sigmoid(h) + b2r
    return torch.autograd.grad(y, (xd, b1, b2), g.to("cpu", torch.float64))


def _assert_grads_match_reference(m: Module, x: torch.Tensor, g: torch.Tensor) -> None:
    """x.grad and both bias grads within the dtype's tolerance of the fp64 reference."""
    atol, rtol = tolerance(x.dtype)
    want = _reference_grads(m, x, g)
    for name, got, ref in zip(("dx", "d act.bias", "d bias"), (x.grad, m.act.bias.grad, m.bias.grad), want):
        assert got is not None, f"{name}: no grad"
        torch.testing.assert_close(got.detach().to("cpu", torch.float64), ref, atol=atol, rtol=rtol,
                                   msg=lambda s, n=name: f"{n} ({x.dtype}): {s}")


class GraphRecorder:
    """A torch.compile backend that records the ATen graphs AOTAutograd hands it and runs them as they are."""

    def __init__(self):
        self.graphs: list[torch.fx.GraphModule] = []
        self.backend = aot_autograd(fw_compiler=self._record)

    def _record(self, gm: torch.fx.GraphModule, example_inputs):
        self.graphs.append(gm)
        return gm.forward

    def targets(self) -> list:
        """The call_function targets of every recorded graph."""
        return [n.target for gm in self.graphs for n in gm.graph.nodes if n.op == "call_function"]


def _captures() -> int:
    return counters["compiled_autograd"]["captures"]


# ----------------------------------------------------------------------------- eager forward


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_eager_forward_backward_graph_holds_the_op(device, dtype):
    """The op's grad nodes become swish_backward calls in the compiled-autograd graph, with the reference's grads."""
    m = Module(5).to(device)
    x, g = _inputs(device, dtype)
    y = m(x)
    rec = GraphRecorder()
    with torch._dynamo.compiled_autograd._enable(torch.compile(backend=rec.backend)):
        y.backward(g)
    assert _captures() == 1
    ops = rec.targets()
    assert ops.count(torch.ops.torchtrt_swish.swish_backward.default) == 2, ops
    _assert_grads_match_reference(m, x, g)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_eager_forward_backward_with_inductor(device, dtype):
    """With inductor, the op's backward is decomposed into the generated kernels (no call to our op is left)."""
    m = Module(5).to(device)
    x, g = _inputs(device, dtype)
    y = m(x)

    def backward():
        with torch._dynamo.compiled_autograd._enable(torch.compile):
            y.backward(g)

    _, codes = run_and_get_code(backward)
    assert _captures() == 1
    assert codes, "inductor generated no code for the compiled-autograd graph"
    for code in codes:
        assert "torch.ops.torchtrt_swish" not in code, code  # kernels may still name it in comments
    _assert_grads_match_reference(m, x, g)


@pytest.mark.parametrize("device", DEVICES)
def test_config_flag_backward_of_eager_forward(device):
    """The documented switch (torch._dynamo.config.compiled_autograd) applies to backward inside torch.compile."""
    m = Module(5).to(device)
    x, g = _inputs(device, torch.float32)
    rec = GraphRecorder()
    with torch._dynamo.config.patch(compiled_autograd=True):
        y = m(x)

        @torch.compile(backend=rec.backend)
        def backward(y, g):
            y.backward(g)

        backward(y, g)
    assert _captures() == 1
    assert torch.ops.torchtrt_swish.swish_backward.default in rec.targets(), rec.targets()
    _assert_grads_match_reference(m, x, g)


def test_second_backward_reuses_the_compiled_graph():
    """A second backward of the same structure hits compiled autograd's cache; its grads are still the reference's."""
    m = Module(5)
    rec = GraphRecorder()
    x, g = _inputs("cpu", torch.float32)
    with torch._dynamo.compiled_autograd._enable(torch.compile(backend=rec.backend)):
        m(x).backward(g)
        x2, g2 = x.detach().neg().requires_grad_(), g * 2  # new values of the same shapes
        m.zero_grad()
        m(x2).backward(g2)
    assert _captures() == 1
    # Checked outside the context: the reference's own backward would be a second capture.
    _assert_grads_match_reference(m, x2, g2)


# ----------------------------------------------------------------------------- compiled forward


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_forward_and_compiled_autograd(device, dtype):
    """A compiled training step (forward and backward in torch.compile) with the compiled-autograd switch on."""
    m = Module(5).to(device)
    x, g = _inputs(device, dtype)
    with torch._dynamo.config.patch(compiled_autograd=True):

        @torch.compile
        def step(x, g):
            m(x).backward(g)

        step(x, g)
    assert _captures() == 1
    _assert_grads_match_reference(m, x, g)


# ----------------------------------------------------------------------------- double backward


@pytest.mark.parametrize("device", DEVICES)
def test_double_backward_node_under_compiled_autograd(device):
    """A gradient penalty: the first backward (eager, create_graph) builds swish_backward's own grad node, which
    compiled autograd then traces: d/dx sum(f'(x)^2) = 2 f'(x) f''(x), against fp64 autograd."""
    x, _ = _inputs(device, torch.float32)
    b = torch.zeros(5, device=device, requires_grad=True)
    (dx,) = torch.autograd.grad(torchtrt_swish.swish(x, b).sum(), x, create_graph=True)
    assert dx.grad_fn is not None and dx.grad_fn.name() == "torchtrt_swish::SwishBackwardBackward"
    rec = GraphRecorder()
    with torch._dynamo.compiled_autograd._enable(torch.compile(backend=rec.backend)):
        (dx ** 2).sum().backward()
    assert _captures() == 1
    ops = rec.targets()
    assert torch.ops.aten.sigmoid.default in ops, ops  # the node's formula, traced into the graph
    xd = x.detach().to("cpu", torch.float64).requires_grad_()
    (dxd,) = torch.autograd.grad((xd * torch.sigmoid(xd)).sum(), xd, create_graph=True)
    (want,) = torch.autograd.grad((dxd ** 2).sum(), xd)
    atol, rtol = tolerance(torch.float32)
    torch.testing.assert_close(x.grad.to("cpu", torch.float64), want, atol=atol, rtol=rtol)
