"""The SwishBias contract inside model-local functions, and what build-engine does with functions.

The contract checks each call of a function on the model with its functions inlined (the call's attribute values,
the dtypes shape inference finds there); build-engine hands functions to TensorRT's parser, which imports them, after
refusing in one line what that parser would import otherwise than ONNX defines it (onnx-tensorrt's parseNode and
LocalFunctionImporter: built-in importers first, functions keyed by name alone, references resolved one level deep).
"""
from __future__ import annotations

import sys

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from test_onnx_engine import fake_tensorrt, plugin_lib  # noqa: F401 (fixture)
from test_onnx_functions import call, error_lines, export_with_functions, model, overloads, vi

import torchtrt_swish as ts
from onnx_path.cli import EXIT_USAGE, main
from onnx_path.contract import model_problems
from onnx_path.engine import build_engine
from onnx_path.functions import tensorrt_function_problems

PLUGIN = {"plugin_version": "1", "plugin_namespace": "torchtrt_swish"}
SWISH_OPSETS = (("local", 1), ("torchtrt_swish", 1))


def act(*, inputs=("a", "bb"), domain="torchtrt_swish", bias_dtype=np.float32, refs=(), attributes=(), **attrs):
    """local.Act(a) = SwishBias(a, bb) with bb a Constant of `bias_dtype`; `refs` names plugin attributes that
    refer to function attributes of the same name."""
    node = h.make_node("SwishBias", list(inputs), ["b"], domain=domain, name="act", **{**PLUGIN, **attrs})
    for name in refs:
        del node.attribute[[a.name for a in node.attribute].index(name)]
        ref = node.attribute.add()
        ref.name, ref.type, ref.ref_attr_name = name, onnx.AttributeProto.STRING, name
    const = h.make_node("Constant", [], ["bb"], value=nh.from_array(np.array([0.5], dtype=bias_dtype)))
    return h.make_function("local", "Act", ["a"], ["b"], [const, node],
                           [h.make_opsetid("", 17), h.make_opsetid(domain, 1)], attributes=list(attributes))


def act_model(function, *calls_attrs, elem=T.FLOAT):
    """y_i = local.Act<attrs_i>(x) for each attrs_i (one call when none is given)."""
    calls = calls_attrs or ({},)
    nodes = [call("Act", ["x"], [f"y{i}"], **attrs) for i, attrs in enumerate(calls)]
    return model(nodes, [function], inputs=[vi("x", elem=elem)], outputs=[vi(f"y{i}", elem=elem) for i in
                                                                                 range(len(calls))],
                 opsets=SWISH_OPSETS if function.node[-1].domain == "torchtrt_swish" else
                 (*SWISH_OPSETS, (function.node[-1].domain, 1)))


CASES = {
    "ignored attribute": (lambda: act_model(act(alpha=2.0)), "has attribute 'alpha' that the plugin ignores"),
    "bias attribute": (lambda: act_model(act(inputs=("a",), bias=0.5)),
                       "attribute bias of type FLOAT"),
    "three inputs": (lambda: act_model(act(inputs=("a", "bb", "bb"))), "has inputs ['a', 'bb', 'bb']"),
    "unknown domain": (lambda: act_model(act(domain="my.ops")), "unknown domain 'my.ops'"),
    "x dtype of the call": (lambda: act_model(act(bias_dtype=np.float64), elem=T.DOUBLE),
                            "has an x whose dtype DOUBLE is not supported"),
    "bias dtype": (lambda: act_model(act(bias_dtype=np.float16)), "bias dtype FLOAT16 differs from x's FLOAT"),
    "namespace the call gives": (lambda: act_model(act(refs=["plugin_namespace"], attributes=["plugin_namespace"]),
                                                   {"plugin_namespace": "other"}), "namespace 'other'"),
    "namespace the call leaves unset": (lambda: act_model(act(refs=["plugin_namespace"],
                                                              attributes=["plugin_namespace"])), "namespace ''"),
}


