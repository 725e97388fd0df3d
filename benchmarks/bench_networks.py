"""Whole networks as users run them, plain PyTorch swish (`F.silu(x) + bias`) against the op, side by side.

Networks: benchmarks/networks.py (`--networks`, default transformer,regnet_y_400mf). One row per network x dtype x
mode x task; each row times both variants in one process, their rounds interleaved (plain, ours, ours, plain, ...).
  dtypes:  bf16 = pure bf16 (model.to(torch.bfloat16), bf16 input); fp32 (matmuls in TF32 unless
           --fp32-matmul highest); amp = fp32 weights under torch.autocast(bfloat16). In that order: a run cut short
           loses the autocast rows first.
  modes:   eager; compile = torch.compile(model); graphs = torch.compile(model, mode="reduce-overhead") (CUDA graphs;
           torch.compiler.cudagraph_mark_step_begin() before each step).
  tasks:   inference = eval + no_grad forward; train = forward, loss, backward, grads set to None first (no
           optimizer step, so both variants keep the same weights).
Per variant and round: wall time = back-to-back steps between two synchronizes (the number of steps per round is
calibrated to --round-ms); then --profile-steps steps under torch.profiler (after one it discards) give per step
  device ms: the sum of every GPU activity (kernels, memcpy, memset) the profiler records;
  host ms:   the self-CPU total of the CPU events (ops, CUDA runtime calls; every thread, the autograd engine's
             included), without the final cuda*Synchronize, which waits for the GPU rather than working;
  kernels:   GPU activities per step;
  opaque:    calls of torchtrt_swish::swish / swish_backward the profiler saw per step.
Every row reports each variant's median over --rounds rounds and its spread, (max - min) / median.

The op must not stay opaque in a compiled step (inductor must see its math, torchtrt_swish/ops.py): for compiled rows
the generated code of every graph compiled for the row (inductor's output code, also served from its caches) is
searched for calls into torchtrt_swish, and the profiled steps must show no call either (that also catches an eager
call left behind a graph break, which CUDA-graph replays would hide from the profiler). As a control of the counter,
each eager row of ours must show exactly one call per swish per forward (and one backward call each when training).
Any miss is listed at the end and the exit status is 1.

Usage (H200): python benchmarks/bench_networks.py --out $OUT/networks.csv [--networks transformer,regnet_y_400mf]
    [--dtypes bf16,fp32,amp] [--compile-dtypes bf16,fp32] [--modes eager,compile,graphs] [--tasks train,inference]
    [--batch N] [--format auto|nchw|channels_last] [--rounds 5] [--round-ms 250] [--compile-only]
CPU check: python benchmarks/bench_networks.py --device cpu --smoke (tiny sizes, a few steps). The CSV and the
markdown table (--out with .md) are rewritten after every row, so a run cut short keeps what it measured.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import math
import re
import signal
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import networks  # noqa: E402

OPAQUE_OPS = frozenset({"torchtrt_swish::swish", "torchtrt_swish::swish_backward"})
# A call into the op in inductor's output code: the Python wrapper's torch.ops.torchtrt_swish.<op>.<overload>(...),
# or the C++ wrapper's dispatcher call by schema name. The same names also stand in comments and in quoted strings
# (metadata asserts), which call nothing: comment lines are skipped, and a Python call needs its parenthesis.
_OPAQUE_IN_CODE = re.compile(r"\btorch\.ops\.torchtrt_swish\.\w+(?:\.\w+)?\(|\"torchtrt_swish::\w+\"")
SYNC_EVENTS = frozenset({"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize"})
STEP_SPAN = "ProfilerStep#"  # torch.profiler's record_function around each step of a schedule
DTYPES = ("bf16", "fp32", "amp")
MODES = {"eager": None, "compile": "default", "graphs": "reduce-overhead"}
TASKS = ("train", "inference")
VARIANTS = tuple(networks.VARIANTS)


def opaque_in_code(codes: list[str]) -> int:
    """Calls into torchtrt_swish in generated code (0 when inductor decomposed every use)."""
    return sum(len(_OPAQUE_IN_CODE.findall(line)) for c in codes for line in c.splitlines()
               if not line.lstrip().startswith(("#", "//")))


@contextlib.contextmanager
def captured_code():
    """Collect the output code of every graph inductor compiles (or loads from its caches) inside the block.

    torch._inductor.utils.run_and_get_code does the same but resets dynamo first, which would drop the other
    variant's compiled graphs (and CUDA graphs) in the middle of a row."""
    from torch._inductor.graph import GraphLowering

    codes: list[str] = []
    with mock.patch.object(GraphLowering, "save_output_code", codes.append):
        yield codes


