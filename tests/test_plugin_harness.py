"""Conformance of the SwishBias TensorRT plugin, driven without TensorRT through the `_trt_harness` module.

The harness dlopens libtorchtrt_swish_plugin.so, takes the creator from getCreators and calls the plugin only
through the public IPluginV3 interfaces, the way TensorRT's builder and runtime do.

CPU layer (CI): creator identity and fields, createPlugin with good and bad fields, capabilities, output types and
shapes (harness-side IExprBuilder), every supportsFormatCombination case, configurePlugin / onShapeChange layout
rules, workspace, clone, attachToContext, serialization round trip, error paths (including enqueue's CUDA error
path where no GPU exists), self-registration against a stand-in libnvinfer.so.10, the library's ELF contract, and
create/destroy churn without leaks (plus valgrind, marked slow).

GPU layer (`-m cuda`, H200): enqueue bit-identical to torchtrt_swish.swish for every dtype x bias layout x shape
(empty, odd, > 2^31 elements when memory allows) on a non-default stream, two plugins on two streams at once, the
one-input form with the field bias, CUDA-graph capture, and device memory returned on destruction.
"""
from __future__ import annotations

import importlib.util
import itertools
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import sysconfig
import textwrap
import threading
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = Path(os.environ.get("TORCHTRT_SWISH_BUILD_DIR", ROOT / "build" / "native")).resolve()
EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
HARNESS_FILE = BUILD_DIR / f"_trt_harness{EXT_SUFFIX}"
FAKE_NVINFER = BUILD_DIR / "fake_tensorrt" / "libnvinfer.so.10"
BUILD_HINT = ("build it with `python tools/native_build.py` (or `pip install --no-build-isolation -e .`); it needs nvcc, "
              "pybind11 and the TensorRT headers")


