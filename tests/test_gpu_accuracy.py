"""tools/gpu_accuracy.py's verdicts, on the CPU: what it counts as beyond the tolerance, as different bits, and where
it measures the largest error (its GPU numbers are in docs/performance-notes.md)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tools import gpu_accuracy  # noqa: E402


def _every(dt: torch.dtype) -> torch.Tensor:
    return gpu_accuracy.inputs(dt, -(1 << 15), 1 << 15)


def _spoiled(at: float, how):
    """eager's result with the element at x == `at` replaced by how(that value)."""
    def fn(x, b):
        y = gpu_accuracy.silu_plus(x, b)
        i = (x == at).nonzero()[0, 0]
        y[i] = how(y[i])
        return y
    return fn


def _away(v: torch.Tensor) -> torch.Tensor:
    """The next value of v's dtype away from zero."""
    return torch.nextafter(v, torch.tensor(float("inf") if v > 0 else float("-inf"), dtype=v.dtype))


def _run(dt, variants) -> dict:
    acc = {}
    gpu_accuracy.measure(_every(dt), {"eager": gpu_accuracy.silu_plus, **variants}, acc)
    return acc


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16])
def test_eager_against_itself_is_within_half_an_ulp(dt):
    a = _run(dt, {})["eager"]
    assert a[0] <= 0.501 and a[2] == 0 and a[3] == 0, a


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("at", [1.5, -3.0, 2.0 ** -20])
def test_two_ulps_off_is_beyond_and_differs(dt, at):
    """One output moved two steps away from zero: 1.5 to 2.5 ulps off (it was within half an ulp), beyond the
    tolerance (eps / 2 of the value, at most one ulp, plus 6 fp32 eps), counted once in both columns, and the largest
    error is reported at its x."""
    a = _run(dt, {"off": _spoiled(at, lambda v: _away(_away(v)))})["off"]
    assert 1.5 <= a[0] <= 2.5 and a[1] == at, a
    assert a[2] == 1 and a[3] == 1, a


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_output_for_a_finite_silu_is_beyond(value):
    a = _run(torch.float16, {"bad": _spoiled(0.5, lambda v: torch.full_like(v, value))})["bad"]
    assert a[2] == 1 and a[3] == 1, a


def test_past_the_flush_only_the_bits_count():
    """A different result at x = -100 (past FLUSH, where F.silu's own exp overflows) counts as different bits, not as
    an error."""
    a = _run(torch.bfloat16, {"past": _spoiled(-100.0, lambda v: torch.full_like(v, 1.0))})["past"]
    assert a[2] == 0 and a[3] == 1 and a[0] <= 0.5, a


def test_a_subnormal_result():
    """In the subnormal range the ulp is the smallest step and the tolerance floors at one of them: a result one step
    off is one ulp off and within, two steps off is beyond."""
    x = torch.finfo(torch.float16).smallest_normal / 4  # silu(x) ~ x / 2: a subnormal result
    one = _run(torch.float16, {"off": _spoiled(x, _away)})["off"]
    assert 0.5 <= one[0] <= 1.5 and one[1] == x and one[2] == 0 and one[3] == 1, one
    two = _run(torch.float16, {"off": _spoiled(x, lambda v: _away(_away(v)))})["off"]
    assert 1.5 <= two[0] <= 2.5 and two[2] == 1, two


@pytest.mark.parametrize("steps, beyond", [(5, 0), (8, 1)])
def test_the_fp32_bound_is_six_and_a_half_ulps_at_a_binade_start(steps, beyond):
    """float32: the tolerance is 6.5 eps of |silu| (half an ulp for the rounding, 6 eps for the math), so where silu
    lies just above a power of two (x = 1.2785: silu = 1.00002) 5 steps off pass and 8 do not."""
    x = gpu_accuracy.inputs(torch.float32, 0x3FA3_0000, 0x3FA4_0000)  # 1.2734 .. 1.2812
    at = torch.tensor(1.2785, dtype=torch.float32).item()
    assert 1.0 <= at * torch.sigmoid(torch.tensor(at, dtype=torch.float64)).item() < 1.0001

    def far(v):
        for _ in range(steps):
            v = _away(v)
        return v
    acc = {}
    gpu_accuracy.measure(x, {"eager": gpu_accuracy.silu_plus, "off": _spoiled(at, far)}, acc)
    assert acc["off"][2] == beyond and steps - 0.5 <= acc["off"][0] <= steps + 0.5, acc


def test_one_step_past_the_exact_value_is_beyond():
    """The rounding allowance is half an ulp, not one: where silu lies just above a power of two (fp16 x = 1.2793:
    silu = 1.0008) a result one step past the exact value (0.5 to 1 ulp off) is beyond."""
    at = torch.tensor(1.2793, dtype=torch.float16).item()
    exact = at * torch.sigmoid(torch.tensor(at, dtype=torch.float64)).item()
    assert 1.0 <= exact < 1.001

    def past(v):
        return torch.nextafter(v, torch.tensor(float("inf") if exact > v.item() else float("-inf"), dtype=v.dtype))
    a = _run(torch.float16, {"past": _spoiled(at, past)})["past"]
    assert 0.5 < a[0] <= 1.0 and a[1] == at and a[2] == 1, a