def _covered_ns(intervals: list[tuple[int, int]]) -> int:
    """Length of the union of [start, end) intervals."""
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def _attr(event, name: str, default):
    """event.name() where this torch's kineto events have that method, else default (older releases lack some)."""
    method = getattr(event, name, None)
    return method() if method is not None else default


def summarize_events(events, steps: int) -> dict[str, float]:
    """Per step from torch.profiler's raw (kineto) events: device ms, GPU activities, host ms, opaque calls.

    Host time is the self-CPU total: the self times of a thread's nested events add up to the time its outermost
    events cover, so it is the union of the CPU events' intervals per thread. This reads the raw events because
    building torch.profiler's FunctionEvent tree took seconds per profiled step of a convolutional network (tens of
    thousands of events), longer than the steps themselves. The profiler's own overhead events are left out, and so
    are the spans its schedule opens around each step (ProfilerStep#n): they cover the whole step, the Python between
    ops and the final synchronize included, which made host time the wall time of the step."""
    cpu, cuda = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA
    device_ns = 0
    gpu = opaque = 0
    per_thread: dict[int, list[tuple[int, int]]] = {}
    for e in events:
        name = e.name()
        if name in OPAQUE_OPS:
            opaque += 1
        kind = e.device_type()
        if kind == cuda:
            if not _attr(e, "is_user_annotation", False):  # a record_function span: its kernels count already
                device_ns += e.duration_ns()
                gpu += 1
        elif (kind == cpu and name not in SYNC_EVENTS and not name.startswith(STEP_SPAN)
              and _attr(e, "activity_type", "") != "overhead"
              and not e.is_async() and e.start_thread_id() == e.end_thread_id()):
            per_thread.setdefault(e.start_thread_id(), []).append((e.start_ns(), e.end_ns()))
    host_ns = sum(_covered_ns(iv) for iv in per_thread.values())
    # No GPU activity recorded is no measurement (a CPU run, or a profiler that missed the kernels), not 0 ms.
    return {"device_ms": device_ns / steps / 1e6 if gpu else math.nan, "kernels": gpu / steps,
            "host_ms": host_ns / steps / 1e6, "opaque_calls": opaque / steps}


def raw_events(prof) -> list:
    """The kineto events of a finished torch.profiler.profile."""
    return prof.profiler.kineto_results.events()


def _sync(device: str):
    return torch.cuda.synchronize if device == "cuda" else (lambda: None)


def profile_steps(step, steps: int, device: str) -> dict[str, float]:
    """summarize_events of `steps` calls of step() under torch.profiler (CPU, plus CUDA on a GPU), after one more
    call that the profiler's schedule runs as its warm-up and discards: the step in which the profiler starts is not a
    steady one, and with two profiled steps a round it weighed half of the round's host time. The GPU is drained
    after the warm-up (the trace keeps every kernel that runs after it starts, queued before or not) and after the
    last step (whose kernels must end before the trace does, at the next prof.step())."""
    acts = [torch.profiler.ProfilerActivity.CPU]
    if device == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    sync = _sync(device)
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1)
    with torch.profiler.profile(activities=acts, schedule=schedule) as prof:
        for i in range(steps + 1):
            step()
            if i in (0, steps):
                sync()
            prof.step()
    return summarize_events(raw_events(prof), steps)


