"""The library and its creator: getCreators, the creator's identity and field description, loading twice,
and createPlugin with good and bad fields or collections in both phases.
"""
from __future__ import annotations

import math
import struct

import pytest

from trt_plugin.harness import PLUGIN_META, PLUGIN_PATH, bias_field, errors, make


# ---------------------------------------------------------------------------------------------- library and creator


def test_get_creators_returns_one_v3_creator(lib, creator):
    assert len(lib.creators()) == 1
    assert creator.interface_info == ("PLUGIN CREATOR_V3ONE", 1, 0)
    assert creator.api_language == 0  # C++


def test_creator_identity_matches_package_constants(creator):
    assert (creator.name, creator.version, creator.namespace) == (
        PLUGIN_META.PLUGIN_NAME, PLUGIN_META.PLUGIN_VERSION, PLUGIN_META.PLUGIN_NAMESPACE) == (
        "SwishBias", "1", "torchtrt_swish")


def test_field_names_match_the_field_contract(creator):
    assert PLUGIN_META.PLUGIN_FIELDS == {"bias": ("float32", 1)}
    fields = creator.field_names()
    assert [(n, t, ln) for n, t, ln, _ in fields] == [(n, t, ln) for n, (t, ln) in PLUGIN_META.PLUGIN_FIELDS.items()]
    assert not any(has_data for *_, has_data in fields)  # a description, not values


def test_loading_twice_and_closing_in_any_order(h, lib, logs):
    a = h.Library(str(PLUGIN_PATH))
    b = h.Library(str(PLUGIN_PATH))
    (ca,), (cb,) = a.creators(), b.creators()
    pa, pb = make(ca, 1.0), make(cb, 2.0)
    a.close()
    b.close()  # plugins keep their library referenced; the library is NODELETE anyway
    assert pa.name == pb.name == "SwishBias"
    assert pa.fields_to_serialize() != pb.fields_to_serialize()
    pa.close()
    pb.close()
    (c,) = lib.creators()  # the fixture's handle is unaffected
    assert c.name == "SwishBias"
    assert errors(logs) == []


# ---------------------------------------------------------------------------------------------- createPlugin

GOOD_FIELDS = {
    "no collection": dict(null_collection=True),
    "empty list": dict(fields=[]),
    "none": dict(fields=None),
    "bias 0.5": dict(fields=[bias_field(0.5)]),
    "bias -3": dict(fields=[bias_field(-3.0)]),
    "bias 0": dict(fields=[bias_field(0.0)]),
    "bias nan": dict(fields=[bias_field(math.nan)]),
    "bias inf": dict(fields=[bias_field(math.inf)]),
    "bias max float": dict(fields=[bias_field(3.4028234663852886e38)]),
    "bias denormal": dict(fields=[bias_field(1e-45)]),
}


@pytest.mark.parametrize("phase", ["build", "runtime"])
@pytest.mark.parametrize("case", list(GOOD_FIELDS))
def test_create_accepts_good_fields(creator, logs, phase, case):
    p = creator.create("layer", phase=phase, **GOOD_FIELDS[case])
    assert p is not None
    (name, ftype, data, length), = p.fields_to_serialize()
    assert (name, ftype, length) == ("bias", "float32", 1)
    fields = GOOD_FIELDS[case].get("fields")
    expected = fields[0][2] if fields else struct.pack("<f", 0.0)
    assert data == expected  # bit-exact, NaN payload included
    assert errors(logs) == []


@pytest.mark.parametrize("phase", ["build", "runtime"])
def test_create_accepts_a_null_layer_name(creator, logs, phase):
    assert creator.create(None, [bias_field(1.0)], phase) is not None
    assert errors(logs) == []


BAD_FIELDS = {
    "unknown name": ([bias_field(1.0, name="beta")], "unknown field 'beta'"),
    "name case": ([bias_field(1.0, name="Bias")], "unknown field 'Bias'"),
    "seed attribute name": ([bias_field(1.0, name="b")], "unknown field 'b'"),
    "null name": ([bias_field(1.0, name=None)], "no name"),
    "unknown after good": ([bias_field(1.0), bias_field(1.0, name="extra")], "unknown field 'extra'"),
    "duplicate": ([bias_field(1.0), bias_field(2.0)], "more than once"),
    "type float16": ([bias_field(data=b"\x00\x3c", ftype="float16")], "type kFLOAT32"),
    "type float64": ([bias_field(data=struct.pack("<d", 1.0), ftype="float64")], "type kFLOAT32"),
    "type bfloat16": ([bias_field(data=b"\x80\x3f", ftype="bfloat16")], "type kFLOAT32"),
    "type int32": ([bias_field(data=struct.pack("<i", 1), ftype="int32")], "type kFLOAT32"),
    "type int64": ([bias_field(data=struct.pack("<q", 1), ftype="int64")], "type kFLOAT32"),
    "type char": ([bias_field(data=b"1.0\x00", ftype="char", length=4)], "type kFLOAT32"),
    "type unknown": ([bias_field(data=b"\x00" * 4, ftype="unknown", length=4)], "type kFLOAT32"),
    "type dims": ([bias_field(data=b"\x00" * 72, ftype="dims")], "type kFLOAT32"),
    "type out of range": ([bias_field(1.0, ftype=99)], "type kFLOAT32"),
    "length 0 (truncated)": ([bias_field(1.0, length=0)], "length 1"),
    "length 2": ([bias_field(data=struct.pack("<2f", 1.0, 2.0), length=2)], "length 1"),
    "length -1": ([bias_field(1.0, length=-1)], "length 1"),
    "null data": ([bias_field(data=None)], "no data"),
}


@pytest.mark.parametrize("phase", ["build", "runtime"])
@pytest.mark.parametrize("case", list(BAD_FIELDS))
def test_create_rejects_bad_fields(creator, logs, phase, case):
    fields, reason = BAD_FIELDS[case]
    assert creator.create("layer", fields, phase) is None
    errs = errors(logs)
    assert len(errs) == 1 and "createPlugin" in errs[0] and reason in errs[0], errs


@pytest.mark.parametrize("case, kwargs, reason", [
    ("negative count", dict(fields=[], nb_fields=-1), "negative field count"),
    ("count without array", dict(fields=[], nb_fields=1), "field array is null"),
    ("unknown phase", dict(fields=[bias_field(1.0)], phase=2), "unknown TensorRTPhase"),
])
def test_create_rejects_bad_collections(creator, logs, case, kwargs, reason):
    assert creator.create("layer", **kwargs) is None
    errs = errors(logs)
    assert len(errs) == 1 and reason in errs[0], errs
