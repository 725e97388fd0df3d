"""A/B of forward-kernel builds on the layouts of benchmarks/bench_layouts.py, without rebuilding the op.

Each variant is a shared library built from tools/ab_forward/ab_forward.cu: the launcher of one swish_forward.cu
(the tree's, or a saved baseline's folder first on the include path) with its -D switches (run.sh and check.sh
build them). For every case and dtype, all variants run on the same x and bias, their outputs are checked (against
an fp64 reference, and bit for bit against the first variant unless a variant is named in --approx), then each is
captured k times in a CUDA graph and the replays of all variants, torch.compile's and a device-to-device copy (eager,
as bench_layouts times it) are timed in interleaved rounds, so that every variant sees the same drift, in an order
that gives each one every place and every predecessor equally often (benchmarks/rounds.py; --reps rounds up to
whole blocks of it). `/floor` is the floor time over the variant's time: copy time for the forward, 2.5 times it
for forward + backward (--backward: each variant's forward, then the op's swish_backward, so the op must be built;
compile through autograd, as bench_layouts times it). --op adds the built op (torchtrt_swish.swish, autograd for
forward + backward): what bench_layouts times as ours; its bits must be the last variant's (name the tree's launcher
last).

--prewarm compiles torch.compile's kernels for the given cases and exits, so that parallel processes fill inductor's
caches before the timed process (compiling is CPU work).

Usage (H200): python3 tools/ab_forward/ab_forward.py --variants base=/tmp/ab/base.so,tree=/tmp/ab/tree.so
    [--cases a,b] [--sizes 16,32,48] [--dtypes fp32,fp16,bf16] [--approx name] [--backward] [--op] [--out ab.csv]
    [--prewarm]
"""
from __future__ import annotations

import argparse
import csv
import ctypes
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks.bench_layouts import CASES, DTYPES, Case  # noqa: E402
from benchmarks.rounds import round_orders  # noqa: E402

DTYPE_CODE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
for _name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit", "accumulated_cache_size_limit"):
    if hasattr(torch._dynamo.config, _name):
        setattr(torch._dynamo.config, _name, 4096)


def eager_silu(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """What a user writes without the op (bench_layouts' eager and compile variants)."""
    return F.silu(x) + b


def size_cases(mibs: str) -> list[Case]:
    """A flat tensor (scalar bias) and a [T, 1024] one (last-dim bias) whose fp32 x takes each of these MiB
    (flat_m<k>, tok1024_m<k>): where a rule that depends on x's size switches (swish_forward_plan.h's fwdSkipsL1)."""
    out = []
    for k in (int(v) for v in filter(None, mibs.split(","))):
        out += [Case(f"flat_m{k}", (k << 18,), (1,)), Case(f"tok1024_m{k}", (k << 8, 1024), (1024,))]
    return out


def spec_of(case: Case) -> tuple[int, int]:
    """(channels, inner) of the kernel's bias lookup for x in memory order, as the op computes it."""
    bias = case.bias
    if all(d == 1 for d in bias):
        return 1, 1
    if case.channels_last:
        return case.shape[1], 1
    off = len(case.shape) - len(bias)
    dims = [j + off for j, d in enumerate(bias) if d != 1]
    channels = 1
    for d in range(dims[0], dims[-1] + 1):
        channels *= case.shape[d]
    inner = 1
    for d in range(dims[-1] + 1, len(case.shape)):
        inner *= case.shape[d]
    return channels, inner


def make_call(lib, x: torch.Tensor, b: torch.Tensor, y: torch.Tensor, spec: tuple[int, int]):
    """A call of one variant's launcher on the current stream, raising on a launch error."""
    fn = lib.abSwishForward
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong,
                   ctypes.c_longlong, ctypes.c_longlong, ctypes.c_void_p]
    code = DTYPE_CODE[x.dtype]

    def call():
        err = fn(code, x.data_ptr(), b.data_ptr(), y.data_ptr(), x.numel(), spec[0], spec[1],
                 torch.cuda.current_stream().cuda_stream)
        if err:
            raise RuntimeError(f"launch error {err}")
        return y

    return call