def wall_ms(step, steps: int, device: str) -> float:
    """Milliseconds per step of `steps` back-to-back calls, between two synchronizes."""
    sync = _sync(device)
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return (time.perf_counter() - t0) * 1e3 / steps


def make_step(model, task: str, x, target, loss, amp, graphs: bool):
    """One unit of timed work: an inference forward, or forward + loss + backward of a training step."""
    mark = torch.compiler.cudagraph_mark_step_begin if graphs else (lambda: None)
    if task == "inference":
        model.eval()

        def step():
            mark()
            with torch.no_grad(), amp():
                model(x)
        return step
    model.train()
    params = list(model.parameters())

    def step():
        mark()
        for p in params:
            p.grad = None
        with amp():
            out = model(x)
        loss(out, target).backward()
    return step


def _counter_total(group: str, key: str | None = None) -> int:
    from torch._dynamo.utils import counters

    c = counters[group]
    return int(c[key]) if key else int(sum(c.values()))


def spread(values: list[float]) -> float:
    """(max - min) / median; NaN when any value is NaN."""
    if any(math.isnan(v) for v in values):
        return math.nan
    med = statistics.median(values)
    return (max(values) - min(values)) / med if med else math.nan


def measure_row(models: dict, mode: str, task: str, x, target, loss, amp, args, device: str) -> dict:
    """Compile (if asked), warm up and time both variants of one row; the row's dict (see the module docstring)."""
    torch._dynamo.reset()
    row: dict = {}
    steps_fn = {}
    with captured_code() as codes:
        for v, model in models.items():
            before = (len(codes), _counter_total("inductor", "cudagraph_skips"), _counter_total("graph_break"))
            fn = model if mode == "eager" else torch.compile(model, backend=args.backend, mode=MODES[mode])
            steps_fn[v] = make_step(fn, task, x, target, loss, amp, mode == "graphs")
            t0 = time.perf_counter()
            steps_fn[v]()
            _sync(device)()
            row[f"{v}_first_s"] = time.perf_counter() - t0  # includes the compile
            for _ in range((args.warmup_steps or (3 if mode == "eager" else 10)) - 1):
                steps_fn[v]()
            _sync(device)()
            row[f"{v}_graphs"] = len(codes) - before[0]
            row[f"{v}_opaque_in_code"] = opaque_in_code(codes[before[0]:])
            row[f"{v}_cudagraph_skips"] = _counter_total("inductor", "cudagraph_skips") - before[1]
            row[f"{v}_graph_breaks"] = _counter_total("graph_break") - before[2]
        if args.compile_only:
            return row
        # One step count per row for both variants, from the slower one's warm time.
        step_ms = max(wall_ms(s, 1, device) for s in steps_fn.values())
        n = max(args.min_steps, min(500, math.ceil(args.round_ms / max(step_ms, 1e-3))))
        row["steps"] = n
        seen = len(codes)
        res: dict = {v: {"wall_ms": [], "device_ms": [], "host_ms": [], "kernels": [], "opaque_calls": []}
                     for v in models}
        for r in range(args.rounds):
            for v in (VARIANTS if r % 2 == 0 else VARIANTS[::-1]):
                res[v]["wall_ms"].append(wall_ms(steps_fn[v], n, device))
                for k, val in profile_steps(steps_fn[v], args.profile_steps, device).items():
                    res[v][k].append(val)
        row["late_compiles"] = len(codes) - seen  # graphs compiled during the timed rounds (a recompile)
    for v, r in res.items():
        for k in ("wall_ms", "device_ms", "host_ms"):
            row[f"{v}_{k}"] = statistics.median(r[k])
            row[f"{v}_{k[:-3]}_spread"] = spread(r[k])
        row[f"{v}_wall_rounds"] = " ".join(f"{t:.3f}" for t in r["wall_ms"])
        row[f"{v}_kernels"] = statistics.median(r["kernels"])
        row[f"{v}_opaque_calls"] = max(r["opaque_calls"])
    for k in ("wall", "device", "host"):
        row[f"{k}_ratio"] = row[f"ours_{k}_ms"] / row[f"plain_{k}_ms"]
    return row


