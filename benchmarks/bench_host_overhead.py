"""Host time of one eager call: our op against ``F.silu(x) + b``, forward alone and forward + backward.

Tiny tensors (16 elements by default) make the kernels negligible, so what is timed is the host path: Python
wrapper, dispatcher, autograd graph construction and the backward engine. Each number is the median over rounds of
the mean time per call of a round of back-to-back calls; both variants run alternately in the same process. On the
CPU the clock is the calling thread's CPU time (the CPU backward runs on the calling thread), so other processes on
a shared machine do not inflate it; on CUDA it is wall time with a synchronize around each round.

Usage: python benchmarks/bench_host_overhead.py [--device cpu|cuda] [--numel 16] [--calls 2000] [--rounds 15]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torchtrt_swish  # noqa: E402


def plain(x, b):
    """The PyTorch formula users would otherwise write."""
    return F.silu(x) + b


def ours(x, b):
    """The op through its public wrapper."""
    return torchtrt_swish.swish(x, b)


def _round_us(step, calls: int, sync, clock) -> float:
    sync()
    t0 = clock()
    for _ in range(calls):
        step()
    sync()
    return (clock() - t0) / calls * 1e6


def measure(device: str, numel: int, calls: int, rounds: int) -> dict[str, dict[str, float]]:
    """{case: {variant: median µs per call}} for the forward (grad off / grad on) and forward + backward."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    clock = time.perf_counter if device == "cuda" else time.thread_time
    x = torch.randn(numel, device=device, requires_grad=True)
    b = torch.zeros(1, device=device, requires_grad=True)
    xs, bs = x.detach(), b.detach()
    fns = {"F.silu(x)+b": plain, "torchtrt_swish.swish": ours}

    def fwd_nograd(fn):
        return lambda: fn(xs, bs)

    def fwd_grad(fn):
        return lambda: fn(x, b)

    def fwd_bwd(fn):
        return lambda: torch.autograd.grad(fn(x, b).sum(), (x, b))

    cases = {"forward, no input requires grad": fwd_nograd, "forward, inputs require grad": fwd_grad,
             "forward + backward": fwd_bwd}
    out: dict[str, dict[str, float]] = {}
    for case, make in cases.items():
        steps = {name: make(fn) for name, fn in fns.items()}
        for step in steps.values():  # warm-up
            _round_us(step, max(calls // 10, 10), sync, clock)
        times: dict[str, list[float]] = {name: [] for name in steps}
        for _ in range(rounds):
            for name, step in steps.items():
                times[name].append(_round_us(step, calls, sync, clock))
        out[case] = {name: statistics.median(ts) for name, ts in times.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    """Print a table of host times (µs per call) and the ratio ours / plain."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--numel", type=int, default=16)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=15)
    a = p.parse_args(argv)
    if a.numel < 1 or a.calls < 1 or a.rounds < 1:
        p.error(f"--numel, --calls and --rounds must be >= 1, got {a.numel}, {a.calls}, {a.rounds}")
    res = measure(a.device, a.numel, a.calls, a.rounds)
    print(f"torch {torch.__version__}, device {a.device}, {a.numel} elements, {torch.get_num_threads()} threads; "
          f"median of {a.rounds} rounds of {a.calls} calls")
    print(f"| case | F.silu(x)+b µs | torchtrt_swish.swish µs | ours / plain |")
    print("|---|---|---|---|")
    for case, r in res.items():
        pl, ou = r["F.silu(x)+b"], r["torchtrt_swish.swish"]
        print(f"| {case} | {pl:.2f} | {ou:.2f} | {ou / pl:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
