"""What the torchtrt-swish tools share about their command line: the values they read (argparse types, and the
numbers their help texts show) and the paths they read and write.

Each type raises argparse.ArgumentTypeError naming the value, so that argparse reports it in one line; the path
checks and the values parsed after argparse raise UsageError, one line naming the option.
"""
from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from torchtrt_swish.dtypes import TOLERANCES, dtype_name
from torchtrt_swish.shapes import parse_shape, parse_shape_spec

from onnx_path.tools.base import UsageError


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


def profile_shapes(option: str, text: str | None) -> dict:
    """parse_shape_spec(text); UsageError naming the option and the value when it is no spec or a size is too large."""
    try:
        shapes = parse_shape_spec(text)
    except ValueError as exc:
        raise UsageError(f"{option} {text}: {exc}") from None
    if (big := next(((n, s) for n, s in shapes.items() if any(d > MAX_SIZE for d in s)), None)) is not None:
        raise UsageError(f"{option} {text}: a size of {big[0]!r} is larger than {MAX_SIZE}")
    return shapes


# ------------------------------------------------------------------------------------------------------ paths


def existing_file(text: str | Path) -> Path:
    """`text` as a Path; UsageError unless it names a regular file."""
    # For files read by TensorRT (build-engine's model, check's engine): reported as missing even where TensorRT
    # is absent. ONNX inputs get the same message from load_model.
    path = Path(text)
    if not path.is_file():
        raise UsageError(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
    return path


def _same_file_key(path: Path):
    # Existing files by inode (hard links, symlinks, ./x vs x); others by their normalized absolute path.
    try:
        st = path.stat()
        return ("inode", st.st_dev, st.st_ino)
    except OSError:
        return ("path", os.path.realpath(path))


_ONNX_INPUTS = ("input", "--reference")  # the check_paths inputs that are ONNX files


def check_paths(inputs: dict[str, Path | str | None], outputs: dict[str, Path | None]) -> None:
    """UsageError unless every output can be written and none is an input (or its external data) or another output."""
    from onnx_path.model_file import external_data_files
    from torchtrt_swish._output import output_problem

    seen = {}
    for opt, p in inputs.items():
        if p is not None:
            seen[_same_file_key(Path(p))] = f"{opt} {p}"
            # An ONNX input's weights may live in other files: writing over one of them ruins the input too. Only
            # the ONNX inputs are read for them: an engine or a plugin library is no model (and may be large).
            for data in external_data_files(p) if opt in _ONNX_INPUTS and Path(p).is_file() else ():
                seen.setdefault(_same_file_key(data), f"{opt}'s external data {data}")
    for opt, path in outputs.items():
        if path is None:
            continue
        key = _same_file_key(Path(path))
        if key in seen:
            raise UsageError(f"{opt} {path} is the same file as {seen[key]}: refusing to overwrite it")
        seen[key] = f"{opt} {path}"
        if (why := output_problem(path)) is not None:
            raise UsageError(f"{opt} {path} cannot be written: {why}")


def write_output(path: Path, opt: str, write) -> None:
    """Run write() and turn an OSError into a UsageError naming the option and path."""
    try:
        write()
    except OSError as exc:
        raise UsageError(f"{opt} {path} could not be written: {exc.strerror or exc}") from None


def model_from_spec(spec: str, seed: int, input_shape):
    """onnx_path.models.build_model(spec, ...); UsageError when the spec names no model."""
    from onnx_path.models import build_model

    try:
        return build_model(spec, seed=seed, input_shape=input_shape)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