@pytest.mark.parametrize("case", CASES)
def test_check_and_build_engine_refuse_a_function_held_swishbias_that_breaks_the_contract(case, tmp_path, capsys,
                                                                                        monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt", None)
    build, problem = CASES[case]
    path = tmp_path / "bad.onnx"
    onnx.save(build(), path)
    for command in (["check", str(path), "--reference", str(path)],
                    ["build-engine", str(path), "-o", str(tmp_path / "e.engine")]):
        assert main(command) == EXIT_USAGE
        (line,) = error_lines(capsys.readouterr().err)
        assert "SwishBias node 'act' (in function 'local::Act')" in line and problem in line, line


def test_a_function_is_checked_per_call_and_each_problem_said_once():
    # local.Act2(a, bb): called with float32 x and bias (fine), twice with float64 ones: one DOUBLE problem.
    node = h.make_node("SwishBias", ["a", "bb"], ["b"], domain="torchtrt_swish", name="act", **PLUGIN)
    function = h.make_function("local", "Act2", ["a", "bb"], ["b"], [node], [h.make_opsetid("torchtrt_swish", 1)])
    nodes = [call("Act2", ["x", "b32"], ["y0"]), h.make_node("Cast", ["x"], ["xd"], to=T.DOUBLE),
             call("Act2", ["xd", "b64"], ["y1"]), call("Act2", ["xd", "b64"], ["y2"])]
    inits = [nh.from_array(np.array([0.5], np.float32), "b32"), nh.from_array(np.array([0.5], np.float64), "b64")]
    m = model(nodes, [function], outputs=[vi("y0"), vi("y1", elem=T.DOUBLE), vi("y2", elem=T.DOUBLE)],
              initializers=inits, opsets=SWISH_OPSETS)
    assert model_problems(m) == ["SwishBias node 'act' (in function 'local::Act2') has an x whose dtype DOUBLE is "
                                 "not supported by the plugin (float32, float16, bfloat16 only)"]


def test_a_swishbias_in_a_nested_function_called_from_a_branch_is_checked_where_it_runs():
    outer = h.make_function("local", "Outer", ["a"], ["b"], [call("Act", ["a"], ["b"])],
                            [h.make_opsetid("local", 1)])
    then_g = h.make_graph([call("Outer", ["x"], ["t_out"])], "then", [], [vi("t_out")])
    else_g = h.make_graph([h.make_node("Identity", ["x"], ["e_out"])], "else", [], [vi("e_out")])
    nodes = [h.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)]
    m = model(nodes, [act(alpha=1.0), outer], inputs=[vi("x"), vi("cond", [], T.BOOL)], opsets=SWISH_OPSETS)
    (problem,) = model_problems(m)
    assert problem.startswith("SwishBias node 'act' (in function 'local::Act'; called in If node 'branch' "
                              "then_branch) has attribute 'alpha'"), problem


def test_a_swishbias_in_a_branch_inside_a_function_is_named_where_the_function_holds_it():
    sb = h.make_node("SwishBias", ["a", "z"], ["t_out"], domain="torchtrt_swish", alpha=1.0, **PLUGIN)
    zero = h.make_node("Constant", [], ["z"], value=nh.from_array(np.zeros(1, np.float32)))
    then_g = h.make_graph([zero, sb], "then", [], [vi("t_out")])
    else_g = h.make_graph([h.make_node("Identity", ["a"], ["e_out"])], "else", [], [vi("e_out")])
    function = h.make_function("local", "Cond", ["a", "c"], ["b"], [
        h.make_node("If", ["c"], ["b"], name="iff", then_branch=then_g, else_branch=else_g)],
        [h.make_opsetid("", 17), h.make_opsetid("torchtrt_swish", 1)])
    m = model([call("Cond", ["x", "cond"], ["y"])], [function], inputs=[vi("x"), vi("cond", [], T.BOOL)],
              opsets=SWISH_OPSETS)
    (problem,) = model_problems(m)
    assert problem.startswith("SwishBias node 'SwishBias_1' (in function 'local::Cond', If node 'iff' then_branch) "
                              "has attribute 'alpha'"), problem


def test_a_function_named_swishbias_is_refused_and_an_uncalled_one_is_not_checked():
    # TensorRT's parser would import every SwishBias node as this function, never the plugin.
    shadow = h.make_function("custom", "SwishBias", ["a", "b"], ["c"], [h.make_node("Add", ["a", "b"], ["c"])],
                             [h.make_opsetid("", 17)])
    nodes = [h.make_node("Constant", [], ["b"], value=nh.from_array(np.array([0.5], np.float32))),
             h.make_node("SwishBias", ["x", "b"], ["y"], domain="torchtrt_swish", name="sb", **PLUGIN)]
    (problem,) = model_problems(model(nodes, [shadow], opsets=(("torchtrt_swish", 1), ("custom", 1))))
    assert "model-local function 'custom::SwishBias' has the plugin's op_type" in problem
    # A function no node calls never runs: its broken node is nobody's (TensorRT never imports it either).
    uncalled = model([h.make_node("Relu", ["x"], ["y"])], [act(alpha=1.0)], opsets=SWISH_OPSETS)
    assert model_problems(uncalled) == []


def test_seed_modules_exported_as_functions_meet_the_contract():
    torch.manual_seed(0)
    for net, shape in ((ts.Net(), (1, 1, 8, 8)), (ts.EfficientBlock(), (1, 3, 8, 8))):
        m = export_with_functions(net, torch.randn(shape), {ts.EfficientSwish})
        assert m.functions and model_problems(m) == [] and tensorrt_function_problems(m) == []


