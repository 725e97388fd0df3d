"""Swish-with-bias on the GPU: our op vs eager, torch.compile and a device-to-device copy (the bandwidth bound).

Every variant of the op is timed the same way: K calls captured in one CUDA graph, replayed R times between CUDA events;
the median per-call time is reported. Graphs take CPU launch overhead out on both sides, so small sizes compare
kernels, not Python. With --no-graph every variant is timed as K back-to-back eager calls instead (see time_loop):
at small sizes that measures the host launch path (Python, dispatcher or dynamo guards, launcher), the latency an
eager caller sees. The copy bound is always timed without a graph. Inputs are random normal data (never zeros), and
every variant's output is checked against an fp64 reference before it is timed.

Byte floors: forward reads x and writes y (2N elements); backward reads x and g and writes dx (3N elements), the
bias reduction re-reading nothing in a fused kernel. GB/s below are floor bytes over measured time.

Usage (on the H200): python benchmarks/bench_swish.py --out $OUT/bench.csv [--quick | --sizes 16,18,20]
    [--no-forward | --no-backward] [--no-graph] [--variants copy,ours,eager_formula,eager_silu,compile]
"""
from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torchtrt_swish  # noqa: E402
from benchmarks.rounds import round_orders  # noqa: E402

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def eager_formula(x, b):
    """The plain formula in eager PyTorch (three kernels)."""
    return x * torch.sigmoid(x) + b


def eager_silu(x, b):
    """F.silu plus an add (two kernels)."""
    return torch.nn.functional.silu(x) + b


# One compiled function serves every size, dtype and layout; dynamo recompiles per dtype / layout / grad mode
# (and goes dynamic on sizes). The default limit of 8 recompiles would silently fall back to *eager* for the
# rest of the grid, so it is raised: every "compile" number below is a compiled kernel.
for _name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit", "accumulated_cache_size_limit"):
    if hasattr(torch._dynamo.config, _name):
        setattr(torch._dynamo.config, _name, 4096)
if hasattr(torch._dynamo.config, "fail_on_recompile_limit_hit"):
    torch._dynamo.config.fail_on_recompile_limit_hit = True  # never time eager under the "compile" label
compiled_formula = torch.compile(eager_formula)


def capture_graph(fn, k: int, stream: torch.cuda.Stream | None = None) -> torch.cuda.CUDAGraph:
    """A CUDA graph of k calls of fn(), captured on stream after warm-up calls there, and replayed 3 times."""
    s = stream or torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(k):
            fn()
    for _ in range(3):
        g.replay()
    return g


#: GPU cycles of the wait queued ahead of a timed graph replay (about 0.1 ms on the H200), longer than the host takes
#: to submit the replay.
QUEUE_CYCLES = 200_000


