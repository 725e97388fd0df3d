"""The ONNX route of torchtrt_swish: export, graph surgery, CPU execution, TensorRT engine and Polygraphy parity.

Modules (import what you need; none of them needs TensorRT to import):

* ``export`` — torch model -> ONNX with one ``SwishBias`` node per ``torchtrt_swish::swish`` call.
* ``contract`` — the ``SwishBias`` node contract (what the plugin accepts), checked in one place.
* ``surgery`` — onnx-graphsurgeon passes: the original material's export formats, ONNX ``Swish``,
  ``Sigmoid``/``Mul``(/``Add``) -> ``SwishBias``.
* ``reference`` — run graphs with ``SwishBias`` nodes on the CPU (onnx.reference or ONNX Runtime, with this
  package's kernel).
* ``engine`` — ONNX -> TensorRT engine with the plugin library loaded.
* ``parity`` — Polygraphy comparisons against a float64 PyTorch reference, with a baseline per executor and
  table/JSON reports.
* ``models`` — the torch models the CLI and examples build (seed Net, torchvision models with random weights).
* ``cli`` — the ``torchtrt-swish`` console script (export, fuse, build-engine, check). It lives here, on top of
  both packages: ``onnx_path`` builds on ``torchtrt_swish``, never the other way round.

The node's identity lives in ``common`` and its contract in ``contract``: op_type ``SwishBias``, domain
``torchtrt_swish``, attributes ``plugin_version="1"`` and ``plugin_namespace="torchtrt_swish"``, inputs
``(x, bias)`` (or ``x`` with a float attribute ``bias``).
"""
from .common import (
    PLUGIN_NAMESPACE,
    PLUGIN_VERSION,
    SWISH_DOMAIN,
    SWISH_OP,
    OnnxInputError,
    load_model,
    op_counts,
    save_model,
    swish_nodes,
)

__all__ = [
    "SWISH_OP",
    "SWISH_DOMAIN",
    "PLUGIN_VERSION",
    "PLUGIN_NAMESPACE",
    "OnnxInputError",
    "load_model",
    "save_model",
    "op_counts",
    "swish_nodes",
]
