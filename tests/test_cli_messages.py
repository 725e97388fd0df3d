"""Messages of torchtrt-swish that point to the cause: other weights, the numbers behind the verdict."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from onnx_path.cli import EXIT_OK, EXIT_PARITY_FAIL, main
from torchtrt_swish.dtypes import BASELINE_FACTOR, TOLERANCES


@pytest.fixture(scope="module")
def seed_onnx(tmp_path_factory):
    path = tmp_path_factory.mktemp("messages") / "seed.onnx"
    assert main(["export", "-o", str(path)]) == EXIT_OK
    return path


def other_weights(seed_onnx, tmp_path, delta: float):
    model = onnx.load(seed_onnx)
    conv = next(n for n in model.graph.node if n.op_type == "Conv")
    init = next(t for t in model.graph.initializer if t.name == conv.input[1])
    weight = onnx.numpy_helper.to_array(init) + np.float32(delta)
    init.CopyFrom(onnx.numpy_helper.from_array(weight.astype(np.float32), init.name))
    path = tmp_path / "other.onnx"
    onnx.save(model, path)
    return path


HINT = "may come from other weights"


def test_a_wide_failure_with_a_passing_baseline_suggests_other_weights(seed_onnx, tmp_path, capsys):
    js = tmp_path / "p.json"
    assert main(["check", str(other_weights(seed_onnx, tmp_path, 0.5)), "--torch-model", "seed-net",
                 "--json", str(js)]) == EXIT_PARITY_FAIL
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if HINT in line]
    assert "--seed" in line and "--reference ORIGINAL.onnx" in line and "torchtrt-swish export" in line
    assert any(HINT in w for w in json.loads(js.read_text())["warnings"])


def test_a_near_miss_or_a_pass_gets_no_weights_hint(seed_onnx, tmp_path, capsys):
    # 1e-3 more in each weight: about 1e-2 off, outside atol 1e-4 and rtol 1e-3, but small against outputs of ~5.
    assert main(["check", str(other_weights(seed_onnx, tmp_path, 1e-3)), "--torch-model", "seed-net"]) == \
        EXIT_PARITY_FAIL
    assert HINT not in capsys.readouterr().out
    assert main(["check", str(seed_onnx), "--torch-model", "seed-net"]) == EXIT_OK
    assert HINT not in capsys.readouterr().out


def test_check_help_shows_the_numbers(capsys):
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"{BASELINE_FACTOR:g}x" in text
    for dtype, (atol, rtol) in TOLERANCES.items():
        assert f"{dtype} {atol:g}" in text and f"{dtype} {rtol:g}" in text, dtype
    assert "onnx_path.parity" not in text and "torchtrt_swish.dtypes" not in text
