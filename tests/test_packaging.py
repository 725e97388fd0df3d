"""The build as a user meets it: CUDA discovery, the wheel's torch pin, incremental rebuilds.

The full path (plain `pip wheel .` in a fresh venv, install, smoke test outside the tree) is `./dev wheel`, which CI
runs after the test suite; these are the quick checks of the rules it relies on.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tools_native import ROOT, native_build

pin = native_build._torch_pin()  # by path, as setup.py loads it: these checks need no built _C

# ----------------------------------------------------------------------------- CUDA discovery


def _fake_toolkit(root: Path, *, report_top: bool = False) -> Path:
    """A directory shaped like a CUDA toolkit; its nvcc answers a dry run with TOP= when report_top."""
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    (root / "include" / "cuda_runtime_api.h").write_text("")
    nvcc = root / "bin" / "nvcc"
    body = 'echo "#\\$ TOP=$(dirname "$0")/.." >&2\n' if report_top else ""
    nvcc.write_text(f"#!/bin/sh\n{body}exit 0\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    return root


def _which_in(path_dir: Path):
    """shutil.which restricted to one directory (the test's stand-in PATH)."""
    return lambda cmd, path=None: shutil.which(cmd, path=str(path_dir))


def test_cuda_home_and_cuda_path_come_first(tmp_path):
    home = _fake_toolkit(tmp_path / "home")
    other = _fake_toolkit(tmp_path / "other")
    found = native_build.find_cuda_home({"CUDA_HOME": str(home), "CUDA_PATH": str(other)}, _which_in(other / "bin"),
                                        other)
    assert found == (home, "CUDA_HOME")
    found = native_build.find_cuda_home({"CUDA_PATH": str(home)}, _which_in(other / "bin"), other)
    assert found == (home, "CUDA_PATH")


def test_a_cuda_home_without_nvcc_is_an_error_naming_it(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(native_build.CudaHomeError, match=re.escape(f"CUDA_HOME={tmp_path / 'empty'} has no bin/nvcc")):
        native_build.find_cuda_home({"CUDA_HOME": str(tmp_path / "empty")}, _which_in(tmp_path), tmp_path / "none")


def test_a_symlinked_nvcc_on_path_resolves_to_its_toolkit(tmp_path):
    toolkit = _fake_toolkit(tmp_path / "cuda-13.0")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvcc").symlink_to(toolkit / "bin" / "nvcc")
    root, origin = native_build.find_cuda_home({}, _which_in(tmp_path / "bin"), tmp_path / "none")
    assert root == toolkit.resolve() and "nvcc on PATH" in origin


def test_a_wrapper_nvcc_on_path_finds_the_root_nvcc_reports(tmp_path):
    # As on this project's machines: /usr/local/bin/nvcc is a script that execs the toolkit's nvcc.
    toolkit = _fake_toolkit(tmp_path / "cuda-13.0", report_top=True)
    (tmp_path / "bin").mkdir()
    wrapper = tmp_path / "bin" / "nvcc"
    wrapper.write_text(f'#!/bin/sh\nexec {toolkit / "bin" / "nvcc"} "$@"\n')
    wrapper.chmod(0o755)
    fallback = _fake_toolkit(tmp_path / "usr-local-cuda")
    root, origin = native_build.find_cuda_home({}, _which_in(tmp_path / "bin"), fallback)
    assert root == toolkit.resolve(), (root, origin)
    assert str(wrapper) in origin


def test_without_nvcc_on_path_the_fallback_then_nothing(tmp_path):
    (tmp_path / "bin").mkdir()
    fallback = _fake_toolkit(tmp_path / "usr-local-cuda")
    assert native_build.find_cuda_home({}, _which_in(tmp_path / "bin"), fallback) == (fallback, str(fallback))
    root, origin = native_build.find_cuda_home({}, _which_in(tmp_path / "bin"), tmp_path / "none")
    assert root is None and "no CUDA toolkit" in origin


def test_without_cuda_the_build_is_the_cpu_op_and_says_so(monkeypatch, capsys):
    monkeypatch.setattr(native_build, "CUDA_ROOT", None)
    monkeypatch.setattr(native_build, "CUDA_ORIGIN", "no CUDA toolkit: (test)")
    monkeypatch.delenv("TORCHTRT_SWISH_FORCE_CPU", raising=False)
    assert native_build.with_cuda() is False
    assert "no CUDA toolkit: (test): building the CPU op only" in capsys.readouterr().out
    (ext,) = native_build.get_extensions(False)
    assert not any("cuda" in s for s in ext.sources), ext.sources
    notes = native_build.build_native().notes
    assert notes == ["TensorRT plugin NOT built: no CUDA toolkit: (test) (no CUDA kernels either: CPU-only op)"]


_SETUP_PROBE = textwrap.dedent("""
    import os, runpy, sys
    if sys.argv[1] == "preimported":
        import torch.utils.cpp_extension  # guesses CUDA_HOME before setup.py runs
    sys.argv = ["setup.py", "--name"]
    runpy.run_path("setup.py", run_name="__main__")
    import torch.utils.cpp_extension as c
    print("RESULT", c.CUDA_HOME, os.environ.get("CUDA_HOME"))
""")


@pytest.mark.parametrize("order", ["fresh", "preimported"])
def test_setup_settles_torchs_cuda_home(order):
    # Without CUDA_HOME / CUDA_PATH: the case where torch's own guess goes wrong (a wrapper nvcc on PATH).
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    root = native_build.find_cuda_home(env)[0]
    if root is None:
        pytest.skip("needs a CUDA toolkit (none found: nvcc on PATH, /usr/local/cuda)")
    proc = subprocess.run([sys.executable, "-c", _SETUP_PROBE, order], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")][-1]
    assert line.split()[1:] == [str(root), str(root)], line
    assert (Path(line.split()[1]) / "include" / "cuda_runtime_api.h").is_file()


def test_a_build_with_a_wrong_cuda_home_stops_with_one_line(tmp_path):
    env = {**os.environ, "CUDA_HOME": str(tmp_path / "no-cuda")}
    proc = subprocess.run([sys.executable, "setup.py", "--name"], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=300)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1] == (f"[torchtrt_swish build] CUDA_HOME={tmp_path / 'no-cuda'} has no "
                                                    "bin/nvcc: point it at a CUDA toolkit root or unset it")


# ----------------------------------------------------------------------------- the torch pin


@pytest.mark.parametrize("version,minor", [("2.14.1+cu130", "2.14"), ("2.14.0a0+git1234", "2.14"), ("2.9", "2.9"),
                                           ("10.0.0", "10.0")])
def test_torch_minor(version, minor):
    assert pin.torch_minor(version) == minor


def test_torch_minor_rejects_what_is_no_version():
    with pytest.raises(ValueError, match="'nightly' does not start with MAJOR.MINOR"):
        pin.torch_minor("nightly")


def test_the_requirement_admits_exactly_the_built_minor():
    specifiers = pytest.importorskip("packaging.specifiers", reason="needs packaging")
    req = pin.torch_requirement("2.14.1+cu130")
    assert req == "torch==2.14.*"
    spec = specifiers.SpecifierSet(req.removeprefix("torch"))
    admitted = [v for v in ("2.13.9", "2.14.0", "2.14.1", "2.14.1+cu130", "2.14.99", "2.15.0", "2.140.0")
                if spec.contains(v)]
    assert admitted == ["2.14.0", "2.14.1", "2.14.1+cu130", "2.14.99"]


def test_the_mismatch_message_names_both_versions_on_one_line():
    assert pin.mismatch_message("2.14.1+cu130", "2.14.0") is None
    msg = pin.mismatch_message("2.14.1+cu130", "2.13.0+cpu")
    assert "\n" not in msg
    assert "built against torch 2.14.1+cu130 but torch 2.13.0+cpu is running" in msg
    assert "'torch==2.14.*'" in msg
    assert pin.mismatch_message("2.14.1", "2.15.0") is not None


def test_the_build_recorded_this_torch_and_pinned_the_metadata():
    import importlib.metadata

    import torch

    from torchtrt_swish import _build_info

    assert _build_info.TORCH_VERSION == torch.__version__
    requires = importlib.metadata.requires("torchtrt_swish") or []
    assert pin.torch_requirement(torch.__version__) in requires, requires


def _import_under(version: str) -> subprocess.CompletedProcess:
    code = f"import torch; torch.__version__ = {version!r}; import torchtrt_swish"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_importing_under_another_torch_minor_is_one_clear_error():
    import torch

    proc = _import_under("2.13.0")
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last == "ImportError: " + pin.mismatch_message(torch.__version__, "2.13.0"), proc.stderr


def test_importing_under_another_patch_release_works():
    import torch

    patch = pin.torch_minor(torch.__version__) + ".99"
    proc = _import_under(patch)
    assert proc.returncode == 0, proc.stderr


# ----------------------------------------------------------------------------- incremental builds


def test_write_if_changed_leaves_an_unchanged_file_alone(tmp_path):
    target = tmp_path / "build.ninja"
    assert native_build.write_if_changed(target, "rule a\n") is True
    os.utime(target, ns=(1, 1))
    assert native_build.write_if_changed(target, "rule a\n") is False
    assert target.stat().st_mtime_ns == 1
    assert native_build.write_if_changed(target, "rule b\n") is True
    assert target.read_text() == "rule b\n"


def test_editable_builds_reuse_one_build_folder(monkeypatch, tmp_path):
    # setuptools' editable_wheel hands build_ext a new temporary build_temp on every `pip install -e`.
    from setuptools import Distribution

    seen = []
    monkeypatch.setattr(native_build.BuildExtension, "run", lambda self: seen.append(self.build_temp))
    monkeypatch.setattr(native_build.BuildNative, "cuda", False)
    monkeypatch.setattr(native_build, "write_if_changed", lambda path, text: False)  # leave the tree's record
    dist = Distribution({"name": "torchtrt_swish", "ext_modules": native_build.get_extensions(False)})
    for n in range(2):
        cmd = native_build.BuildNative(dist)
        cmd.build_temp = str(tmp_path / f"pip-editable-{n}")
        cmd.editable_mode = True
        cmd.ensure_finalized()
        cmd.run()
    assert seen[0] == seen[1], seen
    assert Path(seen[0]).is_relative_to(ROOT / "build")
