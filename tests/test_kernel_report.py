"""benchmarks/kernel_report.py's load-order check: its detector on hand-written SASS, then the real kernels.

A thread's first round of 128-bit loads must all be issued before any of them is used: a use in between makes the
warp wait for that load before it can issue the next one (the bf16 planes backward lost 10 % of its bandwidth that
way). The check needs no GPU, only nvcc and cuobjdump."""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import pytest
from tools_native import ROOT, cuda_root

_spec = importlib.util.spec_from_file_location("kernel_report", ROOT / "benchmarks" / "kernel_report.py")
kernel_report = importlib.util.module_from_spec(_spec)
sys.modules.setdefault(_spec.name, kernel_report)
_spec.loader.exec_module(kernel_report)

CLEAN = [
    "MUFU.RCP R0, R0",  # an integer division's reciprocal: not the start of the math
    "IMAD.WIDE R4, R3, 0x10, R4",
    "@!P0 LDG.E.128.CONSTANT R8, desc[UR4][R4.64]",
    "IMAD.WIDE R6, R3, 0x10, R6",
    "@!P1 LDG.E.128.CONSTANT R12, desc[UR4][R6.64+0x1000]",
    "SHF.L.U32 R16, R8, 0x10, RZ",
    "MUFU.EX2 R17, R16",
]


@pytest.fixture(scope="module")
def code():
    """SASS of every kernel of csrc/kernels compiled for sm_90, once for the module's checks of the real kernels."""
    home = cuda_root()
    dump = kernel_report.cuobjdump()
    if home is None or dump is None:
        pytest.skip("needs nvcc (CUDA toolkit) and cuobjdump (CUDA toolkit or triton's wheel)")
    return kernel_report.compile_kernels("90", str(home / "bin" / "nvcc"), dump)[1]


def test_clean_round_passes():
    """Address math between the loads and conversions after the last one are fine."""
    assert kernel_report.waits_between_loads(CLEAN) == []


def test_conversion_between_loads_is_flagged():
    """A conversion of the first pack placed before the second load is the pattern that cost the bf16 backward."""
    code = CLEAN[:3] + ["PRMT R20, R9, 0x7732, RZ"] + CLEAN[3:]
    assert kernel_report.waits_between_loads(code) == ["PRMT R20, R9, 0x7732, RZ"]


def test_every_register_of_a_pack_counts_and_a_pair_operand_too():
    """A 128-bit load writes four registers; an R10.64 operand reads R10 and R11."""
    code = CLEAN[:3] + ["IADD3 R30, P2, R11, R2, RZ"] + CLEAN[3:]
    assert kernel_report.waits_between_loads(code) == ["IADD3 R30, P2, R11, R2, RZ"]
    pair = CLEAN[:3] + ["LEA R31, P2, R10.64, R2, 0x1"] + CLEAN[3:]
    assert kernel_report.waits_between_loads(pair) == ["LEA R31, P2, R10.64, R2, 0x1"]


def test_writing_a_register_the_load_also_wrote_is_not_a_use():
    """Only source operands count: the destination of an instruction is not read."""
    code = CLEAN[:3] + ["MOV R9, RZ"] + CLEAN[3:]
    assert kernel_report.waits_between_loads(code) == []


def test_loads_past_l1_are_a_round_too():
    """The forward's x loads that bypass L1 (LDG.E.NA.128) are the round as the others are, and the kernel's name says
    which copy it is."""
    na = [ins.replace("LDG.E.128", "LDG.E.NA.128") for ins in CLEAN]
    assert kernel_report.waits_between_loads(na) == []
    code = na[:3] + ["PRMT R20, R9, 0x7732, RZ"] + na[3:]
    assert kernel_report.waits_between_loads(code) == ["PRMT R20, R9, 0x7732, RZ"]
    base = "_ZN14torchtrt_swish12_GLOBAL__N_118swishForwardKernelIfLi4ELNS_6detail7FwdModeE2ELi128ELi2E"
    assert kernel_report.demangle_short(base + "Lb0ELb1EEEvv").endswith("ppt2 skip_l1")
    assert kernel_report.demangle_short(base + "Lb1ELb0EEEvv").endswith("ppt2 wide")


def test_no_wide_loads_no_finding():
    """Scalar kernels (no vector loads) have no round to check."""
    assert kernel_report.waits_between_loads(["LDG.E R2, desc[UR4][R4.64]", "FADD R3, R2, 1", "MUFU.EX2 R3, R3"]) == []


def test_8_byte_rounds_are_checked():
    """The 8-byte fp16/bf16 kernels' round of LDG.E.64: a load writes two registers, so a use of the second one
    before the next load is flagged and a use of the register past it is not."""
    eight = [ins.replace("LDG.E.128", "LDG.E.64") for ins in CLEAN]
    assert kernel_report.waits_between_loads(eight) == []
    second = eight[:3] + ["PRMT R20, R9, 0x7732, RZ"] + eight[3:]
    assert kernel_report.waits_between_loads(second) == ["PRMT R20, R9, 0x7732, RZ"]
    past = eight[:3] + ["PRMT R20, R10, 0x7732, RZ"] + eight[3:]
    assert kernel_report.waits_between_loads(past) == []
    # With 128-bit loads in the kernel, its 64-bit ones (a bias pack) are not the round.
    mixed = CLEAN[:3] + ["LDG.E.64 R20, desc[UR4][R2.64]", "FADD R22, R21, 1"] + CLEAN[3:]
    assert kernel_report.waits_between_loads(mixed) == []


