"""The TensorRT plugin's enqueue (driven through the conformance harness) vs the torch op, same inputs, on the H200.

Both call the same launcher, so their kernel time must agree; this measures it two ways, at sizes where launch
overhead is negligible (2^24, 2^28):
* kernel time: the duration of every forward kernel the two launch, as CUDA's profiler (CUPTI, through
  torch.profiler) records it, median over 8 alternating rounds of k calls each. This is the number the goal is
  about.
* call time: k back-to-back calls between CUDA events on one stream, the op's and the plugin's rounds
  alternating (ABAB...) so that neither always runs first; median of the rounds.
Outputs are compared bit for bit before timing.

Usage: python benchmarks/bench_plugin.py [--out $OUT/bench_plugin.csv]
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import sysconfig
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import torchtrt_swish  # noqa: E402
from benchmarks.bench_swish import calls, timed_round, write_csv  # noqa: E402

NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


def load_harness():
    """The _trt_harness module from build/native."""
    path = ROOT / "build" / "native" / f"_trt_harness{sysconfig.get_config_var('EXT_SUFFIX')}"
    spec = importlib.util.spec_from_file_location("_trt_harness", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def call_times(fns: dict, k: int, reps: int, stream: torch.cuda.Stream) -> dict:
    """Median microseconds per call of each fn, k calls per round, the fns' rounds alternating in rotating order."""
    times = {name: [] for name in fns}
    names = list(fns)
    with torch.cuda.stream(stream):
        for fn in fns.values():
            for _ in range(3):
                fn()
        torch.cuda.synchronize()
        for rep in range(reps):
            for name in names[rep % len(names):] + names[:rep % len(names)]:
                times[name].append(timed_round(lambda: calls(fns[name], k), k))
    return {name: statistics.median(v) for name, v in times.items()}


def kernel_times(fns: dict, k: int, rounds: int, stream: torch.cuda.Stream) -> dict:
    """Median duration (microseconds) of the swish forward kernels each fn launches, from the profiler: `rounds`
    rounds of k calls per fn, the fns alternating, so that a drift in clocks or memory state hits both alike."""
    durations = {name: [] for name in fns}
    with torch.cuda.stream(stream):
        for fn in fns.values():
            fn()
        torch.cuda.synchronize()
        for _ in range(rounds):
            for name, fn in fns.items():
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                    for _ in range(k):
                        fn()
                    torch.cuda.synchronize()
                got = [ev.time_range.elapsed_us() for ev in prof.events()
                       if ev.device_type == torch.autograd.DeviceType.CUDA and "swishForwardKernel" in ev.name]
                if len(got) != k:
                    raise SystemExit(f"expected {k} forward kernels in the profile of {name}, found {len(got)}")
                durations[name] += got
    return {name: statistics.median(v) for name, v in durations.items()}


def main() -> int:
    """Time plugin enqueue vs op for every dtype and both bias layouts."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("bench_plugin.csv"))
    args = ap.parse_args()
    h = load_harness()
    lib = h.Library(str(torchtrt_swish.plugin_library_path()))
    (creator,) = lib.creators()
    stream = torch.cuda.Stream()
    rows = []
    print(f"{'n':>6} {'dtype':9} {'layout':11} {'op kern us':>10} {'plugin kern us':>14} {'kern ratio':>10}"
          f" {'op call us':>10} {'plugin call us':>14} {'call ratio':>10}")
    for e in (24, 28):
        n = 1 << e
        for dt, name in NAMES.items():
            for layout in ("scalar", "per_channel"):
                x = torch.randn(n // 256, 256, device="cuda", dtype=dt)
                b = torch.randn(1 if layout == "scalar" else 256, device="cuda", dtype=dt)
                y = torch.empty_like(x)
                plugin = creator.create("swish", None, "build")
                ins = [h.TensorDesc(name, list(x.shape)), h.TensorDesc(name, list(b.shape))]
                outs = [h.TensorDesc(name, list(x.shape))]
                assert plugin.on_shape_change(ins, outs) == 0
                ptrs = [x.data_ptr(), b.data_ptr()]

                def run_plugin():
                    rc = plugin.enqueue(ins, outs, ptrs, [y.data_ptr()], 0, torch.cuda.current_stream().cuda_stream)
                    if rc != 0:
                        raise SystemExit(f"enqueue returned {rc}")

                def run_op():
                    torchtrt_swish.swish(x, b)

                torch.cuda.synchronize()
                with torch.cuda.stream(stream):
                    run_plugin()
                    ref = torchtrt_swish.swish(x, b)
                torch.cuda.synchronize()
                bits = {4: torch.int32, 2: torch.int16}[x.element_size()]
                if not torch.equal(y.view(bits), ref.view(bits)):
                    raise SystemExit(f"plugin output differs from the op ({name}, {layout}, 2^{e})")
                del ref
                k, reps = (20, 16) if e <= 24 else (5, 16)
                kern = kernel_times({"op": run_op, "plugin": run_plugin}, k, 8, stream)
                call = call_times({"op": run_op, "plugin": run_plugin}, k, reps, stream)
                rows.append({"n": n, "dtype": name, "layout": layout,
                             "op_kernel_us": kern["op"], "plugin_kernel_us": kern["plugin"],
                             "kernel_ratio": kern["plugin"] / kern["op"],
                             "op_call_us": call["op"], "plugin_call_us": call["plugin"],
                             "call_ratio": call["plugin"] / call["op"]})
                print(f"2^{e:<4} {name:9} {layout:11} {kern['op']:10.2f} {kern['plugin']:14.2f}"
                      f" {kern['plugin'] / kern['op']:10.3f} {call['op']:10.2f} {call['plugin']:14.2f}"
                      f" {call['plugin'] / call['op']:10.3f}", flush=True)
                del plugin, x, y
                torch.cuda.empty_cache()
    write_csv(rows, args.out, list(rows[0]))
    lib.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
