"""The op survives torch.export (one node per use, no decomposition) and torch.compile (no graph breaks, and
inductor sees its math so it fuses with its neighbours)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

import torchtrt_swish
from samples import reference

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]


class TwoUses(nn.Module):
    """Two op uses with different bias layouts, so node counting is meaningful."""

    def __init__(self):
        super().__init__()
        self.a = torchtrt_swish.EfficientSwish(0.5, bias_shape=(4, 1, 1))
        self.b = torchtrt_swish.EfficientSwish(-1.0)

    def forward(self, x):
        return self.b(self.a(x) * 2)


def _swish_nodes(gm: torch.fx.GraphModule):
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target == torch.ops.torchtrt_swish.swish.default]


def test_export_keeps_one_node_per_use():
    ep = torch.export.export(TwoUses(), (torch.randn(2, 4, 5, 5),))
    assert len(_swish_nodes(ep.graph_module)) == 2
    # No decomposition into sigmoid/mul/add.
    targets = {str(n.target) for n in ep.graph_module.graph.nodes if n.op == "call_function"}
    assert not any("sigmoid" in t for t in targets), targets


def test_export_after_run_decompositions_keeps_op():
    ep = torch.export.export(torchtrt_swish.Net(), (torch.randn(1, 1, 5, 5),)).run_decompositions()
    assert len(_swish_nodes(ep.graph_module)) == 1


def test_export_with_dynamic_batch_runs_other_sizes():
    batch = torch.export.Dim("batch", min=1, max=64)
    m = TwoUses()
    ep = torch.export.export(m, (torch.randn(2, 4, 5, 5),), dynamic_shapes={"x": {0: batch}})
    x = torch.randn(7, 4, 5, 5)
    torch.testing.assert_close(ep.module()(x), m(x))


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_dynamic_forward_and_backward(device):
    torch._dynamo.reset()
    m = TwoUses().to(device)
    cm = torch.compile(m, fullgraph=True, dynamic=True)
    for n in (2, 3, 5):  # several sizes: one dynamic graph, no recompiles into breaks
        x = torch.randn(n, 4, 5, 5, device=device, requires_grad=True)
        y = cm(x)
        y.sum().backward()
        x2 = x.detach().clone().requires_grad_()
        m.zero_grad()
        y2 = m(x2)
        y2.sum().backward()
        torch.testing.assert_close(y, y2)
        torch.testing.assert_close(x.grad, x2.grad)


def test_compile_counts_no_graph_breaks():
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(TwoUses())(torch.randn(2, 4, 5, 5))
    assert explanation.graph_break_count == 0
    assert explanation.graph_count == 1


def test_seed_net_forward_backward_against_reference():
    net = torchtrt_swish.Net()
    x = torch.randn(1, 1, 5, 5, dtype=torch.float64)
    y = net.double()(x)
    # conv with the identity-diagonal kernel = sum of the three diagonal neighbours
    conv = x[:, :, 0:3, 0:3] + x[:, :, 1:4, 1:4] + x[:, :, 2:5, 2:5]
    torch.testing.assert_close(y, reference(conv, torch.tensor([3.15], dtype=torch.float64)))
    y.sum().backward()
    assert net.act.bias.grad.item() == pytest.approx(9.0)  # d(sum y)/db = number of outputs (3x3)


def test_efficient_swish_per_channel_bias_learns():
    m = torchtrt_swish.EfficientSwish(0.0, bias_shape=(3, 1, 1))
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    x = torch.randn(4, 3, 2, 2)
    target = x * torch.sigmoid(x) + torch.tensor([1.0, -2.0, 0.5]).view(3, 1, 1)
    for _ in range(60):
        opt.zero_grad()
        loss = ((m(x) - target) ** 2).mean()
        loss.backward()
        opt.step()
    torch.testing.assert_close(m.bias.detach().view(3), torch.tensor([1.0, -2.0, 0.5]), atol=1e-3, rtol=0)


# ----------------------------------------------------------------------------- inductor fuses, export keeps the node


def _compiled_code(fn, *args):
    """(result, generated source of every graph compiled while running fn(*args) and its backward)."""
    from torch._inductor.utils import run_and_get_code

    def step():
        out = fn(*args)
        out.sum().backward()
        return out

    return run_and_get_code(step)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_inductor_fuses_swish_with_neighbours_forward_and_backward(dtype):
    """With the default backend the op is decomposed (ops.register_inductor_decompositions): the generated code
    calls neither swish nor swish_backward, the forward is one fused kernel with the mul/add around it, and the
    results match eager. Fails if a torch release stops reading inductor's decomposition table."""
    torch._dynamo.reset()
    b = torch.linspace(-1, 1, 4, dtype=dtype).view(4, 1, 1).requires_grad_()

    def f(x):
        return torchtrt_swish.swish(x * 2 + 1, b) * 3

    x = torch.randn(2, 4, 5, 5, dtype=dtype, requires_grad=True)
    y, codes = _compiled_code(torch.compile(f, fullgraph=True, dynamic=True), x)
    assert len(codes) == 2, "expected a forward and a backward graph"
    for code in codes:
        assert "torch.ops.torchtrt_swish" not in code, code
    assert codes[0].count("async_compile.cpp_pybinding(") == 1, codes[0]
    x_grad, b_grad = x.grad.clone(), b.grad.clone()
    x.grad = b.grad = None
    y_eager = f(x)
    y_eager.sum().backward()
    tol = {torch.float32: 1e-5, torch.bfloat16: 2e-2}[dtype]
    torch.testing.assert_close(y, y_eager, rtol=tol, atol=tol)
    torch.testing.assert_close(x_grad, x.grad, rtol=tol, atol=tol)
    torch.testing.assert_close(b_grad, b.grad, rtol=tol, atol=5 * tol * x.numel() ** 0.5)


