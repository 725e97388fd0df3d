"""The SwishBias plugin next to the real TensorRT-RTX (tests/trt_rtx_pins.txt, installed by ``./dev setup`` into
build/trt-rtx-<version>/), one process per case.

TensorRT-RTX 1.7 loads plugin libraries into its registry and finds their creators, but its parser aborts the process
right after createPlugin (``terminate called without an active exception``, with any plugin): its plugin support is
not ours to fix. What is ours: the library knows the interface layouts of TensorRT 10 and 11 only, so it registers
nothing with TensorRT-RTX, on either way in, and says so in one line; the parse then fails cleanly.
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
PROBE = ROOT / "tests" / "trt_rtx_probe.py"
(VERSION,) = trt_lean.versions("rtx")
# getInferLibVersion() of TensorRT-RTX 1.7.1, and the library that exports it: measured with the pinned wheel.
LINE = ("[torchtrt_swish WARNING] SwishBias: {where}: not registering with the TensorRT of version 10701 "
        "(libtensorrt_rtx.so.1): this library knows the plugin and logger layouts of TensorRT 10 and 11 only; "
        "TensorRT-RTX and other majors are not supported")

pytestmark = pytest.mark.tensorrt_runtime


@functools.lru_cache(maxsize=None)
def _probe(how: str) -> subprocess.CompletedProcess:
    library = ROOT / "torchtrt_swish" / "libtorchtrt_swish_plugin.so"
    if not library.is_file():
        pytest.skip(f"the plugin library {library} is not built (needs nvcc and the TensorRT headers)")
    if not trt_lean.installed(VERSION):
        pytest.skip(f"TensorRT-RTX {VERSION} is not installed: {trt_lean.runtime_dir(VERSION)} is missing "
                    f"(./dev setup installs it; or python tests/trt_lean.py install {VERSION})")
    env = dict(os.environ, PYTHONPATH=str(trt_lean.runtime_dir(VERSION)))
    env.pop("TORCHTRT_SWISH_NO_AUTO_REGISTER", None)
    return subprocess.run([sys.executable, str(PROBE), how], capture_output=True, text=True, env=env, timeout=600,
                          cwd=ROOT)


@pytest.mark.parametrize("how", ["load_library", "cdll"])
def test_tensorrt_rtx_gets_no_creator_and_its_parse_fails_cleanly(how):
    proc = _probe(how)
    assert proc.returncode == 0, f"the probe exited {proc.returncode} (-6: TensorRT-RTX aborted it):\n{proc.stderr}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["version"] == VERSION and result["creators"] == 0
    assert result["parsed"] is False
    assert any("Plugin not found" in e for e in result["errors"]), result["errors"]
    if how == "load_library":
        assert result["handle"] is False  # the registry keeps no library that provides nothing


@pytest.mark.parametrize("how", ["load_library", "cdll"])
def test_the_refusal_is_one_line_naming_tensorrt_rtx(how):
    # The load hook sees TensorRT-RTX first (loadLibrary dlopens before it calls getCreators): that line, once.
    stderr = _probe(how).stderr
    lines = [ln for ln in stderr.splitlines() if ln.startswith("[torchtrt_swish")]
    assert lines == [LINE.format(where="load")], stderr
