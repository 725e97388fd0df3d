"""Where the TensorRT plugin library lives, and the plugin's identity (name, version, namespace)."""
from __future__ import annotations

import ctypes
import threading
from pathlib import Path

PLUGIN_NAME = "SwishBias"
PLUGIN_VERSION = "1"
PLUGIN_NAMESPACE = "torchtrt_swish"
LIBRARY_NAME = "libtorchtrt_swish_plugin.so"

# The creator's field contract, shared by the converter and the tests: name -> (dtype, length).
# ``bias`` is a PluginFieldType.kFLOAT32 field of length 1, optional (default 0.0), read only by the one-input form
# (inputs [x]); with two inputs [x, bias] the bias tensor is used and the field ignored. createPlugin rejects unknown
# names, other types or lengths and null data (returns nullptr and logs); getFieldsToSerialize returns exactly this.
PLUGIN_FIELDS = {"bias": ("float32", 1)}

_OPEN_LOCK = threading.Lock()
_opened: dict[str, ctypes.CDLL] = {}


def plugin_library_path() -> Path:
    """Absolute path of libtorchtrt_swish_plugin.so shipped inside the package; raises if it was not built."""
    path = Path(__file__).resolve().parent / LIBRARY_NAME
    if not path.exists():
        raise FileNotFoundError(
            f"{LIBRARY_NAME} is not in {path.parent}: the TensorRT plugin was not built (it needs nvcc and the "
            "TensorRT headers; see the build log line 'TensorRT plugin NOT built')."
        )
    return path


def open_plugin_library(path: str | Path | None = None) -> ctypes.CDLL:
    """ctypes-load the plugin library once per process (what Polygraphy's --plugins does) and return the handle.

    Loading is enough when TensorRT is already loaded in the process: the library then registers its creator with
    TensorRT's plugin registry itself. Without TensorRT it only makes getCreators/setLoggerFinder callable.
    """
    lib = str(Path(path) if path is not None else plugin_library_path())
    with _OPEN_LOCK:
        if lib not in _opened:
            _opened[lib] = ctypes.CDLL(lib)
        return _opened[lib]
