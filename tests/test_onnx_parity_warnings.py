"""A normal `check` prints no third-party warning text: stderr carries the CLI's own lines only.

A graph whose intermediates hold inf and NaN (x / 0, then 0 * inf) makes NumPy warn inside the executors and inside
Polygraphy's statistics in a per-layer check; those values are evidence in the report, not text on stderr.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from onnx_path.parity import check_parity


def nonfinite_intermediates() -> onnx.ModelProto:
    nodes = [h.make_node("Sigmoid", ["x"], ["s"]), h.make_node("Mul", ["x", "s"], ["m"]),
             h.make_node("Div", ["m", "zero"], ["d"]),  # +-inf (and NaN where m is 0)
             h.make_node("Mul", ["zero", "d"], ["n"]),  # 0 * inf = NaN
             h.make_node("Max", ["m", "n"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["batch", 4])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["batch", 4])],
                         initializer=[nh.from_array(np.zeros(4, np.float32), "zero")])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def test_a_per_layer_check_prints_only_its_own_lines(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(nonfinite_intermediates(), path)
    code = "import sys; from onnx_path.cli import main; sys.exit(main(sys.argv[1:]))"
    for extra in ([], ["--per-layer"]):
        proc = subprocess.run([sys.executable, "-c", code, "check", str(path), "--reference", str(path), *extra],
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode in (0, 1), proc.stderr
        foreign = [line for line in proc.stderr.splitlines() if not line.startswith("[torchtrt-swish]")]
        assert not foreign, f"{extra}: third-party text on stderr: {foreign}"
        assert "nonfinite" in proc.stdout


def test_the_nonfinite_values_stay_evidence(recwarn):
    model = nonfinite_intermediates()
    feeds = [{"x": np.array([[0.0, 1.0, -2.0, 3.0]] * 2, np.float32)}]
    report = check_parity(model, reference_onnx=model, feeds=feeds, per_layer=True, backends=["reference", "ort"])
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in recwarn]
    rows = {(c["runner"], r["name"]): r for c in report.comparisons for r in c["outputs"]}
    # 'n' is NaN everywhere on both sides: never within tolerance, however equal the two look.
    assert rows[("onnx-reference+swish", "n")]["passed"] is False
