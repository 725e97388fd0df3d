"""The build as a user meets it: CUDA discovery, the CPU-only build, the wheel's torch pin, incremental rebuilds.

The full path (plain `pip wheel .` in a fresh venv, install, smoke test outside the tree) is `./dev wheel`, which CI
runs after the test suite; these are the quick checks of the rules it relies on. They run CMake itself: the
discovery functions of cmake/*.cmake in script mode, and configures of CMakeLists.txt into a temporary folder.
"""
from __future__ import annotations

import email.parser
import functools
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest
from tools_native import BUILD, ROOT, build_summary

_spec = importlib.util.spec_from_file_location("torchtrt_swish_torch_pin", ROOT / "torchtrt_swish" / "_torch_pin.py")
pin = importlib.util.module_from_spec(_spec)  # by path, as cmake/torch_info.py loads it: no built _C needed
_spec.loader.exec_module(pin)


def _cmake() -> str:
    """The CMake the build uses: the venv's (requirements-dev.txt), else the one on PATH."""
    venv = Path(sys.executable).parent / "cmake"
    found = str(venv) if venv.is_file() else shutil.which("cmake")
    if found is None:
        pytest.skip("needs cmake (requirements-dev.txt installs it into the venv)")
    return found


def _script(tmp_path: Path, body: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run CMake statements in script mode with cmake/notes.cmake, switches.cmake and cuda.cmake loaded, under env."""
    script = tmp_path / "probe.cmake"
    script.write_text(f'include("{ROOT}/cmake/notes.cmake")\ninclude("{ROOT}/cmake/switches.cmake")\n'
                      f'include("{ROOT}/cmake/cuda.cmake")\n{body}\n')
    clean = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    return subprocess.run([_cmake(), "-P", str(script)], capture_output=True, text=True, env={**clean, **env},
                          timeout=60)


def _fake_toolkit(root: Path) -> Path:
    """A folder with the file the discovery looks for: bin/nvcc."""
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "nvcc").write_text("#!/bin/sh\nexit 0\n")
    return root


_FROM_ENV = 'swish_cuda_compiler_from_env(nvcc origin)\nmessage(NOTICE "RESULT ${nvcc}|${origin}")'


def _result(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stderr
    return [ln for ln in proc.stderr.splitlines() if ln.startswith("RESULT ")][-1].removeprefix("RESULT ")


# ----------------------------------------------------------------------------- CUDA discovery


def test_cuda_home_comes_before_cuda_path(tmp_path):
    home, other = _fake_toolkit(tmp_path / "home"), _fake_toolkit(tmp_path / "other")
    assert _result(_script(tmp_path, _FROM_ENV, {"CUDA_HOME": str(home), "CUDA_PATH": str(other)})) == \
        f"{home}/bin/nvcc|CUDA_HOME"
    assert _result(_script(tmp_path, _FROM_ENV, {"CUDA_PATH": str(other)})) == f"{other}/bin/nvcc|CUDA_PATH"


def test_without_cuda_home_or_cuda_path_cmake_searches(tmp_path):
    # Empty: CMakeLists.txt then leaves nvcc to CMake's own search (CUDACXX, PATH, /usr/local/cuda).
    assert _result(_script(tmp_path, _FROM_ENV, {})) == "|"


def test_a_cuda_home_without_nvcc_is_an_error_naming_it(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = _script(tmp_path, _FROM_ENV, {"CUDA_HOME": str(tmp_path / "empty"), "CUDA_PATH": str(tmp_path)})
    assert proc.returncode != 0
    assert (f"[torchtrt_swish build] CUDA_HOME={tmp_path / 'empty'} has no bin/nvcc: point it at a CUDA toolkit "
            "root or unset it") in proc.stderr.splitlines()


@pytest.mark.parametrize("arch_list,want", [("9.0", "90-real"), ("8.0;9.0a;12.0+PTX", "80-real;90a-real;120"),
                                            ("8.6 9.0+PTX", "86-real;90"), ("10.0f", "100f-real")])
def test_arch_lists_become_cmake_architectures(tmp_path, arch_list, want):
    body = f'swish_cuda_architectures("{arch_list}" archs)\nmessage(NOTICE "RESULT ${{archs}}")'
    assert _result(_script(tmp_path, body, {})) == want


@pytest.mark.parametrize("entry", ["90", "9.0+ptx", "sm_90", "9.0ab", "9.10"])
def test_a_bad_arch_entry_is_an_error_naming_it(tmp_path, entry):
    proc = _script(tmp_path, f'swish_cuda_architectures("8.0;{entry}" archs)', {})
    assert proc.returncode != 0
    assert (f"[torchtrt_swish build] TORCH_CUDA_ARCH_LIST entry '{entry}' is not of the form 'X.Y', 'X.Ya' or "
            "'X.Y+PTX'") in proc.stderr.splitlines()


def _configure(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Configure CMakeLists.txt as a wheel build does (nothing into the tree) in tmp_path/build, under env."""
    clean = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH", "TORCHTRT_SWISH_FORCE_CPU")}
    ninja = Path(sys.executable).parent / "ninja"
    cmd = [_cmake(), "-S", str(ROOT), "-B", str(tmp_path / "build"), "-G", "Ninja",
           f"-DPython_EXECUTABLE={sys.executable}", "-DSKBUILD_STATE=wheel"] + ([f"-DCMAKE_MAKE_PROGRAM={ninja}"] if ninja.is_file() else [])
    return subprocess.run(cmd, capture_output=True, text=True, env={**clean, **env}, timeout=300)


@pytest.mark.parametrize("value", ["1", "ON", "true", "yes"])
def test_force_cpu_builds_the_cpu_op_even_with_a_cuda_home_without_nvcc(tmp_path, value):
    proc = _configure(tmp_path, {"TORCHTRT_SWISH_FORCE_CPU": value, "CUDA_HOME": str(tmp_path / "no-cuda")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"[torchtrt_swish build] TORCHTRT_SWISH_FORCE_CPU={value}: building the CPU op only" in proc.stderr
    ninja = (tmp_path / "build" / "build.ninja").read_text()
    assert "swish_op.cpp" in ninja and "swish_cuda.cpp" not in ninja and ".cu.o" not in ninja
    summary = (tmp_path / "build" / "build_summary.json").read_text()
    assert '"cuda": false' in summary and '"plugin": false' in summary, summary


def test_force_cpu_off_spelled_out_still_looks_for_cuda(tmp_path):
    if not _torch_has_cuda():
        pytest.skip("needs a CUDA build of torch (a CPU torch builds the CPU op without looking for CUDA)")
    proc = _configure(tmp_path, {"TORCHTRT_SWISH_FORCE_CPU": "false", "CUDA_HOME": str(tmp_path / "no-cuda")})
    assert proc.returncode != 0 and "has no bin/nvcc" in proc.stderr, proc.stderr[-3000:]


@pytest.mark.parametrize("switch", ["TORCHTRT_SWISH_FORCE_CPU", "TORCHTRT_SWISH_SKIP_PLUGIN"])
def test_a_configure_with_a_switch_value_it_does_not_understand_stops_naming_it(tmp_path, switch):
    proc = _configure(tmp_path, {switch: "enable"})
    assert proc.returncode != 0
    assert _bad_switch_line(switch, "enable") in proc.stderr.splitlines(), proc.stderr[-3000:]


def test_skip_plugin_spelled_true_builds_no_plugin(tmp_path):
    if not _torch_has_cuda() or not build_summary().get("cuda"):
        pytest.skip("needs a CUDA torch and nvcc (without them no plugin is built anyway)")
    proc = _configure(tmp_path, {"TORCHTRT_SWISH_SKIP_PLUGIN": "true", "TORCHTRT_SWISH_NO_FETCH": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "[torchtrt_swish build] TensorRT plugin NOT built: TORCHTRT_SWISH_SKIP_PLUGIN=true" in proc.stderr
    summary = (tmp_path / "build" / "build_summary.json").read_text()
    assert '"plugin": false' in summary and '"skip_plugin": true' in summary, summary


def _torch_has_cuda() -> bool:
    import torch

    return torch.version.cuda is not None


def test_a_build_with_a_wrong_cuda_home_stops_naming_it(tmp_path):
    if not _torch_has_cuda():
        pytest.skip("needs a CUDA build of torch (a CPU torch builds the CPU op without looking for CUDA)")
    proc = _configure(tmp_path, {"CUDA_HOME": str(tmp_path / "no-cuda")})
    assert proc.returncode != 0
    assert (f"[torchtrt_swish build] CUDA_HOME={tmp_path / 'no-cuda'} has no bin/nvcc: point it at a CUDA toolkit "
            "root or unset it") in proc.stderr.splitlines()


def test_the_build_compiled_against_a_real_toolkit():
    # Where nvcc on PATH is a wrapper script outside its toolkit (this project's machines), the toolkit root the
    # build reports must still be the real one.
    summary = build_summary()
    if not summary.get("cuda"):
        pytest.skip("the editable build found no CUDA toolkit (needs nvcc and a CUDA torch)")
    root = Path(summary["cuda_root"])
    assert (root / "bin" / "nvcc").is_file() and (root / "include" / "cuda_runtime_api.h").is_file(), root


# ----------------------------------------------------------------------------- on/off switches

SWITCH_ON = ["1", "ON", "on", "On", "YES", "yes", "Y", "y", "TRUE", "true", " true "]
SWITCH_OFF = ["0", "OFF", "off", "NO", "no", "N", "n", "FALSE", "false", "", "  "]


def _bad_switch_line(name: str, value: str) -> str:
    return (f"[torchtrt_swish build] {name}='{value}' is not an on/off value: use 1, ON, YES or TRUE to switch it on, "
            "0, OFF, NO, FALSE or nothing to leave it off")


def test_switches_take_cmakes_and_the_shells_spellings(tmp_path):
    lines = [f'set(ENV{{TORCHTRT_SWISH_FORCE_CPU}} "{v}")\nswish_env_switch(TORCHTRT_SWISH_FORCE_CPU on)\n'
             f'message(NOTICE "RESULT {i} ${{on}}")' for i, v in enumerate(SWITCH_ON + SWITCH_OFF)]
    lines.append('unset(ENV{TORCHTRT_SWISH_FORCE_CPU})\nswish_env_switch(TORCHTRT_SWISH_FORCE_CPU on)\n'
                 'message(NOTICE "RESULT unset ${on}")')
    proc = _script(tmp_path, "\n".join(lines), {})
    assert proc.returncode == 0, proc.stderr
    got = dict(ln.removeprefix("RESULT ").split(" ") for ln in proc.stderr.splitlines() if ln.startswith("RESULT "))
    want = {str(i): "ON" for i in range(len(SWITCH_ON))}
    want |= {str(len(SWITCH_ON) + i): "OFF" for i in range(len(SWITCH_OFF))} | {"unset": "OFF"}
    assert got == want


@pytest.mark.parametrize("value", ["2", "enable", "tru", "yes please", "-1", "nein"])
def test_a_switch_value_it_does_not_understand_is_one_line_naming_it(tmp_path, value):
    proc = _script(tmp_path, "swish_env_switch(TORCHTRT_SWISH_SKIP_PLUGIN on)", {"TORCHTRT_SWISH_SKIP_PLUGIN": value})
    assert proc.returncode != 0
    assert _bad_switch_line("TORCHTRT_SWISH_SKIP_PLUGIN", value) in proc.stderr.splitlines(), proc.stderr


def test_no_fetch_spelled_yes_fetches_no_headers(tmp_path):
    # Script mode: no project folder, so neither the cached headers nor a system TensorRT are found here.
    body = (f'include("{ROOT}/cmake/tensorrt.cmake")\nswish_tensorrt_headers(dir origin)\n'
            'message(NOTICE "RESULT ${dir}|${origin}")')
    if any(Path(d, "NvInfer.h").is_file() for d in ("/usr/include", "/usr/include/x86_64-linux-gnu",
                                                     "/usr/include/aarch64-linux-gnu", "/usr/local/TensorRT/include",
                                                     "/usr/local/tensorrt/include", "/opt/tensorrt/include")):
        pytest.skip("a system TensorRT is installed: the headers are found before any fetch")
    proc = _script(tmp_path, body, {"TORCHTRT_SWISH_NO_FETCH": "yes", "TensorRT_INCLUDE_DIR": "", "TENSORRT_ROOT": ""})
    assert "fetching TensorRT headers" not in proc.stderr, proc.stderr
    assert _result(proc) == "|no TensorRT headers found (set TENSORRT_ROOT or TensorRT_INCLUDE_DIR)"


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


# ----------------------------------------------------------------------------- the sdist and what is built from it

LICENSE_START = "Apache License\n                           Version 2.0, January 2004"


def _metadata(text: str):
    return email.parser.Parser().parsestr(text, headersonly=True)


@functools.lru_cache(maxsize=1)
def _sdist() -> Path:
    """The sdist of this tree, built through the backend's PEP 517 hook as any frontend does (cached per session)."""
    import tempfile

    out = Path(tempfile.mkdtemp(prefix="torchtrt_swish-sdist-"))
    code = "import sys; from scikit_build_core.build import build_sdist; print(build_sdist(sys.argv[1]))"
    proc = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out / proc.stdout.strip().splitlines()[-1]


def _sdist_member(name: str) -> str:
    sdist = _sdist()
    with tarfile.open(sdist) as tar:
        return tar.extractfile(f"{sdist.name.removesuffix('.tar.gz')}/{name}").read().decode()


def test_the_sdist_declares_the_torch_pin_dynamic():
    # Its wheels pin the torch that builds them (torch==X.Y.*), whatever torch made the sdist: PEP 643 tools must
    # not take the sdist's Requires-Dist for theirs.
    meta = _metadata(_sdist_member("PKG-INFO"))
    assert "Requires-Dist" in (meta.get_all("Dynamic") or []), meta.items()
    assert float(meta["Metadata-Version"]) >= 2.2


def test_the_sdist_and_its_metadata_carry_the_license():
    meta = _metadata(_sdist_member("PKG-INFO"))
    assert meta["License-Expression"] == "Apache-2.0" and meta.get_all("License-File") == ["LICENSE"]
    text = _sdist_member("LICENSE")
    assert text == (ROOT / "LICENSE").read_text() and text.lstrip().startswith(LICENSE_START)


def _wheel_metadata_from_sdist(tmp_path: Path, torch_version: str | None) -> email.message.Message:
    """METADATA of a wheel built from the unpacked sdist (the backend's prepare_metadata_for_build_wheel, which
    pip calls before building), under this torch or with torch reporting torch_version."""
    with tarfile.open(_sdist()) as tar:
        tar.extractall(tmp_path, filter="data")
    src = next(tmp_path.iterdir())
    patch = "" if torch_version is None else f"import torch; torch.__version__ = {torch_version!r}; "
    code = (patch + "import sys; from scikit_build_core.build import prepare_metadata_for_build_wheel; "
            "print(prepare_metadata_for_build_wheel(sys.argv[1]))")
    out = tmp_path / "meta"
    out.mkdir()
    proc = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, cwd=src,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return _metadata((out / proc.stdout.strip().splitlines()[-1] / "METADATA").read_text())


@pytest.mark.parametrize("torch_version", [None, "2.13.0"], ids=["this torch", "torch 2.13"])
def test_a_wheel_built_from_the_sdist_pins_the_torch_that_builds_it(tmp_path, torch_version):
    import torch

    meta = _wheel_metadata_from_sdist(tmp_path, torch_version)
    base = [r for r in meta.get_all("Requires-Dist") if "extra ==" not in r]
    assert base == [pin.torch_requirement(torch_version or torch.__version__), "numpy"], base
    assert meta.get_all("Dynamic") is None  # only an sdist may leave a field open
    assert meta.get_all("License-File") == ["LICENSE"]


def test_the_installed_package_names_its_license_file():
    import importlib.metadata

    dist = importlib.metadata.distribution("torchtrt_swish")
    assert dist.metadata.get_all("License-File") == ["LICENSE"], dist.metadata.items()


# ----------------------------------------------------------------------------- incremental builds


def test_editable_builds_keep_one_build_folder_the_tests_read():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["scikit-build"]
    editable = [o for o in config["overrides"] if o.get("if", {}).get("state") == "editable"]
    assert [o["build-dir"] for o in editable] == [BUILD.relative_to(ROOT).as_posix()]
    assert "{" not in editable[0]["build-dir"]  # a fixed folder: no per-build temporary one


def test_a_finished_build_has_nothing_left_to_do():
    # What makes `./dev setup` without changes take seconds: nothing in the build graph is always out of date.
    if not (BUILD / "build.ninja").is_file():
        pytest.skip("no editable build in build/native (run ./dev setup)")
    ninja = Path(sys.executable).parent / "ninja"
    proc = subprocess.run([str(ninja) if ninja.is_file() else "ninja", "-C", str(BUILD), "-n", "-d", "explain"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "ninja: no work to do." in proc.stdout, (proc.stdout + proc.stderr)[-3000:]


def test_the_editable_build_puts_the_op_into_the_source_package():
    import torchtrt_swish

    summary = build_summary()
    assert summary.get("in_tree") is True, summary
    assert Path(torchtrt_swish._C.__file__).parent == ROOT / "torchtrt_swish"
