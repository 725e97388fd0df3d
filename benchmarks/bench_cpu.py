"""The CPU op against the memory floor (`copy_`), ONNX Runtime's fused kernel and aten, at chosen thread counts.

Table 1, on the [64,64,64,64] fp32 tensor with a [64,1,1] bias, side by side in one run:
  copy_       y.copy_(x) into a preallocated y: the memory floor of a forward (read N, write N)
  ORT         ONNX Runtime's CPU provider on Mul(x, Sigmoid(x)) with its optimizations on; the script checks, in the
              optimized model it saves, that the two nodes became one (com.microsoft QuickGelu, MLAS): no bias add
  ours fwd    torchtrt_swish.swish(x, b); fwd+bwd: torch.autograd.grad of it for x and b (dx and dbias)
  bf16 fwd    the same forward on bf16 x and b
  aten fwd    F.silu(x) + b, for reference
Targets (issue 38): fp32 forward <= 1.1x ORT, fp32 forward + backward <= 3x copy_, bf16 forward <= 1.5x the fp32
copy_; each row says PASS or FAIL. Table 2 (--cases): the op against F.silu(x) + b on four layouts, forward and
forward + backward (goal: ours >= aten), and against a copy_ of the same x in its own dtype (table 1's forward +
backward target, <= 3x, for the other layouts; a bf16 case moves half the bytes of table 1's fp32 copy_).

Each number is the median wall time of one call over rounds; in a round every variant runs once, in balanced orders
(each first, and right after every other one, equally often), so a shared machine's load falls on all alike; the idle
workers of both thread pools block (IDLE_ENV), so neither runtime's pool takes cores from the other's call. Before
timing, table 1 prints ours' and ORT's max error against fp64, and table 2 checks ours against aten.

--l2 prints only a table of ns per element at 1 thread on a [64,64,64] tensor (1 MB, in L2 on these CPUs): copy_, ORT,
ours forward, backward (dx and dbias) and bf16 forward, each the best of --rounds blocks of 1000 calls: the math without
the memory, what the kernels' changes are measured by (docs/performance-notes.md).

Memory: PyTorch allocates each output, and glibc maps a block this large fresh from the kernel each time and unmaps
it on free, so every call of an op that returns 64 MB first takes 16384 page faults (the kernel zeroes each page);
ONNX Runtime's arena and the preallocated copy_ take none. --memory picks how the tables' process allocates (each
mode runs in a child process, since both settings are read at its start):
  reused  glibc keeps freed memory (MALLOC_MMAP_MAX_=0, MALLOC_TRIM_THRESHOLD_), as a caching allocator would (ORT's
          arena, jemalloc, tcmalloc), on a heap grown and written once before timing (POOL_BYTES), so that an output
          glibc places past the freed blocks finds resident pages too: the kernels against the floor. The default.
  fresh   glibc's defaults; adds `clone` (allocate + copy, as any op that returns a new tensor; the op faults its
          fresh outputs in before writing them, which `clone` does not)
  thp     fresh, with PyTorch's THP_MEM_ALLOC_ENABLE=1 (2 MB pages for large allocations: fewer faults); adds `clone`
A comma list runs several, e.g. --memory reused,fresh,thp. Each table ends with the page faults its timed calls took,
per step and thread count: a few pages at most where memory is reused, 16384 for each fresh 64 MB block.

Usage: python benchmarks/bench_cpu.py [--threads 1,2,all] [--rounds 21] [--warmup 3] [--memory reused,fresh,thp]
                                      [--cases NAME,...|none] [--l2]
  e.g. on a 16-core host: --threads 1,2,8,16. ATEN_CPU_CAPABILITY=avx2 (default, avx512) picks the op's kernel copy
  the way it picks ATen's; the header line names the copy that ran. Needs torch, numpy, onnx and onnxruntime.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torchtrt_swish  # noqa: E402
from benchmarks.rounds import round_orders  # noqa: E402

SHAPE, BIAS_SHAPE = (64, 64, 64, 64), (64, 1, 1)
# --l2: 2^18 elements (1 MB of fp32 a tensor, in L2), timed in blocks of L2_REPS calls.
L2_SHAPE, L2_BIAS_SHAPE, L2_REPS = (64, 64, 64), (64, 1), 1000
TARGETS = {"fwd/ORT": 1.1, "fwd+bwd/copy": 3.0, "bf16/copy": 1.5}
# --memory reused: the heap grown once to this size before timing (grow_heap): 32 of the tables' 64 MB tensors.
POOL_BYTES = 2 << 30
# The environment of each memory mode's process: glibc keeping freed memory for the next allocation (mallopt(3)), its
# defaults, PyTorch's transparent-huge-page allocations.
MEMORY_ENV = {"reused": {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 40)}, "fresh": {},
              "thp": {"THP_MEM_ALLOC_ENABLE": "1"}}
# Every child's OpenMP workers block when idle, as ORT's do (allow_spinning 0 below): spinning ones take the cores
# ORT's next call needs once the threads fill the machine (performance notes, o2, o5). A caller's policy is kept.
IDLE_ENV = {"OMP_WAIT_POLICY": "PASSIVE"}
MEMORY_NOTE = {"reused": "freed memory reused", "fresh": "fresh pages (glibc defaults)",
               "thp": "fresh pages, 2 MB where THP allows"}
# name: (x shape, bias shape, dtype): the NCHW case; the same in bf16; a transformer-like last-dim bias; a
# late CNN stage's 7x7 planes (EfficientNet-B0's last blocks: 1152 channels).
CASES = {
    "nchw_fp32": (SHAPE, BIAS_SHAPE, torch.float32),
    "nchw_bf16": (SHAPE, BIAS_SHAPE, torch.bfloat16),
    "lastdim_fp32": ((8192, 2048), (2048,), torch.float32),
    "nchw7x7_fp32": ((128, 1152, 7, 7), (1152, 1, 1), torch.float32),
}


def minor_faults() -> int:
    """Page faults this process (all its threads) has taken that mapped a page without reading a disk."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def median_ms(steps: dict, rounds: int, warmup: int, faults: dict | None = None, row: str = "") -> dict[str, float]:
    """{name: median ms} of the steps, run once each per round in balanced orders (round_orders: rounds rounded up
    to whole blocks); adds each step's page faults in the timed rounds to faults[f"{row}{name}"] if given."""
    for step in steps.values():
        for _ in range(warmup):
            step()
    names = list(steps)
    times: dict[str, list[float]] = {n: [] for n in names}
    for order in round_orders(names, rounds):
        for name in order:
            f0 = minor_faults()
            t0 = time.perf_counter()
            steps[name]()
            times[name].append(time.perf_counter() - t0)
            if faults is not None:
                faults[row + name] = faults.get(row + name, 0) + minor_faults() - f0
    return {n: statistics.median(ts) * 1e3 for n, ts in times.items()}


