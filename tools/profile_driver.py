"""Run the op's forward and fused backward a few times per (size, dtype, layout), for a profiler to time per kernel.

Usage on the H200 (per-kernel durations; ncu with --clock-control none, so the GPU keeps its own clocks):
    ncu --clock-control none --metrics gpu__time_duration.sum --csv python3 tools/profile_driver.py > $OUT/ncu.csv
The layouts are bench_swish's: x is [N/256, 256], scalar bias [1] or per-channel bias [256] (last dim); or, with
--layouts, bench_layouts' cases by name (e.g. nchw_32x112x112_n128,dim1_64x16_2^24), whose sizes --sizes then ignores.
--with-compile also runs torch.compile of x * sigmoid(x) + b (bench_swish's peer) in the same ranges, so the
profiler times inductor's kernels next to ours. --torch-profiler needs no external profiler: it prints each variant's
kernels with their mean times (torch.profiler), e.g.
    python3 tools/profile_driver.py --layouts flat_2^24 --dtypes float16 --with-compile --torch-profiler
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torchtrt_swish  # noqa: E402
# bench_swish's peer, with dynamo's recompile limits raised for a grid of sizes, dtypes and layouts.
from benchmarks.bench_swish import compiled_formula  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="16,18,20", help="comma-separated log2 element counts")
    ap.add_argument("--dtypes", default="float32,float16")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--with-compile", action="store_true")
    ap.add_argument("--forward-only", action="store_true", help="no backward (and no grad-mode inputs)")
    ap.add_argument("--layouts", default="", help="comma-separated bench_layouts case names instead of [N/256, 256]")
    ap.add_argument("--torch-profiler", action="store_true",
                    help="no external profiler: print each kernel's mean time (torch.profiler, CUPTI) per variant")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("profile_driver: needs a CUDA GPU")
        return 2
    fns = [torchtrt_swish.swish] + ([compiled_formula] if args.with_compile else [])
    grad = not args.forward_only
    if args.layouts:
        from benchmarks.bench_layouts import CASES, make_inputs

        by_name = {c.name: c for c in CASES}
        shapes = [(nm, by_name[nm]) for nm in args.layouts.split(",")]
    else:
        shapes = [(f"2^{e} {layout}", (e, layout)) for e in (int(v) for v in args.sizes.split(","))
                  for layout in ("scalar", "per_channel")]
    for label, case in shapes:
        for dname in args.dtypes.split(","):
            dt = getattr(torch, dname)
            if args.layouts:
                x, b, g = make_inputs(case, dt, "cuda", grad)
            else:
                e, layout = case
                x = torch.randn(1 << e >> 8, 256, device="cuda", dtype=dt, requires_grad=grad)
                b = torch.randn(1 if layout == "scalar" else 256, device="cuda", dtype=dt, requires_grad=grad)
                g = torch.randn_like(x) if grad else None
            torch.cuda.nvtx.range_push(f"{label} {dname}")
            for fn in fns:
                def run(reps: int, fn=fn) -> None:
                    for _ in range(reps):
                        y = fn(x, b)
                        if grad:
                            torch.autograd.grad(y, (x, b), g)
                if args.torch_profiler:
                    run(2)  # compiled and cached before the profiled calls
                    torch.cuda.synchronize()
                    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                        run(args.reps)
                        torch.cuda.synchronize()
                    _print_kernels(prof, f"{label} {dname} {getattr(fn, '__name__', 'fn')}", args.reps)
                else:
                    run(args.reps)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
    return 0


def _print_kernels(prof, what: str, reps: int) -> None:
    """One line per kernel of a profile: launches per call and mean microseconds, in launch order."""
    times: dict[str, list[float]] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            times.setdefault(e.name, []).append(e.time_range.elapsed_us())
    total = sum(sum(v) for v in times.values()) / reps
    print(f"== {what}: {total:.2f} us of kernels per call")
    for name, v in times.items():
        print(f"   {len(v) / reps:4.1f} x {sum(v) / len(v):8.2f} us  {name[:110]}")


if __name__ == "__main__":
    sys.exit(main())
