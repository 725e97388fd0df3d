"""IPluginV3OneBuild's format and configuration rules: every supportsFormatCombination case in TensorRT's
position-by-position protocol, configurePlugin's layout rules for static and dynamic shapes, workspace, tactics.
"""
from __future__ import annotations

import itertools

import pytest

from trt_plugin.harness import ACCEPTED, REJECTED, SUPPORTED, descs, errors, make


# ---------------------------------------------------------------------------------------------- supportsFormatCombination


def _expected_support(pos, combo):
    """The contract: linear format; x in {float32, float16, bfloat16}; every other tensor has x's type."""
    dtype, fmt = combo[pos]
    if fmt != "linear":
        return False
    return dtype in SUPPORTED if pos == 0 else dtype == combo[0][0]


def test_supports_format_combination_every_case(h, creator, logs):
    """TensorRT's protocol: position by position, earlier positions fixed to supported choices."""
    p, nb_inputs = make(creator), 2
    all_pairs = list(itertools.product(h.DATA_TYPES, h.TENSOR_FORMATS))
    n = nb_inputs + 1
    prefixes, checked = [()], 0
    for pos in range(n):
        next_prefixes = []
        for prefix in prefixes:
            for pair in all_pairs:
                combo = list(prefix) + [pair]
                tensor_descs = [h.TensorDesc(t, [2, 3], format=f) for t, f in combo]
                got = p.supports(pos, tensor_descs, nb_inputs)
                assert got == _expected_support(pos, combo), (pos, combo)
                checked += 1
                if got:
                    next_prefixes.append(tuple(combo))
        prefixes = next_prefixes
    # each full combination the plugin accepts: one type, linear everywhere
    assert sorted(c[0][0] for c in prefixes) == sorted(SUPPORTED)
    assert all(len({t for t, _ in c}) == 1 and {f for _, f in c} == {"linear"} for c in prefixes)
    assert checked == len(all_pairs) * (1 + 3 * (n - 1))
    assert errors(logs) == []


def test_supports_ignores_positions_after_pos(h, creator):
    """The answer for pos depends on inOut[0..pos] only (later entries are garbage in TensorRT's calls)."""
    p, nb_inputs = make(creator), 2
    n = nb_inputs + 1
    for pos in range(n):
        for t in SUPPORTED:
            head = [h.TensorDesc(t, [4])] * (pos + 1)
            base = p.supports(pos, head, nb_inputs)  # harness fills later positions with invalid values
            for filler in ("int8", "float32", "bfloat16"):
                full = head + [h.TensorDesc(filler, [4], format="hwc8")] * (n - pos - 1)
                assert p.supports(pos, full, nb_inputs) == base


@pytest.mark.parametrize("pos, nb_inputs, nb_outputs, null", [
    (-1, 2, 1, False), (3, 2, 1, False), (2, 1, 1, False), (0, 0, 1, False), (0, 3, 1, False), (0, 2, 2, False),
    (0, 2, 0, False), (0, 2, 1, True), (0, 1, 1, False),  # one input [x]: the plugin takes [x, bias]
])
def test_supports_bad_arguments(h, creator, logs, pos, nb_inputs, nb_outputs, null):
    d = [h.TensorDesc("float32", [2])] * 4
    assert make(creator).supports(pos, d, nb_inputs, nb_outputs, null) is False
    assert len(errors(logs)) == 1


# ---------------------------------------------------------------------------------------------- configurePlugin


@pytest.mark.parametrize("dtype", SUPPORTED)
@pytest.mark.parametrize("x, bias, _name", ACCEPTED, ids=str)
def test_configure_accepts_supported_layouts(h, creator, logs, dtype, x, bias, _name):
    assert make(creator).configure(*descs(h, dtype, x, bias)) == 0
    assert errors(logs) == []


@pytest.mark.parametrize("x, bias, _name", REJECTED, ids=str)
def test_configure_rejects_other_layouts(h, creator, logs, x, bias, _name):
    assert make(creator).configure(*descs(h, "float32", x, bias)) != 0
    errs = errors(logs)
    assert len(errs) == 1 and "configurePlugin" in errs[0] and "bias shape" in errs[0], errs


