"""The GPU forward's accuracy over every input, beside eager `F.silu(x) + b` and `torch.compile` of it.

For each dtype (float16 and bfloat16: all 2^16 bit patterns; float32: all 2^32) and each variant (the op, eager,
compile), with bias -0.0 so that y is silu(x) itself:
  max ulp     the largest error against fp64 PyTorch, in ulps of the exact value in the output dtype, |x| <= FLUSH
  beyond      how many inputs miss the op's test tolerance there (tests/samples.py: half an output ulp plus 6 fp32
              eps of |silu|)
  != eager    how many outputs differ from eager F.silu(x) + b bit for bit, every input (any NaN equals any NaN)
Past FLUSH float32 exp(-x) overflows in F.silu itself: those inputs count in `!= eager` only.

Usage (a GPU): python tools/gpu_accuracy.py [--log2-chunk 27] [--dtypes float16,bfloat16,float32] [--device cuda]
  seconds on an H200; tests/test_gpu_accuracy.py checks its verdicts on the CPU.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import torchtrt_swish  # noqa: E402
from samples import tolerance  # noqa: E402  (the op's test tolerance, defined once)
from tools.cpu_accuracy import FLUSH  # noqa: E402

BITS = {torch.float16: (torch.int16, 10), torch.bfloat16: (torch.int16, 7), torch.float32: (torch.int32, 23)}


def silu_plus(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """What a user writes without the op."""
    return F.silu(x) + b


def inputs(dt: torch.dtype, start: int, stop: int, device: str | torch.device = "cpu") -> torch.Tensor:
    """The values of dt whose bit patterns, read as signed integers, run from start to stop."""
    return torch.arange(start, stop, dtype=torch.int64, device=device).to(BITS[dt][0]).view(dt)


def measure(x: torch.Tensor, variants: dict, acc: dict) -> None:
    """Fold one chunk of inputs into acc: {variant: [max ulp, its x, beyond, != eager]}."""
    dt = x.dtype
    ibits, mant = BITS[dt]
    fi = torch.finfo(dt)
    b = torch.tensor([-0.0], device=x.device, dtype=dt)
    xd = x.double()
    exact = xd * torch.sigmoid(xd)
    inside = x.abs() <= FLUSH
    tol = tolerance(x, b, dt, x.device)
    _, e = torch.frexp(exact.abs())
    exponent = torch.clamp(e - 1, min=int(math.log2(fi.smallest_normal)))  # floor(log2 |silu|), normal range
    ulp = torch.ldexp(torch.ones_like(exact), (exponent - mant).to(torch.int64))
    ys = {name: fn(x, b) for name, fn in variants.items()}
    eager = ys["eager"]
    for name, y in ys.items():
        err = torch.where(inside, (y.double() - exact).abs(), torch.zeros_like(xd))
        in_ulps = err / ulp
        i = int(in_ulps.argmax())
        same = (y.view(ibits) == eager.view(ibits)) | (y.isnan() & eager.isnan())
        a = acc.setdefault(name, [0.0, 0.0, 0, 0])
        if float(in_ulps[i]) > a[0]:
            a[0], a[1] = float(in_ulps[i]), float(x[i])
        a[2] += int(((err > tol) | err.isnan()).sum())  # a NaN where silu is finite is beyond any tolerance
        a[3] += int((~same).sum())


def main(argv: list[str] | None = None) -> int:
    """Sweep every input of each dtype; print one line per dtype and variant."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log2-chunk", type=int, default=27)
    ap.add_argument("--dtypes", default="float16,bfloat16,float32")
    ap.add_argument("--device", default="cuda", help="cpu: the CPU op instead, for a smoke run")
    args = ap.parse_args(argv)
    variants = {"op": torchtrt_swish.swish, "eager": silu_plus, "compile": torch.compile(silu_plus, dynamic=False)}
    where = torch.cuda.get_device_name() if args.device == "cuda" else args.device
    print(f"torch {torch.__version__}, {where}")
    for dt in (getattr(torch, name) for name in args.dtypes.split(",")):
        lo, hi = -(1 << (torch.finfo(dt).bits - 1)), 1 << (torch.finfo(dt).bits - 1)
        chunk = min(1 << args.log2_chunk, hi - lo)
        acc: dict = {}
        for start in range(lo, hi, chunk):
            measure(inputs(dt, start, start + chunk, args.device), variants, acc)
        for name, (worst, at, beyond, differ) in acc.items():
            print(f"{str(dt)[6:]:9} {name:8} max {worst:6.3f} ulp at x = {at!r:24} beyond tolerance {beyond:>10}"
                  f"   != eager {differ:>10} of {hi - lo}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
