"""Shared setup of the SwishBias plugin conformance tests: where the built libraries are, fixtures, helpers.

The `_trt_harness` module (tests/trt_harness, pybind11) dlopens libtorchtrt_swish_plugin.so, takes the creator
from getCreators and calls the plugin only through the public IPluginV3 interfaces, the way TensorRT's builder
and runtime do. The fixtures `h`, `lib`, `creator` and `logs` are registered for this folder by conftest.py;
tests/test_multi_gpu.py imports them from here.
"""
from __future__ import annotations

import importlib.util
import os
import struct
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD_DIR = ROOT / "build" / "native"  # pyproject.toml's build-dir of editable builds
EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
HARNESS_FILE = BUILD_DIR / f"_trt_harness{EXT_SUFFIX}"
FAKE_NVINFER = BUILD_DIR / "fake_tensorrt" / "libnvinfer.so.10"
BUILD_HINT = ("build it with `./dev setup` (the editable build puts it into build/native); it needs "
              "nvcc, pybind11 and the TensorRT headers")


def load_module_from(path: Path, name: str):
    """Import the module at path under name (the harness .so, or plugin.py without its package)."""
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
PLUGIN_META = load_module_from(_package_dir() / "plugin.py", "torchtrt_swish_plugin_meta")


def _plugin_path() -> Path | None:
    for cand in (os.environ.get("TORCHTRT_SWISH_PLUGIN"), _package_dir() / PLUGIN_META.LIBRARY_NAME):
        if cand and Path(cand).exists():
            return Path(cand).resolve()
    return None


PLUGIN_PATH = _plugin_path()
needs_plugin = pytest.mark.skipif(PLUGIN_PATH is None,
                                  reason=f"{PLUGIN_META.LIBRARY_NAME} was not built: {BUILD_HINT}")


def gpu_available() -> bool:
    """True when torch imports and sees a CUDA GPU."""
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - no torch means no GPU for these tests
        return False


# ---------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def h():
    """The _trt_harness module."""
    if PLUGIN_PATH is None:
        pytest.skip(f"{PLUGIN_META.LIBRARY_NAME} was not built: {BUILD_HINT}")
    if not HARNESS_FILE.exists():
        pytest.skip(f"conformance harness {HARNESS_FILE.name} not found in {BUILD_DIR}: {BUILD_HINT}")
    return load_module_from(HARNESS_FILE, "_trt_harness")


@pytest.fixture(scope="module")
def lib(h):
    """The plugin library, dlopened through the harness for one test module."""
    library = h.Library(str(PLUGIN_PATH))
    yield library
    library.close()


@pytest.fixture(scope="module")
def creator(lib):
    """The library's one plugin creator."""
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
    """The error and internal-error messages among logs()."""
    return [m for s, m in logs() if s in ("error", "internal_error")]


# ---------------------------------------------------------------------------------------------- helpers

SUPPORTED = ("float32", "float16", "bfloat16")


def bias_field(value: float = 0.0, *, name="bias", ftype="float32", length=1, data=...):
    """One field tuple (name, type, data bytes, length), by default a float32 `bias` (which the plugin lacks)."""
    if data is ...:
        data = struct.pack("<f", value)
    return (name, ftype, data, length)


def make(creator, phase="build"):
    """A plugin from creator, created without fields in phase."""
    p = creator.create("swish", None, phase)
    assert p is not None
    return p


def descs(h, dtype, x, bias=None, out=None, **kw):
    """(inputs, outputs) TensorDescs for x (and bias, left out when None) of one dtype; out defaults to x's dims."""
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


def bias_shapes(x_shape):
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


def bits(torch, t):
    """t's storage reinterpreted as integers of its width, for bit-exact comparisons."""
    return t.view({4: torch.int32, 2: torch.int16}[t.element_size()])
