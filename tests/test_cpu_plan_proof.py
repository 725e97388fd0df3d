"""The CPU op's index math walked over its space (tests/backward_plan/cpu_proof.cpp, csrc/kernels/swish_cpu.h).

The forward's bias runs: wherever at::parallel_for cuts the tensor (every single cut of small tensors, seeded random
cuts of larger ones), the runs tile each chunk in order and give every element its bias index (i / inner) % C. The
bias gradient's tasks: every g element summed by exactly one task, every partial written by exactly one and read by
the combine, over C up to 1100, planes 1-80 and powers of two +-1, rows into the thousands.
"""
from __future__ import annotations

import random

from test_backward_plan import bp  # noqa: F401  (the _backward_plan module fixture)
from test_backward_proof import plane_sizes


def _specs(n_max: int):
    rng = random.Random(31)
    for channels in list(range(1, 40)) + [rng.randint(40, 1100) for _ in range(40)]:
        for inner in (1, 2, 3, 7, 8, 16, 17):
            for outer in (1, 2, 5):
                n = outer * channels * inner
                if n <= n_max:
                    yield n, channels, inner


def test_bias_runs_every_single_cut_of_small_tensors(bp):
    """Scalar, last-dim, per-channel and full biases; the chunk boundary at every element."""
    checked = 0
    for n, channels, inner in _specs(600):
        for cut in range(0, n + 1, max(1, n // 97)):
            why = bp.prove_bias_runs(n, channels, inner, [cut])
            assert not why, (n, channels, inner, cut, why)
            checked += 1
        why = bp.prove_bias_runs(n, n, 1, [n // 2])  # full bias
        assert not why, (n, why)
    assert checked > 10000, checked


def test_bias_runs_random_chunks_of_larger_tensors(bp):
    rng = random.Random(32)
    for _ in range(600):
        channels = rng.choice((1, rng.randint(2, 64), rng.randint(65, 1100)))
        inner = rng.choice((1, rng.randint(1, 80), rng.choice(plane_sizes()[:60])))
        outer = rng.randint(1, 12)
        n = outer * channels * inner
        if n > 1 << 20:
            continue
        cuts = sorted(rng.sample(range(n + 1), min(n + 1, rng.randint(1, 16))))
        why = bp.prove_bias_runs(n, channels, inner, cuts)
        assert not why, (n, channels, inner, cuts, why)


def test_bias_grad_tasks_cover_every_element_once(bp):
    """C 1..1100 with short planes, every plane size with a few channels, rows up to 5000 (past 256 row blocks)."""
    for channels in range(1, 1101):
        for inner, outer in ((1, 3), (2, 2), (7, 1)):
            assert not (why := bp.prove_bias_grad(outer, channels, inner)), (outer, channels, inner, why)
    for inner in plane_sizes():
        for channels in (1, 2, 3, 16):
            for outer in (1, 2, 33):
                if outer * channels * inner <= 1 << 21:
                    assert not (why := bp.prove_bias_grad(outer, channels, inner)), (outer, channels, inner, why)
    for outer in (255, 256, 257, 1000, 5000):
        for channels, inner in ((1, 1), (3, 1), (512, 1), (513, 1), (2, 7), (16, 49)):
            assert not (why := bp.prove_bias_grad(outer, channels, inner)), (outer, channels, inner, why)
    # one row per block until the row blocks reach their cap (256): planes of a whole chunk, past 256 rows
    for outer in (256, 257, 700):
        for channels, inner in ((2, 16384), (1, 16384 * 3), (2, 16385)):
            assert not (why := bp.prove_bias_grad(outer, channels, inner)), (outer, channels, inner, why)
    assert not (why := bp.prove_bias_grad(8193, 512, 1)), why
    # last-dim rows at and past a tile's width (16384 channels)
    for channels in (16383, 16384, 16385, 2 * 16384 + 1):
        assert not (why := bp.prove_bias_grad(3, channels, 1)), (channels, why)
    assert not bp.prove_bias_grad(0, 4, 4)
