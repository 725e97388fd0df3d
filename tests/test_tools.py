"""The analysis tools under tools/ that compare the two swish variants of a network, run on the CPU at smoke sizes
(the H200 runs them at full size through tools/device_gpu_check.sh)."""
from __future__ import annotations

import re

import pytest

from benchmarks import networks
from tools import host_ops


def test_host_ops_finds_the_op_in_ours_only(capsys):
    """One eager training step of RegNetY (smoke size): both variants are profiled, and the differences list our op
    with one forward call per replaced SiLU, which plain never makes, and plain's silu as many times fewer."""
    _, swaps = networks.build_variants(networks.NETWORKS["regnet_y_400mf"], "cpu", True)
    assert host_ops.main(["--device", "cpu", "--batch", "2", "--steps", "1", "--top", "40"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^plain: self-CPU [\d.]+ ms per step", out, re.M), out
    assert re.search(r"^ours: self-CPU [\d.]+ ms per step", out, re.M), out
    diff = out.split("largest self-CPU differences per step:")[1]
    assert re.search(rf"\+{swaps} calls  torchtrt_swish::swish$", diff, re.M), diff
    assert re.search(rf"-{swaps} calls  aten::silu$", diff, re.M), diff


@pytest.mark.parametrize("argv, message", [
    (["--graphs"], "--graphs needs --compile"),
    (["--device", "cpu", "--kernels"], "--kernels needs --device cuda, got --device cpu"),
    (["--batch", "0"], "--batch, --steps and --top must be >= 1, got 0"),
])
def test_host_ops_rejects_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        host_ops.main(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err
