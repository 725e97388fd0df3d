"""IPluginV3OneRuntime without a GPU: onShapeChange layout rules, clone, attachToContext (error recorder),
the serialization round trip, and enqueue's error paths (including the CUDA error where no GPU exists).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from trt_plugin.harness import ACCEPTED, REJECTED, SUPPORTED, descs, errors, gpu_available, make


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
                                  "x float64-like", "format", "counts", "one input", "overflow"])
def test_on_shape_change_rejects_bad_descriptions(h, creator, logs, case):
    T = h.TensorDesc
    ins, outs = {
        "unresolved x": ([T("float32", [-1, 3]), T("float32", [3])], [T("float32", [-1, 3])]),
        "unresolved bias": ([T("float32", [2, 3]), T("float32", [-1])], [T("float32", [2, 3])]),
        "output shape": ([T("float32", [2, 3]), T("float32", [3])], [T("float32", [3, 2])]),
        "output type": ([T("float32", [2, 3]), T("float32", [1])], [T("float16", [2, 3])]),
        "bias type": ([T("float16", [2, 3]), T("float32", [3])], [T("float16", [2, 3])]),
        "x float64-like": ([T("int64", [2, 3]), T("int64", [1])], [T("int64", [2, 3])]),
        "format": ([T("float32", [2, 3], format="hwc8"), T("float32", [1], format="hwc8")],
                   [T("float32", [2, 3], format="hwc8")]),
        "counts": ([], [T("float32", [2, 3])]),
        "one input": ([T("float32", [2, 3])], [T("float32", [2, 3])]),
        "overflow": ([T("float32", [2**40, 2**40]), T("float32", [1])], [T("float32", [2**40, 2**40])]),
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
def test_serialization_round_trip(h, creator, logs, phase):
    p = make(creator, phase)
    fields = p.fields_to_serialize()
    assert fields == []  # no fields: the bias is the second input
    q = creator.create("deserialized", fields, "runtime")  # what TensorRT does when it deserializes an engine
    assert q is not None
    assert q.fields_to_serialize() == fields
    assert _answers(h, q) == _answers(h, p)
    assert q.capability("core") and q.capability("runtime")


def test_clone_is_independent(h, creator, logs):
    p = make(creator)
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
    p = make(creator, "runtime")
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


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 0, 7)], ids=str)
def test_enqueue_empty_tensor_needs_no_buffers(h, creator, logs, shape):
    p = make(creator)
    ins, outs = descs(h, "float16", shape, [1] * len(shape))
    assert p.on_shape_change(ins, outs) == 0
    assert p.enqueue(ins, outs, [0, 0], [0], stream=0) == 0
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


@pytest.mark.skipif(gpu_available(), reason="checks the CUDA error path of a machine without a GPU")
def test_enqueue_without_a_gpu_returns_an_error_and_logs_cuda_text(h, creator, logs):
    p = make(creator)
    ins, outs = descs(h, "float32", [8], [8])
    assert p.on_shape_change(ins, outs) == 0
    assert p.enqueue(ins, outs, [4096, 4096], [8192]) != 0  # never dereferenced: the launch itself fails
    errs = errors(logs)
    assert len(errs) == 1 and "cudaError" in errs[0], errs


def test_enqueue_reports_the_first_driver_error():
    """A failing cuStreamIsCapturing is the error enqueue reports (a stand-in libcuda answers 906), not a later
    launch failure that would hide its cause. In a process of its own: the plugin looks libcuda up once."""
    import subprocess
    import sys

    from trt_plugin.harness import BUILD_DIR, HARNESS_FILE, PLUGIN_PATH

    fake = BUILD_DIR / "fake_cuda" / "libcuda.so.1"
    if PLUGIN_PATH is None or not HARNESS_FILE.exists() or not fake.exists():
        pytest.skip(f"needs the plugin, the harness and the stand-in libcuda built in {BUILD_DIR}")
    code = f"""
import ctypes, sys
ctypes.CDLL({str(fake)!r}, mode=ctypes.RTLD_GLOBAL)
sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
from trt_plugin.harness import load_module_from, descs
h = load_module_from(__import__("pathlib").Path({str(HARNESS_FILE)!r}), "_trt_harness")
lib = h.Library({str(PLUGIN_PATH)!r})
(creator,) = lib.creators()
p = creator.create("swish", None, "runtime")
ins, outs = descs(h, "float32", [4], [1])
assert p.on_shape_change(ins, outs) == 0
print("rc", p.enqueue(ins, outs, [256, 512], [768], stream=0x5000))
print([m for s, m in h.take_logs() if s in ("error", "internal_error")])
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "rc 1" in proc.stdout and "CUresult 906" in proc.stdout, proc.stdout
