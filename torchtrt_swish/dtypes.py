"""Dtype names and tolerances, defined once for every route (Torch-TensorRT, ONNX, CLI, examples).

The dtypes every host supports, the spellings users may type for them, and the (atol, rtol) a result in each dtype
is held to against its reference.
"""
from __future__ import annotations

import numpy as np
import torch

#: The dtypes every host supports, by their canonical (torch / numpy) names.
DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
#: Other spellings accepted wherever a dtype is given by name (TensorRT's precision names, "half").
ALIASES: dict[str, str] = {"fp32": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16"}
#: Per-dtype (atol, rtol) of a result against its reference (float64 PyTorch, or PyTorch in the same dtype for
#: TensorRT). Polygraphy's parity passes a value within either bound; torch.allclose within atol + rtol*|ref|.
#: float32 leaves room for the summation order of long conv chains and TensorRT's conv tactics; the half types
#: allow one to a few output ulps of values around 1-10 after reordered accumulation.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-3),
    "float16": (1e-2, 1e-2),
    "bfloat16": (6e-2, 5e-2),
}
#: A result that misses the bounds above still passes when its max |err| is at most this multiple of its baseline's
#: (the same network, unfused, run by the same executor in the same dtype): two roundings of one network differ by a
#: small factor in their largest error, a wrong model by orders of magnitude.
BASELINE_FACTOR: float = 2.0


def dtype_name(dtype: str | torch.dtype) -> str:
    """Canonical name of a supported dtype given by name, alias or torch dtype; ValueError naming the choices."""
    if isinstance(dtype, torch.dtype):
        for name, value in DTYPES.items():
            if value == dtype:
                return name
        raise ValueError(f"unknown dtype {dtype}; choose one of {', '.join(DTYPES)}")
    name = ALIASES.get(dtype, dtype)
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    return name


def parse_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """The torch dtype of a supported dtype given by name, alias or torch dtype; ValueError naming the choices."""
    return DTYPES[dtype_name(dtype)]


def tolerance(dtype: str | torch.dtype) -> tuple[float, float]:
    """(atol, rtol) for results in `dtype` (name, alias or torch dtype)."""
    return TOLERANCES[dtype_name(dtype)]


def unmatched_positions(candidate, reference) -> np.ndarray:
    """Where a result and its reference (same shape, float arrays) cannot pass: any NaN, or an infinity on one side
    that the other does not have. Same-sign infinities match; a NaN never does, not even against another NaN."""
    a, b = np.asarray(candidate, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    fa, fb = np.isfinite(a), np.isfinite(b)
    # a == b is False for NaN, so two NaNs stay unmatched.
    return ~((fa & fb) | (~fa & ~fb & (a == b)))
