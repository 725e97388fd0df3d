"""CPU execution of SwishBias graphs: onnx.reference and ONNX Runtime (+ onnxruntime-extensions) executors."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto as T
from onnx import helper as h

from onnx_path.contract import SWISH_DOMAIN
from onnx_path.reference import (
    PluginIdentityError,
    ReferenceExecutor,
    rewrite_for_ort,
    run_graph,
    swish_numpy,
)

NP = {T.FLOAT: np.float32, T.FLOAT16: np.float16, T.BFLOAT16: ml_dtypes.bfloat16}
TOL = {T.FLOAT: 1e-6, T.FLOAT16: 1e-3, T.BFLOAT16: 8e-3}  # fp16/bf16: computed in fp32, rounded once


def ref_swish64(x, bias=0.0):
    """Independent float64 reference: PyTorch's silu (NaN at -inf, like the op's contract) plus the bias."""
    xt = torch.from_numpy(np.asarray(x, dtype=np.float64))
    return (torch.nn.functional.silu(xt) + torch.from_numpy(np.asarray(bias, dtype=np.float64))).numpy()


def swish_model(shape, elem=T.FLOAT, bias=None, bias_attr=None, attrs=None, extra_nodes=(), opset=17):
    """A graph with one SwishBias node [x, b] (with `bias`), and a `bias` attribute when `bias_attr` is given."""
    attrs = {"plugin_version": "1", "plugin_namespace": "torchtrt_swish"} if attrs is None else attrs
    inputs, inits = ["x"], []
    if bias is not None:
        inits.append(onnx.numpy_helper.from_array(np.asarray(bias, dtype=NP[elem]), "b"))
        inputs.append("b")
    if bias_attr is not None:
        attrs = dict(attrs, bias=float(bias_attr))
    nodes = [h.make_node("SwishBias", inputs, ["y"], domain=SWISH_DOMAIN, name="swish", **attrs), *extra_nodes]
    out = extra_nodes[-1].output[0] if extra_nodes else "y"
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", elem, list(shape))],
                         [h.make_tensor_value_info(out, elem, None)], initializer=inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset), h.make_opsetid(SWISH_DOMAIN, 1)])


def sample(shape, elem, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape) * 6
    return x.astype(NP[elem])


@pytest.mark.parametrize("elem", [T.FLOAT, T.FLOAT16, T.BFLOAT16])
@pytest.mark.parametrize(
    "bias", [np.array([0.5]), np.array([1.0, -2.0, 3.0]).reshape(3, 1, 1), np.linspace(-1, 1, 5),
             np.linspace(-2, 2, 2 * 3 * 4 * 5).reshape(2, 3, 4, 5)],
    ids=["scalar", "per-channel-dim1", "per-channel-last", "full"],
)
def test_reference_executor_two_input_form(elem, bias):
    x = sample((2, 3, 4, 5), elem)
    got = ReferenceExecutor(swish_model(x.shape, elem, bias=bias)).run({"x": x})["y"]
    assert got.dtype == NP[elem] and got.shape == x.shape
    want = ref_swish64(x.astype(np.float64), np.asarray(bias, dtype=NP[elem]).astype(np.float64))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=TOL[elem], atol=TOL[elem] * 4)


@pytest.mark.parametrize("backend", ["reference", "ort"])
@pytest.mark.parametrize("bias", [None, 0.5], ids=["no bias input", "bias input"])
def test_a_bias_attribute_is_refused_naming_the_node(backend, bias):
    # The former one-input form [x] with a FLOAT `bias` attribute: the plugin has no fields, so no executor runs it.
    model = swish_model((4, 7), bias=None if bias is None else [bias], bias_attr=-1.25)
    with pytest.raises(ValueError, match="SwishBias node 'swish' takes \\[x, bias\\] with no bias attribute"):
        run_graph(model, {"x": sample((4, 7), T.FLOAT)}, backend)


def test_special_values_follow_pytorch():
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e30, -1e30, 88.0, -88.0, -104.0], dtype=np.float32)
    got = ReferenceExecutor(swish_model(x.shape, bias=[0.0])).run({"x": x})["y"]
    want = ref_swish64(x.astype(np.float64), 0.0).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(got)], want[~np.isnan(want)], rtol=1e-6, atol=1e-30)


def test_ort_route_matches_the_reference_route():
    x = sample((2, 3, 4, 5), T.FLOAT)
    bias = np.array([1.0, -2.0, 3.0]).reshape(3, 1, 1)
    extra = [h.make_node("Relu", ["y"], ["r"])]
    model = swish_model(x.shape, bias=bias, extra_nodes=extra)
    ort_out = run_graph(model, {"x": x}, "ort")["r"]
    ref_out = run_graph(model, {"x": x}, "reference")["r"]
    np.testing.assert_array_equal(ort_out, ref_out)
    np.testing.assert_allclose(ort_out, np.maximum(ref_swish64(x, bias), 0), rtol=1e-6, atol=1e-6)


def test_ort_rewrite_uses_the_contrib_domain_and_keeps_the_original():
    model = swish_model((2, 3), bias=[0.5])
    rewritten = rewrite_for_ort(model)
    node = rewritten.graph.node[0]
    assert node.domain == "ai.onnx.contrib" and not node.attribute
    assert model.graph.node[0].domain == SWISH_DOMAIN, "the input model must not be modified"
    assert ("ai.onnx.contrib", 1) in [(o.domain, o.version) for o in rewritten.opset_import]


@pytest.mark.parametrize("elem", [T.FLOAT16, T.BFLOAT16])
def test_ort_route_refuses_half_types(elem):
    with pytest.raises(ValueError, match="float32 only"):
        rewrite_for_ort(swish_model((2, 3), elem, bias=[0.5]))


@pytest.mark.parametrize(
    ("attrs", "ok"),
    [({"plugin_version": "2", "plugin_namespace": "torchtrt_swish"}, False),
     ({"plugin_version": "1", "plugin_namespace": "other"}, False),
     ({"plugin_version": "1.0"}, False),
     # TensorRT's parser defaults: version "1", namespace "" (it never reads the node's domain).
     ({}, False),
     ({"plugin_version": "1"}, False),
     ({"plugin_namespace": "torchtrt_swish"}, True)],
)
@pytest.mark.parametrize("backend", ["reference", "ort"])
def test_plugin_identity_is_checked_like_tensorrt(attrs, ok, backend):
    model = swish_model((2, 3), bias=[0.5], attrs=attrs)
    x = sample((2, 3), T.FLOAT)
    if ok:
        np.testing.assert_allclose(run_graph(model, {"x": x}, backend)["y"], ref_swish64(x, 0.5), rtol=1e-6)
    else:
        with pytest.raises(PluginIdentityError, match="this package provides"):
            run_graph(model, {"x": x}, backend)


def test_missing_bias_is_an_error():
    with pytest.raises(ValueError, match="SwishBias node 'swish' takes .* got no bias input"):
        ReferenceExecutor(swish_model((2, 3))).run({"x": sample((2, 3), T.FLOAT)})


def test_unknown_backend():
    with pytest.raises(ValueError, match="unknown backend"):
        run_graph(swish_model((2, 3), bias=[0.5]), {"x": sample((2, 3), T.FLOAT)}, "tensorrt")


def test_swish_numpy_uses_the_package_kernel_and_rejects_bad_bias():
    x = sample((3, 4), T.FLOAT)
    np.testing.assert_allclose(swish_numpy(x, np.array([1.0], dtype=np.float32)), ref_swish64(x, 1.0), rtol=1e-6)
    # The kernel's own contract check (bias must not change x's shape) surfaces through the executor.
    with pytest.raises(RuntimeError, match="swish"):
        swish_numpy(x, np.ones((2, 3, 4), dtype=np.float32))


@pytest.mark.parametrize("backend", ["reference", "ort"])
def test_0d_tensors_keep_their_shape(backend):
    x = np.array(1.5, dtype=np.float32)
    got = run_graph(swish_model((), bias=np.array(0.25)), {"x": x}, backend)["y"]
    assert got.shape == () and np.isclose(float(got), float(ref_swish64(x, 0.25)), rtol=1e-6)
    assert swish_numpy(x, np.array(0.25, dtype=np.float32)).shape == ()


@pytest.mark.parametrize("elem", [T.FLOAT16, T.BFLOAT16], ids=["float16", "bfloat16"])
def test_half_reductions_accumulate_in_float32(elem):
    # 4096 values of 200: the mean (200) is in range, a float16 running sum (819200) is not.
    x = np.full((1, 1, 64, 64), 200, dtype=NP[elem])
    nodes = [h.make_node("ReduceMean", ["x"], ["m"], keepdims=0),
             h.make_node("Reshape", ["x", "shape"], ["r"]), h.make_node("MatMul", ["r", "w"], ["p"])]
    inits = [onnx.numpy_helper.from_array(np.full((4096, 1), 1 / 4096, dtype=NP[elem]), "w"),
             onnx.numpy_helper.from_array(np.array([1, 4096], dtype=np.int64), "shape")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", elem, [1, 1, 64, 64])],
                         [h.make_tensor_value_info("m", elem, None), h.make_tensor_value_info("p", elem, None)],
                         initializer=inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    out = ReferenceExecutor(model).run({"x": x})
    assert out["m"].dtype == NP[elem] and float(out["m"]) == 200.0
    assert out["p"].dtype == NP[elem] and float(out["p"][0, 0]) == pytest.approx(200.0, rel=1e-2)
