"""ONNX -> TensorRT engine: shape profiles (pure Python), the adapter's control flow against stand-ins for
`tensorrt` and Polygraphy's TensorRT-calling loaders, and real-TensorRT tests (marked `tensorrt`, skipped where
TensorRT cannot be imported)."""
from __future__ import annotations

import sys
import types

import numpy as np
import onnx
import pytest
import torch

import torchtrt_swish as ts
from onnx_path.contract import swish_nodes
from onnx_path.engine import (
    EngineBuildError,
    PluginNotFoundError,
    TensorRTUnavailable,
    build_engine,
    import_tensorrt,
    parse_shape_spec,
    profile_shapes,
)
from onnx_path.export import export_onnx


@pytest.fixture(scope="module")
def seed_paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("engine")
    paths = {}
    for name, kwargs in {"dynamic": {}, "static": {"dynamic_batch": False}, "hw": {"dynamic_spatial": True},
                         "fp16": {"dtype": "float16"}}.items():
        paths[name] = d / f"{name}.onnx"
        export_onnx(ts.Net(), torch.randn(1, 1, 5, 5), paths[name], **kwargs)
    model = onnx.load(paths["dynamic"])
    for a in swish_nodes(model)[0].attribute:
        if a.name == "plugin_version":
            a.s = b"2"
    paths["v2"] = d / "v2.onnx"
    onnx.save(model, paths["v2"])
    return paths


# ---------------------------------------------------------------------------------------- profiles (no TensorRT)


def test_parse_shape_spec():
    assert parse_shape_spec("x:1x3x224x224,y:2") == {"x": (1, 3, 224, 224), "y": (2,)}
    assert parse_shape_spec(None) == {} and parse_shape_spec("") == {}
    for bad in ("x", "x:1x", "x:a", ":1x2"):
        with pytest.raises(ValueError, match="bad shape spec"):
            parse_shape_spec(bad)


def test_profiles_from_dynamic_axes(seed_paths):
    assert profile_shapes(onnx.load(seed_paths["static"])) == {}
    assert profile_shapes(onnx.load(seed_paths["dynamic"])) == {"x": ((1, 1, 5, 5), (8, 1, 5, 5), (32, 1, 5, 5))}
    given = profile_shapes(onnx.load(seed_paths["dynamic"]), {"x": (2, 1, 5, 5)}, {"x": (4, 1, 5, 5)},
                           {"x": (6, 1, 5, 5)})
    assert given == {"x": ((2, 1, 5, 5), (4, 1, 5, 5), (6, 1, 5, 5))}


def test_profile_errors(seed_paths):
    hw = onnx.load(seed_paths["hw"])
    with pytest.raises(EngineBuildError, match="'x' axis 2 .height. is dynamic"):
        profile_shapes(hw)
    ok = profile_shapes(hw, {"x": (1, 1, 5, 5)}, {"x": (2, 1, 16, 16)}, {"x": (4, 1, 64, 64)})
    assert ok["x"][2] == (4, 1, 64, 64)
    dyn = onnx.load(seed_paths["dynamic"])
    with pytest.raises(EngineBuildError, match="axis 1 is fixed at 1"):
        profile_shapes(dyn, {"x": (1, 3, 5, 5)})
    with pytest.raises(EngineBuildError, match="min <= opt <= max"):
        profile_shapes(dyn, {"x": (9, 1, 5, 5)})
    with pytest.raises(EngineBuildError, match="rank"):
        profile_shapes(dyn, {"x": (1, 1, 5)})
    with pytest.raises(EngineBuildError, match="unknown input"):
        profile_shapes(dyn, {"image": (1, 1, 5, 5)})


