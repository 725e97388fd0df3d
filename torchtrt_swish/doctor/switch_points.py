"""The fused CUDA backward's switch points on the GPU at hand, and a check of the op there.

The planner's choice depends on the GPU's multiprocessor count, so the shapes where it switches are found with the
planner itself (torchtrt_swish._C.fused_backward_plan) on the GPU that runs them.
"""
from __future__ import annotations

import dataclasses
import math
import time

# (dtype, one sample's shape, bias kind): a bias on dim 1 ("dim1", [C, 1, ...]), on the last dim ("last") or a
# scalar. Chosen to cross every family: grouped columns ([N, 4, 8] from 64 rows), tiles of whole planes
# ([N, 32, 64] against [N, 32, 128]), samples against planes ([N, 4, 257]), planes against split ([N, 2, 4100]),
# one against two column-sum stages ([N, 64, 16], [N, 64] last-dim), partial last tiles ([N, 130, 16]), real
# network planes (14x14, 7x7; the channels kernel at small batches), whole columns against row chunks ([N, 2048],
# [N, 4096] last-dim: 256 one-sector tiles, up to 512 fp32 or 256 bf16 rows) and a scalar bias.
_BASES = (
    ("float16", (4, 8), "dim1"),
    ("bfloat16", (32, 64), "dim1"),
    ("bfloat16", (32, 128), "dim1"),
    ("float32", (4, 257), "dim1"),
    ("float32", (2, 4096), "dim1"),
    ("float32", (2, 4100), "dim1"),
    ("float32", (64, 16), "dim1"),
    ("float16", (130, 16), "dim1"),
    ("bfloat16", (257, 8), "dim1"),
    ("float16", (256, 196), "dim1"),
    ("bfloat16", (1152, 49), "dim1"),
    ("float32", (1152, 49), "dim1"),
    ("float16", (64,), "last"),
    ("float32", (1000,), "last"),
    ("float32", (2048,), "last"),
    ("bfloat16", (4096,), "last"),
    ("bfloat16", (4096,), "scalar"),
)


@dataclasses.dataclass(frozen=True)
class Case:
    """One layout: x's shape and dtype, the bias's shape, and the plan (family, column-sum stages) it gets."""

    dtype: str
    x_shape: tuple[int, ...]
    bias_shape: tuple[int, ...]
    plan: tuple[str, int]

    @property
    def label(self) -> str:
        """e.g. float16 [64, 130, 16] bias [130, 1]: grouped_cols."""
        return (f"{self.dtype} {list(self.x_shape)} bias {list(self.bias_shape)}: {self.plan[0]}"
                + (", two-stage sums" if self.plan[1] > 1 else ""))


def _bias_shape(sample: tuple[int, ...], kind: str) -> tuple[int, ...]:
    if kind == "scalar":
        return (1,)
    if kind == "last":
        return (sample[-1],)
    return (sample[0],) + (1,) * (len(sample) - 1)


def plan_of(dtype: str, batch: int, sample: tuple[int, ...], kind: str, sms: int) -> tuple[str, int]:
    """The plan (family, column-sum stages) of x [batch, *sample] with that bias on a GPU of `sms` multiprocessors."""
    from .. import _C

    n = batch * math.prod(sample)
    channels, inner = {"scalar": (1, 1), "last": (sample[-1], 1),
                       "dim1": (sample[0], math.prod(sample[1:]))}[kind]
    family, stages = _C.fused_backward_plan(dtype, n, channels, inner, True, sms)
    return family, stages


