"""ONNX models outside the common case: sparse initializers, outputs that are not tensors, SwishBias attributes.

Each is fused and checked, or refused in one line that names the value at fault (exit 2, no traceback).
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from onnx_path.cli import EXIT_OK, EXIT_USAGE, main
from onnx_path.contract import model_problems
from onnx_path.reference import ReferenceExecutor, rewrite_for_ort
from onnx_path.surgery import fuse_swish


def swish_add(*, bias=None, sparse=None, extra_nodes=(), outputs=None, dtype=T.FLOAT, opset=17) -> onnx.ModelProto:
    """x [batch, 4] -> Sigmoid/Mul -> Add(b), b dense (`bias`) or a sparse initializer (`sparse`)."""
    nodes = [h.make_node("Sigmoid", ["x"], ["s"]), h.make_node("Mul", ["x", "s"], ["m"]),
             h.make_node("Add", ["m", "b"], ["y"]), *extra_nodes]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", dtype, ["batch", 4])],
                         outputs or [h.make_tensor_value_info("y", dtype, ["batch", 4])],
                         initializer=[] if bias is None else [nh.from_array(bias, "b")],
                         sparse_initializer=[] if sparse is None else [sparse])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def sparse_bias(dtype=np.float32) -> onnx.SparseTensorProto:
    values = nh.from_array(np.array([0.5, -1.25], dtype=dtype), "b")
    return h.make_sparse_tensor(values, nh.from_array(np.array([1, 3], np.int64), "b_indices"), [4])


def one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert "Traceback" not in captured.err, captured.err
    return lines[-1]


# ------------------------------------------------------------------------------------------ sparse initializers


@pytest.mark.parametrize("np_dtype, onnx_dtype", [(np.float32, T.FLOAT), (np.float16, T.FLOAT16)])
def test_a_sparse_bias_is_folded_in_its_own_dtype(np_dtype, onnx_dtype):
    fused, report = fuse_swish(swish_add(sparse=sparse_bias(np_dtype), dtype=onnx_dtype))
    onnx.checker.check_model(fused, full_check=True)  # an Add(float32, float64) fails here
    (rep,) = report.replaced
    assert rep.kind == "sigmoid-mul-add" and not rep.note, rep
    (node,) = fused.graph.node
    bias = {t.name: t for t in fused.graph.initializer}[node.input[1]]
    assert bias.data_type == onnx_dtype
    np.testing.assert_array_equal(nh.to_array(bias), np.array([0, 0.5, 0, -1.25], np_dtype))


def test_an_unfolded_sparse_initializer_is_written_back_as_it_came():
    model = swish_add(sparse=sparse_bias())
    fused, report = fuse_swish(model, fold_bias=False)
    assert "DOUBLE" not in report.to_text() and not fused.graph.initializer[1:]
    (sparse,) = fused.graph.sparse_initializer
    assert sparse == model.graph.sparse_initializer[0], "the sparse bias must keep its values, indices and dtype"


def test_check_runs_a_model_with_a_sparse_initializer(tmp_path, capsys):
    path, fused = tmp_path / "sparse.onnx", tmp_path / "fused.onnx"
    onnx.save(swish_add(sparse=sparse_bias()), path)
    assert main(["fuse", str(path), "-o", str(fused)]) == EXIT_OK
    capsys.readouterr()
    # The reference (ONNX Runtime) and the baselines (the reference executor on the unfused, sparse model).
    assert main(["check", str(fused), "--reference", str(path)]) == EXIT_OK, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "onnx-reference+swish [baseline]" in out and "overall: PASS" in out


# ----------------------------------------------------------------------------------- outputs that are not tensors


def sequence_model() -> onnx.ModelProto:
    return swish_add(bias=np.linspace(-1, 1, 4, dtype=np.float32), extra_nodes=[
        h.make_node("SequenceConstruct", ["y"], ["seq"])],
        outputs=[h.make_tensor_sequence_value_info("seq", T.FLOAT, ["batch", 4])])


def optional_model() -> onnx.ModelProto:
    opt = h.make_optional_type_proto(h.make_tensor_type_proto(T.FLOAT, ["batch", 4]))
    return swish_add(bias=np.linspace(-1, 1, 4, dtype=np.float32), extra_nodes=[
        h.make_node("Optional", ["y"], ["opt"])], outputs=[h.make_value_info("opt", opt)], opset=18)


@pytest.mark.parametrize("build", [sequence_model, optional_model])
def test_fuse_keeps_an_output_that_is_not_a_tensor(build, tmp_path, capsys):
    model = build()
    path, fused = tmp_path / "m.onnx", tmp_path / "f.onnx"
    onnx.save(model, path)
    assert main(["fuse", str(path), "-o", str(fused)]) == EXIT_OK, capsys.readouterr().err
    out = onnx.load(fused)
    onnx.checker.check_model(out, full_check=True)
    assert out.graph.output[0].type == model.graph.output[0].type
    assert [n.op_type for n in out.graph.node][0] == "SwishBias"


def test_check_compares_an_optional_tensor_output(tmp_path, capsys):
    path, fused = tmp_path / "m.onnx", tmp_path / "f.onnx"
    onnx.save(optional_model(), path)
    assert main(["fuse", str(path), "-o", str(fused)]) == EXIT_OK
    assert main(["check", str(fused), "--reference", str(path)]) == EXIT_OK
    assert "overall: PASS" in capsys.readouterr().out


def test_check_refuses_a_sequence_output_in_one_line(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(sequence_model(), path)
    assert main(["check", str(path), "--reference", str(path)]) == EXIT_USAGE
    line = one_error_line(capsys)
    assert "output 'seq' is sequence(tensor(float))" in line, line
    assert "--batch" not in line


# ------------------------------------------------------------------------------- SwishBias attributes (contract)


def swish_node_model(**attrs) -> onnx.ModelProto:
    node = h.make_node("SwishBias", ["x", "b"], ["y"], name="sb", domain="torchtrt_swish", plugin_version="1",
                       plugin_namespace="torchtrt_swish", **attrs)
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, ["batch", 4])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["batch", 4])],
                         initializer=[nh.from_array(np.full(4, 0.5, np.float32), "b")])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("torchtrt_swish", 1)])


def test_an_attribute_the_plugin_ignores_is_refused_by_every_host(tmp_path, capsys):
    model = swish_node_model(alpha=2.0)
    (problem,) = model_problems(model)
    assert "'alpha'" in problem and "ignores" in problem, problem
    with pytest.raises(ValueError, match="'alpha'"):
        ReferenceExecutor(model).run({"x": np.zeros((2, 4), np.float32)})
    with pytest.raises(ValueError, match="'alpha'"):
        rewrite_for_ort(model)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    assert main(["check", str(path), "--reference", str(path)]) == EXIT_USAGE
    line = one_error_line(capsys)
    assert "node 'sb'" in line and "'alpha'" in line, line
    from onnx_path.contract import SwishContractError
    from onnx_path.engine import build_engine

    # build_engine refuses it before TensorRT is imported, like check (TensorRT's parser would drop it silently).
    with pytest.raises(SwishContractError, match="'alpha'"):
        build_engine(path, tmp_path / "m.engine")


def test_the_plugin_identity_attributes_alone_pass():
    model = swish_node_model()
    assert model_problems(model) == []
    out = ReferenceExecutor(model).run({"x": np.zeros((2, 4), np.float32)})
    np.testing.assert_allclose(out["y"], np.full((2, 4), 0.5, np.float32))
