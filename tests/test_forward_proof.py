"""The forward's launches proven over its decision space on the CPU (tests/backward_plan/forward_proof.cpp).

Every bias lookup mode (scalar, full, last-dim vector and fixed, uniform packs, two-channel packs, per element), the
three launch shapes, the 8-byte packs of small fp16/bf16 tensors and the element-wise tail: every C up to 1100, plane
sizes 1-80 and powers of two +-1, rows into the thousands, every dtype, x/y and bias aligned or not, and the sizes at
the switch points (2^17 and 2^18 packs, 2^20 for bf16 two-channel packs, two fifths and two thirds of L2). The 32-bit
pack indices and lookups of a launch under 2^32 elements are checked against the 64-bit ones at every pack; past the
sizes a walk can cover, at the first and last blocks.
"""
from __future__ import annotations

import random

from test_backward_plan import PACK, bp  # noqa: F401  (the _backward_plan module fixture)
from test_backward_proof import plane_sizes

MODES = {0: "scalar", 1: "full", 2: "last_vec", 3: "last_fixed", 4: "uniform_vec", 5: "span2", 6: "periodic"}
BUDGET_ELEMS = 400_000_000


def _prove(bp_module, raw, complete=False):
    """Walks each distinct plan of raw (dtype, n, channels, inner, io, bias_aligned) cases, smallest first within
    BUDGET_ELEMS (complete: every one of them); returns the (mode, vectorized) pairs reached and the count."""
    seen, cases, total, left_out = set(), [], 0, []
    for c in sorted(set(raw), key=lambda c: c[1]):
        plan = bp_module.forward_plan(*c)
        key = (PACK[c[0]], c[1:], tuple(tuple(sorted(l.items())) for l in plan))
        if key in seen:
            continue
        if total + c[1] > BUDGET_ELEMS:
            left_out.append(c)
            continue
        seen.add(key)
        cases.append(c)
        total += c[1]
    results = bp_module.prove_forward(cases)
    broken = [(c, why) for c, why in zip(cases, results) if why]
    assert not broken, f"{len(broken)} of {len(cases)} plans break a rule, first: {broken[:5]}"
    assert not (complete and left_out), f"the budget leaves out {len(left_out)} cases, first {left_out[:3]}"
    modes = {(MODES[l["mode"]], l["vec"] > 1) for c in cases for l in bp_module.forward_plan(*c)}
    return modes, cases


def _one_pack_limit(dtype, mode):
    """swish_forward_plan.h's fwdOnePackLimit."""
    return 1 << (20 if (dtype, mode) == ("bfloat16", "span2") else 18)


def _flags():
    for d in PACK:
        for io in (True, False):
            for ba in (True, False):
                yield d, io, ba


def test_every_channel_count_and_plane_size(bp):
    raw = []
    for channels in range(1, 1101):
        for rows in (1, 3, 64):
            for d, io, ba in _flags():
                raw.append((d, rows * channels, channels, 1, io, ba))
        raw.append(("float16", channels, channels, 1, True, True))  # full bias
    for inner in plane_sizes():
        for channels in (1, 2, 3, 7, 64, 130):
            for outer in (1, 2, 5):
                if outer * channels * inner <= 1 << 21:
                    for d, io, ba in _flags():
                        raw.append((d, outer * channels * inner, channels, inner, io, ba))
    rng = random.Random(33)
    for _ in range(200):
        d = rng.choice(list(PACK))
        channels, inner = rng.randint(1, 1100), rng.choice((1, rng.randint(1, 80)))
        outer = rng.randint(1, 3000)
        if outer * channels * inner <= 1 << 22:
            raw.append((d, outer * channels * inner, channels, inner, rng.random() < 0.8, rng.random() < 0.8))
    modes, cases = _prove(bp, raw)
    assert {m for m, _ in modes} == set(MODES.values()), modes
    assert len(cases) > 5000, len(cases)


