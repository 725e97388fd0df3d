"""Resource and SASS report for the kernels of csrc/kernels/*.cu (sm_90): registers, stack, spills, load/store widths.

Needs no GPU: nvcc -Xptxas -v for the resource report and cuobjdump (the toolkit's, or the copy Triton ships) for
the SASS. Prints a Markdown table; the vectorized kernels (pack width 4 for fp32, 8 for fp16/bf16) must show only
128-bit global loads and stores (LDG.E.128 / STG.E.128) for x, g, y and dx, and the forward kernels that small
fp16/bf16 tensors take on purpose (pack width 4, 8 bytes) only 64-bit ones (LDG.E.64 / STG.E.64).

Usage: python benchmarks/kernel_report.py [--arch 90]
"""
from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cuobjdump() -> str:
    """The toolkit's cuobjdump, else the one in Triton's wheel."""
    found = shutil.which("cuobjdump") or (Path("/usr/local/cuda/bin/cuobjdump") if Path(
        "/usr/local/cuda/bin/cuobjdump").exists() else None)
    if found:
        return str(found)
    try:
        import triton

        cand = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        if cand.exists():
            return str(cand)
    except ImportError:
        pass
    raise SystemExit("kernel_report: no cuobjdump (install the CUDA toolkit or triton)")


def demangle_short(name: str) -> str:
    """swishForwardKernel<__half, 8, Mode 0, 256, 1> -> 'swishForwardKernel fp16 vec8 scalar t256 ppt1'."""
    m = re.search(r"(swish[A-Za-z]+Kernel|finalize[A-Za-z]+Kernel)I(.*)$", name)
    if not m:
        return name
    kern, rest = m.groups()
    dtype = "bf16" if "bfloat16" in rest else "fp16" if "half" in rest else "fp32"
    nums = re.findall(r"Li(\d+)E", rest)
    mode = re.search(r"ModeE(\d)", rest)
    tag = f"{kern} {dtype}"
    if nums:
        tag += " vec" + nums[0]
    if mode:
        modes = ["scalar", "full", "last_vec", "last_fixed", "uniform_vec", "span2", "periodic"]
        tag += " " + modes[int(mode.group(1))]
    if len(nums) >= 3:
        tag += f" t{nums[1]} ppt{nums[2]}"  # block size, packs per thread
    return tag


def main() -> int:
    """Compile, parse, print."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--arch", default="90")
    args = ap.parse_args()
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    ptxas_log, sass = "", ""
    with tempfile.TemporaryDirectory() as tmp:
        for src in sorted((ROOT / "csrc" / "kernels").glob("*.cu")):
            obj = Path(tmp) / f"{src.stem}.o"
            proc = subprocess.run([nvcc, "-std=c++17", "-O3", "-c", "-Xcompiler", "-fPIC", f"-I{ROOT / 'csrc'}",
                                   "-gencode", f"arch=compute_{args.arch},code=sm_{args.arch}", "-Xptxas", "-v",
                                   str(src), "-o", str(obj)],
                                  capture_output=True, text=True, check=True)
            ptxas_log += proc.stderr
            sass += subprocess.run([cuobjdump(), "--dump-sass", str(obj)], capture_output=True, text=True,
                                   check=True).stdout
        res: dict[str, dict] = {}
        current = None
        for line in ptxas_log.splitlines():
            m = re.search(r"Function properties for (\S+)", line)
            if m:
                current = m.group(1)
                res.setdefault(current, {})
                continue
            if current is None:
                continue
            m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
            if m:
                res[current].update(stack=int(m.group(1)), spill_st=int(m.group(2)), spill_ld=int(m.group(3)))
            m = re.search(r"Used (\d+) registers", line)
            if m:
                res[current]["regs"] = int(m.group(1))
    mem: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    fn = None
    for line in sass.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            fn = m.group(1)
            continue
        m = re.search(r"\b((?:LDG|STG)\.E(?:\.[A-Z0-9]+)*)", line)
        if fn and m:
            op = m.group(1).replace(".CONSTANT", "").replace(".EL", "")
            mem[fn][op] += 1
    print("| kernel | regs | stack | spills (st/ld) | global loads | global stores |")
    print("|---|---|---|---|---|---|")
    for name in sorted(res, key=demangle_short):
        r = res[name]
        loads = ", ".join(f"{k} x{v}" for k, v in sorted(mem[name].items()) if k.startswith("LDG"))
        stores = ", ".join(f"{k} x{v}" for k, v in sorted(mem[name].items()) if k.startswith("STG"))
        print(f"| {demangle_short(name)} | {r.get('regs', '?')} | {r.get('stack', '?')} | "
              f"{r.get('spill_st', '?')}/{r.get('spill_ld', '?')} | {loads} | {stores} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
