"""Model-local functions (FunctionProto): fuse and check handle them fully, through onnx's inliner.

Functions nested in functions, called from If/Loop bodies, with attributes referred to by their nodes, written for
another opset, overloaded, written by onnxscript, and those torch's TorchScript exporter writes
(``export_modules_as_functions``, which the torch.export-based exporter ignores) with the seed's modules.
The contract and build-engine are in test_onnx_functions_contract.py.
"""
from __future__ import annotations

import io
import json
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from onnxscript import FLOAT, script
from onnxscript import opset17 as op
from onnxscript.values import Opset

import torchtrt_swish as ts
from onnx_path.cli import EXIT_OK, EXIT_USAGE, main
from onnx_path.contract import SWISH_DOMAIN, swish_nodes
from onnx_path.export import register_torchscript_symbolic
from onnx_path.functions import op_counts
from onnx_path.parity import check_parity
from onnx_path.reference import BACKENDS, ReferenceExecutor, rewrite_for_ort, run_graph
from onnx_path.surgery import run_surgery

OPSET = 17
SWISH = f"{SWISH_DOMAIN}::SwishBias"
X = np.linspace(-4, 4, 8, dtype=np.float32).reshape(2, 4)


def vi(name, shape=("batch", 4), elem=T.FLOAT):
    return h.make_tensor_value_info(name, elem, shape)


def silu(name="Silu", domain="local", opset=OPSET):
    """local.Silu(a) = a * Sigmoid(a)."""
    return h.make_function(domain, name, ["a"], ["b"], [h.make_node("Sigmoid", ["a"], ["s"], name="sig"),
                                                        h.make_node("Mul", ["a", "s"], ["b"], name="mul")],
                           [h.make_opsetid("", opset)])


def block():
    """local.Block(a) = Relu(local.Silu(a)): a function that calls another."""
    return h.make_function("local", "Block", ["a"], ["b"], [h.make_node("Silu", ["a"], ["t"], domain="local"),
                                                            h.make_node("Relu", ["t"], ["b"])],
                           [h.make_opsetid("", OPSET), h.make_opsetid("local", 1)])


def shifted():
    """local.Shifted<shift>(a) = a * Sigmoid(a) + shift: the shift an attribute (default 0.25) a Constant reads."""
    const = h.make_node("Constant", [], ["c"])
    ref = const.attribute.add()
    ref.name, ref.type, ref.ref_attr_name = "value_float", onnx.AttributeProto.FLOAT, "shift"
    function = h.make_function("local", "Shifted", ["a"], ["b"], [
        h.make_node("Sigmoid", ["a"], ["s"]), h.make_node("Mul", ["a", "s"], ["m"]), const,
        h.make_node("Add", ["m", "c"], ["b"])], [h.make_opsetid("", OPSET)])
    function.attribute_proto.append(h.make_attribute("shift", 0.25))
    return function


def model(nodes, functions, inputs=None, outputs=None, initializers=(), opsets=(("local", 1),)):
    graph = h.make_graph(nodes, "g", inputs or [vi("x")], outputs or [vi("y")], initializer=list(initializers))
    imports = [h.make_opsetid("", OPSET)] + [h.make_opsetid(d, v) for d, v in opsets]
    return h.make_model(graph, opset_imports=imports, functions=list(functions), ir_version=8)


def call(op, inputs, outputs, **attrs):
    return h.make_node(op, inputs, outputs, domain="local", **attrs)


def error_lines(err: str) -> list[str]:
    """stderr without the progress lines."""
    return [line for line in err.strip().splitlines() if not line.startswith("[torchtrt-swish]")]


