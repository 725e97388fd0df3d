"""Swish-with-bias on the tensors networks feed it: one row per layout, dtype and pass, against copy bandwidth,
eager `F.silu(x) + b` and `torch.compile` of it, in CUDA graphs and as back-to-back eager calls.

Layouts: NCHW conv activations with a per-channel bias [C, 1, 1] on dim 1 (C 16..2048, H*W 7x7..112x112), the same
tensors channels_last, transformer activations [tokens, D] with a [D] bias, a dim-1 bias [64, 1] over
[N/1024, 64, 16], and flat tensors with a scalar bias; 2^16..2^20 elements (launch-bound) and 2^24 and more
(bandwidth-bound).

Passes: `fwd` is y = f(x, b); `fwd+bwd` is that forward followed by `torch.autograd.grad(y, (x, b), gy)`, i.e. what
one training step spends on the activation (gy in the memory format of that variant's y, as the next layer's gradient
would be). Byte floors: the forward reads x and writes y (2N elements), the backward
reads x and gy and writes dx (3N; dbias is a reduction of gy that a fused kernel gets from the same read), so
forward + backward moves 5N elements. `copy us` is a device-to-device copy of x (2N elements) timed as back-to-back
calls without a graph (inside a graph a copy becomes a memcpy node on a copy engine, well below SM bandwidth); a
variant's `/floor` is the floor time (copy time, times 5/2 for fwd+bwd) over its time: 1.0 means it moves its bytes at
copy bandwidth.

Timing (bench_swish's helpers): `graph` rows capture k calls in one CUDA graph and report the median per-call time of
its replays, each submitted behind a GPU-side wait so that the host's submission is not timed; `eager` rows time k
back-to-back calls between CUDA events (host launch path included: what an eager caller waits for). In both the
variants' rounds are interleaved so that they share the machine's drift, in balanced orders (benchmarks/rounds.py:
each variant first, and right after every other one, equally often). Every variant's forward output is checked
against an fp64 reference first. Each row's variants run in the same process.

`torch.compile` is compiled per shape (dynamic=False), as a model of fixed shapes is; --compile auto lets dynamo go
dynamic after the first shape of each kind (fewer compiles, but its kernels then divide by run-time sizes).

Usage (H200): python benchmarks/bench_layouts.py --out $OUT/layouts.csv [--quick] [--dtypes fp32,bf16]
    [--cases nchw_1152x7x7_n128,...] [--eager-rows small|all|none] [--variants ours,eager,compile] [--label NAME]
    [--show-autotune]
--label names the build in the `kernels` column (before/after rows of two builds in one table).
Rows print as they are measured; the CSV is written at the end, also when the run is cut short (SIGTERM, Ctrl-C).
Last come the goal lines: per pass and timing mode, the rows where compile is more than 0.5 % faster than ours.
"""
from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
SMALL = 1 << 22  # at most this many elements: launch-bound sizes (more calls per graph, eager rows by default)


@dataclass(frozen=True)
class Case:
    """One input layout: x's logical shape, bias shape, and whether x is channels_last."""

    name: str
    shape: tuple[int, ...]
    bias: tuple[int, ...]
    channels_last: bool = False

    @property
    def numel(self) -> int:
        """Elements of x."""
        n = 1
        for d in self.shape:
            n *= d
        return n


def _nchw(n: int, c: int, hw: int) -> list[Case]:
    shape, bias = (n, c, hw, hw), (c, 1, 1)
    return [Case(f"nchw_{c}x{hw}x{hw}_n{n}", shape, bias), Case(f"nhwc_{c}x{hw}x{hw}_n{n}", shape, bias, True)]


