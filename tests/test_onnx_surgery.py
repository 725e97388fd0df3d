"""Graph surgery: seed-format conversion, Sigmoid/Mul(/Add) fusion with its safety checks, ONNX Swish conversion."""
from __future__ import annotations

import io
import json
import warnings

import numpy as np
import onnx
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h

from onnx_path.functions import op_counts
from onnx_path.contract import SWISH_DOMAIN, SWISH_OP, swish_nodes
from onnx_path.export import dynamo_supported, export_onnx
from onnx_path.models import build_model
from onnx_path.parity import check_parity
from onnx_path.reference import ReferenceExecutor
from onnx_path.surgery import convert_seed_nodes, fuse_swish, run_surgery
from torchtrt_swish.layout import plugin_layout


def ref_swish64(x, bias=0.0):
    """Independent float64 reference: x * sigmoid(x) + bias in NumPy."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return x / (1.0 + np.exp(-x)) + np.asarray(bias, dtype=np.float64)


def attrs_of(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def export_torchscript(module, x, opset=11) -> onnx.ModelProto:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), (x,), buf, dynamo=False, opset_version=opset, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    return onnx.load_from_string(buf.getvalue())


# ----------------------------------------------------------------------------- the seeds' own export patterns


class Seed000Swish(torch.autograd.Function):
    """Seed 000: info JSON as a string attribute of a generic custom::Plugin node, bias a Python float."""

    @staticmethod
    def forward(ctx, x, bias):
        return x * torch.sigmoid(x) + bias

    @staticmethod
    def symbolic(g, x, bias):
        return g.op("custom::Plugin", x, name_s="Swish", info_s=json.dumps({"bias": bias, "version": "1"}))


class Seed000SwishTensorBias(torch.autograd.Function):
    """Seed 000 with the learnable bias passed as a tensor input of the plugin node."""

    @staticmethod
    def forward(ctx, x, bias):
        return x * torch.sigmoid(x) + bias

    @staticmethod
    def symbolic(g, x, bias):
        return g.op("custom::Plugin", x, bias, name_s="EfficientSwish", info_s=json.dumps({"version": "1"}))


class Seed000OtherPlugin(torch.autograd.Function):
    """Another plugin of the seed's framework: must be left alone."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def symbolic(g, x):
        return g.op("custom::Plugin", x, name_s="Clip", info_s="{}")


class Seed001Swish(torch.autograd.Function):
    """Seed 001: ai.onnx.contrib node, info JSON as a Constant of character codes on the second input."""

    @staticmethod
    def forward(ctx, x, bias):
        return x * torch.sigmoid(x) + bias

    @staticmethod
    def symbolic(g, x, bias):
        info = json.dumps({"name": "Swish", "bias": bias})
        codes = g.op("Constant", value_t=torch.tensor(list(info.encode("utf-8")), dtype=torch.uint8))
        return g.op("ai.onnx.contrib::Plugin", x, codes)


class Seed001SwishTensorBias(torch.autograd.Function):
    """Seed 001 with a bias tensor as third input (the info names the op only)."""

    @staticmethod
    def forward(ctx, x, bias):
        return x * torch.sigmoid(x) + bias

    @staticmethod
    def symbolic(g, x, bias):
        codes = g.op("Constant", value_t=torch.tensor(list(b'{"name": "EfficientSwish"}'), dtype=torch.int64))
        return g.op("ai.onnx.contrib::Plugin", x, codes, bias)


class SeedNet(torch.nn.Module):
    def __init__(self, fn, bias=3.15, channels=1):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, channels, 3, bias=False)
        self.fn = fn
        self.bias = bias if not isinstance(bias, torch.Tensor) else torch.nn.Parameter(bias)

    def forward(self, x):
        return self.fn.apply(self.conv(x), self.bias)


def conv_of(module, x):
    with torch.no_grad():
        return module.conv.double()(torch.from_numpy(x).double()).numpy()


X = np.random.default_rng(0).standard_normal((2, 1, 6, 6)).astype(np.float32) * 3