def ort_run(m, feeds):
    """ONNX Runtime on the model as written: it runs local functions itself, independently of onnx's inliner."""
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def nested_and_in_bodies():
    """y1 = Block(x) (a function calling a function), y2 = If(cond){Silu(x)}{x}, y3 = Loop 2x {Silu(v)}."""
    then_g = h.make_graph([call("Silu", ["x"], ["t_out"])], "then", [], [vi("t_out")])
    else_g = h.make_graph([h.make_node("Identity", ["x"], ["e_out"])], "else", [], [vi("e_out")])
    body = h.make_graph([h.make_node("Identity", ["cond_in"], ["cond_out"]), call("Silu", ["v_in"], ["v_out"])],
                        "body", [vi("i", [], T.INT64), vi("cond_in", [], T.BOOL), vi("v_in")],
                        [vi("cond_out", [], T.BOOL), vi("v_out")])
    nodes = [call("Block", ["x"], ["y1"], name="blk"),
             h.make_node("If", ["cond"], ["y2"], name="branch", then_branch=then_g, else_branch=else_g),
             h.make_node("Loop", ["trip", "true", "x"], ["y3"], name="loop", body=body)]
    inits = [nh.from_array(np.array(2, np.int64), "trip"), nh.from_array(np.array(True), "true")]
    return model(nodes, [silu(), block()], inputs=[vi("x"), vi("cond", [], T.BOOL)],
                 outputs=[vi("y1"), vi("y2"), vi("y3")], initializers=inits)


# ------------------------------------------------------------------------------------------------------ fuse


def test_fuse_finds_silu_in_nested_functions_and_in_calls_from_if_and_loop_bodies():
    original = nested_and_in_bodies()
    onnx.checker.check_model(original, full_check=True)
    fused, report = run_surgery(original)
    assert len(report.replaced) == 3 and report.inlined == ["local::Silu", "local::Block"]
    assert not fused.functions and "Sigmoid" not in op_counts(fused) and op_counts(fused)[SWISH] == 3
    assert {o.domain for o in fused.opset_import} == {"", SWISH_DOMAIN}  # the functions' domain is no longer used
    onnx.checker.check_model(fused, full_check=True)
    for cond in (True, False):
        feeds = {"x": X, "cond": np.array(cond)}
        want, got = ort_run(original, feeds), ReferenceExecutor(fused).run(feeds)
        for name in ("y1", "y2", "y3"):
            np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6)


def test_fuse_takes_each_calls_attribute_value_and_the_functions_default():
    # Two calls give the shift, one leaves the function's default (0.25): three SwishBias nodes, three biases.
    nodes = [call("Shifted", ["x"], ["y1"], shift=0.5), call("Shifted", ["x"], ["y2"], shift=-1.0),
             call("Shifted", ["x"], ["y3"])]
    original = model(nodes, [shifted()], outputs=[vi("y1"), vi("y2"), vi("y3")])
    fused, report = run_surgery(original)
    assert sorted(r.bias for r in report.replaced) == ["-1 (scalar)", "0.25 (scalar)", "0.5 (scalar)"]
    assert op_counts(fused) == {SWISH: 3}
    got = ReferenceExecutor(fused).run({"x": X})
    for name, shift in (("y1", 0.5), ("y2", -1.0), ("y3", 0.25)):
        np.testing.assert_allclose(got[name], X / (1 + np.exp(-X)) + shift, rtol=1e-6, atol=1e-6)


def passes_on():
    """local.PassesOn<o>(a) = local.Shifted<shift=@o>(a): a reference its own caller may leave unset."""
    inner = call("Shifted", ["a"], ["b"])
    ref = inner.attribute.add()
    ref.name, ref.type, ref.ref_attr_name = "shift", onnx.AttributeProto.FLOAT, "o"
    return h.make_function("local", "PassesOn", ["a"], ["b"], [inner], [h.make_opsetid("local", 1)], attributes=["o"])


def test_a_nested_call_left_without_its_attribute_takes_the_inner_functions_default():
    # Shifted is called from the graph too, so both functions are called there: the nested call still gets its
    # default once its caller leaves the reference unset.
    nodes = [call("PassesOn", ["x"], ["y1"], o=2.0), call("PassesOn", ["x"], ["y2"]),
             call("Shifted", ["x"], ["y3"], shift=-1.0)]
    original = model(nodes, [shifted(), passes_on()], outputs=[vi("y1"), vi("y2"), vi("y3")])
    fused, report = run_surgery(original)
    assert sorted(r.bias for r in report.replaced) == ["-1 (scalar)", "0.25 (scalar)", "2 (scalar)"]
    want, got = ort_run(original, {"x": X}), ReferenceExecutor(fused).run({"x": X})
    for name, shift in (("y1", 2.0), ("y2", 0.25), ("y3", -1.0)):
        np.testing.assert_allclose(want[name], X / (1 + np.exp(-X)) + shift, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6)


