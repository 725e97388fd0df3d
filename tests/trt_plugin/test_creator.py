"""The library and its creator: getCreators, the creator's identity and field description, loading twice,
and createPlugin with good and bad fields or collections in both phases.
"""
from __future__ import annotations


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


def test_the_plugin_has_no_fields(creator):
    assert PLUGIN_META.PLUGIN_FIELDS == {}  # inputs [x, bias]: nothing for a field to carry
    assert creator.field_names() == []
    assert make(creator).fields_to_serialize() == []


def test_loading_twice_and_closing_in_any_order(h, lib, logs):
    a = h.Library(str(PLUGIN_PATH))
    b = h.Library(str(PLUGIN_PATH))
    (ca,), (cb,) = a.creators(), b.creators()
    pa, pb = make(ca), make(cb, "runtime")
    a.close()
    b.close()  # plugins keep their library referenced; the library is NODELETE anyway
    assert pa.name == pb.name == "SwishBias"
    assert pa.fields_to_serialize() == pb.fields_to_serialize() == []
    pa.close()
    pb.close()
    (c,) = lib.creators()  # the fixture's handle is unaffected
    assert c.name == "SwishBias"
    assert errors(logs) == []


# ---------------------------------------------------------------------------------------------- createPlugin

NO_FIELDS = {
    "no collection": dict(null_collection=True),
    "empty list": dict(fields=[]),
    "none": dict(fields=None),
}


@pytest.mark.parametrize("phase", ["build", "runtime"])
@pytest.mark.parametrize("case", list(NO_FIELDS))
def test_create_without_fields(creator, logs, phase, case):
    p = creator.create("layer", phase=phase, **NO_FIELDS[case])
    assert p is not None and p.fields_to_serialize() == []
    assert logs() == []


@pytest.mark.parametrize("phase", ["build", "runtime"])
def test_create_accepts_a_null_layer_name(creator, logs, phase):
    assert creator.create(None, None, phase) is not None
    assert errors(logs) == []


# Fields the plugin does not have: ignored (as TensorRT's field-less creators do), one warning naming each.
IGNORED_FIELDS = {
    "former bias field": ([bias_field(0.5)], ["'bias'"]),
    "unknown name": ([bias_field(1.0, name="beta")], ["'beta'"]),
    "null name": ([bias_field(1.0, name=None)], ["'<no name>'"]),
    "two fields": ([bias_field(1.0), bias_field(1.0, name="extra")], ["'bias'", "'extra'"]),
    "type out of range": ([bias_field(1.0, ftype=99)], ["'bias'"]),
    "length -1": ([bias_field(1.0, length=-1)], ["'bias'"]),
    "null data": ([bias_field(data=None)], ["'bias'"]),
    "negative count": (dict(fields=[], nb_fields=-1), ["malformed field collection (-1 fields"]),
    "count without array": (dict(fields=[], nb_fields=1), ["malformed field collection (1 fields, array null)"]),
}


@pytest.mark.parametrize("phase", ["build", "runtime"])
@pytest.mark.parametrize("case", list(IGNORED_FIELDS))
def test_create_ignores_fields_with_a_warning(creator, logs, phase, case):
    fields, named = IGNORED_FIELDS[case]
    kwargs = fields if isinstance(fields, dict) else dict(fields=fields)
    p = creator.create("layer", phase=phase, **kwargs)
    assert p is not None and p.fields_to_serialize() == []
    assert errors(logs) == []
    warnings = [m for s, m in logs() if s == "warning"]
    assert len(warnings) == len(named), warnings
    for message, name in zip(warnings, named):
        assert "createPlugin: layer: ignoring" in message and name in message, message


@pytest.mark.parametrize("case, kwargs, reason", [
    ("unknown phase", dict(fields=None, phase=2), "unknown TensorRTPhase"),
    ("unknown phase with fields", dict(fields=[bias_field(1.0)], phase=2), "unknown TensorRTPhase"),
])
def test_create_rejects_an_unknown_phase(creator, logs, case, kwargs, reason):
    assert creator.create("layer", **kwargs) is None
    errs = errors(logs)
    assert len(errs) == 1 and reason in errs[0], errs
