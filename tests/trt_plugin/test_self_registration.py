"""Self-registration when the library is dlopened next to TensorRT, checked against the stand-in
libnvinfer.so.10 (tests/trt_harness/fake_tensorrt): once per process, load_library after dlopen, switched off by
TORCHTRT_SWISH_NO_AUTO_REGISTER, nothing called on an unknown TensorRT major.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trt_plugin.harness import BUILD_HINT, FAKE_NVINFER, PLUGIN_PATH, needs_plugin


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
        out["refused"] = fake.fake_create_in_unknown_phase()
    else:
        ctypes.CDLL(plugin)  # what Polygraphy --plugins does
        out["after_cdll"] = entries()
        if scenario in ("cdll_then_load", "no_auto"):
            out["load"] = fake.fake_load_library(plugin.encode())
        if scenario == "logger":
            out["refused"] = fake.fake_create_in_unknown_phase()
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


# The one line for a TensorRT whose layouts the library does not know (TensorRT-RTX in test_tensorrt_rtx.py).
REFUSAL = ("[torchtrt_swish WARNING] SwishBias: {where}: not registering with the TensorRT of version 120000 "
           "(libnvinfer.so.10): this library knows the plugin and logger layouts of TensorRT 10 and 11 only; "
           "TensorRT-RTX and other majors are not supported")


def _plugin_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("[torchtrt_swish")]


@needs_plugin
def test_no_registration_into_an_unknown_tensorrt_major(tmp_path):
    # Majors 10 and 11 are checked against the real lean runtimes (test_tensorrt_runtime.py); any other major's
    # registry and logger layouts are unknown, so nothing is called on them and the reason goes to stderr.
    r = _registration("version", tmp_path)
    assert r["after_cdll"] == [] and r["register_calls"] == 0
    assert r["warnings_logged"] == 0 and r["errors_logged"] == 0
    assert _plugin_lines(r["stderr"]) == [REFUSAL.format(where="load")], r["stderr"]


@needs_plugin
def test_load_library_of_an_unknown_tensorrt_major_gets_no_creator(tmp_path):
    # The load hook is off: getCreators tells the loading TensorRT from its caller and hands it nothing (it would
    # register what it gets); neither its logger finder nor its loggers are called.
    r = _registration("finder_version", tmp_path)
    assert r["entries"] == [] and r["register_calls"] == 0 and r["refused"] == -1
    assert r["errors_logged"] == 0 and r["warnings_logged"] == 0
    assert _plugin_lines(r["stderr"]) == [REFUSAL.format(where="getCreators")], r["stderr"]


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
