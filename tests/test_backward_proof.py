"""The fused backward's kernels proven over the planner's decision space, on the CPU.

tests/backward_plan/fused_proof.cpp walks every block and thread of a plan through the index functions the kernels
call (csrc/kernels/swish_backward_index.h) and checks bounds (x, g, dx, workspace, shared memory), that each dx
element is written once, that each g element is summed once into a partial cell of its own bias element, that each
partial cell is written before the column sums read it, that each dbias element is written once and that grids fit.
Here the space: every C up to 1100, plane sizes 1-80 and powers of two +-1, row counts into the thousands, every
dtype (pack width), aligned and misaligned pointers, every bias kind, the SM counts of real GPUs, and the shapes at
the planner's switch points, with every plan family reached.
"""
from __future__ import annotations

import random

import pytest
from test_backward_plan import PACK, bp  # noqa: F401  (the _backward_plan module fixture)

# Multiprocessors of real GPUs: T4-class 40 is not listed on purpose, L4 58 neither; these span 16 (small parts) to
# B200-class 148 and 170.
# The SM counts of real GPUs (16 to 170): the planner's decisions move with them.
SMS = (16, 46, 78, 108, 114, 132, 148, 170)
# Elements of one walked case at the most, and of one test's cases together (the walk goes element by element, about
# 10 ns each): below it every distinct plan is walked, above it a seeded sample of the largest cases fills it.
MAX_ELEMS = 1 << 22
BUDGET_ELEMS = 150_000_000


def plane_sizes() -> list[int]:
    """Plane sizes 1-80 and the powers of two +-1 up to 2^16."""
    sizes = set(range(1, 81))
    for k in range(1, 17):
        sizes |= {2 ** k - 1, 2 ** k, 2 ** k + 1}
    return sorted(sizes)


def _key(bp_module, dtype, n, channels, inner, aligned, sms):
    """Cases whose plans are equal walk the same blocks: fp16 and bf16 share their plans, and small tensors the
    same plan on every SM count."""
    plan = bp_module.plan(dtype, n, channels, inner, aligned, sms)
    flat = tuple(sorted((k, tuple(sorted(v.items())) if isinstance(v, dict) else v) for k, v in plan.items()))
    return (PACK[dtype], n, channels, inner, aligned, flat)


def plan_class(plan: dict, n: int, inner: int) -> tuple:
    """What distinguishes the walks of two plans beyond their sizes: the family and pack width; for columns the
    reduction (shuffle or tree), a partial last tile, several and partial row chunks; for planes the lanes, several
    and partial blocks, a partial last pack; for rows several and partial chunks and a tail; one or two sum stages;
    for channels the group size, a partly idle last block and lanes past the column's end."""
    kind, vec = plan["kind"], plan["vec"]
    two = plan["sum_slices"] > 1
    if kind == "cols":
        c = plan["cols"]
        return (kind, c["group"] > 1, vec, 32 % c["tile_packs"] == 0, c["packs_per_row"] % c["tile_packs"] != 0,
                c["row_chunks"] > 1, c["rows"] % c["rows_per_block"] != 0, two)
    if kind == "planes":
        q = plan["planes"]
        span = inner if q["shape"] == "split" else n
        return (kind, q["shape"], vec, q["lanes"], plan["blocks"] > 1, span % q["block_elems"] != 0, n % vec != 0, two)
    if kind == "rows":
        r = plan["rows"]
        return (kind, vec, r["chunks"] > 1, n % r["chunk_elems"] != 0, n % vec != 0, two)
    if kind == "channels":
        c = plan["channels_plan"]
        return (kind, vec, c["threads"], plan["channels"] * c["threads"] % c["block_threads"] != 0,
                c["column_packs"] % c["threads"] != 0)
    return (kind,)


def _cases(bp_module, raw, budget=BUDGET_ELEMS, largest=MAX_ELEMS):
    """raw (dtype, n, channels, inner, aligned, sms) cases, one per distinct plan: first the smallest case of every
    plan class (plan_class), whatever the budget, then every plan from the smallest up while half the budget lasts,
    then a seeded sample of the larger ones for the rest."""
    seen, out, classes = set(), [], {}
    for case in sorted(set(raw), key=lambda c: (c[1], c)):
        if case[1] > largest or case[1] < 1:
            continue
        key = _key(bp_module, *case)
        if key not in seen:
            seen.add(key)
            out.append(case)
            classes.setdefault(plan_class(bp_module.plan(*case), case[1], case[3]), case)
    must = set(classes.values())
    dense = list(must)
    total = sum(c[1] for c in dense)
    rest = [c for c in out if c not in must]
    while rest and total + rest[0][1] <= budget // 2:
        total += rest[0][1]
        dense.append(rest.pop(0))
    random.Random(len(rest)).shuffle(rest)
    for case in rest:
        if total + case[1] <= budget:
            total += case[1]
            dense.append(case)
    return dense


