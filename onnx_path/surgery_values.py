"""What the surgery reads from a graph: constant values (lazy, sparse and external ones included), names, types.

Constants are read without caching them in graphsurgeon's tensors, so what is not folded is exported as it came:
same dtype, sparse or dense, inline or external.
"""
from __future__ import annotations

import contextvars

import numpy as np
import onnx
import onnx_graphsurgeon as gs

_STD_DOMAINS = ("", "ai.onnx", None)
# The folder a run_surgery model's external tensors are read from (OnnxModel.folder), for the constants a pass reads.
EXTERNAL_DIR: contextvars.ContextVar[str] = contextvars.ContextVar("external_dir", default="")


def is_std(node: gs.Node, op: str) -> bool:
    """True for a node of the standard ONNX domain with this op type."""
    return node.op == op and node.domain in _STD_DOMAINS


def elem_type(tensor: gs.Tensor) -> int | None:
    """The ONNX element type of a graphsurgeon tensor, None when unknown."""
    dtype = tensor.dtype
    if dtype is None:
        return None
    if isinstance(dtype, (int, np.integer)):
        return int(dtype)
    try:
        return onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    except (TypeError, KeyError, ValueError):
        return None


def sparse_to_dense(sparse: onnx.SparseTensorProto, base_dir: str = "") -> np.ndarray:
    """The dense array of a SparseTensorProto, in its values' dtype (indices [NNZ] linear or [NNZ, rank]);
    external values or indices are read from `base_dir`."""
    values = onnx.numpy_helper.to_array(sparse.values, base_dir=base_dir)
    indices = onnx.numpy_helper.to_array(sparse.indices, base_dir=base_dir).astype(np.int64)
    dense = np.zeros(int(np.prod(sparse.dims, dtype=np.int64)), dtype=values.dtype)
    flat = indices if indices.ndim == 1 else np.ravel_multi_index(tuple(indices.T), tuple(sparse.dims))
    dense[flat] = values.reshape(-1)
    return dense.reshape(tuple(sparse.dims))


def constant_array(constant: gs.Constant) -> np.ndarray:
    """A Constant's values, read without caching them in the Constant.

    Reading gs.Constant.values replaces its lazy ONNX tensor by a NumPy array that is exported anew: a sparse
    initializer would come back dense in float64 (graphsurgeon densifies with np.zeros), an external one inline.
    """
    lazy = constant._values  # graphsurgeon's own exporter reads this attribute the same way
    if isinstance(lazy, gs.ir.tensor.SparseValues):
        return sparse_to_dense(lazy.tensor, EXTERNAL_DIR.get())
    if isinstance(lazy, gs.ir.tensor.LazyValues):
        return onnx.numpy_helper.to_array(lazy.tensor, base_dir=EXTERNAL_DIR.get())
    return np.asarray(constant.values)


def plain_constant(tensor: gs.Tensor) -> bool:
    """A Constant whose ONNX tensor a SwishBias node can take as is (not a sparse initializer)."""
    return isinstance(tensor, gs.Constant) and not isinstance(tensor._values, gs.ir.tensor.SparseValues)


def const_values(tensor: gs.Tensor, graph: gs.Graph) -> np.ndarray | None:
    """Values of an initializer or of a Constant node's output; None for anything set or computed at run time."""
    if any(tensor is t for t in graph.inputs):
        return None  # an initializer that is also a graph input: the caller may override it
    if isinstance(tensor, gs.Constant):
        return constant_array(tensor)
    if len(tensor.inputs) != 1 or not is_std(tensor.inputs[0], "Constant"):
        return None
    attrs = tensor.inputs[0].attrs
    if isinstance(attrs.get("value"), gs.Constant):
        return constant_array(attrs["value"])
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                       ("value_ints", np.int64)):
        if key in attrs:
            return np.asarray(attrs[key], dtype=dtype)
    return None


def attr_str(node: gs.Node, key: str) -> str | None:
    """A string attribute of the node as text (bytes decoded), None when absent or not a string."""
    value = node.attrs.get(key)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None
