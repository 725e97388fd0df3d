"""IPluginV3 and IPluginV3OneCore (capability interfaces, identity, output count) and the output rules of
IPluginV3OneBuild: getOutputDataTypes and getOutputShapes (harness-side IExprBuilder), good and bad arguments.
"""
from __future__ import annotations

import pytest

from trt_plugin.harness import ACCEPTED, SUPPORTED, errors, make


# ---------------------------------------------------------------------------------------------- IPluginV3 / core


@pytest.mark.parametrize("phase", ["build", "runtime"])
def test_capability_interfaces(creator, logs, phase):
    p = make(creator, phase)
    assert p.interface_info == ("PLUGIN", 1, 0)
    assert p.capability("core") == ("PLUGIN_V3ONE_CORE", 1, 0)
    assert p.capability("runtime") == ("PLUGIN_V3ONE_RUNTIME", 1, 0)
    assert p.capability("build") == ("PLUGIN_V3ONE_BUILD", 1, 0)  # build-phase plugins must; runtime ones may
    assert errors(logs) == []


@pytest.mark.parametrize("bad", [3, -1, 1000])
def test_unknown_capability_is_null_and_logged(creator, logs, bad):
    assert make(creator).capability(bad) is None
    errs = errors(logs)
    assert len(errs) == 1 and "PluginCapabilityType" in errs[0]


def test_core_identity_and_output_count(creator):
    p = make(creator)
    assert (p.name, p.version, p.namespace) == ("SwishBias", "1", "torchtrt_swish")
    assert p.nb_outputs() == 1


# ---------------------------------------------------------------------------------------------- getOutputDataTypes


@pytest.mark.parametrize("x_type", ["float32", "float16", "bfloat16", "int8", "int32", "bool", "uint8", "fp8",
                                    "int64", "int4", "fp4", "e8m0"])
def test_output_data_types(h, creator, logs, x_type):
    rc, types = make(creator).output_data_types([x_type] * 2)
    if x_type in SUPPORTED:
        assert (rc, types) == (0, [x_type])
        assert errors(logs) == []
    else:
        assert rc != 0
        assert any("unsupported type" in e for e in errors(logs))


def test_output_data_type_follows_x_even_if_bias_differs(creator, logs):
    # Weakly typed networks may present another bias type; TensorRT reconciles it via supportsFormatCombination.
    assert make(creator).output_data_types(["float16", "float32"]) == (0, ["float16"])
    assert errors(logs) == []


@pytest.mark.parametrize("input_types, nb_outputs, null", [
    ([], 1, False), (["float32"] * 3, 1, False), (["float32"], 0, False), (["float32"], 2, False),
    (["float32"], 1, True),
])
def test_output_data_types_bad_arguments(creator, logs, input_types, nb_outputs, null):
    rc, _ = make(creator).output_data_types(input_types, nb_outputs, null)
    assert rc != 0
    assert len(errors(logs)) == 1


# ---------------------------------------------------------------------------------------------- getOutputShapes

SHAPES = [(), (1,), (7,), (2, 3), (2, 3, 4, 5), (1, 1, 1, 1, 1, 1, 1, 1), (0, 5), (2**31 + 5, 3)]


def _declared(shape, how):
    if how == "constant":
        return list(shape)
    if how == "anonymous":
        return [-1] * len(shape)
    if how == "named":
        return [f"s{i}" for i in range(len(shape))]
    return [d if i % 2 else f"s{i}" for i, d in enumerate(shape)]  # mixed


@pytest.mark.parametrize("how", ["constant", "anonymous", "named", "mixed"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_output_shape_is_x_shape(creator, logs, shape, how):
    x = _declared(shape, how)
    expected = [f"in0.d{i}" if d == -1 else d for i, d in enumerate(x)]
    for inputs in ([x, [1] * len(shape)], [x, []]):
        rc, outs, from_builder = make(creator).output_shapes(inputs)
        assert (rc, outs, from_builder) == (0, [expected], True)
    assert errors(logs) == []


@pytest.mark.parametrize("x, bias", [(x, b) for x, b, _ in ACCEPTED] + [
    (["N", "C", "H", "W"], ["C", 1, 1]), (["N", "C", "H", "W"], [-1, 1, 1]), ([-1, 3, -1, -1], [1, 3, 1, 1]),
    (["N", "T", "C"], ["C"]), (["N", 8], [8]), (["N", 3, 4], [3, 4]),  # block for N > 1: decided in configure
], ids=str)
def test_output_shapes_accept_layouts_some_shape_supports(creator, logs, x, bias):
    rc, outs, _ = make(creator).output_shapes([list(x), list(bias)])
    assert rc == 0 and outs == [[f"in0.d{i}" if d == -1 else d for i, d in enumerate(x)]]
    assert errors(logs) == []


@pytest.mark.parametrize("x, bias", [
    ([2, 3], [4]), ([2, 3], [2, 3, 1]), ([3], [1, 3]), ([2, 1], [2, 5]), ([-1, 3], [4]), (["N", 3, 4, 5], [3, 4, 1]),
    ([2, 3, 4, 5], [4, 5]),
], ids=str)
def test_output_shapes_reject_layouts_no_shape_supports(creator, logs, x, bias):
    rc, outs, _ = make(creator).output_shapes([x, bias])
    assert rc != 0 and outs == [None]
    errs = errors(logs)
    assert len(errs) == 1 and "getOutputShapes" in errs[0]


@pytest.mark.parametrize("inputs, nb_outputs, nb_shape_inputs", [
    ([], 1, 0), ([[2, 3]] * 3, 1, 0), ([[2, 3]], 1, 0), ([[2, 3]] * 2, 0, 0), ([[2, 3]] * 2, 2, 0),
    ([[2, 3]] * 2, 1, 1),
])
def test_output_shapes_bad_arguments(creator, logs, inputs, nb_outputs, nb_shape_inputs):
    rc, _, _ = make(creator).output_shapes(inputs, nb_outputs, nb_shape_inputs)
    assert rc != 0
    assert len(errors(logs)) == 1