def test_missing_tensorrt_is_a_clear_error(seed_paths, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt", None)  # makes `import tensorrt` fail even where it exists
    with pytest.raises(TensorRTUnavailable, match="TensorRT is not importable"):
        import_tensorrt()
    with pytest.raises(TensorRTUnavailable):
        build_engine(seed_paths["dynamic"], tmp_path / "e.engine")


def test_bad_precision_and_conflicts(seed_paths, tmp_path):
    with pytest.raises(ValueError, match="unknown precision"):
        build_engine(seed_paths["dynamic"], tmp_path / "e.engine", precision="int8")
    with pytest.raises(EngineBuildError, match="conflicts"):
        build_engine(seed_paths["fp16"], tmp_path / "e.engine", precision="bf16")


# ------------------------------------------- the adapter against stand-ins for tensorrt and Polygraphy's loaders


def fake_tensorrt(monkeypatch, *, precision_flags=True, registers=True, parse_errors=(), build_ok=True):
    """Stand-ins for what build_engine reaches: the tensorrt names it calls itself (registry, OnnxParser, flags) and
    Polygraphy's CreateNetwork / EngineBytesFromNetwork / get_trt_logger (which would call TensorRT); records what
    was asked of them. CreateConfig and Profile are Polygraphy's own: they touch TensorRT only when called."""
    import polygraphy.backend.trt as poly_trt
    from polygraphy.exception import PolygraphyException

    trt = types.ModuleType("tensorrt")
    trt.__version__ = "0.0-fake"
    log = {"loaded": [], "strongly_typed": None, "parsed": None, "built": None, "config": None}
    creators = set()

    class Registry:
        # The real registry lists creator objects carrying name / plugin_version / plugin_namespace.
        @property
        def all_creators(self):
            return [types.SimpleNamespace(name=n, plugin_version=v, plugin_namespace=ns) for n, v, ns in creators]

        def load_library(self, path):
            log["loaded"].append(path)
            if registers:
                creators.add(("SwishBias", "1", "torchtrt_swish"))
            return object()  # the real registry's library handle (None would mean the load failed)

    registry = Registry()
    trt.get_plugin_registry = lambda: registry

    class Error:
        def __init__(self, desc, node):
            self._desc, self._node = desc, node

        def desc(self):
            return self._desc

        def node(self):
            return self._node

    class Parser:
        def __init__(self, network, logger):
            self.errors = [Error(d, n) for d, n in parse_errors]

        def parse_from_file(self, path):
            log["parsed"] = path
            return not self.errors

        @property
        def num_errors(self):
            return len(self.errors)

        def get_error(self, i):
            return self.errors[i]

    trt.OnnxParser = Parser
    trt.BuilderFlag = types.SimpleNamespace(**({"FP16": "FP16", "BF16": "BF16"} if precision_flags else {}))
    trt.MemoryPoolType = types.SimpleNamespace(WORKSPACE="workspace")
    monkeypatch.setitem(sys.modules, "tensorrt", trt)

    class CreateNetwork:
        def __init__(self, strongly_typed=None):
            log["strongly_typed"] = strongly_typed

        def __call__(self):
            return "builder", "network"

    class EngineBytesFromNetwork:
        def __init__(self, network, config=None):
            self.network, self.config = network, config

        def __call__(self):
            log["built"], log["config"] = self.network, self.config
            if not build_ok:  # what Polygraphy does when TensorRT returns no engine (G_LOGGER.critical)
                raise PolygraphyException("Invalid Engine. Please ensure the engine was built correctly")
            return b"fake-engine"

    monkeypatch.setattr(poly_trt, "CreateNetwork", CreateNetwork)
    monkeypatch.setattr(poly_trt, "EngineBytesFromNetwork", EngineBytesFromNetwork)
    monkeypatch.setattr(poly_trt, "get_trt_logger", lambda: "polygraphy's logger")
    return trt, log


@pytest.fixture
def plugin_lib(tmp_path):
    lib = tmp_path / "libtorchtrt_swish_plugin.so"
    lib.write_bytes(b"\x7fELF stand-in")
    return lib


def _profile(config):
    (profile,) = config.profiles
    return {name: tuple(tuple(s) for s in shapes) for name, shapes in profile.items()}


def test_adapter_builds_and_writes_an_engine(seed_paths, tmp_path, plugin_lib, monkeypatch):
    _, log = fake_tensorrt(monkeypatch)
    out = build_engine(seed_paths["dynamic"], tmp_path / "sub" / "seed.engine", precision="fp16",
                       plugin_library=plugin_lib, workspace_gib=0.5)
    assert out.read_bytes() == b"fake-engine"
    assert log["loaded"] == [str(plugin_lib)] and log["parsed"] == str(seed_paths["dynamic"])
    assert log["strongly_typed"] is False  # weak typing + the precision flag
    assert log["built"][:2] == ("builder", "network") and len(log["built"]) == 3  # the parser lives until built
    config = log["config"]
    assert (config.fp16, config.bf16) == (True, False)
    assert _profile(config) == {"x": ((1, 1, 5, 5), (8, 1, 5, 5), (32, 1, 5, 5))}
    assert config.memory_pool_limits == {"workspace": 1 << 29}


def test_adapter_static_model_and_bf16(seed_paths, tmp_path, plugin_lib, monkeypatch):
    _, log = fake_tensorrt(monkeypatch)
    build_engine(seed_paths["static"], tmp_path / "s.engine", precision="bf16", plugin_library=plugin_lib)
    config = log["config"]
    assert (config.fp16, config.bf16) == (False, True) and config.memory_pool_limits is None
    assert _profile(config) == {}  # nothing dynamic: Polygraphy fills in the static input shapes


def test_adapter_strongly_typed_paths(seed_paths, tmp_path, plugin_lib, monkeypatch):
    _, log = fake_tensorrt(monkeypatch)
    build_engine(seed_paths["fp16"], tmp_path / "a.engine", precision="fp16", plugin_library=plugin_lib)
    assert log["strongly_typed"] is True and not log["config"].fp16  # the graph carries the precision
    # TensorRT 11: no precision flags at all, every network strongly typed.
    _, log = fake_tensorrt(monkeypatch, precision_flags=False)
    with pytest.raises(EngineBuildError, match="no BuilderFlag.FP16 .networks are strongly typed.*float16"):
        build_engine(seed_paths["static"], tmp_path / "b.engine", precision="fp16", plugin_library=plugin_lib)
    build_engine(seed_paths["static"], tmp_path / "c.engine", plugin_library=plugin_lib)
    assert log["strongly_typed"] is True


def test_adapter_names_the_plugin_when_the_library_is_missing(seed_paths, tmp_path, monkeypatch):
    fake_tensorrt(monkeypatch)
    with pytest.raises(PluginNotFoundError) as info:
        build_engine(seed_paths["dynamic"], tmp_path / "e.engine", plugin_library=tmp_path / "missing.so")
    msg = str(info.value)
    assert 'SwishBias (version "1", namespace "torchtrt_swish")' in msg and "missing.so" in msg


def test_adapter_when_the_library_registers_nothing(seed_paths, tmp_path, plugin_lib, monkeypatch):
    fake_tensorrt(monkeypatch, registers=False)
    with pytest.raises(PluginNotFoundError, match="not registered after loading"):
        build_engine(seed_paths["dynamic"], tmp_path / "e.engine", plugin_library=plugin_lib)


def test_adapter_maps_the_parsers_plugin_lookup_failure(seed_paths, tmp_path, plugin_lib, monkeypatch):
    msg = 'creator && "Plugin not found, are the plugin name, version, and namespace correct?"'
    index = [n.op_type for n in onnx.load(seed_paths["v2"]).graph.node].index("SwishBias")
    fake_tensorrt(monkeypatch, parse_errors=[(msg, index)])
    with pytest.raises(PluginNotFoundError) as info:
        build_engine(seed_paths["v2"], tmp_path / "e.engine", plugin_library=plugin_lib)
    text = str(info.value)
    assert "asks for plugin SwishBias version '2' namespace 'torchtrt_swish'" in text
    assert 'provides SwishBias (version "1", namespace "torchtrt_swish")' in text and str(plugin_lib) in text


def test_parser_hint_uses_the_attributes_never_the_domain(seed_paths, tmp_path, plugin_lib, monkeypatch):
    # onnx-tensorrt's fallback importer: name = op_type, version = attribute plugin_version (default "1"),
    # namespace = attribute plugin_namespace (default ""); the node's domain plays no part.
    model = onnx.load(seed_paths["dynamic"])
    node = swish_nodes(model)[0]
    kept = [a for a in node.attribute if a.name not in ("plugin_version", "plugin_namespace")]
    del node.attribute[:]
    node.attribute.extend(kept)
    assert node.domain == "torchtrt_swish"
    path = tmp_path / "no_attrs.onnx"
    onnx.save(model, path)
    index = [n.op_type for n in model.graph.node].index("SwishBias")
    fake_tensorrt(monkeypatch, parse_errors=[("Plugin not found, are the plugin name, version, and namespace correct?",
                                              index)])
    with pytest.raises(PluginNotFoundError) as info:
        build_engine(path, tmp_path / "e.engine", plugin_library=plugin_lib)
    text = str(info.value)
    assert "asks for plugin SwishBias version '1' namespace ''" in text
    assert "its domain 'torchtrt_swish' is not used: set the plugin_namespace attribute" in text
    assert "never reads the node's domain" in text


def test_adapter_other_parser_and_builder_failures(seed_paths, tmp_path, plugin_lib, monkeypatch):
    _, log = fake_tensorrt(monkeypatch, parse_errors=[("Conv: kernel weights must be constant", 0)])
    with pytest.raises(EngineBuildError, match=r"parser failed:\n  node 0 \(Conv"):
        build_engine(seed_paths["dynamic"], tmp_path / "e.engine", plugin_library=plugin_lib)
    assert log["built"] is None
    fake_tensorrt(monkeypatch, build_ok=False)
    with pytest.raises(EngineBuildError, match="returned no engine .Invalid Engine"):
        build_engine(seed_paths["dynamic"], tmp_path / "e.engine", plugin_library=plugin_lib)
    assert not (tmp_path / "e.engine").exists()


def test_adapter_builder_creation_failure(seed_paths, tmp_path, plugin_lib, monkeypatch):
    import polygraphy.backend.trt as poly_trt

    fake_tensorrt(monkeypatch)

    def no_gpu(strongly_typed=None):
        raise TypeError("pybind11::init(): factory function returned nullptr")  # trt.Builder without a GPU

    monkeypatch.setattr(poly_trt, "CreateNetwork", no_gpu)
    with pytest.raises(EngineBuildError, match=r"could not create a builder \(is a CUDA GPU visible\?\): pybind11"):
        build_engine(seed_paths["dynamic"], tmp_path / "e.engine", plugin_library=plugin_lib)


# ------------------------------------------------------------------------------------------ real TensorRT


@pytest.fixture
def real_trt():
    trt = pytest.importorskip("tensorrt", reason="TensorRT is not installed here (no runnable TensorRT on CPU CI)")
    try:
        ts.plugin_library_path()
    except FileNotFoundError as exc:
        pytest.skip(f"TensorRT plugin library not built: {exc}")
    return trt


@pytest.mark.tensorrt
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_real_engine_matches_the_fp64_reference(real_trt, seed_paths, tmp_path, precision):
    from onnx_path.parity import check_parity

    engine = build_engine(seed_paths["dynamic"], tmp_path / f"seed_{precision}.engine", precision=precision,
                          min_shapes={"x": (1, 1, 5, 5)}, opt_shapes={"x": (4, 1, 5, 5)},
                          max_shapes={"x": (8, 1, 5, 5)})
    report = check_parity(onnx.load(seed_paths["dynamic"]), torch_model=ts.Net(), engine_path=engine, backends=(),
                          batch=4, tolerances=None if precision == "fp32" else (1e-2, 1e-2))
    assert report.passed, report.to_table()
    assert [c["runner"] for c in report.comparisons] == ["tensorrt"]


@pytest.mark.tensorrt
def test_real_parser_reports_an_unknown_plugin_version(real_trt, seed_paths, tmp_path):
    with pytest.raises(PluginNotFoundError, match="version '2'"):
        build_engine(seed_paths["v2"], tmp_path / "v2.engine")


@pytest.mark.tensorrt
def test_real_engine_of_a_fused_torchvision_model(real_trt, tmp_path):
    from onnx_path.models import build_model
    from onnx_path.parity import check_parity
    from onnx_path.surgery import fuse_swish

    model, example = build_model("torchvision:efficientnet_b0")
    fused, report = fuse_swish(export_onnx(model, example, output_names=["logits"]))
    assert report.replaced
    path = tmp_path / "fused.onnx"
    onnx.save(fused, path)
    engine = build_engine(path, tmp_path / "fused.engine")
    parity = check_parity(fused, torch_model=model, engine_path=engine, backends=(), batch=2)
    assert parity.passed, parity.to_table()
    assert np.isfinite([r["max_abs"] for c in parity.comparisons for r in c["outputs"]]).all()