@pytest.mark.parametrize("fn", [Seed000Swish, Seed001Swish])
def test_seed_float_bias_becomes_a_scalar_constant_input(fn):
    module = SeedNet(fn, bias=3.15)
    model = export_torchscript(module, torch.randn(1, 1, 6, 6))
    converted, report = convert_seed_nodes(model)
    (node,) = swish_nodes(converted)
    attrs = attrs_of(node)
    assert attrs == {"plugin_version": b"1", "plugin_namespace": b"torchtrt_swish"}  # no bias attribute
    assert len(node.input) == 2
    (init,) = [t for t in converted.graph.initializer if t.name == node.input[1]]
    bias = onnx.numpy_helper.to_array(init)
    assert bias.shape == () and bias.dtype == np.float32 and bias == np.float32(3.15)  # x's dtype, scalar
    assert report.replaced[0].bias == "3.15 (scalar)"
    kind = "original-torchscript" if fn is Seed000Swish else "original-ort-contrib"
    assert [r.kind for r in report.replaced] == [kind]
    assert not any(n.domain in ("custom", "ai.onnx.contrib") for n in converted.graph.node)
    assert not any(n.op_type == "Constant" for n in converted.graph.node), "the info constant must be cleaned up"
    assert {o.domain for o in converted.opset_import} == {"", SWISH_DOMAIN}
    onnx.checker.check_model(converted, full_check=True)
    got = ReferenceExecutor(converted).run({"x": X})["y"]
    np.testing.assert_allclose(got, ref_swish64(conv_of(module, X), 3.15), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fn", [Seed000SwishTensorBias, Seed001SwishTensorBias])
def test_seed_tensor_bias_becomes_two_input_swish(fn):
    bias = torch.tensor([0.5, -1.0, 2.0]).view(3, 1, 1)
    module = SeedNet(fn, bias=bias, channels=3)
    model = export_torchscript(module, torch.randn(1, 1, 6, 6))
    converted, report = convert_seed_nodes(model)
    (node,) = swish_nodes(converted)
    assert len(node.input) == 2
    assert node.input[1] in {t.name for t in converted.graph.initializer}
    assert "per-channel" in report.replaced[0].bias
    got = ReferenceExecutor(converted).run({"x": X})["y"]
    np.testing.assert_allclose(got, ref_swish64(conv_of(module, X), bias.numpy()), rtol=1e-5, atol=1e-5)


def test_other_seed_plugins_are_left_alone():
    class Both(torch.nn.Module):
        def forward(self, x):
            return Seed000Swish.apply(Seed000OtherPlugin.apply(x), 1.0)

    model = export_torchscript(Both(), torch.randn(1, 1, 4, 4))
    converted, report = convert_seed_nodes(model)
    assert len(report.replaced) == 1 and not report.refused
    kinds = [(n.domain, n.op_type) for n in converted.graph.node]
    assert ("custom", "Plugin") in kinds and (SWISH_DOMAIN, SWISH_OP) in kinds


def seed000_node_model(info: str, name: str = "Swish") -> onnx.ModelProto:
    node = h.make_node("Plugin", ["x"], ["y"], domain="custom", name="plug")
    node.attribute.extend([h.make_attribute("name", name), h.make_attribute("info", info)])
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                         [h.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("custom", 1)])


def test_seed_refusals_have_reasons():
    _, report = convert_seed_nodes(seed000_node_model("not json"))
    assert not report.replaced and "not JSON" in report.refused[0].reason
    _, report = convert_seed_nodes(seed000_node_model('{"version": "1"}'))
    assert not report.replaced and "no bias" in report.refused[0].reason


def test_seed_bias_of_another_dtype_is_refused_with_both_dtypes_named():
    node = h.make_node("Plugin", ["x", "b"], ["y"], domain="custom", name="plug")
    node.attribute.extend([h.make_attribute("name", "Swish"), h.make_attribute("info", "{}")])
    b = onnx.numpy_helper.from_array(np.array([0.5, 1.0, 2.0], dtype=np.float64), "b")
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                         [h.make_tensor_value_info("y", T.FLOAT, [2, 3])], initializer=[b])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("custom", 1)])
    _, report = convert_seed_nodes(model)
    assert not report.replaced
    reason = report.refused[0].reason
    assert "DOUBLE" in reason and "FLOAT" in reason, reason


