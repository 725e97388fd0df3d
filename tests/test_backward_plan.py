"""The fused backward's host-side planner (csrc/kernels/swish_backward_plan.h), without a GPU.

The planner is plain C++; the build (CMakeLists.txt) compiles it into the test module `_backward_plan` (tests/backward_plan). Each test
states the planning rule itself, in Python and in the words of the planner's comments, and checks the planner
against it, with shapes on both sides of every threshold where the plan switches: which kernel (rows, columns,
grouped columns, planes, none), pack width, block shape, how many partial sums, one or two column-sum stages, and
the workspace those take. The invariants at the end are what the kernels rely on (every element in exactly one
block, blocks on pack boundaries, workspace large enough for the partial matrix), checked over a sweep of shapes.
"""
from __future__ import annotations

import importlib.util
import math
import sysconfig

import pytest
from tools_native import BUILD

MODULE_FILE = BUILD / f"_backward_plan{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"

# The launch constants the plans are made of (csrc/kernels/launch_common.h, swish_backward_plan.h), stated here
# again on purpose: a changed constant must show up as a failing test, not be followed silently.
THREADS = 256
UNROLL = 4
ROW_CHUNK_PACKS = THREADS * UNROLL * 2  # most packs one rows-kernel block reduces
COL_BLOCK_ELEMS = 65536  # most elements one columns-kernel block covers
COL_BLOCKS_PER_SM = 3  # columns-kernel blocks per SM a small tensor is cut into (its resident blocks)
PLANE_PACKS = THREADS * 4  # most packs one planes-kernel block covers (four per thread)
FINAL_THREADS = 1024  # most threads of a column-sum block
SUM_LANE_ROWS = 4  # rows per column-sum thread that a one-stage sum aims for
SUM_MAX_LANE_ROWS = 8  # past this many rows per column-sum thread: two stages
SUM_SLICE_LANE_ROWS = 4  # rows per thread in the first of two stages
CHANNEL_ELEMS = 16  # elements a thread of the channels kernel loads (of x and of g)
CHANNEL_THREADS = 1024  # most threads per channel
CHANNEL_BLOCK = 128  # fewest threads per block of the channels kernel
CHANNELS_MOST = 1 << 22  # most elements of a tensor the channels kernel takes
CHANNELS_FEWEST = 16  # fewest channels it takes
H200_SMS = 132

PACK = {"float32": 4, "float16": 8, "bfloat16": 8}  # elements of one 16-byte pack
ELEM_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
DTYPES = tuple(PACK)


