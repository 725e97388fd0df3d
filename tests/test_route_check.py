"""What the doctor and its engine routes' processes share (torchtrt_swish/_route_check.py): the comparison, which
holds the rule of `check`, and the route process's entry, which hands back one row whatever the route raised."""
from __future__ import annotations

import pytest
import torch

from torchtrt_swish import _route_check, doctor
from torchtrt_swish._probe import results
from torchtrt_swish._route_check import PASS, CheckFailed, compare, route_main


def test_the_doctor_uses_these_and_no_copy():
    for name in _route_check.__all__:
        assert getattr(doctor, name) is getattr(_route_check, name), name


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("got, expected", [
    ([NAN], [NAN]), ([1.0], [NAN]), ([NAN], [1.0]), ([INF], [-INF]), ([1.0], [INF]), ([INF], [1.0]),
    ([INF, 1.0], [INF, 1.0]), ([-INF], [-INF]), ([1.0, 2.0], [1.0, 2.0 + 1e-9]),
])
def test_compare_holds_the_rule_of_check(got, expected):
    # One rule: the doctor fails exactly where `check`'s statistics have an unmatched position (NaN never passes).
    from onnx_path.verdict import error_stats

    fails = error_stats(got, expected)["nonfinite"]["mismatched"] > 0
    if fails:
        with pytest.raises(CheckFailed, match="NaN never passes"):
            compare(torch.tensor(got), torch.tensor(expected), "float32")
    else:
        assert compare(torch.tensor(got), torch.tensor(expected), "float32") <= 1e-9
    assert fails == (NAN in got or NAN in expected or got[0] != expected[0])  # the cases mean what they say


def test_route_main_prints_one_json_row(capsys):
    assert route_main("r", lambda: "fine") == 0
    assert results(capsys.readouterr().out)[-1] == {"section": "engine", "check": "r", "status": PASS,
                                                    "detail": "fine"}

    def boom():
        raise AttributeError("'ILayer' object has no attribute 'precision_is_set'\nmore")

    route_main("r", boom)
    assert results(capsys.readouterr().out)[-1]["detail"] == (
        "AttributeError: 'ILayer' object has no attribute 'precision_is_set'")
