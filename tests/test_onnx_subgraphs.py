"""Every rule that walks a graph walks If/Loop/Scan bodies too; fused models pass onnx.checker for IR 3 to current."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_path.cli import EXIT_USAGE, main
from onnx_path.common import all_nodes
from onnx_path.functions import op_counts
from onnx_path.contract import SWISH_DOMAIN
from onnx_path.contract import model_problems
from onnx_path.reference import ReferenceExecutor
from onnx_path.surgery import run_surgery

SHAPE = [2, 3]
X = np.linspace(-4, 4, 6, dtype=np.float32).reshape(SHAPE)
SWISH = f"{SWISH_DOMAIN}::SwishBias"


def ref64(x, bias=0.0):
    x = np.asarray(x, dtype=np.float64)
    return x / (1.0 + np.exp(-x)) + bias


def vi(name, shape=SHAPE, elem=T.FLOAT):
    return h.make_tensor_value_info(name, elem, shape)


def swish_nodes_on(x: str, out: str, bias: float | None, prefix: str, named: bool = True):
    """x -> Sigmoid -> Mul [-> Add(bias)] -> out, the bias a Constant node (valid in any scope)."""
    name = (lambda n: f"{prefix}{n}") if named else (lambda n: "")
    nodes = [h.make_node("Sigmoid", [x], [f"{prefix}s"], name=name("sig")),
             h.make_node("Mul", [x, f"{prefix}s"], [f"{prefix}m" if bias is not None else out], name=name("mul"))]
    if bias is not None:
        nodes += [h.make_node("Constant", [], [f"{prefix}b"], name=name("const"),
                              value=onnx.numpy_helper.from_array(np.array(bias, dtype=np.float32))),
                  h.make_node("Add", [f"{prefix}m", f"{prefix}b"], [out], name=name("add"))]
    return nodes


def if_model(then_nodes, else_nodes, extra_main=(), opset=17, ir=8, domains=()):
    then_g = h.make_graph(then_nodes, "then", [], [vi("t_out")])
    else_g = h.make_graph(else_nodes, "else", [], [vi("e_out")])
    nodes = [*extra_main, h.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)]
    graph = h.make_graph(nodes, "g", [vi("x"), vi("cond", [], T.BOOL)], [vi("y")])
    imports = [h.make_opsetid("", opset)] + [h.make_opsetid(d, 1) for d in domains]
    return h.make_model(graph, opset_imports=imports, ir_version=ir)


def run(model, cond: bool):
    return ReferenceExecutor(model).run({"x": X, "cond": np.array(cond)})["y"]


# ------------------------------------------------------------------------------------------------ surgery


def test_swishes_in_if_branches_are_fused_and_compute_the_same():
    model = if_model(swish_nodes_on("x", "t_out", 0.5, "t_"), swish_nodes_on("x", "e_out", None, "e_"))
    onnx.checker.check_model(model, full_check=True)
    fused, report = run_surgery(model)
    assert sorted(r.kind for r in report.replaced) == ["sigmoid-mul", "sigmoid-mul-add"]
    assert op_counts(fused)[SWISH] == 2 and "Sigmoid" not in op_counts(fused)
    onnx.checker.check_model(fused, full_check=True)
    np.testing.assert_allclose(run(fused, True), ref64(X, 0.5), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(run(fused, False), ref64(X), rtol=1e-6, atol=1e-6)


def loop_model():
    # Loop body: carried v -> swish(v) + 0.25, two iterations.
    body_nodes = [h.make_node("Identity", ["cond_in"], ["cond_out"]),
                  *swish_nodes_on("v_in", "v_out", 0.25, "l_")]
    body = h.make_graph(body_nodes, "body", [vi("i", [], T.INT64), vi("cond_in", [], T.BOOL), vi("v_in")],
                        [vi("cond_out", [], T.BOOL), vi("v_out")])
    nodes = [h.make_node("Constant", [], ["trip"], value=onnx.numpy_helper.from_array(np.array(2, np.int64))),
             h.make_node("Constant", [], ["true"], value=onnx.numpy_helper.from_array(np.array(True))),
             h.make_node("Loop", ["trip", "true", "x"], ["y"], name="loop", body=body)]
    graph = h.make_graph(nodes, "g", [vi("x")], [vi("y")])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def scan_model():
    # Scan body: state += swish(row), over the rows of x.
    body_nodes = [*swish_nodes_on("row", "sw", None, "sc_"), h.make_node("Add", ["acc_in", "sw"], ["acc_out"]),
                  h.make_node("Identity", ["sw"], ["row_out"])]
    body = h.make_graph(body_nodes, "body", [vi("acc_in", [3]), vi("row", [3])], [vi("acc_out", [3]), vi("row_out", [3])])
    nodes = [h.make_node("Constant", [], ["zero"], value=onnx.numpy_helper.from_array(np.zeros(3, np.float32))),
             h.make_node("Scan", ["zero", "x"], ["acc", "y"], name="scan", body=body, num_scan_inputs=1)]
    graph = h.make_graph(nodes, "g", [vi("x")], [vi("y"), vi("acc", [3])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def test_swishes_in_loop_and_scan_bodies_are_fused():
    loop = loop_model()
    fused, report = run_surgery(loop)
    assert [r.kind for r in report.replaced] == ["sigmoid-mul-add"] and op_counts(fused)[SWISH] == 1
    onnx.checker.check_model(fused, full_check=True)
    want = ref64(ref64(X, 0.25), 0.25)
    np.testing.assert_allclose(ReferenceExecutor(fused).run({"x": X})["y"], want, rtol=1e-5, atol=1e-6)
    scan = scan_model()
    fused, report = run_surgery(scan)
    assert [r.kind for r in report.replaced] == ["sigmoid-mul"]
    onnx.checker.check_model(fused, full_check=True)
    got = ReferenceExecutor(fused).run({"x": X})
    np.testing.assert_allclose(got["y"], ref64(X), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got["acc"], ref64(X).sum(axis=0), rtol=1e-6, atol=1e-6)


def test_a_main_graph_sigmoid_used_inside_a_branch_is_refused():
    # s = Sigmoid(x) feeds the Mul and, from the outer scope, the then branch: fusing would delete s.
    main_nodes = swish_nodes_on("x", "m", None, "main_")
    main_nodes[0].output[0] = "s"
    main_nodes[1].input[1] = "s"
    model = if_model([h.make_node("Add", ["s", "m"], ["t_out"])], [h.make_node("Identity", ["m"], ["e_out"])],
                     extra_main=main_nodes)
    onnx.checker.check_model(model)
    fused, report = run_surgery(model)
    assert not report.replaced and "used elsewhere" in report.refused[0].reason
    np.testing.assert_allclose(run(fused, True), (1 + X) / (1 + np.exp(-X.astype(np.float64))), rtol=1e-5)


def test_the_add_after_a_mul_whose_output_a_branch_reads_is_kept():
    main_nodes = swish_nodes_on("x", "z", 0.5, "main_")  # main_m feeds the Add and the else branch
    model = if_model([h.make_node("Identity", ["z"], ["t_out"])], [h.make_node("Identity", ["main_m"], ["e_out"])],
                     extra_main=main_nodes)
    fused, report = run_surgery(model)
    assert [r.kind for r in report.replaced] == ["sigmoid-mul"] and op_counts(fused)["Add"] == 1
    onnx.checker.check_model(fused, full_check=True)
    np.testing.assert_allclose(run(fused, False), ref64(X), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(run(fused, True), ref64(X, 0.5), rtol=1e-6, atol=1e-6)


def test_refusals_and_names_in_subgraphs():
    # Unnamed nodes everywhere; in the else branch the Sigmoid output is also the branch output (refused).
    else_nodes = [h.make_node("Sigmoid", ["x"], ["e_out"]), h.make_node("Mul", ["x", "e_out"], ["unused"])]
    model = if_model(swish_nodes_on("x", "t_out", None, "t_", named=False), else_nodes)
    model.graph.node[0].name = ""
    fused, report = run_surgery(model)
    assert len(report.replaced) == 1 and len(report.refused) == 1
    # Named by OpType and position in their own graph, made unique across the model in the order of the ONNX
    # attributes (make_node sorts them: else_branch first).
    assert report.refused[0].node == "Sigmoid_0" and report.replaced[0].replaced == ["Sigmoid_0_1", "Mul_1_1"]
    names = [n.name for _, _, n in all_nodes(fused)]
    assert all(names) and len(names) == len(set(names)), names


def test_a_domain_used_only_in_a_subgraph_is_kept():
    then_nodes = [h.make_node("MyOp", ["x"], ["t_out"], domain="my.ops")]
    model = if_model(then_nodes, [h.make_node("Identity", ["main_m"], ["e_out"])],
                     extra_main=swish_nodes_on("x", "main_m", None, "main_"), domains=["my.ops"])
    onnx.checker.check_model(model)
    fused, report = run_surgery(model)
    assert report.replaced and "my.ops" in {o.domain for o in fused.opset_import}
    onnx.checker.check_model(fused)


# ------------------------------------------------------------------------------------------- contract, check


def bad_swish_in_branch(namespace="elsewhere"):
    bias = onnx.numpy_helper.from_array(np.array(0.5, dtype=np.float32))
    then_nodes = [h.make_node("Constant", [], ["b"], value=bias),
                  h.make_node("SwishBias", ["x", "b"], ["t_out"], domain=SWISH_DOMAIN, name="deep",
                              plugin_version="1", plugin_namespace=namespace)]
    return if_model(then_nodes, [h.make_node("Identity", ["x"], ["e_out"])], domains=[SWISH_DOMAIN])


def test_the_contract_check_walks_subgraphs():
    assert model_problems(bad_swish_in_branch("torchtrt_swish")) == []
    (problem,) = model_problems(bad_swish_in_branch())
    assert "'deep'" in problem and "namespace 'elsewhere'" in problem and "then_branch" in problem, problem


def test_check_and_build_engine_refuse_a_rejected_node_inside_a_branch(tmp_path, capsys):
    path = tmp_path / "bad.onnx"
    onnx.save(bad_swish_in_branch(), path)
    assert main(["check", str(path), "--reference", str(path), "--backends", "reference"]) == EXIT_USAGE
    assert "'deep'" in capsys.readouterr().err
    assert main(["build-engine", str(path), "-o", str(tmp_path / "e.engine")]) == EXIT_USAGE
    assert "'deep'" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- IR versions

MAX_OPSET = {}
for _release, _ir, _opset, *_ in onnx.helper.VERSION_TABLE:
    MAX_OPSET[_ir] = max(MAX_OPSET.get(_ir, 0), _opset)


def model_at_ir(ir: int, subgraph: bool) -> onnx.ModelProto:
    opset = MAX_OPSET[ir]
    inits = [onnx.numpy_helper.from_array(np.full(SHAPE, 0.5, np.float32), "bias")]
    nodes = [h.make_node("Sigmoid", ["x"], ["s"]), h.make_node("Mul", ["x", "s"], ["m"]),
             h.make_node("Add", ["m", "bias"], ["y0"])]
    outputs = [vi("y0")]
    if subgraph:
        then_g = h.make_graph(swish_nodes_on("y0", "t_out", None, "t_"), "then", [], [vi("t_out")])
        else_g = h.make_graph([h.make_node("Identity", ["y0"], ["e_out"])], "else", [], [vi("e_out")])
        nodes.append(h.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g))
        outputs = [vi("y")]
    inputs = [vi("x")] + ([vi("cond", [], T.BOOL)] if subgraph else [])
    if ir < 4:
        inputs.append(vi("bias"))  # IR 3: every initializer is also a graph input
    graph = h.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=ir)


@pytest.mark.parametrize("subgraph", [False, True], ids=["flat", "with-if"])
@pytest.mark.parametrize("ir", list(range(3, onnx.IR_VERSION + 1)))
def test_fused_models_pass_the_checker_at_every_ir_version(ir, subgraph):
    model = model_at_ir(ir, subgraph)
    onnx.checker.check_model(model)
    fused, report = run_surgery(model)
    assert len(report.replaced) == (2 if subgraph else 1)
    assert fused.ir_version == ir
    onnx.checker.check_model(fused)
    if ir < 4:
        inputs = {i.name for i in fused.graph.input}
        assert {t.name for t in fused.graph.initializer} <= inputs


# ------------------------------------------------------------------------------------------------ executors


@pytest.mark.parametrize("make", ["if", "loop", "scan"])
def test_both_cpu_executors_run_swishbias_inside_bodies(make):
    from onnx_path.parity import check_parity, random_feeds

    model = {"if": lambda: if_model(swish_nodes_on("x", "t_out", 0.5, "t_"), swish_nodes_on("x", "e_out", None, "e_")),
             "loop": loop_model, "scan": scan_model}[make]()
    fused, _ = run_surgery(model)
    feeds = random_feeds(model, count=2, seed=3)
    for i, feed in enumerate(feeds):
        if "cond" in feed:
            feed["cond"] = np.array(i == 0)  # one iteration per branch
    report = check_parity(fused, reference_onnx=model, backends=("reference", "ort"), feeds=feeds)
    assert report.passed and {c["runner"] for c in report.comparisons} == {"onnx-reference+swish",
                                                                           "onnxruntime+swish"}