@pytest.fixture(scope="module")
def bp():
    """The _backward_plan test module."""
    if not MODULE_FILE.exists():
        pytest.skip(f"planner test module {MODULE_FILE.name} not found in {BUILD}: build it with "
                    "`./dev setup` (the editable build compiles it into build/native; it needs a C++ compiler and "
                    "pybind11)")
    spec = importlib.util.spec_from_file_location("_backward_plan", MODULE_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ceil_div(a: int, b: int) -> int:
    """a / b rounded up."""
    return -(-a // b)


def pow2_at_least(v: int, cap: int) -> int:
    """The smallest power of two >= v, at most cap."""
    p = 1
    while p < v and p < cap:
        p *= 2
    return p


# ------------------------------------------------------------------------------------ the rules, stated again

def expected_kind(dtype, n, channels, inner, aligned=True) -> str:
    """Which kernel a layout takes: a scalar bias is one run (rows); a bias per element of the last dim is columns;
    short fp16/bf16 planes whose packs and tiles line up are grouped columns; small tensors of enough channels whose
    columns fit one round of a group take the channels kernel; other planes the planes kernel."""
    if n <= 0 or n % (channels * inner):
        return "none"
    if channels == 1:
        return "rows"
    if inner == 1:
        return "cols"
    if grouped_cols_apply(dtype, n, channels, inner, aligned):
        return "cols"
    return "channels" if expected_channels(dtype, n, channels, inner, aligned) else "planes"


def col_tile_packs(packs_per_row: int) -> int:
    """Columns-kernel tiles: 8 packs when the row divides into them, else the whole row up to a block, else 32."""
    if packs_per_row % 8 == 0:
        return 8
    return packs_per_row if packs_per_row <= THREADS else 32


def grouped_cols_apply(dtype, n, channels, inner, aligned) -> bool:
    """Half types only, aligned, whole packs per plane; a tile's warps hold whole rows, tiles hold whole planes, and
    there are at least as many rows as a block steps over at once."""
    vw = PACK[dtype]
    if vw != 8 or not aligned or inner % vw:
        return False
    row = channels * inner
    tile = col_tile_packs(row // vw)
    return 32 % tile == 0 and (tile * vw) % inner == 0 and n // row >= THREADS // tile


def expected_rows(dtype, n, aligned=True, sms=H200_SMS):
    """Rows plan (a scalar bias, the tensor one run): whole packs when aligned (the last chunk takes the tail), about
    two blocks per SM, 256 to ROW_CHUNK_PACKS packs per block, one partial sum per block."""
    vw = PACK[dtype]
    vec = vw if aligned else 1
    want = ceil_div(n // vec, 2 * sms)
    chunk_packs = min(max(ceil_div(want, THREADS) * THREADS, THREADS), ROW_CHUNK_PACKS)
    chunk = chunk_packs * vec
    chunks = ceil_div(n, chunk)
    return dict(vec=vec, len=n, chunk_elems=chunk, chunks=chunks, partial_rows=chunks)


def expected_cols(dtype, n, row_len, group, aligned=True, sms=H200_SMS):
    """Columns plan over rows of row_len elements: about three blocks per SM, 256 packs to 64K elements per block,
    tiles of col_tile_packs, whole steps of rows; one partial row per block row. fp16/bf16 tensors too small for
    three blocks per SM even of 8-byte packs take those. Few rows of many columns take one-sector tiles over every
    row (one row chunk: the main kernel writes dbias) when a thread gets at most UNROLL steps and 16 elements and
    every SM a tile."""
    vw = PACK[dtype]
    vec = vw if aligned and row_len % vw == 0 else 1
    # fp16/bf16 so small that even 8-byte blocks sit at their 256-pack floor: 8-byte packs, twice the blocks
    if vec == 8 and group == 1 and n // (COL_BLOCKS_PER_SM * sms) < THREADS * 4:
        vec = 4
    packs = row_len // vec
    block_elems = min(max(n // (COL_BLOCKS_PER_SM * sms), THREADS * vec), COL_BLOCK_ELEMS)
    tile = col_tile_packs(packs)
    per_step_rows = THREADS // tile
    steps = max(1, ceil_div(block_elems, per_step_rows * tile * vec))
    rows_per_block = per_step_rows * steps
    rows = n // row_len
    chunks = ceil_div(rows, rows_per_block)
    # few rows of many columns: one-sector tiles over every row, at most UNROLL steps and 16 elements a thread
    sector = max(1, 32 // (vec * ELEM_BYTES[dtype]))
    whole_steps = ceil_div(rows, THREADS // sector)
    if chunks > 1 and group == 1 and vec > 1 and packs % sector == 0 and whole_steps <= UNROLL \
            and whole_steps * vec <= 16 and packs // sector >= sms:
        tile, per_step_rows, chunks = sector, THREADS // sector, 1
        rows_per_block = per_step_rows * whole_steps
    return dict(vec=vec, packs_per_row=packs, tile_packs=tile, tiles=ceil_div(packs, tile),
                rows_per_step=per_step_rows, rows_per_block=rows_per_block, row_chunks=chunks, group=group,
                partial_rows=chunks)


def expected_channels(dtype, n, channels, inner, aligned=True):
    """Channels plan, or None: at most CHANNELS_MOST elements and at least CHANNELS_FEWEST channels; the widest
    power-of-two pack up to 16 bytes that divides a plane (when aligned); the fewest threads per channel, a power of
    two from one warp, whose CHANNEL_ELEMS elements each hold the channel's column in one round, CHANNEL_THREADS at
    the most; blocks of one group, or of CHANNEL_BLOCK threads."""
    if n > CHANNELS_MOST or channels < CHANNELS_FEWEST:
        return None
    vec = PACK[dtype] if aligned else 1
    while inner % vec:
        vec //= 2
    per = CHANNEL_ELEMS // vec
    column = n // channels // vec
    threads = 32
    while threads * per < column and threads < CHANNEL_THREADS:
        threads *= 2
    if threads * per < column:
        return None
    block = max(threads, CHANNEL_BLOCK)
    return dict(vec=vec, inner_packs=inner // vec, column_packs=column, threads=threads, block_threads=block,
                partial_rows=1, blocks=ceil_div(channels, block // threads))


def expected_planes(dtype, n, channels, inner, aligned=True, sms=H200_SMS):
    """Planes plan: the widest pack whose blocks start on plane boundaries; blocks of whole samples when a sample
    (and enough of them for whole packs) fits the block size wanted, else whole planes when they fit it (or fit a
    block and cannot be split in whole packs), else each plane split in even pieces of whole packs."""
    vw = PACK[dtype]
    sample = channels * inner
    outer = n // sample
    for vec in ([vw] if aligned and inner >= vw else []) + [1]:
        most = PLANE_PACKS * vec
        want = min(max(n // (2 * sms) // vec * vec, THREADS * vec), most)
        plane_group = vec // math.gcd(inner, vec)
        sample_group = vec // math.gcd(sample, vec)
        if sample_group * sample <= want:
            block_planes = want // sample // sample_group * sample_group * channels
            shape, slots, splits, block = "samples", channels, 1, block_planes * inner
            partial = ceil_div(n // inner, block_planes)
        elif plane_group * inner <= most and (plane_group * inner <= want or inner % vec):
            block_planes = max(plane_group, want // inner // plane_group * plane_group)
            shape, slots, splits, block = "planes", block_planes, 1, block_planes * inner
            partial = outer
        elif inner % vec == 0:
            pieces = ceil_div(inner, want)
            block = ceil_div(ceil_div(inner, pieces), vec) * vec
            splits = ceil_div(inner, block)
            shape, slots, block_planes = "split", 1, 0
            partial = outer * splits
        else:
            continue
        lanes = 1
        while lanes < 32 and lanes * 2 * slots <= THREADS and lanes < inner // vec + 1:
            lanes *= 2
        return dict(vec=vec, shape=shape, slots=slots, splits=splits, block_elems=block, block_planes=block_planes,
                    lanes=lanes, partial_rows=partial)
    raise AssertionError("single elements always divide")


def sum_launch(rows: int, channels: int, lane_rows: int) -> tuple[int, int]:
    """(columns per block, threads) of a column sum: up to 8 columns per block (a power of two), a power of two of row
    lanes for about lane_rows rows each, one warp at the least and a 1024-thread block at the most."""
    cols_per = pow2_at_least(channels, 8)
    lanes = min(1 << (ceil_div(rows, lane_rows) - 1).bit_length(), FINAL_THREADS // cols_per)
    return cols_per, max(lanes * cols_per, 32)


def expected_sums(partial_rows: int, channels: int, in_main: bool = False):
    """Column sums: one stage of about SUM_LANE_ROWS rows per thread; two stages when even the widest block would give
    a thread more than SUM_MAX_LANE_ROWS rows. Workspace: the partial matrix, plus the first stage's
    [slices][channels] result. The channels kernel (in_main) writes dbias: no stage, no workspace."""
    if in_main:
        return dict(sum_slices=0, workspace=0)
    cols_per, threads = sum_launch(partial_rows, channels, SUM_LANE_ROWS)
    slices = 1
    lanes = threads // cols_per
    if partial_rows > SUM_MAX_LANE_ROWS * lanes:
        slice_rows = max(SUM_SLICE_LANE_ROWS * lanes, ceil_div(partial_rows, 65535))
        slices = ceil_div(partial_rows, slice_rows)
    return dict(cols_per=cols_per, threads=threads, blocks=ceil_div(channels, cols_per), sum_slices=slices,
                workspace=(partial_rows + (slices if slices > 1 else 0)) * channels * 4)


def spec_of(x_shape, layout):
    """(channels, inner) of a named bias layout over x: bias[(i / inner) % channels] is flat element i's bias."""
    numel = math.prod(x_shape)
    if layout == "scalar":
        return 1, 1
    if layout == "last":
        return x_shape[-1], 1
    if layout == "full":
        return numel, 1
    if layout == "dim1":
        return x_shape[1], math.prod(x_shape[2:])
    raise ValueError(layout)


def sums_in_main(plan: dict) -> bool:
    """The main kernel writes dbias (no partial matrix, no column sums): the channels kernel, and a columns plan of
    one row chunk."""
    return plan["kind"] == "channels" or (plan["kind"] == "cols" and plan["partial_rows"] == 1)


def check_plan(bp, dtype, n, channels, inner, aligned=True, sms=H200_SMS):
    """The planner's plan for one layout against the rules above; returns it."""
    got = bp.plan(dtype, n, channels, inner, aligned=aligned, sms=sms)
    kind = expected_kind(dtype, n, channels, inner, aligned)
    assert got["kind"] == kind, (dtype, n, channels, inner, aligned, got)
    if kind == "none":
        assert got["workspace_bytes"] == 0
        return got
    if kind == "rows":
        want = expected_rows(dtype, n, aligned, sms)
        part = got["rows"]
        assert got["blocks"] == part["chunks"]
    elif kind == "cols":
        group = 1 if inner == 1 else inner
        want = expected_cols(dtype, n, channels * inner, group, aligned, sms)
        part = got["cols"]
        assert got["blocks"] == part["row_chunks"] * part["tiles"]
    elif kind == "channels":
        want = expected_channels(dtype, n, channels, inner, aligned)
        part = {**got["channels_plan"], "blocks": got["blocks"]}
    else:
        want = expected_planes(dtype, n, channels, inner, aligned, sms)
        part = got["planes"]
    merged = {**part, "vec": got["vec"], "partial_rows": got["partial_rows"]}
    assert {k: merged[k] for k in want} == want, (dtype, n, channels, inner, got)
    sums = expected_sums(got["partial_rows"], channels, sums_in_main(got))
    assert got["sum_slices"] == sums["sum_slices"], got
    assert got["workspace"] == sums["workspace"], got
    assert got["workspace_bytes"] == max(sums["workspace"], 4)
    return got


# ------------------------------------------------------------------------------------ which kernel for which layout

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("x_shape, layout, kind", [
    ((64, 256, 14, 14), "scalar", "rows"),
    ((8 * 1024, 2048), "last", "cols"),
    ((64, 256, 14, 14), "full", "cols"),
    ((64, 64, 64, 64), "dim1", "planes"),  # 4096-element planes: too long to group, 2^24 elements
    ((64, 256, 7, 7), "dim1", "channels"),  # 49 elements: 3136 a column, 256 threads a channel
    ((64, 256, 14, 14), "dim1", "channels"),  # 12544 a column: 1024 threads a channel (8-byte half packs)
    ((128, 256, 14, 14), "dim1", "planes"),  # 2^22 elements and more
    ((64, 32, 8, 8), "dim1", None),  # 64-element planes: grouped columns in half types, channels in fp32
])
def test_layouts_of_real_networks(bp, dtype, x_shape, layout, kind):
    """The layouts the benchmarks run get the kernel the planner's comments promise them."""
    channels, inner = spec_of(x_shape, layout)
    got = check_plan(bp, dtype, math.prod(x_shape), channels, inner)
    assert got["kind"] == (kind or ("channels" if dtype == "float32" else "cols"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_no_fused_plan_when_the_bias_does_not_tile_the_tensor(bp, dtype):
    """n must be a whole number of bias periods (channels * inner), and positive."""
    for n, c, inner in [(0, 1, 1), (-4, 1, 1), (30, 4, 1), (30, 2, 4), (32, 0, 1), (32, 1, 0)]:
        got = bp.plan(dtype, n, c, inner)
        assert (got["kind"], got["workspace_bytes"]) == ("none", 0), (n, c, inner)
    assert bp.plan(dtype, 32, 2, 4)["kind"] != "none"


def test_bad_arguments_are_refused_with_the_value_named(bp):
    """The test module names an unknown dtype or a multiprocessor count below one."""
    with pytest.raises(ValueError, match="'float64'"):
        bp.plan("float64", 8, 1, 1)
    with pytest.raises(ValueError, match="sms must be >= 1, got 0"):
        bp.plan("float32", 8, 1, 1, sms=0)


# ------------------------------------------------------------------------------------ thresholds

@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
def test_grouped_columns_need_as_many_rows_as_a_block_steps_over(bp, dtype):
    """[outer, 4, 8] in half types: rows of 32 elements are four-pack tiles, so a block steps over 64 rows at once;
    63 rows stay with the planes kernel, 64 take grouped columns."""
    assert check_plan(bp, dtype, 63 * 32, 4, 8)["kind"] == "planes"
    got = check_plan(bp, dtype, 64 * 32, 4, 8)
    assert (got["kind"], got["cols"]["group"], got["cols"]["tile_packs"]) == ("cols", 8, 4)


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
def test_grouped_columns_need_tiles_of_whole_planes(bp, dtype):
    """An 8-pack tile holds 64 elements: planes of 64 group, planes of 128 (twice a tile) do not, nor do planes that
    are not whole packs (60) or x that is not 16-byte aligned (the 60-element planes, whose 15360-element columns
    fit one round, take the channels kernel; the others the planes kernel)."""
    n = 256 * 32 * 64 * 2
    assert check_plan(bp, dtype, n, 32, 64)["kind"] == "cols"
    assert check_plan(bp, dtype, n, 32, 128)["kind"] == "planes"
    assert check_plan(bp, dtype, 256 * 32 * 60, 32, 60)["kind"] == "channels"
    assert check_plan(bp, dtype, n, 32, 64, aligned=False)["kind"] == "planes"


def test_channels_kernel_takes_small_tensors_whose_columns_fit_one_round(bp):
    """The channels kernel (dbias written by the main kernel, no column sums) takes a tensor of at most 2^22 elements
    and at least 16 channels whose column (a channel's plane of every sample) fits one round of at most 1024 threads,
    16 elements each; its group is the fewest such threads from one warp, and one-warp groups share 128-thread
    blocks. Each threshold on both sides."""
    def plan_of(dtype, x_shape, aligned=True):
        got = check_plan(bp, dtype, math.prod(x_shape), x_shape[1], math.prod(x_shape[2:]), aligned=aligned)
        if got["kind"] != "channels":
            return got["kind"], None, None
        assert (got["sum_slices"], got["workspace"]) == (0, 0), got
        return got["vec"], got["channels_plan"]["threads"], got["blocks"]

    # Columns of 4096 fp32 packs fill 1024 threads; 17 samples of 1024 elements do not fit.
    assert plan_of("float32", (16, 16, 32, 32)) == (4, 1024, 16)
    assert plan_of("float32", (17, 16, 32, 32))[0] == "planes"
    # Single elements (7x7 planes): 334 samples are 16366 elements, 335 are 16415 > 16384.
    assert plan_of("float32", (334, 16, 7, 7)) == (1, 1024, 16)
    assert plan_of("float32", (335, 16, 7, 7))[0] == "planes"
    # One warp holds 512 elements: 10 samples (490) in one warp, four channels a block; 11 (539) in two warps.
    assert plan_of("float32", (10, 1152, 7, 7)) == (1, 32, 288)
    assert plan_of("float32", (11, 1152, 7, 7)) == (1, 64, 576)
    assert plan_of("float32", (8, 1152, 7, 7)) == (1, 32, 288)
    # 2^22 elements at the most.
    assert plan_of("float32", (64, 1024, 8, 8)) == (4, 256, 1024)
    assert plan_of("float32", (65, 1024, 8, 8))[0] == "planes"
    # 16 channels at the fewest.
    assert plan_of("float32", (2, 16, 56, 56)) == (4, 512, 16)
    assert plan_of("float32", (2, 15, 56, 56))[0] == "planes"
    # The widest pack dividing a plane: 196 = 49 x 4 half elements (8-byte packs), 98 (4-byte), 49 (single); none
    # on misaligned pointers.
    assert plan_of("float16", (64, 256, 14, 14)) == (4, 1024, 256)
    assert plan_of("bfloat16", (32, 256, 7, 14)) == (2, 256, 256)
    assert plan_of("bfloat16", (8, 1152, 7, 7)) == (1, 32, 288)
    assert plan_of("float16", (2, 16, 56, 56)) == (8, 512, 16)
    assert plan_of("float16", (2, 16, 56, 56), aligned=False) == (1, 512, 16)


def test_fp32_planes_never_group(bp):
    """fp32 streams at the floor through the planes kernel: the same shape that groups in fp16 does not."""
    assert check_plan(bp, "float16", 64 * 32, 4, 8)["kind"] == "cols"
    assert check_plan(bp, "float32", 64 * 32, 4, 8)["kind"] == "planes"


@pytest.mark.parametrize("dtype", DTYPES)
def test_rows_chunks_grow_to_two_blocks_per_sm_then_stop(bp, dtype):
    """A scalar bias: chunks of whole 256-pack steps sized for two blocks per SM, capped at ROW_CHUNK_PACKS packs."""
    vw = PACK[dtype]
    at_cap = ROW_CHUNK_PACKS * 2 * H200_SMS * vw  # exactly two blocks per SM at the cap
    below = at_cap - THREADS * 2 * H200_SMS * vw
    for n, packs in [(below, ROW_CHUNK_PACKS - THREADS), (at_cap, ROW_CHUNK_PACKS), (2 * at_cap, ROW_CHUNK_PACKS),
                     (1000 * vw, THREADS)]:
        got = check_plan(bp, dtype, n, 1, 1)
        assert got["rows"]["chunk_elems"] == packs * vw, (n, got)
    assert check_plan(bp, dtype, 2 * at_cap, 1, 1)["blocks"] == 4 * H200_SMS
    # More multiprocessors, smaller chunks for the same tensor.
    assert check_plan(bp, dtype, below, 1, 1, sms=2 * H200_SMS)["rows"]["chunk_elems"] < (ROW_CHUNK_PACKS - THREADS) * vw


@pytest.mark.parametrize("dtype", DTYPES)
def test_rows_pack_width_needs_alignment_and_whole_packs(bp, dtype):
    """A scalar-bias tensor of any length is one run: packed when aligned (the last chunk has a tail)."""
    vw = PACK[dtype]
    assert check_plan(bp, dtype, 1001, 1, 1)["vec"] == vw
    assert check_plan(bp, dtype, 1001, 1, 1, aligned=False)["vec"] == 1


@pytest.mark.parametrize("dtype", DTYPES)
def test_columns_blocks_cap_at_64k_elements(bp, dtype):
    """Last-dim bias of 1024: blocks of 64K elements at the most (a 2^28-element tensor), fewer for three blocks per
    SM below that, one step of rows at the least."""
    at_cap = COL_BLOCKS_PER_SM * H200_SMS * COL_BLOCK_ELEMS
    for n in (1 << 28, at_cap, at_cap // 2, 1024 * 4):
        got = check_plan(bp, dtype, n, 1024, 1)
        vec = got["vec"]  # 8-byte fp16/bf16 packs for the smallest (test_small_half_columns_take_8_byte_packs)
        block = got["cols"]["rows_per_block"] * got["cols"]["tile_packs"] * vec
        assert block == max(min(n // (COL_BLOCKS_PER_SM * H200_SMS), COL_BLOCK_ELEMS), THREADS * vec), (n, got)
    assert check_plan(bp, dtype, 1 << 28, 1024, 1)["blocks"] == (1 << 28) // COL_BLOCK_ELEMS


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_small_half_columns_take_8_byte_packs(bp, dtype):
    """Where even blocks of 8-byte packs sit at their 256-pack floor (n / 396 < 1024 on 132 SMs), fp16/bf16 columns
    take 8-byte packs: twice the blocks, one pack a thread. Above, 16-byte packs (channels_last [8,1152,7,7] lost with
    8-byte ones); fp32 keeps its packs."""
    edge = COL_BLOCKS_PER_SM * H200_SMS * THREADS * 4  # 405504 elements: 396 rows of 1024
    assert check_plan(bp, dtype, edge, 1024, 1)["vec"] == 8
    assert check_plan(bp, dtype, edge - 1024, 1024, 1)["vec"] == 4
    assert check_plan(bp, dtype, 64 * 4096, 4096, 1)["vec"] == 4  # rows wider than a block too
    assert check_plan(bp, dtype, 8 * 49 * 1152, 1152, 1)["vec"] == 8
    assert check_plan(bp, dtype, 2 * 16 * 56 * 56, 16, 1)["blocks"] == 98  # 49 with 16-byte packs
    assert check_plan(bp, "float32", edge // 2 - 1024, 1024, 1)["vec"] == 4


def test_column_tiles(bp):
    """8-pack tiles when the row divides into them, else the whole row up to 256 packs, else 32-pack tiles."""
    for columns, tile in [(1024, 8), (4 * 1000, 8), (12, 3), (4 * 257, 32), (4 * 255, 255), (4 * 9, 9)]:
        got = check_plan(bp, "float32", 600 * columns, columns, 1)  # 600 rows: more than whole columns take
        assert got["cols"]["tile_packs"] == tile, (columns, got)
    assert check_plan(bp, "float32", 64 * 30, 30, 1)["vec"] == 1  # 30 columns: not whole packs


def test_planes_block_shapes_switch_where_a_block_stops_holding_them(bp):
    """fp32 planes (4-element packs, a block holds 4096 elements at the most): whole samples while a sample fits the
    block size wanted, whole planes while a plane fits a block, split planes beyond."""
    # [outer, 4, 257]: the block size wanted is n / 264 (two blocks per SM): 1028 elements (one sample) from 264
    # samples on, else the 1024-element minimum.
    assert check_plan(bp, "float32", 263 * 4 * 257, 4, 257)["planes"]["shape"] == "planes"
    assert check_plan(bp, "float32", 264 * 4 * 257, 4, 257)["planes"]["shape"] == "samples"
    # With 132 samples of [2, 4096] a block of 4096 elements is wanted and holds one plane; planes of 4100 elements
    # split into two pieces of whole packs.
    big = 1 << 24
    got = check_plan(bp, "float32", 132 * 2 * 4096, 2, 4096)
    assert (got["planes"]["shape"], got["planes"]["block_planes"]) == ("planes", 1)
    got = check_plan(bp, "float32", 132 * 2 * 4100, 2, 4100)
    assert (got["planes"]["shape"], got["planes"]["splits"], got["planes"]["block_elems"]) == ("split", 2, 2052)
    got = check_plan(bp, "float32", big, 2, big // 2)
    assert (got["planes"]["shape"], got["planes"]["splits"], got["partial_rows"]) == ("split", 2048, 2048)


@pytest.mark.parametrize("dtype", DTYPES)
def test_planes_fall_back_to_single_elements_when_no_pack_fits(bp, dtype):
    """Planes shorter than a pack, or long planes that are neither whole packs nor fit a block, run element-wise;
    a misaligned tensor too."""
    vw = PACK[dtype]
    assert check_plan(bp, dtype, 64 * 3 * (vw - 1), 3, vw - 1)["vec"] == 1
    odd = PLANE_PACKS * vw + 1
    got = check_plan(bp, dtype, 2 * 3 * odd, 3, odd)
    assert (got["vec"], got["planes"]["shape"]) == (1, "split")
    assert check_plan(bp, dtype, 64 * 15 * 49, 15, 49, aligned=False)["vec"] == 1
    assert check_plan(bp, dtype, 64 * 15 * 49, 15, 49)["vec"] == vw


# ------------------------------------------------------------------------------------ column sums and workspace

def test_column_sums_go_to_two_stages_past_eight_rows_per_thread(bp):
    """A scalar bias on 2^26 fp32 elements: 8192 chunks of 8192 elements, 8 per thread of a 1024-thread column sum:
    one stage; one more chunk: two stages over 4096-row slices, whose results the workspace holds as well."""
    chunk = ROW_CHUNK_PACKS * 4
    n = FINAL_THREADS * SUM_MAX_LANE_ROWS * chunk
    one = check_plan(bp, "float32", n, 1, 1)
    assert (one["partial_rows"], one["sum_slices"], one["workspace"]) == (8192, 1, 8192 * 4)
    two = check_plan(bp, "float32", n + 4, 1, 1)
    assert (two["partial_rows"], two["sum_slices"], two["workspace"]) == (8193, 3, (8193 + 3) * 4)


def test_column_sum_launch_shape(bp):
    """Up to 8 columns per block (a power of two), row lanes a power of two for about 4 rows each (the one-stage rule;
    4 is also what the first of two stages passes), 32 threads at the least, 1024 at the most."""
    for rows, channels in [(1, 1), (1, 3), (5, 2), (33, 1), (1000, 1), (1025, 1), (8193, 1), (100, 8), (100, 9),
                           (5000, 3), (7, 1 << 20), (64, 256), (65, 256), (512, 8)]:
        for lane_rows in (1, 2, SUM_LANE_ROWS, 8):
            got = bp.sum_shape(rows, channels, lane_rows)
            cols_per, threads = sum_launch(rows, channels, lane_rows)
            assert got == {"cols_per": cols_per, "threads": threads, "blocks": ceil_div(channels, cols_per)}, \
                (rows, channels, lane_rows)
        assert bp.sum_shape(rows, channels) == bp.sum_shape(rows, channels, SUM_LANE_ROWS)
    # At the thresholds: [64][256] (NCHW [64,256,14,14]) in 16 lanes x 8 columns, one more row in 32 lanes; a scalar
    # bias's 4096 partials fill a 1024-thread block, 8193 too (the cap; planSums then splits).
    assert bp.sum_shape(64, 256) == {"cols_per": 8, "threads": 128, "blocks": 32}
    assert bp.sum_shape(65, 256)["threads"] == 256
    assert bp.sum_shape(4096, 1)["threads"] == bp.sum_shape(8193, 1)["threads"] == 1024
    assert bp.sum_shape(4 * 127 + 1, 1)["threads"] == 128
    assert bp.sum_shape(4 * 128 + 1, 1)["threads"] == 256
    assert bp.sum_shape(100, 9) == {"cols_per": 8, "threads": 256, "blocks": 2}
    assert bp.sum_shape(33, 8, 8)["threads"] == 64


@pytest.mark.parametrize("dtype", DTYPES)
def test_workspace_is_the_partial_matrix(bp, dtype):
    """Workspace = partial rows x bias elements x 4 bytes (fp32 sums) for every kind: [64, 256, 14, 14] with a
    dim-1 bias writes one partial row per sample-sized block; with a last-dim bias one per block of rows."""
    got = check_plan(bp, dtype, 128 * 256 * 196, 256, 196)
    assert got["workspace_bytes"] == got["partial_rows"] * 256 * 4
    got = check_plan(bp, dtype, 8192 * 5632, 5632, 1)
    assert got["workspace_bytes"] == got["partial_rows"] * 5632 * 4


# ------------------------------------------------------------------------------------ what the kernels rely on

def sweep():
    """Layouts around the thresholds: short to long planes, few to many channels and rows, odd sizes."""
    for dtype in DTYPES:
        for inner in (1, 2, 3, 7, 8, 9, 49, 60, 64, 65, 128, 196, 511, 512, 1024, 4095, 4096, 4100, 8192, 40000):
            for channels in (1, 2, 3, 4, 16, 32, 255, 256, 1000):
                for outer in (1, 2, 7, 63, 64, 65, 264, 1000):
                    n = outer * channels * inner
                    if n <= 1 << 27:
                        yield dtype, n, channels, inner


def test_plans_over_a_sweep_match_the_rules_and_cover_the_tensor(bp):
    """Over the sweep, aligned and not: the plan is the rules' plan, and its blocks cover every element once, start
    on pack boundaries, and write partial rows the workspace holds (tests/test_backward_proof.py walks them)."""
    seen = set()
    for dtype, n, channels, inner in sweep():
        for aligned in (True, False):
            got = check_plan(bp, dtype, n, channels, inner, aligned=aligned)
            kind = got["kind"]
            seen.add((kind, got.get("planes", {}).get("shape")))
            assert kind != "none"
            vec = got["vec"]
            in_main = got["sum_slices"] == 0  # the main kernel writes dbias: no partial matrix
            assert in_main == sums_in_main(got)
            assert got["workspace"] >= (0 if in_main else got["partial_rows"] * channels * 4)
            if kind == "rows":
                r = got["rows"]
                assert r["len"] == n and r["chunk_elems"] % vec == 0
                assert (r["chunks"] - 1) * r["chunk_elems"] < r["len"] <= r["chunks"] * r["chunk_elems"]
            elif kind == "cols":
                c = got["cols"]
                assert c["packs_per_row"] * vec * c["rows"] == n
                assert (c["row_chunks"] - 1) * c["rows_per_block"] < c["rows"] <= c["row_chunks"] * c["rows_per_block"]
                assert c["rows_per_block"] % c["rows_per_step"] == 0 and c["tile_packs"] <= THREADS
            elif kind == "channels":
                c = got["channels_plan"]
                assert c["inner_packs"] * vec == inner == c["inner_divisor"] * vec and got["partial_rows"] == 1
                assert c["column_packs"] * vec * channels == n and n <= CHANNELS_MOST
                assert c["column_packs"] <= c["threads"] * CHANNEL_ELEMS // vec
                assert got["blocks"] * c["block_threads"] >= channels * c["threads"] > (got["blocks"] - 1) * c[
                    "block_threads"]
            else:
                p = got["planes"]
                assert p["block_elems"] % vec == 0 and p["inner_divisor"] == inner
                assert p["lanes"] in (1, 2, 4, 8, 16, 32) and p["lanes"] * p["slots"] <= max(THREADS, p["slots"])
                assert p["block_elems"] <= PLANE_PACKS * vec
                if p["shape"] == "split":
                    assert (p["splits"] - 1) * p["block_elems"] < inner <= p["splits"] * p["block_elems"]
                    assert got["blocks"] == (n // inner) * p["splits"]
                else:
                    assert p["block_elems"] == p["block_planes"] * inner
                    assert (got["blocks"] - 1) * p["block_elems"] < n <= got["blocks"] * p["block_elems"]
                    if p["shape"] == "samples":
                        assert p["block_planes"] % channels == 0
    assert seen >= {("rows", None), ("cols", None), ("planes", "samples"), ("planes", "planes"),
                    ("planes", "split"), ("channels", None)}, seen


def test_fast_div_gives_the_planes_kernel_exact_plane_indices(bp):
    """FastDiv (multiply-high and shift) divides every block-local offset exactly, for plane sizes around powers of
    two and the real networks' planes."""
    for d in (1, 2, 3, 7, 49, 196, 255, 256, 257, 3136, 4095, 4096, 4100, 12544, 65537, (1 << 31) - 1, 1 << 31):
        for n in (0, 1, d - 1, d, d + 1, 2 * d - 1, 4095, 4096 * 8 - 1, 12345678, (1 << 32) - 1):
            if 0 <= n < 1 << 32:
                assert bp.fast_div32(d, n) == n // d, (d, n)


def test_fast_div31_divides_every_dividend_below_2_pow_31(bp):
    """FastDiv::div31 (a 32-bit magic for dividends and divisors below 2^31: the forward's narrow bias lookups): every
    divisor up to 2^12 against the dividends where a quotient steps and the largest ones, then divisors near powers of
    two and the largest, where the magic's rounding error is largest."""
    top = (1 << 31) - 1
    divisors = list(range(1, 1 << 12)) + [s + k for s in (1 << p for p in range(12, 31)) for k in (-1, 0, 1)] + [top]
    for d in divisors:
        last = top - top % d
        for n in {0, 1, d - 1, d, 2 * d - 1, last - 1, last, top, top - d}:
            if 0 <= n <= top:
                assert bp.fast_div31(d, n) == n // d, (d, n)


# ------------------------------------------------------------------------------------ both sides of each switch, run

# (dtype, x shape, bias shape, what the H200's plan is): pairs on either side of a threshold tested above.
BOUNDARY_RUNS = [
    ("float16", (63, 4, 8), (4, 1), ("planes", "samples", 1)),  # grouped columns need 64 rows
    ("float16", (64, 4, 8), (4, 1), ("cols", None, 0)),  # one row chunk: the main kernel writes dbias
    ("bfloat16", (32, 32, 64), (32, 1), ("cols", None, 0)),  # a tile of 64 elements holds whole planes of 64 ...
    ("bfloat16", (32, 32, 128), (32, 1), ("channels", None, 0)),  # ... not of 128 (a small tensor: channels)
    ("float32", (263, 4, 257), (4, 1), ("planes", "planes", 1)),  # a sample does not fit the block wanted
    ("float32", (264, 4, 257), (4, 1), ("planes", "samples", 1)),
    ("float32", (132, 2, 4096), (2, 1), ("planes", "planes", 1)),  # a plane fills a block
    ("float32", (132, 2, 4100), (2, 1), ("planes", "split", 1)),
    ("float32", (4096, 64, 16), (64, 1), ("planes", "samples", 1)),  # 1024 partial rows: one column-sum stage
    ("float32", (4100, 64, 16), (64, 1), ("planes", "samples", 3)),  # 1025: two stages, three slices
    ("float32", (10, 1152, 7, 7), (1152, 1, 1), ("channels", None, 0)),  # a warp a channel ...
    ("float32", (11, 1152, 7, 7), (1152, 1, 1), ("channels", None, 0)),  # ... two warps
    ("float32", (334, 16, 7, 7), (16, 1, 1), ("channels", None, 0)),  # a column fits 1024 threads ...
    ("float32", (335, 16, 7, 7), (16, 1, 1), ("planes", "samples", 1)),  # ... not at 335 samples
    ("float32", (2, 16, 56, 56), (16, 1, 1), ("channels", None, 0)),  # 16 channels ...
    ("float32", (2, 15, 56, 56), (15, 1, 1), ("planes", "split", 1)),  # ... not 15
    ("float32", (64, 1024, 8, 8), (1024, 1, 1), ("channels", None, 0)),  # 2^22 elements ...
    ("float32", (65, 1024, 8, 8), (1024, 1, 1), ("planes", "planes", 1)),  # ... not more
    ("bfloat16", (8, 1152, 7, 7), (1152, 1, 1), ("channels", None, 0)),
    ("float16", (64, 256, 14, 14), (256, 1, 1), ("channels", None, 0)),  # 8-byte packs, 1024 threads a channel
    ("bfloat16", (32, 256, 7, 14), (256, 1, 1), ("channels", None, 0)),  # 4-byte packs
    ("float32", (512, 1056), (1056,), ("cols", None, 0)),  # whole columns: 132 one-sector tiles, 4 steps of rows ...
    ("float32", (513, 1056), (1056,), ("cols", None, 1)),  # ... not 5 steps
    ("float32", (512, 1048), (1048,), ("cols", None, 1)),  # ... nor 131 tiles
    ("bfloat16", (256, 2112), (2112,), ("cols", None, 0)),  # fp16/bf16: two steps (16 elements a thread) ...
    ("float16", (257, 2112), (2112,), ("cols", None, 1)),  # ... not three
    ("float16", (512, 2112), (2112,), ("cols", None, 1)),
]


def test_boundary_runs_name_the_h200_plans(bp):
    """The plan each boundary run names is the H200's (the GPU test asserts it only on 132 SMs)."""
    for dtype, shape, bshape, plan in BOUNDARY_RUNS:
        got = check_plan(bp, dtype, math.prod(shape), bshape[0], math.prod(shape[2:]))
        assert (got["kind"], got.get("planes", {}).get("shape"), got["sum_slices"]) == plan, (dtype, shape, got)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype, shape, bshape, plan", BOUNDARY_RUNS,
                         ids=[f"{d}-{'x'.join(map(str, s))}" for d, s, _, _ in BOUNDARY_RUNS])
def test_boundary_shapes_compute_the_same_on_both_sides_cuda(bp, dtype, shape, bshape, plan):
    """Each side of a switch gets the rules' plan for this GPU's SM count (on the H200's 132 SMs, the plan named) and
    computes dx and dbias right: dx and dbias against fp64 autograd, and dbias exactly the integer sum for
    small-integer gradients. tests/test_kernels_property_gpu.py derives the switch points of any GPU."""
    import torch

    from test_ops import _assert_backward_close

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    channels, inner = bshape[0], math.prod(shape[2:])
    got = check_plan(bp, dtype, math.prod(shape), channels, inner, sms=sms)
    if sms == H200_SMS:
        assert (got["kind"], got.get("planes", {}).get("shape"), got["sum_slices"]) == plan, got
    tdtype = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(7)
    x = (torch.randn(shape, generator=gen, dtype=torch.float64) * 4).to("cuda", tdtype)
    b = torch.randn(bshape, generator=gen, dtype=torch.float64).to("cuda", tdtype)
    g = torch.randn(shape, generator=gen, dtype=torch.float64).to("cuda", tdtype)
    _assert_backward_close(x, b, g, "x".join(map(str, shape)))
    gi = torch.randint(-8, 9, shape, generator=gen).to("cuda", tdtype)
    _, db = torch.ops.torchtrt_swish.swish_backward(gi, x, b)
    assert torch.equal(db.cpu(), gi.to("cpu", torch.float64).sum_to_size(bshape).to(tdtype))