def _every(dtypes=tuple(PACK), aligned=(True, False), sms=SMS):
    for d in dtypes:
        for a in aligned:
            for s in sms:
                yield d, a, s


def _prove(bp_module, raw):
    cases = _cases(bp_module, raw)
    results = bp_module.prove_fused(cases)
    print(f"{len(cases)} plans, {sum(c[1] for c in cases) / 1e6:.0f} M elements walked")
    broken = [(c, why) for c, (_, why) in zip(cases, results) if why]
    assert not broken, f"{len(broken)} of {len(cases)} plans break a rule, first: {broken[:5]}"
    return {family for family, _ in results}, len(cases)


def test_last_dim_and_full_bias_every_channel_count(bp):
    """A bias on the last dim ([rows, C]) and a full bias (one row), C = 1..1100, rows from 1 into the thousands."""
    raw = []
    for channels in range(1, 1101):
        for rows in (1, 2, 3, 7, 64, 255):
            for d, a, s in _every():
                raw.append((d, rows * channels, channels, 1, a, s))
    rng = random.Random(30)
    for _ in range(300):
        channels = rng.randint(1, 1100)
        rows = rng.choice((256, 511, 1000, 2049, 4096))
        d, a, s = rng.choice(list(_every()))
        raw.append((d, rows * channels, channels, 1, a, s))
    families, count = _prove(bp, raw)
    assert {"cols", "rows"} <= families, families
    assert count > 10000, count


def test_per_channel_planes_every_plane_size(bp):
    """Per-channel biases on dim 1 ([N, C, inner]): every plane size with C up to 64, every C up to 1100 with the
    planes of real networks, batch 1 to 64; grouped columns and all four planes shapes reached."""
    raw = []
    for inner in plane_sizes():
        for channels in (1, 2, 3, 5, 8, 13, 16, 31, 32, 33, 64):
            for batch in (1, 2, 3, 16, 64, 256):
                for d, a, s in _every(sms=(16, 132, 170)):
                    raw.append((d, batch * channels * inner, channels, inner, a, s))
    for channels in range(1, 1101):
        for inner in (2, 4, 7, 8, 9, 16, 49, 196):
            batch = 1 + channels % 5
            for d, a, s in _every(sms=(SMS[channels % len(SMS)],)):
                raw.append((d, batch * channels * inner, channels, inner, a, s))
    families, count = _prove(bp, raw)
    assert {"grouped_cols", "planes_samples", "planes_planes", "planes_split", "channels", "rows"} <= families, \
        families
    assert count > 10000, count


def test_channels_kernel_groups_and_grids(bp):
    """The channels kernel at every group size (a warp to 1024 threads a channel: [N, C, 7, 7] at the batches where
    the group doubles), one-warp groups sharing blocks with a partly idle last block (C not a multiple of four),
    thousands of channels with short planes, every pack width (planes of 196, 98 and 49 half elements), at the
    size and channel-count limits, on every SM count."""
    raw = []
    for batch in (1, 10, 11, 20, 21, 41, 42, 83, 84, 167, 168, 334):
        for channels in (16, 17, 19, 33):
            for d, a, s in _every(sms=(16, 132)):
                raw.append((d, batch * channels * 49, channels, 49, a, s))
    for channels, inner in ((8646, 2), (67848, 4), (69696, 9), (4112, 49), (30000, 4)):
        for batch in (1, 2, 3):
            for d, a, s in _every(sms=(16, 132)):
                raw.append((d, batch * channels * inner, channels, inner, a, s))
    for batch, channels, inner in ((64, 256, 196), (32, 256, 98), (8, 1152, 49), (2, 16, 3136), (64, 1024, 64),
                                   (65, 1024, 64), (2, 15, 3136), (85, 16, 3072)):
        for d, a, s in _every(sms=(132,)):
            raw.append((d, batch * channels * inner, channels, inner, a, s))
    families, count = _prove(bp, raw)
    assert "channels" in families, families


