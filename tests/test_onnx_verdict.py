"""The verdict rules of `check`: the baseline factor, and non-finite values on every side of a comparison."""
from __future__ import annotations

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
