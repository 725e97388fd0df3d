"""The Torch-TensorRT route, in two layers.

CPU layer (everywhere): the converter module imports without Torch-TensorRT and register() is harmless; the
capability validator's decisions on FX nodes from torch.export (dtype, bias layout, dynamic batch); the bias layout
twin agrees with the C++ classifyBias(); the empty field collection (the plugin has no fields); the converter's
TensorRT calls against a recording stand-in; every example's exported program has the expected swish nodes; the
examples print their skip message.

TensorRT layer (`-m tensorrt`, skipped with the reason where Torch-TensorRT, TensorRT, a GPU or the plugin library
is missing): real engines with a SwishBias plugin layer and no PyTorch fallback, outputs against PyTorch.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import logging
import random
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch
from torch import nn

import torchtrt_swish
from torchtrt_swish import compile as ttc
from torchtrt_swish import converter, dtypes, plugin

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = {"02": ROOT / "examples" / "02_torch_compile" / "run.py",
            "03": ROOT / "examples" / "03_torch_tensorrt_aot" / "run.py"}
SKIP_PREFIX = "skipped: Torch-TensorRT/TensorRT not available"  # restated: the test checks the constant too
# The plugin's field contract as the plugin issue documents it (restated here, not read from the code).
DOCUMENTED_FIELDS = {}  # none: inputs [x, bias], a fixed bias is a constant tensor

SWISH = torch.ops.torchtrt_swish.swish.default


def _load_example(key: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"torchtrt_swish_example_{key}", EXAMPLES[key])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _swish_nodes(graph_module: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in graph_module.graph.nodes if n.op == "call_function" and n.target is SWISH]


class Act(nn.Module):
    """A lone swish with a bias of the given shape (filled with distinct values)."""

    def __init__(self, bias_shape):
        super().__init__()
        self.bias = nn.Parameter(torch.arange(float(torch.Size(bias_shape).numel())).reshape(bias_shape))

    def forward(self, x):
        return torchtrt_swish.swish(x, self.bias.to(x.dtype))


def _swish_node(model: nn.Module, x: torch.Tensor, dynamic_shapes=None) -> torch.fx.Node:
    program = ttc.export(model.to(x.dtype), [x], dynamic_shapes=dynamic_shapes)
    (node,) = _swish_nodes(program.graph_module)
    return node


# ---------------------------------------------------------------------------------------------------- CPU layer


def test_converter_module_imports_without_torch_tensorrt():
    code = ("import sys, torchtrt_swish.converter as c, torchtrt_swish.compile as t; "
            "assert callable(c.capability_validator) and callable(t.compile); "
            "print(sorted(m for m in ('torch_tensorrt', 'tensorrt') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]", "importing the converter must not import Torch-TensorRT or TensorRT"


def test_register_is_a_silent_no_op_without_torch_tensorrt(capsys, caplog, monkeypatch):
    if importlib.util.find_spec("torch_tensorrt") is not None:
        pytest.skip("torch_tensorrt is installed here; this checks the machines where it is not")
    monkeypatch.setattr(converter._state, "registered", False)
    with caplog.at_level(logging.DEBUG):
        assert converter.register() is False
        assert converter.register() is False
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""
    assert not [r for r in caplog.records if r.levelno >= logging.INFO]


def _fake_module(monkeypatch, name: str, **attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    module.__dict__.update(attrs)
    monkeypatch.setitem(sys.modules, name, module)
    return module


def test_register_registers_once_with_the_documented_decorator(monkeypatch):
    calls = []

    def dynamo_tensorrt_converter(key, **kwargs):
        def wrap(fn):
            calls.append((key, kwargs, fn))
            return fn
        return wrap

    _fake_module(monkeypatch, "torch_tensorrt")
    _fake_module(monkeypatch, "torch_tensorrt.dynamo")
    _fake_module(monkeypatch, "torch_tensorrt.dynamo.conversion", dynamo_tensorrt_converter=dynamo_tensorrt_converter)
    monkeypatch.setattr(converter._state, "registered", False)
    assert converter.register() is True
    assert converter.register() is True
    assert len(calls) == 1
    key, kwargs, fn = calls[0]
    assert key is SWISH
    assert kwargs == {"capability_validator": converter.capability_validator, "supports_dynamic_shapes": True}
    assert fn is converter.convert_swish


class _Recorder:
    """Stand-ins for the TensorRT/Torch-TensorRT objects the converter touches, recording every call."""

    def __init__(self):
        self.calls: list[tuple] = []
        rec = self

        class Registry:
            def __init__(self):
                self.all_creators: list = []

            def load_library(self, path):
                rec.calls.append(("load_library", path))
                self.all_creators.append(Creator())
                return object()

        class Creator:
            # What the real registry's all_creators lists for our library (checked against the lean runtimes).
            name, plugin_version, plugin_namespace = plugin.PLUGIN_NAME, plugin.PLUGIN_VERSION, plugin.PLUGIN_NAMESPACE

            def create_plugin(self, name, fields, phase):
                rec.calls.append(("create_plugin", name, list(fields), phase))
                return "plugin"

        class Layer:
            name = None

            def get_output(self, i):
                return ("out", self.name, i)

        class Net:
            def add_plugin_v3(self, inputs, shape_inputs, plugin_):
                rec.calls.append(("add_plugin_v3", inputs, shape_inputs, plugin_))
                rec.layer = Layer()
                return rec.layer

        self.registry = Registry()
        self.ctx = types.SimpleNamespace(net=Net())


def test_convert_swish_makes_the_documented_tensorrt_calls(monkeypatch, tmp_path):
    rec = _Recorder()
    lib = tmp_path / plugin.LIBRARY_NAME
    trt = _fake_module(
        monkeypatch, "tensorrt", get_plugin_registry=lambda: rec.registry,
        TensorRTPhase=types.SimpleNamespace(BUILD="BUILD"),
        PluginField=lambda *a: a, PluginFieldCollection=lambda fields: list(fields),
        PluginFieldType=types.SimpleNamespace(FLOAT32="FLOAT32"))
    _fake_module(monkeypatch, "torch_tensorrt")
    _fake_module(monkeypatch, "torch_tensorrt.dynamo")
    _fake_module(monkeypatch, "torch_tensorrt.dynamo.conversion")
    _fake_module(monkeypatch, "torch_tensorrt.dynamo.conversion.converter_utils",
                 get_trt_tensor=lambda ctx, value, name: ("itensor", name, value))
    lib.write_bytes(b"")
    monkeypatch.setattr(plugin, "plugin_library_path", lambda: lib)

    bias = torch.tensor([0.5])
    out1 = converter.convert_swish(rec.ctx, SWISH, ("x_itensor", bias), {}, "act/swish")
    out2 = converter.convert_swish(rec.ctx, SWISH, (), {"x": "x2", "bias": bias}, "act2/swish")

    assert [c for c in rec.calls if c[0] == "load_library"] == [("load_library", str(lib))], "load once"
    creates = [c for c in rec.calls if c[0] == "create_plugin"]
    assert creates[0] == ("create_plugin", "act/swish", [], trt.TensorRTPhase.BUILD)
    adds = [c for c in rec.calls if c[0] == "add_plugin_v3"]
    assert adds[0][1] == [("itensor", "act/swish_x", "x_itensor"), ("itensor", "act/swish_bias", bias)]
    assert adds[0][2] == [] and adds[0][3] == "plugin"
    assert out1 == ("out", "[SwishBias]-[act/swish]", 0)
    assert out2 == ("out", "[SwishBias]-[act2/swish]", 0)


def test_get_creator_skips_a_creator_that_registered_itself(monkeypatch):
    rec = _Recorder()
    mine = types.SimpleNamespace(name=plugin.PLUGIN_NAME, plugin_version=plugin.PLUGIN_VERSION,
                                 plugin_namespace=plugin.PLUGIN_NAMESPACE)
    rec.registry.all_creators = [mine]
    _fake_module(monkeypatch, "tensorrt", get_plugin_registry=lambda: rec.registry)
    assert converter.get_creator() is mine
    assert not [c for c in rec.calls if c[0] == "load_library"], "a dlopen-registered creator must not be reloaded"


def test_load_plugin_without_any_tensorrt_names_what_it_tried(monkeypatch):
    for name in plugin.TENSORRT_MODULES:
        monkeypatch.setitem(sys.modules, name, None)  # makes the import fail even where the module exists
    with pytest.raises(plugin.PluginLoadError) as info:
        plugin.load_plugin()
    assert all(f"{name}: " in str(info.value) for name in plugin.TENSORRT_MODULES), str(info.value)


def test_tensorrt_module_prefers_a_runtime_already_imported(monkeypatch):
    for name in plugin.TENSORRT_MODULES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    lean = _fake_module(monkeypatch, "tensorrt_lean_bindings")
    assert plugin.tensorrt_module() is lean


def test_load_plugin_reports_a_library_the_registry_refuses(monkeypatch, tmp_path):
    rec = _Recorder()
    rec.registry.load_library = lambda path: None  # TensorRT's answer for a file that is no plugin library
    lib = tmp_path / "not_a_plugin.so"
    lib.write_bytes(b"")
    with pytest.raises(plugin.PluginLoadError, match=f"refused to load {lib}"):
        plugin.load_plugin(types.SimpleNamespace(get_plugin_registry=lambda: rec.registry), lib)


def test_no_fields_is_an_empty_collection(monkeypatch):
    # The plugin has no fields: the converter hands the creator an empty collection, never a bias field.
    _fake_module(monkeypatch, "tensorrt", PluginFieldCollection=lambda fields: ("collection", list(fields)))
    assert converter.no_fields() == ("collection", [])


def test_plugin_fields_constant_is_the_documented_contract():
    assert plugin.PLUGIN_FIELDS == DOCUMENTED_FIELDS


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_validator_accepts_supported_dtypes(dtype):
    node = _swish_node(Act((4, 1, 1)), torch.randn(2, 4, 3, 3, dtype=dtype))
    assert converter.node_support(node) == (True, converter.PER_CHANNEL_DIM1)
    assert converter.capability_validator(node, None, creator_check=lambda: (True, ""))


def test_validator_rejects_float64_and_says_why(caplog):
    node = _swish_node(Act((1,)), torch.randn(2, 4, dtype=torch.float64))
    ok, why = converter.node_support(node)
    assert not ok and "torch.float64" in why
    with caplog.at_level(logging.DEBUG, logger="torch_tensorrt"):
        assert converter.capability_validator(node, None, creator_check=lambda: (True, "")) is False
    (record,) = [r for r in caplog.records if r.name.startswith("torch_tensorrt")]
    assert record.levelno == logging.DEBUG and "torch.float64" in record.getMessage()


def test_validator_rejects_when_the_creator_is_missing(caplog):
    node = _swish_node(Act((1,)), torch.randn(2, 4))
    with caplog.at_level(logging.DEBUG, logger="torch_tensorrt"):
        assert not converter.capability_validator(node, None, creator_check=lambda: (False, "creator missing"))
    assert any("creator missing" in r.getMessage() for r in caplog.records)


def test_validator_without_tensorrt_sends_nodes_to_pytorch(monkeypatch):
    # The default creator check loads the library; where TensorRT is absent that fails, so nothing is claimed.
    if importlib.util.find_spec("tensorrt") is not None:
        pytest.skip("tensorrt is installed here")
    monkeypatch.setattr(converter._state, "creator_status", None)
    node = _swish_node(Act((1,)), torch.randn(2, 4))
    assert converter.capability_validator(node) is False


LAYOUTS = [
    # x shape, bias shape, expected layout (None: rejected)
    ((2, 4, 3, 5), (1,), converter.SCALAR),
    ((2, 4, 3, 5), (), converter.SCALAR),
    ((2, 4, 3, 5), (1, 1, 1, 1), converter.SCALAR),
    ((2, 4, 3, 5), (4, 1, 1), converter.PER_CHANNEL_DIM1),
    ((2, 4, 3, 5), (1, 4, 1, 1), converter.PER_CHANNEL_DIM1),
    ((2, 4, 3, 5), (5,), converter.PER_CHANNEL_LAST),
    ((6, 33), (33,), converter.PER_CHANNEL_LAST),
    ((2, 4, 3, 5), (2, 4, 3, 5), converter.FULL),
    ((1, 4, 3, 5), (4, 3, 5), converter.FULL),
    ((2, 4, 3, 5), (3, 5), None),  # trailing block: the kernel could index it, the plugin contract excludes it
    ((2, 4, 3, 5), (4, 3, 1), None),  # block over dims 1-2
    ((2, 4, 3, 5), (4, 1, 5), None),  # not contiguous
    ((2, 4, 3, 5), (1, 1, 3, 1), None),  # per-channel on dim 2
    ((2, 4, 3, 5), (2, 1, 1, 1), None),  # per-batch
]


@pytest.mark.parametrize("x_shape,bias_shape,expected", LAYOUTS, ids=lambda v: str(v))
def test_validator_bias_layouts(x_shape, bias_shape, expected):
    node = _swish_node(Act(bias_shape), torch.randn(x_shape))
    ok, why = converter.node_support(node)
    if expected is None:
        assert not ok and why
    else:
        assert (ok, why) == (True, expected)


def test_per_channel_last_needs_more_than_one_row():
    # Guard the (6, 33) case above: with a leading dim the C++ rule says per-channel (last dim), not full.
    assert converter.classify_bias((6, 33), (33,)) == (converter.PER_CHANNEL_LAST, "")
    assert converter.classify_bias((1, 33), (33,)) == (converter.FULL, "")


def test_validator_accepts_dynamic_batch_for_per_channel_bias():
    node = _swish_node(Act((8, 1, 1)), torch.randn(4, 8, 6, 6), dynamic_shapes=[{0: (1, 64)}])
    assert node.args[0].meta["val"].shape[0].node.maybe_as_int() is None, "batch must really be symbolic"
    assert converter.node_support(node) == (True, converter.PER_CHANNEL_DIM1)
    node = _swish_node(Act((1,)), torch.randn(4, 8, 6, 6), dynamic_shapes=[{0: (1, 64)}])
    assert converter.node_support(node) == (True, converter.SCALAR)


def test_validator_full_bias_needs_a_static_batch():
    static = _swish_node(Act((8, 6, 6)), torch.randn(1, 8, 6, 6))
    assert converter.node_support(static) == (True, converter.FULL)
    dynamic = _swish_node(Act((8, 6, 6)), torch.randn(4, 8, 6, 6), dynamic_shapes=[{0: (1, 64)}])
    ok, why = converter.node_support(dynamic)
    assert not ok and "block" in why


def test_validator_reads_get_attr_nodes_without_metadata():
    program = ttc.export(Act((4, 1, 1)), [torch.randn(2, 4, 3, 3)])
    gm = program.module()
    (node,) = _swish_nodes(gm)
    for n in gm.graph.nodes:
        if n.op == "get_attr":
            n.meta.pop("val", None)
            n.meta.pop("tensor_meta", None)
    assert converter.node_support(node) == (True, converter.PER_CHANNEL_DIM1)


CPP_HARNESS = r"""
#include "bias_layout.h"
#include <iostream>
#include <vector>
int main() {
    int xr, br;
    while (std::cin >> xr >> br) {
        std::vector<int64_t> x(xr), b(br);
        for (auto& v : x) std::cin >> v;
        for (auto& v : b) std::cin >> v;
        auto c = torchtrt_swish::classifyBias(x.data(), xr, b.data(), br);
        std::cout << (c.broadcastable && c.periodic ? torchtrt_swish::biasKindName(c.kind) : "rejected") << "\n";
    }
}
"""


def _layout_cases(n: int = 400) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    rng = random.Random(0)
    cases = [(x, b) for x, b, _ in LAYOUTS]
    for _ in range(n):
        x = tuple(rng.choice([1, 2, 3, 4, 5]) for _ in range(rng.randint(0, 5)))
        start = rng.randint(0, len(x))
        b = tuple(d if rng.random() < 0.6 else 1 for d in x[start:])
        if rng.random() < 0.1 and b:
            b = (*b[:-1], b[-1] + 1)  # not broadcastable
        cases.append((x, b))
    return cases


def test_bias_layout_twin_agrees_with_cpp_classify_bias(tmp_path):
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler to build the classifyBias() harness")
    src, exe = tmp_path / "harness.cpp", tmp_path / "harness"
    src.write_text(CPP_HARNESS)
    subprocess.run([cxx, "-std=c++17", "-O0", f"-I{ROOT / 'csrc' / 'kernels'}", str(src), "-o", str(exe)],
                   check=True, capture_output=True, timeout=300)
    cases = _layout_cases()
    stdin = "".join(f"{len(x)} {len(b)} {' '.join(map(str, x))} {' '.join(map(str, b))}\n" for x, b in cases)
    cpp = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, check=True).stdout.split("\n")
    for (x, b), expected in zip(cases, cpp):
        layout, _ = converter.classify_bias(x, b)
        assert (layout or "rejected") == expected, f"x {x} bias {b}"


@pytest.mark.parametrize("key", sorted(EXAMPLES))
def test_every_example_model_exports_with_the_expected_swish_nodes(key):
    for case in _load_example(key).models():
        inputs = [t.to(case["dtype"]) for t in case["inputs"]]
        program = ttc.export(case["model"].to(case["dtype"]), inputs, dynamic_shapes=case["dynamic_shapes"])
        nodes = _swish_nodes(program.graph_module)
        assert len(nodes) == case["swish_nodes"], case["name"]
        for node in nodes:  # and Torch-TensorRT's validator would claim every one of them
            ok, why = converter.node_support(node)
            assert ok, f"{case['name']}: {why}"


@pytest.mark.parametrize("key", sorted(EXAMPLES))
def test_examples_print_the_skip_message_without_tensorrt(key):
    reason = ttc.unavailable_reason()
    if reason is None:
        pytest.skip("TensorRT is available here; the tensorrt layer runs the examples for real")
    proc = subprocess.run([sys.executable, str(EXAMPLES[key])], capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == f"{SKIP_PREFIX} ({reason})"


def test_shape_ranges_and_trtexec_command():
    assert ttc.shape_ranges([(4, 3, 8, 8), (5,)], [{0: (1, 16)}]) == [
        ((1, 3, 8, 8), (4, 3, 8, 8), (16, 3, 8, 8)), ((5,), (5,), (5,))]
    assert ttc.shape_ranges([(4, 3)], [{0: (1, 2, 8)}]) == [((1, 3), (2, 3), (8, 3))]
    with pytest.raises(ValueError):
        ttc.shape_ranges([(4, 3)], [{0: (8, 16)}])  # example batch outside the range
    with pytest.raises(ValueError):
        ttc.shape_ranges([(4, 3)], [{2: (1, 8)}])
    assert ttc.trtexec_command("m.engine", "/p/lib.so", {"x": (4, 3, 8, 8)}) == (
        "trtexec --loadEngine=m.engine --dynamicPlugins=/p/lib.so --shapes=x:4x3x8x8")


def test_entry_points_say_why_they_cannot_run():
    reason = ttc.unavailable_reason()
    if reason is None:
        pytest.skip("TensorRT is available here")
    with pytest.raises(RuntimeError, match="Torch-TensorRT/TensorRT not available"):
        ttc.compile(torchtrt_swish.Net(), [torch.randn(1, 1, 5, 5)])


# ----------------------------------------------------------------------------------------------- TensorRT layer


@pytest.fixture(scope="module")
def trt_ready():
    """Skip (with the reason) unless Torch-TensorRT, TensorRT, a GPU and the plugin library are all here."""
    reason = ttc.unavailable_reason()
    if reason is not None:
        pytest.skip(f"needs Torch-TensorRT, TensorRT, a GPU and the plugin library: {reason}")
    import torch_tensorrt

    # The PyTorch side is the reference: no TF32 in its fp32 convolutions (TensorRT side: disable_tf32).
    prev = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield torch_tensorrt
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = prev


def _engine_layer_names(module: nn.Module) -> list[str]:
    names = []
    for sub in module.modules():
        if hasattr(sub, "get_layer_info") and not isinstance(sub, torch.fx.GraphModule):
            info = json.loads(sub.get_layer_info())
            names += [layer if isinstance(layer, str) else layer.get("Name", "") for layer in info.get("Layers", [])]
    return names


def _plugin_layers(names: list[str]) -> list[str]:
    # Exact prefix: TensorRT's reformat layers quote the consumer's name ("Reformatting CopyNode ... to [SwishBias]").
    return [n for n in names if n.startswith(f"[{plugin.PLUGIN_NAME}]-[")]


def _pytorch_swish_nodes(module: nn.Module) -> int:
    return sum(len(_swish_nodes(m)) for m in module.modules() if isinstance(m, torch.fx.GraphModule))


def _assert_close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> None:
    atol, rtol = dtypes.tolerance(dtype)
    torch.testing.assert_close(out.float(), ref.float(), atol=atol, rtol=rtol)


def _aot_cases():
    ex = _load_example("03")
    return {case["name"]: case for case in ex.models()}


@pytest.mark.tensorrt
@pytest.mark.parametrize("name", ["seed_net_fp32", "efficient_block_fp32_dynamic", "efficient_block_fp16_dynamic"])
def test_trt_compile_uses_the_plugin_and_matches_pytorch(trt_ready, name):
    case = _aot_cases()[name]
    dtype = case["dtype"]
    model = case["model"].to(device="cuda", dtype=dtype)
    trt_model = ttc.compile(model, case["inputs"], dtype=dtype, dynamic_shapes=case["dynamic_shapes"],
                            disable_tf32=True)
    layers = _engine_layer_names(trt_model)
    assert len(_plugin_layers(layers)) == case["swish_nodes"], layers
    assert _pytorch_swish_nodes(trt_model) == 0, "a swish node fell back to PyTorch"
    for batch in case["batches"]:
        x = torch.randn(batch, *case["inputs"][0].shape[1:], device="cuda", dtype=dtype)
        with torch.no_grad():
            _assert_close(trt_model(x), model(x), dtype)


@pytest.mark.tensorrt
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_trt_torch_compile_matches_pytorch(trt_ready, dtype):
    block = _load_example("02").EfficientBlock().eval().to(device="cuda", dtype=dtype)
    fast = ttc.torch_compile(block, options={"require_full_compilation": True, "pass_through_build_failures": True,
                                             "disable_tf32": True})
    for batch in (1, 4):
        x = torch.randn(batch, 3, 16, 16, device="cuda", dtype=dtype)
        with torch.no_grad():
            _assert_close(fast(x), block(x), dtype)


@pytest.mark.tensorrt
def test_trt_save_load_round_trip(trt_ready, tmp_path):
    case = _aot_cases()["efficient_block_fp32_dynamic"]
    model = case["model"].to(device="cuda")
    trt_model = ttc.compile(model, case["inputs"], dynamic_shapes=case["dynamic_shapes"], disable_tf32=True)
    loaded = ttc.load(ttc.save(trt_model, tmp_path / "block.ep"))
    assert _pytorch_swish_nodes(loaded) == 0
    for batch in (1, 8):
        x = torch.randn(batch, 3, 16, 16, device="cuda")
        with torch.no_grad():
            _assert_close(loaded(x), model(x), torch.float32)


@pytest.mark.tensorrt
def test_trt_standalone_engine_round_trip(trt_ready, tmp_path, capsys):
    import tensorrt as trt

    case = _aot_cases()["efficient_block_fp32_dynamic"]
    model = case["model"].to(device="cuda")
    path = ttc.export_engine(model, case["inputs"], tmp_path / "block.engine",
                             dynamic_shapes=case["dynamic_shapes"], disable_tf32=True)
    assert "--dynamicPlugins=" in capsys.readouterr().out

    plugin.load_plugin(trt)
    engine = trt.Runtime(trt.Logger(trt.Logger.WARNING)).deserialize_cuda_engine(path.read_bytes())
    assert engine is not None
    info = json.loads(engine.create_engine_inspector().get_engine_information(trt.LayerInformationFormat.JSON))
    names = [layer if isinstance(layer, str) else layer.get("Name", "") for layer in info.get("Layers", [])]
    assert len(_plugin_layers(names)) == case["swish_nodes"], names

    x = torch.randn(6, 3, 16, 16, device="cuda")
    io = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    (inp,) = [n for n in io if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
    (outp,) = [n for n in io if engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT]
    context = engine.create_execution_context()
    context.set_input_shape(inp, tuple(x.shape))
    y = torch.empty(tuple(context.get_tensor_shape(outp)), device="cuda", dtype=torch.float32)
    context.set_tensor_address(inp, x.data_ptr())
    context.set_tensor_address(outp, y.data_ptr())
    stream = torch.cuda.current_stream()
    assert context.execute_async_v3(stream.cuda_stream)
    stream.synchronize()
    with torch.no_grad():
        _assert_close(y, model(x), torch.float32)


@pytest.mark.tensorrt
@pytest.mark.parametrize("key", sorted(EXAMPLES))
def test_trt_examples_run(trt_ready, key, tmp_path):
    argv = [sys.executable, str(EXAMPLES[key])] + (["--out", str(tmp_path)] if key == "03" else [])
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "MISMATCH" not in proc.stdout and SKIP_PREFIX not in proc.stdout


def test_layout_cases_cover_every_kind():
    kinds = {converter.classify_bias(x, b)[0] for x, b in _layout_cases()}
    assert {converter.SCALAR, converter.PER_CHANNEL_DIM1, converter.PER_CHANNEL_LAST, converter.FULL,
            converter.BLOCK, None} <= kinds


def test_tensor_info_marks_symbolic_dims_none():
    node = _swish_node(Act((1,)), torch.randn(4, 8), dynamic_shapes=[{0: (1, 64)}])
    assert converter.tensor_info(node.args[0]) == ((None, 8), torch.float32)
    assert converter.tensor_info(node.args[1]) == ((1,), torch.float32)


@pytest.mark.parametrize("x, bias, expected", [
    ((2, 3, 4, 5), (3, 1, 1), "per-channel (dim 1)"),
    ((None, 3, 4), (4,), "per-channel (last dim)"),
    ((2, 3, 4), (3, 4), None),  # block: classified, but not a layout the plugin runs
    ((2, 3), (4,), None),       # not broadcastable
])
def test_plugin_layout_is_the_one_accept_rule_for_converter_and_onnx_contract(x, bias, expected):
    from onnx_path.contract import bias_problem

    from torchtrt_swish.layout import plugin_layout

    layout, why = plugin_layout(x, bias)
    assert layout == expected and (why == "") == (expected is not None)
    # ONNX symbolic dims (dim_param names) are dynamic, and the ONNX contract gives the same reason.
    symbolic = [d if d is not None else "N" for d in x]
    assert plugin_layout(symbolic, bias) == (layout, why)
    assert bias_problem((1, symbolic), (1, list(bias))) == (why or None)
    if expected is None and len(bias) < len(x):
        assert "not one the plugin supports" in why or "does not broadcast" in why
