"""Example 02: the seed Net and an EfficientNet-style block through torch.compile(backend="tensorrt").

The swish op reaches TensorRT as the SwishBias plugin (converter registered on `import torchtrt_swish`). Where
Torch-TensorRT, TensorRT, a GPU or the plugin library is missing, it prints why and exits 0.
"""
from __future__ import annotations

import sys

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
        dict(name="seed Net fp32", model=ts.Net().eval(), inputs=(seed_x,), dynamic_shapes=None,
             dtype=torch.float32, swish_nodes=1, batches=(1,)),
        dict(name="EfficientBlock fp32, batch 1..16", model=EfficientBlock().eval(),
             inputs=(torch.randn(4, 3, 16, 16),), dynamic_shapes=[{0: (1, 16)}], dtype=torch.float32,
             swish_nodes=2, batches=(1, 4, 16)),
        dict(name="EfficientBlock fp16", model=EfficientBlock().eval(), inputs=(torch.randn(4, 3, 16, 16),),
             dynamic_shapes=None, dtype=torch.float16, swish_nodes=2, batches=(4,)),
    ]


def main() -> int:
    """Compile each model with torch.compile(backend="tensorrt") and compare with PyTorch; 1 on mismatch."""
    reason = ttc.unavailable_reason()
    if reason is not None:
        print(f"{SKIP_PREFIX} ({reason})")
        return 0
    # PyTorch is the reference here: keep TF32 out of its fp32 convolutions (and out of TensorRT's).
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    failures = 0
    for case in models():
        dtype = case["dtype"]
        model = case["model"].to(device="cuda", dtype=dtype)
        fast = ttc.torch_compile(model, options={"pass_through_build_failures": True, "disable_tf32": True})
        atol, rtol = tolerance(dtype)
        for batch in case["batches"]:
            x = case["inputs"][0]
            x = x.new_empty((batch, *x.shape[1:])).normal_().to(device="cuda", dtype=dtype)
            with torch.no_grad():
                ref, out = model(x), fast(x)
            err = (out.float() - ref.float()).abs().max().item()
            ok = torch.allclose(out.float(), ref.float(), atol=atol, rtol=rtol)
            failures += not ok
            print(f"{case['name']}: batch {batch}: max |TensorRT - PyTorch| = {err:.3g} {'ok' if ok else 'MISMATCH'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