# ------------------------------------------------------------------------------------- synthetic fusion graphs


def vi(name, shape, elem=T.FLOAT):
    return h.make_tensor_value_info(name, elem, shape)


def model_of(nodes, inputs, outputs, inits=(), opset=17):
    return h.make_model(h.make_graph(nodes, "g", inputs, outputs, initializer=list(inits)),
                        opset_imports=[h.make_opsetid("", opset)])


def swish_graph(*, mul_order=("x", "s"), add=None, extra_outputs=(), extra_nodes=(), elem=T.FLOAT,
                shape=(2, 3, 4, 4), names=("sig", "mul", "add")):
    """x -> Sigmoid -> Mul(x, s) [-> Add(bias)] -> y, with the knobs the safety checks need."""
    nodes = [h.make_node("Sigmoid", ["x"], ["s"], name=names[0]),
             h.make_node("Mul", list(mul_order), ["m"], name=names[1])]
    inits = []
    out = "m"
    if add is not None:
        inits.append(onnx.numpy_helper.from_array(np.asarray(add, dtype=onnx.helper.tensor_dtype_to_np_dtype(elem)),
                                                  "bias"))
        nodes.append(h.make_node("Add", ["m", "bias"], ["y"], name=names[2]))
        out = "y"
    nodes += list(extra_nodes)
    outputs = [vi(out, list(shape), elem)] + [vi(n, list(shape), elem) for n in extra_outputs]
    return model_of(nodes, [vi("x", list(shape), elem)], outputs, inits)


XS = np.random.default_rng(1).standard_normal((2, 3, 4, 4)).astype(np.float32) * 4


@pytest.mark.parametrize("order", [("x", "s"), ("s", "x")])
def test_sigmoid_mul_fuses_in_either_order(order):
    fused, report = fuse_swish(swish_graph(mul_order=order))
    assert op_counts(fused) == {f"{SWISH_DOMAIN}::{SWISH_OP}": 1}
    assert report.kinds() == {"sigmoid-mul": 1} and report.replaced[0].bias.startswith("0")
    assert [o.name for o in fused.graph.output] == ["m"], "the graph output keeps its name"
    np.testing.assert_allclose(ReferenceExecutor(fused).run({"x": XS})["m"], ref_swish64(XS), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("bias", "layout"),
    [(0.25, "scalar"), ([[[0.1]], [[0.2]], [[-0.3]]], "per-channel (dim 1)"), ([0.5, 1.0, 1.5, 2.0], "last dim"),
     (np.linspace(-1, 1, 96).reshape(2, 3, 4, 4), "full")],
)
def test_constant_add_is_folded(bias, layout):
    fused, report = fuse_swish(swish_graph(add=bias))
    assert op_counts(fused) == {f"{SWISH_DOMAIN}::{SWISH_OP}": 1}
    assert report.replaced[0].kind == "sigmoid-mul-add" and layout in report.replaced[0].bias
    np.testing.assert_allclose(ReferenceExecutor(fused).run({"x": XS})["y"],
                               ref_swish64(XS, np.asarray(bias, dtype=np.float32)), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("bias", "why"),
    [(np.ones((2, 2, 3, 4, 4)), "change x's shape"), (np.ones((1, 1, 4, 1)), "not one the plugin supports")],
)
def test_add_that_the_plugin_cannot_take_is_kept(bias, why):
    fused, report = fuse_swish(swish_graph(add=bias))
    counts = op_counts(fused)
    assert counts["Add"] == 1 and counts[f"{SWISH_DOMAIN}::{SWISH_OP}"] == 1
    assert why in report.replaced[0].note
    want = ref_swish64(XS, bias)
    np.testing.assert_allclose(ReferenceExecutor(fused).run({"x": XS})["y"], want, rtol=1e-6, atol=1e-6)


def test_add_of_a_runtime_tensor_is_not_folded():
    nodes = [h.make_node("Sigmoid", ["x"], ["s"]), h.make_node("Mul", ["x", "s"], ["m"]),
             h.make_node("Add", ["m", "z"], ["y"])]
    model = model_of(nodes, [vi("x", [2, 3]), vi("z", [2, 3])], [vi("y", [2, 3])])
    fused, report = fuse_swish(model)
    assert op_counts(fused)["Add"] == 1 and "'z' is a graph input" in report.replaced[0].note


