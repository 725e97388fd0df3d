"""Example 04: the seed network through the ONNX route.

seed Net -> ONNX (SwishBias node, TorchScript exporter) and the original material's TorchScript export format (a
generic plugin node with its parameters as a JSON string) -> graph surgery -> Polygraphy parity report against a
float64 PyTorch reference -> TensorRT engine where TensorRT is present (reported as skipped otherwise). Exit code 0
when every comparison passes.

The original material this project grew from exported its swish through a ``torch.autograd.Function`` whose
``symbolic`` wrote a generic plugin node (``custom::Plugin`` with the parameters as a JSON string attribute); no
runtime knows that node. This example exports the network that way too (``SeedNet``) and converts it with the
surgery. ``run_seed_demo(out_dir)`` writes the ONNX files, the surgery report and the parity report
(``parity_report.json``) into ``out_dir`` and returns the same content as a dict.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch

import torchtrt_swish
from onnx_path.functions import op_counts
from onnx_path.model_file import load_model, save_model
from onnx_path.engine import EngineBuildError, PluginNotFoundError, TensorRTUnavailable, build_engine, import_tensorrt
from onnx_path.export import export_onnx
from onnx_path.parity import check_parity, random_feeds
from onnx_path.surgery import convert_seed_nodes

SEED_BIAS = 3.15


class SeedSwishFunction(torch.autograd.Function):
    """The original material's TorchScript export format: its symbolic emits a generic plugin node with JSON info."""

    @staticmethod
    def forward(ctx, x, bias: float):
        """Compute with the package op (the seed had its own kernel here)."""
        return torchtrt_swish.swish(x, bias)

    @staticmethod
    def symbolic(g, x, bias: float):
        """The seed's ONNX node: a generic plugin node carrying its parameters as a JSON string."""
        node = g.op("custom::Plugin", x, name_s="Swish", info_s=json.dumps({"bias": bias, "version": "1"}))
        return node.setType(x.type())  # keeps the exporter's shape inference (and its warning) quiet


class SeedNet(torch.nn.Module):
    """torchtrt_swish.Net as the seed wrote it: the same conv, the swish through SeedSwishFunction."""

    def __init__(self, bias: float = SEED_BIAS):
        super().__init__()
        self.net = torchtrt_swish.Net(bias)
        self.bias = bias

    def forward(self, x):
        """conv -> seed-style swish."""
        return SeedSwishFunction.apply(self.net.conv(x), self.bias)


def export_seed_style(path: str | Path, example: torch.Tensor) -> Path:
    """Export SeedNet in the original material's format (TorchScript exporter, opset 11, generic plugin node)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the seed's autograd.Function traces with warnings; this *is* the legacy route
        model = export_onnx(SeedNet(), example, opset=11, check=False)
    return save_model(model, path)


def engine_step(onnx_path: Path, out_dir: Path, net, feeds) -> dict:
    """Build a TensorRT engine and compare it with the reference; 'skipped' with the reason where it cannot run."""
    try:
        import_tensorrt()
    except TensorRTUnavailable as exc:
        return {"status": "skipped", "reason": str(exc)}
    if not torch.cuda.is_available():
        return {"status": "skipped", "reason": "TensorRT is installed but no CUDA GPU is visible"}
    try:
        torchtrt_swish.plugin_library_path()
    except FileNotFoundError as exc:
        return {"status": "skipped", "reason": str(exc)}
    try:
        engine = build_engine(onnx_path, out_dir / "seed_net.engine")
    except (PluginNotFoundError, EngineBuildError) as exc:
        return {"status": "failed", "reason": str(exc)}
    report = check_parity(load_model(onnx_path), torch_model=net, feeds=feeds, engine_path=engine, backends=(),
                          model_name="seed_net.onnx (TensorRT)")
    return {"status": "built", "engine": str(engine), "parity": report.to_dict(), "table": report.to_table()}


def run_seed_demo(out_dir: str | Path, *, engine: bool = True, verbose: bool = False) -> dict:
    """Seed Net -> ONNX (direct and seed-style) -> surgery -> Polygraphy parity (+ engine); returns the report."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    net = torchtrt_swish.Net(SEED_BIAS).eval()
    example = torch.randn(1, 1, 5, 5)

    direct = export_onnx(net, example, out_dir / "seed_net.onnx")
    seed_path = export_seed_style(out_dir / "seed_net_original_format.onnx", example)
    converted, surgery = convert_seed_nodes(load_model(seed_path))
    save_model(converted, out_dir / "seed_net_converted.onnx")

    # std 3: the conv sums three inputs, so the swish sees values out to about +-20 (saturated sigmoid included).
    feeds = random_feeds(direct, batch=4, seed=0, count=2, scale=3.0)
    # The converted graph's baseline is the direct export: the same network in the same dtype, run by the same
    # executors (the direct export is the reference network itself, so it has no other baseline).
    reports = [
        check_parity(direct, torch_model=net, feeds=feeds, model_name="seed_net.onnx"),
        check_parity(converted, torch_model=net, feeds=feeds, model_name="seed_net_converted.onnx",
                     baseline_onnx=direct, baseline_name="seed_net.onnx"),
    ]
    result = {
        "artifacts": {p.stem: str(p) for p in sorted(out_dir.glob("*.onnx"))},
        "nodes": {"seed_net.onnx": dict(op_counts(direct)), "seed_net_converted.onnx": dict(op_counts(converted))},
        "surgery": surgery.to_dict(),
        "parity": [r.to_dict() for r in reports],
        "engine": engine_step(out_dir / "seed_net.onnx", out_dir, net, feeds) if engine
        else {"status": "skipped", "reason": "engine step disabled"},
    }
    result["passed"] = all(r.passed for r in reports) and result["engine"]["status"] in ("skipped", "built") and (
        result["engine"]["status"] != "built" or result["engine"]["parity"]["passed"]
    )
    (out_dir / "parity_report.json").write_text(json.dumps(result, indent=2) + "\n")
    result["text"] = "\n\n".join(
        ["conversion of the original material's TorchScript export format (a generic plugin node with JSON "
         f"parameters) to SwishBias:\n{surgery.to_text()}"]
        + [f"{r.model}:\n{r.to_table()}" for r in reports]
        + [f"TensorRT engine: {result['engine']['status']}"
           + (f" ({result['engine']['reason']})" if "reason" in result["engine"] else "")
           + (f"\n{result['engine']['table']}" if "table" in result["engine"] else "")]
    )
    if verbose:
        print(result["text"])
    return result


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
