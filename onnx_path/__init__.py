"""The ONNX route of torchtrt_swish (docs/onnx_route.md; its modules and their dependencies: docs/architecture.md).

The names below are imported on first use, so that importing the package (as the console script does) needs only the
base install; the ``[onnx]`` extra is needed once one of them, or a module, is used.
"""
from __future__ import annotations

import importlib

# name: the module that defines it (each imports onnx).
_HOMES = {
    "SWISH_OP": "contract",
    "SWISH_DOMAIN": "contract",
    "PLUGIN_VERSION": "contract",
    "PLUGIN_NAMESPACE": "contract",
    "swish_nodes": "contract",
    "OnnxInputError": "model_file",
    "OnnxModel": "model_file",
    "load_model": "model_file",
    "open_model": "model_file",
    "save_model": "model_file",
    "op_counts": "functions",
}
__all__ = list(_HOMES)


def __getattr__(name: str):
    """The names of __all__, from their modules when first asked for."""
    if name in _HOMES:
        value = getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
