"""Build of torchtrt_swish: ``pip install --no-build-isolation -e .`` (or ``python setup.py build_ext --inplace``).

torch's ``BuildExtension`` / ``CUDAExtension`` build the op ``torchtrt_swish._C``. Before it, one generated ninja
file (``build/native/build.ninja``) builds what torch's helpers do not cover, each target only when its toolchain
and inputs exist:
  * the CUDA kernel objects of csrc/kernels (nvcc, no torch headers) that ``_C`` and the plugin both link, so the
    op and the plugin run the same machine code;
  * ``libtorchtrt_swish_plugin.so`` (csrc/trt_plugin), the TensorRT plugin: TensorRT headers only, no libtorch or
    libnvinfer, cudart linked statically; copied into the package;
  * test fixtures from tests/trt_harness, left in build/native and never installed: ``_trt_harness`` (pybind11),
    the TensorRT-free conformance harness that dlopens the plugin, and a stand-in ``libnvinfer.so.10``;
  * ``_backward_plan`` (pybind11, tests/backward_plan), the fused backward's planner for the CPU tests, likewise
    left in build/native.
"""
from __future__ import annotations

import copy
import hashlib
import importlib.util
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
from setuptools import setup

ROOT = Path(__file__).resolve().parent
# TORCHTRT_SWISH_BUILD_DIR lets a second build (e.g. a plugin-only iteration) run beside the main one.
BUILD = Path(os.environ.get("TORCHTRT_SWISH_BUILD_DIR", ROOT / "build" / "native")).resolve()
THIRD_PARTY = ROOT / "third_party"

# TensorRT 10.14.1's public headers, as shipped inside this MIT-licensed wheel (NVIDIA's wheels carry none).
KERNEL_LENS_WHEEL = "kernel_lens-2.0.1-py3-none-any.whl"
KERNEL_LENS_REQ = "kernel-lens==2.0.1"
KERNEL_LENS_SHA256 = "07cc714e8b5e7f34b672f7c7fad93febe7c747be5837ba276b1527370134ffe0"
KERNEL_LENS_PREFIX = "kernel_lens/include/tensorrt/"

DEFAULT_ARCH_LIST = "8.0;8.6;8.9;9.0;12.0+PTX"


def log(msg: str) -> None:
    """Print a build message that stands out in pip's output."""
    print(f"[torchtrt_swish build] {msg}", flush=True)


# ----------------------------------------------------------------------------- toolchain discovery


CUDA_FALLBACK = Path("/usr/local/cuda")


class CudaHomeError(ValueError):
    """CUDA_HOME or CUDA_PATH names a folder that holds no CUDA toolkit."""


def _is_cuda_root(path: Path) -> bool:
    return (path / "bin" / "nvcc").is_file() and (path / "include" / "cuda_runtime_api.h").is_file()


