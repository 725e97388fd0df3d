"""export_onnx refuses to write a SwishBias node whose bias the plugin would reject at build time.

The torch op broadcasts any bias to x; the plugin runs a scalar, per-channel (dim 1 or last dim) or full-shape
bias only, on axes that are not dynamic (torchtrt_swish.layout). An exported node outside those would build nowhere.
"""
from __future__ import annotations

import pytest
import torch

import torchtrt_swish
from onnx_path.export import ExportError, dynamo_supported, export_onnx


class BiasOf(torch.nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.full(shape, 0.5))

    def forward(self, x):
        return torchtrt_swish.swish(x, self.bias)


EXPORTERS = ["torchscript"] + (["dynamo"] if dynamo_supported() else [])


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_a_block_bias_is_refused_naming_the_node_and_shapes(exporter):
    with pytest.raises(ExportError) as info:
        export_onnx(BiasOf((4, 5)), torch.randn(1, 3, 4, 5), exporter=exporter)
    text = str(info.value)
    assert "SwishBias node" in text and "bias [4, 5] on x [?, 3, 4, 5]" in text and "'block'" in text, text
    assert "\n" not in text


def test_a_bias_spanning_a_dynamic_axis_is_refused():
    with pytest.raises(ExportError, match=r"bias shape \[5\] needs x dim 3 to be 5, but it is dynamic"):
        export_onnx(BiasOf((5,)), torch.randn(1, 3, 4, 5), dynamic_spatial=True)


@pytest.mark.parametrize("shape", [(1,), (3, 1, 1), (5,), (1, 3, 4, 5)])
def test_the_layouts_the_plugin_runs_are_exported(shape):
    model = export_onnx(BiasOf(shape), torch.randn(1, 3, 4, 5), dynamic_batch=False)
    assert [n.op_type for n in model.graph.node] == ["SwishBias"]


def test_check_false_writes_the_node_anyway():
    model = export_onnx(BiasOf((4, 5)), torch.randn(1, 3, 4, 5), check=False)
    assert [n.op_type for n in model.graph.node] == ["SwishBias"]
