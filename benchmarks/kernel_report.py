"""Resource and SASS report for the kernels of csrc/kernels/*.cu (sm_90): registers, stack, spills, load/store widths.

Needs no GPU: nvcc -Xptxas -v for the resource report and cuobjdump (the toolkit's, or the copy Triton ships) for
the SASS. Prints a Markdown table; the vectorized kernels (pack width 4 for fp32, 8 for fp16/bf16) must show only
128-bit global loads and stores (LDG.E.128 / STG.E.128) for x, g, y and dx, and the kernels that small fp16/bf16
tensors take on purpose (pack width 4, 8 bytes: forward and columns backward) only 64-bit ones (LDG.E.64 /
STG.E.64). "loads first": whether a kernel issues its first round of vector loads (its widest: 128-bit, else 64-bit)
before it uses any of them (waits_between_loads); --check (and tests/test_kernel_report.py) hold the forward and
backward kernels to it, and the channels kernels to index math without 64-bit carries.

Usage: python benchmarks/kernel_report.py [--arch 90] [--check]
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cuda_tools(name: str, home: Path | None = None) -> list[str]:
    """Every copy of the CUDA tool `name` (cuobjdump, ptxas) there is, in order: home's, PATH's, /usr/local/cuda's,
    then the one in Triton's wheel (torch's CUDA builds install it)."""
    triton = importlib.util.find_spec("triton")
    found = [home / "bin" / name if home else None, shutil.which(name), Path("/usr/local/cuda/bin") / name,
             Path(triton.origin).parent / "backends" / "nvidia" / "bin" / name if triton and triton.origin else None]
    return list(dict.fromkeys(str(p) for p in found if p and Path(p).exists()))


def cuobjdump() -> str | None:
    """The first cuobjdump of cuda_tools; None if there is none."""
    return next(iter(cuda_tools("cuobjdump")), None)


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
    elif kern == "swishBackwardChannelsKernel" and len(nums) == 2:
        tag += f" t{nums[1]}"  # the instance's most threads a block
    flags = re.findall(r"Lb([01])E", rest) if kern == "swishForwardKernel" else []
    if flags[:1] == ["1"]:
        tag += " wide"  # 64-bit bias lookups
    if flags[1:2] == ["1"]:
        tag += " skip_l1"  # x loads past L1
    return tag


# A register operand: R12, R12.reuse, -R12, |R12|, R12.H1_H1, R12.64 (a pair).
_REG = re.compile(r"\bR(\d+)(\.64)?")


def _regs(operands: str) -> set[int]:
    """Registers an operand list names (a .64 operand names two)."""
    out: set[int] = set()
    for m in _REG.finditer(operands):
        r = int(m.group(1))
        out.update((r, r + 1) if m.group(2) else (r,))
    return out


def _unpredicated(ins: str) -> str:
    """One SASS instruction without its predicate (@P0, @!UP1)."""
    return re.sub(r"^@!?U?P\w+\s+", "", ins.strip())


def _math_start(instructions: list[str]) -> int:
    """Index of the first MUFU.EX2 (the math starts with exp; an earlier MUFU.RCP can belong to an integer division
    of the index math), or the length when there is none."""
    return next((i for i, ins in enumerate(instructions) if "MUFU.EX2" in ins), len(instructions))


def waits_between_loads(instructions: list[str]) -> list[str]:
    """Instructions that use a vector load's result before the kernel's first round of loads has been issued.

    The round is every load of the kernel's widest vector width (LDG.E.128, or LDG.E.64 in the 8-byte fp16/bf16
    kernels) from the first one up to the first MUFU.EX2 (the math starts with exp; an earlier MUFU.RCP can belong to
    an integer division of the index math). An instruction in between that reads a register such a load wrote makes
    the warp wait for that load before it can issue the next one, so a thread's loads go out one after another
    instead of together (how the bf16 planes backward lost 10 %: the compiler put the conversions right behind each
    load pair). Returns those instructions, [] when the round is clean or the kernel has no vector loads."""
    instructions = [ins.replace("LDG.E.NA.", "LDG.E.") for ins in instructions]  # x loads past L1 count alike
    math = _math_start(instructions)
    widths = {"LDG.E.128": 4, "LDG.E.64": 2}  # registers one load writes
    wide = next((w for w in widths if any(w in ins for ins in instructions[:math])), None)
    if wide is None:
        return []
    loads = [i for i, ins in enumerate(instructions[:math]) if wide in ins]
    loaded: set[int] = set()
    bad = []
    for ins in instructions[loads[0]:loads[-1] + 1]:
        body = _unpredicated(ins)
        op, _, operands = body.partition(" ")
        dest, _, sources = operands.partition(",")
        if op.startswith(wide):
            r = int(re.match(r"\s*R(\d+)", dest).group(1))
            loaded.update(range(r, r + widths[wide]))
        elif not op.startswith("LDG") and _regs(sources if not op.startswith(("STG", "STS")) else operands) & loaded:
            bad.append(body)
    return bad


def loads_after_math(instructions: list[str]) -> list[str]:
    """Global loads placed after the math has begun (the first MUFU.EX2). A forward kernel loads once, so each such
    load waits behind the math of the packs already loaded instead of going out with them (ptxas did that to the fp32
    last-dim kernel's second pack when its bias lookup got a shorter division)."""
    return [body for ins in instructions[_math_start(instructions):] if (body := _unpredicated(ins)).startswith("LDG")]


def checked_waits(code: dict[str, list[str]]) -> dict[str, list[str]]:
    """waits_between_loads of the kernels held to it (forward and backward), and for the forward kernels also
    loads_after_math, by short name; only those that wait."""
    return {demangle_short(name): w for name, ins in code.items()
            if ("Backward" in name or "Forward" in name)
            and (w := waits_between_loads(ins) + (loads_after_math(ins) if "Forward" in name else []))}


def dependent_launch_findings(code: dict[str, list[str]]) -> dict[str, str]:
    """The fused backward's programmatic dependent launch (swish_backward_fused.cu), by short kernel name: every main
    kernel lets its dependents launch (PREEXIT: griddepcontrol.launch_dependents), and every column-sum kernel, which
    may start before that main kernel ends, waits for it (ACQBULK: griddepcontrol.wait) before its first global load.
    Only the kernels that break it."""
    out: dict[str, str] = {}
    for name, ins in code.items():
        ops = [_unpredicated(i).split(" ", 1)[0] for i in ins]
        if "finalizeColumnsKernel" in name:
            wait = next((k for k, op in enumerate(ops) if op == "ACQBULK"), None)
            load = next((k for k, op in enumerate(ops) if op.startswith("LDG")), len(ops))
            if wait is None or load < wait:
                out[demangle_short(name)] = "reads before it waits for the main kernel (griddepcontrol.wait)"
        elif re.search(r"swishBackward(Rows|Cols|Planes)Kernel", name) and "PREEXIT" not in ops:
            out[demangle_short(name)] = "does not let the column sums launch (griddepcontrol.launch_dependents)"
    return out


def carry_findings(code: dict[str, list[str]]) -> dict[str, list[str]]:
    """64-bit adds with carry (IADD3.X) in the channels kernels, by short kernel name; only the kernels that have
    any. Their tensors have at most 2^22 elements, so every offset fits 31 bits and `FastDiv::div31` divides without a
    carry; a carry there is index math gone 64-bit (`div32` took one per pack, 7 % of the fp32 7x7 backward: f3 in
    docs/performance-notes.md)."""
    return {demangle_short(name): c for name, ins in code.items() if "BackwardChannelsKernel" in name
            and (c := [b for i in ins if (b := _unpredicated(i)).startswith("IADD3.X")])}


def split_denominators(instructions: list[str]) -> list[str]:
    """The first reader of each MUFU.EX2 result (through register copies), where it is not one FFMA adding 1
    (`2^j * exp2(r) + 1`, swish_math.cuh's onePlusExpNeg): expf's scaling left as an FMUL, then `+ 1` as an FADD, one
    instruction more an element (what the fp32 kernels compiled to while the sum was written with __fadd_rn)."""
    out = []
    for i, ins in enumerate(instructions):
        body = _unpredicated(ins)
        if not body.startswith("MUFU.EX2"):
            continue
        r = int(re.match(r"MUFU\.EX2 R(\d+)", body).group(1))
        for later in instructions[i + 1:]:
            use = _unpredicated(later)
            dest, _, sources = use.partition(" ")[2].partition(",")
            if r in _regs(sources):
                if use.startswith("MOV "):  # a register shuffle: follow the copy
                    r = int(re.match(r"\s*R(\d+)", dest).group(1))
                    continue
                if not (use.startswith("FFMA") and use.endswith(", 1")):
                    out.append(use)
                break
    return out


def denominator_findings(code: dict[str, list[str]]) -> dict[str, list[str]]:
    """split_denominators of every forward and backward kernel, by short name; only those that have any."""
    return {demangle_short(name): f for name, ins in code.items()
            if ("Backward" in name or "Forward" in name) and (f := split_denominators(ins))}


def compile_kernels(arch: str, nvcc: str, dump: str) -> tuple[dict[str, dict], dict[str, list[str]]]:
    """Compile csrc/kernels/*.cu for sm_<arch>: ptxas resources per kernel and each kernel's SASS instructions."""
    ptxas_log, sass = "", ""
    with tempfile.TemporaryDirectory() as tmp:
        for src in sorted((ROOT / "csrc" / "kernels").glob("*.cu")):
            obj = Path(tmp) / f"{src.stem}.o"
            proc = subprocess.run([nvcc, "-std=c++17", "-O3", "-c", "-Xcompiler", "-fPIC", f"-I{ROOT / 'csrc'}",
                                   "-gencode", f"arch=compute_{arch},code=sm_{arch}", "-Xptxas", "-v",
                                   str(src), "-o", str(obj)],
                                  capture_output=True, text=True, check=True)
            ptxas_log += proc.stderr
            sass += subprocess.run([dump, "--dump-sass", str(obj)], capture_output=True, text=True,
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
    code: dict[str, list[str]] = collections.defaultdict(list)
    fn = None
    for line in sass.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            fn = m.group(1)
            continue
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+([^;]+);", line)
        if fn and m:
            code[fn].append(m.group(1))
    return res, code


def main() -> int:
    """Compile, parse, print; with --check, exit 1 when a kernel's first round of loads waits on itself, the
    backward's dependent launch is not paired, a channels kernel carries, or a denominator takes two instructions."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--arch", default="90")
    ap.add_argument("--check", action="store_true", help="exit 1 if a kernel's 'loads first' is not ok")
    args = ap.parse_args()
    dump = cuobjdump()
    if dump is None:
        raise SystemExit("kernel_report: no cuobjdump (install the CUDA toolkit or triton)")
    res, code = compile_kernels(args.arch, shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc", dump)
    print("| kernel | regs | stack | spills (st/ld) | global loads | global stores | loads first |")
    print("|---|---|---|---|---|---|---|")
    failed = checked_waits(code)
    for name in sorted(res, key=demangle_short):
        r = res[name]
        mem = collections.Counter(m.group(1).replace(".CONSTANT", "").replace(".EL", "") for ins in code[name]
                                  if (m := re.search(r"\b((?:LDG|STG)\.E(?:\.[A-Z0-9]+)*)", ins)))
        loads = ", ".join(f"{k} x{v}" for k, v in sorted(mem.items()) if k.startswith("LDG"))
        stores = ", ".join(f"{k} x{v}" for k, v in sorted(mem.items()) if k.startswith("STG"))
        waits = waits_between_loads(code[name])
        print(f"| {demangle_short(name)} | {r.get('regs', '?')} | {r.get('stack', '?')} | "
              f"{r.get('spill_st', '?')}/{r.get('spill_ld', '?')} | {loads} | {stores} | "
              f"{'waits: ' + waits[0] if waits else 'ok'} |")
    deps = dependent_launch_findings(code)
    for name, why in deps.items():
        print(f"kernel_report: {name} {why}")
    carries = carry_findings(code)
    for name, found in carries.items():
        print(f"kernel_report: {name} adds with carry ({len(found)}x {found[0]})")
    split = denominator_findings(code)
    for name, found in split.items():
        print(f"kernel_report: {name} scales exp2 apart from adding 1 ({len(found)}x {found[0]})")
    if args.check and failed:
        print(f"kernel_report: loads wait on earlier loads in {', '.join(failed)}")
    return 1 if args.check and (failed or deps or carries or split) else 0


if __name__ == "__main__":
    sys.exit(main())
