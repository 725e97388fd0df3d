"""The ONNX route of torchtrt_swish: export, graph surgery, CPU execution, TensorRT engine and Polygraphy parity.

Modules (import what you need; none of them needs TensorRT to import):

* ``export`` — torch model -> ONNX with one ``SwishBias`` node per ``torchtrt_swish::swish`` call.
* ``contract`` — the ``SwishBias`` node contract (what the plugin accepts), checked in one place.
* ``surgery`` — onnx-graphsurgeon passes: the original material's export formats, ONNX ``Swish``,
  ``Sigmoid``/``Mul``(/``Add``) -> ``SwishBias``, in the main graph and every If/Loop/Scan body; ``surgery_report``
  says what they replaced and refused.
* ``reference`` — run graphs with ``SwishBias`` nodes on the CPU (onnx.reference or ONNX Runtime, with this
  package's kernel).
* ``engine`` — ONNX -> TensorRT engine with the plugin library loaded.
* ``parity`` — Polygraphy comparisons against a float64 PyTorch reference, with a baseline per executor, on the
  inputs of ``feeds``; ``verdict`` holds the rules (statistics that keep NaN and inf as evidence, the baseline
  factor) and the table/JSON report.
* ``models`` — the torch models the CLI and examples build (seed Net, torchvision models with random weights).
* ``cli`` — the ``torchtrt-swish`` console script (export, fuse, build-engine, check, doctor): the entry point, which
  runs where torchtrt_swish cannot load, and the registry of the tools; each tool is a module of ``tools``, what
  they share in ``tools.base`` (the Tool shape, exit codes) and ``tools.args`` (argument types, path checks).
  It lives here, on top of both packages: ``onnx_path`` builds on ``torchtrt_swish``, never the other way round.

The node's identity and contract live in ``contract``: op_type ``SwishBias``, domain ``torchtrt_swish``, attributes
``plugin_version="1"`` and ``plugin_namespace="torchtrt_swish"``, inputs ``(x, bias)`` and no ``bias`` attribute.
Model files (an ONNX model and where its weights live: open, save, weights) are ``model_file``'s; ``common`` holds
the graph queries.

The names below are imported on first use, so that importing the package (as the console script does) needs only
the base install; the ``[onnx]`` extra is needed once one of them, or a module, is used.
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