def test_switch_points_of_the_launch_shapes(bp):
    """Both sides of the narrow-pack limit (2^17 packs), the one-pack limit (2^18, bf16 two-channel 2^20) and the
    scalar tail."""
    raw = []
    for d, vw in PACK.items():
        for packs in (1 << 17, 1 << 18) + ((1 << 20,) if d == "bfloat16" else ()):
            for delta in (-1, 0, 1):
                n = (packs + delta) * vw
                raw += [(d, n, 1, 1, False, True), (d, n, 2, 7, False, False)]  # misaligned: element-wise launches
                raw += [(d, n, 1, 1, True, True), (d, n + 3, 1, 1, True, True), (d, n, 64, 1, True, True),
                        (d, n, 8 * vw, 1, True, True)]
                for sample, c, inner in ((4 * 49, 4, 49), (2 * 16, 2, 16), (3 * 5, 3, 5)):
                    raw += [(d, n - n % sample, c, inner, True, True), (d, n + (-n) % sample, c, inner, True, True)]
        # a fixed bias per thread (C / pack a power of two) in both launch shapes: C / pack up to 256
        for k in range(9):
            channels = vw * 2 ** k
            for packs in ((1 << 18) - 1, (1 << 18) + 1):
                rows = -(-packs * vw // channels)
                raw.append((d, rows * channels, channels, 1, True, True))
    modes, cases = _prove(bp, raw, complete=True)
    shapes = {(MODES[l["mode"]], l["vec"] > 1, l["ppt"]) for c in cases for l in bp.forward_plan(*c)}
    for mode in ("scalar", "span2", "uniform_vec", "last_vec", "last_fixed", "periodic"):
        assert {(mode, True, 1), (mode, True, 2)} <= shapes, (mode, sorted(shapes))
    # fp16/bf16 with a scalar, fixed or uniform bias: 8-byte packs up to 2^17 16-byte packs, 16-byte packs above.
    for c in cases:
        d, n, channels, inner = c[:4]
        body = bp.forward_plan(*c)[0]
        if PACK[d] == 8 and body["vec"] > 1:
            narrow = MODES[body["mode"]] in ("scalar", "last_fixed", "uniform_vec") and n // 8 <= 1 << 17
            assert body["vec"] == (4 if narrow else 8), (c, body)
    assert {("scalar", False, 1), ("scalar", False, 2), ("periodic", False, 1)} <= shapes, sorted(shapes)
    # One pack a thread up to the limit, two above it.
    for c in cases:
        body = bp.forward_plan(*c)[0]
        if body["vec"] == PACK[c[0]]:
            limit = _one_pack_limit(c[0], MODES[body["mode"]])
            assert body["ppt"] == (1 if body["packs"] <= limit else 2), (c, body)


def test_x_streaming_from_dram_takes_one_pack_a_thread_in_128_thread_blocks(bp):
    """Past two thirds of L2 (fwdStreams) a 16-byte launch above the one-pack limit takes one pack a thread in
    128-thread blocks, not two (faster where x streams from DRAM: the performance notes); at or below it, or at most
    the one-pack limit, the shapes of test_switch_points_of_the_launch_shapes. Either side of the point in every dtype
    and 16-byte lookup mode, exactly at it for a scalar bias, for two L2 sizes; the smaller L2's plans walked whole,
    the larger's at their edges; element-wise launches keep two packs a thread."""
    mib = 1 << 20

    def shape(d, n, channels, inner, l2):
        body = bp.forward_plan(d, n, channels, inner, l2_bytes=l2)[0]
        assert body["vec"] == PACK[d], (d, n, channels, inner, body)
        return MODES[body["mode"]], body["packs"], (body["threads"], body["ppt"])

    for l2, edges in ((12 * mib, False), (48 * mib, True)):
        high = l2 // 3 * 2
        cases, modes = [], set()
        for d, vw in PACK.items():
            size = 16 // vw
            for channels, inner in ((1, 1), (24 * vw, 1), (8 * vw, 1), (64, 16), (1152, 49), (3, 5)):
                sample = channels * inner
                fits = high // size // sample * sample
                for n, streams in ((fits, False), (fits + sample, True)):
                    mode, packs, got = shape(d, n, channels, inner, l2)
                    want = (256, 1) if packs <= _one_pack_limit(d, mode) else (128, 1 if streams else 2)
                    assert got == want, (l2, d, n, channels, inner, mode, got)
                    modes.add(mode)
                    cases.append((d, n, channels, inner, True, True))
            n = high // size  # x exactly two thirds of L2, then one pack more
            assert shape(d, n, 1, 1, l2)[2] == (128, 2) and shape(d, n + vw, 1, 1, l2)[2] == (128, 1)
            assert [(l["threads"], l["ppt"]) for l in bp.forward_plan(d, n + vw, 1, 1, io=False, l2_bytes=l2)] == [
                (128, 2)]
            assert shape(d, n + vw, n + vw, 1, l2) == ("full", (n + vw) // vw, (128, 1))
            cases += [(d, n + vw, 1, 1, False, True), (d, n + vw + 3, 1, 1, True, True),
                      (d, n + vw, n + vw, 1, True, True)]
        assert modes == set(MODES.values()) - {"full"}, modes
        assert bp.prove_forward(cases, edges=edges, l2_bytes=l2) == [""] * len(cases)


def test_32_bit_indices_either_side_of_2_pow_31_elements(bp):
    """The dividing modes' 32-bit pack indices and lookups (fwd32BitLaunch) where no walk of every block fits: the
    first two and last two blocks of each launch, last-dim vector, uniform and two-channel biases in every dtype, a few
    rows either side of 2^31 elements (the 32-bit and the 64-bit kernels; FastDiv::div31 needs dividends below 2^31),
    2^32 and 2^34 (64-bit: 32-bit pack indices would wrap). The plan must switch kernels exactly at 2^31."""
    cases = []
    for d, vw in PACK.items():
        for channels, inner in ((24 * vw, 1), (3, 8 * vw), (1000, vw), (5, 49), (3, vw + 2)):
            sample = channels * inner
            for target in (1 << 31, 1 << 32, 1 << 34):
                cases += [(d, (target // sample + side) * sample, channels, inner, True, True) for side in (-1, 1)]
    broken = [(c, why) for c, why in zip(cases, bp.prove_forward(cases, edges=True)) if why]
    assert not broken, broken
    assert {MODES[bp.forward_plan(*c)[0]["mode"]] for c in cases} == {"last_vec", "uniform_vec", "span2"}
    for c in cases:
        body = bp.forward_plan(*c)[0]
        assert body["narrow"] == (c[1] <= 1 << 31), (c, body)


def test_x_loads_skip_l1_while_x_takes_two_fifths_to_two_thirds_of_l2(bp):
    """The 16-byte x loads bypass L1 while x takes more than two fifths and at most two thirds of L2 (faster there;
    below it slower on an H100; slower once x streams from DRAM: the performance notes): on either side of both
    points in every dtype and 16-byte lookup mode, exactly at them for a scalar bias, for two L2 sizes. The 8-byte
    fp16/bf16 packs and element-wise launches have no such kernel, nor do 64-bit lookups (past 2^31 elements), whose
    launches the proof walks with an L2 of 2 GiB."""
    mib = 1 << 20
    for l2 in (48 * mib, 12 * mib):
        low, high = l2 // 5 * 2, l2 // 3 * 2  # 19.2 and 32 MiB, 4.8 and 8 MiB
        for d, vw in PACK.items():
            size = 16 // vw
            for channels, inner in ((1, 1), (24 * vw, 1), (8 * vw, 1), (64, 16), (1152, 49)):
                sample = channels * inner
                for bound, below in ((low, False), (high, True)):
                    fits = bound // size // sample * sample
                    for n, skips in ((fits, below), (fits + sample, not below)):
                        body = bp.forward_plan(d, n, channels, inner, l2_bytes=l2)[0]
                        assert body["vec"] == vw and body["skip_l1"] == skips, (l2, d, n, channels, inner, body)
            for bound, below in ((low, False), (high, True)):  # x at most two fifths, two thirds of L2, one pack more
                assert bp.forward_plan(d, bound // size, 1, 1, l2_bytes=l2)[0]["skip_l1"] == below
                assert bp.forward_plan(d, bound // size + vw, 1, 1, l2_bytes=l2)[0]["skip_l1"] != below
        assert {MODES[bp.forward_plan(d, high // 4, c, i, l2_bytes=l2)[0]["mode"]] for d in PACK
                for c, i in ((1, 1), (96, 1), (32, 1), (64, 16), (1152, 49))} == {
            "scalar", "last_vec", "last_fixed", "uniform_vec", "span2"}
    for d, vw in PACK.items():
        n = (24 << 20) // (16 // vw)  # x of 24 MiB (50 MiB of L2 by default), and 3 elements past whole packs
        launches = bp.forward_plan(d, n + 3, 1, 1) + bp.forward_plan(d, n, 1, 1, io=False)
        assert [l["skip_l1"] for l in launches] == [True, False, False], (d, launches)
        assert launches[0]["vec"] == vw
        assert not any(l["skip_l1"] for l in bp.forward_plan(d, 1000 * vw + 3, 1, 1))  # small: the plain load
    two_gib = (1 << 31) - 1
    cases = [(d, (1 << 31) + 96 * vw, 24 * vw, 1, True, True) for d, vw in PACK.items()]
    # 1 GiB: between two fifths and two thirds of 2 GiB
    cases += [(d, vw << 26, 1, 1, True, True) for d, vw in PACK.items()]
    assert bp.prove_forward(cases, edges=True, l2_bytes=two_gib) == [""] * len(cases)
    assert [bp.forward_plan(*c, l2_bytes=two_gib)[0]["skip_l1"] for c in cases] == [False] * 3 + [True] * 3