def test_a_load_after_the_math_has_begun_is_flagged():
    """A forward kernel's second pack loaded after the first pack's exp (what ptxas made of the fp32 last-dim kernel
    with a shorter bias division) is flagged; loads ahead of the exp are not."""
    late = CLEAN[:3] + ["MUFU.EX2 R17, R16", "@!P1 LDG.E.128.CONSTANT R12, desc[UR4][R6.64+0x1000]"]
    assert kernel_report.loads_after_math(late) == ["LDG.E.128.CONSTANT R12, desc[UR4][R6.64+0x1000]"]
    assert kernel_report.loads_after_math(CLEAN) == []
    name = "_ZN14torchtrt_swish12_GLOBAL__N_118swishForwardKernelIfLi4ELNS_6detail7FwdModeE2ELi128ELi2ELb0EEEvv"
    assert list(kernel_report.checked_waits({name: late}).values()) == [[late[-1].removeprefix("@!P1 ")]]


def test_kernels_issue_their_loads_first(code):
    """Every forward and backward kernel of csrc/kernels, compiled for sm_90, issues its first round of loads before
    using one (the bf16 forward with a per-pack bias once converted its x packs before loading their bias), and every
    forward kernel issues all its loads before its math."""
    backward = [name for name in code if "Backward" in name]
    assert len(backward) >= 12, sorted(code)  # rows, planes, columns and unfused, three dtypes, packed
    forward = [name for name in code if "Forward" in name]
    assert len(forward) >= 42, sorted(code)  # seven bias modes, two launch shapes, three dtypes
    waits = kernel_report.checked_waits(code)
    assert not waits, waits


SUMS = ["LDC R1, c[0x0][0x28]", "S2R R12, SR_TID.X", "ACQBULK", "@!P4 LDG.E.CONSTANT R26, desc[UR12][R20.64]"]
MAIN = ["LDC R1, c[0x0][0x28]", "PREEXIT", "LDG.E.128.CONSTANT R8, desc[UR4][R4.64]"]


def test_dependent_launch_pairing_detector():
    """The column sums may start while the main kernel runs: a load ahead of their wait (or no wait) is flagged, and
    so is a main kernel that never lets them launch."""
    fin = "_ZN14torchtrt_swish12_GLOBAL__N_121finalizeColumnsKernelIfEEvPKfllilPT_"
    main = "_ZN14torchtrt_swish6detail12_GLOBAL__N_125swishBackwardPlanesKernelIfLi4EEEvPKT_S5_PS3_NS0_10PlanesPlanEPf"
    assert kernel_report.dependent_launch_findings({fin: SUMS, main: MAIN}) == {}
    early = {fin: [SUMS[0], SUMS[3], SUMS[2]]}
    assert list(kernel_report.dependent_launch_findings(early).values()) == [
        "reads before it waits for the main kernel (griddepcontrol.wait)"]
    assert kernel_report.dependent_launch_findings({fin: [SUMS[0], SUMS[3]]})
    assert list(kernel_report.dependent_launch_findings({main: [MAIN[0], MAIN[2]]}).values()) == [
        "does not let the column sums launch (griddepcontrol.launch_dependents)"]


def test_backward_kernels_pair_their_dependent_launch(code):
    """Every fused backward main kernel (rows, columns, planes; three dtypes, two pack widths) lets the column sums
    launch early, and both column-sum kernels wait for it before reading the partial sums."""
    assert sum("finalizeColumnsKernel" in name for name in code) >= 2, sorted(code)
    assert sum(("BackwardRows" in n or "BackwardCols" in n or "BackwardPlanes" in n) for n in code) >= 18, sorted(code)
    assert kernel_report.dependent_launch_findings(code) == {}


def test_carry_detector():
    """A predicated or plain IADD3.X in a channels kernel is flagged, by name; other kernels and other adds are not."""
    ch = "_ZN14torchtrt_swish6detail12_GLOBAL__N_127swishBackwardChannelsKernelIfLi1ELi256EEEvPKT_S5_PS3_NS0_12ChannelsPlanES4_"
    rows = "_ZN14torchtrt_swish6detail12_GLOBAL__N_123swishBackwardRowsKernelIfLi4EEEvPKT_S5_PS3_NS0_8RowsPlanEPf"
    carry = ["IMAD.HI.U32 R3, P0, R13, UR10, R12", "@!P1 IADD3.X R12, RZ, RZ, RZ, P0, !PT", "IADD3 R4, R4, R37, RZ"]
    assert kernel_report.carry_findings({ch: carry, rows: carry}) == {
        kernel_report.demangle_short(ch): ["IADD3.X R12, RZ, RZ, RZ, P0, !PT"]}
    assert kernel_report.carry_findings({ch: [carry[2]]}) == {}