def _load_module_from(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _package_dir() -> Path:
    """torchtrt_swish's folder, found without importing it (its __init__ needs the compiled op)."""
    spec = importlib.util.find_spec("torchtrt_swish")
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    return ROOT / "torchtrt_swish"


# plugin.py has no heavy imports: its constants are the contract these tests check the library against.
PLUGIN_META = _load_module_from(_package_dir() / "plugin.py", "torchtrt_swish_plugin_meta")


def _plugin_path() -> Path | None:
    for cand in (os.environ.get("TORCHTRT_SWISH_PLUGIN"), _package_dir() / PLUGIN_META.LIBRARY_NAME,
                 BUILD_DIR / PLUGIN_META.LIBRARY_NAME):
        if cand and Path(cand).exists():
            return Path(cand).resolve()
    return None


PLUGIN_PATH = _plugin_path()
needs_plugin = pytest.mark.skipif(PLUGIN_PATH is None,
                                  reason=f"{PLUGIN_META.LIBRARY_NAME} was not built: {BUILD_HINT}")


@pytest.fixture(scope="module")
def h():
    """The _trt_harness module."""
    if PLUGIN_PATH is None:
        pytest.skip(f"{PLUGIN_META.LIBRARY_NAME} was not built: {BUILD_HINT}")
    if not HARNESS_FILE.exists():
        pytest.skip(f"conformance harness {HARNESS_FILE.name} not found in {BUILD_DIR}: {BUILD_HINT}")
    return _load_module_from(HARNESS_FILE, "_trt_harness")


@pytest.fixture(scope="module")
def lib(h):
    library = h.Library(str(PLUGIN_PATH))
    yield library
    library.close()


@pytest.fixture(scope="module")
def creator(lib):
    (c,) = lib.creators()
    return c


@pytest.fixture(autouse=True)
def logs(request):
    """Messages the plugin logged during the test: logs() -> [(severity, message)]."""
    if "h" not in request.fixturenames:
        yield None
        return
    harness = request.getfixturevalue("h")
    harness.take_logs()
    seen: list[tuple[str, str]] = []

    def get():
        seen.extend(harness.take_logs())
        return list(seen)

    yield get


def errors(logs) -> list[str]:
    return [m for s, m in logs() if s in ("error", "internal_error")]


# ---------------------------------------------------------------------------------------------- helpers

SUPPORTED = ("float32", "float16", "bfloat16")


def bias_field(value: float = 0.0, *, name="bias", ftype="float32", length=1, data=...):
    """One field tuple (name, type, data bytes, length); data defaults to the float32 bytes of value."""
    if data is ...:
        data = struct.pack("<f", value)
    return (name, ftype, data, length)


def make(creator, bias: float | None = None, phase="build"):
    fields = None if bias is None else [bias_field(bias)]
    p = creator.create("swish", fields, phase)
    assert p is not None
    return p


def descs(h, dtype, x, bias=None, out=None, **kw):
    """(inputs, outputs) TensorDescs for x (and bias) of one dtype; out defaults to x's dims."""
    ins = [h.TensorDesc(dtype, list(x), **kw)]
    if bias is not None:
        ins.append(h.TensorDesc(dtype, list(bias)))
    return ins, [h.TensorDesc(dtype, list(x if out is None else out), **kw)]


# x shape, bias shape: layouts the plugin must accept (name as in bias_layout.h)
ACCEPTED = [
    ((), (), "scalar"),
    ((5,), (1,), "scalar"),
    ((2, 3, 4), (), "scalar"),
    ((2, 3, 4), (1, 1, 1), "scalar"),
    ((2, 3, 4, 5), (3, 1, 1), "per-channel dim 1"),
    ((2, 3, 4, 5), (1, 3, 1, 1), "per-channel dim 1"),
    ((7, 3), (3,), "per-channel last"),
    ((2, 3, 4), (4,), "per-channel last"),
    ((2, 3, 4), (1, 1, 4), "per-channel last"),
    ((3, 4), (3, 4), "full"),
    ((2, 3, 4), (2, 3, 4), "full"),
    ((1, 3, 4), (3, 4), "full"),
    ((0, 3), (3,), "per-channel last, empty"),
    ((2, 0, 5), (1, 0, 1), "dim 1, empty"),
]

# broadcastable but a block layout, or not broadcastable without changing x: the plugin must reject them
REJECTED = [
    ((2, 3, 4), (3, 4), "block"),
    ((2, 3, 4, 5), (4, 5), "block"),
    ((2, 3, 4, 5), (3, 4, 1), "block"),
    ((2, 3, 4, 5), (1, 1, 4, 1), "single channel on dim 2"),
    ((2, 3), (4,), "mismatch"),
    ((2, 3), (2, 3, 1), "rank grows"),
    ((3,), (1, 3), "rank grows"),
    ((), (1,), "rank grows from 0-d"),
    ((2, 1), (2, 5), "bias widens x"),
]


# ---------------------------------------------------------------------------------------------- library and creator


def test_get_creators_returns_one_v3_creator(lib, creator):
    assert len(lib.creators()) == 1
    assert creator.interface_info == ("PLUGIN CREATOR_V3ONE", 1, 0)
    assert creator.api_language == 0  # C++


def test_creator_identity_matches_package_constants(creator):
    assert (creator.name, creator.version, creator.namespace) == (
        PLUGIN_META.PLUGIN_NAME, PLUGIN_META.PLUGIN_VERSION, PLUGIN_META.PLUGIN_NAMESPACE) == (
        "SwishBias", "1", "torchtrt_swish")


def test_field_names_match_the_field_contract(creator):
    assert PLUGIN_META.PLUGIN_FIELDS == {"bias": ("float32", 1)}
    fields = creator.field_names()
    assert [(n, t, ln) for n, t, ln, _ in fields] == [(n, t, ln) for n, (t, ln) in PLUGIN_META.PLUGIN_FIELDS.items()]
    assert not any(has_data for *_, has_data in fields)  # a description, not values


def test_loading_twice_and_closing_in_any_order(h, lib, logs):
    a = h.Library(str(PLUGIN_PATH))
    b = h.Library(str(PLUGIN_PATH))
    (ca,), (cb,) = a.creators(), b.creators()
    pa, pb = make(ca, 1.0), make(cb, 2.0)
    a.close()
    b.close()  # plugins keep their library referenced; the library is NODELETE anyway
    assert pa.name == pb.name == "SwishBias"
    assert pa.fields_to_serialize() != pb.fields_to_serialize()
    pa.close()
    pb.close()
    (c,) = lib.creators()  # the fixture's handle is unaffected
    assert c.name == "SwishBias"
    assert errors(logs) == []


# ---------------------------------------------------------------------------------------------- createPlugin

GOOD_FIELDS = {
    "no collection": dict(null_collection=True),
    "empty list": dict(fields=[]),
    "none": dict(fields=None),
    "bias 0.5": dict(fields=[bias_field(0.5)]),
    "bias -3": dict(fields=[bias_field(-3.0)]),
    "bias 0": dict(fields=[bias_field(0.0)]),
    "bias nan": dict(fields=[bias_field(math.nan)]),
    "bias inf": dict(fields=[bias_field(math.inf)]),
    "bias max float": dict(fields=[bias_field(3.4028234663852886e38)]),
    "bias denormal": dict(fields=[bias_field(1e-45)]),
}


@pytest.mark.parametrize("phase", ["build", "runtime"])
@pytest.mark.parametrize("case", list(GOOD_FIELDS))
def test_create_accepts_good_fields(creator, logs, phase, case):
    p = creator.create("layer", phase=phase, **GOOD_FIELDS[case])
    assert p is not None
    (name, ftype, data, length), = p.fields_to_serialize()
    assert (name, ftype, length) == ("bias", "float32", 1)
    fields = GOOD_FIELDS[case].get("fields")
    expected = fields[0][2] if fields else struct.pack("<f", 0.0)
    assert data == expected  # bit-exact, NaN payload included
    assert errors(logs) == []


@pytest.mark.parametrize("phase", ["build", "runtime"])
def test_create_accepts_a_null_layer_name(creator, logs, phase):
    assert creator.create(None, [bias_field(1.0)], phase) is not None
    assert errors(logs) == []


BAD_FIELDS = {
    "unknown name": ([bias_field(1.0, name="beta")], "unknown field 'beta'"),
    "name case": ([bias_field(1.0, name="Bias")], "unknown field 'Bias'"),
    "seed attribute name": ([bias_field(1.0, name="b")], "unknown field 'b'"),
    "null name": ([bias_field(1.0, name=None)], "no name"),
    "unknown after good": ([bias_field(1.0), bias_field(1.0, name="extra")], "unknown field 'extra'"),
    "duplicate": ([bias_field(1.0), bias_field(2.0)], "more than once"),
    "type float16": ([bias_field(data=b"\x00\x3c", ftype="float16")], "type kFLOAT32"),
    "type float64": ([bias_field(data=struct.pack("<d", 1.0), ftype="float64")], "type kFLOAT32"),
    "type bfloat16": ([bias_field(data=b"\x80\x3f", ftype="bfloat16")], "type kFLOAT32"),
    "type int32": ([bias_field(data=struct.pack("<i", 1), ftype="int32")], "type kFLOAT32"),
    "type int64": ([bias_field(data=struct.pack("<q", 1), ftype="int64")], "type kFLOAT32"),
    "type char": ([bias_field(data=b"1.0\x00", ftype="char", length=4)], "type kFLOAT32"),
    "type unknown": ([bias_field(data=b"\x00" * 4, ftype="unknown", length=4)], "type kFLOAT32"),
    "type dims": ([bias_field(data=b"\x00" * 72, ftype="dims")], "type kFLOAT32"),
    "type out of range": ([bias_field(1.0, ftype=99)], "type kFLOAT32"),
    "length 0 (truncated)": ([bias_field(1.0, length=0)], "length 1"),
    "length 2": ([bias_field(data=struct.pack("<2f", 1.0, 2.0), length=2)], "length 1"),
    "length -1": ([bias_field(1.0, length=-1)], "length 1"),
    "null data": ([bias_field(data=None)], "no data"),
}


@pytest.mark.parametrize("phase", ["build", "runtime"])
@pytest.mark.parametrize("case", list(BAD_FIELDS))
def test_create_rejects_bad_fields(creator, logs, phase, case):
    fields, reason = BAD_FIELDS[case]
    assert creator.create("layer", fields, phase) is None
    errs = errors(logs)
    assert len(errs) == 1 and "createPlugin" in errs[0] and reason in errs[0], errs


@pytest.mark.parametrize("case, kwargs, reason", [
    ("negative count", dict(fields=[], nb_fields=-1), "negative field count"),
    ("count without array", dict(fields=[], nb_fields=1), "field array is null"),
    ("unknown phase", dict(fields=[bias_field(1.0)], phase=2), "unknown TensorRTPhase"),
])
def test_create_rejects_bad_collections(creator, logs, case, kwargs, reason):
    assert creator.create("layer", **kwargs) is None
    errs = errors(logs)
    assert len(errs) == 1 and reason in errs[0], errs


# ---------------------------------------------------------------------------------------------- IPluginV3 / core


@pytest.mark.parametrize("phase", ["build", "runtime"])
def test_capability_interfaces(creator, logs, phase):
    p = make(creator, 0.25, phase)
    assert p.interface_info == ("PLUGIN", 1, 0)
    assert p.capability("core") == ("PLUGIN_V3ONE_CORE", 1, 0)
    assert p.capability("runtime") == ("PLUGIN_V3ONE_RUNTIME", 1, 0)
    assert p.capability("build") == ("PLUGIN_V3ONE_BUILD", 1, 0)  # build-phase plugins must; runtime ones may
    assert errors(logs) == []


@pytest.mark.parametrize("bad", [3, -1, 1000])
def test_unknown_capability_is_null_and_logged(creator, logs, bad):
    assert make(creator).capability(bad) is None
    errs = errors(logs)
    assert len(errs) == 1 and "PluginCapabilityType" in errs[0]


def test_core_identity_and_output_count(creator):
    p = make(creator)
    assert (p.name, p.version, p.namespace) == ("SwishBias", "1", "torchtrt_swish")
    assert p.nb_outputs() == 1


# ---------------------------------------------------------------------------------------------- getOutputDataTypes


@pytest.mark.parametrize("nb_inputs", [1, 2])
@pytest.mark.parametrize("x_type", ["float32", "float16", "bfloat16", "int8", "int32", "bool", "uint8", "fp8",
                                    "int64", "int4", "fp4", "e8m0"])
def test_output_data_types(h, creator, logs, nb_inputs, x_type):
    rc, types = make(creator).output_data_types([x_type] * nb_inputs)
    if x_type in SUPPORTED:
        assert (rc, types) == (0, [x_type])
        assert errors(logs) == []
    else:
        assert rc != 0
        assert any("unsupported type" in e for e in errors(logs))


def test_output_data_type_follows_x_even_if_bias_differs(creator, logs):
    # Weakly typed networks may present another bias type; TensorRT reconciles it via supportsFormatCombination.
    assert make(creator).output_data_types(["float16", "float32"]) == (0, ["float16"])
    assert errors(logs) == []


@pytest.mark.parametrize("input_types, nb_outputs, null", [
    ([], 1, False), (["float32"] * 3, 1, False), (["float32"], 0, False), (["float32"], 2, False),
    (["float32"], 1, True),
])
def test_output_data_types_bad_arguments(creator, logs, input_types, nb_outputs, null):
    rc, _ = make(creator).output_data_types(input_types, nb_outputs, null)
    assert rc != 0
    assert len(errors(logs)) == 1


# ---------------------------------------------------------------------------------------------- getOutputShapes

SHAPES = [(), (1,), (7,), (2, 3), (2, 3, 4, 5), (1, 1, 1, 1, 1, 1, 1, 1), (0, 5), (2**31 + 5, 3)]


def _declared(shape, how):
    if how == "constant":
        return list(shape)
    if how == "anonymous":
        return [-1] * len(shape)
    if how == "named":
        return [f"s{i}" for i in range(len(shape))]
    return [d if i % 2 else f"s{i}" for i, d in enumerate(shape)]  # mixed


@pytest.mark.parametrize("how", ["constant", "anonymous", "named", "mixed"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_output_shape_is_x_shape(creator, logs, shape, how):
    x = _declared(shape, how)
    expected = [f"in0.d{i}" if d == -1 else d for i, d in enumerate(x)]
    for inputs in ([x], [x, [1] * len(shape)], [x, []]):
        rc, outs, from_builder = make(creator).output_shapes(inputs)
        assert (rc, outs, from_builder) == (0, [expected], True)
    assert errors(logs) == []


@pytest.mark.parametrize("x, bias", [(x, b) for x, b, _ in ACCEPTED] + [
    (["N", "C", "H", "W"], ["C", 1, 1]), (["N", "C", "H", "W"], [-1, 1, 1]), ([-1, 3, -1, -1], [1, 3, 1, 1]),
    (["N", "T", "C"], ["C"]), (["N", 8], [8]), (["N", 3, 4], [3, 4]),  # block for N > 1: decided in configure
], ids=str)
def test_output_shapes_accept_layouts_some_shape_supports(creator, logs, x, bias):
    rc, outs, _ = make(creator).output_shapes([list(x), list(bias)])
    assert rc == 0 and outs == [[f"in0.d{i}" if d == -1 else d for i, d in enumerate(x)]]
    assert errors(logs) == []


@pytest.mark.parametrize("x, bias", [
    ([2, 3], [4]), ([2, 3], [2, 3, 1]), ([3], [1, 3]), ([2, 1], [2, 5]), ([-1, 3], [4]), (["N", 3, 4, 5], [3, 4, 1]),
    ([2, 3, 4, 5], [4, 5]),
], ids=str)
def test_output_shapes_reject_layouts_no_shape_supports(creator, logs, x, bias):
    rc, outs, _ = make(creator).output_shapes([x, bias])
    assert rc != 0 and outs == [None]
    errs = errors(logs)
    assert len(errs) == 1 and "getOutputShapes" in errs[0]


@pytest.mark.parametrize("inputs, nb_outputs, nb_shape_inputs", [
    ([], 1, 0), ([[2, 3]] * 3, 1, 0), ([[2, 3]], 0, 0), ([[2, 3]], 2, 0), ([[2, 3]], 1, 1),
])
def test_output_shapes_bad_arguments(creator, logs, inputs, nb_outputs, nb_shape_inputs):
    rc, _, _ = make(creator).output_shapes(inputs, nb_outputs, nb_shape_inputs)
    assert rc != 0
    assert len(errors(logs)) == 1


# ---------------------------------------------------------------------------------------------- supportsFormatCombination


def _expected_support(pos, combo):
    """The contract: linear format; x in {float32, float16, bfloat16}; every other tensor has x's type."""
    dtype, fmt = combo[pos]
    if fmt != "linear":
        return False
    return dtype in SUPPORTED if pos == 0 else dtype == combo[0][0]


@pytest.mark.parametrize("nb_inputs", [1, 2])
def test_supports_format_combination_every_case(h, creator, logs, nb_inputs):
    """TensorRT's protocol: position by position, earlier positions fixed to supported choices."""
    p = make(creator)
    all_pairs = list(itertools.product(h.DATA_TYPES, h.TENSOR_FORMATS))
    n = nb_inputs + 1
    prefixes, checked = [()], 0
    for pos in range(n):
        next_prefixes = []
        for prefix in prefixes:
            for pair in all_pairs:
                combo = list(prefix) + [pair]
                tensor_descs = [h.TensorDesc(t, [2, 3], format=f) for t, f in combo]
                got = p.supports(pos, tensor_descs, nb_inputs)
                assert got == _expected_support(pos, combo), (pos, combo)
                checked += 1
                if got:
                    next_prefixes.append(tuple(combo))
        prefixes = next_prefixes
    # each full combination the plugin accepts: one type, linear everywhere
    assert sorted(c[0][0] for c in prefixes) == sorted(SUPPORTED)
    assert all(len({t for t, _ in c}) == 1 and {f for _, f in c} == {"linear"} for c in prefixes)
    assert checked == len(all_pairs) * (1 + 3 * (n - 1))
    assert errors(logs) == []


@pytest.mark.parametrize("nb_inputs", [1, 2])
def test_supports_ignores_positions_after_pos(h, creator, nb_inputs):
    """The answer for pos depends on inOut[0..pos] only (later entries are garbage in TensorRT's calls)."""
    p = make(creator)
    n = nb_inputs + 1
    for pos in range(n):
        for t in SUPPORTED:
            head = [h.TensorDesc(t, [4])] * (pos + 1)
            base = p.supports(pos, head, nb_inputs)  # harness fills later positions with invalid values
            for filler in ("int8", "float32", "bfloat16"):
                full = head + [h.TensorDesc(filler, [4], format="hwc8")] * (n - pos - 1)
                assert p.supports(pos, full, nb_inputs) == base


@pytest.mark.parametrize("pos, nb_inputs, nb_outputs, null", [
    (-1, 2, 1, False), (3, 2, 1, False), (2, 1, 1, False), (0, 0, 1, False), (0, 3, 1, False), (0, 2, 2, False),
    (0, 2, 0, False), (0, 2, 1, True),
])
def test_supports_bad_arguments(h, creator, logs, pos, nb_inputs, nb_outputs, null):
    d = [h.TensorDesc("float32", [2])] * 4
    assert make(creator).supports(pos, d, nb_inputs, nb_outputs, null) is False
    assert len(errors(logs)) == 1


# ---------------------------------------------------------------------------------------------- configurePlugin


@pytest.mark.parametrize("dtype", SUPPORTED)
@pytest.mark.parametrize("x, bias, _name", ACCEPTED, ids=str)
def test_configure_accepts_supported_layouts(h, creator, logs, dtype, x, bias, _name):
    assert make(creator).configure(*descs(h, dtype, x, bias)) == 0
    assert errors(logs) == []


@pytest.mark.parametrize("x, bias, _name", REJECTED, ids=str)
def test_configure_rejects_other_layouts(h, creator, logs, x, bias, _name):
    assert make(creator).configure(*descs(h, "float32", x, bias)) != 0
    errs = errors(logs)
    assert len(errs) == 1 and "configurePlugin" in errs[0] and "bias shape" in errs[0], errs


DYNAMIC_OK = [
    # x dims (-1 dynamic), x min, x max, bias dims
    ([-1, 3, -1, -1], [1, 3, 1, 1], [8, 3, 64, 64], [3, 1, 1]),
    ([-1, 3, -1, -1], [1, 3, 1, 1], [8, 3, 64, 64], [1, 3, 1, 1]),
    ([-1, -1, 16], [1, 1, 16], [8, 512, 16], [16]),
    ([-1, 3, 4], [1, 3, 4], [1, 3, 4], [3, 4]),  # block only if the batch could exceed 1: the profile says it cannot
    ([-1, 3, 4], [1, 3, 4], [1, 3, 4], [1, 3, 4]),
    ([-1, 5], [0, 5], [9, 5], []),
    ([-1, -1], [1, 1], [4, 7], [1, 1]),
]

DYNAMIC_BAD = [
    ([-1, 3, 4], [1, 3, 4], [8, 3, 4], [3, 4], "block"),  # N > 1 allowed: [3, 4] is a block of [N, 3, 4]
    ([-1, 3, 4], [1, 3, 4], [8, 3, 4], [1, 3, 4], "block"),
    ([-1, 3, -1, -1], [1, 3, 1, 1], [8, 3, 9, 9], [3, 1, 9], "block"),
    ([-1, -1], [1, 2], [4, 6], [7], "never"),  # x dim 1 in [2, 6] can never be 7
]


@pytest.mark.parametrize("x, lo, hi, bias", DYNAMIC_OK, ids=str)
def test_configure_dynamic_shapes_accepted(h, creator, logs, x, lo, hi, bias):
    ins, outs = descs(h, "float16", x, bias, min=lo, max=hi, opt=hi)
    assert make(creator).configure(ins, outs) == 0
    assert errors(logs) == []


@pytest.mark.parametrize("x, lo, hi", [([-1, 3, 16], [1, 3, 16], [8, 3, 16]), ([-1, -1], [1, 1], [8, 8])], ids=str)
def test_configure_accepts_a_dynamic_full_shape_bias(h, creator, logs, x, lo, hi):
    """A run-time bias with x's dynamic shape is a full layout: judging dims one by one must not reject it."""
    ins = [h.TensorDesc("float32", list(x), min=lo, max=hi, opt=hi),
           h.TensorDesc("float32", list(x), min=lo, max=hi, opt=hi)]
    outs = [h.TensorDesc("float32", list(x), min=lo, max=hi, opt=hi)]
    assert make(creator).configure(ins, outs) == 0, errors(logs)
    assert errors(logs) == []


@pytest.mark.parametrize("x, lo, hi, bias, why", DYNAMIC_BAD, ids=str)
def test_configure_dynamic_shapes_rejected(h, creator, logs, x, lo, hi, bias, why):
    ins, outs = descs(h, "float16", x, bias, min=lo, max=hi, opt=hi)
    assert make(creator).configure(ins, outs) != 0
    errs = errors(logs)
    assert len(errs) == 1 and ("block" in errs[0] if why == "block" else "never" in errs[0]), errs


@pytest.mark.parametrize("case", ["bias type", "output type", "x int8", "format", "bias format", "out rank",
                                  "counts 0", "counts 3", "outputs 2", "invalid rank"])
def test_configure_rejects_bad_descriptions(h, creator, logs, case):
    T = h.TensorDesc
    x, b, y = T("float32", [2, 3]), T("float32", [3]), T("float32", [2, 3])
    ins, outs = {
        "bias type": ([x, T("float16", [3])], [y]),
        "output type": ([x, b], [T("bfloat16", [2, 3])]),
        "x int8": ([T("int8", [2, 3]), T("int8", [3])], [T("int8", [2, 3])]),
        "format": ([T("float32", [2, 3], format="chw4"), b], [y]),
        "bias format": ([x, T("float32", [3], format="hwc")], [y]),
        "out rank": ([x, b], [T("float32", [6])]),
        "counts 0": ([], [y]),
        "counts 3": ([x, b, b], [y]),
        "outputs 2": ([x, b], [y, y]),
        "invalid rank": ([T("float32", [2, 3], rank=9), b], [y]),
    }[case]
    assert make(creator).configure(ins, outs) != 0
    assert len(errors(logs)) == 1


def test_configure_one_input_form(h, creator, logs):
    p = make(creator, 0.5)
    for dtype in SUPPORTED:
        assert p.configure(*descs(h, dtype, [-1, 7])) == 0
    assert errors(logs) == []


@pytest.mark.parametrize("nb_inputs", [1, 2])
def test_workspace_size_is_zero(h, creator, nb_inputs):
    bias = [3] if nb_inputs == 2 else None
    assert make(creator).workspace_size(*descs(h, "float16", [4, 3], bias)) == 0


def test_tactics_and_build_defaults(creator):
    p = make(creator)
    assert p.nb_tactics() == 0
    assert p.valid_tactics(0) == (0, [])
    assert p.set_tactic(0) == 0
    assert p.timing_cache_id() is None
    assert p.format_combination_limit() == 100


# ---------------------------------------------------------------------------------------------- onShapeChange


@pytest.mark.parametrize("dtype", SUPPORTED)
@pytest.mark.parametrize("x, bias, _name", ACCEPTED, ids=str)
def test_on_shape_change_accepts_supported_layouts(h, creator, logs, dtype, x, bias, _name):
    p = make(creator, phase="runtime")
    assert p.on_shape_change(*descs(h, dtype, x, bias)) == 0
    assert errors(logs) == []


@pytest.mark.parametrize("x, bias, _name", REJECTED, ids=str)
def test_on_shape_change_rejects_other_layouts(h, creator, logs, x, bias, _name):
    assert make(creator, phase="runtime").on_shape_change(*descs(h, "bfloat16", x, bias)) != 0
    errs = errors(logs)
    assert len(errs) == 1 and "onShapeChange" in errs[0], errs


@pytest.mark.parametrize("case", ["unresolved x", "unresolved bias", "output shape", "output type", "bias type",
                                  "x float64-like", "format", "counts", "overflow"])
def test_on_shape_change_rejects_bad_descriptions(h, creator, logs, case):
    T = h.TensorDesc
    ins, outs = {
        "unresolved x": ([T("float32", [-1, 3]), T("float32", [3])], [T("float32", [-1, 3])]),
        "unresolved bias": ([T("float32", [2, 3]), T("float32", [-1])], [T("float32", [2, 3])]),
        "output shape": ([T("float32", [2, 3]), T("float32", [3])], [T("float32", [3, 2])]),
        "output type": ([T("float32", [2, 3])], [T("float16", [2, 3])]),
        "bias type": ([T("float16", [2, 3]), T("float32", [3])], [T("float16", [2, 3])]),
        "x float64-like": ([T("int64", [2, 3])], [T("int64", [2, 3])]),
        "format": ([T("float32", [2, 3], format="hwc8")], [T("float32", [2, 3], format="hwc8")]),
        "counts": ([], [T("float32", [2, 3])]),
        "overflow": ([T("float32", [2**40, 2**40])], [T("float32", [2**40, 2**40])]),
    }[case]
    assert make(creator, phase="runtime").on_shape_change(ins, outs) != 0
    assert len(errors(logs)) == 1


# ---------------------------------------------------------------------------------------------- clone, attach, serialize


def _answers(h, p):
    """A fingerprint of every build/runtime answer that does not need a GPU."""
    out = [p.name, p.version, p.namespace, p.nb_outputs(), p.fields_to_serialize(),
           [p.capability(k) for k in ("core", "build", "runtime")]]
    for t in ("float32", "float16", "bfloat16", "int8"):
        out.append(p.output_data_types([t, t]))
    out.append(p.output_shapes([["N", 3, 4], [3, 1]]))
    out.append([p.supports(pos, [h.TensorDesc(t, [1])] * 3, 2) for pos in range(3) for t in SUPPORTED])
    for x, bias, _ in ACCEPTED[:6] + REJECTED[:3]:
        out.append(p.configure(*descs(h, "float16", x, bias)))
        out.append(p.on_shape_change(*descs(h, "float16", x, bias)))
    out.append(p.workspace_size(*descs(h, "float16", [2, 3], [3])))
    h.take_logs()
    return out


@pytest.mark.parametrize("phase", ["build", "runtime"])
@pytest.mark.parametrize("bias", [0.0, 0.75, -2.5, 1e30, math.inf, math.nan])
def test_serialization_round_trip(h, creator, logs, phase, bias):
    p = make(creator, bias, phase)
    fields = p.fields_to_serialize()
    assert [f[0] for f in fields] == ["bias"] and fields[0][1:] == ("float32", struct.pack("<f", bias), 1)
    q = creator.create("deserialized", fields, "runtime")  # what TensorRT does when it deserializes an engine
    assert q is not None
    assert q.fields_to_serialize() == fields
    assert _answers(h, q) == _answers(h, p)
    assert q.capability("core") and q.capability("runtime")


def test_clone_is_independent(h, creator, logs):
    p = make(creator, 1.25)
    assert p.on_shape_change(*descs(h, "float32", [2, 3], [3])) == 0
    c = p.clone()
    assert c is not None and c.interface_info == ("PLUGIN", 1, 0)
    assert _answers(h, c) == _answers(h, p)
    fields = p.fields_to_serialize()
    p.close()  # the clone must not point into the original (fields, plan, buffers)
    assert c.fields_to_serialize() == fields
    assert c.clone().fields_to_serialize() == fields
    assert c.on_shape_change(*descs(h, "float32", [5], [1])) == 0


@pytest.mark.parametrize("context", ["recorder", "no recorder", "none"])
def test_attach_to_context_returns_an_independent_runtime_clone(h, creator, logs, context):
    ctx = {"recorder": h.ResourceContext(True), "no recorder": h.ResourceContext(False), "none": None}[context]
    p = make(creator, -0.5, "runtime")
    a = p.attach_to_context(ctx)
    assert a is not None
    assert a.capability("runtime") == ("PLUGIN_V3ONE_RUNTIME", 1, 0)
    assert a.fields_to_serialize() == p.fields_to_serialize()
    p.close()
    assert a.on_shape_change(*descs(h, "float32", [2, 3], [3])) == 0
    assert errors(logs) == []


def test_attached_plugin_reports_to_the_context_error_recorder(h, creator, logs):
    ctx = h.ResourceContext(True)
    a = make(creator, phase="runtime").attach_to_context(ctx)
    x = h.TensorDesc("float32", [4])
    assert a.enqueue([x], [x], [0], [0]) != 0  # before onShapeChange
    assert a.on_shape_change(*descs(h, "float32", [2, 3], [2, 3, 4])) != 0
    codes = [code for code, _ in ctx.errors()]
    assert codes == [9, 3]  # ErrorCode::kINVALID_STATE, kINVALID_ARGUMENT
    assert all(d.startswith("SwishBias: ") and len(d) <= 127 for _, d in ctx.errors())
    assert a.context_errors() == ctx.errors()
    assert len(errors(logs)) == 2  # and the logger heard it too


# ---------------------------------------------------------------------------------------------- enqueue without a GPU


def test_enqueue_before_on_shape_change_fails_cleanly(h, creator, logs):
    x = h.TensorDesc("float32", [4])
    assert make(creator).enqueue([x], [x], [16], [16]) != 0
    errs = errors(logs)
    assert len(errs) == 1 and "before a successful onShapeChange" in errs[0]


def test_enqueue_with_null_arrays_fails_cleanly(h, creator, logs):
    p = make(creator)
    ins, outs = descs(h, "float32", [4], [1])
    assert p.on_shape_change(ins, outs) == 0
    assert p.enqueue(ins, outs, [16, 32], [48], null_arrays=True) != 0
    assert len(errors(logs)) == 1


@pytest.mark.parametrize("nb_inputs", [1, 2])
@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 0, 7)], ids=str)
def test_enqueue_empty_tensor_needs_no_buffers(h, creator, logs, nb_inputs, shape):
    p = make(creator, 1.0)
    ins, outs = descs(h, "float16", shape, [1] * len(shape) if nb_inputs == 2 else None)
    assert p.on_shape_change(ins, outs) == 0
    assert p.enqueue(ins, outs, [0] * nb_inputs, [0], stream=0) == 0
    assert errors(logs) == []