def test_issue_shapes_and_a_random_sample(bp):
    """The grouped-columns shapes whose last tile was partial ([64,130,4,4], [16,257,2,4], [64,65,4,8], [9,257,8]
    on dim 1), and random shapes of every bias kind (block biases over several dims included)."""
    raw = []
    for n, c, inner in ((64 * 130 * 16, 130, 16), (16 * 257 * 8, 257, 8), (64 * 65 * 32, 65, 32), (9 * 257 * 8, 257, 8)):
        for d, a, s in _every():
            raw.append((d, n, c, inner, a, s))
    rng = random.Random(3030)
    for _ in range(1000):
        channels = rng.choice((1, rng.randint(1, 64), rng.randint(65, 1100)))
        inner = rng.choice((1, rng.randint(1, 80), rng.choice(plane_sizes())))
        outer = rng.choice((1, rng.randint(1, 16), rng.randint(17, 3000)))
        d, a, s = rng.choice(list(_every()))
        raw.append((d, outer * channels * inner, channels, inner, a, s))
    families, _ = _prove(bp, raw)
    assert "grouped_cols" in families


def test_switch_points_of_every_sm_count(bp):
    """Sizes on both sides of the planner's switch points for each SM count: the block size leaves its floor
    (n / (2 sms) = a block's minimum) and reaches its cap, and the column sums go from one stage to two."""
    raw = []
    for s in SMS:
        for d in PACK:
            vw = PACK[d]
            for a in (True, False):
                vec = vw if a else 1
                # scalar bias (rows kernel): chunks leave 256 packs and reach 2048
                for packs in (256, 2048):
                    edge = packs * vec * 2 * s
                    raw += [(d, edge + k, 1, 1, a, s) for k in (-vec, -1, 0, 1, vec)]
                # columns: 64K-element blocks at the cap, per row of 64 and 1000 channels
                for channels in (64, 1000):
                    rows = 65536 * 2 * s // channels
                    raw += [(d, (rows + k) * channels, channels, 1, a, s) for k in (-1, 0, 1)]
                # columns over whole columns: one-sector tiles (2 packs) for s tiles and up, rows of up to 4 steps
                for tiles in (s - 1, s, s + 1):
                    for rows in (1, 255, 256, 257, 511, 512, 513):
                        raw.append((d, rows * tiles * 2 * vec, tiles * 2 * vec, 1, a, s))
                # planes: small planes in a large tensor (a tall partial matrix: two column-sum stages)
                for channels, inner in ((8, 2), (16, 7), (64, 49), (3, 1)):
                    sample = channels * inner
                    for batch in (MAX_ELEMS // sample, 2 * s * 256 * vec // sample + 1):
                        raw.append((d, batch * sample, channels, inner, a, s))
    cases = _cases(bp, raw, budget=4 * BUDGET_ELEMS, largest=1 << 25)
    print(f"{len(cases)} plans, {sum(c[1] for c in cases) / 1e6:.0f} M elements walked")
    results = bp.prove_fused(cases)
    broken = [(c, why) for c, (_, why) in zip(cases, results) if why]
    assert not broken, broken[:5]
    two_stage = [c for c in cases if bp.plan(*c)["sum_slices"] > 1]
    assert two_stage, "no case reached the two-stage column sums"
    plans = [(c, bp.plan(*c)) for c in cases]
    for vw, steps in ((4, 4), (8, 2)):  # whole columns at their last step of rows, fp32 and fp16/bf16
        whole = [c for c, p in plans if PACK[c[0]] == vw and p["kind"] == "cols" and p["partial_rows"] == 1
                 and p["cols"]["rows"] > (steps - 1) * p["cols"]["rows_per_step"]]
        assert whole, f"no case of {vw}-element packs reached whole columns of {steps} steps"


def test_column_sums_of_tall_partial_matrices(bp):
    """The column sums on their own, on partial matrices taller than any walked tensor gives: one and two stages,
    first-stage slices at their 65535 cap on the grid's y, the second stage past eight rows a thread (its remainder
    loop), C from 1 to 1100."""
    cases = [(r, c) for c in (1, 2, 3, 7, 8, 9, 64, 257, 1100) for r in (1, 2, 31, 32, 33, 1023, 1024, 1025, 4097)]
    rng = random.Random(34)
    cases += [(rng.randint(1, 20000), rng.randint(1, 1100)) for _ in range(60)]
    # two stages with a second stage over 8 x lanes slices: 8 columns a block (128 lanes), slices of 512 rows
    cases += [(512 * 1025, 8), (512 * 1025 + 7, 9), (4096 * 8193, 1)]
    slices = {}
    for rows, channels in cases:
        why, slices[rows, channels] = bp.prove_sums(rows, channels)
        assert not why, (rows, channels, why)
    assert slices[1024, 64] == 1 < slices[1025, 64], "the one/two-stage switch is not crossed"
    assert slices[512 * 1025, 8] > 8 * 128, "no second stage past eight slices a thread"