def test_fuse_counts_each_call_and_reports_the_inlined_functions(tmp_path, capsys):
    src, out, report = tmp_path / "m.onnx", tmp_path / "m_swish.onnx", tmp_path / "r.json"
    onnx.save(model([call("Silu", ["x"], ["t"]), call("Silu", ["t"], ["y"])], [silu()]), src)
    assert main(["fuse", str(src), "-o", str(out), "--report", str(report)]) == EXIT_OK
    data = json.loads(report.read_text())
    # As the model runs: the function's two nodes once per call, not the call nodes.
    assert data["counts_before"] == {"Sigmoid": 2, "Mul": 2} and data["counts_after"] == {SWISH: 2}
    assert data["inlined_functions"] == ["local::Silu"]
    assert "inlined the calls of model-local function(s) local::Silu" in capsys.readouterr().out
    assert not onnx.load(out).functions


def test_fuse_converts_a_function_written_for_another_opset():
    original = model([call("Silu", ["x"], ["y"])], [silu(opset=13)])
    fused, report = run_surgery(original)
    assert [r.kind for r in report.replaced] == ["sigmoid-mul"] and op_counts(fused) == {SWISH: 1}


def test_fuse_imports_the_domains_a_function_brought_along(tmp_path):
    # my.ops is imported by the function alone: once inlined, its node needs the model to import it.
    function = h.make_function("local", "Odd", ["a"], ["b"], [h.make_node("Sigmoid", ["a"], ["s"]),
                                                          h.make_node("Mul", ["a", "s"], ["m"]),
                                                          h.make_node("Foo", ["m"], ["b"], domain="my.ops")],
                               [h.make_opsetid("", OPSET), h.make_opsetid("my.ops", 3)])
    fused, report = run_surgery(model([call("Odd", ["x"], ["y"])], [function]))
    assert [r.kind for r in report.replaced] == ["sigmoid-mul"]
    assert {o.domain: o.version for o in fused.opset_import}["my.ops"] == 3
    onnx.checker.check_model(fused)


def overloads():
    """local.F, overload 'silu' (a swish) and overload 'relu', each called once: y1 = F[silu](x), y2 = F[relu](x)."""
    swish, relu = silu("F"), h.make_function("local", "F", ["a"], ["b"], [h.make_node("Relu", ["a"], ["b"])],
                                             [h.make_opsetid("", OPSET)])
    swish.overload, relu.overload = "silu", "relu"
    calls = [call("F", ["x"], ["y1"]), call("F", ["x"], ["y2"])]
    calls[0].overload, calls[1].overload = "silu", "relu"
    m = model(calls, [swish, relu], outputs=[vi("y1"), vi("y2")])
    m.ir_version = 10  # overloads came with IR 10
    return m


def test_each_call_inlines_the_overload_it_names():
    original = overloads()
    onnx.checker.check_model(original, full_check=True)
    fused, report = run_surgery(original)
    assert [r.kind for r in report.replaced] == ["sigmoid-mul"]
    assert report.inlined == ["local::F[silu]", "local::F[relu]"]
    want, got = ort_run(original, {"x": X}), ReferenceExecutor(fused).run({"x": X})
    for name in ("y1", "y2"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6)


def test_a_custom_domain_function_named_like_a_standard_op_is_never_taken_for_it(tmp_path, capsys):
    # custom.Sigmoid is a Relu: x * custom.Sigmoid(x) is not a swish, inlined or not.
    relu = h.make_function("custom", "Sigmoid", ["a"], ["b"], [h.make_node("Relu", ["a"], ["b"])],
                           [h.make_opsetid("", OPSET)])
    nodes = [h.make_node("Sigmoid", ["x"], ["s"], domain="custom"), h.make_node("Mul", ["x", "s"], ["y"])]
    src = tmp_path / "custom.onnx"
    onnx.save(model(nodes, [relu], opsets=[("custom", 1)]), src)
    assert main(["fuse", str(src), "-o", str(tmp_path / "out.onnx")]) == EXIT_USAGE
    assert "no matching nodes" in capsys.readouterr().err
    _, report = run_surgery(onnx.load(src))
    assert not report.replaced and report.counts_before == {"Relu": 1, "Mul": 1}


