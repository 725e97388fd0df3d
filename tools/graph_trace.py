"""Where a CUDA-graph replay of the forward spends its time: kernel durations and the gaps between kernels.

bench_swish.py reports time per call of K calls captured in one graph. This replays the same graphs under the
CUDA profiler (CUPTI, through torch.profiler) and splits that time into each kernel's own duration and the gap
from one kernel's end to the next one's start, for our op and for torch.compile, with their launch shapes
(grid, block, registers) as the profiler records them.

Usage (on the H200): python tools/graph_trace.py [--cases float32:per_channel:18,...] [--k 50] [--reps 10]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torchtrt_swish  # noqa: E402
from benchmarks.bench_swish import capture_graph, check, compiled_formula  # noqa: E402

DEFAULT_CASES = ("float32:scalar:16,float32:per_channel:16,float32:scalar:18,float32:per_channel:18,"
                 "float16:per_channel:18,bfloat16:per_channel:18,float16:per_channel:20")


def trace(fn, k: int, reps: int) -> list[dict]:
    """Kernel events (chrome-trace dicts, in start order) of `reps` replays of a graph holding k calls of fn."""
    g = capture_graph(fn, k)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            g.replay()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    return sorted(kernels, key=lambda e: e["ts"])


def summarize(kernels: list[dict], k: int) -> dict:
    """Median kernel duration, median gap to the next kernel within a replay, and the first kernel's shape."""
    durs = [e["dur"] for e in kernels]
    gaps = []
    for i in range(len(kernels) - 1):
        if (i + 1) % k:  # not across replays
            gaps.append(kernels[i + 1]["ts"] - (kernels[i]["ts"] + kernels[i]["dur"]))
    a = kernels[0].get("args", {})
    return {"n_kernels": len(kernels), "dur_us": statistics.median(durs), "gap_us": statistics.median(gaps),
            "period_us": statistics.median(kernels[i + 1]["ts"] - kernels[i]["ts"] for i in range(len(kernels) - 1)
                                           if (i + 1) % k),
            "grid": a.get("grid"), "block": a.get("block"), "regs": a.get("registers per thread"),
            "name": kernels[0]["name"][:60]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cases", default=DEFAULT_CASES)
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    for case in args.cases.split(","):
        dt_name, layout, e = case.split(":")
        dt = getattr(torch, dt_name)
        n = 1 << int(e)
        x = torch.randn(n // 256, 256, device="cuda", dtype=dt)
        b = torch.randn(1 if layout == "scalar" else 256, device="cuda", dtype=dt)
        variants = {"ours": lambda: torchtrt_swish.swish(x, b), "compile": lambda: compiled_formula(x, b)}
        for name, fn in variants.items():
            check(fn(), x, b, name)
            r = summarize(trace(fn, args.k, args.reps), args.k)
            print(f"2^{e} {dt_name:8} {layout:11} {name:7} kernels {r['n_kernels']:4} dur {r['dur_us']:.3f} "
                  f"gap {r['gap_us']:.3f} period {r['period_us']:.3f} grid {r['grid']} block {r['block']} "
                  f"regs {r['regs']} {r['name']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
