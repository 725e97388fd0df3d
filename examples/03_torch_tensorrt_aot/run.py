"""Example 03: ahead-of-time Torch-TensorRT: compile, save/load, and a standalone engine for trtexec.

The seed Net and an EfficientNet-style block (per-channel swish bias, dynamic batch 1..16) are compiled with
torch_tensorrt.compile(ir="dynamo"); the swish op becomes the SwishBias plugin. Each compiled module is saved and
loaded back, and a serialized engine is written with the trtexec line that runs it. Where Torch-TensorRT,
TensorRT, a GPU or the plugin library is missing, it prints why and exits 0.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch

import torchtrt_swish as ts
from torchtrt_swish import compile as ttc
from torchtrt_swish.dtypes import tolerance

#: What this example prints (and exits 0 with) where Torch-TensorRT / TensorRT / a GPU is missing.
SKIP_PREFIX = "skipped: Torch-TensorRT/TensorRT not available"
EfficientBlock = ts.EfficientBlock


def models() -> list[dict]:
    """Models of this example: name, module, example inputs, dynamic_shapes, dtype, swish nodes, batches to run."""
    torch.manual_seed(0)
    seed_x = torch.arange(25, dtype=torch.float32).view(1, 1, 5, 5) / 12.5 - 1.0
    return [
        dict(name="seed_net_fp32", model=ts.Net().eval(), inputs=(seed_x,), dynamic_shapes=None,
             dtype=torch.float32, swish_nodes=1, batches=(1,)),
        dict(name="efficient_block_fp32_dynamic", model=EfficientBlock().eval(),
             inputs=(torch.randn(4, 3, 16, 16),), dynamic_shapes=[{0: (1, 4, 16)}], dtype=torch.float32,
             swish_nodes=2, batches=(1, 4, 16)),
        dict(name="efficient_block_fp16_dynamic", model=EfficientBlock().eval(),
             inputs=(torch.randn(4, 3, 16, 16),), dynamic_shapes=[{0: (1, 4, 16)}], dtype=torch.float16,
             swish_nodes=2, batches=(2, 8)),
    ]


def _compare(name: str, model: torch.nn.Module, trt_model: torch.nn.Module, case: dict) -> int:
    atol, rtol = tolerance(case["dtype"])
    failures = 0
    for batch in case["batches"]:
        x = case["inputs"][0]
        x = x.new_empty((batch, *x.shape[1:])).normal_().to(device="cuda", dtype=case["dtype"])
        with torch.no_grad():
            ref, out = model(x), trt_model(x)
        err = (out.float() - ref.float()).abs().max().item()
        ok = torch.allclose(out.float(), ref.float(), atol=atol, rtol=rtol)
        failures += not ok
        print(f"{name}: batch {batch}: max |TensorRT - PyTorch| = {err:.3g} {'ok' if ok else 'MISMATCH'}")
    return failures


def main(argv: list[str] | None = None) -> int:
    """Compile, check, save/load and export an engine for each model; 1 on any mismatch."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=None, help="where to write .ep and .engine files (temp dir)")
    args = parser.parse_args(argv)
    reason = ttc.unavailable_reason()
    if reason is not None:
        print(f"{SKIP_PREFIX} ({reason})")
        return 0
    # PyTorch is the reference here: keep TF32 out of its fp32 convolutions (and out of TensorRT's).
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    out = args.out or Path(tempfile.mkdtemp(prefix="torchtrt_swish_03_"))
    failures = 0
    for case in models():
        name, dtype = case["name"], case["dtype"]
        model = case["model"].to(device="cuda", dtype=dtype)
        trt_model = ttc.compile(model, case["inputs"], dtype=dtype, dynamic_shapes=case["dynamic_shapes"],
                                disable_tf32=True)
        failures += _compare(f"{name} compiled", model, trt_model, case)

        saved = ttc.save(trt_model, out / f"{name}.ep")
        failures += _compare(f"{name} loaded from {saved.name}", model, ttc.load(saved), case)

        ttc.export_engine(model, case["inputs"], out / f"{name}.engine", dtype=dtype,
                          dynamic_shapes=case["dynamic_shapes"])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