def _nvcc_reported_root(nvcc: str) -> Path | None:
    """The toolkit root nvcc itself reports (its dry run prints TOP): this sees through wrapper scripts."""
    try:
        proc = subprocess.run([nvcc, "--dryrun", "-x", "cu", "-E", os.devnull], capture_output=True, text=True,
                              timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    for line in (proc.stdout + proc.stderr).splitlines():
        match = re.match(r"#\$ TOP=(.+)$", line.strip())
        if match:
            return Path(match.group(1)).resolve()
    return None


def find_cuda_home(environ=os.environ, which=shutil.which, fallback: Path = CUDA_FALLBACK) -> tuple[Path | None, str]:
    """The CUDA toolkit root and where it came from: CUDA_HOME / CUDA_PATH, the real nvcc on PATH, /usr/local/cuda."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = environ.get(var)
        if value:
            if not (Path(value) / "bin" / "nvcc").is_file():
                # Going elsewhere would build against a toolkit the user did not choose.
                raise CudaHomeError(f"{var}={value} has no bin/nvcc: point it at a CUDA toolkit root or unset it")
            return Path(value), var
    nvcc = which("nvcc", path=environ.get("PATH"))
    if nvcc:
        # A symlinked nvcc resolves to its toolkit; a wrapper script (this project's machines have one in
        # /usr/local/bin) does not, and there only nvcc's own report finds the root.
        root = Path(nvcc).resolve().parent.parent
        if _is_cuda_root(root):
            return root, f"nvcc on PATH ({nvcc})"
        reported = _nvcc_reported_root(nvcc)
        if reported is not None and _is_cuda_root(reported):
            return reported, f"the root {nvcc} reports"
    if _is_cuda_root(fallback):
        return fallback, str(fallback)
    return None, f"no CUDA toolkit: CUDA_HOME, CUDA_PATH, nvcc on PATH and {fallback} all missing"


# torch.utils.cpp_extension reads CUDA_HOME once, when it is imported, and guesses the wrapper's parent (/usr/local)
# where nvcc is a wrapper script: settle the variable first, and make the module's copy agree in case something
# imported it earlier. The tests import this file for its paths and leave the environment alone.
try:
    CUDA_ROOT, CUDA_ORIGIN = find_cuda_home()
except CudaHomeError as exc:
    if __name__ == "__main__":
        raise SystemExit(f"[torchtrt_swish build] {exc}") from None
    CUDA_ROOT, CUDA_ORIGIN = None, str(exc)
if __name__ == "__main__" and CUDA_ROOT is not None:
    os.environ["CUDA_HOME"] = str(CUDA_ROOT)
from torch.utils import cpp_extension  # noqa: E402
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension  # noqa: E402

if __name__ == "__main__":
    cpp_extension.CUDA_HOME = str(CUDA_ROOT) if CUDA_ROOT is not None else None


def cuda_home() -> Path | None:
    """The CUDA toolkit root, or None when none was found."""
    return CUDA_ROOT


def arch_list() -> str:
    """TORCH_CUDA_ARCH_LIST if set, else the visible GPU's arch, else a portable default list."""
    env = os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip()
    if env:
        return env
    try:
        if torch.cuda.is_available():
            caps = sorted({torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())})
            return ";".join(f"{a}.{b}" for a, b in caps)
    except Exception:  # noqa: BLE001 - no usable GPU means the portable default
        pass
    return DEFAULT_ARCH_LIST


def gencode_flags(archs: str) -> list[str]:
    """nvcc -gencode flags for an arch list like '8.0;9.0+PTX' (separators ';' or ' ')."""
    flags: list[str] = []
    for item in archs.replace(" ", ";").split(";"):
        item = item.strip()
        if not item:
            continue
        ptx = item.endswith("+PTX")
        num = item.removesuffix("+PTX").replace(".", "")
        # 'a' / 'f' suffixes select arch-specific / family targets (e.g. 9.0a for wgmma).
        if not (num.rstrip("af").isdigit() and len(num) - len(num.rstrip("af")) <= 1):
            raise ValueError(f"TORCH_CUDA_ARCH_LIST entry {item!r} is not of the form 'X.Y', 'X.Ya' or 'X.Y+PTX'")
        flags += ["-gencode", f"arch=compute_{num},code=sm_{num}"]
        if ptx:
            flags += ["-gencode", f"arch=compute_{num},code=compute_{num}"]
    return flags


def _has_nvinfer(d: Path) -> bool:
    return (d / "NvInfer.h").exists() and (d / "NvInferPluginBase.h").exists()


def _fetch_kernel_lens_headers(dest: Path) -> Path | None:
    """Download the pinned wheel with pip, check its sha256 and extract only the TensorRT headers."""
    dl = BUILD / "download"
    dl.mkdir(parents=True, exist_ok=True)
    wheel = dl / KERNEL_LENS_WHEEL
    if not wheel.exists():
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(dl),
               KERNEL_LENS_REQ]
        log("fetching TensorRT headers: " + " ".join(cmd))
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0 or not wheel.exists():
            log("could not download the header wheel: " + (proc.stderr.strip().splitlines() or ["?"])[-1])
            return None
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != KERNEL_LENS_SHA256:
        log(f"refusing {wheel.name}: sha256 {digest} != pinned {KERNEL_LENS_SHA256}")
        wheel.unlink()
        return None
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.startswith(KERNEL_LENS_PREFIX) and not name.endswith("/"):
                target = tmp / name[len(KERNEL_LENS_PREFIX):]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(name))
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest if _has_nvinfer(dest) else None


