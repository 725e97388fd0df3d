"""The SwishBias plugin inside real TensorRT lean runtimes (marker `tensorrt_runtime`), one process per version.

The runtimes are the pinned wheels of tests/trt_lean_pins.txt, installed by ``./dev setup`` into
build/trt-lean-<version>/; a version whose folder is missing is skipped with that folder named. Each case runs
tests/trt_runtime_probe.py in its own process (PYTHONPATH = that folder) through both loading paths,
``torchtrt_swish.plugin.load_plugin`` (the registry's ``load_library``) and ``ctypes.CDLL`` after importing TensorRT
(what Polygraphy ``--plugins`` does), alone, twice and combined in either order. From Python only the capability
objects' *properties* reach the C++ plugin (their methods are documentation stubs for Python plugins), so those
are what is checked. The GPU cases (also marked `cuda`) create a real ``trt.Runtime`` with a Python logger and
check that the plugin's error messages reach it.
"""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import trt_lean

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "tests" / "trt_runtime_probe.py"

pytestmark = pytest.mark.tensorrt_runtime

VERSIONS = trt_lean.versions()
IDENTITY = ["SwishBias", "1", "torchtrt_swish"]  # restated from the plugin contract, not read from the code
FIELDS = []  # the plugin has no fields: its bias is the second input
# Loading paths alone, twice, and combined. load_library is the registry's own call (no check first).
SCENARIOS = {
    "load_plugin": ["load_plugin"],
    "cdll": ["cdll"],
    "load_plugin twice": ["load_plugin", "load_plugin"],
    "load_library twice": ["load_library", "load_library"],
    "cdll twice": ["cdll", "cdll"],
    "load_library then cdll": ["load_library", "cdll"],
    "cdll then load_library": ["cdll", "load_library"],
    "load_plugin then cdll": ["load_plugin", "cdll"],
    "cdll then load_plugin": ["cdll", "load_plugin"],
    "errors then load_plugin": ["missing", "not_a_plugin", "load_plugin", "load_library"],
    "load_plugin from threads": ["load_plugin_threads", "load_library"],
}
LOADING_STEPS = {"load_plugin", "load_plugin_threads", "cdll", "load_library"}
# Fields createPlugin is given although the plugin has none: ignored (as TensorRT's field-less creators do), each
# named in a warning.
IGNORED_FIELDS = {
    "former bias field": "ignoring field 'bias'",
    "length 2": "ignoring field 'bias'",
    "unknown name": "ignoring field 'no_such_field'",
    "int32 type": "ignoring field 'bias'",
}


def _plugin_library() -> Path:
    path = ROOT / "torchtrt_swish" / "libtorchtrt_swish_plugin.so"
    if not path.is_file():
        pytest.skip(f"the plugin library {path} is not built (needs nvcc and the TensorRT headers)")
    return path


def _runtime(version: str) -> Path:
    folder = trt_lean.runtime_dir(version)
    if not trt_lean.installed(version):
        pytest.skip(f"TensorRT lean runtime {version} is not installed: {folder} is missing "
                    f"(./dev setup installs it; or python tests/trt_lean.py install {version})")
    return folder


@functools.lru_cache(maxsize=None)
def _probe(version: str, steps: tuple[str, ...], logger: bool = False,
           no_auto_register: str | None = None) -> tuple[dict, str]:
    env = dict(os.environ, PYTHONPATH=str(trt_lean.runtime_dir(version)))
    env.pop("TORCHTRT_SWISH_NO_AUTO_REGISTER", None)
    if no_auto_register is not None:
        env["TORCHTRT_SWISH_NO_AUTO_REGISTER"] = no_auto_register
    argv = [sys.executable, str(PROBE), ",".join(steps)] + (["--logger"] if logger else [])
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, f"probe {steps} on TensorRT {version} exited {proc.returncode}:\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


@pytest.fixture(params=VERSIONS)
def version(request):
    """A pinned TensorRT version whose lean runtime is installed (skipped, naming the folder, where not)."""
    _plugin_library()
    _runtime(request.param)
    return request.param


@pytest.fixture(params=list(SCENARIOS))
def run(request, version):
    """(result, stderr) of the probe for one version and one loading scenario."""
    return _probe(version, tuple(SCENARIOS[request.param]))


# ------------------------------------------------------------------------------------------- every scenario


def test_the_probe_ran_the_pinned_runtime(version, run):
    result, _ = run
    assert result["module"] == trt_lean.MODULE
    assert result["version"] == version


def test_exactly_one_creator_after_every_loading_step(run):
    result, _ = run
    for step in result["steps"]:
        assert step["count"] == (1 if step["step"] in LOADING_STEPS else 0), step
    assert result["count"] == 1


def test_get_creator_and_field_names(run):
    result, _ = run
    assert result["get_creator"] == IDENTITY
    assert result["fields"] == FIELDS


