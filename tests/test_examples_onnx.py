"""Examples 04 and 05 run as a user would run them (subprocesses), and their reports say what they claim."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parents[1]


def run_example(folder: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "examples" / folder / "run.py"), *args], capture_output=True,
                          text=True, timeout=600, cwd=ROOT)


def test_example_04_onnx_route(tmp_path):
    proc = run_example("04_onnx_route", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "RESULT: PASS" in proc.stdout
    report = json.loads((tmp_path / "parity_report.json").read_text())
    assert report["passed"] is True
    assert [p["model"] for p in report["parity"]] == ["seed_net.onnx", "seed_net_converted.onnx"]
    assert all(c["passed"] for p in report["parity"] for c in p["comparisons"])
    assert report["surgery"]["replaced_by_kind"] == {"original-torchscript": 1}
    # The words a reader meets: the original material's format is named, not an internal code.
    assert "original material's TorchScript export format" in proc.stdout
    assert "seed 000" not in proc.stdout and "seed-000" not in proc.stdout
    for readme in (ROOT / "README.md", ROOT / "docs" / "onnx_route.md",
                   ROOT / "examples" / "04_onnx_route" / "README.md"):
        assert "the original material's TorchScript export format" in readme.read_text().replace("*", "")
    converted = report["parity"][1]
    assert converted["baseline_model"] == "seed_net.onnx" and converted["baselines"]
    assert report["engine"]["status"] in ("skipped", "built")
    if report["engine"]["status"] == "skipped":
        assert "TensorRT" in report["engine"]["reason"] and "TensorRT engine: skipped" in proc.stdout
    for name in ("seed_net.onnx", "seed_net_original_format.onnx", "seed_net_converted.onnx"):
        onnx.checker.check_model(onnx.load(tmp_path / name))


def test_example_05_fuse_third_party_model(tmp_path):
    proc = run_example("05_fuse_third_party_model", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "49 SiLU modules" in proc.stdout and "RESULT: PASS" in proc.stdout
    assert "fusing fused.onnx again: 0 replacement(s), nothing to do" in proc.stdout
    fuse = json.loads((tmp_path / "fuse_report.json").read_text())
    assert fuse["replaced_by_kind"] == {"sigmoid-mul": 49}
    assert fuse["nodes_before"] - fuse["nodes_after"] == 49
    (parity,) = json.loads((tmp_path / "parity_report.json").read_text())
    assert parity["passed"] and {c["runner"] for c in parity["comparisons"]} == {"onnx-reference+swish",
                                                                                   "onnxruntime+swish"}
    assert parity["baseline_model"] == "original.onnx"
    assert {c["runner"] for c in parity["baselines"]} == {"onnx-reference+swish [baseline]",
                                                          "onnxruntime+swish [baseline]"}
    fused = onnx.load(tmp_path / "fused.onnx")
    assert sum(n.op_type == "SwishBias" for n in fused.graph.node) == 49