def tensorrt_include_dir(fetch: bool = True) -> tuple[Path | None, str]:
    """Find TensorRT's headers: TENSORRT_ROOT / TensorRT_INCLUDE_DIR, system paths, then the pinned wheel."""
    candidates: list[tuple[Path, str]] = []
    if os.environ.get("TensorRT_INCLUDE_DIR"):
        candidates.append((Path(os.environ["TensorRT_INCLUDE_DIR"]), "TensorRT_INCLUDE_DIR"))
    if os.environ.get("TENSORRT_ROOT"):
        candidates.append((Path(os.environ["TENSORRT_ROOT"]) / "include", "TENSORRT_ROOT"))
    for sysdir in ("/usr/include/x86_64-linux-gnu", "/usr/include/aarch64-linux-gnu", "/usr/include",
                   "/usr/local/TensorRT/include", "/usr/local/tensorrt/include", "/opt/tensorrt/include"):
        candidates.append((Path(sysdir), "system"))
    vendored = THIRD_PARTY / "tensorrt" / "include"
    candidates.append((vendored, f"{KERNEL_LENS_REQ} (cached)"))
    for path, origin in candidates:
        if _has_nvinfer(path):
            return path, origin
    if fetch and os.environ.get("TORCHTRT_SWISH_NO_FETCH") != "1":
        got = _fetch_kernel_lens_headers(vendored)
        if got:
            return got, f"{KERNEL_LENS_REQ} (sha256-pinned download)"
    return None, "no TensorRT headers found (set TENSORRT_ROOT or TensorRT_INCLUDE_DIR)"


# ----------------------------------------------------------------------------- ninja generation


@dataclass
class NativeResult:
    """What the native build produced (paths are absolute; empty / None when a target was not built)."""

    kernel_objects: list[Path] = field(default_factory=list)
    plugin_library: Path | None = None
    harness_module: Path | None = None
    plan_module: Path | None = None
    notes: list[str] = field(default_factory=list)


def write_if_changed(path: Path, text: str) -> bool:
    """Write text to path unless it already holds exactly that (a rewrite would look like a change); True if written."""
    try:
        if path.read_text() == text:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return True


def _q(parts) -> str:
    return " ".join(shlex.quote(str(p)) for p in parts)


def _esc(p: Path | str) -> str:
    """Escape a path for a ninja build line."""
    return str(p).replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def _pybind11_module(name: str) -> tuple[Path, list[str]] | None:
    """A pybind11 module's path in BUILD and its extra compile flags, or None when pybind11 is not installed."""
    try:
        import pybind11
    except ImportError:
        return None
    module = BUILD / f"{name}{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"
    return module, ["-isystem", sysconfig.get_paths()["include"], "-isystem", pybind11.get_include(),
                    "-fvisibility=hidden"]


def _objects(lines: list[str], rule: str, sources: list[Path], subdir: str, cflags: list[str] | None = None):
    """Append one ninja build statement per source (objects under BUILD/subdir); return the objects."""
    objs = []
    for src in sources:
        obj = BUILD / subdir / (src.stem + ".o")
        lines.append(f"build {_esc(obj)}: {rule} {_esc(src)}")
        if cflags is not None:
            lines.append(f"  cflags = {_q(cflags)}")
        objs.append(obj)
    return objs


def _pybind11_target(lines: list[str], res: NativeResult, name: str, srcs: list[Path], subdir: str, what: str,
                     flags_with, ldflags: str = "") -> Path | None:
    """Ninja lines for the pybind11 module `name` from srcs (objects under BUILD/subdir), compiled with
    flags_with(pybind11's flags); None, with a note naming `what`, when pybind11 is not installed."""
    pymod = _pybind11_module(name)
    if pymod is None:
        res.notes.append(f"{what} NOT built: pybind11 is not installed")
        return None
    module, pyflags = pymod
    objs = _objects(lines, "cxx", srcs, subdir, flags_with(pyflags))
    lines.append(f"build {_esc(module)}: link_cxx {' '.join(_esc(o) for o in objs)}")
    if ldflags:
        lines.append(f"  ldflags = {ldflags}")
    return module


