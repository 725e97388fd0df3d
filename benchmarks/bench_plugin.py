"""The TensorRT plugin's enqueue (driven through the conformance harness) vs the torch op, same inputs, on the H200.

Both call the same launcher, so their kernel time must agree; this measures it. Each variant: k back-to-back calls
between CUDA events on one stream, median of reps. Sizes where launch overhead is negligible (2^24, 2^28), so the
numbers compare kernels rather than Python (the harness's pybind call and the dispatcher differ on the host).
Outputs are compared bit for bit before timing.

Usage: python benchmarks/bench_plugin.py [--out $OUT/bench_plugin.csv]
"""
from __future__ import annotations

import argparse
import csv
import importlib.util
import sys
import sysconfig
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import torchtrt_swish  # noqa: E402
from benchmarks.bench_swish import time_loop  # noqa: E402

NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


def load_harness():
    """The _trt_harness module from build/native."""
    path = ROOT / "build" / "native" / f"_trt_harness{sysconfig.get_config_var('EXT_SUFFIX')}"
    spec = importlib.util.spec_from_file_location("_trt_harness", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def timed(fn, k: int, reps: int, stream: torch.cuda.Stream) -> float:
    """Median microseconds per call on `stream` (bench_swish's eager-loop timing)."""
    with torch.cuda.stream(stream):
        return time_loop(fn, k, reps)


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
    print(f"{'n':>6} {'dtype':9} {'layout':11} {'op us':>9} {'plugin us':>10} {'plugin/op':>9}")
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

                torch.cuda.synchronize()
                with torch.cuda.stream(stream):
                    run_plugin()
                    ref = torchtrt_swish.swish(x, b)
                torch.cuda.synchronize()
                bits = {4: torch.int32, 2: torch.int16}[x.element_size()]
                if not torch.equal(y.view(bits), ref.view(bits)):
                    raise SystemExit(f"plugin output differs from the op ({name}, {layout}, 2^{e})")
                k, reps = (20, 15) if e <= 24 else (5, 15)
                t_op = timed(lambda: torchtrt_swish.swish(x, b), k, reps, stream)
                t_pl = timed(run_plugin, k, reps, stream)
                rows.append({"n": n, "dtype": name, "layout": layout, "op_us": t_op, "plugin_us": t_pl,
                             "ratio": t_pl / t_op})
                print(f"2^{e:<4} {name:9} {layout:11} {t_op:9.2f} {t_pl:10.2f} {t_pl / t_op:9.3f}")
                del plugin, x, y, ref
                torch.cuda.empty_cache()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lib.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
