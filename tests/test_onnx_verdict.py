"""The verdict rules of `check`: the baseline factor, and non-finite values on every side of a comparison."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_path.parity import BASELINE_FACTOR, check_parity

SHAPE = [4, 8]
# Exact in float32 (a power of two), and far above the rounding of x + c (~1e-7 for |x| < 4).
STEP = 2.0 ** -10


def add_model(c: float) -> onnx.ModelProto:
    """y = x + c: a model whose error against the c=0.5 reference is |c - 0.5| in every element."""
    node = h.make_node("Add", ["x", "c"], ["y"], name="add")
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, SHAPE)],
                         [h.make_tensor_value_info("y", T.FLOAT, SHAPE)],
                         initializer=[onnx.numpy_helper.from_array(np.array(c, dtype=np.float32), "c")])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def row_of(report, runner="onnx-reference+swish", output="y"):
    comp = next(c for c in report.comparisons if c["runner"] == runner)
    return next(r for r in comp["outputs"] if r["name"] == output)


# -------------------------------------------------------------------------------------------- baseline factor


@pytest.mark.parametrize(("ratio", "passes"), [(1.5, True), (1.9, True), (2.2, False), (3.0, False), (10.0, False)])
def test_a_candidate_passes_within_twice_its_baselines_error_and_fails_beyond(ratio, passes):
    assert BASELINE_FACTOR == 2.0
    # Zero tolerances: only the baseline rule can pass the candidate; its error is `ratio` times the baseline's.
    report = check_parity(add_model(0.5 + ratio * STEP), reference_onnx=add_model(0.5),
                          baseline_onnx=add_model(0.5 + STEP), backends=("reference",), tolerances=(0.0, 0.0))
    row = row_of(report)
    assert row["within_tolerance"] is False
    assert row["baseline_max_abs"] == pytest.approx(STEP, rel=1e-3)
    assert row["max_abs"] == pytest.approx(ratio * STEP, rel=1e-3)
    assert row["within_baseline"] is passes and row["passed"] is passes and report.passed is passes


def test_a_candidate_exactly_at_twice_its_baselines_error_passes():
    """The stated rule (torchtrt_swish.dtypes.BASELINE_FACTOR: "at most"): exactly BASELINE_FACTOR times the
    baseline's max |err| passes, the next float above it fails. `<` in place of `<=` fails here."""
    from onnx_path.verdict import judge

    clean = {"candidate": 0, "reference": 0, "mismatched": 0}
    base = {"max_abs": 0.125, "nonfinite": dict(clean), "within_tolerance": False}
    at = judge({"max_abs": BASELINE_FACTOR * 0.125, "nonfinite": dict(clean), "within_tolerance": False}, base,
               0.0, 0.0)
    assert at["within_baseline"] is True and at["passed"] is True
    above = judge({"max_abs": float(np.nextafter(BASELINE_FACTOR * 0.125, np.inf)), "nonfinite": dict(clean),
                   "within_tolerance": False}, base, 0.0, 0.0)
    assert above["within_baseline"] is False and above["passed"] is False


# ------------------------------------------------------------------------------------------ non-finite values

NAN, INF = float("nan"), float("inf")


def const_model(c: np.ndarray) -> onnx.ModelProto:
    """y = x + c with a full-shaped constant c (non-finite values of c land in y at the same positions)."""
    node = h.make_node("Add", ["x", "c"], ["y"], name="add")
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, SHAPE)],
                         [h.make_tensor_value_info("y", T.FLOAT, SHAPE)],
                         initializer=[onnx.numpy_helper.from_array(np.asarray(c, dtype=np.float32), "c")])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def with_values(shift: float, values: dict | float | None) -> np.ndarray:
    c = np.full(SHAPE, 0.5 + shift, dtype=np.float32)
    if isinstance(values, float):
        c[...] = values
    elif values:
        for index, value in values.items():
            c[index] = value
    return c


# (reference, baseline, candidate) non-finite values; the finite part of the candidate is 1.5x its baseline's error,
# so without them every case would pass by the baseline rule.
NONFINITE_CASES = {
    "candidate-one-nan": (None, None, {(0, 0): NAN}, False),
    "candidate-all-nan": (None, None, NAN, False),
    "candidate-inf-where-reference-is-finite": (None, None, {(1, 2): INF}, False),
    "candidate-minus-inf-where-reference-is-finite": (None, None, {(1, 2): -INF}, False),
    "candidate-minus-inf-where-reference-is-inf": ({(0, 0): INF}, {(0, 0): INF}, {(0, 0): -INF}, False),
    "candidate-finite-where-reference-is-inf": ({(0, 0): INF}, {(0, 0): INF}, None, False),
    "candidate-nan-where-reference-is-inf": ({(0, 0): INF}, {(0, 0): INF}, {(0, 0): NAN}, False),
    "matched-inf-on-all-sides": ({(0, 0): INF}, {(0, 0): INF}, {(0, 0): INF}, True),
    "matched-minus-inf-on-all-sides": ({(3, 7): -INF}, {(3, 7): -INF}, {(3, 7): -INF}, True),
    "reference-nan-candidate-finite": ({(0, 0): NAN}, None, None, False),
    "nan-on-all-sides": ({(0, 0): NAN}, {(0, 0): NAN}, {(0, 0): NAN}, False),
    "baseline-inf-does-not-excuse": (None, {(2, 2): INF}, None, False),
    "baseline-minus-inf-does-not-excuse": (None, {(2, 2): -INF}, None, False),
    "baseline-nan-does-not-excuse": (None, {(2, 2): NAN}, None, False),
    "baseline-all-nan-does-not-excuse": (None, NAN, None, False),
    "baseline-inf-where-reference-is-minus-inf": ({(0, 0): -INF}, {(0, 0): INF}, {(0, 0): -INF}, False),
    "candidate-inf-where-reference-is-minus-inf": ({(0, 0): -INF}, {(0, 0): -INF}, {(0, 0): INF}, False),
    "candidate-inf-where-reference-is-nan": ({(0, 0): NAN}, {(0, 0): NAN}, {(0, 0): INF}, False),
    "candidate-and-reference-nan-baseline-finite": ({(0, 0): NAN}, None, {(0, 0): NAN}, False),
    "candidate-and-baseline-nan-reference-finite": (None, {(0, 0): NAN}, {(0, 0): NAN}, False),
    "infinities-at-other-positions": ({(0, 0): INF}, {(0, 0): INF}, {(0, 1): INF}, False),
}


