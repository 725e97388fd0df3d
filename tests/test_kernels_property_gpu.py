"""The CUDA kernels on random layouts and on this GPU's planner switch points (H200 here, any GPU where it runs).

Seeded random shapes, strides (transposed and sliced views, channels_last, offset pointers), dtypes and bias kinds
(scalar, last-dim, per-channel on dim 1, full, blocks of several dims), forward and backward against float64 on the
CPU, dbias bit-identical over repeats, within a fixed time budget. The switch points come from the planner for the
GPU's own multiprocessor count (torchtrt_swish.doctor.switch_points), not from one GPU's constants.
"""
from __future__ import annotations

import math
import os
import random
import time

import pytest

torch = pytest.importorskip("torch")
import torchtrt_swish  # noqa: E402
from torchtrt_swish.doctor import switch_points  # noqa: E402

pytestmark = pytest.mark.cuda

# Seconds of random cases (TORCHTRT_SWISH_PROPERTY_SECONDS overrides) and the fewest that must fit in them.
BUDGET_S = float(os.environ.get("TORCHTRT_SWISH_PROPERTY_SECONDS", "60"))
MIN_CASES = 200
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _random_case(rng: random.Random):
    """(x, bias, g, label): x of rank 1-4 up to ~2^20 elements in a random layout, a bias of a random kind."""
    rank = rng.randint(1, 4)
    dims = [rng.choice((1, 2, 3, rng.randint(1, 17), rng.randint(1, 300))) for _ in range(rank)]
    while math.prod(dims) > 1 << 20:
        i = rng.randrange(rank)
        dims[i] = max(1, dims[i] // 2)
    dtype = rng.choice(DTYPES)
    kind = rng.choice(("scalar", "last", "dim1", "full", "block"))
    if kind == "scalar" or rank == 1 and kind == "dim1":
        bshape = [1] * rng.randint(0, rank)
    elif kind == "last":
        bshape = [dims[-1]]
    elif kind == "dim1" and rank >= 2:
        bshape = [dims[1]] + [1] * (rank - 2)
    elif kind == "full":
        bshape = list(dims)
    else:
        lo = rng.randrange(rank)
        bshape = dims[lo:rng.randint(lo + 1, rank)]
        bshape = bshape + [1] * (rank - lo - len(bshape))
    layout = rng.choice(("contiguous", "channels_last", "transposed", "sliced", "offset"))
    x64 = torch.randn(dims, dtype=torch.float64) * 4
    if layout == "channels_last" and rank == 4:
        x = x64.to("cuda", dtype).contiguous(memory_format=torch.channels_last)
    elif layout == "transposed" and rank >= 2:
        x = x64.transpose(0, -1).contiguous().to("cuda", dtype).transpose(0, -1)
    elif layout == "sliced":
        wide = torch.randn([*dims[:-1], 2 * dims[-1]], dtype=torch.float64, device="cuda").to(dtype)
        x = wide[..., ::2].copy_(x64.to(dtype))
    elif layout == "offset":
        flat = torch.empty(math.prod(dims) + 1, device="cuda", dtype=dtype)
        x = flat[1:].view(dims).copy_(x64.to(dtype))
    else:
        x = x64.to("cuda", dtype)
    b = torch.randn(bshape, dtype=torch.float64).to("cuda", dtype)
    g = torch.randint(-8, 9, dims).to("cuda", dtype)  # small integers: dbias sums are exact in fp32
    return x, b, g, f"{dtype} x{dims} {layout} bias{bshape}"


def _check(x, b, g, label):
    """Forward, backward and a repeat against float64 on the CPU."""
    xr, br, gr = x.double().cpu(), b.double().cpu(), g.double().cpu()
    s = torch.sigmoid(xr)
    y = torchtrt_swish.swish(x, b)
    dx, db = torch.ops.torchtrt_swish.swish_backward(g, x, b)
    eps = torch.finfo(x.dtype).eps
    f32 = torch.finfo(torch.float32).eps
    sub = torch.finfo(x.dtype).smallest_normal * eps  # spacing of the subnormal range, where eps * |y| is too small
    want_y = torch.nn.functional.silu(xr) + br
    want_dx = gr * s * (1 + xr * (1 - s))
    # one rounding (half an ulp, one allowed) plus a few fp32 ulps of the fp32 math
    tol_y = eps * want_y.abs() + 16 * f32 * (xr.abs() + br.abs()) + sub
    assert ((y.double().cpu() - want_y).abs() <= tol_y).all(), label
    assert ((dx.double().cpu() - want_dx).abs() <= eps * want_dx.abs() + 16 * f32 * gr.abs() + sub).all(), label
    assert y.shape == x.shape and dx.shape == x.shape and db.shape == b.shape, label
    assert torch.equal(db.cpu(), gr.sum_to_size(b.shape).to(x.dtype)), f"{label}: dbias"
    dx2, db2 = torch.ops.torchtrt_swish.swish_backward(g, x, b)
    assert torch.equal(db2, db) and torch.equal(dx2, dx), f"{label}: not the same bits on a repeat"


def test_random_layouts_forward_backward_against_float64():
    """Seeded random layouts until the budget is spent; at least MIN_CASES of them."""
    rng = random.Random(int(os.environ.get("TORCHTRT_SWISH_PROPERTY_SEED", "30")))
    start, count = time.monotonic(), 0
    while time.monotonic() - start < BUDGET_S:
        _check(*_random_case(rng))
        count += 1
    print(f"{count} random layouts in {time.monotonic() - start:.0f} s")
    assert count >= MIN_CASES, f"only {count} cases in {BUDGET_S} s"


def test_switch_points_of_this_gpu():
    """Both sides of every switch of the planner for this GPU's SM count, aligned and misaligned."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    cases = switch_points.switch_point_cases(sms)
    families = {c.plan[0] for c in cases}
    assert {"rows", "cols", "grouped_cols", "planes_samples", "planes_planes", "planes_split",
            "channels"} <= families, families
    assert any(c.plan[1] > 1 for c in cases), "no case with two-stage column sums"
    failures = [why for i, c in enumerate(cases) for m in (False, True)
                if (why := switch_points.check_case(c, "cuda", seed=i, misaligned=m))]
    assert not failures, failures[:5]


def test_issue_shapes_are_right_and_repeatable():
    """The per-channel small-plane shapes whose grouped-columns tile was partial: dbias against float64 and the same
    bits over 20 repeats."""
    for dtype in DTYPES:
        for shape, bshape in (((64, 130, 4, 4), (130, 1, 1)), ((16, 257, 2, 4), (257, 1, 1)),
                              ((64, 65, 4, 8), (65, 1, 1)), ((64, 130, 4, 4), (1, 130, 1, 1))):
            x = (torch.randn(shape, dtype=torch.float64) * 4).to("cuda", dtype)
            b = torch.randn(bshape, dtype=torch.float64).to("cuda", dtype)
            g = torch.randn(shape, dtype=torch.float64).to("cuda", dtype)
            want = g.double().cpu().sum_to_size(bshape)
            _, db0 = torch.ops.torchtrt_swish.swish_backward(g, x, b)
            n = math.prod(shape) // b.numel()
            tol = (torch.finfo(dtype).eps + n * torch.finfo(torch.float32).eps) * g.double().abs().cpu().sum_to_size(bshape)
            assert ((db0.double().cpu() - want).abs() <= tol + 1e-30).all(), (dtype, shape)
            for _ in range(20):
                assert torch.equal(torch.ops.torchtrt_swish.swish_backward(g, x, b)[1], db0), (dtype, shape)
    # the transposed [9, 257, 8] of the issue, its bias on dim 1 after the transpose: exact and the same bits
    for dtype in (torch.float16, torch.bfloat16):
        xt = torch.randn(9, 8, 257, device="cuda", dtype=dtype).transpose(1, 2)
        bt = torch.randn(257, 1, device="cuda", dtype=dtype)
        gt = torch.randint(-8, 9, (9, 257, 8)).to("cuda", dtype)
        _, dbt = torch.ops.torchtrt_swish.swish_backward(gt, xt, bt)
        assert torch.equal(dbt.cpu(), gt.double().cpu().sum_to_size(257, 1).to(dtype)), dtype
        for _ in range(20):
            assert torch.equal(torch.ops.torchtrt_swish.swish_backward(gt, xt, bt)[1], dbt), dtype


def test_small_plane_sweep_is_right_and_repeatable():
    """An independent sweep of per-channel (dim 1), last-dim and full biases over small planes, every dtype: dbias
    exactly the integer sum of small-integer gradients, dx against float64, the same bits over five repeats."""
    count = 0
    for dtype in DTYPES:
        for c in (3, 17, 65, 130, 257, 513):
            for plane in ((1, 1), (1, 2), (2, 2), (2, 4), (4, 4), (4, 8), (3, 5), (7, 7)):
                for n in (1, 16, 64):
                    shape = (n, c, *plane)
                    for bshape in ((c, 1, 1), (plane[-1],), shape[1:]):
                        x = (torch.randn(shape, dtype=torch.float64) * 4).to("cuda", dtype)
                        b = torch.randn(bshape, dtype=torch.float64).to("cuda", dtype)
                        g = torch.randint(-8, 9, shape).to("cuda", dtype)
                        _check(x, b, g, f"{dtype} {shape} bias {bshape}")
                        first = torch.ops.torchtrt_swish.swish_backward(g, x, b)[1]
                        for _ in range(4):
                            assert torch.equal(torch.ops.torchtrt_swish.swish_backward(g, x, b)[1], first), shape
                        count += 1
    assert count == 3 * 6 * 8 * 3 * 3