def row_problems(row: dict, swaps: int) -> list[str]:
    """What a row shows wrong: the op left in a compiled step, no compiled code seen, or a broken counter."""
    out = []
    where = f"{row['network']} {row['dtype']} {row['mode']} {row['task']}"
    if row["mode"] != "eager":
        for v in (v for v in VARIANTS if f"{v}_graphs" in row):
            if not row.get(f"{v}_graphs"):
                out.append(f"{where}: no compiled code was seen for {v}, so the opaque-op check proved nothing")
            if row.get(f"{v}_opaque_in_code"):
                out.append(f"{where}: {row[f'{v}_opaque_in_code']} call(s) of torchtrt_swish left in {v}'s "
                           f"compiled code")
            if row.get(f"{v}_opaque_calls"):
                out.append(f"{where}: {row[f'{v}_opaque_calls']:g} torchtrt_swish call(s) per compiled step ({v})")
    elif "ours_opaque_calls" in row:
        want = swaps * (2 if row["task"] == "train" else 1)
        if row["ours_opaque_calls"] != want or row["plain_opaque_calls"] != 0:
            out.append(f"{where}: the opaque-op counter saw {row['ours_opaque_calls']:g} calls per eager step of ours "
                       f"(expected {want}) and {row['plain_opaque_calls']:g} of plain (expected 0)")
    return out


def _ms(v: float) -> str:
    return "n/a" if math.isnan(v) else f"{v:.3f}" if v < 10 else f"{v:.2f}"


def _pct(v: float) -> str:
    return "n/a" if math.isnan(v) else f"{v:.1%}"


def _ratio(v: float) -> str:
    return "n/a" if math.isnan(v) else f"{v:.3f}"


TABLE_HEAD = ("| network | dtype | mode | task | wall ms plain / ours (spread) | wall o/p | device ms plain / ours "
              "(spread) | device o/p | host ms plain / ours | host o/p | kernels plain / ours | opaque ours |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|")


def row_notes(row: dict) -> str:
    """What makes a row not the run it says it is: CUDA graphs skipped, graph breaks, compiles while timing."""
    notes = [f"{what} {total}" for what, total in (
        ("cudagraphs skipped", sum(row.get(f"{v}_cudagraph_skips", 0) for v in VARIANTS)),
        ("graph breaks", sum(row.get(f"{v}_graph_breaks", 0) for v in VARIANTS)),
        ("compiles while timed", row.get("late_compiles", 0))) if total]
    return f" ({', '.join(notes)})" if notes else ""


def table_line(row: dict) -> str:
    """One markdown line of the results table (o/p: ours / plain, < 1 is ours faster)."""
    def pair(k):
        return (f"{_ms(row[f'plain_{k}_ms'])} / {_ms(row[f'ours_{k}_ms'])} "
                f"({_pct(row[f'plain_{k}_spread'])}, {_pct(row[f'ours_{k}_spread'])})")
    if row["mode"] == "eager":
        opaque = f"{row['ours_opaque_calls']:g}/step (eager)"
    else:
        opaque = f"{row['ours_opaque_calls']:g}/step, {row['ours_opaque_in_code']} in {row['ours_graphs']} graphs"
    cells = [row["network"], row["dtype"], row["mode"] + row_notes(row), row["task"], pair("wall"),
             _ratio(row["wall_ratio"]), pair("device"), _ratio(row["device_ratio"]),
             f"{_ms(row['plain_host_ms'])} / {_ms(row['ours_host_ms'])}", _ratio(row["host_ratio"]),
             f"{row['plain_kernels']:g} / {row['ours_kernels']:g}", opaque]
    return "| " + " | ".join(cells) + " |"


