"""The CPU op against ``F.silu(x) + b`` at 1, 2 and all threads: forward, and forward + backward.

Each number is the median wall time of one call over rounds; in every round the two variants run back to back in
turn (which goes first alternates), so a shared machine's load falls on both alike. Forward + backward is
``torch.autograd.grad`` of the output with respect to x and b for a fixed upstream gradient (dx and dbias).
Goal: ours >= aten (the speedup column >= 1) in every row.

Usage: python benchmarks/bench_cpu.py [--rounds 11] [--threads 1,2,all] [--cases NAME,...] [--warmup 2]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torchtrt_swish  # noqa: E402

# name: (x shape, bias shape, dtype). The NCHW case; the same in bf16; a transformer-like last-dim bias.
CASES = {
    "nchw_fp32": ((64, 64, 64, 64), (64, 1, 1), torch.float32),
    "nchw_bf16": ((64, 64, 64, 64), (64, 1, 1), torch.bfloat16),
    "lastdim_fp32": ((8192, 2048), (2048,), torch.float32),
}


def plain(x, b):
    """The PyTorch formula users would otherwise write (two passes: silu, then the add)."""
    return F.silu(x) + b


def ours(x, b):
    """The op through its public wrapper (one pass)."""
    return torchtrt_swish.swish(x, b)


VARIANTS = {"ours": ours, "aten": plain}


def _steps(fn, x, b, g):
    xs, bs = x.detach(), b.detach()
    return {
        "forward": lambda: fn(xs, bs),
        "forward+backward": lambda: torch.autograd.grad(fn(x, b), (x, b), g),
    }


def measure_case(shape, bshape, dtype, threads: int, rounds: int, warmup: int) -> dict[str, dict[str, float]]:
    """{mode: {variant: median ms}} for one case at one thread count."""
    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(shape, generator=gen) * 4).to(dtype).requires_grad_()
    b = torch.randn(bshape, generator=gen).to(dtype).requires_grad_()
    g = torch.randn(shape, generator=gen).to(dtype)
    # Same answer before timing anything (both round to dtype; aten rounds twice, hence the loose fp16/bf16 bound).
    tol = 1e-5 if dtype == torch.float32 else 2 * torch.finfo(dtype).eps
    torch.testing.assert_close(ours(x.detach(), b.detach()), plain(x.detach(), b.detach()), rtol=tol, atol=tol)
    out: dict[str, dict[str, float]] = {}
    for mode in ("forward", "forward+backward"):
        steps = {name: _steps(fn, x, b, g)[mode] for name, fn in VARIANTS.items()}
        for step in steps.values():
            for _ in range(warmup):
                step()
        times: dict[str, list[float]] = {name: [] for name in steps}
        order = list(steps)
        for r in range(rounds):
            for name in order if r % 2 == 0 else order[::-1]:
                t0 = time.perf_counter()
                steps[name]()
                times[name].append(time.perf_counter() - t0)
        out[mode] = {name: statistics.median(ts) * 1e3 for name, ts in times.items()}
    return out


def _thread_counts(spec: str) -> list[int]:
    cores = os.cpu_count() or 1
    counts = []
    for item in spec.split(","):
        n = cores if item.strip() == "all" else int(item)
        if n < 1:
            raise ValueError(f"--threads: expected positive counts or 'all', got {item!r}")
        if n not in counts:
            counts.append(n)
    return counts


def main(argv: list[str] | None = None) -> int:
    """Print the table; exit 0 (a missed goal is reported in the table and the last line, not as a failure)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", default="1,2,all")
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args(argv)
    try:
        counts = _thread_counts(args.threads)
        names = [c.strip() for c in args.cases.split(",")]
        unknown = [c for c in names if c not in CASES]
        if unknown or args.rounds < 1:
            raise ValueError(f"unknown case {unknown[0]!r} (known: {', '.join(CASES)})" if unknown
                             else f"--rounds: expected >= 1, got {args.rounds}")
    except ValueError as e:
        print(f"bench_cpu: {e}", file=sys.stderr)
        return 2
    print(f"torch {torch.__version__}, ATen CPU capability {torch.backends.cpu.get_cpu_capability()}, "
          f"{os.cpu_count()} cores, {torch.__config__.parallel_info().splitlines()[-1].strip()}; "
          f"op from {Path(torchtrt_swish.__file__).parent}; median of {args.rounds} rounds")
    print()
    print("| case | threads | mode | ours ms | aten ms | aten / ours |")
    print("|---|---|---|---|---|---|")
    missed = 0
    rows = 0
    for name in names:
        shape, bshape, dtype = CASES[name]
        for n in counts:
            res = measure_case(shape, bshape, dtype, n, args.rounds, args.warmup)
            for mode, t in res.items():
                speedup = t["aten"] / t["ours"]
                rows += 1
                missed += speedup < 1
                print(f"| {name} {list(shape)} bias {list(bshape)} | {n} | {mode} | {t['ours']:.2f} | "
                      f"{t['aten']:.2f} | {speedup:.2f}{'' if speedup >= 1 else ' (behind)'} |", flush=True)
    print()
    print(f"goal ours >= aten: met in {rows - missed} of {rows} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
