"""torchtrt-swish doctor: its rows in the real TensorRT lean runtimes (marker `tensorrt_runtime`), and each check's
verdicts against mutants of what it checks (a wrong kernel, NaN turned into zeros, a second creator, a crashing
check process, a converter that leaves the op in PyTorch)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import trt_lean
from torchtrt_swish import doctor
from torchtrt_swish.doctor import FAIL, PASS, SKIPPED, CheckFailed, Row, compare, route_main
from torchtrt_swish.doctor.probe import results
from torchtrt_swish.dtypes import TOLERANCES
from torchtrt_swish.ops import swish

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ROOT / "torchtrt_swish" / "libtorchtrt_swish_plugin.so"


def _rows(report: dict) -> dict[tuple[str, str], dict]:
    return {(r["section"], r["check"]): r for r in report["rows"]}


# ------------------------------------------------------------------------------- in the real lean runtimes


def _runtime(version):
    if not LIBRARY.is_file():
        pytest.skip(f"the plugin library {LIBRARY} is not built (needs nvcc and the TensorRT headers)")
    if not trt_lean.installed(version):
        pytest.skip(f"TensorRT lean runtime {version} is not installed: {trt_lean.runtime_dir(version)} is missing "
                    f"(./dev setup installs it; or python tests/trt_lean.py install {version})")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(trt_lean.runtime_dir(version)), str(ROOT)]))
    env.pop(doctor.NO_AUTO_REGISTER_ENV, None)
    return env


@pytest.mark.tensorrt_runtime
@pytest.mark.parametrize("version", trt_lean.versions())
def test_doctor_in_a_real_lean_runtime(version, tmp_path):
    env = _runtime(version)
    if trt_lean.major(version) == 10:  # one version through the console script's entry, one through -m
        argv = ["-c", "import sys; from onnx_path.cli import main; sys.exit(main(sys.argv[1:]))", "doctor",
                "--json", str(tmp_path / "doctor.json")]
    else:
        argv = ["-m", "torchtrt_swish.doctor", "--json"]
    proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if trt_lean.major(version) == 10:
        assert "torchtrt-swish doctor: " in proc.stdout and "lean: registry load_library" in proc.stdout
        report = json.loads((tmp_path / "doctor.json").read_text())
    else:
        report = json.loads(proc.stdout)
    rows = _rows(report)
    assert rows[("environment", "TensorRT lean")] == {
        "section": "environment", "check": "TensorRT lean", "status": PASS,
        "detail": f"{trt_lean.MODULE} {version}"}
    for how in doctor.LOADING_PATHS.values():
        row = rows[("plugin", f"lean: {how}")]
        assert row["status"] == PASS, row
        assert row["detail"].startswith(f"TensorRT {version} ({trt_lean.MODULE}): 1 SwishBias creator"), row
    for flavour in ("full", "dispatch"):
        assert rows[("environment", f"TensorRT {flavour}")]["status"] == SKIPPED
    for check in (doctor.ROUTE_TORCH_TENSORRT, doctor.ROUTE_ONNX):
        row = rows[("engine", check)]
        assert row["status"] == SKIPPED and "a full TensorRT" in row["detail"], row
    assert rows[("op", "CPU kernel")]["status"] == PASS
    assert report["counts"][FAIL] == 0 and report["counts"][PASS] >= 6


def test_cdll_is_skipped_not_failed_when_self_registration_is_off(monkeypatch):
    result = {"module": "tensorrt_lean_bindings", "version": "10.16.1.11", "count": 0}
    assert doctor._plugin_row("lean", "cdll", result).status == FAIL
    monkeypatch.setenv(doctor.NO_AUTO_REGISTER_ENV, "1")
    assert doctor._plugin_row("lean", "cdll", result).status == SKIPPED
    assert doctor._plugin_row("lean", "load_library", result).status == FAIL  # loadLibrary does not depend on it
    monkeypatch.setenv(doctor.NO_AUTO_REGISTER_ENV, "0")
    assert doctor._plugin_row("lean", "cdll", result).status == FAIL


def test_plugin_rows_need_exactly_one_creator_that_creates():
    base = {"module": "tensorrt", "version": "10.16.1.11"}
    ok = doctor._plugin_row("full", "load_library", {**base, "count": 1, "created": ["BUILD", "RUNTIME"]})
    assert ok.status == PASS and ok.check == "full: registry load_library"
    two = doctor._plugin_row("full", "load_library", {**base, "count": 2, "created": ["BUILD", "RUNTIME"]})
    assert two.status == FAIL and "2 SwishBias creators registered, expected exactly 1" in two.detail
    half = doctor._plugin_row("full", "cdll", {**base, "count": 1, "created": ["BUILD"]})
    assert half.status == FAIL and "RUNTIME phase" in half.detail
    err = doctor._plugin_row("full", "load_library", {**base, "error": "PluginLoadError: refused"})
    assert err.status == FAIL and err.detail == "TensorRT 10.16.1.11 (tensorrt): PluginLoadError: refused"


def test_a_flavour_that_does_not_import_is_a_fail_row(tmp_path, monkeypatch):
    # tensorrt-cu13-bindings installs without its libs wheel and then fails at import (docs: ENVIRONMENT); a
    # dispatch module that takes its process down stands for a broken install. Both are found by module name.
    (tmp_path / "tensorrt_bindings").mkdir()
    (tmp_path / "tensorrt_bindings" / "__init__.py").write_text(
        "raise ImportError('libnvinfer.so.10: cannot open shared object file: No such file or directory')\n")
    (tmp_path / "tensorrt_dispatch").mkdir()
    (tmp_path / "tensorrt_dispatch" / "__init__.py").write_text("import os\nos.abort()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    env, plugin, importable = doctor.tensorrt_rows(LIBRARY)
    env = {r.check: r for r in env}
    assert env["TensorRT full"] == Row("environment", "TensorRT full", FAIL, (
        "installed, but does not import: tensorrt_bindings: ImportError: libnvinfer.so.10: cannot open shared object "
        "file: No such file or directory"))
    assert env["TensorRT dispatch"].status == FAIL
    assert env["TensorRT dispatch"].detail == ("installed, but does not import: the check process was killed by "
                                              "signal 6")
    assert importable == {}
    assert {r.check: r.detail for r in plugin}["full: registry load_library"] == "TensorRT full does not import"


def test_a_hanging_import_is_a_fail_row_that_says_what_it_waited_for(tmp_path, monkeypatch):
    # A tensorrt and a torch_tensorrt whose import never returns: each waits its own short timeout, not 900 s, and
    # the modules after the hanging one are still imported.
    from torchtrt_swish import extras

    for name in ("tensorrt", "torch_tensorrt"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("import time\ntime.sleep(600)\n")
    (tmp_path / "quick_extra.py").write_text("__version__ = '1.0'\n")  # imports at once, even on a loaded machine
    monkeypatch.setattr(extras, "EXTRAS", {"onnx": ("quick_extra",)})
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setattr(doctor, "IMPORT_TIMEOUT_S", 5)
    start = time.monotonic()
    env = {r.check: r for r in doctor.tensorrt_rows(LIBRARY)[0]}
    assert env["TensorRT full"] == Row("environment", "TensorRT full", FAIL, (
        "installed, but does not import: import tensorrt or tensorrt_bindings did not finish within 5 s (the check "
        "process was stopped)"))
    rows, found = doctor.module_rows(gpu=True)
    rows = {r.check: r for r in rows}
    assert rows["torch_tensorrt"] == Row("environment", "torch_tensorrt", FAIL, (
        "installed, but does not import: import torch_tensorrt did not finish within 5 s (the process was stopped)"))
    assert rows["quick_extra"] == Row("environment", "quick_extra", PASS, "1.0"), rows
    assert found["quick_extra"] and not found["torch_tensorrt"]
    assert time.monotonic() - start < 60


def test_an_import_that_kills_its_process_is_a_fail_row_and_the_rest_go_on(tmp_path, monkeypatch):
    (tmp_path / "torch_tensorrt").mkdir()
    (tmp_path / "torch_tensorrt" / "__init__.py").write_text("import os, sys\nsys.stderr.write('dying')\nos.abort()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    rows, found = doctor.module_rows(gpu=True)
    rows = {r.check: r for r in rows}
    assert rows["torch_tensorrt"].detail == ("installed, but does not import: the import process was killed by "
                                             "signal 6: dying"), rows["torch_tensorrt"]
    assert rows["onnx"].status == PASS


def test_the_flavours_cover_every_module_the_plugin_loads_into():
    from torchtrt_swish.plugin import TENSORRT_MODULES

    flavours = doctor.tensorrt_flavours()
    assert flavours == {"full": ("tensorrt", "tensorrt_bindings"), "lean": ("tensorrt_lean", "tensorrt_lean_bindings"),
                        "dispatch": ("tensorrt_dispatch", "tensorrt_dispatch_bindings")}
    assert set(TENSORRT_MODULES) <= {m for ms in flavours.values() for m in ms}


# ------------------------------------------------------------------------------------------------------- op


def test_op_parity_passes_the_real_kernel_on_the_cpu():
    assert "max abs error" in doctor.op_parity("cpu")


def _float32_shifted(factor):
    """The op, with its float32 results moved by `factor` times the float32 tolerance at each element."""
    atol, rtol = TOLERANCES["float32"]

    def mutant(x, b):
        y = swish(x, b)
        if y.dtype != torch.float32:
            return y
        ref = F.silu(x.double()) + b.double()
        return (y.double() + factor * (atol + rtol * ref.abs())).to(y.dtype)

    return mutant


def test_op_parity_holds_the_tolerance():
    doctor.op_parity("cpu", _float32_shifted(0.5))  # inside the bound: passes
    with pytest.raises(CheckFailed, match="^float32, scalar bias: .*not close"):
        doctor.op_parity("cpu", _float32_shifted(2.0))


@pytest.mark.parametrize("mutant, match", [
    (lambda x, b: x * torch.sigmoid(x), "not close"),  # the bias dropped
    (lambda x, b: swish(x, b).nan_to_num(nan=0.0, posinf=float("inf"), neginf=-float("inf")),
     "NaN did not propagate"),  # NaN is evidence, never zero
    (lambda x, b: torch.where(x == 0, float("nan"), swish(x, b)), "NaN never passes"),  # NaN where a number belongs
    (lambda x, b: x * torch.sigmoid(x) * (1 - torch.sigmoid(x)) + b,
     "got nan, expected inf"),  # the seed's sigmoid-derivative: inf * 1 * 0 at x = inf
    (lambda x, b: swish(x, b).float(), "returned torch.float32"),  # the dtype not kept (fp16 / bf16)
])
def test_op_parity_fails_a_wrong_op(mutant, match):
    with pytest.raises(CheckFailed, match=match):
        doctor.op_parity("cpu", mutant)


def test_op_rows_skip_cuda_without_a_gpu_and_report_failures(monkeypatch):
    rows = doctor.op_rows(gpu=False)
    assert [(r.check, r.status) for r in rows] == [("CPU kernel", PASS), ("CUDA kernel", SKIPPED)]

    def broken(device, swish=None):
        raise CheckFailed("float16, full bias: boom")

    monkeypatch.setattr(doctor, "op_parity", broken)
    assert doctor.op_rows(gpu=False)[0] == Row("op", "CPU kernel", FAIL, "float16, full bias: boom")


@pytest.mark.cuda
def test_the_cuda_rows_check_this_gpus_plans():
    """On a GPU the op rows include the plans of its SM count: every switch-point family checked and right."""
    import torch

    rows = doctor.op_rows(gpu=True)
    plans = [r for r in rows if r.check == "CUDA plans"]
    assert len(plans) == 1 and plans[0].status == PASS, rows
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert f"({sms} SMs)" in plans[0].detail
    assert int(plans[0].detail.split()[0]) >= 12, plans[0].detail  # at least two shapes per plan family


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("got, expected", [
    ([NAN], [NAN]), ([1.0], [NAN]), ([NAN], [1.0]), ([INF], [-INF]), ([1.0], [INF]), ([INF], [1.0]),
    ([INF, 1.0], [INF, 1.0]), ([-INF], [-INF]), ([1.0, 2.0], [1.0, 2.0 + 1e-9]),
])
def test_compare_holds_the_rule_of_check(got, expected):
    # One rule: the doctor fails exactly where `check`'s statistics have an unmatched position (NaN never passes).
    from onnx_path.verdict import error_stats

    fails = error_stats(got, expected)["nonfinite"]["mismatched"] > 0
    if fails:
        with pytest.raises(CheckFailed, match="NaN never passes"):
            compare(torch.tensor(got), torch.tensor(expected), "float32")
    else:
        assert compare(torch.tensor(got), torch.tensor(expected), "float32") <= 1e-9
    assert fails == (NAN in got or NAN in expected or got[0] != expected[0])  # the cases mean what they say


# ---------------------------------------------------------------------------------------------- the children


def test_route_main_prints_one_json_row(capsys):
    assert route_main("r", lambda: "fine") == 0
    assert results(capsys.readouterr().out)[-1] == {"section": "engine", "check": "r", "status": PASS,
                                                    "detail": "fine"}

    def boom():
        raise AttributeError("'ILayer' object has no attribute 'precision_is_set'\nmore")

    route_main("r", boom)
    assert results(capsys.readouterr().out)[-1]["detail"] == (
        "AttributeError: 'ILayer' object has no attribute 'precision_is_set'")


def _child(code: str) -> list[str]:
    return [sys.executable, "-c", f"from torchtrt_swish.doctor.probe import emit\n{code}"]


def test_a_crashing_or_silent_check_process_is_a_failure():
    with pytest.raises(CheckFailed, match="killed by signal 6$"):
        doctor.run_child(_child("import os; os.abort()"), timeout=60, waited_for="w")
    with pytest.raises(CheckFailed, match=r"exited 3: one \| two \| three$"):  # the last three lines of stderr
        doctor.run_child(_child("import sys; sys.stderr.write('zero\\none\\ntwo\\nthree\\n'); sys.exit(3)"),
                         timeout=60, waited_for="w")
    with pytest.raises(CheckFailed, match="exited 0 without output$"):
        doctor.run_child(_child("pass"), timeout=60, waited_for="w")
    assert doctor.run_child(_child("print('noise'); emit({'a': 1})"), timeout=60, waited_for="w") == {"a": 1}


def test_output_without_a_newline_is_neither_lost_nor_glued_to_the_result():
    # C code writing to stdout without a newline, before the result and after it (flushed at exit).
    noisy = "import os\nos.write(1, b'[TRT] noise')\nemit({'a': 1})\nos.write(1, b'late noise')\n"
    assert doctor.run_child(_child(noisy), timeout=60, waited_for="w") == {"a": 1}
    with pytest.raises(CheckFailed, match="exited 0 without a result line; its output ended: half a line$"):
        doctor.run_child(_child("import os; os.write(1, b'half a line')"), timeout=60, waited_for="w")
    with pytest.raises(CheckFailed, match=r'its output ended: \{"not a marker": 1\}$'):
        doctor.run_child(_child("print('{\"not a marker\": 1}', end='')"), timeout=60, waited_for="w")


def test_a_hanging_check_process_names_what_it_waited_for():
    with pytest.raises(CheckFailed, match=r"^import tensorrt did not finish within 0.5 s \(the check process was "
                                          r"stopped\)$"):
        doctor.run_child(_child("import time; time.sleep(60)"), timeout=0.5, waited_for="import tensorrt")


def test_engine_rows_say_what_is_missing():
    found = {"gpu": False, "torch_tensorrt": None, "onnx": object(), "polygraphy": None}
    rows = {r.check: r for r in doctor.engine_rows(found, {"lean": "tensorrt_lean_bindings"}, None)}
    trt_row, onnx_row = rows[doctor.ROUTE_TORCH_TENSORRT], rows[doctor.ROUTE_ONNX]
    assert trt_row.status == onnx_row.status == SKIPPED
    assert trt_row.detail == ("needs a full TensorRT (the tensorrt package, with its builder and ONNX parser), a CUDA "
                              "GPU, the plugin library, torch_tensorrt (pip install torch-tensorrt)")
    assert onnx_row.detail.endswith("the plugin library, polygraphy (pip install 'torchtrt_swish[onnx]')")


def test_an_engine_route_that_fails_in_its_process_is_a_fail_row():
    # Everything the ONNX route needs is claimed present: its real process then fails here at `import tensorrt`,
    # and that failure, not a traceback, is the row.
    found = {"gpu": True, "torch_tensorrt": None, "onnx": object(), "polygraphy": object()}
    rows = {r.check: r for r in doctor.engine_rows(found, {"full": "tensorrt"}, LIBRARY)}
    row = rows[doctor.ROUTE_ONNX]
    assert row.status == FAIL and row.detail == "ModuleNotFoundError: No module named 'tensorrt'", row


# -------------------------------------------- the Torch-TensorRT route against stand-ins for compile/save/load


class _Converted(torch.nn.Module):
    """What a converted module does in place of the op: no torchtrt_swish.swish call left (the engine computes it)."""

    def __init__(self, bias, shift=0.0):
        super().__init__()
        self.bias, self.shift = bias, shift

    def forward(self, x):
        return F.silu(x) + self.bias + self.shift


def _stand_ins(monkeypatch, compiled, loaded=None):
    from torchtrt_swish import compile as trt_compile

    calls = []

    def compile_(model, inputs, **settings):
        calls.append(("compile", settings))
        return compiled(model, inputs)

    monkeypatch.setattr(trt_compile, "compile", compile_)
    monkeypatch.setattr(trt_compile, "save", lambda module, path: calls.append(("save", Path(path).name)))
    monkeypatch.setattr(trt_compile, "load", lambda path: (loaded or compiled)(None, None))
    return calls


def test_the_route_passes_a_converted_module(monkeypatch):
    _, _, bias = doctor.tiny_case()
    calls = _stand_ins(monkeypatch, lambda model, inputs: _Converted(bias))
    assert doctor.torch_tensorrt_route("cpu").startswith("compiled (no swish left in PyTorch), saved, loaded and run")
    assert calls == [("compile", {"device": "cpu", "require_full_compilation": True}), ("save", "tiny.ep")]


def test_the_route_fails_when_the_op_stays_in_pytorch(monkeypatch):
    # Torch-TensorRT's partitioner leaves a node its converters refuse as a call_function node in the outer graph.
    def fallback(model, inputs):
        return torch.export.export(model, tuple(inputs)).module()

    _stand_ins(monkeypatch, fallback)
    with pytest.raises(CheckFailed, match="1 swish node.s. stayed in PyTorch"):
        doctor.torch_tensorrt_route("cpu")


def test_the_route_compares_the_loaded_module_too(monkeypatch):
    _, _, bias = doctor.tiny_case()
    _stand_ins(monkeypatch, lambda model, inputs: _Converted(bias), loaded=lambda *_: _Converted(bias, shift=0.01))
    with pytest.raises(CheckFailed, match="not close"):
        doctor.torch_tensorrt_route("cpu")


# ---------------------------------------------------------------------------------------------------- output


def test_table_json_and_exit_code(monkeypatch, tmp_path, capsys):
    rows = [Row("environment", "torch", PASS, "2.14.1"), Row("op", "CUDA kernel", SKIPPED, "no CUDA GPU visible")]
    monkeypatch.setattr(doctor, "collect", lambda: list(rows))
    args = type("Args", (), {"json": str(tmp_path / "d.json")})
    assert doctor.run(args) == doctor.EXIT_OK
    out = capsys.readouterr().out
    assert "op           CUDA kernel  SKIPPED  no CUDA GPU visible" in out
    assert "torchtrt-swish doctor: 1 PASS, 0 FAIL, 1 SKIPPED" in out
    assert json.loads((tmp_path / "d.json").read_text())["counts"] == {PASS: 1, FAIL: 0, SKIPPED: 1}
    rows.append(Row("plugin", "lean: registry load_library", FAIL, "0 SwishBias creators"))
    args.json = "-"
    assert doctor.run(args) == doctor.EXIT_FAILED
    assert json.loads(capsys.readouterr().out)["rows"][-1]["status"] == FAIL
    args.json = str(tmp_path / "missing" / "d.json")
    assert doctor.run(args) == doctor.EXIT_USAGE
    assert capsys.readouterr().err.strip() == (f"torchtrt-swish doctor: error: --json {args.json} cannot be written: "
                                               f"its folder {tmp_path / 'missing'} does not exist")