def test_channels_kernels_index_in_32_bits(code):
    """Every channels kernel (fp32 in three pack widths, fp16 and bf16 in four, two block caps each) computes its pack
    offsets without a 64-bit carry (FastDiv::div31: the kernel takes at most 2^22 elements)."""
    assert sum("BackwardChannelsKernel" in name for name in code) == 22, sorted(code)
    assert kernel_report.carry_findings(code) == {}


def test_split_denominator_detector():
    """An exp2 result scaled by an FMUL and then given its 1 by an FADD is flagged at the FMUL; the one FFMA `2^j * e +
    1` is not (through a register copy too), an FFMA with another addend is, and an exp2 nobody reads is not."""
    fused = ["MUFU.EX2 R18, R18", "SHF.L.U32 R19, R0, 0x17, RZ", "FFMA R19, R19, R18, 1"]
    split = ["MUFU.EX2 R18, R18", "SHF.L.U32 R19, R0, 0x17, RZ", "FMUL R16, R19, R18", "FADD R16, R16, 1"]
    other = ["MUFU.EX2 R18, R18", "FFMA R19, R19, R18, R2"]
    moved = ["MUFU.EX2 R75, R18", "MOV R60, R75", "FFMA R19, R19, R60, 1"]
    assert kernel_report.split_denominators(fused) == []
    assert kernel_report.split_denominators(moved) == []
    assert kernel_report.split_denominators(moved[:2] + split[2:]) == []  # the copy R60 is not what FMUL reads
    assert kernel_report.split_denominators(moved[:2] + ["FMUL R16, R19, R60"]) == ["FMUL R16, R19, R60"]
    assert kernel_report.split_denominators(["@P0 MUFU.EX2 R18, R18"]) == []
    assert kernel_report.split_denominators(split) == ["FMUL R16, R19, R18"]
    assert kernel_report.split_denominators(other) == ["FFMA R19, R19, R18, R2"]
    name = "_ZN14torchtrt_swish12_GLOBAL__N_118swishForwardKernelIfLi4ELNS_6detail7FwdModeE2ELi128ELi2ELb0EEEvv"
    assert list(kernel_report.denominator_findings({name: split, "otherKernel": split}).values()) == [
        ["FMUL R16, R19, R18"]]


def test_every_denominator_is_one_fma(code):
    """In every forward and backward kernel (fp32 included, whose sum PyTorch rounds on its own: the contraction gives
    the same bits, swish_math.cuh) each exp2 result is first read by the FFMA that scales it and adds 1."""
    assert sum("MUFU.EX2" in i for name in code if "Forward" in name for i in code[name]) >= 42 * 4, sorted(code)
    assert kernel_report.denominator_findings(code) == {}


def _forward_ptx(home, cuda_arch: int) -> str:
    """swish_forward.cu's PTX for compute capability cuda_arch (610: 6.1). A toolkit without that target (CUDA 13
    starts at 7.5) compiles for 7.5 with __CUDA_ARCH__ set to cuda_arch instead (nvcc warns that it is redefined):
    the source's own guards decide which instructions it emits."""
    nvcc = str(home / "bin" / "nvcc")
    listed = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True).stdout.split()
    target = f"compute_{cuda_arch // 10}"
    arch = [f"-arch={target}"] if target in listed else ["-arch=compute_75", f"-D__CUDA_ARCH__={cuda_arch}"]
    proc = subprocess.run([nvcc, "-std=c++17", "-O3", "--ptx", *arch, f"-I{ROOT / 'csrc'}",
                           f"-I{ROOT / 'csrc' / 'kernels'}", str(ROOT / "csrc" / "kernels" / "swish_forward.cu"),
                           "-o", "-"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_forward_builds_for_gpus_before_volta(tmp_path):
    """The build compiles for the visible GPU's compute capability; ptxas rejects L1 eviction priorities below sm_70,
    so there the L1-skipping copies load x as their twins do. Pascal's PTX (with a PTX version this ptxas reads)
    assembles."""
    home = cuda_root()
    if home is None:
        pytest.skip("needs nvcc (CUDA toolkit)")
    assert "L1::no_allocate" in _forward_ptx(home, 700)
    pascal = _forward_ptx(home, 610)
    assert "L1::no_allocate" not in pascal
    ptxas = [p for p in kernel_report.cuda_tools("ptxas", home)
             if "sm_61" in subprocess.run([p, "--help"], capture_output=True, text=True).stdout]
    if not ptxas:
        pytest.skip("needs a ptxas that assembles for sm_61 (CUDA 12, or Triton's wheel)")
    ptx = tmp_path / "forward_sm61.ptx"
    pascal = re.sub(r"(?m)^\.version .*$", ".version 8.0", pascal)
    ptx.write_text(re.sub(r"(?m)^\.target .*$", ".target sm_61", pascal))
    proc = subprocess.run([ptxas[0], "-arch=sm_61", str(ptx), "-o", str(tmp_path / "forward_sm61.cubin")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
