"""The order of a benchmark's interleaved rounds, shared by the GPU timings (bench_swish, tools/ab_forward) and the
CPU table (bench_cpu) without the import cost of either."""
from __future__ import annotations

import random


def round_orders(names: list, reps: int, seed: int = 0) -> list[list]:
    """The order of each round: reps rounds or more, whole blocks of a Williams design (len(names) rounds, twice that
    for an odd count above one), in which every variant takes every place, and runs right after every other one,
    equally often; each block under a fresh shuffle of the names. In a fixed order the variant after the copy met the
    copy's dirty lines in L2 and each other one the y its predecessor had just written: the second of two identical
    builds led on 20 of 23 L2-resident rows, and with rotations alone one of them trailed on 13 of 13 rows (notes, t2,
    t6)."""
    n = len(names)
    if n == 0:
        return []
    first = [0] + [(k + 1) // 2 if k % 2 else n - k // 2 for k in range(1, n)]  # 0, 1, n-1, 2, n-2, ...
    block = [[(v + r) % n for v in first] for r in range(n)]
    if n % 2 and n > 1:  # one variant has nothing to balance
        block += [row[::-1] for row in block]
    rng = random.Random(seed)
    orders: list = []
    while len(orders) < reps:
        perm = rng.sample(names, n)
        orders += [[perm[v] for v in row] for row in block]
    return orders