# Conv activations of EfficientNet-B0 at batch 128 (2^21.6..2^25.8 elements) and of ResNet-50's last stage (C 2048),
# smaller batches of the same layers (2^16.6..2^20.6), transformer activations (ViT-B/16 at batch 64: 64 x 197
# tokens of 768; a LLaMA-7B MLP: 8192 tokens of 11008; bench_swish's [N/256, 256] at 2^28), the dim-1 [64, 1] layout
# over [N/1024, 64, 16], flat tensors.
CASES: list[Case] = [
    *_nchw(128, 1152, 7), *_nchw(128, 2048, 7), *_nchw(64, 256, 14), *_nchw(128, 240, 28), *_nchw(128, 144, 56),
    *_nchw(128, 32, 112), *_nchw(128, 16, 112), *_nchw(8, 1152, 7), *_nchw(4, 32, 112), *_nchw(2, 16, 56),
    Case("tokens_256x256", (256, 256), (256,)), Case("tokens_8192x768", (8192, 768), (768,)),
    Case("tokens_12608x768", (64 * 197, 768), (768,)), Case("tokens_16384x4096", (16384, 4096), (4096,)),
    Case("tokens_8192x11008", (8192, 11008), (11008,)), Case("tokens_2^20x256", (1 << 20, 256), (256,)),
    Case("dim1_64x16_2^24", ((1 << 24) // 1024, 64, 16), (64, 1)),
    Case("flat_2^16", (1 << 16,), (1,)), Case("flat_2^20", (1 << 20,), (1,)), Case("flat_2^24", (1 << 24,), (1,)),
    Case("flat_2^28", (1 << 28,), (1,)),
]
# --quick: the shapes (NCHW and channels_last), the transformer rows, one large case of each other layout,
# three small ones.
QUICK = ["nchw_1152x7x7_n128", "nhwc_1152x7x7_n128", "nchw_256x14x14_n64", "nchw_32x112x112_n128",
         "nhwc_32x112x112_n128", "tokens_8192x768", "tokens_12608x768", "tokens_8192x11008", "tokens_2^20x256",
         "dim1_64x16_2^24", "flat_2^24", "nchw_1152x7x7_n8", "tokens_256x256", "flat_2^20"]


def eager_silu(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """What a user writes without the op."""
    return F.silu(x) + b


def make_inputs(case: Case, dtype: torch.dtype, device: str, grad: bool):
    """x (in the case's memory format), bias and a gradient shaped like x, from random normal data."""
    fmt = torch.channels_last if case.channels_last else torch.contiguous_format
    x = torch.randn(case.shape, device=device, dtype=dtype).contiguous(memory_format=fmt)
    b = torch.randn(case.bias, device=device, dtype=dtype)
    gy = torch.randn_like(x)  # randn_like keeps x's memory format
    return x.requires_grad_(grad), b.requires_grad_(grad), gy


def run_case(case: Case, dname: str, opts: argparse.Namespace, tools) -> list[dict]:
    """Rows for one case and dtype: every pass x timing mode, all variants side by side."""
    bench, swish, compiled = tools
    dtype = DTYPES[dname]
    n = case.numel
    k, reps = (50, 20) if n <= SMALL else (5, 10)
    rows = []
    # Autograd runs each backward node on the stream its forward ran on: make the inputs and warm up on the
    # capture stream, or the backward would touch the legacy default stream during capture.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        x, b, _ = make_inputs(case, dtype, opts.device, grad=False)
        xg, bg, _ = make_inputs(case, dtype, opts.device, grad=True)
        dst = torch.empty_like(x)
        copy_us = bench.time_loop(lambda: dst.copy_(x), k, reps)
        fns = {"ours": swish, "eager": eager_silu, "compile": compiled}
        fns = {name: fn for name, fn in fns.items() if name in opts.keep}
        for name, fn in fns.items():
            bench.check(fn(x, b), x, b, f"{case.name} {dname} {name}")
        for pas in opts.passes.split(","):
            if pas == "fwd":
                calls = {name: (lambda fn=fn: fn(x, b)) for name, fn in fns.items()}
            else:
                # The upstream gradient has the memory format of the variant's own output, as the next layer's would.
                gys = {name: torch.randn_like(fn(xg, bg)) for name, fn in fns.items()}
                calls = {name: (lambda fn=fn, g=gys[name]: torch.autograd.grad(fn(xg, bg), (xg, bg), g))
                         for name, fn in fns.items()}
            floor_us = copy_us * (1.0 if pas == "fwd" else 2.5)
            for mode in opts.timing.split(","):
                if mode == "eager" and not (opts.eager_rows == "all" or (opts.eager_rows == "small" and n <= SMALL)):
                    continue
                row = {"case": case.name, "shape": "x".join(map(str, case.shape)), "bias": "x".join(map(str, case.bias)),
                       "format": "channels_last" if case.channels_last else "contiguous", "dtype": dname, "n": n,
                       "pass": pas, "timing": mode, "kernels": opts.kernels, "compile": opts.compile, "copy_us": copy_us,
                       "floor_us": floor_us}
                if mode == "graph":
                    times = bench.time_graphs_interleaved(calls, k, reps, stream=s)
                else:
                    times = bench.time_loops_interleaved(calls, k, reps)
                for name, t in times.items():
                    row[f"{name}_us"] = t
                    row[f"{name}_frac"] = floor_us / t
                rows.append(row)
                print_row(row)
    del x, b, xg, bg, dst
    torch.cuda.empty_cache()
    return rows


HEADER = (f"{'case':24} {'dtype':5} {'pass':7} {'timing':6} {'n':>10} {'floor us':>9} {'ours us':>9} {'/floor':>6} "
          f"{'eager us':>9} {'/floor':>6} {'compile us':>10} {'/floor':>6} {'cmp/ours':>8} {'eag/ours':>8}")


def print_row(r: dict) -> None:
    """One table line, printed as soon as it is measured (a cut-off run still reports)."""
    nan = float("nan")
    ours = r.get("ours_us", nan)
    print(f"{r['case']:24} {r['dtype']:5} {r['pass']:7} {r['timing']:6} {r['n']:>10} {r['floor_us']:9.2f} "
          f"{ours:9.2f} {r.get('ours_frac', nan):6.3f} {r.get('eager_us', nan):9.2f} {r.get('eager_frac', nan):6.3f} "
          f"{r.get('compile_us', nan):10.2f} {r.get('compile_frac', nan):6.3f} {r.get('compile_us', nan) / ours:8.2f} "
          f"{r.get('eager_us', nan) / ours:8.2f}", flush=True)


NOISE = 0.005  # a row trails compile when compile's time is more than this fraction under ours


def behind_compile(rows: list[dict]) -> dict[tuple[str, str], list]:
    """Per (pass, timing): [how many rows timed both ours and compile, those where compile was faster by more than
    NOISE]. A non-finite time counts as behind: it is no evidence that the row is level."""
    goal: dict[tuple[str, str], list] = {}
    for r in rows:
        if "compile_us" not in r:
            continue
        entry = goal.setdefault((r["pass"], r["timing"]), [0, []])
        entry[0] += 1
        ours, comp = r["ours_us"], r["compile_us"]
        if not (math.isfinite(ours) and math.isfinite(comp)) or comp < ours * (1 - NOISE):
            entry[1].append(r)
    return goal


def print_goal(rows: list[dict]) -> None:
    """The goal line per pass and timing mode: rows behind compile, each named."""
    for (pas, mode), (count, behind) in behind_compile(rows).items():
        print(f"goal no {pas} {mode} row behind compile by more than {NOISE * 100:g} %: {len(behind)} of {count} behind")
        for r in behind:
            print(f"  {r['case']} {r['dtype']}: ours {r['ours_us']:.2f} us, compile {r['compile_us']:.2f} us")


# The CSV's leading columns (bench_swish.write_csv puts every other key after them; variants not run are empty).
COLUMNS = ("case", "shape", "bias", "format", "dtype", "n", "pass", "timing", "kernels", "compile", "copy_us",
           "floor_us")


def show_autotune() -> None:
    """Print the debug lines in which inductor times each config of a kernel at its first call and names the one it
    keeps: a pointwise kernel gets two, and one timing of each decides (docs/performance-notes.md, runs k2, m1)."""
    class Picks(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return "XBLOCK" in record.getMessage()

    handler = logging.StreamHandler(sys.stdout)
    handler.addFilter(Picks())
    handler.setFormatter(logging.Formatter("  inductor autotune: %(message)s"))
    log = logging.getLogger("torch._inductor.runtime.triton_heuristics")
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)
    log.propagate = False


def main() -> int:
    """Parse arguments, run the grid, print the table, write CSV."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("layouts.csv"))
    ap.add_argument("--quick", action="store_true", help="the issue's shapes and one case of each other layout")
    ap.add_argument("--cases", default="", help="comma-separated case names (see CASES); default: all")
    ap.add_argument("--dtypes", default="fp32,fp16,bf16")
    ap.add_argument("--passes", default="fwd,fwd+bwd")
    ap.add_argument("--timing", default="graph,eager", help="graph, eager or both")
    ap.add_argument("--eager-rows", choices=["small", "all", "none"], default="small",
                    help=f"sizes that get back-to-back eager rows (small: <= {SMALL} elements)")
    ap.add_argument("--variants", default="ours,eager,compile", help="subset of ours,eager,compile ('ours' always)")
    ap.add_argument("--compile", choices=["static", "auto"], default="static",
                    help="torch.compile per shape (dynamic=False) or dynamo's default (dynamic after a shape change)")
    ap.add_argument("--label", default="current", help="the build's name in the kernels column (before/after A/B)")
    ap.add_argument("--show-autotune", action="store_true",
                    help="print inductor's timing of each config of compile's kernels and the one it keeps")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_layouts: needs a CUDA GPU")
        return 2
    args.device = "cuda"
    args.kernels = args.label
    import torchtrt_swish
    from benchmarks import bench_swish  # time_graph, time_loop, check; raises dynamo's recompile limits
    names = args.cases.split(",") if args.cases else (QUICK if args.quick else [c.name for c in CASES])
    by_name = {c.name: c for c in CASES}
    unknown = [nm for nm in names if nm not in by_name]
    if unknown:
        print(f"bench_layouts: unknown case {unknown[0]!r}; known: {', '.join(by_name)}")
        return 2
    args.keep = set(args.variants.split(",")) | {"ours"}
    tools = (bench_swish, torchtrt_swish.swish,
             torch.compile(eager_silu, dynamic=False if args.compile == "static" else None))
    if args.show_autotune:
        show_autotune()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))  # `timeout` cuts a run short: still write the CSV
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, kernels {args.kernels}, "
          f"compile {args.compile}")
    print(HEADER, flush=True)
    rows: list[dict] = []
    try:
        for dname in args.dtypes.split(","):
            for nm in names:
                rows += run_case(by_name[nm], dname, args, tools)
    finally:
        bench_swish.write_csv(rows, args.out, COLUMNS)
        print(f"wrote {args.out} ({len(rows)} rows)")
        print_goal(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
