"""The TensorRT plugin: its identity (name, version, namespace), where its library lives, and loading it into
TensorRT's plugin registry (the one place that does so; the converter, engine builder and parity runner use it)."""
from __future__ import annotations

import importlib
import sys
import threading
from pathlib import Path
from typing import Any

PLUGIN_NAME = "SwishBias"
PLUGIN_VERSION = "1"
PLUGIN_NAMESPACE = "torchtrt_swish"
LIBRARY_NAME = "libtorchtrt_swish_plugin.so"

# The creator's field contract, shared by the converter and the tests: name -> (dtype, length). Empty: the plugin's
# inputs are [x, bias] (a fixed bias is a constant tensor), so getFieldNames and getFieldsToSerialize return no
# fields, and createPlugin ignores any it is given (logging a warning naming each), as TensorRT's field-less
# creators do.
PLUGIN_FIELDS: dict[str, tuple[str, int]] = {}

# The Python modules of TensorRT's runtimes, in order of preference (as the cu13 wheels name them): the full TensorRT
# (`tensorrt`, the frontend over tensorrt-cu13-bindings' `tensorrt_bindings`), the lean runtime
# (tensorrt-lean-cu13-bindings) and the dispatch runtime (tensorrt-dispatch-cu13-bindings).
TENSORRT_MODULES = ("tensorrt", "tensorrt_bindings", "tensorrt_lean_bindings", "tensorrt_dispatch_bindings")

_LOAD_LOCK = threading.RLock()
# Library handles by registry: kept for the process lifetime, engines may deserialize the plugin at any time.
_handles: dict[int, Any] = {}


class PluginLoadError(RuntimeError):
    """The SwishBias plugin could not be put into TensorRT's plugin registry (the message says which library, why)."""


def plugin_identity() -> str:
    """'SwishBias (version "1", namespace "torchtrt_swish")': how errors name the plugin."""
    return f'{PLUGIN_NAME} (version "{PLUGIN_VERSION}", namespace "{PLUGIN_NAMESPACE}")'


def plugin_library_path() -> Path:
    """Absolute path of libtorchtrt_swish_plugin.so shipped inside the package; raises if it was not built."""
    path = Path(__file__).resolve().parent / LIBRARY_NAME
    if not path.exists():
        raise FileNotFoundError(
            f"{LIBRARY_NAME} is not in {path.parent}: the TensorRT plugin was not built (it needs nvcc and the "
            "TensorRT headers; see the build log line 'TensorRT plugin NOT built')."
        )
    return path


def tensorrt_module() -> Any:
    """TensorRT's Python module: one of TENSORRT_MODULES already imported, else the first importable one."""
    for name in TENSORRT_MODULES:
        module = sys.modules.get(name)
        if module is not None:
            return module
    reasons = []
    for name in TENSORRT_MODULES:
        try:
            return importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - stub wheels raise all sorts of errors at import
            reasons.append(f"{name}: {type(exc).__name__}: {exc}")
    raise PluginLoadError(f"no TensorRT Python module is importable, so {plugin_identity()} cannot be loaded ("
                          + "; ".join(reasons) + ")")


def find_creator(registry: Any) -> Any:
    """The registered SwishBias creator of `registry`, or None, found by scanning ``all_creators``.

    Never ``get_creator``: TensorRT logs an API usage error for every name it does not find.
    """
    for creator in getattr(registry, "all_creators", None) or ():
        if (getattr(creator, "name", None), getattr(creator, "plugin_version", None),
                getattr(creator, "plugin_namespace", None)) == (PLUGIN_NAME, PLUGIN_VERSION, PLUGIN_NAMESPACE):
            return creator
    return None


def load_plugin(trt: Any = None, library: str | Path | None = None) -> Any:
    """The SwishBias creator from ``trt.get_plugin_registry()``, loading the plugin library only when it is absent.

    `trt` defaults to :func:`tensorrt_module`, `library` to :func:`plugin_library_path`. Idempotent and thread-safe:
    a creator already registered (by an earlier call, or by the library registering itself when dlopen'ed next to
    TensorRT) is returned as is, because ``load_library`` refuses a library whose creators are registered.
    Raises PluginLoadError naming the library and the reason when the creator cannot be made available.
    """
    trt = tensorrt_module() if trt is None else trt
    with _LOAD_LOCK:
        try:
            registry = trt.get_plugin_registry()
        except Exception as exc:  # noqa: BLE001 - surfaced with the context a user needs
            raise PluginLoadError(f"{plugin_identity()}: TensorRT's plugin registry is unavailable "
                                  f"({type(exc).__name__}: {exc})") from exc
        creator = find_creator(registry)
        if creator is not None:
            return creator
        if library is None:
            try:
                library = plugin_library_path()
            except FileNotFoundError as exc:
                raise PluginLoadError(f"{plugin_identity()}: {exc}") from exc
        library = Path(library)
        if not library.is_file():
            raise PluginLoadError(f"{plugin_identity()}: plugin library {library} does not exist")
        handle = registry.load_library(str(library))
        if handle is None:
            raise PluginLoadError(
                f"{plugin_identity()}: TensorRT's registry refused to load {library} (it is not a TensorRT plugin "
                "library for this TensorRT, or could not be opened; the TensorRT log says which)")
        _handles[id(registry)] = handle
        creator = find_creator(registry)
        if creator is None:
            raise PluginLoadError(
                f"{plugin_identity()} is not registered after loading {library}: the library loaded but did not "
                "provide that creator (check getCreators and the plugin's name/version/namespace)")
        return creator