def test_create_plugin_in_build_and_runtime_phase(run):
    result, _ = run
    assert result["created"] == {"BUILD": True, "RUNTIME": True}
    assert result["runtime_capability"] is True


def test_fields_are_ignored_with_a_warning_without_a_crash(run):
    result, stderr = run  # the probe exited 0: no crash
    assert result["ignored"] == {name: True for name in IGNORED_FIELDS}
    # No TensorRT logger exists in a process without a Runtime: the plugin's stderr fallback carries the warning.
    for warning in IGNORED_FIELDS.values():
        assert f"[torchtrt_swish WARNING] SwishBias: createPlugin: probe: {warning}" in stderr, stderr


def test_plugin_identity_through_the_core_capability(run):
    result, _ = run
    assert result["core"] == IDENTITY


def test_build_capability_properties(run):
    result, _ = run
    # One output; the rest are IPluginV3OneBuild's defaults (kDEFAULT_FORMAT_COMBINATION_LIMIT = 100, no metadata
    # string, no timing cache id), which the plugin keeps.
    assert result["build"] == {"num_outputs": 1, "format_combination_limit": 100, "metadata_string": None,
                               "timing_cache_id": None}


# ------------------------------------------------------------------------------------------ step by step


def _steps(version, name):
    return _probe(version, tuple(SCENARIOS[name]))[0]["steps"]


def test_load_plugin_returns_the_creator_and_is_idempotent(version):
    for name in ("load_plugin", "load_plugin twice", "cdll then load_plugin"):
        for step in _steps(version, name):
            if step["step"] == "load_plugin":
                assert step["returned"] == IDENTITY, name


def test_load_plugin_from_many_threads_loads_once(version):
    threads, again = _steps(version, "load_plugin from threads")
    assert threads["returned"] == [IDENTITY] and threads["count"] == 1
    assert again["handle"] is False, "the threads' load must have gone through the registry's load_library"


def test_the_registry_refuses_a_second_load_library(version):
    # TensorRT's loadLibrary fails for a library whose creators are registered: load_plugin must check first.
    assert [s["handle"] for s in _steps(version, "load_library twice")] == [True, False]


def test_load_library_after_cdll_takes_over_the_registration(version):
    # The dlopen hook registered the creator; getCreators withdraws it so that loadLibrary can register it.
    cdll, load = _steps(version, "cdll then load_library")
    assert cdll["count"] == 1 and load == {"step": "load_library", "handle": True, "count": 1}


def test_cdll_after_load_library_adds_nothing(version):
    load, cdll = _steps(version, "load_library then cdll")
    assert load["handle"] is True and cdll["count"] == 1


def test_load_plugin_errors_name_the_library_and_the_reason(version):
    missing, not_a_plugin, loaded, again = _steps(version, "errors then load_plugin")
    assert missing["path"] in missing["error"] and "does not exist" in missing["error"]
    assert not_a_plugin["path"] in not_a_plugin["error"] and "refused to load" in not_a_plugin["error"]
    assert 'SwishBias (version "1", namespace "torchtrt_swish")' in not_a_plugin["error"]
    assert loaded["returned"] == IDENTITY and again["handle"] is False


@pytest.mark.parametrize("value,registers", [("", True), ("0", True), ("1", False), ("yes", False)])
def test_no_auto_register_switches_off_only_the_dlopen_registration(version, value, registers):
    # Unset is every other case here; empty and 0 mean "register", as the doctor reads them (doctor.py).
    cdll, load = _probe(version, ("cdll", "load_library"), no_auto_register=value)[0]["steps"]
    assert cdll["count"] == (1 if registers else 0), value
    assert load == {"step": "load_library", "handle": True, "count": 1}  # loadLibrary registers either way


def test_every_pinned_major_is_covered():
    assert sorted({trt_lean.major(v) for v in VERSIONS}) == [10, 11]


# ------------------------------------------------------------------------------------ GPU: TensorRT's logger


@pytest.mark.cuda
@pytest.mark.parametrize("path", ["load_plugin", "cdll"])
def test_plugin_errors_reach_tensorrts_logger(version, path):
    result, stderr = _probe(version, (path,), logger=True)
    assert result["runtime"] is True
    assert result["ignored"] == {name: True for name in IGNORED_FIELDS}
    captured = result["captured"]
    for warning in IGNORED_FIELDS.values():
        hits = [(severity, msg) for severity, msg in captured if warning in msg]
        assert hits, f"{warning!r} did not reach the Python ILogger; it captured {captured}"
        # ILogger.Severity.WARNING is 2
        assert all(severity == 2 and msg.startswith("SwishBias: createPlugin: ") for severity, msg in hits), hits
    assert "[torchtrt_swish" not in stderr, "with a TensorRT logger present the stderr fallback must stay silent"