def test_intermediates_used_elsewhere_are_refused():
    # Sigmoid output is also a graph output: fusing would delete it.
    model = swish_graph(extra_outputs=["s"])
    fused, report = fuse_swish(model)
    assert not report.replaced and "used elsewhere" in report.refused[0].reason
    assert fused.SerializeToString() == model.SerializeToString()
    # Sigmoid output feeds another node as well.
    model = swish_graph(extra_nodes=[h.make_node("Relu", ["s"], ["r"])], extra_outputs=["r"])
    _, report = fuse_swish(model)
    assert not report.replaced and report.refused
    # Mul output feeds a second consumer: the Mul may fuse, but the Add must stay.
    model = swish_graph(add=0.5, extra_nodes=[h.make_node("Relu", ["m"], ["r"])], extra_outputs=["r"])
    fused, report = fuse_swish(model)
    assert op_counts(fused)["Add"] == 1 and report.replaced[0].kind == "sigmoid-mul"


def test_gate_on_another_tensor_is_not_a_swish():
    # Squeeze-excitation style x * sigmoid(z): same op types, different structure — named like a swish on purpose.
    nodes = [h.make_node("Sigmoid", ["z"], ["s"], name="swish/Sigmoid"),
             h.make_node("Mul", ["x", "s"], ["y"], name="swish/Mul")]
    model = model_of(nodes, [vi("x", [2, 3]), vi("z", [2, 3])], [vi("y", [2, 3])])
    fused, report = fuse_swish(model)
    assert not report.replaced and not report.refused
    assert op_counts(fused) == {"Sigmoid": 1, "Mul": 1}


def test_matching_ignores_names():
    plain = swish_graph(add=0.5, names=("", "", ""))
    odd = swish_graph(add=0.5, names=("Relu_7", "Conv_3", "MatMul"))
    for model in (plain, odd):
        fused, report = fuse_swish(model)
        assert report.kinds() == {"sigmoid-mul-add": 1}


def test_float64_is_refused():
    _, report = fuse_swish(swish_graph(elem=T.DOUBLE))
    assert not report.replaced and "DOUBLE" in report.refused[0].reason


@pytest.mark.parametrize("elem", [T.FLOAT16, T.BFLOAT16])
def test_half_types_fuse_with_a_bias_of_their_type(elem):
    fused, _ = fuse_swish(swish_graph(elem=elem, add=0.5))
    bias = next(t for t in fused.graph.initializer)
    assert bias.data_type == elem
    x = XS.astype(onnx.helper.tensor_dtype_to_np_dtype(elem))
    got = ReferenceExecutor(fused).run({"x": x})["y"].astype(np.float64)
    np.testing.assert_allclose(got, ref_swish64(x.astype(np.float64), 0.5), rtol=2e-2, atol=2e-2)


def onnx_swish_model(alpha=None, add=None):
    kwargs = {} if alpha is None else {"alpha": alpha}
    nodes = [h.make_node("Swish", ["x"], ["m"], name="swish", **kwargs)]
    inits, out = [], "m"
    if add is not None:
        inits.append(onnx.numpy_helper.from_array(np.asarray([add], dtype=np.float32), "b"))
        nodes.append(h.make_node("Add", ["b", "m"], ["y"]))
        out = "y"
    return model_of(nodes, [vi("x", [2, 3, 4, 4])], [vi(out, [2, 3, 4, 4])], inits, opset=24)