def test_a_function_that_shadows_a_standard_op_is_refused_in_one_line(tmp_path, capsys):
    # Relu in the ONNX domain, defined as Neg: onnx's inliner takes the function, ONNX Runtime the op.
    neg = h.make_function("", "Relu", ["a"], ["b"], [h.make_node("Neg", ["a"], ["b"])], [h.make_opsetid("", OPSET)])
    src = tmp_path / "shadow.onnx"
    onnx.save(model([h.make_node("Relu", ["x"], ["r"]), h.make_node("Sigmoid", ["r"], ["s"]),
                     h.make_node("Mul", ["r", "s"], ["y"])], [neg], opsets=()), src)
    for command in (["fuse", str(src), "-o", str(tmp_path / "out.onnx")],
                    ["check", str(src), "--reference", str(src)]):
        assert main(command) == EXIT_USAGE
        err = capsys.readouterr().err
        assert "model-local function 'Relu' is in the ONNX domain and has the name of a standard op" in err
        assert len(error_lines(err)) == 1 and "Traceback" not in err and "--backends" not in err


def calling(name, callee):
    return h.make_function("local", name, ["a"], ["b"], [call(callee, ["a"], ["b"])], [h.make_opsetid("local", 1)])


@pytest.mark.parametrize("functions", [[calling("Again", "Again")], [calling("Ping", "Pong"), calling("Pong", "Ping")]],
                         ids=["itself", "each other"])
def test_recursive_functions_are_refused_in_one_line(functions, tmp_path, capsys):
    src = tmp_path / "recursive.onnx"
    onnx.save(model([call(functions[0].name, ["x"], ["y"])], functions), src)
    for command in (["fuse", str(src), "-o", str(tmp_path / "out.onnx")],
                    ["check", str(src), "--reference", str(src)]):
        assert main(command) == EXIT_USAGE
        err = capsys.readouterr().err
        assert "the model-local functions cannot be inlined" in err and "must not be recursive" in err
        assert len(error_lines(err)) == 1 and "Traceback" not in err and "--backends" not in err


def test_check_runs_swishbias_in_functions_nested_and_called_from_if_and_loop_bodies(tmp_path, capsys):
    # The same model with local.Silu computed by a SwishBias node (bias 0), checked against the unfused one.
    original = nested_and_in_bodies()
    fused = onnx.ModelProto()
    fused.CopyFrom(original)
    body = [h.make_node("Constant", [], ["zero"], value=nh.from_array(np.zeros(1, np.float32))),
            h.make_node("SwishBias", ["a", "zero"], ["b"], domain=SWISH_DOMAIN, name="sb", plugin_version="1",
                        plugin_namespace=SWISH_DOMAIN)]
    silu_function = next(f for f in fused.functions if f.name == "Silu")
    del silu_function.node[:]
    silu_function.node.extend(body)
    silu_function.opset_import.append(h.make_opsetid(SWISH_DOMAIN, 1))
    src, candidate, out = tmp_path / "o.onnx", tmp_path / "c.onnx", tmp_path / "p.json"
    onnx.save(original, src)
    onnx.save(fused, candidate)
    assert main(["check", str(candidate), "--reference", str(src), "--json", str(out)]) == EXIT_OK
    report = json.loads(out.read_text())
    assert {(c["runner"], r["name"]) for c in report["comparisons"] for r in c["outputs"] if r["passed"]} == {
        (runner, y) for runner in ("onnx-reference+swish", "onnxruntime+swish") for y in ("y1", "y2", "y3")}


@script(Opset("local", 1), default_opset=op)
def script_silu(x):
    return op.Mul(x, op.Sigmoid(x))


@script(default_opset=op)
def script_net(x):
    return op.Relu(script_silu(x))


def test_an_onnxscript_model_calling_a_local_function_is_fused_and_checked(tmp_path, capsys):
    src, out = tmp_path / "script.onnx", tmp_path / "script_swish.onnx"
    m = script_net.to_model_proto(input_types=[FLOAT["N", 4]], output_types=[FLOAT["N", 4]])
    assert [f.name for f in m.functions] == ["script_silu"]
    onnx.save(m, src)
    assert main(["fuse", str(src), "-o", str(out)]) == EXIT_OK
    assert op_counts(onnx.load(out)) == {SWISH: 1, "Relu": 1}
    assert main(["check", str(out), "--reference", str(src)]) == EXIT_OK


# ---------------------------------------------------------------------- torch's export_modules_as_functions


