"""torchtrt-swish where torchtrt_swish itself cannot load: one line and exit 2 for every sub-command (--help and
--version too), and a doctor that runs and names the cause, with its fix, as a FAIL row.

Each install is a copy of the two packages' Python files in a temporary folder, first on PYTHONPATH (before the
editable install's path entry), broken one way: a _build_info.py naming another torch, no _C, or a _C that is no
library. The console script of this environment runs the copy too, as a user's shell would.
"""
from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from torchtrt_swish._torch_pin import torch_minor

ROOT = Path(__file__).resolve().parent.parent
CONSOLE_SCRIPT = Path(sys.executable).with_name("torchtrt-swish")
OTHER_TORCH = "2.99.0"
C_SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def broken_install(tmp: Path, how: str) -> tuple[Path, str]:
    """(folder with the broken packages, a phrase the package's error must contain)."""
    for package in ("torchtrt_swish", "onnx_path"):  # the Python files: no _C, no plugin library
        shutil.copytree(ROOT / package, tmp / package, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    built = OTHER_TORCH if how == "other torch" else torch.__version__
    (tmp / "torchtrt_swish" / "_build_info.py").write_text(f"TORCH_VERSION = {built!r}\n")
    if how == "other torch":
        return tmp, f"built against torch {OTHER_TORCH} but torch {torch.__version__} is running"
    if how == "broken _C":
        (tmp / "torchtrt_swish" / f"_C{C_SUFFIX}").write_bytes(b"not an ELF file")
    return tmp, "the compiled extension torchtrt_swish._C could not be loaded"


# The console script's two lines: the copy on PYTHONPATH comes before the editable install's path entry (the source
# tree, after site-packages), so the copy is the whole install, as a wheel's would be.
ENTRY = "import sys\nfrom onnx_path.cli import main\nsys.exit(main())\n"


def run(folder: Path, *args: str, script: bool = False) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(folder))
    argv = [str(CONSOLE_SCRIPT)] if script else [sys.executable, "-c", ENTRY]
    return subprocess.run([*argv, *args], capture_output=True, text=True, cwd=folder, env=env, timeout=600)


HOWS = ["other torch", "no _C", "broken _C"]


@pytest.mark.parametrize("how", HOWS)
def test_every_sub_command_says_it_in_one_line(how, tmp_path):
    folder, cause = broken_install(tmp_path, how)
    for args in (["--help"], ["--version"], [], ["export", "-o", "a.onnx"], ["fuse", "m.onnx", "-o", "f.onnx"],
                 ["check", "m.onnx", "--torch-model", "seed-net"], ["build-engine", "m.onnx", "-o", "e.engine"],
                 ["export", "--help"]):
        proc = run(folder, *args)
        err = proc.stderr.strip().splitlines()
        assert proc.returncode == 2, (args, proc.stderr)
        assert len(err) == 1 and err[0].startswith("torchtrt-swish: error: ") and cause in err[0], (args, err)
        assert "Traceback" not in proc.stderr and proc.stdout == "", (args, proc.stdout)
        assert "torchtrt-swish doctor" in err[0], "the line points to the doctor"
    assert not (folder / "a.onnx").exists()


@pytest.mark.parametrize("how", HOWS)
def test_the_doctor_reports_it_as_a_fail_row_with_the_fix(how, tmp_path):
    folder, cause = broken_install(tmp_path, how)
    proc = run(folder, "doctor", "--json", "doctor.json")
    assert proc.returncode == 1, proc.stdout + proc.stderr  # a FAIL row
    assert "Traceback" not in proc.stderr, proc.stderr
    rows = {(r["section"], r["check"]): r for r in json.loads((folder / "doctor.json").read_text())["rows"]}
    package = rows[("environment", "torchtrt_swish")]
    assert package["status"] == "FAIL" and cause in package["detail"], package
    fix = (f"install 'torch=={torch_minor(OTHER_TORCH)}.*' or rebuild torchtrt_swish" if how == "other torch"
           else "Build it with `pip install --no-build-isolation -e .`")
    assert fix in package["detail"], package
    assert rows[("environment", "torch")]["status"] == "PASS"
    assert rows[("op", "CPU kernel")] == {"section": "op", "check": "CPU kernel", "status": "SKIPPED",
                                          "detail": "torchtrt_swish does not import (its row says why)"}
    assert "torchtrt_swish to import" in rows[("engine", "ONNX parser with the plugin")]["detail"]
    assert [r["status"] for r in rows.values()].count("FAIL") == 1, "the one cause, not its consequences"
    table = run(folder, "doctor")
    assert table.returncode == 1 and f"torchtrt_swish{' ' * 2}" in table.stdout and cause in table.stdout


def test_the_doctor_keeps_its_help_and_one_line_usage_errors(tmp_path):
    folder, _ = broken_install(tmp_path, "other torch")
    proc = run(folder, "doctor", "--help")
    assert proc.returncode == 0 and "--json" in proc.stdout, proc.stderr
    proc = run(folder, "doctor", "--bogus")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--bogus" in proc.stderr, proc.stderr
    fifo = folder / "fifo"
    os.mkfifo(fifo)
    proc = run(folder, "doctor", "--json", str(fifo))
    assert proc.returncode == 2 and "is a FIFO" in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_an_intact_install_is_untouched_by_the_guard(tmp_path):
    # The same copy, not broken: the guard lets every command through.
    folder, _ = broken_install(tmp_path, "other torch")
    (folder / "torchtrt_swish" / "_build_info.py").write_text(f"TORCH_VERSION = {torch.__version__!r}\n")
    shutil.copy(next((ROOT / "torchtrt_swish").glob(f"_C{C_SUFFIX}")), folder / "torchtrt_swish")
    proc = run(folder, "--version")
    assert proc.returncode == 0 and proc.stdout.startswith("torchtrt-swish "), proc.stderr
    assert run(folder, "export", "-o", "a.onnx").returncode == 0 and (folder / "a.onnx").is_file()


def test_the_installed_console_script_takes_the_same_way(tmp_path):
    folder, cause = broken_install(tmp_path, "other torch")
    proc = run(folder, "--version", script=True)
    assert proc.returncode == 2 and cause in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    proc = run(folder, "doctor", script=True)
    assert proc.returncode == 1 and cause in proc.stdout and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("how", ["other torch", "broken _C"])
def test_python_m_doctor_says_it_in_one_line(how, tmp_path):
    # runpy imports the package before the module: it can only report, in its one line, what the package raised.
    folder, cause = broken_install(tmp_path, how)
    env = dict(os.environ, PYTHONPATH=str(folder))
    proc = subprocess.run([sys.executable, "-m", "torchtrt_swish.doctor"], capture_output=True, text=True,
                          cwd=folder, env=env, timeout=300)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and cause in proc.stderr, proc.stderr