def graph_of(fn, k: int, stream: torch.cuda.Stream) -> torch.cuda.CUDAGraph:
    """k calls of fn in one CUDA graph, captured on stream after warm-up calls."""
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=stream):
        for _ in range(k):
            fn()
    g.replay()
    torch.cuda.synchronize()
    return g


def run_case(case: Case, dname: str, libs: dict, compiled, opts) -> list[dict]:
    """Rows for one case: every variant, compile and copy on one x, in interleaved rounds; with --backward also
    forward + backward (each variant's forward, then the op's swish_backward; compile through autograd)."""
    # Imported here: bench_swish imports the op, which --prewarm (run while the op builds) must not need.
    from benchmarks.bench_swish import check, timed_round
    dtype = DTYPES[dname]
    fmt = torch.channels_last if case.channels_last else torch.contiguous_format
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        x = torch.randn(case.shape, device="cuda", dtype=dtype).contiguous(memory_format=fmt)
        b = torch.randn(case.bias, device="cuda", dtype=dtype)
        gy = torch.randn_like(x)
        xg, bg = x.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
        dst = torch.empty_like(x)
    torch.cuda.synchronize()
    spec = spec_of(case)
    # Each launcher its own y, as the op and compile each write their own (one shared y read 0.6 µs faster on half
    # flat 2^24 than the op with the same kernel: notes, t7).
    with torch.cuda.stream(stream):
        fwd = {name: make_call(lib, x, b, torch.empty_like(x), spec) for name, lib in libs.items()}
    first = last = None
    for name, call in fwd.items():
        last = call().clone()
        check(last, x, b, f"{case.name} {dname} {name}")
        if first is None:
            first = last
        elif name not in opts.approx and not torch.equal(last.contiguous().view(torch.uint8),
                                                         first.contiguous().view(torch.uint8)):
            raise SystemExit(f"{case.name} {dname} {name}: bits differ from {next(iter(fwd))}")
    if opts.op:
        out = opts.swish(x, b)
        check(out, x, b, f"{case.name} {dname} op")
        if not torch.equal(out.contiguous().view(torch.uint8), last.contiguous().view(torch.uint8)):
            raise SystemExit(f"{case.name} {dname} op: bits differ from {list(fwd)[-1]}")
        fwd["op"] = lambda: opts.swish(x, b)
    if compiled is not None:
        check(compiled(x, b), x, b, f"{case.name} {dname} compile")
        fwd["compile"] = lambda: compiled(x, b)
    passes = {"fwd": fwd}
    if opts.backward:
        bwd_op = torch.ops.torchtrt_swish.swish_backward
        both = {name: (lambda call=call: (call(), bwd_op(gy, x, b))) for name, call in fwd.items()
                if name not in ("compile", "op")}
        if opts.op:
            both["op"] = lambda: torch.autograd.grad(opts.swish(xg, bg), (xg, bg), gy)
        if compiled is not None:
            both["compile"] = lambda: torch.autograd.grad(compiled(xg, bg), (xg, bg), gy)
        passes["fwd+bwd"] = both
    small = case.numel <= opts.small
    k, reps = (opts.k_small, opts.reps) if small else (opts.k, opts.reps)

    def copies():
        for _ in range(k):
            dst.copy_(x)

    rows = []
    for pas, calls in passes.items():
        graphs = {name: graph_of(call, k, stream) for name, call in calls.items()}
        bodies = {"copy": copies, **{name: g.replay for name, g in graphs.items()}}
        for body in bodies.values():
            body()
        torch.cuda.synchronize()
        times: dict = {name: [] for name in bodies}
        for order in round_orders(list(bodies), reps):
            for name in order:
                times[name].append(timed_round(bodies[name], k, queued=name != "copy"))
        med = {name: statistics.median(v) for name, v in times.items()}
        floor = med["copy"] * (1.0 if pas == "fwd" else 2.5)
        row = {"case": case.name, "dtype": dname, "pass": pas, "n": case.numel, "copy_us": med["copy"],
               "floor_us": floor}
        for name, v in times.items():
            if name != "copy":
                row[f"{name}_us"] = med[name]
                row[f"{name}_frac"] = floor / med[name]
                row[f"{name}_spread"] = (max(v) - min(v)) / med[name]
        rows.append(row)
        del graphs
    return rows


