"""Export of torchtrt_swish models to ONNX: one SwishBias node per op, bias as initializer, dynamic axes, checks."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch

import torchtrt_swish as ts
from onnx_path.functions import op_counts
from onnx_path.contract import SWISH_DOMAIN, SWISH_OP, swish_nodes
from onnx_path.export import (
    BFLOAT16_MIN_OPSET,
    ExportError,
    check_onnx,
    dynamic_axes_spec,
    dynamo_supported,
    export_onnx,
    parse_dtype,
)
from onnx_path.reference import ReferenceExecutor

needs_dynamo = pytest.mark.skipif(not dynamo_supported(), reason="this torch has no dynamo exporter with "
                                                                  "custom_translation_table (or no onnxscript)")


def ref_swish64(x: np.ndarray, bias) -> np.ndarray:
    """Independent float64 reference: x * sigmoid(x) + bias in NumPy."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return x / (1.0 + np.exp(-x)) + np.asarray(bias, dtype=np.float64)


def dims(value_info) -> list:
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def initializer(model, name) -> np.ndarray:
    return next(onnx.numpy_helper.to_array(t) for t in model.graph.initializer if t.name == name)


def assert_contract(model: onnx.ModelProto, bias_value: float = 3.15) -> onnx.NodeProto:
    nodes = swish_nodes(model)
    assert len(nodes) == 1, op_counts(model)
    node = nodes[0]
    assert (node.op_type, node.domain) == (SWISH_OP, SWISH_DOMAIN)
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs == {"plugin_version": b"1", "plugin_namespace": b"torchtrt_swish"}
    assert len(node.input) == 2
    assert node.input[1] in {t.name for t in model.graph.initializer}, "bias must be an initializer"
    # rtol 1e-2: bfloat16 holds 3.15 as 3.156
    np.testing.assert_allclose(initializer(model, node.input[1]).astype(np.float64), [bias_value], rtol=1e-2)
    assert ("torchtrt_swish", 1) in [(o.domain, o.version) for o in model.opset_import]
    assert not any(n.op_type == "Swish" for n in model.graph.node), "the node must never be called Swish"
    return node


@pytest.mark.parametrize("opset", [11, 13, 17])
def test_torchscript_export_contract(opset):
    model = export_onnx(ts.Net(), torch.randn(1, 1, 5, 5), opset=opset)
    assert_contract(model)
    assert [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] == [opset]
    assert dims(model.graph.input[0]) == ["batch", 1, 5, 5]
    assert dims(model.graph.output[0]) == ["batch", 1, 3, 3]
    check_onnx(model)


def test_torchscript_export_runs_like_fp64_reference(tmp_path):
    net = ts.Net(bias_init=-0.75)
    path = tmp_path / "net.onnx"
    export_onnx(net, torch.randn(1, 1, 5, 5), path)
    model = onnx.load(path)
    assert_contract(model, -0.75)
    x = np.random.default_rng(1).standard_normal((3, 1, 5, 5)).astype(np.float32) * 4
    got = ReferenceExecutor(model).run({"x": x})["y"]
    with torch.no_grad():
        conv = net.conv.double()(torch.from_numpy(x).double()).numpy()
    np.testing.assert_allclose(got, ref_swish64(conv, -0.75), rtol=1e-5, atol=1e-5)


def test_static_export_has_no_dynamic_axes():
    model = export_onnx(ts.Net(), torch.randn(2, 1, 5, 5), dynamic_batch=False)
    assert dims(model.graph.input[0]) == [2, 1, 5, 5]


def test_per_channel_bias_export():
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), ts.EfficientSwish(0.5, bias_shape=(4, 1, 1)))
    with torch.no_grad():
        module[1].bias.copy_(torch.arange(4.0).view(4, 1, 1))
    model = export_onnx(module, torch.randn(1, 3, 6, 6))
    node = swish_nodes(model)[0]
    assert initializer(model, node.input[1]).shape == (4, 1, 1)
    x = np.random.default_rng(2).standard_normal((2, 3, 6, 6)).astype(np.float32)
    with torch.no_grad():
        conv = module[0].double()(torch.from_numpy(x).double()).numpy()
    np.testing.assert_allclose(ReferenceExecutor(model).run({"x": x})["y"],
                               ref_swish64(conv, np.arange(4.0).reshape(4, 1, 1)), rtol=1e-5, atol=1e-5)


def test_float16_export():
    model = export_onnx(ts.Net(), torch.randn(1, 1, 5, 5), dtype="float16")
    assert_contract(model)
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    assert {t.data_type for t in model.graph.initializer} == {onnx.TensorProto.FLOAT16}


def test_opset_below_11_is_refused():
    with pytest.raises(ExportError, match="opset >= 11"):
        export_onnx(ts.Net(), torch.randn(1, 1, 5, 5), opset=10)


