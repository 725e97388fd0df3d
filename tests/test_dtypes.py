"""torchtrt_swish.dtypes: the one definition of dtype names and tolerances, and that every route uses it."""
from __future__ import annotations

import pytest
import torch

from torchtrt_swish import dtypes

# Restated from the architecture contract (not read from the code): the dtypes every host supports.
SUPPORTED = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def test_names_aliases_and_torch_dtypes():
    assert dtypes.DTYPES == SUPPORTED
    for name, dtype in SUPPORTED.items():
        assert dtypes.dtype_name(name) == name and dtypes.dtype_name(dtype) == name
        assert dtypes.parse_dtype(name) is dtype and dtypes.parse_dtype(dtype) is dtype
    for alias, name in {"fp32": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16"}.items():
        assert dtypes.dtype_name(alias) == name


@pytest.mark.parametrize("bad", ["float8", "int8", "float64", "FP16", ""])
def test_unknown_names_are_named_in_the_error(bad):
    with pytest.raises(ValueError, match=f"unknown dtype '{bad}'; choose one of float32, float16, bfloat16"):
        dtypes.parse_dtype(bad)


def test_unsupported_torch_dtype():
    with pytest.raises(ValueError, match="unknown dtype torch.float64; choose one of"):
        dtypes.dtype_name(torch.float64)


def test_tolerances_cover_every_dtype_and_loosen_with_precision():
    assert set(dtypes.TOLERANCES) == set(SUPPORTED)
    for name, (atol, rtol) in dtypes.TOLERANCES.items():
        assert 0 < atol < 1 and 0 < rtol < 1, name
        assert dtypes.tolerance(name) == dtypes.tolerance(SUPPORTED[name]) == (atol, rtol)
    # a tolerance no tighter than a unit roundoff of its dtype (a few ulps must pass)...
    for name, dtype in SUPPORTED.items():
        assert dtypes.TOLERANCES[name][1] >= torch.finfo(dtype).eps, name
    # ...and ordered by precision: float32 < float16 < bfloat16
    order = [dtypes.TOLERANCES[n] for n in ("float32", "float16", "bfloat16")]
    assert order == sorted(order)


def test_the_routes_use_this_definition():
    """The ONNX route's export and parity take names and tolerances from this module, not from a copy."""
    pytest.importorskip("onnx", reason="the ONNX route needs the [onnx] extra (onnx)")
    pytest.importorskip("polygraphy", reason="the ONNX route needs the [onnx] extra (polygraphy)")
    from onnx_path import export, parity
    from onnx_path.tools import check

    assert export.parse_dtype is dtypes.parse_dtype and export.DTYPES is dtypes.DTYPES
    assert parity.TOLERANCES is dtypes.TOLERANCES
    assert check.DTYPES is dtypes.DTYPES and check.TOLERANCES is dtypes.TOLERANCES
