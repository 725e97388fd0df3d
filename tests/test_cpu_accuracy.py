"""The CPU kernels' own sigmoid against fp64 on every float32 exponent, for each instruction-set copy, and the fused
backward's bias sums in the plan's fixed order.

The bounds are the ones docs/performance-notes.md states (measured over all 2^32 inputs by tools/cpu_accuracy.py);
this samples every sign and exponent (subnormals included), every float32 of the saturation edges, infinities and
NaN, and every fp16 / bf16 bit pattern. Each copy runs in a process of its own under ATEN_CPU_CAPABILITY (the op
picks the copy ATen picks), which runs this file as a script and reports its measurements as JSON.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
# In ulps of the exact value (sigmoid, silu) and in units of 2^-24 (f'), for |x| <= tools.cpu_accuracy.FLUSH.
BOUNDS = {"sigmoid": 3.0, "silu": 3.5, "grad": 4.5}
# ATen's name for each level, as torch.backends.cpu.get_cpu_capability() reports it ("NO AVX" in some releases).
_ATEN_NAMES = {"default": ("DEFAULT", "NO AVX"), "avx2": ("AVX2",), "avx512": ("AVX512",)}


def _capabilities() -> list[str]:
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    return ["default"] + (["avx2", "avx512"] if x86 else [])


def _every_pattern(dtype: torch.dtype) -> torch.Tensor:
    """All 2^16 values of a 16-bit dtype, as [256, 256]."""
    return torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32).to(torch.int16).view(dtype).view(256, 256)


def _bits_differ(got: torch.Tensor, want: torch.Tensor) -> int:
    """How many 16-bit elements differ bit for bit (any NaN equals any NaN)."""
    same = (got.view(torch.int16) == want.view(torch.int16)) | (got.isnan() & want.isnan())
    return int((~same).sum())


def _half_every_input(dtype: torch.dtype) -> dict[str, int]:
    """Inputs of all 2^16 bit patterns: how many forward / backward results miss test_ops' bounds. Forward against
    the fp64 reference where F.silu(x) + b is finite and x >= -88.72, else bit for bit F.silu(x) + b (computed in
    fp32, rounded once, as the kernels do); backward for the finite inputs."""
    from samples import reference, tolerance

    x = _every_pattern(dtype)
    gen = torch.Generator().manual_seed(38)
    bad = {"forward": 0, "backward": 0}
    for b in (torch.tensor([0.0]), torch.tensor([-0.0]), torch.tensor([0.375]), torch.randn(256, generator=gen)):
        b = b.to(dtype)
        y = torch.ops.torchtrt_swish.swish(x, b)
        want = (F.silu(x.float()) + b.float()).to(dtype)
        ok = want.isfinite() & (x.float() >= -88.72)
        bx = b.expand_as(x)
        err = (y[ok].double() - reference(x[ok], bx[ok])).abs()
        bad["forward"] += int((~(err <= tolerance(x[ok], bx[ok], dtype))).sum())
        bad["forward"] += _bits_differ(y[~ok], want[~ok])
        finite = x.isfinite()
        xs = torch.where(finite, x, 0)
        g = torch.where(finite, torch.randn(x.shape, generator=gen).to(dtype), 0)
        dx, _ = torch.ops.torchtrt_swish.swish_backward(g, xs, b)
        xd = xs.double()
        s = torch.sigmoid(xd)
        want_dx = g.double() * s * (1 + xd * (1 - s))
        eps = torch.finfo(dtype).eps
        # test_ops._assert_backward_close's dx bound.
        tol = (eps * want_dx.abs() + 16 * torch.finfo(torch.float32).eps * g.double().abs()
               + torch.finfo(dtype).smallest_normal * eps)
        bad["backward"] += int((~((dx.double() - want_dx).abs() <= tol)).sum())
    return bad


def _bf16_rounding_mismatches() -> dict[str, int]:
    """bf16 results that are not the op's fp32 results rounded once by torch's own conversion (to nearest even,
    subnormals kept; a NaN for a NaN): every bf16 pattern as x and, paired with another x, as g; zero, negative zero
    and per-element biases. Checks the kernels' narrowing (AVX512_BF16's instruction where the copy takes it)."""
    x = _every_pattern(torch.bfloat16)
    xs = torch.where(x.isfinite(), x, 0)
    g = xs.flatten().flip(0).view_as(xs)  # subnormal g meet every x: subnormal dx
    bad = {"forward": 0, "backward": 0}
    gen = torch.Generator().manual_seed(16)
    for b in (torch.tensor([0.0]), torch.tensor([-0.0]), torch.randn(256, generator=gen)):
        b = b.bfloat16()
        want = torch.ops.torchtrt_swish.swish(x.float(), b.float()).bfloat16()
        bad["forward"] += _bits_differ(torch.ops.torchtrt_swish.swish(x, b), want)
        want_dx, _ = torch.ops.torchtrt_swish.swish_backward(g.float(), xs.float(), b.float())
        bad["backward"] += _bits_differ(torch.ops.torchtrt_swish.swish_backward(g, xs, b)[0], want_dx.bfloat16())
    return bad


def _cpu_flags() -> set[str]:
    """The CPU's feature flags as /proc/cpuinfo lists them (empty where there is none)."""
    cpuinfo = Path("/proc/cpuinfo")
    text = cpuinfo.read_text() if cpuinfo.exists() else ""
    return {f for line in text.splitlines() if line.startswith("flags") for f in line.split(":", 1)[1].split()}


