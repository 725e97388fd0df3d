"""Outputs with no elements: nothing is compared, and check says so.

Such an output passes (no element is outside the tolerances) with a note like the one an all-zero output gets, its
statistics are null in the JSON (never "nan"), every row counts the elements it compared, NumPy prints nothing, and
a model whose outputs all have no elements is 'nothing to compare' (exit 2).
"""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from onnx_path.cli import EXIT_OK, EXIT_USAGE, main
from onnx_path.verdict import error_stats, merge_stats


def silu_and_slices(outputs=("y", "z")) -> onnx.ModelProto:
    """x [batch, 4] -> y = x * Sigmoid(x); z = y[:, 0:0] (no elements) and w = y[:, 4:] (none either)."""
    nodes = [h.make_node("Sigmoid", ["x"], ["s"]), h.make_node("Mul", ["x", "s"], ["y"]),
             h.make_node("Slice", ["y", "zero", "zero", "one"], ["z"]),
             h.make_node("Slice", ["y", "four", "big", "one"], ["w"])]
    inits = [nh.from_array(np.array([v], np.int64), n) for n, v in (("zero", 0), ("one", 1), ("four", 4),
                                                                    ("big", 100))]
    shapes = {"y": ["batch", 4], "z": ["batch", 0], "w": ["batch", 0]}
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["batch", 4])],
                         [h.make_tensor_value_info(n, T.FLOAT, shapes[n]) for n in outputs], initializer=inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


@pytest.fixture
def fused_pair(tmp_path):
    def make(outputs):
        original, fused = tmp_path / "o.onnx", tmp_path / "o_swish.onnx"
        onnx.save(silu_and_slices(outputs), original)
        assert main(["fuse", str(original), "-o", str(fused)]) == EXIT_OK
        return original, fused
    return make


def run_check(args, capsys):
    """main(['check', *args]) with every warning recorded; (exit code, stdout, stderr, warnings)."""
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(["check", *args])
    out, err = capsys.readouterr()
    return code, out, err, [str(w.message) for w in caught]


def test_an_output_with_no_elements_beside_others_passes_with_a_note_and_null_statistics(fused_pair, tmp_path,
                                                                                         capsys):
    original, fused = fused_pair(("y", "z", "w"))
    report = tmp_path / "p.json"
    code, out, err, caught = run_check([str(fused), "--reference", str(original), "--iterations", "2", "--json",
                                        str(report)], capsys)
    assert code == EXIT_OK, err
    assert not [w for w in caught if "empty slice" in w] and "empty slice" not in err, (caught, err)
    text = report.read_text()
    assert '"nan"' not in text and "NaN" not in text
    data = json.loads(text)
    notes = [w for w in data["warnings"] if "has no elements" in w]
    assert notes == [f"output {n!r} of onnxruntime-original has no elements (shape 2x0): nothing was compared, so "
                     "its PASS says nothing" for n in ("z", "w")]
    for comp in data["comparisons"]:
        rows = {r["name"]: r for r in comp["outputs"]}
        assert set(rows["z"]) == set(rows["y"])  # one schema for every row
        assert rows["y"]["elements"] == 2 * 2 * 4 and rows["y"]["max_abs"] < 1e-6
        for name in ("z", "w"):
            row = rows[name]
            assert row["elements"] == 0 and row["passed"] and row["within_tolerance"] and row["failure"] == ""
            for key in ("max_abs", "max_rel", "mean_abs", "max_abs_finite", "baseline_max_abs", "within_baseline",
                        "reference_max_abs"):
                assert row[key] is None, (key, row)
    for comp in data["baselines"]:
        assert [r["max_abs"] for r in comp["outputs"] if r["name"] in ("z", "w")] == [None, None]
    table = [line for line in out.splitlines() if " z " in line]
    assert len(table) == 4 and all(" - " in line for line in table), table
    assert sum("PASS (no elements: nothing compared)" in line for line in table) == 2
    assert sum("baseline, no elements" in line for line in table) == 2


def test_outputs_that_all_have_no_elements_are_nothing_to_compare(fused_pair, tmp_path, capsys):
    original, fused = fused_pair(("z", "w"))
    report = tmp_path / "p.json"
    code, _, err, caught = run_check([str(fused), "--reference", str(original), "--json", str(report)], capsys)
    assert code == EXIT_USAGE and not report.exists()
    (line,) = [line for line in err.strip().splitlines() if not line.startswith("[torchtrt-swish]")]
    assert line.endswith("error: nothing to compare: every output has no elements on these inputs (z: 2x0, w: 2x0)")
    assert not [w for w in caught if "empty slice" in w]


def test_per_layer_mode_keeps_the_rows_of_empty_tensors_and_notes_only_graph_outputs(fused_pair, tmp_path, capsys):
    original, fused = fused_pair(("y", "z"))
    report = tmp_path / "p.json"
    code, _, err, _ = run_check([str(fused), "--reference", str(original), "--per-layer", "--json", str(report)],
                                capsys)
    assert code == EXIT_OK, err
    data = json.loads(report.read_text())
    assert [w for w in data["warnings"] if "has no elements" in w] == [
        "output 'z' of onnxruntime-original has no elements (shape 2x0): nothing was compared, so its PASS says "
        "nothing"]


def test_iterations_without_elements_add_nothing_to_the_others():
    empty, some = error_stats(np.zeros((2, 0)), np.zeros((2, 0))), error_stats([1.0, 2.0], [1.0, 2.5])
    assert empty["elements"] == 0 and empty["max_abs"] is None
    merged = merge_stats([empty, some, empty])
    assert merged["elements"] == 2 and merged["max_abs"] == 0.5 and merged["mean_abs"] == 0.25
    assert merge_stats([empty, empty])["max_abs"] is None
    # Other shapes are still a failure, not 'nothing compared'.
    mismatch = merge_stats([error_stats(np.zeros((2, 0)), np.zeros((2, 1)))])
    assert math.isinf(mismatch["max_abs"]) and mismatch["elements"] == 0 and "shape" in mismatch["failure"]