def timed_round(body, calls: int, queued: bool = False) -> float:
    """Microseconds per call of one run of body() (which makes `calls` calls), between two CUDA events.

    queued: the start event and body() are submitted behind a GPU-side wait, so that the events time the GPU's work
    and not the host's submission of a graph replay (which otherwise lands in whichever variant comes first)."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    if queued:
        torch.cuda._sleep(QUEUE_CYCLES)
    start.record()
    body()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / calls


def time_graph(fn, k: int, reps: int, stream: torch.cuda.Stream | None = None) -> float:
    """Median microseconds per call of fn() over `reps` replays of a graph holding k calls, captured on stream."""
    return time_graphs_interleaved({"": fn}, k, reps, stream)[""]


def time_graphs_interleaved(fns: dict, k: int, reps: int, stream: torch.cuda.Stream | None = None) -> dict:
    """time_graph for several variants whose replays alternate round by round (round_orders), so that each meets the
    same state of the GPU (clocks, L2, DRAM refresh) and follows every other one equally often: in a fixed order the
    later variant read up to 1 % faster on rows that fit in L2. Returns name -> median microseconds per call."""
    graphs = {name: capture_graph(fn, k, stream) for name, fn in fns.items()}
    times: dict = {name: [] for name in fns}
    for order in round_orders(list(graphs), reps):
        for name in order:
            times[name].append(timed_round(graphs[name].replay, k, queued=True))
    del graphs
    return {name: statistics.median(v) for name, v in times.items()}


def time_loop(fn, k: int, reps: int) -> float:
    """Median microseconds per call of k back-to-back eager calls between events (no graph).

    Used for the copy bound: inside a CUDA graph a device-to-device copy becomes a memcpy node, which can run on
    a copy engine well below the SMs' copy bandwidth, so the graph number would flatter every other variant.
    """
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    return statistics.median(timed_round(lambda: calls(fn, k), k) for _ in range(reps))


def time_loops_interleaved(fns: dict, k: int, reps: int) -> dict:
    """time_loop for several variants whose rounds alternate (round_orders): host-bound rows drift with the machine's
    load, and interleaving gives every variant the same drift. Returns name -> median microseconds per call."""
    for fn in fns.values():
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    times: dict = {name: [] for name in fns}
    for order in round_orders(list(fns), reps):
        for name in order:
            times[name].append(timed_round(lambda fn=fns[name]: calls(fn, k), k))
    return {name: statistics.median(v) for name, v in times.items()}


def calls(fn, k: int) -> None:
    """k back-to-back calls of fn()."""
    for _ in range(k):
        fn()


def check(y: torch.Tensor, x: torch.Tensor, b: torch.Tensor, name: str) -> None:
    """Fail loudly if a variant computes something else (tolerance: a few output ulps)."""
    n = min(x.numel(), 1 << 20)
    xs = x.reshape(-1)[:n].double()
    bs = b.double().expand_as(x).reshape(-1)[:n]
    ref = xs * torch.sigmoid(xs) + bs
    err = (y.reshape(-1)[:n].double() - ref).abs()
    tol = 4 * torch.finfo(x.dtype).eps * (ref.abs() + bs.abs() + 1)
    if not bool((err <= tol).all()):
        raise SystemExit(f"{name}: wrong result, max err {err.max().item():.3e}")


def bench_forward(n: int, dtype: torch.dtype, layout: str, k: int, reps: int, keep: set[str],
                  graphs: bool = True) -> dict:
    """One row: forward of every variant at n elements."""
    c = 256
    x = torch.randn(n // c, c, device="cuda", dtype=dtype)
    b = (torch.randn(1, device="cuda", dtype=dtype) if layout == "scalar"
         else torch.randn(c, device="cuda", dtype=dtype))
    y = torch.empty_like(x)
    variants = {
        "copy": lambda: y.copy_(x),
        "ours": lambda: torchtrt_swish.swish(x, b),
        "eager_formula": lambda: eager_formula(x, b),
        "eager_silu": lambda: eager_silu(x, b),
        "compile": lambda: compiled_formula(x, b),
    }
    variants = {name: fn for name, fn in variants.items() if name in keep}
    for name in ("ours", "eager_silu", "compile"):
        if name in variants:
            check(variants[name](), x, b, name)
    row = {"pass": "fwd", "n": n, "dtype": str(dtype).removeprefix("torch."), "layout": layout}
    for name, fn in variants.items():
        row[f"{name}_us"] = time_graph(fn, k, reps) if graphs and name != "copy" else time_loop(fn, k, reps)
    floor_bytes = 2 * n * x.element_size()
    for name in variants:
        row[f"{name}_GBps"] = floor_bytes / row[f"{name}_us"] / 1e3
    return row


def bench_backward(n: int, dtype: torch.dtype, layout: str, k: int, reps: int, keep: set[str],
                   graphs: bool = True) -> dict:
    """One row: autograd backward (dx and dbias) of each variant at n elements."""
    c = 256
    # Autograd runs each backward node on the stream its forward ran on: build the graphs on the capture
    # stream, or the backward would touch the legacy default stream during capture.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        x = torch.randn(n // c, c, device="cuda", dtype=dtype, requires_grad=True)
        b = (torch.randn(1, device="cuda", dtype=dtype) if layout == "scalar"
             else torch.randn(c, device="cuda", dtype=dtype)).requires_grad_()
        gy = torch.randn_like(x)
        ys = {"ours": torchtrt_swish.swish, "eager_formula": eager_formula, "compile": compiled_formula}
        ys = {name: fn(x, b) for name, fn in ys.items() if name in keep}
        dst = torch.empty_like(x)
    variants = {}
    if "copy" in keep:
        variants["copy3"] = lambda: (dst.copy_(x), dst.copy_(gy))  # 4N bytes; scaled to 3N below
    for name, yv in ys.items():
        variants[name] = (lambda yv=yv: torch.autograd.grad(yv, (x, b), gy, retain_graph=True))
    row = {"pass": "bwd", "n": n, "dtype": str(dtype).removeprefix("torch."), "layout": layout}
    for name, fn in variants.items():
        if name == "copy3" or not graphs:
            with torch.cuda.stream(s):
                row[f"{name}_us"] = time_loop(fn, k, reps)
        else:
            row[f"{name}_us"] = time_graph(fn, k, reps, stream=s)
    if "copy3_us" in row:
        row["copy3_us"] *= 3 / 4  # a 3N-byte copy at the same bandwidth: the backward's byte floor time
    floor_bytes = 3 * n * x.element_size()
    for name in variants:
        row[f"{name}_GBps"] = floor_bytes / row[f"{name}_us"] / 1e3
    return row


def write_csv(rows: list[dict], out: Path, first=()) -> None:
    """Every row to out as CSV: the columns in `first`, then every other key sorted (a missing value is empty)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    keys = list(first) + sorted({k for r in rows for k in r} - set(first))
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def print_row(r: dict) -> None:
    """One table line (printed as soon as measured, so a cut-off run still reports)."""
    nan = float("nan")
    bound = r.get("copy_us", r.get("copy3_us", nan))
    compile_us = r.get("compile_us", nan)
    print(f"{r['pass']:4} 2^{r['n'].bit_length() - 1:<4} {r['dtype']:9} {r['layout']:11} {r['ours_us']:9.2f} "
          f"{r['ours_GBps']:7.0f} {bound / r['ours_us']:6.3f} {compile_us:10.2f} "
          f"{compile_us / r['ours_us']:8.2f} {r.get('eager_formula_us', nan):9.2f} {r.get('eager_silu_us', nan):9.2f}",
          flush=True)


