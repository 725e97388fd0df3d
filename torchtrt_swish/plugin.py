"""Where the TensorRT plugin library lives, and the plugin's identity (name, version, namespace)."""
from __future__ import annotations

from pathlib import Path

PLUGIN_NAME = "SwishBias"
PLUGIN_VERSION = "1"
PLUGIN_NAMESPACE = "torchtrt_swish"
LIBRARY_NAME = "libtorchtrt_swish_plugin.so"


def plugin_library_path() -> Path:
    """Absolute path of libtorchtrt_swish_plugin.so shipped inside the package; raises if it was not built."""
    path = Path(__file__).resolve().parent / LIBRARY_NAME
    if not path.exists():
        raise FileNotFoundError(
            f"{LIBRARY_NAME} is not in {path.parent}: the TensorRT plugin was not built (it needs nvcc and the "
            "TensorRT headers; see the build log line 'TensorRT plugin NOT built')."
        )
    return path