DYNAMIC_OK = [
    # x dims (-1 dynamic), x min, x max, bias dims
    ([-1, 3, -1, -1], [1, 3, 1, 1], [8, 3, 64, 64], [3, 1, 1]),
    ([-1, 3, -1, -1], [1, 3, 1, 1], [8, 3, 64, 64], [1, 3, 1, 1]),
    ([-1, -1, 16], [1, 1, 16], [8, 512, 16], [16]),
    ([-1, 3, 4], [1, 3, 4], [1, 3, 4], [3, 4]),  # block only if the batch could exceed 1: the profile says it cannot
    ([-1, 3, 4], [1, 3, 4], [1, 3, 4], [1, 3, 4]),
    ([-1, 5], [0, 5], [9, 5], []),
    ([-1, -1], [1, 1], [4, 7], [1, 1]),
]

DYNAMIC_BAD = [
    ([-1, 3, 4], [1, 3, 4], [8, 3, 4], [3, 4], "block"),  # N > 1 allowed: [3, 4] is a block of [N, 3, 4]
    ([-1, 3, 4], [1, 3, 4], [8, 3, 4], [1, 3, 4], "block"),
    ([-1, 3, -1, -1], [1, 3, 1, 1], [8, 3, 9, 9], [3, 1, 9], "block"),
    ([-1, -1], [1, 2], [4, 6], [7], "does not broadcast"),  # x dim 1 in [2, 6] can never be 7
]


@pytest.mark.parametrize("x, lo, hi, bias", DYNAMIC_OK, ids=str)
def test_configure_dynamic_shapes_accepted(h, creator, logs, x, lo, hi, bias):
    ins, outs = descs(h, "float16", x, bias, min=lo, max=hi, opt=hi)
    assert make(creator).configure(ins, outs) == 0
    assert errors(logs) == []


@pytest.mark.parametrize("x, lo, hi", [([-1, 3, 16], [1, 3, 16], [8, 3, 16]), ([-1, -1], [1, 1], [8, 8])], ids=str)
def test_configure_accepts_a_dynamic_full_shape_bias(h, creator, logs, x, lo, hi):
    """A run-time bias with x's dynamic shape is a full layout: judging dims one by one must not reject it."""
    ins = [h.TensorDesc("float32", list(x), min=lo, max=hi, opt=hi),
           h.TensorDesc("float32", list(x), min=lo, max=hi, opt=hi)]
    outs = [h.TensorDesc("float32", list(x), min=lo, max=hi, opt=hi)]
    assert make(creator).configure(ins, outs) == 0, errors(logs)
    assert errors(logs) == []


@pytest.mark.parametrize("x, lo, hi, bias, why", DYNAMIC_BAD, ids=str)
def test_configure_dynamic_shapes_rejected(h, creator, logs, x, lo, hi, bias, why):
    ins, outs = descs(h, "float16", x, bias, min=lo, max=hi, opt=hi)
    assert make(creator).configure(ins, outs) != 0
    errs = errors(logs)
    assert len(errs) == 1 and why in errs[0], errs  # classifyBias's own reason, for a representative shape


@pytest.mark.parametrize("case", ["bias type", "output type", "x int8", "format", "bias format", "out rank",
                                  "counts 0", "counts 1", "counts 3", "outputs 2", "invalid rank"])
def test_configure_rejects_bad_descriptions(h, creator, logs, case):
    T = h.TensorDesc
    x, b, y = T("float32", [2, 3]), T("float32", [3]), T("float32", [2, 3])
    ins, outs = {
        "bias type": ([x, T("float16", [3])], [y]),
        "output type": ([x, b], [T("bfloat16", [2, 3])]),
        "x int8": ([T("int8", [2, 3]), T("int8", [3])], [T("int8", [2, 3])]),
        "format": ([T("float32", [2, 3], format="chw4"), b], [y]),
        "bias format": ([x, T("float32", [3], format="hwc")], [y]),
        "out rank": ([x, b], [T("float32", [6])]),
        "counts 0": ([], [y]),
        "counts 1": ([x], [y]),  # the plugin takes [x, bias]
        "counts 3": ([x, b, b], [y]),
        "outputs 2": ([x, b], [y, y]),
        "invalid rank": ([T("float32", [2, 3], rank=9), b], [y]),
    }[case]
    assert make(creator).configure(ins, outs) != 0
    assert len(errors(logs)) == 1


def test_workspace_size_is_zero(h, creator):
    assert make(creator).workspace_size(*descs(h, "float16", [4, 3], [3])) == 0


def test_tactics_and_build_defaults(creator):
    p = make(creator)
    assert p.nb_tactics() == 0
    assert p.valid_tactics(0) == (0, [])
    assert p.set_tactic(0) == 0
    assert p.timing_cache_id() is None
    assert p.format_combination_limit() == 100