@pytest.mark.parametrize("alpha", [None, 1.0])
def test_onnx_swish_alpha_1_is_converted(alpha):
    model = onnx_swish_model(alpha, add=-2.0)
    fused, report = fuse_swish(model)
    assert op_counts(fused) == {f"{SWISH_DOMAIN}::{SWISH_OP}": 1}
    assert report.kinds() == {"onnx-swish-add": 1}
    want = onnx.reference.ReferenceEvaluator(model).run(None, {"x": XS})[0]
    np.testing.assert_allclose(ReferenceExecutor(fused).run({"x": XS})["y"], want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(want, ref_swish64(XS, -2.0), rtol=1e-6, atol=1e-6)


def test_onnx_swish_other_alpha_is_refused():
    _, report = fuse_swish(onnx_swish_model(0.5))
    assert not report.replaced and "alpha=0.5" in report.refused[0].reason


def test_surgery_is_idempotent_and_reports_counts():
    once, first = run_surgery(swish_graph(add=0.5))
    twice, second = run_surgery(once)
    assert len(first.replaced) == 1 and not second.replaced and not second.refused
    assert twice.SerializeToString() == once.SerializeToString()
    assert first.nodes_before == 3 and first.nodes_after == 1
    text = first.to_text()
    assert "3 -> 1" in text and "sigmoid-mul-add" in text
    assert json.loads(json.dumps(first.to_dict()))["replaced_by_kind"] == {"sigmoid-mul-add": 1}


def test_unknown_pass_name():
    with pytest.raises(ValueError, match="unknown surgery pass"):
        run_surgery(swish_graph(), ("fold-everything",))


@settings(max_examples=200, deadline=None)
@given(
    x_shape=st.lists(st.integers(1, 4), min_size=0, max_size=4),
    b_shape=st.lists(st.integers(1, 4), min_size=0, max_size=5),
)
def test_bias_layout_never_accepts_a_shape_change(x_shape, b_shape):
    if plugin_layout(x_shape, b_shape)[0] is not None:
        assert np.broadcast_shapes(tuple(b_shape), tuple(x_shape)) == tuple(x_shape)


# ------------------------------------------------------------------------------------- a torchvision model


@pytest.fixture(scope="module")
def efficientnet():
    torch_model, example = build_model("torchvision:efficientnet_b0", seed=0)
    original = export_onnx(torch_model, example, output_names=["logits"])
    fused, report = run_surgery(original)
    return torch_model, original, fused, report


def test_every_silu_of_efficientnet_becomes_one_node(efficientnet):
    torch_model, original, fused, report = efficientnet
    silus = sum(isinstance(m, torch.nn.SiLU) for m in torch_model.modules())
    assert silus == 49
    before, after = op_counts(original), op_counts(fused)
    assert report.kinds() == {"sigmoid-mul": silus} and not report.refused
    assert after[f"{SWISH_DOMAIN}::{SWISH_OP}"] == silus
    # The squeeze-excitation gates (Sigmoid of another tensor) stay.
    assert before["Sigmoid"] - after["Sigmoid"] == silus and before["Mul"] - after["Mul"] == silus
    assert after["Sigmoid"] == sum(isinstance(m, torch.nn.Sigmoid) for m in torch_model.modules())
    assert sum(after.values()) == sum(before.values()) - silus
    onnx.checker.check_model(fused, full_check=True)
    again, second = run_surgery(fused)
    assert not second.replaced and again.SerializeToString() == fused.SerializeToString()


def test_fused_efficientnet_outputs_are_unchanged(efficientnet):
    torch_model, original, fused, _ = efficientnet
    report = check_parity(fused, torch_model=torch_model, batch=2, seed=1)
    assert report.passed, report.to_table()
    assert {c["runner"] for c in report.comparisons} == {"onnx-reference+swish", "onnxruntime+swish"}
    # And the fused graph agrees with the unfused one run by stock ONNX Runtime.
    report = check_parity(fused, reference_onnx=original, batch=2, seed=1)
    assert report.passed, report.to_table()


@pytest.mark.skipif(not dynamo_supported(), reason="no dynamo exporter with custom_translation_table here")
def test_dynamo_exported_torchvision_block_fuses():
    import torchvision

    block = torchvision.ops.Conv2dNormActivation(3, 8, activation_layer=torch.nn.SiLU).eval()
    model = export_onnx(block, torch.randn(1, 3, 8, 8), exporter="dynamo")
    fused, report = fuse_swish(model)
    assert report.kinds() == {"sigmoid-mul": 1}
    x = np.random.default_rng(4).standard_normal((2, 3, 8, 8)).astype(np.float32)
    with torch.no_grad():
        want = block.double()(torch.from_numpy(x).double()).numpy()
    np.testing.assert_allclose(ReferenceExecutor(fused).run({"x": x})["y"], want, rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------- overridable initializers, names, contract


def test_an_initializer_that_is_also_a_graph_input_is_not_folded():
    # `b` has a default (initializer) the caller may override (graph input): folding would freeze the default.
    nodes = [h.make_node("Sigmoid", ["x"], ["s"]), h.make_node("Mul", ["x", "s"], ["m"]),
             h.make_node("Add", ["m", "b"], ["y"])]
    default = onnx.numpy_helper.from_array(np.array(0.5, dtype=np.float32), "b")
    model = model_of(nodes, [vi("x", [2, 3]), vi("b", [])], [vi("y", [2, 3])], inits=[default])
    fused, report = fuse_swish(model)
    assert "b" in [i.name for i in fused.graph.input], "the overridable input must stay an input"
    assert op_counts(fused)["Add"] == 1 and "'b' is a graph input" in report.replaced[0].note
    x = np.linspace(-4, 4, 6, dtype=np.float32).reshape(2, 3)
    got = ReferenceExecutor(fused).run({"x": x, "b": np.array(-2.0, dtype=np.float32)})["y"]
    np.testing.assert_allclose(got, ref_swish64(x, -2.0), rtol=1e-6, atol=1e-6)


def test_an_original_format_bias_that_is_a_graph_input_is_refused():
    node = h.make_node("Plugin", ["x", "b"], ["y"], domain="custom", name="plug")
    node.attribute.extend([h.make_attribute("name", "Swish"), h.make_attribute("info", "{}")])
    default = onnx.numpy_helper.from_array(np.array([0.5], dtype=np.float32), "b")
    graph = h.make_graph([node], "g", [vi("x", [2, 3]), vi("b", [1])], [vi("y", [2, 3])], initializer=[default])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("custom", 1)])
    _, report = convert_seed_nodes(model)
    assert not report.replaced and "'b' is a graph input" in report.refused[0].reason