def print_faults(faults: dict[str, int]) -> None:
    """The table's page faults in its timed calls, per row and step (a blank line first: not a table row)."""
    took = ", ".join(f"{name} {n}" for name, n in faults.items() if n)
    print()
    print(f"page faults in the timed calls: {took or 'none'}")


def grow_heap(nbytes: int) -> None:
    """Map and write nbytes of heap once, then free it: with MEMORY_ENV["reused"] glibc keeps those pages, so a
    later block that lands past the freed ones (c10 asks for 64-byte aligned blocks, which a freed block of exactly
    their size cannot hold) still takes no page faults, as in a caching allocator once warm."""
    torch.empty(nbytes, dtype=torch.uint8).fill_(1)


def ort_session(threads: int, model_dir: Path, shape: tuple[int, ...] = SHAPE):
    """An ORT session of Mul(x, Sigmoid(x)) on `threads` intra-op threads, optimizations on, and the op types of the
    model its optimizer saved."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(shape)) for n in ("x", "y")]
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "silu", vi[:1], vi[1:]),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3  # its warning that a saved optimized model is machine-specific
    # Idle workers block instead of spinning, as OpenMP's do: a spinning pool would take a core from the next variant.
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    optimized = model_dir / f"optimized_{threads}.onnx"
    so.optimized_model_filepath = str(optimized)
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    ops = [f"{n.domain + '.' if n.domain else ''}{n.op_type}" for n in onnx.load(str(optimized)).graph.node]
    return sess, ops


def max_err(got, want) -> float:
    """max |got - want| in fp64."""
    return float((torch.as_tensor(got).double() - want).abs().max())


def floor_table(counts: list[int], rounds: int, warmup: int, fresh: bool) -> int:
    """Print table 1; returns the number of missed targets."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(SHAPE, generator=gen) * 4
    b = torch.randn(BIAS_SHAPE, generator=gen)
    g = torch.randn(SHAPE, generator=gen)
    xb, bb = x.bfloat16(), b.bfloat16()
    xr, br = x.clone().requires_grad_(), b.clone().requires_grad_()
    y = torch.empty_like(x)
    xn = x.numpy()
    ref = x.double() * torch.sigmoid(x.double())
    missed = 0
    faults: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in counts:
            torch.set_num_threads(n)
            sess, ops = ort_session(n, Path(tmp))
            fused = ops == ["com.microsoft.QuickGelu"]
            steps = {
                "copy_": lambda: y.copy_(x),
                "ORT": lambda: sess.run(None, {"x": xn}),
                "fwd": lambda: torchtrt_swish.swish(x, b),
                "fwd+bwd": lambda: torch.autograd.grad(torchtrt_swish.swish(xr, br), (xr, br), g),
                "bf16": lambda: torchtrt_swish.swish(xb, bb),
                "aten": lambda: F.silu(x) + b,
            }
            if fresh:
                steps["clone"] = lambda: x.clone()
            if n == counts[0]:
                err_ours = max_err(steps["fwd"](), ref + b.double())
                err_ort = max_err(steps["ORT"]()[0], ref)
                print(f"max |err| against fp64: ours {err_ours:.2e}, ORT {err_ort:.2e}; ORT's optimized graph: "
                      f"{' + '.join(ops)}{'' if fused else ' (NOT fused into QuickGelu)'}")
                print()
                print("| threads | copy_ ms | ORT ms | ours fwd ms | fwd / ORT (<= 1.1) | ours fwd+bwd ms | "
                      "fwd+bwd / copy_ (<= 3) | bf16 fwd ms | bf16 / copy_ (<= 1.5) | aten fwd ms |"
                      + (" clone ms |" if fresh else ""))
                print("|---" * (11 if fresh else 10) + "|")
            t = median_ms(steps, rounds, warmup, faults, f"{n} threads ")
            ratios = {"fwd/ORT": t["fwd"] / t["ORT"], "fwd+bwd/copy": t["fwd+bwd"] / t["copy_"],
                      "bf16/copy": t["bf16"] / t["copy_"]}
            cells = {}
            for key, r in ratios.items():
                ok = r <= TARGETS[key] and (key != "fwd/ORT" or fused)
                missed += not ok
                cells[key] = f"{r:.2f} {'PASS' if ok else 'FAIL'}"
            print(f"| {n} | {t['copy_']:.2f} | {t['ORT']:.2f} | {t['fwd']:.2f} | {cells['fwd/ORT']} | "
                  f"{t['fwd+bwd']:.2f} | {cells['fwd+bwd/copy']} | {t['bf16']:.2f} | {cells['bf16/copy']} | "
                  f"{t['aten']:.2f} |" + (f" {t['clone']:.2f} |" if fresh else ""), flush=True)
    print_faults(faults)
    return missed