def _harness_targets(lines: list[str], trt_flags: list[str], base_cflags: list[str], trt_inc: Path,
                     res: NativeResult) -> list[Path]:
    """The test fixtures of tests/trt_harness (harness module, stand-in libnvinfer.so.10); return the targets."""
    harness_dir = ROOT / "tests" / "trt_harness"
    harness_srcs = sorted(harness_dir.glob("*.cpp"))
    if not harness_srcs:
        return []
    harness = _pybind11_target(
        lines, res, "_trt_harness", harness_srcs, "trt_harness", "conformance harness",
        lambda pyflags: base_cflags + ["-isystem", str(trt_inc), *pyflags, "-Wno-deprecated-declarations"], "-ldl")
    if harness is None:
        return []
    res.harness_module = harness
    targets = [harness]
    # Stand-ins, each built with the soname of the library it replaces: libnvinfer.so.10 (registry/logger entry
    # points) for the self-registration tests, libcuda.so.1 (a failing stream query) for the stream-context error.
    for subdir, source, soname, extra in (("fake_tensorrt", "fake_nvinfer.cpp", "libnvinfer.so.10", " -ldl"),
                                          ("fake_cuda", "fake_cuda.cpp", "libcuda.so.1", "")):
        src = harness_dir / subdir / source
        if src.exists():
            (obj,) = _objects(lines, "cxx", [src], subdir, trt_flags)
            lib = BUILD / subdir / soname
            lines.append(f"build {_esc(lib)}: link_cxx {_esc(obj)}")
            lines.append(f"  ldflags = -Wl,-soname,{soname}{extra}")
            targets.append(lib)
    return targets


def _plan_targets(lines: list[str], base_cflags: list[str], cuda_inc: Path, res: NativeResult) -> list[Path]:
    """The planner test module of tests/backward_plan, built without CUDA's include path; return the targets."""
    srcs = sorted((ROOT / "tests" / "backward_plan").glob("*.cpp"))
    if not srcs:
        return []
    module = _pybind11_target(lines, res, "_backward_plan", srcs, "backward_plan", "backward planner test module",
                              lambda pyflags: [f for f in base_cflags if f != f"-I{cuda_inc}"] + pyflags)
    if module is None:
        return []
    res.plan_module = module
    return [module]


def ninja_executable() -> str:
    """The `ninja` package's binary (a build requirement and in requirements-dev.txt), else the ninja on PATH."""
    # The same ninja for ./dev's build and a wheel build's isolated environment: ninja releases differ in their
    # build log's format, and on a log of another version ninja starts over, rebuilding every kernel object.
    try:
        import ninja

        exe = Path(ninja.BIN_DIR) / "ninja"
        if exe.is_file():
            return str(exe)
    except ImportError:
        pass
    return shutil.which("ninja") or str(Path(sys.executable).parent / "ninja")