def test_unnamed_nodes_are_reported_as_optype_and_index():
    nodes = [h.make_node("Relu", ["x"], ["r"]), h.make_node("Sigmoid", ["r"], ["s"]),
             h.make_node("Mul", ["r", "s"], ["m"]), h.make_node("Sigmoid", ["r"], ["g"]),
             h.make_node("Mul", ["r", "g"], ["y"])]
    model = model_of(nodes, [vi("x", [2, 3])], [vi("y", [2, 3]), vi("m", [2, 3]), vi("g", [2, 3])])
    fused, report = fuse_swish(model)
    text = report.to_text()
    assert "replaced sigmoid-mul: Sigmoid_1, Mul_2 -> Sigmoid_1/SwishBias" in text, text
    assert "refused sigmoid-mul at Sigmoid_3:" in text and ", ," not in text
    assert all(n.name for n in fused.graph.node)


def test_surgery_validates_what_it_emits_against_the_contract(monkeypatch):
    import onnx_path.surgery as surgery

    # A pass that wrote another namespace would make nodes TensorRT's parser cannot resolve.
    monkeypatch.setattr(surgery, "PLUGIN_NAMESPACE", "elsewhere")
    with pytest.raises(RuntimeError, match="break the SwishBias contract.*namespace 'elsewhere'"):
        fuse_swish(swish_graph())