def test_inductor_decomposition_also_after_an_earlier_compile():
    """Something compiled before the op's first trace already built inductor's cached table; the op must still be
    decomposed (a fresh process, so the registration really happens after that first compile)."""
    script = textwrap.dedent("""
        import torch, torchtrt_swish
        from torch._inductor.utils import run_and_get_code
        torch.compile(lambda t: torch.sin(t) + 1)(torch.randn(8))
        assert not torchtrt_swish.ops._inductor_decompositions_registered
        f = torch.compile(lambda t: torchtrt_swish.swish(t, torch.ones(1)) * 2)
        _, codes = run_and_get_code(f, torch.randn(8))
        assert codes and all("torch.ops.torchtrt_swish" not in c for c in codes), codes
        print("decomposed")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "decomposed" in r.stdout, r.stdout + r.stderr


def test_export_keeps_one_node_per_use_with_inductor_decompositions_registered():
    """The inductor table is inductor's alone: export (and Torch-TensorRT, which builds its table from torch's
    ATen decompositions plus its own) still get one torchtrt_swish.swish node per use."""
    torchtrt_swish.ops.register_inductor_decompositions()
    op = torch.ops.torchtrt_swish.swish.default
    assert op not in torch._decomp.decomposition_table
    assert op not in torch.export.default_decompositions()
    ep = torch.export.export(TwoUses(), (torch.randn(2, 4, 5, 5),))
    assert len(_swish_nodes(ep.graph_module)) == 2
    assert len(_swish_nodes(ep.run_decompositions().graph_module)) == 2


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_inductor_fuses_swish_cuda(dtype):
    """The same on the GPU: Triton code without a call to our op, forward and backward, results as eager."""
    torch._dynamo.reset()
    b = torch.linspace(-1, 1, 8, device="cuda", dtype=dtype).view(8, 1, 1).requires_grad_()

    def f(x):
        return torchtrt_swish.swish(x * 2 + 1, b) * 3

    x = torch.randn(4, 8, 7, 7, device="cuda", dtype=dtype, requires_grad=True)
    y, codes = _compiled_code(torch.compile(f, fullgraph=True), x)
    assert len(codes) == 2
    for code in codes:
        assert "torch.ops.torchtrt_swish" not in code, code
    x_grad, b_grad = x.grad.clone(), b.grad.clone()
    x.grad = b.grad = None
    y_eager = f(x)
    y_eager.sum().backward()
    tol = {torch.float32: 1e-5, torch.float16: 5e-3, torch.bfloat16: 2e-2}[dtype]
    torch.testing.assert_close(y, y_eager, rtol=tol, atol=tol)
    torch.testing.assert_close(x_grad, x.grad, rtol=tol, atol=tol)
    torch.testing.assert_close(b_grad, b.grad, rtol=tol, atol=5 * tol * x.numel() ** 0.5)