def table_failures(report) -> str:
    return "\n".join(line for line in report.to_table().splitlines() if "FAIL: " in line)


def count(values) -> int:
    return int(np.sum(~np.isfinite(with_values(0.0, values))))


@pytest.mark.parametrize("case", list(NONFINITE_CASES), ids=list(NONFINITE_CASES))
def test_non_finite_values_never_pass_unless_they_match_and_never_read_as_error_0(case, tmp_path):
    ref_v, base_v, cand_v, passes = NONFINITE_CASES[case]
    report = check_parity(const_model(with_values(1.5 * STEP, cand_v)),
                          reference_onnx=const_model(with_values(0.0, ref_v)),
                          baseline_onnx=const_model(with_values(STEP, base_v)),
                          backends=("reference",), tolerances=(0.0, 0.0))
    row = row_of(report)
    base = report.baselines[0]["outputs"][0]
    assert row["passed"] is passes and report.passed is passes, report.to_table()
    assert row["nonfinite"]["candidate"] == count(cand_v) and row["nonfinite"]["reference"] == count(ref_v)
    assert base["nonfinite"]["candidate"] == count(base_v) and base["nonfinite"]["reference"] == count(ref_v)
    has_nan = any(isinstance(v, float) and np.isnan(v) or isinstance(v, dict) and any(np.isnan(x) for x in v.values())
                  for v in (ref_v, cand_v))
    if passes:
        assert row["within_baseline"] is True and row["max_abs"] == pytest.approx(1.5 * STEP, rel=1e-3)
        assert row["nonfinite"]["mismatched"] == 0
    elif row["nonfinite"]["mismatched"]:
        assert row["within_baseline"] is False and row["failure"] in table_failures(report)
        # The error is never read as 0 or as the finite part alone: NaN when a NaN is anywhere, inf otherwise.
        assert np.isnan(row["max_abs"]) if has_nan else np.isinf(row["max_abs"])
        assert ("NaN" in row["failure"]) is has_nan
    else:
        # The candidate itself is clean: its baseline, whose output overflowed or is NaN, cannot excuse it.
        assert row["within_baseline"] is False and "baseline cannot excuse" in row["failure"]
        assert not np.isfinite(base["max_abs"]) and base["within_tolerance"] is False
    table = report.to_table()
    assert ("overall: PASS" in table) is passes
    data = report.to_dict()
    text = report.to_json(tmp_path / "r.json")

    def refuse(token):
        raise AssertionError(f"strict JSON has no {token}: non-finite numbers must be written as strings")

    assert json.loads(text, parse_constant=refuse) == data
    if has_nan:
        assert data["comparisons"][0]["outputs"][0]["max_abs"] == "nan"


def test_a_nan_baseline_shows_as_nan_and_a_candidate_within_tolerance_still_passes():
    report = check_parity(const_model(with_values(0.0, None)), reference_onnx=const_model(with_values(0.0, None)),
                          baseline_onnx=const_model(with_values(0.0, {(0, 1): NAN})), backends=("reference",))
    row, base = row_of(report), report.baselines[0]["outputs"][0]
    assert row["within_tolerance"] and row["passed"] and row["within_baseline"] is False
    assert np.isnan(base["max_abs"]) and base["within_tolerance"] is False and base["nonfinite"]["candidate"] == 1


def test_per_layer_intermediate_nan_is_reported_not_zeroed():
    # t = x + c holds a NaN in the candidate only; y = Where(IsNaN(t), x + 0.5, t) hides it from the graph output.
    def model(c):
        nodes = [h.make_node("Add", ["x", "c"], ["t"], name="add"), h.make_node("Add", ["x", "half"], ["t2"]),
                 h.make_node("IsNaN", ["t"], ["bad"]), h.make_node("Where", ["bad", "t2", "t"], ["y"])]
        inits = [onnx.numpy_helper.from_array(np.asarray(c, dtype=np.float32), "c"),
                 onnx.numpy_helper.from_array(np.array(0.5, dtype=np.float32), "half")]
        graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, SHAPE)],
                             [h.make_tensor_value_info("y", T.FLOAT, SHAPE)], initializer=inits)
        return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])

    report = check_parity(model(with_values(0.0, {(1, 1): NAN})), reference_onnx=model(with_values(0.0, None)),
                          backends=("reference",), per_layer=True)
    t, y = row_of(report, output="t"), row_of(report, output="y")
    assert y["passed"] and y["max_abs"] == 0
    assert not t["passed"] and np.isnan(t["max_abs"]) and t["nonfinite"] == {"candidate": 1, "reference": 0,
                                                                             "mismatched": 1}
    assert not report.passed