def test_enqueue_rejects_null_buffers(h, creator, logs):
    p = make(creator)
    ins, outs = descs(h, "float32", [4], [4])
    assert p.on_shape_change(ins, outs) == 0
    assert p.enqueue(ins, outs, [0, 64], [64]) != 0
    errs = errors(logs)
    assert len(errs) == 1 and "null" in errs[0]


def test_enqueue_with_changed_shapes_rechecks_the_layout(h, creator, logs):
    p = make(creator)
    assert p.on_shape_change(*descs(h, "float32", [2, 3], [3])) == 0
    # enqueue sees shapes onShapeChange never saw, and they form a block layout: refused, not mis-indexed
    assert p.enqueue(*descs(h, "float32", [2, 3, 4], [3, 4]), [64, 64], [64]) != 0
    errs = errors(logs)
    assert len(errs) == 1 and "block" in errs[0]


def test_enqueue_with_an_invalid_rank_is_refused(h, creator, logs):
    p = make(creator)
    assert p.on_shape_change(*descs(h, "float32", [4], [4])) == 0
    bad = [h.TensorDesc("float32", [4], rank=9)]
    assert p.enqueue(bad + [h.TensorDesc("float32", [4])], bad, [64, 64], [64]) != 0
    errs = errors(logs)
    assert len(errs) == 1 and "invalid rank" in errs[0]