def export_with_functions(module, example, modules) -> onnx.ModelProto:
    """The TorchScript exporter (the only torch exporter that writes functions) with `modules` as functions."""
    register_torchscript_symbolic()
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its deprecation notices
        torch.onnx.export(module.eval(), (example,), buf, dynamo=False, opset_version=OPSET, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch"}},
                          export_modules_as_functions=set(modules))
    return onnx.load_from_string(buf.getvalue())


@pytest.fixture(scope="module")
def net_with_functions(tmp_path_factory):
    torch.manual_seed(0)
    m = export_with_functions(ts.Net(), torch.randn(1, 1, 8, 8), {ts.EfficientSwish})
    assert [f.name for f in m.functions] == ["EfficientSwish"] and len(swish_nodes(m)) == 1
    path = tmp_path_factory.mktemp("functions") / "net_functions.onnx"
    onnx.save(m, path)
    return path


def test_check_runs_a_seed_net_whose_swishbias_sits_in_a_function(net_with_functions, tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main(["check", str(net_with_functions), "--torch-model", "seed-net", "--json", str(out)]) == EXIT_OK
    report = json.loads(out.read_text())
    assert {c["runner"] for c in report["comparisons"]} == {"onnx-reference+swish", "onnxruntime+swish"}
    assert report["passed"]


def test_fuse_of_a_model_whose_swishbias_sits_in_a_function_is_nothing_to_do(net_with_functions, tmp_path, capsys):
    out = tmp_path / "out.onnx"
    assert main(["fuse", str(net_with_functions), "-o", str(out)]) == EXIT_OK
    assert "already has 1 SwishBias node(s)" in capsys.readouterr().out
    assert out.read_bytes() == net_with_functions.read_bytes()


def test_fuse_counts_the_swishbias_nodes_already_there_per_call(tmp_path, capsys):
    # EfficientBlock calls its one EfficientSwish function twice: two SwishBias nodes run.
    src = tmp_path / "block.onnx"
    onnx.save(export_with_functions(ts.EfficientBlock(), torch.randn(1, 3, 8, 8), {ts.EfficientSwish}), src)
    assert main(["fuse", str(src), "-o", str(tmp_path / "out.onnx")]) == EXIT_OK
    assert "already has 2 SwishBias node(s)" in capsys.readouterr().out


@pytest.mark.parametrize("backend", BACKENDS)
def test_both_cpu_executors_run_a_function_held_swishbias(net_with_functions, backend):
    m = onnx.load(net_with_functions)
    assert not rewrite_for_ort(m).functions
    x = np.random.default_rng(0).standard_normal((2, 1, 8, 8)).astype(np.float32)
    with torch.no_grad():
        want = ts.Net().eval()(torch.from_numpy(x)).numpy()
    (got,) = run_graph(m, {"x": x}, backend).values()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_efficient_block_as_a_function_holding_its_swishes_as_functions_matches_torch():
    torch.manual_seed(0)
    net = torch.nn.Sequential(ts.EfficientBlock())
    m = export_with_functions(net, torch.randn(1, 3, 8, 8), {ts.EfficientSwish, ts.EfficientBlock})
    assert {f.name for f in m.functions} == {"EfficientSwish", "EfficientBlock"}
    report = check_parity(m, torch_model=net, per_layer=True)
    assert report.passed, report.to_table()
    # Per-layer mode compares what runs inside the functions too (by the names the inliner gives those tensors).
    compared = {r["name"] for c in report.comparisons for r in c["outputs"]}
    inside = compared - {out for n in m.graph.node for out in n.output}
    assert len(inside) >= 3, compared


def test_silu_modules_exported_as_functions_are_fused_and_checked(tmp_path, capsys):
    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.act, self.act2 = torch.nn.Conv2d(3, 4, 3), torch.nn.SiLU(), torch.nn.SiLU()

        def forward(self, x):
            return self.act2(self.act(self.conv(x)) + 1.0)

    src, out = tmp_path / "tiny.onnx", tmp_path / "tiny_swish.onnx"
    onnx.save(export_with_functions(Tiny(), torch.randn(1, 3, 8, 8), {torch.nn.SiLU}), src)
    assert main(["fuse", str(src), "-o", str(out)]) == EXIT_OK
    assert op_counts(onnx.load(out))[SWISH] == 2 and "Sigmoid" not in op_counts(onnx.load(out))
    assert main(["check", str(out), "--reference", str(src)]) == EXIT_OK