def test_unknown_exporter_and_dtype():
    with pytest.raises(ExportError, match="unknown exporter"):
        export_onnx(ts.Net(), torch.randn(1, 1, 5, 5), exporter="tflite")
    with pytest.raises(ValueError, match="unknown dtype 'float8'"):
        parse_dtype("float8")
    assert parse_dtype("bf16") is torch.bfloat16


def test_dynamic_axes_spec():
    spec = dynamic_axes_spec(["a", "b"], [torch.zeros(1, 3, 8, 8), torch.zeros(5)], batch=True, spatial=True)
    assert spec == {"a": {0: "batch", 2: "height", 3: "width"}, "b": {0: "batch"}}
    assert dynamic_axes_spec(["a"], [torch.zeros(1, 3)], batch=False) == {}


def test_check_onnx_rejects_a_broken_model():
    model = export_onnx(ts.Net(), torch.randn(1, 1, 5, 5))
    model.graph.node[0].input[0] = "does_not_exist"
    with pytest.raises(ExportError, match="failed the ONNX check"):
        check_onnx(model)


@needs_dynamo
def test_dynamo_export_contract_with_dynamic_hw():
    model = export_onnx(ts.Net(), torch.randn(1, 1, 5, 5), exporter="dynamo", dynamic_spatial=True)
    node = assert_contract(model)
    assert node.input[1] == "act.bias"
    assert len(model.functions) == 0, "the onnxscript function must be inlined"
    assert dims(model.graph.input[0]) == ["batch", 1, "height", "width"]
    out = dims(model.graph.output[0])
    assert out[0] == "batch" and "height" in out[2] and "width" in out[3]
    check_onnx(model)
    x = np.random.default_rng(3).standard_normal((2, 1, 7, 6)).astype(np.float32)
    with torch.no_grad():
        conv = ts.Net().conv.double()(torch.from_numpy(x).double()).numpy()
    np.testing.assert_allclose(ReferenceExecutor(model).run({"x": x})["y"], ref_swish64(conv, 3.15),
                               rtol=1e-5, atol=1e-5)


@needs_dynamo
def test_dynamo_export_bfloat16_opset22():
    # bfloat16 Conv exists in ONNX from opset 22 on; earlier opsets fail the checker (a real ONNX limitation).
    model = export_onnx(ts.Net(), torch.randn(1, 1, 5, 5), exporter="dynamo", opset=22, dtype="bfloat16")
    assert_contract(model)
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16


@needs_dynamo
def test_dynamo_opset_below_18_is_refused():
    with pytest.raises(ExportError, match=">= 18"):
        export_onnx(ts.Net(), torch.randn(1, 1, 5, 5), exporter="dynamo", opset=17)


def test_dtype_export_leaves_the_callers_model_alone():
    net = ts.Net()
    export_onnx(net, torch.randn(1, 1, 5, 5), dtype="float16")
    assert net.conv.weight.dtype == torch.float32 and net.act.bias.dtype == torch.float32


@pytest.mark.parametrize("exporter", ["torchscript", pytest.param("dynamo", marks=needs_dynamo)])
def test_bfloat16_export_defaults_to_the_opset_where_conv_takes_bfloat16(exporter):
    model = export_onnx(ts.Net(), torch.randn(1, 1, 5, 5), exporter=exporter, dtype="bfloat16")
    assert [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] == [BFLOAT16_MIN_OPSET] == [22]
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16
    check_onnx(model)


def test_bfloat16_export_at_an_older_opset_names_the_opset_it_needs():
    with pytest.raises(ExportError, match="export with opset >= 22"):
        export_onnx(ts.Net(), torch.randn(1, 1, 5, 5), dtype="bfloat16", opset=20)


def test_an_opset_the_exporter_or_onnx_lacks_is_an_export_error():
    with pytest.raises(ExportError, match=r"opset 99 does not exist: onnx .* knows opsets up to \d+"):
        export_onnx(ts.Net(), torch.randn(1, 1, 5, 5), opset=99)
    # Opset 24 exists, but torch's TorchScript exporter stops at 23.
    with pytest.raises(ExportError, match="opset 24 is not supported by the torchscript exporter"):
        export_onnx(ts.Net(), torch.randn(1, 1, 5, 5), opset=24)


@pytest.mark.parametrize(("spec", "shape", "why"),
                         [("seed-net", (5, 5), "has rank 2"), ("seed-net", (1, 3, 5, 5), "to have 1 channels"),
                          ("torchvision:resnet18", (1, 1, 32, 32), "to have 3 channels")])
def test_build_model_rejects_an_input_shape_the_model_cannot_take(spec, shape, why):
    from onnx_path.models import build_model

    with pytest.raises(ValueError, match=why) as info:
        build_model(spec, input_shape=shape)
    assert "x".join(map(str, shape)) in str(info.value) and "\n" not in str(info.value)