FIRST_COLUMNS = ("network", "shape", "format", "batch", "dtype", "mode", "task", "steps", "wall_ratio",
                 "device_ratio", "host_ratio", "plain_wall_ms", "ours_wall_ms", "plain_device_ms", "ours_device_ms",
                 "plain_host_ms", "ours_host_ms", "ours_opaque_calls", "ours_opaque_in_code")


def write_outputs(rows: list[dict], out: Path, header: str) -> None:
    """The CSV (every key of every row) and the markdown table next to it (out with .md)."""
    from benchmarks.bench_swish import write_csv

    write_csv(rows, out, FIRST_COLUMNS)
    lines = [header, "", TABLE_HEAD] + [table_line(r) for r in rows if "plain_wall_ms" in r]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")


def parse_args(argv):
    """The command line (see the module docstring); exits 2 with one line on a bad value."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("networks.csv"))
    ap.add_argument("--networks", default="transformer,regnet_y_400mf")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--smoke", action="store_true", help="tiny networks, batch 2, few steps (a CPU check)")
    ap.add_argument("--dtypes", default=",".join(DTYPES))
    ap.add_argument("--compile-dtypes", default="bf16,fp32", help="dtypes that also get compiled rows")
    ap.add_argument("--modes", default="eager,compile,graphs")
    ap.add_argument("--tasks", default="train,inference")
    ap.add_argument("--batch", type=int, default=0, help="0: each network's default (2 with --smoke)")
    ap.add_argument("--format", choices=["auto", "nchw", "channels_last"], default="auto",
                    help="memory format of image networks (auto: each network's default)")
    ap.add_argument("--rounds", type=int, default=None, help="timing rounds per row (default 5, 2 with --smoke)")
    ap.add_argument("--round-ms", type=float, default=250.0, help="wall time of one variant's round")
    ap.add_argument("--min-steps", type=int, default=None, help="steps per round at least (default 2, 1 smoke)")
    ap.add_argument("--profile-steps", type=int, default=None,
                    help="profiled steps per round, after one discarded (default 8, 1 smoke)")
    ap.add_argument("--warmup-steps", type=int, default=None,
                    help="untimed steps per variant first, the compile included (default: 3 eager, 10 compiled "
                         "(CUDA graphs record on the third call); 2 with --smoke; 0: by mode)")
    ap.add_argument("--fp32-matmul", choices=["highest", "high"], default="high",
                    help="torch.set_float32_matmul_precision for the fp32 rows (high: TF32 matmuls, what "
                         "torch.compile advises on this GPU; convolutions use TF32 by default either way)")
    ap.add_argument("--backend", default="inductor",
                    help="torch.compile backend (another one, e.g. aot_eager, keeps the op: a check of the checks)")
    ap.add_argument("--compile-only", action="store_true",
                    help="compile and warm up the compiled rows, no timing (fills inductor's caches)")
    args = ap.parse_args(argv)
    small = args.smoke
    for k, full, smoke in (("rounds", 5, 2), ("min_steps", 2, 1), ("profile_steps", 8, 1), ("warmup_steps", 0, 2)):
        if getattr(args, k) is None:
            setattr(args, k, smoke if small else full)  # warmup_steps 0: by mode, in measure_row
    lists = {"networks": networks.NETWORKS, "dtypes": DTYPES, "compile_dtypes": DTYPES, "modes": MODES,
             "tasks": TASKS}
    for k, allowed in lists.items():
        vals = [v for v in getattr(args, k).split(",") if v]
        bad = [v for v in vals if v not in allowed]
        if bad or (not vals and k != "compile_dtypes"):
            ap.error(f"--{k.replace('_', '-')}: unknown {bad or 'empty list'}; choose from {', '.join(allowed)}")
        setattr(args, k, vals)
    for k, least in (("rounds", 1), ("min_steps", 1), ("profile_steps", 1), ("warmup_steps", 0)):
        if getattr(args, k) < least:
            ap.error(f"--{k.replace('_', '-')} must be >= {least}, got {getattr(args, k)}")
    if args.batch < 0 or not args.round_ms > 0:
        ap.error(f"--batch must be >= 0 and --round-ms > 0, got {args.batch} and {args.round_ms}")
    if args.backend != "inductor" and "graphs" in args.modes:
        ap.error(f"--modes graphs needs the inductor backend (mode='reduce-overhead'), got --backend {args.backend}")
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: no CUDA GPU is visible (use --device cpu --smoke for a CPU check)")
    return args


def dtype_setup(dname: str, models: dict, x, device: str):
    """(models, input, autocast context factory) for a dtype: pure bf16 casts copies of the models and the input."""
    if dname == "bf16":
        return {k: copy.deepcopy(m).to(torch.bfloat16) for k, m in models.items()}, x.to(torch.bfloat16), \
            contextlib.nullcontext
    if dname == "amp":
        return models, x, lambda: torch.autocast(device, dtype=torch.bfloat16)
    return models, x, contextlib.nullcontext


def run(args) -> int:
    """Every row of every network; prints rows as measured; 1 if a row shows the op opaque or a broken counter."""
    from benchmarks import bench_swish  # noqa: F401  (raises dynamo's recompile limits: fail, never time eager)

    dev = args.device
    torch.set_float32_matmul_precision(args.fp32_matmul)
    rows: list[dict] = []
    problems: list[str] = []
    header = (f"device {torch.cuda.get_device_name() if dev == 'cuda' else 'cpu'}, torch {torch.__version__}"
              f"{', smoke sizes' if args.smoke else ''}, fp32 matmul precision {args.fp32_matmul}; o/p = ours / "
              f"plain; spread = (max - min) / median over {args.rounds} rounds")
    print(header, flush=True)
    if dev == "cuda":  # CUPTI's first start takes seconds; not inside a row
        profile_steps(lambda: torch.zeros(1, device=dev).add_(1), 1, dev)
    for name in args.networks:
        net = networks.NETWORKS[name]
        batch = args.batch or (2 if args.smoke else net.batch)
        cl = net.channels_last if args.format == "auto" else args.format == "channels_last"
        models, swaps, x32, target = networks.variants_with_batch(net, dev, args.smoke, batch, cl)
        err = networks.check_same(models, x32[:2])
        fmt = "channels_last" if cl else "contiguous"
        shape = f"batch {batch}, {net.describe(args.smoke)}"
        print(f"{name}: {shape}, {fmt}, {swaps} SiLU replaced; eval outputs ours vs plain: relative error "
              f"{err:.1e}", flush=True)
        loss = networks.loss_fn(net)
        for dname in args.dtypes:
            dmodels, x, amp = dtype_setup(dname, models, x32, dev)
            for mode in args.modes:
                if mode != "eager" and dname not in args.compile_dtypes:
                    continue
                if args.compile_only and mode == "eager":
                    continue
                for task in args.tasks:
                    t0 = time.perf_counter()
                    row = {"network": name, "shape": shape, "format": fmt, "batch": batch, "dtype": dname,
                           "mode": mode, "task": task}
                    row.update(measure_row(dmodels, mode, task, x, target, loss, amp, args, dev))
                    row["row_s"] = time.perf_counter() - t0
                    if args.compile_only:
                        print(f"{name} {dname} {mode} {task}: compiled and warmed up in {row['row_s']:.1f} s",
                              flush=True)
                        continue
                    rows.append(row)
                    problems += row_problems(row, swaps)
                    print(table_line(row) + f"  [{row['row_s']:.0f} s]", flush=True)
                    write_outputs(rows, args.out, header)
                    gc.collect()
                    if dev == "cuda":
                        torch.cuda.empty_cache()
            del dmodels
        del models
        torch._dynamo.reset()
    if not args.compile_only:
        write_outputs(rows, args.out, header)
        print(f"wrote {args.out} and {args.out.with_suffix('.md')} ({len(rows)} rows)")
    for p in problems:
        print(f"CHECK FAILED: {p}")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run the table."""
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))  # `timeout`: the outputs so far are already written
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
