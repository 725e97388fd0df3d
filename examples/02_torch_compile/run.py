"""Example 02: the seed Net and an EfficientNet-style block through torch.compile(backend="tensorrt").

The swish op reaches TensorRT as the SwishBias plugin (converter registered on `import torchtrt_swish`). Where
Torch-TensorRT, TensorRT, a GPU or the plugin library is missing, it prints why and exits 0.
"""
from __future__ import annotations

import sys

import torch
from torch import nn

import torchtrt_swish as ts
from torchtrt_swish import compile as ttc

SKIP_PREFIX = "skipped: Torch-TensorRT/TensorRT not available"
TOLERANCE = {torch.float32: (1e-4, 1e-4), torch.float16: (1e-2, 1e-2), torch.bfloat16: (5e-2, 5e-2)}  # atol, rtol


class EfficientBlock(nn.Module):
    """EfficientNet-style block: conv-BN-swish, depthwise conv-BN-swish, 1x1 projection; per-channel swish bias."""

    def __init__(self, cin: int = 3, channels: int = 16, cout: int = 8):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(cin, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels))
        self.act1 = ts.EfficientSwish(bias_shape=(channels, 1, 1))
        self.dw = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1, groups=channels, bias=False),
                                nn.BatchNorm2d(channels))
        self.act2 = ts.EfficientSwish(bias_shape=(channels, 1, 1))
        self.project = nn.Conv2d(channels, cout, 1)
        with torch.no_grad():  # distinct per-channel biases, so a wrong channel index shows up in the outputs
            self.act1.bias.copy_(torch.linspace(-1.0, 1.0, channels).view(channels, 1, 1))
            self.act2.bias.copy_(torch.linspace(0.5, -0.5, channels).view(channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """stem -> swish -> depthwise -> swish -> project."""
        return self.project(self.act2(self.dw(self.act1(self.stem(x)))))


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
    failures = 0
    for case in models():
        dtype = case["dtype"]
        model = case["model"].to(device="cuda", dtype=dtype)
        fast = ttc.torch_compile(model, options={"pass_through_build_failures": True, "disable_tf32": True})
        atol, rtol = TOLERANCE[dtype]
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
