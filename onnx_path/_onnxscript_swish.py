"""onnxscript definition of SwishBias for the dynamo exporter's custom_translation_table (imported lazily).

Kept in its own module without ``from __future__ import annotations``: onnxscript evaluates the type annotations
itself from the module's globals.
"""
from typing import TypeVar, Union

import onnxscript
from onnxscript.onnx_types import BFLOAT16, FLOAT, FLOAT16

from .contract import PLUGIN_NAMESPACE, PLUGIN_VERSION, SWISH_DOMAIN, SWISH_OPSET_VERSION

swish_opset = onnxscript.values.Opset(SWISH_DOMAIN, SWISH_OPSET_VERSION)

# The exporter derives the node's outputs from the return annotation: an unannotated function has none.
TFloat = TypeVar("TFloat", bound=Union[FLOAT, FLOAT16, BFLOAT16])  # noqa: UP007 - onnxscript reads typing.Union


# A scripted function rather than a traced one: SwishBias has no registered ONNX schema, which tracing needs. The
# exporter inlines the function, leaving exactly one SwishBias node in the graph.
@onnxscript.script(swish_opset)
def swish_bias(x: TFloat, bias: TFloat) -> TFloat:
    """x * sigmoid(x) + bias as the TensorRT plugin node."""
    return swish_opset.SwishBias(x, bias, plugin_version=PLUGIN_VERSION, plugin_namespace=PLUGIN_NAMESPACE)
