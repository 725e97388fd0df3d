"""The values torchtrt-swish reads from its command line (argparse types) and the numbers its help texts show.

Each type raises argparse.ArgumentTypeError naming the value, so that argparse reports it in one line.
"""
from __future__ import annotations

import argparse
import math

from torchtrt_swish.dtypes import TOLERANCES, dtype_name
from torchtrt_swish.shapes import parse_shape

__all__ = ["dtype_arg", "number_arg", "positive_int", "positive_float", "tolerance", "seed_arg", "size_arg",
           "iterations_arg", "scale_arg", "workspace_arg", "opset_arg", "shape_arg", "dims_arg", "tolerance_list",
           "MAX_SIZE", "MAX_SEED"]


def dtype_arg(text: str) -> str:
    """argparse type: a dtype name or alias, as its canonical name (torchtrt_swish.dtypes)."""
    try:
        return dtype_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def number_arg(kind: type, minimum: float, *, inclusive: bool = True, maximum: float | None = None):
    """argparse type: a finite `kind` (int or float) >= minimum (> minimum unless `inclusive`) and <= maximum; the
    error names the value and the range (argparse prefixes the option)."""
    noun = "an integer" if kind is int else "a finite number"
    bound = f"{'>=' if inclusive else '>'} {_number(minimum)}" + ("" if maximum is None else
                                                                   f" and <= {_number(maximum)}")

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {noun} {bound}, got {text!r}") from None
        if (not math.isfinite(value) or value < minimum or (value == minimum and not inclusive)
                or (maximum is not None and value > maximum)):
            raise argparse.ArgumentTypeError(f"must be {noun} {bound}, got {text!r}")
        return value

    return parse


def _number(value: float) -> str:
    # Integers in full (a seed's bound is 9223372036854775807, not 9.22337e+18), other numbers exactly as Python reads.
    return str(int(value)) if float(value).is_integer() else repr(float(value))


#: The largest axis size an argument may ask for: larger ones cannot be allocated anyway, and sizes beyond int64 make
#: NumPy and torch raise before any allocation check could say so.
MAX_SIZE = 2**31 - 1
#: Seeds go to torch.manual_seed and numpy.random.default_rng, seed + 1 to a torch.Generator: all take 0 .. 2**63 - 1.
MAX_SEED = 2**63 - 1

positive_int = number_arg(int, 1)
positive_float = number_arg(float, 0, inclusive=False)
tolerance = number_arg(float, 0)  # NaN or a negative bound would make every comparison pass
seed_arg = number_arg(int, 0, maximum=MAX_SEED)
size_arg = number_arg(int, 1, maximum=MAX_SIZE)  # a batch or axis size
iterations_arg = number_arg(int, 1, maximum=10_000)  # each iteration runs every executor once: more never ends
scale_arg = number_arg(float, 0, inclusive=False, maximum=1e4)  # 8 sigma beyond 1e4 overflows float16 (65504)
workspace_arg = number_arg(float, 2**-10, maximum=2**20)  # GiB: 1 MiB (less rounds to 0 bytes) to 1 PiB


def opset_arg(text: str) -> int:
    """argparse type: an ONNX opset from 11 (the SwishBias export's oldest) to the newest the installed onnx knows."""
    try:
        from onnx.defs import onnx_opset_version
    except ImportError:  # the [onnx] extra is missing: export says so in its own words
        newest = None
    else:
        newest = onnx_opset_version()
    return number_arg(int, 11, maximum=newest)(text)


def shape_arg(text: str) -> tuple[int, ...]:
    """argparse type: a shape such as 1x3x64x64 (torchtrt_swish.shapes.parse_shape), each size at most MAX_SIZE."""
    try:
        shape = parse_shape(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if any(d > MAX_SIZE for d in shape):
        raise argparse.ArgumentTypeError(f"bad shape {text!r}: each size must be <= {MAX_SIZE}")
    return shape


def tolerance_list(which: int) -> str:
    """'float32 0.0001, float16 0.01, ...': the default atol (0) or rtol (1) of each dtype, for the help texts."""
    return ", ".join(f"{dtype} {bounds[which]:g}" for dtype, bounds in TOLERANCES.items())


def dims_arg(text: str) -> dict[str, int]:
    """Parse 'height=5,width=5' into {'height': 5, 'width': 5}."""
    out = {}
    for item in text.split(","):
        name, sep, size = item.partition("=")
        if not sep or not name.strip() or not size.strip().isdigit() or not 1 <= int(size) <= MAX_SIZE:
            raise argparse.ArgumentTypeError(f"--dims entry {item!r} is not NAME=SIZE with SIZE from 1 to {MAX_SIZE}")
        out[name.strip()] = int(size)
    return out