def _gpu_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - no torch means no GPU for these tests
        return False


@pytest.mark.skipif(_gpu_available(), reason="checks the CUDA error path of a machine without a GPU")
@pytest.mark.parametrize("nb_inputs", [1, 2])
def test_enqueue_without_a_gpu_returns_an_error_and_logs_cuda_text(h, creator, logs, nb_inputs):
    p = make(creator, 0.5)
    ins, outs = descs(h, "float32", [8], [8] if nb_inputs == 2 else None)
    assert p.on_shape_change(ins, outs) == 0
    assert p.enqueue(ins, outs, [4096] * nb_inputs, [8192]) != 0  # never dereferenced: the launch itself fails
    errs = errors(logs)
    assert len(errs) == 1 and "cudaError" in errs[0], errs


# ---------------------------------------------------------------------------------------------- leaks


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs /proc to read the resident set size")
def test_create_clone_attach_destroy_churn_does_not_leak(creator, logs):
    assert creator.churn(20_000) == 20_000  # warm up allocator pools
    before = _rss_bytes()
    assert creator.churn(300_000) == 300_000  # 900k plugin objects: a leak of even 16 bytes each shows
    grown = _rss_bytes() - before
    assert grown < 8 * 2**20, f"RSS grew by {grown / 2**20:.1f} MiB over 900k plugin objects"
    assert errors(logs) == []


