"""Outputs never replace an input's weights, wherever the model keeps them as external data.

Besides the main graph's initializers, a tensor can live in an If/Loop/Scan body's initializers, in a Constant
node's value, in a function's Constant, or as a sparse initializer's values: each one's file is an input too. And a
`fuse` that cannot write its model writes no report either (it would describe a model that does not exist).
"""
from __future__ import annotations

import errno
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from onnx_path.cli import EXIT_OK, EXIT_USAGE, main


def _to_file(tensor: onnx.TensorProto, folder: Path, name: str = "weights.bin") -> None:
    """Move `tensor`'s bytes into FOLDER/NAME (appended) and point the tensor there."""
    path = folder / name
    offset = path.stat().st_size if path.exists() else 0
    with open(path, "ab") as f:
        f.write(tensor.raw_data)
    length = len(tensor.raw_data)
    tensor.ClearField("raw_data")
    tensor.data_location = T.EXTERNAL
    for key, value in (("location", name), ("offset", str(offset)), ("length", str(length))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value


def _swish_graph_nodes() -> list[onnx.NodeProto]:
    # A swish in the main graph, so that a fuse which let the output through would go on to write it.
    return [h.make_node("Sigmoid", ["x"], ["s"]), h.make_node("Mul", ["x", "s"], ["m"])]


def _model(nodes, outputs, *, functions=(), opset=17, sparse=()) -> onnx.ModelProto:
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [4]),
                                      h.make_tensor_value_info("c", T.BOOL, [])], outputs,
                         sparse_initializer=list(sparse))
    opsets = [h.make_opsetid("", opset)] + ([h.make_opsetid("local", 1)] if functions else [])
    return h.make_model(graph, opset_imports=opsets, functions=list(functions))


def in_a_body(folder: Path) -> onnx.ModelProto:
    weights = nh.from_array(np.arange(300, dtype=np.float32), "w")
    _to_file(weights, folder)
    branch = h.make_graph([h.make_node("ReduceSum", ["w"], ["r"], keepdims=0)], "then", [],
                          [h.make_tensor_value_info("r", T.FLOAT, [])], initializer=[weights])
    other = h.make_graph([h.make_node("Constant", [], ["e"], value_float=0.0)], "else", [],
                         [h.make_tensor_value_info("e", T.FLOAT, [])])
    nodes = [*_swish_graph_nodes(), h.make_node("If", ["c"], ["k"], then_branch=branch, else_branch=other),
             h.make_node("Add", ["m", "k"], ["y"])]
    return _model(nodes, [h.make_tensor_value_info("y", T.FLOAT, [4])])


def in_a_constant(folder: Path) -> onnx.ModelProto:
    value = nh.from_array(np.arange(4, dtype=np.float32), "v")
    _to_file(value, folder)
    nodes = [*_swish_graph_nodes(), h.make_node("Constant", [], ["k"], value=value), h.make_node("Add", ["m", "k"],
                                                                                                ["y"])]
    return _model(nodes, [h.make_tensor_value_info("y", T.FLOAT, [4])])


def in_a_function(folder: Path) -> onnx.ModelProto:
    value = nh.from_array(np.arange(4, dtype=np.float32), "v")
    _to_file(value, folder)
    function = h.make_function("local", "AddConst", ["a"], ["b"], [
        h.make_node("Constant", [], ["k"], value=value), h.make_node("Add", ["a", "k"], ["b"])],
        opset_imports=[h.make_opsetid("", 17)])
    nodes = [*_swish_graph_nodes(), h.make_node("AddConst", ["m"], ["y"], domain="local")]
    return _model(nodes, [h.make_tensor_value_info("y", T.FLOAT, [4])], functions=[function])


def in_a_sparse_initializer(folder: Path) -> onnx.ModelProto:
    values = nh.from_array(np.arange(1, 301, dtype=np.float32), "sp")
    _to_file(values, folder)
    sparse = h.make_sparse_tensor(values, nh.from_array(np.arange(300, dtype=np.int64), "sp_idx"), [300])
    nodes = [*_swish_graph_nodes(), h.make_node("ReduceSum", ["sp"], ["k"], keepdims=0),
             h.make_node("Add", ["m", "k"], ["y"])]
    return _model(nodes, [h.make_tensor_value_info("y", T.FLOAT, [4])], sparse=[sparse])


@pytest.mark.parametrize("build", [in_a_body, in_a_constant, in_a_function, in_a_sparse_initializer])
def test_weights_outside_the_main_initializers_are_inputs_too(build, tmp_path, capsys):
    model = build(tmp_path)
    path, weights = tmp_path / "m.onnx", tmp_path / "weights.bin"
    path.write_bytes(model.SerializeToString())
    data = weights.read_bytes()
    for args in (["fuse", str(path), "-o", str(weights)],
                 ["fuse", str(path), "-o", str(tmp_path / "f.onnx"), "--report", str(weights)],
                 ["check", str(path), "--reference", str(path), "--backends", "reference", "--json",
                  str(weights)]):
        assert main(args) == EXIT_USAGE, args
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "same file as input's external data" in err[0] and "weights.bin" in err[0], err
        assert weights.read_bytes() == data, args
    assert not (tmp_path / "f.onnx").exists()


def test_a_report_is_written_only_with_its_model(tmp_path, capsys, monkeypatch):
    from onnx_path.model_file import OnnxModel

    path, out, report = tmp_path / "m.onnx", tmp_path / "f.onnx", tmp_path / "r.json"
    onnx.save(_model([*_swish_graph_nodes(), h.make_node("Identity", ["m"], ["y"])],
                     [h.make_tensor_value_info("y", T.FLOAT, [4])]), path)

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(OnnxModel, "save", full_disk)
    assert main(["fuse", str(path), "-o", str(out), "--report", str(report)]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after the progress line
    assert "error: -o" in err and "could not be written: No space left" in err, err
    assert not out.exists() and not report.exists(), "a report of a model that was never written"
    monkeypatch.undo()
    assert main(["fuse", str(path), "-o", str(out), "--report", str(report)]) == EXIT_OK
    assert out.exists() and '"replaced"' in report.read_text()
