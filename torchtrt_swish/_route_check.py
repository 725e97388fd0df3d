"""What the doctor and its engine routes' child processes share: the row, the tiny case, the comparison, the child's
entry. One home below torchtrt_swish/doctor.py and onnx_path/selfcheck.py (the ONNX route, which the doctor runs as
a process): the route imports this, never the doctor, so nothing runs back up the dependency direction.

Only the standard library at the top, like the doctor: the CLI loads this folder where the package cannot load.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ._probe import CheckFailed, emit, first_line

__all__ = ["PASS", "FAIL", "SKIPPED", "Row", "ROUTE_TORCH_TENSORRT", "ROUTE_ONNX", "CheckFailed", "compare",
           "tiny_case", "route_main"]

PASS, FAIL, SKIPPED = "PASS", "FAIL", "SKIPPED"
ROUTE_TORCH_TENSORRT, ROUTE_ONNX = "Torch-TensorRT converter", "ONNX parser with the plugin"


@dataclasses.dataclass
class Row:
    """One check: its section and name, PASS / FAIL / SKIPPED, and the reason (versions, errors, what is missing)."""

    section: str
    check: str
    status: str
    detail: str


def compare(got: Any, expected: Any, dtype_name: str) -> float:
    """Max abs error of `got` against `expected`; CheckFailed at any NaN or unmatched infinity (the rule of `check`,
    torchtrt_swish.dtypes.unmatched_positions) or past the dtype's tolerance, naming the worst element."""
    import torch

    from .dtypes import tolerance, unmatched_positions

    atol, rtol = tolerance(dtype_name)
    got, expected = got.detach().double().cpu(), expected.detach().double().cpu()
    if got.shape != expected.shape:
        raise CheckFailed(f"shape {tuple(got.shape)}, expected {tuple(expected.shape)}")
    unmatched = torch.from_numpy(unmatched_positions(got.numpy(), expected.numpy()))
    if unmatched.any():
        first = tuple(int(i) for i in unmatched.nonzero()[0])
        raise CheckFailed(f"{int(unmatched.sum())} of {got.numel()} elements are NaN or an infinity the other side "
                          f"lacks (NaN never passes); first at index {first}: got {got[first].item()}, expected "
                          f"{expected[first].item()}")
    try:
        torch.testing.assert_close(got, expected, atol=atol, rtol=rtol, equal_nan=False)
    except AssertionError as exc:
        raise CheckFailed(" ".join(str(exc).split())) from None
    finite = torch.isfinite(expected)
    return float((got[finite] - expected[finite]).abs().max()) if finite.any() else 0.0


def tiny_case() -> tuple[Any, Any, Any]:
    """(model, x, bias): an EfficientSwish with a distinct bias per channel and a small random input, on the CPU."""
    import torch

    from .modules import EfficientSwish

    model = EfficientSwish(bias_shape=(4, 1, 1)).eval()
    with torch.no_grad():
        model.bias.copy_(torch.linspace(-1.0, 1.0, 4).view(4, 1, 1))
    x = torch.randn(2, 4, 3, 5, generator=torch.Generator().manual_seed(0)) * 3
    return model, x, model.bias.detach().clone()


def route_main(check: str, route: Any) -> int:
    """Child-process entry of an engine route: run it and emit its row (torchtrt_swish._probe.emit); returns 0, since
    the row carries the verdict (an exit other than 0 tells the doctor the process itself broke)."""
    try:
        row = Row("engine", check, PASS, route())
    except Exception as exc:  # noqa: BLE001 - every failure is the row's reason
        row = Row("engine", check, FAIL, " ".join(str(exc).split()) if isinstance(exc, CheckFailed)
                  else first_line(exc))
    emit(dataclasses.asdict(row))
    return 0