def build_native(fixtures: bool = True) -> NativeResult:
    """Generate build/native/build.ninja, run ninja, and copy the plugin library into the package folder.

    fixtures=False leaves out the test fixtures (harness, planner module): a wheel build compiles them against the
    pybind11 of pip's build environment, whose path changes every time, and would rebuild them for nothing.
    """
    res = NativeResult()
    BUILD.mkdir(parents=True, exist_ok=True)
    cuda = cuda_home()
    if cuda is None:
        res.notes.append(f"TensorRT plugin NOT built: {CUDA_ORIGIN} (no CUDA kernels either: CPU-only op)")
        return res
    nvcc = cuda / "bin" / "nvcc"
    archs = arch_list()
    cxx = os.environ.get("CXX", "c++")
    csrc = ROOT / "csrc"
    cuda_inc = cuda / "include"
    base_cflags = ["-std=c++17", "-O3", "-fPIC", "-Wall", "-Wextra", f"-I{csrc}", f"-I{cuda_inc}"]

    lines = [
        "ninja_required_version = 1.3",
        f"nvcc = {nvcc}",
        f"cxx = {cxx}",
        f"nvcc_flags = {_q(['-std=c++17', '-O3', '-Xcompiler', '-fPIC', '-Xcompiler', '-Wall', f'-I{csrc}', *gencode_flags(archs)])}",
        "rule nvcc",
        "  command = $nvcc $nvcc_flags -MD -MF $out.d -c $in -o $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = NVCC $out",
        "rule cxx",
        "  command = $cxx $cflags -MD -MF $out.d -c $in -o $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = CXX $out",
        "rule link_nvcc",
        "  command = $nvcc -shared $ldflags $in -o $out $libs",
        "  description = LINK $out",
        "rule link_cxx",
        "  command = $cxx -shared $in -o $out $ldflags",
        "  description = LINK $out",
    ]
    kernel_objs = _objects(lines, "nvcc", sorted((csrc / "kernels").glob("*.cu")), "kernels")
    defaults = list(kernel_objs)
    res.kernel_objects = kernel_objs
    if fixtures:
        defaults += _plan_targets(lines, base_cflags, cuda_inc, res)

    trt_inc, origin = tensorrt_include_dir()
    plugin_srcs = sorted((csrc / "trt_plugin").glob("*.cpp"))
    plugin_lib = BUILD / "libtorchtrt_swish_plugin.so"
    if os.environ.get("TORCHTRT_SWISH_SKIP_PLUGIN") == "1":
        res.notes.append("TensorRT plugin NOT built: TORCHTRT_SWISH_SKIP_PLUGIN=1")
    elif trt_inc is None:
        res.notes.append(f"TensorRT plugin NOT built: {origin}")
    elif not plugin_srcs:
        res.notes.append("TensorRT plugin NOT built: no sources in csrc/trt_plugin")
    else:
        res.notes.append(f"TensorRT headers: {trt_inc} ({origin})")
        # -isystem: TensorRT's own headers are not warning-clean under -Wextra; ours must be.
        trt_flags = base_cflags + ["-isystem", str(trt_inc), "-fvisibility=hidden", "-Wno-deprecated-declarations"]
        objs = _objects(lines, "cxx", plugin_srcs, "trt_plugin", trt_flags)
        # nvcc links cudart statically by default: the plugin needs neither libcudart.so, libnvinfer nor torch.
        # Export only getCreators/setLoggerFinder (the version script hides our code, the kernel objects and the
        # static cudart), and mark the library NODELETE: a registry may hold its creator for the life of the
        # process, so a dlclose must never unmap it.
        exports_map = csrc / "trt_plugin" / "exports.map"
        lines.append(f"build {_esc(plugin_lib)}: link_nvcc {' '.join(_esc(o) for o in objs + kernel_objs)} | "
                     f"{_esc(exports_map)}")
        lines.append(f"  ldflags = {_q(['-Xlinker', '--no-undefined', '-Xlinker', '-z,defs', '-Xlinker', '-z,nodelete', '-Xlinker', f'--version-script={exports_map}'])}")
        lines.append("  libs = -ldl")
        defaults.append(plugin_lib)
        res.plugin_library = plugin_lib
        if fixtures:
            defaults += _harness_targets(lines, trt_flags, base_cflags, trt_inc, res)
    lines.append("default " + " ".join(_esc(d) for d in defaults))
    write_if_changed(BUILD / "build.ninja", "\n".join(lines) + "\n")
    cmd = [ninja_executable(), "-C", str(BUILD)]
    log(f"CUDA archs: {archs}; running {' '.join(cmd)}")
    subprocess.run(cmd, check=True)
    if res.plugin_library:
        shutil.copy2(res.plugin_library, ROOT / "torchtrt_swish" / res.plugin_library.name)
    return res


