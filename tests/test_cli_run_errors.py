"""Failures while running or reading a model are user errors: exit 2, one line naming what to change, no traceback.

Exit 1 stays reserved for "parity failed".
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_path.cli import EXIT_OK, EXIT_USAGE, main


def save(model: onnx.ModelProto, path) -> str:
    onnx.save(model, path)
    return str(path)


def one_error_line(capsys, command: str) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("[torchtrt-swish] ")]
    assert len(err) == 1 and err[0].startswith(f"torchtrt-swish {command}: error: "), err
    assert "Traceback" not in err[0]
    return err[0]


def reshape_model() -> onnx.ModelProto:
    """y = Reshape(x, [2, 16]): runs at batch 2 only."""
    node = h.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, ["batch", 4, 4])],
                         [h.make_tensor_value_info("y", T.FLOAT, [2, 16])],
                         initializer=[onnx.numpy_helper.from_array(np.array([2, 16], dtype=np.int64), "shape")])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def test_a_model_that_cannot_run_at_the_chosen_batch(tmp_path, capsys):
    path = save(reshape_model(), tmp_path / "r.onnx")
    assert main(["check", path, "--reference", path, "--backends", "reference"]) == EXIT_OK
    capsys.readouterr()
    assert main(["check", path, "--reference", path, "--backends", "reference", "--batch", "3"]) == EXIT_USAGE
    line = one_error_line(capsys, "check")
    assert "could not run" in line and "x: 3x4x4" in line and "--batch" in line, line


def test_an_executor_that_lacks_an_op(tmp_path, capsys):
    # The reference is plain Identity; the candidate computes it with an op no executor here knows.
    def model(op, domain):
        node = h.make_node(op, ["x"], ["y"], name="the_node", domain=domain)
        graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, ["batch", 4])],
                             [h.make_tensor_value_info("y", T.FLOAT, ["batch", 4])])
        imports = [h.make_opsetid("", 17)] + ([h.make_opsetid(domain, 1)] if domain else [])
        return h.make_model(graph, opset_imports=imports)

    ref = save(model("Identity", ""), tmp_path / "ref.onnx")
    cand = save(model("MyIdentity", "my.ops"), tmp_path / "cand.onnx")
    assert main(["check", cand, "--reference", ref, "--backends", "reference"]) == EXIT_USAGE
    line = one_error_line(capsys, "check")
    assert "onnx-reference+swish" in line and "MyIdentity" in line, line


def test_a_batch_too_large_to_allocate(tmp_path, capsys):
    # The largest --batch the parser takes (onnx_path.tools.args.MAX_SIZE) times 2**20 floats: 8 PiB, on no machine.
    graph = h.make_graph([h.make_node("Identity", ["x"], ["y"])], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, ["batch", 1024, 1024])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["batch", 1024, 1024])])
    path = save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), tmp_path / "wide.onnx")
    assert main(["check", path, "--reference", path, "--batch", str(2**31 - 1)]) == EXIT_USAGE
    line = one_error_line(capsys, "check")
    assert "allocate" in line and "--batch" in line, line


def test_export_input_shape_too_large_to_allocate(tmp_path, capsys):
    out = tmp_path / "o.onnx"
    assert main(["export", "--input-shape", "100000x1x100000x100000", "-o", str(out)]) == EXIT_USAGE
    line = one_error_line(capsys, "export")
    assert "100000x1x100000x100000" in line and "allocate" in line, line
    assert not out.exists()


def test_dims_naming_an_axis_the_model_does_not_have(tmp_path, capsys):
    path = save(reshape_model(), tmp_path / "r.onnx")
    assert main(["check", path, "--reference", path, "--dims", "height=5"]) == EXIT_USAGE
    line = one_error_line(capsys, "check")
    assert "'height'" in line and "batch" in line, line


def plugin_node(inputs=("x",), outputs=("y",), name=b"Swish", info=b'{"bias": 0.5}') -> onnx.ModelProto:
    node = h.make_node("Plugin", list(inputs), list(outputs), domain="custom", name="plug")
    node.attribute.extend([h.make_attribute("name", name), h.make_attribute("info", info)])
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                         [h.make_tensor_value_info(o, T.FLOAT, [2, 3]) for o in outputs if o] or
                         [h.make_tensor_value_info("x", T.FLOAT, [2, 3])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("custom", 1)])


MALFORMED = {
    "no-inputs": (dict(inputs=()), "no inputs"),
    "no-outputs": (dict(outputs=()), "no outputs"),
    "extra-outputs": (dict(outputs=("y", "z")), "2 outputs"),
    "non-utf8-name": (dict(name=b"Sw\xffish"), "UTF-8"),
    "non-utf8-info": (dict(info=b'{"bias": 0.5, "note": "\xff"}'), "UTF-8"),
    "number-too-large-to-parse": (dict(info=b'{"bias": 1' + b"0" * 5000 + b"}"), "number"),
}


@pytest.mark.parametrize("case", list(MALFORMED), ids=list(MALFORMED))
def test_a_malformed_original_format_node(case, tmp_path, capsys):
    kwargs, needle = MALFORMED[case]
    path = save(plugin_node(**kwargs), tmp_path / "m.onnx")
    assert main(["fuse", path, "-o", str(tmp_path / "f.onnx")]) == EXIT_USAGE
    line = one_error_line(capsys, "fuse")
    assert "'plug'" in line and needle in line, line
    assert not (tmp_path / "f.onnx").exists()
