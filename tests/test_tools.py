"""The analysis tools under tools/ that compare the two swish variants of a network, run on the CPU at smoke sizes
(the H200 runs them at full size through tools/device_gpu_check.sh), and the forward A/B's CUDA sources, compiled."""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import pytest
from tools_native import ROOT, cuda_root

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


@pytest.mark.parametrize("src", sorted((ROOT / "tools" / "ab_forward").glob("*.cu")), ids=lambda p: p.name)
def test_forward_ab_sources_compile(src, tmp_path):
    """tools/ab_forward's CUDA sources (the launcher behind ab_forward.py's ctypes, the per-graph-node timing) compile
    for sm_90 against the tree's swish_forward.cu, as the H200 scripts build them: no GPU needed to find them broken."""
    home = cuda_root()
    if home is None:
        pytest.skip("needs nvcc (the CUDA toolkit the build used)")
    cmd = [str(home / "bin" / "nvcc"), "-std=c++17", "-O3", "-arch=sm_90", "-c", "-Xcompiler", "-fPIC",
           f"-I{ROOT / 'csrc' / 'kernels'}", f"-I{ROOT / 'csrc'}", str(src), "-o", str(tmp_path / "out.o")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_forward_ab_starts_without_the_op():
    """tools/ab_forward/check.sh runs ab_forward.py --prewarm while the op is still building: the script must start
    with torchtrt_swish not importable (it imports the op only to time)."""
    code = ("import runpy, sys; sys.modules['torchtrt_swish'] = None; sys.argv = ['ab_forward.py', '--help']; "
            "runpy.run_path('tools/ab_forward/ab_forward.py', run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--prewarm" in proc.stdout


def test_forward_ab_size_cases_take_the_fp32_mib_asked_for():
    """ab_forward.py --sizes: a flat tensor and a [T, 1024] one per MiB value, each k MiB of fp32 x, so that a sweep
    crosses a size rule's switch where it means to (fwdSkipsL1: two fifths and two thirds of L2)."""
    spec = importlib.util.spec_from_file_location("ab_forward", ROOT / "tools" / "ab_forward" / "ab_forward.py")
    ab = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ab)
    cases = ab.size_cases("16,33")
    assert [c.name for c in cases] == ["flat_m16", "tok1024_m16", "flat_m33", "tok1024_m33"]
    assert [c.numel * 4 for c in cases] == [16 << 20, 16 << 20, 33 << 20, 33 << 20]
    assert [ab.spec_of(c) for c in cases] == [(1, 1), (1024, 1)] * 2
    assert ab.size_cases("") == []