def l2_table(rounds: int) -> None:
    """Print ns per element at 1 thread on a tensor that stays in L2 (--l2): the kernels' math without the memory."""
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(L2_SHAPE, generator=gen) * 4
    b = torch.randn(L2_BIAS_SHAPE, generator=gen)
    g = torch.randn(L2_SHAPE, generator=gen)
    xb, bb, xn, y = x.bfloat16(), b.bfloat16(), x.numpy(), torch.empty_like(x)
    with tempfile.TemporaryDirectory() as tmp:
        sess, _ = ort_session(1, Path(tmp), L2_SHAPE)
        steps = {"copy_": lambda: y.copy_(x), "ORT": lambda: sess.run(None, {"x": xn}),
                 "fwd": lambda: torchtrt_swish.swish(x, b),
                 "bwd (dx, dbias)": lambda: torch.ops.torchtrt_swish.swish_backward(g, x, b),
                 "bf16 fwd": lambda: torchtrt_swish.swish(xb, bb)}
        best = {}
        for name, step in steps.items():
            step()
            for _ in range(rounds):
                t0 = time.perf_counter()
                for _ in range(L2_REPS):
                    step()
                best[name] = min(best.get(name, float("inf")), (time.perf_counter() - t0) / L2_REPS)
    print(f"in L2: {list(L2_SHAPE)} fp32, bias {list(L2_BIAS_SHAPE)}, 1 thread, ns per element (best of {rounds} "
          f"blocks of {L2_REPS} calls)")
    print("| " + " | ".join(steps) + " |")
    print("|---" * len(steps) + "|")
    print("| " + " | ".join(f"{best[n] / x.numel() * 1e9:.3f}" for n in steps) + " |")


