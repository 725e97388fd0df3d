"""torchtrt_swish.doctor.switch_points on the CPU: the switch-point shapes it derives for the SM counts of real GPUs."""
from __future__ import annotations

import math

import pytest
from test_backward_plan import bp  # noqa: F401  (the _backward_plan module fixture)
from test_backward_proof import SMS

from torchtrt_swish.doctor import switch_points

FAMILIES = {"rows", "cols", "grouped_cols", "planes_samples", "planes_planes", "planes_split", "channels"}


@pytest.mark.parametrize("sms", SMS)
def test_cases_cross_every_family_on_every_sm_count(sms):
    """Each GPU gets shapes of every plan family, of two-stage sums and of none, each a pair around a change of
    plan."""
    cases = switch_points.switch_point_cases(sms)
    assert {c.plan[0] for c in cases} >= FAMILIES
    assert any(c.plan[1] > 1 for c in cases)
    assert {c.plan[1] for c in cases if c.plan[0] == "channels"} == {0}
    assert all(math.prod(c.x_shape) <= 1 << 24 for c in cases)
    by_base = {}
    for c in cases:
        by_base.setdefault((c.dtype, c.x_shape[1:], c.bias_shape), []).append(c)
    changes = 0
    for group in by_base.values():
        group.sort(key=lambda c: c.x_shape[0])
        for a, b in zip(group, group[1:]):
            if b.x_shape[0] == a.x_shape[0] + 1 and a.plan != b.plan:
                changes += 1
    assert changes >= 6, changes


def test_cases_follow_the_sm_count():
    """The switch points move with the multiprocessor count: a GPU with fewer SMs switches at smaller batches."""
    small = {(c.dtype, c.x_shape, c.plan) for c in switch_points.switch_point_cases(16)}
    large = {(c.dtype, c.x_shape, c.plan) for c in switch_points.switch_point_cases(170)}
    assert small != large


def test_plan_of_matches_the_planner_module(bp):  # noqa: F811  (the fixture)
    """_C's plan families are the test module's (both compile csrc/kernels/swish_backward_plan.h)."""
    for c in switch_points.switch_point_cases(132):
        n = math.prod(c.x_shape)
        inner = math.prod(c.x_shape[2:]) if len(c.bias_shape) > 1 else 1
        channels = c.bias_shape[0]
        got = bp.plan(c.dtype, n, channels, inner, True, 132)
        family = got["kind"] if got["kind"] == "rows" else (
            ("grouped_cols" if got["cols"]["group"] > 1 else "cols") if got["kind"] == "cols"
            else "channels" if got["kind"] == "channels" else "planes_" + got["planes"]["shape"])
        assert (family, 2 if got["sum_slices"] > 1 else got["sum_slices"]) == c.plan, c
