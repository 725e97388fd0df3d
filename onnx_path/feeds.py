"""Inputs for a parity run: the model's input metadata for Polygraphy, and random feeds for its inputs.

Dynamic axes take their sizes from ``dims`` (by name) or ``batch`` (axis 0). Inputs that cannot be made as asked —
an axis named in ``dims`` that no input has, a dynamic axis without a size, or a shape too large to allocate — raise
``FeedError``, whose ``option`` says which knob to change.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np
import onnx
from polygraphy.common import TensorMetadata

from .common import graph_inputs, numpy_dtype_for


class FeedError(ValueError):
    """Random inputs cannot be made as asked; `option` says which knob to change ('dims' or 'size')."""

    def __init__(self, message: str, option: str):
        super().__init__(message)
        self.option = option


def show_shape(dims) -> str:
    """'2x3x?' for a shape (None for a dynamic dim), 'scalar' for ()."""
    return "x".join("?" if d is None else str(d) for d in dims) or "scalar"


def type_text(tp: onnx.TypeProto) -> str:
    """An ONNX type as the ONNX spec writes it: 'tensor(float)', 'sequence(tensor(float))', 'optional(...)'."""
    kind = tp.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        return f"{kind[:-5]}({onnx.TensorProto.DataType.Name(getattr(tp, kind).elem_type).lower()})"
    if kind in ("sequence_type", "optional_type"):
        return f"{kind[:-5]}({type_text(getattr(tp, kind).elem_type)})"
    if kind == "map_type":
        key = onnx.TensorProto.DataType.Name(tp.map_type.key_type).lower()
        return f"map({key}, {type_text(tp.map_type.value_type)})"
    return kind or "no type"


def non_tensor_io(model: onnx.ModelProto) -> str | None:
    """'output NAME is TYPE ...' for the first real input or graph output a parity run cannot compare, or None.

    Dense tensors are compared, and an optional holding a tensor (the executors hand over the tensor); sequences,
    maps, sparse tensors and optionals of them are not.
    """
    for kind, values in (("input", graph_inputs(model)), ("output", model.graph.output)):
        for vi in values:
            tp = vi.type
            inner = tp.optional_type.elem_type if tp.HasField("optional_type") else tp
            if vi.type.HasField("tensor_type") or inner.HasField("tensor_type") or tp.WhichOneof("value") is None:
                continue
            return (f"{kind} {vi.name!r} is {type_text(tp)}: check compares tensors (and optional tensors) only")
    return None


def onnx_input_metadata(model: onnx.ModelProto) -> TensorMetadata:
    """Polygraphy TensorMetadata for the model's real inputs (dynamic dims as None)."""
    meta = TensorMetadata()
    for vi in graph_inputs(model):
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        meta.add(vi.name, numpy_dtype_for(tt.elem_type), shape)
    return meta


def random_feeds(
    model: onnx.ModelProto, *, batch: int = 2, dims: Mapping[str, int] | None = None, seed: int = 0, count: int = 1,
    scale: float = 1.0,
) -> list[OrderedDict]:
    """`count` feed dicts of normal(0, scale) values for the model's inputs; dynamic dims from `dims` or `batch`.

    Keep `scale` near the data the model was calibrated on: a randomly initialized deep net fed far larger inputs
    is chaotic, and then even float32 PyTorch disagrees with float64 PyTorch.
    """
    for name, value in (("batch", batch), ("count", count)):
        if int(value) < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a finite number > 0, got {scale!r}")
    rng = np.random.default_rng(seed)
    dims = dict(dims or {})
    inputs = graph_inputs(model)
    named = {d.dim_param for vi in inputs for d in vi.type.tensor_type.shape.dim if d.HasField("dim_param")}
    if unknown := sorted(set(dims) - named):
        raise FeedError(f"no input has an axis named {', '.join(map(repr, unknown))} (the model's named axes: "
                        f"{', '.join(sorted(named)) or 'none'})", "dims")
    feeds = []
    for _ in range(count):
        feed = OrderedDict()
        for vi in inputs:
            name, tt = vi.name, vi.type.tensor_type
            shape = []
            for axis, d in enumerate(tt.shape.dim):
                if d.HasField("dim_value"):
                    shape.append(d.dim_value)
                elif d.dim_param in dims:
                    shape.append(int(dims[d.dim_param]))
                elif axis == 0:
                    shape.append(batch)
                else:
                    raise FeedError(f"input {name!r} axis {axis} ({d.dim_param or '?'}) is dynamic: give its size",
                                    "dims")
            try:
                # np.asarray: for a 0-d input standard_normal(()) * scale is a NumPy scalar, not an array.
                feed[name] = np.asarray(rng.standard_normal(shape) * scale).astype(numpy_dtype_for(tt.elem_type))
            except MemoryError:
                raise FeedError(f"input {name!r} of shape {show_shape(shape)} is too large to allocate",
                                "size") from None
        feeds.append(feed)
    return feeds