def aten_table(names: list[str], counts: list[int], rounds: int, warmup: int) -> None:
    """Print table 2: ours against F.silu(x) + b, forward and forward + backward."""
    print()
    print("| case | threads | mode | ours ms | aten ms | aten / ours | ours / copy_ |")
    print("|---|---|---|---|---|---|---|")
    behind = rows = 0
    faults: dict[str, int] = {}
    for name in names:
        shape, bshape, dtype = CASES[name]
        gen = torch.Generator().manual_seed(0)
        x = (torch.randn(shape, generator=gen) * 4).to(dtype).requires_grad_()
        b = torch.randn(bshape, generator=gen).to(dtype).requires_grad_()
        g = torch.randn(shape, generator=gen).to(dtype)
        xs, bs = x.detach(), b.detach()
        y = torch.empty_like(xs)
        # Same answer before timing (aten rounds twice for bf16, hence the looser bound there).
        tol = 1e-5 if dtype == torch.float32 else 2 * torch.finfo(dtype).eps
        torch.testing.assert_close(torchtrt_swish.swish(xs, bs), F.silu(xs) + bs, rtol=tol, atol=tol)
        for n in counts:
            torch.set_num_threads(n)
            for mode in ("forward", "forward+backward"):
                if mode == "forward":
                    steps = {"ours": lambda: torchtrt_swish.swish(xs, bs), "aten": lambda: F.silu(xs) + bs}
                else:
                    steps = {"ours": lambda: torch.autograd.grad(torchtrt_swish.swish(x, b), (x, b), g),
                             "aten": lambda: torch.autograd.grad(F.silu(x) + b, (x, b), g)}
                steps["copy_"] = lambda: y.copy_(xs)
                t = median_ms(steps, rounds, warmup, faults, f"{name} {n} threads {mode} ")
                speedup = t["aten"] / t["ours"]
                rows += 1
                behind += speedup < 1
                print(f"| {name} {list(shape)} bias {list(bshape)} | {n} | {mode} | {t['ours']:.2f} | "
                      f"{t['aten']:.2f} | {speedup:.2f}{'' if speedup >= 1 else ' (behind)'} | "
                      f"{t['ours'] / t['copy_']:.2f} |", flush=True)
    print_faults(faults)
    print()
    print(f"goal ours >= aten: met in {rows - behind} of {rows} rows")


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