# ----------------------------------------------------------------------------- the CPU op: OpenMP, instruction sets

CPU_VEC_SOURCE = "csrc/torch/swish_cpu_vec.cpp"
# The x86 instruction sets ATen dispatches its own CPU kernels to, with the flags inductor compiles them with.
X86_CAPABILITIES = [("AVX2", ["-mavx2", "-mfma", "-mf16c"]),
                    ("AVX512", ["-mavx512f", "-mavx512dq", "-mavx512vl", "-mavx512bw", "-mfma"])]


def is_x86() -> bool:
    """Whether this build targets x86-64 (the AVX2 and AVX512 copies of the CPU kernels are built)."""
    return platform.machine().lower() in ("x86_64", "amd64")


def cpu_capabilities() -> list[tuple[str, list[str]]]:
    """(name, compile flags) of each build of swish_cpu_vec.cpp, DEFAULT first (BuildNative.build_extension: why)."""
    caps = [("DEFAULT", [])] + (X86_CAPABILITIES if is_x86() else [])
    # -ffp-contract=off: the formula exactly as written in every copy and loop (no FMA in one and not another).
    return [(name, [f"-DCPU_CAPABILITY={name}", f"-DCPU_CAPABILITY_{name}", "-ffp-contract=off", *flags])
            for name, flags in caps]


def openmp_flags() -> tuple[list[str], list[str], str]:
    """(compile flags, link arguments, note) that make at::parallel_for parallel in _C, on torch's own OpenMP.

    torch's headers run at::parallel_for through `#pragma omp parallel` when ATen uses OpenMP, and serially in code
    compiled without -fopenmp. _C must then link the OpenMP runtime libtorch_cpu itself loads (by path, so _C needs
    it by its soname and the loader reuses torch's copy), so torch.set_num_threads governs our regions too; a second
    runtime would ignore it.
    """
    config = Path(torch.__file__).resolve().parent / "include" / "ATen" / "Config.h"
    if "#define AT_PARALLEL_OPENMP 1" not in (config.read_text() if config.exists() else ""):
        return [], [], "OpenMP off: this torch's ATen does not parallelize with OpenMP"
    runtime = loaded_openmp_runtime()
    if runtime:
        return ["-fopenmp"], [str(runtime)], f"OpenMP: -fopenmp, linked against the runtime torch loads, {runtime}"
    return ["-fopenmp"], ["-fopenmp"], "OpenMP: -fopenmp with the compiler's runtime (torch's could not be located)"


def loaded_openmp_runtime() -> Path | None:
    """The OpenMP library `import torch` mapped into this process (torch/lib, torch.libs or the system's), or None."""
    maps = Path("/proc/self/maps")
    if not maps.exists():
        return None
    for line in maps.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6 and re.fullmatch(r"lib(gomp|iomp5|omp)(-[0-9a-f]+)?\.so(\.[0-9]+)*", Path(fields[-1]).name):
            return Path(fields[-1])
    return None


# ----------------------------------------------------------------------------- the torch extension


def with_cuda() -> bool:
    """Whether to build the CUDA op and the native targets (nvcc found, a CUDA torch, not forced off)."""
    if os.environ.get("TORCHTRT_SWISH_FORCE_CPU") == "1":
        return False
    if cuda_home() is None:
        log(f"{CUDA_ORIGIN}: building the CPU op only")
        return False
    if torch.version.cuda is None:
        log("this torch is a CPU build: building the CPU op only (install a CUDA torch for the GPU op)")
        return False
    return True


