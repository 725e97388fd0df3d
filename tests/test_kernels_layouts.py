"""The CUDA kernels on the layouts networks use: NCHW activations with a per-channel bias on dim 1 ([C,1,1] and
[1,C,1,1]), channels_last tensors, planes that are not whole 16-byte packs (7x7, 14x14, odd sizes), planes longer
than a block (112x112), small planes many to a block ([N, 64, 16] with [64, 1]; in fp16/bf16 the columns kernel with grouped columns),
blocks of dims before the last.

Together they reach every block shape of the planes backward on the H200 (whole samples, whole planes, split planes;
16-byte and single-element packs) and the forward's two-channel packs. References: the fp64 CPU formula (samples.reference,
test_ops' backward check), PyTorch's own fp32 kernels bit for bit (F.silu(x) + b, aten.silu_backward), and the exact
integer sum for dbias (small-integer gradients make every fp32 partial sum exact, whatever the order).
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import torchtrt_swish
from samples import reference, tolerance
from test_ops import CHANNELS_LAST_CASES, CL_IDS, _assert_backward_close, _assert_close_to_reference, _assert_format

pytestmark = pytest.mark.cuda

DTYPES = [torch.float32, torch.float16, torch.bfloat16]

# (x shape, bias shape, channels_last): the conv shapes at smaller batches, and shapes at each path's edges.
LAYOUTS = [
    ((4, 1152, 7, 7), (1152, 1, 1), False),   # 49-element planes: not whole packs (two-channel packs, planes blocks)
    ((8, 256, 14, 14), (256, 1, 1), False),   # 196: whole fp32 packs, not fp16/bf16 ones
    ((2, 32, 112, 112), (32, 1, 1), False),   # 12544: longer than a block, split
    ((2, 32, 112, 112), (1, 32, 1, 1), False),
    ((64, 48, 32, 32), (48, 1, 1), False),    # 1024: whole planes, several per block
    ((3, 5, 7, 7), (5, 1, 1), False),         # 735 elements: a partial last pack
    ((2, 7, 9, 9), (7, 1, 1), False),         # 81
    ((2, 16, 2, 2), (16, 1, 1), False),       # 4 < the pack width: single-element packs
    ((1, 3, 99, 99), (3, 1, 1), False),       # 9801, odd and longer than a block: single-element split planes
    ((5, 3, 1000), (3, 1), False),
    ((16, 64, 16), (64, 1), False),           # whole samples per block
    ((2100, 64, 16), (64, 1), False),         # the same past 2^18 packs: two forward packs a thread
    ((70, 64, 16), (64, 1), False),           # fp16/bf16: grouped columns, 16 columns a channel, a partial row chunk
    ((33, 2, 64), (2, 1), False),             # fp16/bf16: grouped columns, a 64-column group spanning two warps
    ((48, 5, 8), (5, 1), False),              # 5-pack rows: no grouped tile fits, planes instead
    ((2, 3, 5, 7), (3, 5, 1), False),         # a block of dims before the last: 15 channels of 7
    ((4, 256, 14, 14), (256, 1, 1), True),    # channels_last
    ((4, 1152, 7, 7), (1152, 1, 1), True),
    ((2, 32, 112, 112), (32, 1, 1), True),    # the shape: a last-dim bias of 32 over [N*H*W, 32]
    ((8, 16, 28, 28), (1, 16, 1, 1), True),
    ((2, 2048, 7, 7), (2048, 1, 1), True),
]
IDS = [f"{'x'.join(map(str, s))}-b{'x'.join(map(str, b))}{'-cl' if cl else ''}" for s, b, cl in LAYOUTS]


def _inputs(shape, bshape, channels_last, dtype, gen):
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = (torch.randn(shape, generator=gen, dtype=torch.float64) * 4).to("cuda", dtype).contiguous(memory_format=fmt)
    b = torch.randn(bshape, generator=gen, dtype=torch.float64).to("cuda", dtype)
    return x, b


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,bshape,channels_last", LAYOUTS, ids=IDS)
def test_forward_layouts_cuda(dtype, shape, bshape, channels_last):
    """Forward against the fp64 reference; fp32 exactly F.silu(x) + b; the same bits through a misaligned copy of x
    (which takes the per-element bias lookup instead of the vector paths)."""
    gen = torch.Generator().manual_seed(1)
    x, b = _inputs(shape, bshape, channels_last, dtype, gen)
    y = torchtrt_swish.swish(x, b)
    _assert_close_to_reference(y, x, b)
    if dtype == torch.float32:
        assert torch.equal(y, F.silu(x) + b)
    flat = torch.empty(x.numel() + 1, device="cuda", dtype=dtype)
    xm = flat[1:].view(shape)
    xm.copy_(x)
    assert xm.data_ptr() % 16 != 0
    bits = {4: torch.int32, 2: torch.int16}[x.element_size()]
    assert torch.equal(torchtrt_swish.swish(xm, b).view(bits), y.contiguous().view(bits))


# (row shape, bias shape) of each 16-byte lookup mode: scalar, last-dim vector, last-dim fixed, uniform, two-channel,
# per element.
L1_SWITCH_ROWS = [((), (1,)), ((768,), (768,)), ((32,), (32,)), ((64, 16), (64, 1)), ((1152, 7, 7), (1152, 1, 1)),
                  ((3, 3), (3, 1))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("row,bshape", L1_SWITCH_ROWS,
                         ids=["scalar", "last_vec", "last_fixed", "uniform", "span2", "periodic"])
def test_forward_either_side_of_the_l1_switches_cuda(dtype, row, bshape):
    """x of more than two fifths and at most two thirds of L2 takes the kernels whose x loads bypass L1, a row fewer or
    more the others (swish_forward_plan.h's fwdSkipsL1), and past two thirds one pack a thread in 128-thread blocks
    (fwdStreams): each gives F.silu(x) + b's bits in fp32, the element-wise kernel's bits (a misaligned copy of x) in
    every dtype, and stays within the fp64 reference's tolerance (its last 2^20 elements)."""
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    per_row = max(1, math.prod(row)) * torch.empty((), dtype=dtype).element_size()
    gen = torch.Generator(device="cuda").manual_seed(7)
    b = torch.randn(bshape, generator=gen, device="cuda", dtype=torch.float32).to(dtype)
    low, high = l2 // 5 * 2 // per_row, l2 // 3 * 2 // per_row
    for rows in (low, low + 1, high, high + 1):
        x = (torch.randn((rows, *row), generator=gen, device="cuda", dtype=torch.float32) * 4).to(dtype)
        y = torchtrt_swish.swish(x, b)
        if dtype == torch.float32:
            assert torch.equal(y, F.silu(x) + b)
        flat = torch.empty(x.numel() + 1, device="cuda", dtype=dtype)
        xm = flat[1:].view(x.shape)
        xm.copy_(x)
        bits = {4: torch.int32, 2: torch.int16}[x.element_size()]
        assert torch.equal(torchtrt_swish.swish(xm, b).view(bits), y.view(bits))
        tail = -(-(1 << 20) // max(1, math.prod(row)))
        _assert_close_to_reference(y[-tail:], x[-tail:], b)
        del x, y, xm, flat


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,bshape,channels_last", LAYOUTS, ids=IDS)
def test_backward_layouts_cuda(dtype, shape, bshape, channels_last):
    """dx and dbias against fp64 autograd of the formula (test_ops' tolerances)."""
    gen = torch.Generator().manual_seed(2)
    x, b = _inputs(shape, bshape, channels_last, dtype, gen)
    g = torch.randn(shape, generator=gen, dtype=torch.float64).to("cuda", dtype)
    _assert_backward_close(x, b, g, "x".join(map(str, shape)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,bshape,channels_last", LAYOUTS, ids=IDS)
def test_dbias_exact_and_deterministic_cuda(dtype, shape, bshape, channels_last):
    """With small-integer gradients every partial sum is exact in fp32, so dbias must be the exact per-channel sum
    rounded once to the dtype, on every run: a plane summed into the wrong channel, twice or not at all shows up."""
    gen = torch.Generator().manual_seed(3)
    x, b = _inputs(shape, bshape, channels_last, dtype, gen)
    g = torch.randint(-8, 9, shape, generator=gen).to("cuda", dtype)
    dx, db = torch.ops.torchtrt_swish.swish_backward(g, x, b)
    exact = g.to("cpu", torch.float64).sum_to_size(bshape)
    assert torch.equal(db.cpu(), exact.to(dtype)), (db.flatten()[:8], exact.flatten()[:8])
    for _ in range(2):
        dx2, db2 = torch.ops.torchtrt_swish.swish_backward(g, x, b)
        assert torch.equal(db2, db) and torch.equal(dx2, dx)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,bshape,channels_last", LAYOUTS, ids=IDS)
def test_dx_same_bits_as_scalar_bias_path_cuda(dtype, shape, bshape, channels_last):
    """dx does not depend on the bias or on the path that reduces it: the planes kernel's dx equals the scalar-bias
    (rows) kernel's bit for bit, and for fp32 it is aten.silu_backward exactly."""
    gen = torch.Generator().manual_seed(4)
    x, b = _inputs(shape, bshape, channels_last, dtype, gen)
    g = torch.randn(shape, generator=gen, dtype=torch.float64).to("cuda", dtype)
    dx, _ = torch.ops.torchtrt_swish.swish_backward(g, x, b)
    dx_scalar, _ = torch.ops.torchtrt_swish.swish_backward(g, x, b.new_zeros(1))
    bits = {4: torch.int32, 2: torch.int16}[x.element_size()]
    assert torch.equal(dx.contiguous().view(bits), dx_scalar.contiguous().view(bits))
    if dtype == torch.float32:
        assert torch.equal(dx, torch.ops.aten.silu_backward(g, x))


@pytest.mark.parametrize("dtype", DTYPES)
def test_tall_partial_matrix_cuda(dtype):
    """[2^14, 64, 16] with a [64, 1] bias: thousands of blocks of whole samples, so the column sums run in two
    stages; dbias exact for integer gradients, dx and the forward against the fp64 reference."""
    shape, bshape = ((1 << 24) // 1024, 64, 16), (64, 1)
    gen = torch.Generator().manual_seed(5)
    x, b = _inputs(shape, bshape, False, dtype, gen)
    g = torch.randint(-8, 9, shape, generator=gen).to("cuda", dtype)
    y = torchtrt_swish.swish(x, b)
    err = (y.double().cpu() - reference(x, b)).abs()
    assert bool((err <= tolerance(x, b, dtype)).all())
    dx, db = torch.ops.torchtrt_swish.swish_backward(g, x, b)
    assert torch.equal(db.cpu(), g.to("cpu", torch.float64).sum_to_size(bshape).to(dtype))
    xd = x.to("cpu", torch.float64)
    s = torch.sigmoid(xd)
    ref = g.to("cpu", torch.float64) * s * (1 + xd * (1 - s))
    tol = torch.finfo(dtype).eps * ref.abs() + 16 * torch.finfo(torch.float32).eps * g.double().cpu().abs() + 1e-30
    assert bool(((dx.double().cpu() - ref).abs() <= tol).all())



@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,fmt,bshape", CHANNELS_LAST_CASES, ids=CL_IDS)
def test_channels_last_keeps_format_cuda(dtype, shape, fmt, bshape):
    """channels_last (3d) x: y and dx keep x's strides whatever g's format; y and dx are the contiguous path's bits;
    y, dx and dbias against fp64; dbias exact for integer gradients and the same on every run."""
    gen = torch.Generator().manual_seed(6)
    x = (torch.randn(shape, generator=gen, dtype=torch.float64) * 4).to("cuda", dtype).contiguous(memory_format=fmt)
    b = torch.randn(bshape, generator=gen, dtype=torch.float64).to("cuda", dtype)
    y = torchtrt_swish.swish(x, b)
    _assert_format(y, x, "y")
    _assert_close_to_reference(y, x, b)
    assert torch.equal(y, torchtrt_swish.swish(x.contiguous(), b))
    gi = torch.randint(-8, 9, shape, generator=gen).to("cuda", dtype)
    exact = gi.to("cpu", torch.float64).sum_to_size(bshape).to(dtype)
    for g in (gi.contiguous(), gi.contiguous(memory_format=fmt)):
        dx, db = torch.ops.torchtrt_swish.swish_backward(g, x, b)
        _assert_format(dx, x, f"dx, g strides {g.stride()}")
        assert db.shape == b.shape and db.is_contiguous()
        assert torch.equal(db.cpu(), exact), (db.flatten()[:8], exact.flatten()[:8])
        assert torch.equal(dx, torch.ops.torchtrt_swish.swish_backward(g.contiguous(), x.contiguous(), b)[0])
        dx2, db2 = torch.ops.torchtrt_swish.swish_backward(g, x, b)
        assert torch.equal(dx2, dx) and torch.equal(db2, db)
    g = torch.randn(shape, generator=gen, dtype=torch.float64).to("cuda", dtype).contiguous(memory_format=fmt)
    _assert_backward_close(x, b, g, "x".join(map(str, shape)))
    torch.library.opcheck(torch.ops.torchtrt_swish.swish.default, (x, b))
    torch.library.opcheck(torch.ops.torchtrt_swish.swish_backward.default, (g, x, b))
