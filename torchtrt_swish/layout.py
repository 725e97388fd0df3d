"""Bias layouts the SwishBias plugin supports: a Python twin of classifyBias() in csrc/kernels/bias_layout.h.

One rule for every Python host that must predict the plugin's answer (the Torch-TensorRT capability validator,
the ONNX graph surgery), extended to dynamic dims (None). tests/test_converter.py checks it against the C++.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

# Layout names as csrc/kernels/bias_layout.h biasKindName() spells them; the plugin accepts exactly these four.
SCALAR = "scalar"
PER_CHANNEL_DIM1 = "per-channel (dim 1)"
PER_CHANNEL_LAST = "per-channel (last dim)"
FULL = "full"
BLOCK = "block"
ACCEPTED_LAYOUTS = frozenset({SCALAR, PER_CHANNEL_DIM1, PER_CHANNEL_LAST, FULL})


def format_shape(shape: Sequence[int | None]) -> str:
    """'[2, ?, 5]' (? for a dynamic dim), as the reasons print shapes."""
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def classify_bias(x_shape: Sequence[int | None], bias_shape: Sequence[int]) -> tuple[str | None, str]:
    """Classify bias against x like classifyBias(): (layout name, "") or (None, reason); None dims are dynamic.

    A dynamic x dim is treated as "any size >= 1": the layout is accepted only if it holds for every size in the
    range, because the engine is built once for the whole optimization profile.
    """
    xr, br = len(x_shape), len(bias_shape)
    if br > xr:
        return None, (f"bias shape {format_shape(bias_shape)} has more dimensions than x "
                      f"{format_shape(x_shape)}, which would change x's shape")
    off = xr - br
    for j, b in enumerate(bias_shape):
        xd = x_shape[j + off]
        if b != 1 and xd is None:
            return None, (f"bias shape {format_shape(bias_shape)} needs x dim {j + off} to be {b}, but it is "
                          f"dynamic in x {format_shape(x_shape)}")
        if b != 1 and b != xd:
            return None, (f"bias shape {format_shape(bias_shape)} does not broadcast to x shape "
                          f"{format_shape(x_shape)} without changing x's shape (dim {j})")
    nonone = [j + off for j, b in enumerate(bias_shape) if b != 1]
    if not nonone:
        return SCALAR, ""
    first, last = nonone[0], nonone[-1]
    for d in range(first, last + 1):
        # Inside the block a bias dim of 1 is only harmless where x is 1 too (static); a dynamic x dim may not be.
        if bias_shape[d - off] != x_shape[d] and x_shape[d] != 1:
            return None, (f"bias shape {format_shape(bias_shape)} is not a contiguous block of x shape "
                          f"{format_shape(x_shape)}")

    def is_one(dims: Sequence[int | None]) -> bool:
        return all(d == 1 for d in dims)  # a dynamic (None) dim is never provably 1

    if is_one(x_shape[:first]) and is_one(x_shape[last + 1:]):
        return FULL, ""
    if first == last == xr - 1:
        return PER_CHANNEL_LAST, ""
    if first == last == 1:
        return PER_CHANNEL_DIM1, ""
    return BLOCK, ""


def plugin_layout(x_shape: Sequence | None, bias_shape: Sequence[int]) -> tuple[str | None, str]:
    """The plugin's answer for this bias on x: (layout name, "") when it runs it, else (None, reason).

    The one verdict every Python host asks (converter, ONNX contract, surgery, export). Dims of x that are not
    integers (None, ONNX dim_param names) are dynamic; an x of unknown rank (None) takes only a bias that cannot
    grow it (numel 1, rank <= 1).
    """
    bias_shape = [int(d) for d in bias_shape]
    if x_shape is None:
        if math.prod(bias_shape) == 1 and len(bias_shape) <= 1:
            return SCALAR, ""
        return None, f"bias of shape {bias_shape} for x of unknown shape cannot be checked against x"
    x_shape = [int(d) if isinstance(d, numbers.Integral) else None for d in x_shape]
    layout, why = classify_bias(x_shape, bias_shape)
    if layout is None:
        return None, why
    if layout not in ACCEPTED_LAYOUTS:
        return None, (f"bias layout '{layout}' (bias {format_shape(bias_shape)} on x {format_shape(x_shape)}) is "
                      "not one the plugin supports (scalar, per-channel on dim 1 or last dim, full shape)")
    return layout, ""