def _batches(limit: int) -> list[int]:
    """Every batch to 256, then steps of at most 1/8 up to limit."""
    out = list(range(1, min(limit, 256) + 1))
    while out[-1] < limit:
        out.append(min(limit, out[-1] + max(1, out[-1] // 8)))
    return out


# The planner sizes blocks between a floor and a cap (swish_backward_plan.h): for about two per SM rows chunks of 256
# to 2048 packs of 256 threads and planes blocks of 256 to 1024 packs, for about three per SM column blocks of 256
# packs to 64K elements (fp16/bf16 take 8-byte packs below the floor of those). Where n / (2 sms) or n / (3 sms)
# crosses them the block shapes change on one GPU and not on another.
def _size_edges(sms: int, vec: int) -> tuple[int, ...]:
    return (tuple(2 * sms * e for e in (256 * vec, 1024 * vec, 2048 * vec))
            + tuple(3 * sms * e for e in (128 * vec, 256 * vec, 65536)))


def switch_point_cases(sms: int, max_elems: int = 1 << 24) -> list[Case]:
    """Shapes on both sides of each switch of the planner along the batch of each base layout on `sms` SMs: every
    change of plan family or of column-sum stages, and the batches where the block sizes leave their floor or reach
    their cap on this many SMs."""
    cases: list[Case] = []
    for dtype, sample, kind in _BASES:
        per = math.prod(sample)
        limit = max(1, max_elems // per)
        bias = _bias_shape(sample, kind)
        grid = _batches(limit)
        plans = {b: plan_of(dtype, b, sample, kind, sms) for b in grid}
        vec = 4 if dtype == "float32" else 8
        found = {grid[0]} | {b for edge in _size_edges(sms, vec) for b in range(edge // per - 1, edge // per + 2)
                             if 1 <= b <= limit}
        for lo, hi in zip(grid, grid[1:]):
            if plans[lo] == plans[hi]:
                continue
            # Bisect to the first batch of the new plan (a change between grid points is found once).
            while hi - lo > 1:
                mid = (lo + hi) // 2
                plans.setdefault(mid, plan_of(dtype, mid, sample, kind, sms))
                lo, hi = (mid, hi) if plans[mid] == plans[lo] else (lo, mid)
            found |= {lo, hi}
        for b in sorted(found):
            cases.append(Case(dtype, (b, *sample), bias, plans.get(b) or plan_of(dtype, b, sample, kind, sms)))
    return cases


def check_case(case: Case, device: str = "cuda", seed: int = 0, misaligned: bool = False) -> str | None:
    """Forward and backward of one case against float64 on the CPU; the first mismatch in words, or None.

    y and dx within torchtrt_swish.dtypes.TOLERANCES; dbias of small-integer gradients exactly the integer sum
    rounded once (fp32 partial sums of small integers are exact whatever their order), so a wrong or racing
    reduction cannot hide inside a tolerance.
    """
    import torch
    import torch.nn.functional as F

    from ..dtypes import tolerance
    from ..ops import swish

    dt = getattr(torch, case.dtype)
    gen = torch.Generator().manual_seed(seed)
    numel = math.prod(case.x_shape)
    x64 = torch.randn(case.x_shape, generator=gen, dtype=torch.float64) * 4
    b64 = torch.randn(case.bias_shape, generator=gen, dtype=torch.float64)
    g64 = torch.randint(-8, 9, case.x_shape, generator=gen).to(torch.float64)
    if misaligned:
        # An offset view: pointers off 16 bytes take the single-element paths.
        flat = torch.empty(numel + 1, device=device, dtype=dt)
        x = flat[1:].view(case.x_shape).copy_(x64.to(dt))
    else:
        x = x64.to(device=device, dtype=dt)
    b = b64.to(device=device, dtype=dt)
    g = g64.to(device=device, dtype=dt)
    xr, br = x.double().cpu(), b.double().cpu()  # the rounded inputs the kernels see
    s = torch.sigmoid(xr)
    want_y = F.silu(xr) + br
    want_dx = g64 * s * (1 + xr * (1 - s))
    want_db = g64.sum_to_size(case.bias_shape).to(dt)
    y = swish(x, b)
    dx, db = torch.ops.torchtrt_swish.swish_backward(g, x, b)
    atol, rtol = tolerance(case.dtype)
    for name, got, want in (("y", y, want_y), ("dx", dx, want_dx)):
        err = (got.double().cpu() - want).abs()
        bound = atol + rtol * want.abs()
        if not bool((err <= bound).all()):  # NaN in err fails here too
            return f"{case.label}: {name} off by {err.max().item():.3g} (bound {atol:g} + {rtol:g}|ref|)"
    if not torch.equal(db.cpu(), want_db):
        worst = (db.double().cpu() - want_db.double()).abs().max().item()
        return f"{case.label}: dbias off by {worst:.3g} from the exact sum"
    return None


def check_switch_points(device: str = "cuda", budget_s: float = 5.0,
                        max_elems: int = 1 << 23) -> tuple[int, int, list[str]]:
    """Checks the switch-point cases of `device`'s GPU until budget_s is spent: (SMs, cases checked, failures). The
    smallest case of each plan goes first, so that a short budget still crosses every family; then the rest, then
    all of them again misaligned."""
    import torch

    sms = torch.cuda.get_device_properties(torch.device(device)).multi_processor_count
    cases = sorted(switch_point_cases(sms, max_elems), key=lambda c: math.prod(c.x_shape))
    first: dict[tuple[str, int], Case] = {}
    for case in cases:
        first.setdefault(case.plan, case)
    ordered = list(first.values()) + [c for c in cases if c not in first.values()]
    start = time.monotonic()
    checked, failures = 0, []
    for misaligned in (False, True):
        for case in ordered:
            if time.monotonic() - start > budget_s:
                return sms, checked, failures
            why = check_case(case, device, seed=checked, misaligned=misaligned)
            checked += 1
            if why:
                failures.append(why + (" (misaligned)" if misaligned else ""))
    return sms, checked, failures
