"""The op survives torch.export (one node per use, no decomposition) and torch.compile (no graph breaks)."""
from __future__ import annotations

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
