"""Polygraphy parity: PyTorch float64 reference vs the CPU plugin-graph executors, per dtype, with reports."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto as T
from onnx import helper as h

import torchtrt_swish as ts
from onnx_path.contract import SWISH_DOMAIN, swish_nodes
from onnx_path.export import dynamo_supported, export_onnx
from onnx_path.parity import (
    BASELINE_FACTOR,
    TOLERANCES,
    ParityInputError,
    ReferenceExecutorRunner,
    TorchRunner,
    check_parity,
    compare_runners,
    independent_swish,
    onnx_input_metadata,
    random_feeds,
)
from onnx_path.surgery import fuse_swish


@pytest.fixture(scope="module")
def seed_onnx():
    return export_onnx(ts.Net(), torch.randn(1, 1, 5, 5))


def rows(report, runner):
    comp = next(c for c in report.comparisons if c["runner"] == runner)
    return {r["name"]: r for r in comp["outputs"]}


def test_seed_net_float32_passes_with_both_executors(seed_onnx, tmp_path):
    report = check_parity(seed_onnx, torch_model=ts.Net(), batch=3, seed=0)
    assert report.passed
    assert report.reference == "pytorch-fp64"
    assert {c["runner"] for c in report.comparisons} == {"onnx-reference+swish", "onnxruntime+swish"}
    for runner in ("onnx-reference+swish", "onnxruntime+swish"):
        y = rows(report, runner)["y"]
        assert y["passed"] and 0 < y["max_abs"] < 1e-5, y  # float32 vs float64: small but not zero
    table = report.to_table()
    assert "max_abs" in table and "PASS" in table and "overall: PASS" in table
    data = json.loads(report.to_json(tmp_path / "r.json"))
    assert data == json.loads((tmp_path / "r.json").read_text())
    assert data["passed"] is True and data["tolerances"] == {"atol": 1e-4, "rtol": 1e-3}


def test_a_wrong_bias_fails(seed_onnx):
    broken = onnx.ModelProto()
    broken.CopyFrom(seed_onnx)
    bias_name = swish_nodes(broken)[0].input[1]
    init = next(t for t in broken.graph.initializer if t.name == bias_name)
    init.CopyFrom(onnx.numpy_helper.from_array(np.array([3.15 + 0.05], dtype=np.float32), bias_name))
    report = check_parity(broken, torch_model=ts.Net(), batch=2)
    assert not report.passed
    y = rows(report, "onnx-reference+swish")["y"]
    assert not y["passed"] and y["max_abs"] == pytest.approx(0.05, rel=1e-3)
    assert "FAIL" in report.to_table()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_parity_with_its_tolerance(dtype):
    if dtype == "bfloat16":
        if not dynamo_supported():
            pytest.skip("bfloat16 Conv needs opset 22, exported here by the dynamo exporter")
        model = export_onnx(ts.Net(), torch.randn(1, 1, 5, 5), exporter="dynamo", opset=22, dtype=dtype)
    else:
        model = export_onnx(ts.Net(), torch.randn(1, 1, 5, 5), dtype=dtype)
    report = check_parity(model, torch_model=ts.Net(), dtype=dtype, batch=2)
    assert report.passed, report.to_table()
    assert (report.atol, report.rtol) == TOLERANCES[dtype]
    y = rows(report, "onnx-reference+swish")["y"]
    assert y["max_abs"] > 1e-5, "half precision must show some rounding against float64"
    assert [s["runner"] for s in report.skipped] == ["onnxruntime+swish"]


def test_per_layer_mode_compares_intermediate_tensors(seed_onnx):
    report = check_parity(seed_onnx, torch_model=ts.Net(), per_layer=True)
    assert report.passed and report.per_layer
    pair = next(c for c in report.comparisons if c["reference"] == "onnx-reference+swish")
    names = {r["name"] for r in pair["outputs"]}
    conv_out = seed_onnx.graph.node[0].output[0]
    assert names == {conv_out, "y"}
    # The torch reference only has the graph output: intermediates are not paired with it.
    assert set(rows(report, "onnx-reference+swish")) == {"y"}


def test_reference_onnx_mode_for_a_fused_graph():
    nodes = [h.make_node("Conv", ["x", "w"], ["c"]), h.make_node("Sigmoid", ["c"], ["s"]),
             h.make_node("Mul", ["s", "c"], ["y"])]
    w = onnx.numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 2, 3, 3)).astype(np.float32), "w")
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["batch", 2, 6, 6])],
                         [h.make_tensor_value_info("y", T.FLOAT, None)], initializer=[w])
    original = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    fused, _ = fuse_swish(original)
    report = check_parity(fused, reference_onnx=original, per_layer=True)
    assert report.passed, report.to_table()
    assert report.reference == "onnxruntime-original"
    assert {"c", "y"} <= set(rows(report, "onnx-reference+swish"))


def test_independent_swish_bypasses_the_package_kernel():
    x = torch.randn(4, dtype=torch.float64)
    bias = torch.tensor([0.5], dtype=torch.float32)  # a dtype mismatch the kernel rejects
    with pytest.raises(RuntimeError):
        ts.swish(x, bias)
    with independent_swish():
        y = ts.swish(x, bias)
        # The op packet and keyword arguments are other ways a model may call it: bypassed too.
        y_packet = torch.ops.torchtrt_swish.swish(x, bias)
        y_kwargs = torch.ops.torchtrt_swish.swish.default(x=x, bias=bias)
    torch.testing.assert_close(y, torch.nn.functional.silu(x) + 0.5)
    torch.testing.assert_close(y_packet, y)
    torch.testing.assert_close(y_kwargs, y)


def test_compare_runners_with_custom_runners_and_tolerance(seed_onnx):
    net = ts.Net()
    meta = onnx_input_metadata(seed_onnx)
    feeds = random_feeds(seed_onnx, batch=2, seed=3, count=2)
    runners = [TorchRunner(net, meta, ["y"], reference=True),
               TorchRunner(net, meta, ["y"], name="pytorch-eager-fp32"),
               ReferenceExecutorRunner(seed_onnx, name="executor")]
    report = compare_runners(runners, feeds, tolerances=(0.0, 0.0))
    # Zero tolerance: float32 results against float64 cannot all be exact.
    assert not report.passed
    assert {c["runner"] for c in report.comparisons} == {"pytorch-eager-fp32", "executor"}
    report = compare_runners(runners, feeds)
    assert report.passed


def test_missing_tensorrt_is_reported_as_skipped(seed_onnx, tmp_path):
    try:
        import tensorrt  # noqa: F401
        pytest.skip("TensorRT is importable here: the TensorRT path is covered by test_onnx_engine.py")
    except ImportError:
        pass
    engine = tmp_path / "seed.engine"
    engine.write_bytes(b"not read: TensorRT is not importable")
    report = check_parity(seed_onnx, torch_model=ts.Net(), engine_path=engine)
    assert report.passed
    assert report.skipped and report.skipped[0]["runner"] == "tensorrt"
    assert "TensorRT is not importable" in report.skipped[0]["reason"]


def test_bad_arguments(seed_onnx):
    with pytest.raises(ValueError, match="unknown dtype"):
        check_parity(seed_onnx, torch_model=ts.Net(), dtype="float8")
    with pytest.raises(ValueError, match="needs a reference"):
        check_parity(seed_onnx)
    with pytest.raises(ValueError, match="dynamic"):
        random_feeds(export_onnx(ts.Net(), torch.randn(1, 1, 5, 5), exporter="torchscript", dynamic_spatial=True))


# ---------------------------------------------------------------- baselines, verdicts, bad requests, 0-d, TensorRT


def seed_format_model():
    import importlib.util

    from onnx_path.surgery import convert_seed_nodes

    # The original material's export format lives in example 04 (development code stays out of the package).
    path = Path(__file__).resolve().parent.parent / "examples" / "04_onnx_route" / "run.py"
    spec = importlib.util.spec_from_file_location("torchtrt_swish_example_04", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    SeedNet = example.SeedNet

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        original = export_onnx(SeedNet(), torch.randn(1, 1, 5, 5), opset=11, check=False)
    converted, _ = convert_seed_nodes(original)
    return converted


def test_baseline_row_and_verdict_against_it(seed_onnx):
    # Zero tolerance: no float32 result meets it, so only the baseline can pass a correct candidate.
    feeds = random_feeds(seed_onnx, batch=3, seed=1, count=2, scale=3.0)
    converted = seed_format_model()
    report = check_parity(converted, torch_model=ts.Net(), feeds=feeds, tolerances=(0.0, 0.0),
                          baseline_onnx=seed_onnx, baseline_name="seed_net.onnx")
    assert report.passed, report.to_table()
    y = rows(report, "onnx-reference+swish")["y"]
    assert not y["within_tolerance"] and y["within_baseline"] and y["baseline_max_abs"] > 0
    assert {c["runner"] for c in report.baselines} == {"onnx-reference+swish [baseline]",
                                                       "onnxruntime+swish [baseline]"}
    table = report.to_table()
    assert "PASS (<= 2x baseline)" in table and "baseline, outside tolerance" in table and "seed_net.onnx" in table
    assert report.to_dict()["baselines"] and report.to_dict()["baseline_factor"] == BASELINE_FACTOR
    # The same baseline does not rescue a wrong model.
    broken = onnx.ModelProto()
    broken.CopyFrom(seed_onnx)
    bias_name = swish_nodes(broken)[0].input[1]
    init = next(t for t in broken.graph.initializer if t.name == bias_name)
    init.CopyFrom(onnx.numpy_helper.from_array(np.array([3.15 + 0.05], dtype=np.float32), bias_name))
    report = check_parity(broken, torch_model=ts.Net(), feeds=feeds, baseline_onnx=seed_onnx)
    assert not report.passed and not rows(report, "onnx-reference+swish")["y"]["within_baseline"]


def test_export_baseline_is_the_reference_in_the_candidates_dtype(seed_onnx):
    from onnx_path.parity import export_baseline

    half = export_onnx(ts.Net(), torch.randn(1, 1, 5, 5), dtype="float16", output_names=["out"])
    feeds = random_feeds(half, batch=2, seed=0)
    baseline = export_baseline(ts.Net(), half, feeds[0])
    assert [o.name for o in baseline.graph.output] == ["out"]
    assert baseline.graph.input[0].type.tensor_type.elem_type == T.FLOAT16
    report = check_parity(half, torch_model=ts.Net(), dtype="float16", feeds=feeds, baseline_onnx=baseline)
    assert report.passed and rows(report, "onnx-reference+swish")["out"]["baseline_max_abs"] > 0


def test_outputs_smaller_than_the_tolerance_get_a_warning(seed_onnx):
    # Net(0.0) on inputs of size 1e-6 gives outputs of about 1e-6: everything is within atol 1e-4.
    no_bias = export_onnx(ts.Net(0.0), torch.randn(1, 1, 5, 5))
    tiny = random_feeds(no_bias, batch=2, seed=0, scale=1e-6)
    report = check_parity(no_bias, torch_model=ts.Net(0.0), feeds=tiny)
    assert report.passed and len(report.warnings) == 1 and "'y'" in report.warnings[0]
    assert "warning: output 'y'" in report.to_table()
    assert rows(report, "onnx-reference+swish")["y"]["reference_max_abs"] < 1e-4
    normal = check_parity(seed_onnx, torch_model=ts.Net(), feeds=random_feeds(seed_onnx))
    assert normal.warnings == []


@pytest.mark.parametrize("tolerances", [(float("nan"), 1e-3), (1e-4, float("nan")), (-1.0, 0.0), (float("inf"), 0)])
def test_tolerances_must_be_finite_and_not_negative(seed_onnx, tolerances):
    with pytest.raises(ValueError, match="must be a finite number >= 0"):
        check_parity(seed_onnx, torch_model=ts.Net(), tolerances=tolerances)


def test_requests_that_cannot_be_compared_raise(seed_onnx, tmp_path):
    with pytest.raises(ParityInputError, match="no such engine file"):
        check_parity(seed_onnx, torch_model=ts.Net(), engine_path=tmp_path / "missing.engine")
    with pytest.raises(ParityInputError, match="nothing to compare"):
        check_parity(seed_onnx, torch_model=ts.Net(), backends=())
    renamed = onnx.ModelProto()
    renamed.CopyFrom(seed_onnx)
    renamed.graph.output[0].name = "z"
    with pytest.raises(ParityInputError, match=r"outputs \['y'\] differ from the reference's \['z'\]"):
        check_parity(seed_onnx, reference_onnx=renamed)
    # The plain ONNX Runtime reference cannot run a SwishBias node.
    with pytest.raises(ParityInputError, match="ONNX Runtime cannot run the reference model"):
        check_parity(seed_onnx, reference_onnx=seed_onnx)


def test_0d_outputs_keep_their_shape():
    node = h.make_node("SwishBias", ["x", "b"], ["y"], domain=SWISH_DOMAIN, plugin_version="1",
                       plugin_namespace="torchtrt_swish")
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, [])],
                         [h.make_tensor_value_info("y", T.FLOAT, [])],
                         initializer=[onnx.numpy_helper.from_array(np.array(0.5, dtype=np.float32), "b")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid(SWISH_DOMAIN, 1)])
    (feed,) = random_feeds(model)
    assert feed["x"].shape == () and isinstance(feed["x"], np.ndarray)
    runner = ReferenceExecutorRunner(model)
    with runner:
        assert runner.infer(feed)["y"].shape == ()


def test_trt_runner_loads_the_plugin_before_the_engine_is_deserialized(tmp_path, monkeypatch):
    # No TensorRT here: fake its module boundary and record the order of the calls that matter.
    import polygraphy.backend.trt as poly_trt

    import onnx_path.engine as engine
    import torchtrt_swish.plugin as plugin
    from onnx_path.parity import _trt_runner

    calls, fake_trt = [], object()
    monkeypatch.setattr(engine, "import_tensorrt", lambda: fake_trt)
    monkeypatch.setattr(plugin, "load_plugin", lambda trt=None, library=None: calls.append(("load_plugin", trt)))

    class Loader:
        def __init__(self, data):
            calls.append(("EngineFromBytes", None))

        def __call__(self):  # deserialization: runs when the runner activates
            calls.append(("deserialize", None))

    monkeypatch.setattr(poly_trt, "EngineFromBytes", Loader)
    monkeypatch.setattr(poly_trt, "TrtRunner", lambda loader, name: (loader, name))
    path = tmp_path / "seed.engine"
    path.write_bytes(b"engine")
    loader, name = _trt_runner(path, "tensorrt")
    loader()
    assert calls == [("load_plugin", fake_trt), ("EngineFromBytes", None), ("deserialize", None)]