@pytest.mark.parametrize(
    ("inputs", "attrs", "bias", "ok"),
    [(["x", "b"], {}, np.zeros((3, 1, 1), np.float32), True),       # per-channel on dim 1
     (["x"], {"bias": 0.5}, None, False),                             # the former one-input form: no fields
     (["x", "b"], {"bias": 0.5}, np.zeros((), np.float32), False),   # a bias attribute beside the input
     (["x"], {}, None, False),                                        # no bias at all
     (["x", "b"], {}, np.zeros((3, 4, 5), np.float32), False),       # block: not a layout the plugin takes
     (["x", "b"], {}, np.zeros((1,), np.float16), False)],           # dtype differs from x's
)
def test_contract_accepts_the_plugin_forms_and_nothing_else(inputs, attrs, bias, ok):
    from onnx_path.contract import model_problems

    attrs = {"plugin_version": "1", "plugin_namespace": "torchtrt_swish", **attrs}
    inits = [onnx.numpy_helper.from_array(bias, "b")] if bias is not None else []
    node = h.make_node("SwishBias", inputs, ["y"], domain=SWISH_DOMAIN, name="sb", **attrs)
    graph = h.make_graph([node], "g", [vi("x", [2, 3, 4, 5])], [vi("y", [2, 3, 4, 5])], initializer=inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid(SWISH_DOMAIN, 1)])
    problems = model_problems(model)
    assert (problems == []) is ok, problems
    if not ok and "bias" in attrs:
        assert "attribute bias of type FLOAT; the plugin has no fields" in problems[0], problems
    elif not ok and inputs == ["x"]:
        assert problems[0] == "SwishBias node 'sb' has inputs ['x']; SwishBias takes [x, bias]"
    elif not ok:
        assert problems[0].startswith("SwishBias node 'sb' has an unusable bias input 'b'")


# ---------------------------------------------------------------------- a Mul that is also a graph output


def test_the_add_after_a_mul_that_is_a_graph_output_is_kept():
    # m = x * sigmoid(x) is a graph output and feeds only the Add: folding the Add would leave m without a producer.
    model = swish_graph(add=0.5, extra_outputs=["m"])
    fused, report = fuse_swish(model)
    assert [r.kind for r in report.replaced] == ["sigmoid-mul"]
    assert op_counts(fused) == {f"{SWISH_DOMAIN}::{SWISH_OP}": 1, "Add": 1}
    produced = {o for n in fused.graph.node for o in n.output}
    assert {o.name for o in fused.graph.output} == {"y", "m"} <= produced
    onnx.checker.check_model(fused, full_check=True)
    got = ReferenceExecutor(fused).run({"x": XS})
    np.testing.assert_allclose(got["m"], ref_swish64(XS), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got["y"], ref_swish64(XS, 0.5), rtol=1e-6, atol=1e-6)
    report = check_parity(fused, reference_onnx=model, backends=("reference",), batch=2)
    assert report.passed and {r["name"] for r in report.comparisons[0]["outputs"]} == {"y", "m"}


def test_the_surgery_runs_the_onnx_checker_on_what_it_emits(monkeypatch):
    import onnx_path.surgery as surgery

    # A pass that folds the Add after a Mul that is a graph output leaves that output without a producer: the
    # contract check alone does not see it, onnx.checker does.
    def fold_anyway(graph, x, y, names, base):
        add = y.outputs[0]
        return add, add.inputs[1] if add.inputs[0] is y else add.inputs[0], "0.5 (scalar)", ""

    monkeypatch.setattr(surgery, "_foldable_add", fold_anyway)
    with pytest.raises(RuntimeError, match="onnx.checker"):
        fuse_swish(swish_graph(add=0.5, extra_outputs=["m"]))


# --------------------------------------------------------------------------- original-format bias values


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "1e39", "-3.5e38", "1e400", "1" + "0" * 400])
def test_an_original_format_bias_that_is_not_a_finite_float32_is_a_user_error(text):
    from onnx_path.model_file import OnnxInputError

    with pytest.raises(OnnxInputError, match=r"node 'plug'.*bias .*float32") as info:
        convert_seed_nodes(seed000_node_model('{"bias": ' + text + '}'))
    assert "\n" not in str(info.value) and len(str(info.value)) < 300


def test_an_original_format_bias_beyond_x_dtype_is_a_user_error():
    from onnx_path.model_file import OnnxInputError

    model = seed000_node_model('{"bias": 70000}')
    for vi_ in (*model.graph.input, *model.graph.output):
        vi_.type.tensor_type.elem_type = T.FLOAT16
    with pytest.raises(OnnxInputError, match=r"bias 70000 .*FLOAT16"):
        convert_seed_nodes(model)
    # The largest float32 is a finite bias for a float32 x.
    fused, report = convert_seed_nodes(seed000_node_model('{"bias": 3.4028234e38}'))
    assert report.replaced and np.isfinite(onnx.numpy_helper.to_array(fused.graph.initializer[0])).all()
