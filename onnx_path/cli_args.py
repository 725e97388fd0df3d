"""The values torchtrt-swish reads from its command line (argparse types) and the numbers its help texts show.

Each type raises argparse.ArgumentTypeError naming the value, so that argparse reports it in one line.
"""
from __future__ import annotations

import argparse
import math

from torchtrt_swish.dtypes import TOLERANCES, dtype_name
from torchtrt_swish.shapes import parse_shape

__all__ = ["dtype_arg", "number_arg", "positive_int", "positive_float", "tolerance", "shape_arg", "dims_arg",
           "tolerance_list"]


def dtype_arg(text: str) -> str:
    """argparse type: a dtype name or alias, as its canonical name (torchtrt_swish.dtypes)."""
    try:
        return dtype_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def number_arg(kind: type, minimum: float, *, inclusive: bool):
    """argparse type: a finite `kind` (int or float) >= minimum (or > minimum); the error names the value."""
    bound = f"{'>=' if inclusive else '>'} {minimum:g}"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'} {bound}, "
                                             f"got {text!r}") from None
        if not math.isfinite(value) or value < minimum or (value == minimum and not inclusive):
            raise argparse.ArgumentTypeError(f"must be {'an integer' if kind is int else 'a finite number'} "
                                             f"{bound}, got {text!r}")
        return value

    return parse


positive_int = number_arg(int, 1, inclusive=True)
positive_float = number_arg(float, 0, inclusive=False)
tolerance = number_arg(float, 0, inclusive=True)  # NaN or a negative bound would make every comparison pass


def shape_arg(text: str) -> tuple[int, ...]:
    """argparse type: a shape such as 1x3x64x64 (torchtrt_swish.shapes.parse_shape)."""
    try:
        return parse_shape(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def tolerance_list(which: int) -> str:
    """'float32 0.0001, float16 0.01, ...': the default atol (0) or rtol (1) of each dtype, for the help texts."""
    return ", ".join(f"{dtype} {bounds[which]:g}" for dtype, bounds in TOLERANCES.items())


def dims_arg(text: str) -> dict[str, int]:
    """Parse 'height=5,width=5' into {'height': 5, 'width': 5}."""
    out = {}
    for item in text.split(","):
        name, sep, size = item.partition("=")
        if not sep or not name.strip() or not size.strip().isdigit() or int(size) < 1:
            raise argparse.ArgumentTypeError(f"--dims entry {item!r} is not NAME=SIZE with SIZE >= 1")
        out[name.strip()] = int(size)
    return out
