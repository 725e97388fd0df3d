"""Example 05: put SwishBias into a third-party model that never heard of it.

A torchvision EfficientNet-B0 (random weights, BatchNorm statistics set from one random batch) is exported to
ONNX, every SiLU (exported as Sigmoid + Mul) is fused into one SwishBias node by graph surgery, and the fused
graph is checked with Polygraphy against the float64 PyTorch model, on both CPU executors.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

from onnx_path.model_file import save_model
from onnx_path.export import export_onnx
from onnx_path.models import build_model
from onnx_path.parity import check_parity, random_feeds
from onnx_path.surgery import run_surgery


def main(argv: list[str] | None = None) -> int:
    """Export, fuse, check; print node counts and the parity table; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="torchvision:efficientnet_b0", help="torchvision:<name>")
    parser.add_argument("--exporter", choices=("torchscript", "dynamo"), default="torchscript")
    parser.add_argument("--input-size", type=int, default=64, help="square input size (default 64, CPU-friendly)")
    parser.add_argument("--per-layer", action="store_true", help="also compare every tensor with the unfused graph")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: a new temporary folder)")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="torchtrt_swish_05_"))
    out.mkdir(parents=True, exist_ok=True)

    start = time.perf_counter()
    model, example = build_model(args.model, seed=0, input_shape=(1, 3, args.input_size, args.input_size))
    silus = sum(isinstance(m, torch.nn.SiLU) for m in model.modules())
    original = export_onnx(model, example, out / "original.onnx", exporter=args.exporter, output_names=["logits"])
    fused, report = run_surgery(original)
    save_model(fused, out / "fused.onnx")
    (out / "fuse_report.json").write_text(json.dumps(report.to_dict(), indent=2) + "\n")

    before, after = report.counts_before, report.counts_after
    print(f"{args.model}: {silus} SiLU modules; exported with the {args.exporter} exporter")
    print(report.to_text(max_lines=3))
    print(f"nodes before/after: {report.nodes_before} -> {report.nodes_after} "
          f"(Sigmoid {before.get('Sigmoid', 0)} -> {after.get('Sigmoid', 0)}, "
          f"Mul {before.get('Mul', 0)} -> {after.get('Mul', 0)}, "
          f"SwishBias {after.get('torchtrt_swish::SwishBias', 0)})")

    again, second = run_surgery(fused)
    print(f"fusing fused.onnx again: {len(second.replaced)} replacement(s), nothing to do"
          if not second.replaced else f"fusing again replaced {len(second.replaced)} node(s): not idempotent")

    # Baseline: the unfused export, run by the same executors against the same float64 reference.
    feeds = random_feeds(fused, batch=2, seed=1)
    parity = check_parity(fused, torch_model=model, feeds=feeds, model_name=f"{args.model} (fused)",
                          baseline_onnx=original, baseline_name="original.onnx")
    print()
    print(parity.to_table())
    reports = [parity.to_dict()]
    passed = parity.passed and len(report.replaced) == silus and not second.replaced
    if args.per_layer:
        layer = check_parity(fused, reference_onnx=original, feeds=feeds, per_layer=True,
                             model_name=f"{args.model} (fused vs original, per layer)")
        print()
        print(layer.to_table())
        reports.append(layer.to_dict())
        passed = passed and layer.passed
    (out / "parity_report.json").write_text(json.dumps(reports, indent=2) + "\n")
    print(f"\nartifacts in {out} ({time.perf_counter() - start:.1f} s)")
    print("RESULT:", "PASS" if passed else "FAIL")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
