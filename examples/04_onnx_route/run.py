"""Example 04: the seed network through the ONNX route.

seed Net -> ONNX (SwishBias node, TorchScript exporter) and the original material's TorchScript export format (a
generic plugin node with its parameters as a JSON string) -> graph surgery -> Polygraphy parity report against a
float64 PyTorch reference -> TensorRT engine where TensorRT is present (reported as skipped otherwise). Exit code 0
when every comparison passes.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from onnx_path.demo import run_seed_demo


def main(argv: list[str] | None = None) -> int:
    """Run the demo, print its report, return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: a new temporary folder)")
    parser.add_argument("--no-engine", action="store_true", help="skip the TensorRT engine step")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="torchtrt_swish_04_"))
    result = run_seed_demo(out, engine=not args.no_engine)
    print(result["text"])
    print(f"\nartifacts and parity_report.json in {out}")
    print("RESULT:", "PASS" if result["passed"] else "FAIL")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
