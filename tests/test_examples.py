"""Numbered examples run as users run them (a subprocess each)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_example_01_seed_net_runs_and_gradcheck_passes():
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "01_seed_net" / "run.py")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gradcheck (fp64, seed input): PASSED" in proc.stdout
    assert "torch.compile(fullgraph=True) output matches eager" in proc.stdout