class BuildNative(BuildExtension):
    """Run the ninja build of kernel objects / plugin / harness first, then link _C against the kernel objects."""

    cuda = False

    def build_extension(self, ext):
        """Compile swish_cpu_vec.cpp once per CPU instruction set into ext's extra objects, then build ext.

        ext.extra_compile_args already hold torch's own flags here (BuildExtension.build_extensions adds them before
        this is called). The linker keeps the first copy of an inline function that several objects define, so the
        objects built with baseline flags (ext's sources, then DEFAULT) link before the AVX2 and AVX512 ones: a
        function shared with baseline code never comes from an AVX512 object.
        """
        objects = []
        for name, flags in cpu_capabilities():
            args = copy.deepcopy(ext.extra_compile_args)
            args["cxx"] = args["cxx"] + flags
            objects += self.compiler.compile([CPU_VEC_SOURCE], output_dir=os.path.join(self.build_temp, f"cpu_{name}"),
                                             macros=ext.define_macros, include_dirs=ext.include_dirs,
                                             extra_postargs=args, depends=ext.depends)
        ext.extra_objects = list(ext.extra_objects) + objects
        super().build_extension(ext)

    def run(self):
        """Build the native targets, then the extensions; copy the plugin beside _C in a non-inplace build."""
        if self.editable_mode:
            # setuptools' editable build hands every run a new temporary build_temp, where torch's ninja build of
            # _C would start from nothing each time (54 s on 2 cores); a fixed folder lets ninja skip what is
            # up to date.
            self.build_temp = str(ROOT / "build" / "editable-temp")
        result = build_native(fixtures=self.inplace) if self.cuda else NativeResult(
            notes=["TensorRT plugin NOT built: CUDA disabled (no CUDA kernels or harness either)"])
        for ext in self.extensions:
            ext.extra_objects = [str(o) for o in result.kernel_objects]
        super().run()
        dest = ROOT / "torchtrt_swish" if self.inplace else Path(self.build_lib) / "torchtrt_swish"
        if result.plugin_library and not self.inplace:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(result.plugin_library, dest / result.plugin_library.name)
        # Beside the _C it describes: a wheel build must not overwrite the record of the tree's in-place _C.
        pin = _torch_pin()
        write_if_changed(dest / pin.BUILD_INFO_MODULE, pin.build_info_source(torch.__version__))
        for note in result.notes + [openmp_flags()[2]]:
            log(note)


def get_extensions(cuda: bool):
    """The op `torchtrt_swish._C`: CPU kernels always (with OpenMP and per-instruction-set copies), CUDA when cuda."""
    omp_cflags, omp_link, _ = openmp_flags()
    kwargs = dict(
        name="torchtrt_swish._C",
        sources=["csrc/torch/swish_op.cpp", "csrc/torch/swish_autograd.cpp"]
        + (["csrc/torch/swish_cuda.cpp"] if cuda else []),
        include_dirs=[str(ROOT / "csrc")],
        extra_compile_args={"cxx": ["-O3", *omp_cflags] + (["-DTORCHTRT_SWISH_CPU_X86"] if is_x86() else [])},
        extra_link_args=omp_link,
    )
    return [CUDAExtension(**kwargs) if cuda else CppExtension(**kwargs)]


def _torch_pin():
    """torchtrt_swish/_torch_pin.py, loaded by path: importing the package would load the _C being built."""
    spec = importlib.util.spec_from_file_location("torchtrt_swish_torch_pin", ROOT / "torchtrt_swish" / "_torch_pin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    """setup() with the extension and the native build step."""
    # _C links against this torch's C++ ABI: the wheel requires its minor version (and BuildNative records it
    # beside _C for the import-time check).
    requirement = _torch_pin().torch_requirement(torch.__version__)
    log(f"torch {torch.__version__}: the package requires {requirement}")
    cuda = with_cuda()
    if cuda:
        log(f"CUDA toolkit: {cuda_home()} (from {CUDA_ORIGIN})")
        # torch's own flags are unused (no .cu in _C) but it warns when the list is unset and no GPU is visible.
        os.environ.setdefault("TORCH_CUDA_ARCH_LIST", arch_list())
    BuildNative.cuda = cuda
    setup(
        install_requires=[requirement, "numpy"],
        ext_modules=get_extensions(cuda),
        cmdclass={"build_ext": BuildNative.with_options(use_ninja=True)},
        package_data={"torchtrt_swish": ["libtorchtrt_swish_plugin.so"]},
    )


# setuptools runs this file as __main__; the tests import it for the build's paths and toolchain checks.
if __name__ == "__main__":
    main()