def test_python_level_create_destroy_does_not_leak(h, creator):
    def cycle(n):
        for i in range(n):
            p = make(creator, float(i), "build" if i % 2 else "runtime")
            q = creator.create("rt", p.fields_to_serialize(), "runtime")
            a = q.attach_to_context(h.ResourceContext())
            for obj in (p, q, a):
                obj.close()

    cycle(3_000)
    before = _rss_bytes()
    cycle(30_000)
    assert _rss_bytes() - before < 8 * 2**20


VALGRIND_SCRIPT = textwrap.dedent("""
    import importlib.util, struct, sys
    spec = importlib.util.spec_from_file_location("_trt_harness", sys.argv[1])
    h = importlib.util.module_from_spec(spec); spec.loader.exec_module(h)
    lib = h.Library(sys.argv[2]); lib2 = h.Library(sys.argv[2])
    (c,) = lib.creators()
    T = h.TensorDesc
    for i in range(50):
        p = c.create("v", [("bias", "float32", struct.pack("<f", i), 1)], "build")
        p.output_shapes([["N", 3, 4], [3, 1]]); p.output_data_types(["float16", "float16"])
        [p.supports(k, [T("float16", [2])] * 3, 2) for k in range(3)]
        p.configure([T("float16", [-1, 3, 4]), T("float16", [3, 1])], [T("float16", [-1, 3, 4])])
        p.configure([T("float16", [2, 3, 4]), T("float16", [3, 4])], [T("float16", [2, 3, 4])])
        q = c.create("r", p.fields_to_serialize(), "runtime")
        a = q.attach_to_context(h.ResourceContext())
        a.on_shape_change([T("float16", [2, 3, 4]), T("float16", [3, 4])], [T("float16", [2, 3, 4])])
        a.enqueue([T("float16", [4])], [T("float16", [4])], [0], [0])
        k = a.clone()
        for bad in ([("beta", "float32", b"1234", 1)], [("bias", "int32", b"1234", 1)], [("bias", "float32", None, 1)]):
            assert c.create("bad", bad, "build") is None
        for o in (p, q, a, k):
            o.close()
    c.churn(2000)
    h.take_logs(); lib.close(); lib2.close()
    print("VALGRIND-SCRIPT-OK")
""")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_valgrind_reports_no_leaks_or_invalid_accesses_in_the_plugin(h, tmp_path):
    script = tmp_path / "vg.py"
    script.write_text(VALGRIND_SCRIPT)
    log = tmp_path / "valgrind.log"
    env = dict(os.environ, PYTHONMALLOC="malloc")
    proc = subprocess.run(["valgrind", "--leak-check=full", "--show-leak-kinds=definite", "--num-callers=40",
                           f"--log-file={log}", sys.executable, str(script), str(HARNESS_FILE), str(PLUGIN_PATH)],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0 and "VALGRIND-SCRIPT-OK" in proc.stdout, proc.stderr[-3000:]
    # Drop the "==PID== " prefixes; records are then separated by blank lines.
    lines = [line.split("== ", 1)[1] if line.startswith("==") and "== " in line else "" for line in
             log.read_text().splitlines()]
    records = "\n".join(lines).split("\n\n")
    ours = [r for r in records if "libtorchtrt_swish_plugin" in r or "_trt_harness" in r]
    kinds = ("definitely lost", "Invalid read", "Invalid write", "Invalid free", "Mismatched free",
             "uninitialised", "overlap")
    bad = [r for r in ours if any(k in r for k in kinds)]
    assert not bad, "\n\n".join(bad)[:6000]


# ---------------------------------------------------------------------------------------------- the library file


def _elf_dynamic(path: Path):
    """(NEEDED names, FLAGS_1, {defined exported symbol: type}, undefined symbol names) of an ELF64 LE library."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "expected a little-endian ELF64 file"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]

    def cstr(table_index, off):
        base = sections[table_index][4]
        end = data.index(b"\0", base + off)
        return data[base + off:end].decode()

    needed, flags1, defined, undefined = [], 0, {}, set()
    for _name, stype, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if stype == 6:  # SHT_DYNAMIC
            for k in range(size // 16):
                tag, val = struct.unpack_from("<qQ", data, offset + 16 * k)
                if tag == 1:  # DT_NEEDED
                    needed.append(cstr(link, val))
                elif tag == 0x6FFFFFFB:  # DT_FLAGS_1
                    flags1 = val
        elif stype == 11:  # SHT_DYNSYM
            for k in range(1, size // entsize):
                st_name, st_info, st_other, st_shndx, _v, _s = struct.unpack_from("<IBBHQQ", data, offset + k * entsize)
                name, bind, typ = cstr(link, st_name), st_info >> 4, st_info & 0xF
                if st_shndx == 0:
                    undefined.add(name)
                elif bind in (1, 2) and (st_other & 3) == 0 and typ in (1, 2):  # global/weak, default, obj/func
                    defined[name] = typ
    return needed, flags1, defined, undefined


@needs_plugin
def test_library_needs_neither_torch_tensorrt_nor_shared_cudart():
    needed, flags1, _, _ = _elf_dynamic(PLUGIN_PATH)
    forbidden = ("libtorch", "libc10", "libnvinfer", "libcudart", "libcuda.so", "libpython")
    assert not [n for n in needed if n.startswith(forbidden)], needed
    assert set(needed) <= {"libstdc++.so.6", "libgcc_s.so.1", "libc.so.6", "libm.so.6", "libdl.so.2",
                           "libpthread.so.0", "librt.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}, needed
    assert flags1 & 0x8, "the library must be DF_1_NODELETE: a registry may hold its creator until exit"


@needs_plugin
def test_library_exports_only_the_plugin_entry_points():
    _, _, defined, undefined = _elf_dynamic(PLUGIN_PATH)
    assert defined == {"getCreators": 2, "setLoggerFinder": 2}  # STT_FUNC
    # TensorRT is found with dlsym at run time, never through a link-time reference
    assert not {s for s in undefined if "nvinfer" in s or s in ("getPluginRegistry", "getLogger")}
    assert not {s for s in undefined if s.startswith("cuda") or (s.startswith("cu") and s[2:3].isupper())}, \
        "the CUDA runtime must be linked statically (and the driver is reached through it, not linked)"


@needs_plugin
@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf (binutils) is not installed")
def test_readelf_agrees_on_needed():
    out = subprocess.run(["readelf", "-d", str(PLUGIN_PATH)], capture_output=True, text=True, check=True).stdout
    needed = [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]
    assert needed == _elf_dynamic(PLUGIN_PATH)[0]
    assert "NODELETE" in out


# ---------------------------------------------------------------------------------------------- self-registration

REGISTRATION_SCRIPT = textwrap.dedent("""
    import ctypes, json, os, sys
    fake_path, plugin, scenario = sys.argv[1:4]
    mode = ctypes.RTLD_GLOBAL if scenario == "global" else ctypes.RTLD_LOCAL
    fake = ctypes.CDLL(fake_path, mode=mode)
    buf = ctypes.create_string_buffer(1024)
    def entries():
        return [buf.value.decode() for i in range(fake.fake_registry_count()) if fake.fake_registry_entry(i, buf, 1024) > 0]
    out = {}
    if scenario in ("version", "finder_version"):
        fake.fake_set_version(120000)  # a major whose interface layouts the library does not know
    if scenario == "two_copies":
        ctypes.CDLL(sys.argv[4])  # another copy of the library, another path: registers first
    if scenario == "load_first":
        out["load"] = fake.fake_load_library(plugin.encode())
    elif scenario == "finder_version":
        os.environ["TORCHTRT_SWISH_NO_AUTO_REGISTER"] = "1"
        out["load"] = fake.fake_load_library(plugin.encode())
        out["refused"] = fake.fake_create_with_unknown_field()
    else:
        ctypes.CDLL(plugin)  # what Polygraphy --plugins does
        out["after_cdll"] = entries()
        if scenario in ("cdll_then_load", "no_auto"):
            out["load"] = fake.fake_load_library(plugin.encode())
        if scenario == "logger":
            out["refused"] = fake.fake_create_with_unknown_field()
    out["entries"] = entries()
    out["register_calls"] = fake.fake_register_calls()
    out["deregister_calls"] = fake.fake_deregister_calls()
    out["errors_logged"] = fake.fake_log_count(1)
    out["warnings_logged"] = fake.fake_log_count(2)
    print(json.dumps(out))
""")

ENTRY = "SwishBias|1|torchtrt_swish|torchtrt_swish"


def _registration(scenario: str, tmp_path: Path, **env) -> dict:
    if not FAKE_NVINFER.exists():
        pytest.skip(f"stand-in {FAKE_NVINFER} not built: {BUILD_HINT}")
    script = tmp_path / "reg.py"
    script.write_text(REGISTRATION_SCRIPT)
    e = {k: v for k, v in os.environ.items() if k != "TORCHTRT_SWISH_NO_AUTO_REGISTER"}
    e.update(env)
    copy = tmp_path / "copy" / PLUGIN_PATH.name
    copy.parent.mkdir()
    shutil.copy2(PLUGIN_PATH, copy)
    proc = subprocess.run([sys.executable, str(script), str(FAKE_NVINFER), str(PLUGIN_PATH), scenario, str(copy)],
                          capture_output=True, text=True, env=e, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]), stderr=proc.stderr)


@needs_plugin
@pytest.mark.parametrize("scenario", ["local", "global"])
def test_dlopen_next_to_tensorrt_registers_the_creator(tmp_path, scenario):
    """RTLD_LOCAL is how Python's tensorrt module holds libnvinfer; RTLD_GLOBAL how a C++ application may."""
    r = _registration(scenario, tmp_path)
    assert r["after_cdll"] == [ENTRY] and r["entries"] == [ENTRY]
    assert r["register_calls"] == 1 and r["errors_logged"] == 0


@needs_plugin
def test_a_second_copy_of_the_library_does_not_register_again(tmp_path):
    r = _registration("two_copies", tmp_path)
    assert r["entries"] == [ENTRY] and r["register_calls"] == 1
    assert r["errors_logged"] == 0  # checked via getAllCreators: TensorRT's getCreator would log a miss as an error


@needs_plugin
def test_load_library_after_dlopen_is_accepted_once(tmp_path):
    r = _registration("cdll_then_load", tmp_path)
    assert r["after_cdll"] == [ENTRY]
    assert r["load"] == 1, "loadLibrary refuses libraries whose creators are registered: getCreators must hand over"
    assert r["entries"] == [ENTRY] and r["deregister_calls"] == 1


@needs_plugin
def test_load_library_alone_registers_once(tmp_path):
    r = _registration("load_first", tmp_path)
    assert r["load"] == 1 and r["entries"] == [ENTRY]


@needs_plugin
def test_auto_registration_can_be_switched_off(tmp_path):
    r = _registration("no_auto", tmp_path, TORCHTRT_SWISH_NO_AUTO_REGISTER="1")
    assert r["after_cdll"] == [] and r["register_calls"] == 1  # only loadLibrary's
    assert r["load"] == 1 and r["entries"] == [ENTRY]


@needs_plugin
def test_no_registration_into_an_unknown_tensorrt_major(tmp_path):
    # Majors 10 and 11 are checked against the real lean runtimes (test_tensorrt_runtime.py); any other major's
    # registry and logger layouts are unknown, so nothing is called on them and the reason goes to stderr.
    r = _registration("version", tmp_path)
    assert r["after_cdll"] == [] and r["register_calls"] == 0
    assert r["warnings_logged"] == 0 and r["errors_logged"] == 0
    assert "not registering: the loaded TensorRT is version 120000" in r["stderr"], r["stderr"]


@needs_plugin
def test_loggers_of_an_unknown_tensorrt_major_are_not_called(tmp_path):
    r = _registration("finder_version", tmp_path)
    assert r["load"] == 1 and r["refused"] == 1 and r["entries"] == [ENTRY]
    assert r["errors_logged"] == 0 and r["warnings_logged"] == 0
    assert "not using the logger finder of TensorRT 120000" in r["stderr"]
    assert "[torchtrt_swish ERROR] SwishBias: createPlugin: fake: unknown field 'no_such_field'" in r["stderr"]


@needs_plugin
def test_errors_reach_tensorrts_global_logger_without_a_logger_finder(tmp_path):
    r = _registration("logger", tmp_path)
    assert r["refused"] == 1 and r["errors_logged"] == 1


@needs_plugin
def test_dlopen_without_tensorrt_is_harmless(tmp_path):
    code = ("import ctypes, sys; l = ctypes.CDLL(sys.argv[1]); n = ctypes.c_int32(-1); "
            "l.getCreators.restype = ctypes.c_void_p; p = l.getCreators(ctypes.byref(n)); "
            "print(n.value, bool(p))")
    out = subprocess.run([sys.executable, "-c", code, str(PLUGIN_PATH)], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.split() == ["1", "True"] and out.stderr == ""


# ---------------------------------------------------------------------------------------------- GPU: enqueue

cuda = [pytest.mark.cuda, pytest.mark.skipif(not _gpu_available(), reason="needs a CUDA GPU")]


def _apply(marks):
    """Apply several marks at once (the GPU tests all carry `cuda` and the skip-without-GPU condition)."""
    def deco(fn):
        for m in marks:
            fn = m(fn)
        return fn
    return deco

GPU_DTYPES = ("float32", "float16", "bfloat16")
GPU_SHAPES = [(), (1,), (7,), (4096,), (3, 5), (13, 1031), (2, 3, 4, 5), (4, 64, 32, 33), (1, 3, 1, 1), (0,),
              (2, 0, 5), (8, 3, 224, 224)]


def _bias_shapes(x_shape):
    """(layout, bias shape) pairs the plugin accepts for this x shape (as the torch op sees them)."""
    r = len(x_shape)
    out = [("scalar 0-d", ())]
    if r:
        out += [("scalar ones", (1,) * r), ("last", (x_shape[-1],)), ("full", tuple(x_shape))]
    if r >= 2:
        out += [("dim1", (x_shape[1],) + (1,) * (r - 2)), ("dim1 keepdim", (1, x_shape[1]) + (1,) * (r - 2))]
    if r >= 2 and x_shape[0] == 1:
        out.append(("full, leading 1 dropped", tuple(x_shape[1:])))
    return out


GPU_CASES = [(s, name, b) for s in GPU_SHAPES for name, b in _bias_shapes(s)]


@pytest.fixture(scope="module")
def tt():
    """(torch, torchtrt_swish) for the GPU tests."""
    torch = pytest.importorskip("torch")
    ts = pytest.importorskip("torchtrt_swish")
    return torch, ts


def _tdtype(torch, name):
    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]


def _run(h, plugin, x, bias, stream, dtype_name, *, shape_change=True):
    """Run the plugin on (x, bias) on stream; bias None is the one-input form. Returns y (after syncing)."""
    import torch

    y = torch.empty_like(x)
    ins = [h.TensorDesc(dtype_name, list(x.shape))]
    ptrs = [x.data_ptr()]
    if bias is not None:
        ins.append(h.TensorDesc(dtype_name, list(bias.shape)))
        ptrs.append(bias.data_ptr())
    outs = [h.TensorDesc(dtype_name, list(x.shape))]
    if shape_change:
        assert plugin.on_shape_change(ins, outs) == 0
    stream.wait_stream(torch.cuda.current_stream())  # inputs were written on the current stream
    rc = plugin.enqueue(ins, outs, ptrs, [y.data_ptr()], 0, stream.cuda_stream)
    assert rc == 0
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    return y


def _bits(torch, t):
    return t.view({4: torch.int32, 2: torch.int16}[t.element_size()])


@_apply(cuda)
@pytest.mark.parametrize("dtype", GPU_DTYPES)
@pytest.mark.parametrize("shape, layout, bias_shape", GPU_CASES, ids=[f"{s}-{n}" for s, n, _ in GPU_CASES])
def test_enqueue_bit_identical_to_the_op(h, creator, logs, tt, dtype, shape, layout, bias_shape):
    torch, ts = tt
    dt = _tdtype(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(repr((shape, layout, dtype)).encode()))
    x = (torch.randn(shape, generator=gen, device="cuda") * 4).to(dt)
    bias = torch.randn(bias_shape, generator=gen, device="cuda").to(dt)
    p = make(creator)
    y = _run(h, p, x, bias, torch.cuda.Stream(), dtype)
    ref = ts.swish(x, bias)
    assert y.shape == ref.shape and y.dtype == ref.dtype
    assert torch.equal(_bits(torch, y), _bits(torch, ref))
    assert errors(logs) == []


@_apply(cuda)
@pytest.mark.parametrize("dtype", GPU_DTYPES)
def test_enqueue_special_values_bit_identical(h, creator, tt, dtype):
    torch, ts = tt
    dt = _tdtype(torch, dtype)
    vals = torch.tensor([0.0, -0.0, 1.0, -1.0, 88.0, -88.0, 100.0, -100.0, 1e-30, -1e-30, float("inf"),
                         float("-inf"), float("nan"), 3.0e38, -3.0e38, 20.0, -20.0], device="cuda")
    x = vals.repeat(61).reshape(61, -1).to(dt)  # 61 x 17: odd sizes, scalar tail
    for bias in (torch.tensor(0.5, device="cuda").to(dt), vals.to(dt), vals[:1].to(dt) * float("nan")):
        y = _run(h, make(creator), x, bias, torch.cuda.Stream(), dtype)
        assert torch.equal(_bits(torch, y), _bits(torch, ts.swish(x, bias)))


@_apply(cuda)
@pytest.mark.parametrize("dtype", GPU_DTYPES)
def test_enqueue_misaligned_views(h, creator, tt, dtype):
    """Offset views (not 16-byte aligned) take the scalar path and must still match."""
    torch, ts = tt
    dt = _tdtype(torch, dtype)
    base = torch.randn(10_003, device="cuda").to(dt)
    x = base[1:]  # contiguous, but 1 element past a 16-byte boundary
    full_bias = torch.randn(10_003, device="cuda").to(dt)[1:]
    scalar_bias = base[3:4].reshape(())
    for b in (full_bias, scalar_bias):
        y = _run(h, make(creator), x, b, torch.cuda.Stream(), dtype)
        assert torch.equal(_bits(torch, y), _bits(torch, ts.swish(x, b)))


@_apply(cuda)
@pytest.mark.parametrize("dtype", GPU_DTYPES)
@pytest.mark.parametrize("value", [0.0, 0.3, -1.5, 1e-8, 1e30, 65504.0, 70000.0, float("inf")])
def test_one_input_form_uses_the_field_bias(h, creator, logs, tt, dtype, value):
    torch, ts = tt
    dt = _tdtype(torch, dtype)
    x = (torch.randn(5, 7, 9, device="cuda") * 3).to(dt)
    ref = ts.swish(x, torch.tensor(value, dtype=torch.float32, device="cuda").to(dt))  # float32 field, then rounded
    build = make(creator, value)
    runtime = creator.create("rt", build.fields_to_serialize(), "runtime")
    attached = runtime.attach_to_context(h.ResourceContext())
    for p in (build, runtime, attached, build.clone()):
        y = _run(h, p, x, None, torch.cuda.Stream(), dtype)
        assert torch.equal(_bits(torch, y), _bits(torch, ref))
    assert errors(logs) == []


@_apply(cuda)
def test_one_plugin_serves_every_dtype_and_shape_in_turn(h, creator, tt):
    torch, ts = tt
    p = make(creator, -0.75)
    s = torch.cuda.Stream()
    for dtype in GPU_DTYPES * 2:
        for shape in ((3,), (4, 5), (2, 3, 7)):
            x = torch.randn(shape, device="cuda").to(_tdtype(torch, dtype))
            y = _run(h, p, x, None, s, dtype)
            assert torch.equal(y, ts.swish(x, torch.tensor(-0.75, device="cuda").to(x.dtype)))
            b = torch.randn(shape[-1], device="cuda").to(x.dtype)
            q = make(creator)
            assert torch.equal(_run(h, q, x, b, s, dtype), ts.swish(x, b))


@_apply(cuda)
def test_enqueue_replans_when_shapes_change_without_on_shape_change(h, creator, tt):
    torch, ts = tt
    p = make(creator)
    x1, b1 = torch.randn(4, 6, device="cuda"), torch.randn(6, device="cuda")
    assert torch.equal(_run(h, p, x1, b1, torch.cuda.Stream(), "float32"), ts.swish(x1, b1))
    x2, b2 = torch.randn(3, 5, 2, device="cuda"), torch.randn(5, 1, device="cuda")  # now per-channel on dim 1
    y = _run(h, p, x2, b2, torch.cuda.Stream(), "float32", shape_change=False)
    assert torch.equal(y, ts.swish(x2, b2))


@_apply(cuda)
def test_two_plugins_on_two_streams_concurrently(h, creator, tt):
    torch, ts = tt
    jobs = []
    for dtype, bias_value, shape in (("float16", 0.25, (64, 1024, 33)), ("bfloat16", -1.0, (32, 3, 127, 129))):
        dt = _tdtype(torch, dtype)
        x = torch.randn(shape, device="cuda").to(dt)
        bias = torch.randn(shape[1], *([1] * (len(shape) - 2)), device="cuda").to(dt)
        p = make(creator, bias_value)
        ins = [h.TensorDesc(dtype, list(x.shape)), h.TensorDesc(dtype, list(bias.shape))]
        outs = [h.TensorDesc(dtype, list(x.shape))]
        assert p.on_shape_change(ins, outs) == 0
        ys = [torch.empty_like(x) for _ in range(20)]
        jobs.append(dict(p=p, x=x, bias=bias, ins=ins, outs=outs, ys=ys, stream=torch.cuda.Stream(), rcs=[]))
    torch.cuda.synchronize()

    def worker(j):
        for y in j["ys"]:
            j["rcs"].append(j["p"].enqueue(j["ins"], j["outs"], [j["x"].data_ptr(), j["bias"].data_ptr()],
                                           [y.data_ptr()], 0, j["stream"].cuda_stream))

    threads = [threading.Thread(target=worker, args=(j,)) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    for j in jobs:
        assert j["rcs"] == [0] * len(j["ys"])
        ref = ts.swish(j["x"], j["bias"])
        assert all(torch.equal(y, ref) for y in j["ys"])


@_apply(cuda)
def test_first_enqueue_inside_cuda_graph_capture(h, creator, tt):
    """The one-input form allocates its device bias on first use; that must not break a graph capture."""
    torch, ts = tt
    x = torch.randn(1000, 3, device="cuda")
    # Warm the library (CUDA runtime init, lazy kernel loading) with another plugin object outside the capture:
    # what is under test is this plugin's first-use allocation, not the CUDA runtime's own first use.
    _run(h, make(creator, 1.0), x, None, torch.cuda.current_stream(), "float32")
    y = torch.empty_like(x)
    p = make(creator, 2.0)
    ins, outs = [h.TensorDesc("float32", [1000, 3])], [h.TensorDesc("float32", [1000, 3])]
    assert p.on_shape_change(ins, outs) == 0
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(g, stream=s):
            assert p.enqueue(ins, outs, [x.data_ptr()], [y.data_ptr()], 0, s.cuda_stream) == 0
    torch.cuda.synchronize()
    x.copy_(torch.randn(1000, 3, device="cuda"))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, ts.swish(x, torch.tensor(2.0, device="cuda")))


def _under_compute_sanitizer() -> bool:
    """compute-sanitizer injects itself through CUDA's injection hook; its own allocations skew mem_get_info."""
    if os.environ.get("TORCHTRT_SWISH_UNDER_SANITIZER") == "1":
        return True
    return any("sanitizer" in os.environ.get(k, "").lower() for k in ("CUDA_INJECTION64_PATH", "LD_PRELOAD"))


@_apply(cuda)
@pytest.mark.skipif(_under_compute_sanitizer(), reason="device memory accounting is not meaningful under compute-sanitizer")
def test_device_bias_memory_is_returned(h, creator, tt):
    torch, _ = tt
    x = torch.randn(16, device="cuda")

    def cycle(n):
        for _ in range(n):
            p = make(creator, 1.0)
            _run(h, p, x, None, torch.cuda.current_stream(), "float32")
            p.clone().close()
            p.close()

    cycle(50)
    torch.cuda.synchronize()
    free_before, _ = torch.cuda.mem_get_info()
    cycle(10_000)  # a leaked bias buffer costs >= 512 bytes of device memory: >= 5 MiB here
    torch.cuda.synchronize()
    free_after, _ = torch.cuda.mem_get_info()
    assert free_before - free_after < 2 * 2**20


HUGE = 2**31 + 77  # elements: past int32 indexing


@_apply(cuda)
@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("TORCHTRT_SWISH_SKIP_HUGE") == "1", reason="TORCHTRT_SWISH_SKIP_HUGE=1 (sanitizer runs)")
@pytest.mark.parametrize("dtype, layout", [("float16", "last"), ("bfloat16", "scalar"), ("float16", "one-input")])
def test_enqueue_huge_more_than_2_31_elements(h, creator, tt, dtype, layout):
    torch, ts = tt
    dt = _tdtype(torch, dtype)
    need = 3 * HUGE * 2 + 2**30
    free, _ = torch.cuda.mem_get_info()
    if free < need:
        pytest.skip(f"needs {need / 2**30:.1f} GiB free GPU memory, {free / 2**30:.1f} GiB free")
    if layout == "last":
        x = torch.empty(HUGE // 13 + 1, 13, dtype=dt, device="cuda")  # periodic indexing past 2^31
        bias = torch.randn(13, device="cuda").to(dt)
    else:
        x = torch.empty(HUGE, dtype=dt, device="cuda")
        bias = torch.randn((), device="cuda").to(dt) if layout == "scalar" else None
    x.uniform_(-8, 8)
    assert x.numel() > 2**31
    y = _run(h, make(creator, 0.125), x, bias, torch.cuda.Stream(), dtype)
    ref = ts.swish(x, bias if bias is not None else torch.tensor(0.125, device="cuda").to(dt))
    assert torch.equal(_bits(torch, y), _bits(torch, ref))
    del y, ref