def child_env(mode: str, environ) -> dict[str, str]:
    """The environment of memory mode `mode`'s process: the parent's without another mode's settings, with IDLE_ENV
    where the parent does not set those variables."""
    env = {k: v for k, v in environ.items() if not any(k in e for e in MEMORY_ENV.values())}
    return {**IDLE_ENV, **env, **MEMORY_ENV[mode]}


def run_tables(args, counts: list[int], names: list[str], mode: str) -> None:
    """Both tables in this process, whose environment is MEMORY_ENV[mode]."""
    env = ", ".join(f"{k}={v}" for k, v in MEMORY_ENV[mode].items())
    print(f"memory: {MEMORY_NOTE[mode]}{' (' + env + ')' if env else ''}; idle OpenMP workers: "
          f"{os.environ.get('OMP_WAIT_POLICY', 'spin (libgomp default)')}")
    if mode == "reused":
        grow_heap(POOL_BYTES)
    missed = floor_table(counts, args.rounds, args.warmup, fresh=mode != "reused")
    print()
    print(f"issue 38 targets: {3 * len(counts) - missed} of {3 * len(counts)} met")
    if names:
        aten_table(names, counts, args.rounds, args.warmup)


def main(argv: list[str] | None = None) -> int:
    """Print the tables; exit 0 (a missed target is reported in the table, not as a failure), 2 on bad arguments."""
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", default="1,2,all")
    ap.add_argument("--memory", default="reused")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--l2", action="store_true", help="only the in-L2 table (ns per element, 1 thread)")
    ap.add_argument("--child", help=argparse.SUPPRESS)  # the memory mode this process was started for
    args = ap.parse_args(argv)
    try:
        counts = _thread_counts(args.threads)
        names = [] if args.cases == "none" else [c.strip() for c in args.cases.split(",")]
        unknown = [c for c in names if c not in CASES]
        modes = [m.strip() for m in args.memory.split(",")]
        if unknown or args.rounds < 1 or any(m not in MEMORY_ENV for m in modes):
            raise ValueError(f"unknown case {unknown[0]!r} (known: {', '.join(CASES)}, or none)" if unknown
                             else f"--rounds: expected >= 1, got {args.rounds}" if args.rounds < 1
                             else f"--memory: expected modes of {', '.join(MEMORY_ENV)}, got {args.memory!r}")
    except ValueError as e:
        print(f"bench_cpu: {e}", file=sys.stderr)
        return 2
    if args.child:
        run_tables(args, counts, names, args.child)
        return 0
    import onnxruntime

    print(f"torch {torch.__version__}, onnxruntime {onnxruntime.__version__}, ATen CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()}, op kernels {torchtrt_swish._C.cpu_kernels()} "
          f"(page prefetch {'on' if torchtrt_swish._C.cpu_page_prefetch() else 'off'}, bf16 rounded by "
          f"{'AVX512_BF16' if torchtrt_swish._C.cpu_bf16_instruction() else 'integer arithmetic'}), "
          f"{os.cpu_count()} cores, {torch.__config__.parallel_info().splitlines()[-1].strip()}"
          + ("" if args.l2 else f"; median of {args.rounds} rounds"))
    if args.l2:
        l2_table(args.rounds)
        return 0
    for i, mode in enumerate(modes):
        if i:
            print()
        child = ["--rounds", str(args.rounds), "--warmup", str(args.warmup), "--threads", args.threads,
                 "--cases", args.cases, "--child", mode]
        proc = subprocess.run([sys.executable, __file__, *child], env=child_env(mode, os.environ))
        if proc.returncode != 0:
            return proc.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