def main() -> int:
    """Run the grid, print one table, write CSV."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("bench.csv"))
    ap.add_argument("--quick", action="store_true", help="fewer sizes (2^16, 2^20, 2^24, 2^28)")
    ap.add_argument("--sizes", type=str, default="", help="comma-separated log2 sizes, e.g. 16,18,20,28")
    ap.add_argument("--no-backward", action="store_true")
    ap.add_argument("--no-forward", action="store_true")
    ap.add_argument("--no-graph", action="store_true",
                    help="time every variant as back-to-back eager calls (host launch path included), not in graphs")
    ap.add_argument("--variants", type=str, default="copy,ours,eager_formula,eager_silu,compile",
                    help="comma-separated subset to time ('ours' is always timed)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_swish: needs a CUDA GPU")
        return 2
    keep = set(args.variants.split(",")) | {"ours"}
    exps = [16, 20, 24, 28] if args.quick else [16, 18, 20, 22, 24, 26, 28]
    if args.sizes:
        exps = [int(e) for e in args.sizes.split(",")]
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"{'eager back-to-back calls' if args.no_graph else 'CUDA graphs'}")
    rows = []
    hdr = (f"{'pass':4} {'n':>6} {'dtype':9} {'layout':11} {'ours us':>9} {'GB/s':>7} {'/copy':>6} "
           f"{'compile us':>10} {'cmp/ours':>8} {'eager us':>9} {'silu+b us':>9}")
    print(hdr, flush=True)
    for e in exps:
        n = 1 << e
        k, reps = (50, 30) if e <= 22 else (5, 15)
        for dname, dt in DTYPES.items():
            for layout in ("scalar", "per_channel"):
                if not args.no_forward:
                    rows.append(bench_forward(n, dt, layout, k, reps, keep, graphs=not args.no_graph))
                    print_row(rows[-1])
                if not args.no_backward:
                    rows.append(bench_backward(n, dt, layout, k, reps, keep, graphs=not args.no_graph))
                    print_row(rows[-1])
                torch.cuda.empty_cache()
    write_csv(rows, args.out, ("dtype", "layout", "n", "pass"))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