def main() -> int:
    """Parse arguments; prewarm inductor or time the grid."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default="", help="name=library.so,... (the first is the bit reference)")
    ap.add_argument("--cases", default="", help="case names of bench_layouts.CASES (default: all)")
    ap.add_argument("--dtypes", default="fp32,fp16,bf16")
    ap.add_argument("--compile-dtypes", default="fp32,fp16,bf16", help="dtypes that get a torch.compile column")
    ap.add_argument("--approx", default="", help="variants whose bits may differ from the first (still checked)")
    ap.add_argument("--prewarm", action="store_true", help="only compile torch.compile's kernels, then exit")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--k-small", type=int, default=50)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--small", type=int, default=1 << 22)
    ap.add_argument("--backward", action="store_true", help="also forward + backward (needs the op built)")
    ap.add_argument("--op", action="store_true", help="the built op as one more variant (as bench_layouts' ours)")
    ap.add_argument("--sizes", default="", help="MiB,...: size_cases' tensors too, after --cases (none by default)")
    ap.add_argument("--out", type=Path, default=None)
    opts = ap.parse_args()
    opts.approx = set(filter(None, opts.approx.split(",")))
    sized = size_cases(opts.sizes)
    by_name = {c.name: c for c in [*CASES, *sized]}
    if opts.cases:
        names = opts.cases.split(",")
    else:  # every table case, unless sizes were asked for alone
        names = [] if sized else [c.name for c in CASES]
    names += [c.name for c in sized]
    compiled = torch.compile(eager_silu, dynamic=False)
    if opts.prewarm:
        for dname in opts.dtypes.split(","):
            if dname not in opts.compile_dtypes.split(","):
                continue
            for nm in names:
                c = by_name[nm]
                fmt = torch.channels_last if c.channels_last else torch.contiguous_format
                x = torch.randn(c.shape, device="cuda", dtype=DTYPES[dname]).contiguous(memory_format=fmt)
                b = torch.randn(c.bias, device="cuda", dtype=DTYPES[dname])
                compiled(x, b)
                if opts.backward:
                    xg, bg = x.requires_grad_(), b.requires_grad_()
                    y = compiled(xg, bg)
                    torch.autograd.grad(y, (xg, bg), torch.randn_like(y))
                del x, b
        return 0
    if opts.backward or opts.op:
        import torchtrt_swish  # the op (its forward as a variant) and torch.ops.torchtrt_swish.swish_backward
        opts.swish = torchtrt_swish.swish
    libs = {}
    for item in filter(None, opts.variants.split(",")):
        name, path = item.split("=", 1)
        libs[name] = ctypes.CDLL(path)
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, variants {', '.join(libs)}", flush=True)
    head = f"{'case':22} {'dtype':5} {'pass':7} {'floor us':>8}"
    cols = [*libs, *(["op"] if opts.op else []), "compile"]
    for name in cols:
        head += f" {name[:10]:>10} {'/floor':>6}"
    print(head, flush=True)
    rows = []
    try:
        for dname in opts.dtypes.split(","):
            for nm in names:
                comp = compiled if dname in opts.compile_dtypes.split(",") else None
                for r in run_case(by_name[nm], dname, libs, comp, opts):
                    rows.append(r)
                    line = f"{r['case']:22} {r['dtype']:5} {r['pass']:7} {r['floor_us']:8.2f}"
                    for name in cols:
                        line += (f" {r[f'{name}_us']:10.2f} {r[f'{name}_frac']:6.3f}" if f"{name}_us" in r
                                 else f" {'-':>10} {'-':>6}")
                    print(line, flush=True)
                torch.cuda.empty_cache()
    finally:
        if opts.out and rows:
            lead = ("case", "dtype", "pass", "n", "copy_us", "floor_us")
            keys = sorted({k for r in rows for k in r},
                          key=lambda k: (k not in lead, lead.index(k) if k in lead else 0, k))
            with open(opts.out, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=keys)
                w.writeheader()
                w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
