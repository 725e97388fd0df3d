"""The CPU kernels' fp32 sigmoid, swish and swish gradient against fp64, for the kernel copy ATen picks.

Measured, per input x (float32, NaN excluded):
  sigmoid   _C.cpu_sigmoid(x), in ulps of the exact value (ulp of a subnormal: 2^-149), |x| <= FLUSH
  silu      swish(x, -0.0) = silu(x) itself, in ulps, |x| <= FLUSH
  grad      dx of swish_backward(1, x, 0) = f'(x), |error| in units of 2^-24 (f' crosses zero: no ulps), |x| <= FLUSH
  same bits where |x| > FLUSH or x is not finite: swish equals F.silu(x) + b and dx aten's silu_backward, bit for
            bit (signed zeros included, any NaN for NaN): past FLUSH float32 exp(-x) overflows in F.silu (sigmoid 0)

Usage: [ATEN_CPU_CAPABILITY=default|avx2|avx512] python tools/cpu_accuracy.py [--log2-chunk 22]
  sweeps all 2^32 float32 bit patterns and prints the maxima and where they occur (minutes per copy);
  tests/test_cpu_accuracy.py checks the bounds of docs/performance-notes.md on every exponent with `sample()`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torchtrt_swish  # noqa: E402
from torchtrt_swish import _C  # noqa: E402

# The largest x whose float32 exp(x) is finite (0x42b17217): the kernels' flush bound.
FLUSH = 88.72283172607421875
KEYS = ("sigmoid", "silu", "grad")


def sample(per_exponent: int = 512, seed: int = 0) -> torch.Tensor:
    """float32 inputs: every sign and biased exponent (0: subnormals) with mantissas 0, 1, all ones and random ones;
    every float32 in the saturation edges [16, 18] (sigmoid rounds to 1), [87, 89] (exp(-|x|) subnormal, then the
    flush at FLUSH) and their negatives; infinities and NaN."""
    gen = np.random.default_rng(seed)
    exps = np.arange(255, dtype=np.uint32) << 23
    mant = np.concatenate([[0, 1, (1 << 23) - 1], gen.integers(0, 1 << 23, per_exponent, dtype=np.uint32)])
    bits = (exps[:, None] | mant[None, :].astype(np.uint32)).reshape(-1)
    parts = [bits.view(np.float32)]
    for lo, hi in ((16.0, 18.0), (87.0, 89.0)):
        a, b = np.array([lo, hi], dtype=np.float32).view(np.uint32)
        parts.append(np.arange(a, b + 1, dtype=np.uint32).view(np.float32))
    x = np.concatenate(parts)
    x = np.concatenate([x, -x, np.array([np.inf, -np.inf, np.nan], dtype=np.float32)])
    return torch.from_numpy(x)


def _ulp(v: torch.Tensor) -> torch.Tensor:
    """The float32 ulp at the fp64 value v (2^-149 below the normal range), from v's exponent bits."""
    e = ((v.numpy().view(np.int64) >> 52) & 0x7FF) - 1023  # floor(log2 |v|)
    return torch.from_numpy(((np.maximum(e, -126) - 23 + 1023) << 52).view(np.float64))


def measure(x: torch.Tensor) -> dict[str, tuple[float, float]]:
    """{key: (max error, x where it occurs)} for KEYS over |x| <= FLUSH, and 'same_bits': (how many of the other
    inputs differ from F.silu / silu_backward, the first of them)."""
    inside = x.abs() <= FLUSH
    out = {k: (0.0, 0.0) for k in KEYS}
    xi = x[inside]
    if xi.numel():
        xd = xi.double()
        s_ref = torch.sigmoid(xd)
        sig = np.empty(xi.numel(), dtype=np.float32)
        _C.cpu_sigmoid(xi.numpy(), sig)
        y = torchtrt_swish.swish(xi, torch.tensor([-0.0]))
        dx, _ = torch.ops.torchtrt_swish.swish_backward(torch.ones_like(xi), xi, torch.zeros(1))
        silu_ref = xd * s_ref
        errs = {
            "sigmoid": (torch.from_numpy(sig).double() - s_ref).abs() / _ulp(s_ref),
            "silu": (y.double() - silu_ref).abs() / _ulp(silu_ref),
            "grad": (dx.double() - s_ref * (1 + xd * (1 - s_ref))).abs() / 2.0**-24,
        }
        for k, e in errs.items():
            i = int(e.argmax())
            out[k] = (float(e[i]), float(xi[i]))
    xr = x[~inside]
    bad = torch.zeros(xr.numel(), dtype=torch.bool)
    got_want = ((torchtrt_swish.swish(xr, torch.tensor([-0.0])), F.silu(xr) + torch.tensor([-0.0])),
                (torch.ops.torchtrt_swish.swish_backward(torch.ones_like(xr), xr, torch.zeros(1))[0],
                 torch.ops.aten.silu_backward(torch.ones_like(xr), xr)))
    for got, want in got_want:
        bad |= ~((got.view(torch.int32) == want.view(torch.int32)) | (got.isnan() & want.isnan()))
    out["same_bits"] = (float(bad.sum()), float(xr[bad][0]) if bad.any() else 0.0)
    return out


def merge(a: dict, b: dict) -> dict:
    """The worse of two measure() results per key (mismatch counts add up)."""
    out = {}
    for k in a:
        if k == "same_bits":
            out[k] = (a[k][0] + b[k][0], a[k][1] if a[k][0] else b[k][1])
        else:
            out[k] = max(a[k], b[k], key=lambda t: t[0])
    return out


def main(argv: list[str] | None = None) -> int:
    """Sweep every float32 input; print the maxima (exit 0)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log2-chunk", type=int, default=22)
    args = ap.parse_args(argv)
    chunk = 1 << args.log2_chunk
    total = None
    for lo in range(-(1 << 31), 1 << 31, chunk):
        r = measure(torch.arange(lo, lo + chunk, dtype=torch.int64).to(torch.int32).view(torch.float32))
        total = r if total is None else merge(total, r)
    print(f"kernels {_C.cpu_kernels()}: every float32 input (NaNs for the same-bits check only)")
    for k in KEYS:
        unit = "units of 2^-24" if k == "grad" else "ulp"
        print(f"  {k}: max {total[k][0]:.3f} {unit} at x = {total[k][1]!r}")
    print(f"  outside |x| <= {FLUSH}: {int(total['same_bits'][0])} inputs differ from F.silu / silu_backward")
    return 0


if __name__ == "__main__":
    sys.exit(main())