# ----------------------------------------------------------------------------------------------- build-engine


def test_build_engine_hands_functions_to_tensorrt_with_the_plugin_loaded(tmp_path, plugin_lib, monkeypatch):
    path = tmp_path / "net_functions.onnx"
    onnx.save(export_with_functions(ts.Net(), torch.randn(1, 1, 8, 8), {ts.EfficientSwish}), path)
    _, log = fake_tensorrt(monkeypatch)
    build_engine(path, tmp_path / "net.engine", plugin_library=plugin_lib)
    # The file itself goes to the parser (it imports local functions), after the plugin is in the registry.
    assert log["parsed"] == str(path) and log["loaded"] == [str(plugin_lib)]


def shifted_by(name="Shifted", domain="local", *, default=None):
    """DOMAIN.NAME<shift>(a) = a + shift (a Constant referring to the attribute)."""
    const = h.make_node("Constant", [], ["c"])
    ref = const.attribute.add()
    ref.name, ref.type, ref.ref_attr_name = "value_float", onnx.AttributeProto.FLOAT, "shift"
    function = h.make_function(domain, name, ["a"], ["b"], [const, h.make_node("Add", ["a", "c"], ["b"])],
                               [h.make_opsetid("", 17)], attributes=[] if default is not None else ["shift"])
    if default is not None:
        function.attribute_proto.append(h.make_attribute("shift", default))
    return function


def nested_reference():
    inner = h.make_node("Shifted", ["a"], ["b"], domain="local")
    ref = inner.attribute.add()
    ref.name, ref.type, ref.ref_attr_name = "shift", onnx.AttributeProto.FLOAT, "o"
    return h.make_function("local", "Outer", ["a"], ["b"], [inner], [h.make_opsetid("local", 1)], attributes=["o"])


TENSORRT_CASES = {
    "named like an ONNX op": (
        lambda: model([h.make_node("Relu", ["x"], ["y"], domain="custom", shift=1.0)],
                      [shifted_by("Relu", "custom")], opsets=[("custom", 1)]),
        "model-local function 'custom::Relu' is called, but TensorRT's ONNX parser imports every node of op_type "
        "'Relu' as its built-in op"),
    "named like a TensorRT importer": (
        lambda: model([h.make_node("TRT_Scale", ["x"], ["y"], domain="custom", shift=1.0)],
                      [shifted_by("TRT_Scale", "custom")], opsets=[("custom", 1)]),
        "op_type 'TRT_Scale' as its built-in op"),
    "two functions with one name": (
        lambda: model([h.make_node("Shifted", ["x"], ["t"], domain="a", shift=1.0),
                       h.make_node("Shifted", ["t"], ["y"], domain="b", shift=2.0)],
                      [shifted_by(domain="a"), shifted_by(domain="b")], opsets=[("a", 1), ("b", 1)]),
        "model-local functions 'a::Shifted', 'b::Shifted' share a name"),
    "two overloads of one function": (
        overloads, "model-local functions 'local::F[relu]', 'local::F[silu]' share a name"),
    "a reference passed on to a nested call": (
        lambda: model([call("Outer", ["x"], ["y"], o=1.0)], [shifted_by(), nested_reference()]),
        "model-local function 'local::Outer' passes attribute(s) 'shift' on to function 'local::Shifted' by "
        "reference"),
    "a referred attribute the call leaves unset": (
        lambda: model([call("Shifted", ["x"], ["y"], name="sh")], [shifted_by()]),
        "node 'sh' calls function 'local::Shifted' without its attribute(s) 'shift', which has no default"),
}


@pytest.mark.parametrize("case", TENSORRT_CASES)
def test_build_engine_refuses_what_tensorrts_parser_imports_otherwise_in_one_line(case, tmp_path, capsys,
                                                                                 monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt", None)  # refused before TensorRT is involved
    build, problem = TENSORRT_CASES[case]
    path = tmp_path / "m.onnx"
    onnx.save(build(), path)
    assert main(["build-engine", str(path), "-o", str(tmp_path / "e.engine")]) == EXIT_USAGE
    (line,) = error_lines(capsys.readouterr().err)
    assert problem in line, line


def test_a_default_or_a_set_attribute_is_no_tensorrt_problem():
    with_default = model([call("Shifted", ["x"], ["y"])], [shifted_by(default=0.5)])
    with_value = model([call("Shifted", ["x"], ["y"], shift=0.5)], [shifted_by()])
    assert tensorrt_function_problems(with_default) == tensorrt_function_problems(with_value) == []