def _bias_grad_in_plan_order(g: torch.Tensor, outer: int, channels: int, inner: int) -> torch.Tensor:
    """dbias as kernels/swish_cpu.h's plan orders the sums (fp64): tasks of rows x channel tiles x inner segments,
    each inner run summed in eight lanes by position (combined pairwise), partials added in row-block order. An
    independent statement of the order, so a vector loop that feeds the lanes otherwise shows as other bits."""
    chunk, max_row_blocks, tile = 16384, 256, 16384  # kBIAS_GRAD_CHUNK, kBIAS_GRAD_MAX_ROW_BLOCKS, kBIAS_GRAD_TILE
    if channels == 1:
        inner, outer = inner * outer, 1
    seg = min(inner, chunk)
    segs = -(-inner // seg)
    per_tile = min(channels, tile if inner == 1 else max(1, chunk // seg))
    rows = max(1, chunk // (per_tile * seg))
    if -(-outer // rows) > max_row_blocks:
        rows = -(-outer // max_row_blocks)
    gd = g.reshape(outer, channels, inner).double()
    partial = torch.zeros(-(-outer // rows) * segs, channels, dtype=torch.float64)
    for rb in range(-(-outer // rows)):
        for sg in range(segs):
            run = gd[rb * rows:(rb + 1) * rows, :, sg * seg:(sg + 1) * seg]
            n = run.shape[-1]
            lanes = torch.zeros(run.shape[0], channels, 8, dtype=torch.float64)
            for k in range(0, n, 8):  # each lane adds its elements in order
                part = run[..., k:k + 8]
                lanes[..., :part.shape[-1]] += part
            total = ((lanes[..., 0] + lanes[..., 1]) + (lanes[..., 2] + lanes[..., 3])) + (
                (lanes[..., 4] + lanes[..., 5]) + (lanes[..., 6] + lanes[..., 7]))
            acc = torch.zeros(channels, dtype=torch.float64)
            for o in range(total.shape[0]):
                acc += total[o]
            partial[rb * segs + sg] = acc
    out = torch.zeros(channels, dtype=torch.float64)
    for r in range(partial.shape[0]):
        out += partial[r]
    return out


# (x shape, bias shape, outer, channels, inner): dim-1, last-dim (inner 1; whole rows, and rows wider than a tile)
# and scalar biases, runs that end mid-vector, and runs shorter than 64 elements (the fused backward's shortRunsTask:
# planes of 49 and 5, rows of 37).
BIAS_GRAD_CASES = [((3, 7, 53, 53), (7, 1, 1), 3, 7, 53 * 53), ((131, 1001), (1001,), 131, 1001, 1),
                   ((3, 16390), (16390,), 3, 16390, 1),
                   ((98315,), (1,), 1, 1, 98315), ((5, 37), (37,), 5, 37, 1), ((9, 11, 7, 7), (11, 1, 1), 9, 11, 49),
                   ((40, 6, 5), (6, 1), 40, 6, 5)]


def _bias_grad_mismatches() -> int:
    """Cases of BIAS_GRAD_CASES (fp32, bf16, and fp64, whose bits show the order of the partials' sum too) whose dbias
    differs from the plan-order sum in any bit."""
    gen = torch.Generator().manual_seed(7)
    bad = 0
    for shape, bshape, outer, channels, inner in BIAS_GRAD_CASES:
        for dt in (torch.float32, torch.bfloat16, torch.float64):
            # fp64 drawn as fp64: values of 24-bit mantissas would add exactly in any order
            x = torch.randn(shape, generator=gen, dtype=torch.float64).to(dt)
            g = torch.randn(shape, generator=gen, dtype=torch.float64).to(dt)
            _, db = torch.ops.torchtrt_swish.swish_backward(g, x, torch.zeros(bshape, dtype=dt))
            bad += not torch.equal(db.reshape(-1), _bias_grad_in_plan_order(g, outer, channels, inner).to(dt))
    return bad


def _report() -> dict:
    """What one process measures on the copy its ATen picks."""
    sys.path.insert(0, str(ROOT))
    from tools import cpu_accuracy
    from torchtrt_swish import _C

    return {"aten": torch.backends.cpu.get_cpu_capability(), "kernels": _C.cpu_kernels(),
            "measure": cpu_accuracy.measure(cpu_accuracy.sample()),
            "half": {str(dt): _half_every_input(dt) for dt in (torch.float16, torch.bfloat16)},
            "bf16_instruction": _C.cpu_bf16_instruction(), "bf16_rounding": _bf16_rounding_mismatches(),
            "bias_grad_mismatches": _bias_grad_mismatches()}


@pytest.mark.parametrize("capability", _capabilities())
def test_every_exponent_within_the_documented_bounds(capability):
    """Each copy's sigmoid, silu and f' stay within BOUNDS on every exponent and edge; beyond |x| = 88.7228 and for
    inf / NaN its results are F.silu's and silu_backward's bits; fp16 / bf16 meet test_ops' bounds on every input, and
    bf16 results are the fp32 ones rounded once (with AVX512_BF16's instruction in the AVX512 copy where the CPU has
    it: /proc/cpuinfo's avx512_bf16)."""
    env = dict(os.environ, ATEN_CPU_CAPABILITY=capability, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, __file__], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    if r["aten"] not in _ATEN_NAMES[capability]:
        pytest.skip(f"this CPU does not run {capability} (ATen picks {r['aten']})")
    assert r["kernels"] == _ATEN_NAMES[capability][0], r
    for key, bound in BOUNDS.items():
        worst, at = r["measure"][key]
        assert worst <= bound, f"{capability} {key}: {worst:.3f} > {bound} at x = {at!r}"
    mismatches, first = r["measure"]["same_bits"]
    assert mismatches == 0, f"{capability}: {int(mismatches)} results differ from PyTorch's, first x = {first!r}"
    assert r["half"] == {str(dt): {"forward": 0, "backward": 0} for dt in (torch.float16, torch.bfloat16)}, r
    assert r["bias_grad_mismatches"] == 0, f"{capability}: dbias not summed in the plan's order"
    assert r["bf16_rounding"] == {"forward": 0, "backward": 0}, (capability, r["bf16_instruction"], r["bf16_rounding"])
    flags = _cpu_flags()
    if flags:  # the AVX512 copy takes AVX512_BF16's rounding exactly where the CPU has it (cpu_vec::avx512Bf16)
        assert r["bf16_instruction"] == (capability == "avx512" and "avx512_bf16" in flags), (capability, r)


def test_sample_covers_every_exponent_and_edge():
    """sample() holds every sign and exponent, the flush bound and its neighbours, inf and NaN."""
    sys.path.insert(0, str(ROOT))
    from tools.cpu_accuracy import FLUSH, sample

    x = sample()
    bits = x[x.isfinite()].view(torch.int32)
    assert set(((bits >> 23) & 0xFF).tolist()) == set(range(255))
    assert set((bits < 0).tolist()) == {True, False}
    flush = torch.tensor([FLUSH])
    for edge in (flush, torch.nextafter(flush, torch.tensor([100.0])), torch.tensor([17.0])):
        assert bool((x == edge).any()) and bool((x == -edge).any())
    assert bool(x.isnan().any()) and bool((x == float("inf")).any()) and bool((x == float("-inf")).any())


def test_cpu_sigmoid_rejects_bad_buffers():
    """_C.cpu_sigmoid takes two float32 buffers of one length, and says so otherwise."""
    import numpy as np

    from torchtrt_swish import _C

    for x, y in ((np.zeros(4, np.float64), np.zeros(4, np.float32)), (np.zeros(4, np.float32), np.zeros(3, np.float32))):
        with pytest.raises(ValueError, match="float32"):
            _C.cpu_sigmoid(x, y)
    y = np.empty(2, np.float32)
    _C.cpu_sigmoid(np.array([0.0, -0.0], np.float32), y)
    assert y.tolist() == [0.5, 0.5]


if __name__ == "__main__":
    print(json.dumps(_report()))
