"""Models with external data (the form of every model over 2 GiB): fused, checked and written with their weights.

The small models here keep their weights outside with onnx.save's size_threshold, which takes the code path of a
model over 2 GiB; the memory tests run the CLI in a child process on a few hundred MB of weights and compare its peak
RSS with a run on a tiny model. (Models of a size users hit are measured in docs/performance-notes.md.)
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from onnx.external_data_helper import uses_external_data

from onnx_path.cli import EXIT_OK, EXIT_USAGE, main
from onnx_path.model_file import OnnxModel, open_model, save_model
from onnx_path.surgery import run_surgery


def matmul_swish(n: int = 64, m: int = 32, seed: int = 0) -> onnx.ModelProto:
    """x [batch, n] @ W [n, m] -> Sigmoid/Mul -> Add(b [m])."""
    rng = np.random.default_rng(seed)
    nodes = [h.make_node("MatMul", ["x", "W"], ["z"]), h.make_node("Sigmoid", ["z"], ["s"]),
             h.make_node("Mul", ["z", "s"], ["p"]), h.make_node("Add", ["p", "b"], ["y"])]
    inits = [nh.from_array((rng.standard_normal((n, m)) * 0.1).astype(np.float32), "W"),
             nh.from_array(np.linspace(-1, 1, m, dtype=np.float32), "b")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["batch", n])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["batch", m])], initializer=inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


@pytest.fixture
def ext_model(tmp_path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    path = folder / "m.onnx"
    onnx.save(matmul_swish(), path, save_as_external_data=True, location="m.weights", size_threshold=64)
    return path


def files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def model_tensors(model: onnx.ModelProto):
    """Initializers of every graph, and Constant values (this file's models keep weights nowhere else)."""
    from onnx.external_data_helper import _get_all_tensors

    return _get_all_tensors(model)


def test_fuse_writes_the_weights_beside_the_model_named_after_it(ext_model, tmp_path, capsys):
    weights = (ext_model.parent / "m.weights").read_bytes()
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "f.onnx"
    old = os.umask(0o027)
    try:
        assert main(["fuse", str(ext_model), "-o", str(out)]) == EXIT_OK
        assert files(out_dir) == {"f.onnx", "f.onnx.data"}
        # The same -o again replaces both files: no second data file, no temporary file left.
        assert main(["fuse", str(ext_model), "-o", str(out)]) == EXIT_OK
    finally:
        os.umask(old)
    assert files(out_dir) == {"f.onnx", "f.onnx.data"}
    assert {os.stat(out_dir / n).st_mode & 0o777 for n in files(out_dir)} == {0o640}, "the umask's mode"
    fused = onnx.load(out, load_external_data=False)
    locations = {e.value for t in model_tensors(fused) if uses_external_data(t) for e in t.external_data
                 if e.key == "location"}
    assert locations == {"f.onnx.data"}
    assert (ext_model.parent / "m.weights").read_bytes() == weights, "the input's weights are never written"
    onnx.checker.check_model(str(out), full_check=True)
    loaded = {t.name: nh.to_array(t) for t in onnx.load(out).graph.initializer}
    np.testing.assert_array_equal(loaded["W"], nh.to_array(matmul_swish().graph.initializer[0]))
    capsys.readouterr()
    assert main(["check", str(out), "--reference", str(ext_model)]) == EXIT_OK
    assert "overall: PASS" in capsys.readouterr().out


@pytest.mark.parametrize("where", ["in_a_body", "in_a_constant", "in_a_function", "in_a_sparse_initializer"])
def test_weights_kept_anywhere_are_carried_into_the_fused_model(where, tmp_path, capsys):
    import test_cli_external_outputs as builders

    model = getattr(builders, where)(tmp_path)
    path, out = tmp_path / "m.onnx", tmp_path / "out" / "f.onnx"
    path.write_bytes(model.SerializeToString())
    out.parent.mkdir()
    weights = (tmp_path / "weights.bin").read_bytes()
    assert main(["fuse", str(path), "-o", str(out)]) == EXIT_OK
    printed = capsys.readouterr()
    assert "[W]" not in printed.out + printed.err, "graphsurgeon's warnings are not the CLI's output"
    onnx.checker.check_model(str(out))  # every external tensor's file is there, beside the model
    fused = onnx.load(out, load_external_data=False)
    assert {e.value for t in fused.graph.initializer for e in t.external_data if e.key == "location"} <= \
        {"f.onnx.data"}
    assert (tmp_path / "weights.bin").read_bytes() == weights
    capsys.readouterr()
    assert main(["check", str(out), "--reference", str(path), "--backends", "reference"]) == EXIT_OK, \
        capsys.readouterr().err


def test_a_folded_sparse_bias_is_read_from_its_file(tmp_path):
    from onnx.external_data_helper import set_external_data

    values = nh.from_array(np.array([0.5, -1.25], dtype=np.float32), "b")
    sparse = h.make_sparse_tensor(values, nh.from_array(np.array([1, 3], np.int64), "b_indices"), [4])
    nodes = [h.make_node("Sigmoid", ["x"], ["s"]), h.make_node("Mul", ["x", "s"], ["m"]),
             h.make_node("Add", ["m", "b"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["batch", 4])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["batch", 4])], sparse_initializer=[sparse])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    stored = model.graph.sparse_initializer[0].values
    (tmp_path / "b.bin").write_bytes(stored.raw_data)
    set_external_data(stored, "b.bin", 0, len(stored.raw_data))
    stored.ClearField("raw_data")
    fused, report = run_surgery(OnnxModel(model, tmp_path))
    assert [r.kind for r in report.replaced] == ["sigmoid-mul-add"], report.to_text()
    bias = fused.proto.graph.initializer[0]
    np.testing.assert_array_equal(nh.to_array(bias), np.array([0, 0.5, 0, -1.25], np.float32))


def test_check_gives_the_executors_the_weights_folder(ext_model, tmp_path, capsys, monkeypatch):
    # From another working folder: external data resolved against the working folder would not be found.
    monkeypatch.chdir(tmp_path)
    fused = tmp_path / "f.onnx"
    assert main(["fuse", str(ext_model), "-o", str(fused)]) == EXIT_OK
    elsewhere = tmp_path / "run"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["check", str(fused), "--reference", str(ext_model), "--per-layer"]) == EXIT_OK, \
        capsys.readouterr().err
    out = capsys.readouterr().out
    assert "onnxruntime+swish" in out and "onnx-reference+swish" in out and "overall: PASS" in out


def test_check_of_a_large_single_file_model_reads_its_weights_from_a_scratch_file(tmp_path, capsys, monkeypatch):
    import tempfile

    from onnx_path import model_file

    path = tmp_path / "m.onnx"
    onnx.save(matmul_swish(), path)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setattr(model_file, "SPILL_LIMIT", 1000)  # this model counts as large
    used = []
    real = model_file._externalize
    monkeypatch.setattr(model_file, "_externalize",
                        lambda proto, sink, *rest: used.append(Path(sink.name).parent) or real(proto, sink, *rest))
    assert main(["check", str(path), "--reference", str(path)]) == EXIT_OK, capsys.readouterr().err
    assert "overall: PASS" in capsys.readouterr().out
    assert len(used) == 2 and all(Path(w).parent == scratch for w in used), used
    assert not list(scratch.iterdir()), "the scratch folders are removed when the check ends"


def test_a_data_file_that_is_the_inputs_weights_is_refused(tmp_path, capsys):
    # The input keeps its weights in f.onnx.data: fusing to -o f.onnx would write them over.
    path = tmp_path / "m.onnx"
    onnx.save(matmul_swish(), path, save_as_external_data=True, location="f.onnx.data", size_threshold=64)
    data = (tmp_path / "f.onnx.data").read_bytes()
    assert main(["fuse", str(path), "-o", str(tmp_path / "f.onnx")]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "f.onnx.data" in err[0] and "same file" in err[0], err
    assert (tmp_path / "f.onnx.data").read_bytes() == data and not (tmp_path / "f.onnx").exists()


def test_save_model_never_writes_the_weights_it_reads(tmp_path):
    from onnx_path.model_file import OnnxInputError

    path = tmp_path / "m.onnx"
    onnx.save(matmul_swish(), path, save_as_external_data=True, location="f.onnx.data", size_threshold=64)
    data = (tmp_path / "f.onnx.data").read_bytes()
    skeleton = onnx.load(path, load_external_data=False)
    with pytest.raises(OnnxInputError, match="f.onnx.data is the same file as the input"):
        save_model(OnnxModel(skeleton, tmp_path), tmp_path / "f.onnx")
    assert (tmp_path / "f.onnx.data").read_bytes() == data and not (tmp_path / "f.onnx").exists()


@pytest.mark.parametrize("damage", ["missing", "short"])
def test_weights_that_cannot_be_read_are_one_line(damage, ext_model, tmp_path, capsys):
    weights = ext_model.parent / "m.weights"
    if damage == "missing":
        weights.unlink()
    else:
        weights.write_bytes(weights.read_bytes()[:100])
    for args in (["fuse", str(ext_model), "-o", str(tmp_path / "f.onnx")],
                 ["check", str(ext_model), "--reference", str(ext_model)]):
        assert main(args) == EXIT_USAGE, args
        captured = capsys.readouterr()
        line = captured.err.strip().splitlines()[-1]
        assert "Traceback" not in captured.err and "--batch" not in line, captured.err
        assert "tensor 'W'" in line and "m.weights" in line and str(ext_model) in line, line
        assert ("does not exist" if damage == "missing" else "which holds 100") in line, line
    assert not (tmp_path / "f.onnx").exists()


def test_an_interrupted_write_leaves_the_old_files_and_no_temporary_one(ext_model, tmp_path, monkeypatch):
    out = tmp_path / "f.onnx"
    assert main(["fuse", str(ext_model), "-o", str(out)]) == EXIT_OK
    before = {n: (tmp_path / n).read_bytes() for n in ("f.onnx", "f.onnx.data")}

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(onnx, "save", interrupted)  # after the data file is written, before the model is
    with pytest.raises(KeyboardInterrupt):
        main(["fuse", str(ext_model), "-o", str(out)])
    assert files(tmp_path) == {"in", "f.onnx", "f.onnx.data"}
    assert {n: (tmp_path / n).read_bytes() for n in before} == before


def test_save_model_leaves_the_callers_tensors_as_they_were(tmp_path, monkeypatch):
    # A model too large for one file (the limit lowered to this one's size) goes to external data.
    from onnx_path import model_file

    model = matmul_swish(256, 128)
    monkeypatch.setattr(model_file, "INLINE_LIMIT", 1000)
    snapshot = model.SerializeToString()
    save_model(model, tmp_path / "big.onnx")
    assert model.SerializeToString() == snapshot, "onnx.save's external-data conversion empties raw_data"
    assert files(tmp_path) == {"big.onnx", "big.onnx.data"}
    np.testing.assert_array_equal(nh.to_array(onnx.load(tmp_path / "big.onnx").graph.initializer[0]),
                                  nh.to_array(model.graph.initializer[0]))


def test_surgery_reads_external_weights_only_for_the_bias_it_folds(ext_model):
    skeleton = onnx.load(ext_model, load_external_data=False)
    assert uses_external_data(skeleton.graph.initializer[0])
    fused, report = run_surgery(OnnxModel(skeleton, ext_model.parent))
    (rep,) = report.replaced
    assert rep.kind == "sigmoid-mul-add" and "[32]" in rep.bias, rep
    kept = {t.name: t for t in fused.proto.graph.initializer}
    assert uses_external_data(kept["W"]), "a weight the surgery does not fold stays in its file, unread"


def test_the_reference_executor_maps_the_weights_instead_of_loading_them(ext_model, monkeypatch):
    from onnx_path import model_file
    from onnx_path.reference import ReferenceExecutor

    x = {"x": np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)}
    expected = ReferenceExecutor(onnx.load(ext_model)).run(x)["y"]

    def no_copy(*args, **kwargs):
        raise AssertionError("a main-graph weight was loaded into memory")

    monkeypatch.setattr(model_file, "load_external_data_for_tensor", no_copy)
    executor = ReferenceExecutor(OnnxModel(onnx.load(ext_model, load_external_data=False), ext_model.parent))
    assert executor.input_names == ["x"]
    np.testing.assert_array_equal(executor.run(x)["y"], expected)


def test_shape_inference_of_a_model_over_the_limit_goes_by_path(monkeypatch):
    from onnx_path import model_file

    calls = []
    real = onnx.shape_inference.infer_shapes_path
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes_path", lambda *a, **k: calls.append(a) or real(*a, **k))

    def in_memory(*args, **kwargs):
        raise ValueError("Failed to serialize proto")  # what protobuf says over 2 GiB

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", in_memory)
    monkeypatch.setattr(model_file, "_PROTOBUF_LIMIT", 1000)
    model = matmul_swish(64, 32)  # the Sigmoid's x (the MatMul's output) has a dtype only once inferred
    fused, report = run_surgery(model)
    assert calls and [r.kind for r in report.replaced] == ["sigmoid-mul-add"], report.to_text()


# ------------------------------------------------------------------------------------------------------ memory


def peak_rss_mb(args: list[str], patch: str = "") -> float:
    """Peak resident memory (MB) of `torchtrt-swish ARGS` run in a child process, after `patch` (Python)."""
    code = f"import sys\n{patch}\nfrom onnx_path.cli import main\nsys.exit(main(sys.argv[1:]))"
    # Measured from a small intermediate process: a child forked from pytest itself starts with pytest's pages.
    meter = ("import resource, subprocess, sys\n"
             "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
             "print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    proc = subprocess.run([sys.executable, "-c", meter, sys.executable, "-c", code, *args], capture_output=True,
                          text=True, timeout=600)
    rc, kb = proc.stdout.split()
    assert rc == "0", proc.stderr
    return int(kb) / 1024


@pytest.fixture(scope="module")
def baseline_rss(tmp_path_factory) -> float:
    folder = tmp_path_factory.mktemp("tiny")
    onnx.save(matmul_swish(), folder / "tiny.onnx")
    return peak_rss_mb(["fuse", str(folder / "tiny.onnx"), "-o", str(folder / "f.onnx")])


WEIGHTS_MB = 400


def large(tmp_path: Path, *, external: bool) -> Path:
    n = 1024
    model = matmul_swish(n, WEIGHTS_MB * 2**20 // (4 * n))
    path = tmp_path / "large.onnx"
    if external:
        onnx.save(model, path, save_as_external_data=True, location="large.weights")
    else:
        onnx.save(model, path)
    return path


def test_fusing_external_weights_costs_no_memory_of_their_size(tmp_path, baseline_rss):
    path = large(tmp_path, external=True)
    peak = peak_rss_mb(["fuse", str(path), "-o", str(tmp_path / "f.onnx")])
    assert (tmp_path / "f.onnx.data").stat().st_size >= WEIGHTS_MB * 2**20
    assert peak - baseline_rss < 0.25 * WEIGHTS_MB, (peak, baseline_rss)


def test_fusing_a_large_single_file_model_stays_near_its_size(tmp_path, baseline_rss):
    # Over SPILL_LIMIT (lowered here) the weights are moved out before the surgery and written back into one file:
    # onnx.load's read and parse (twice the model) and the write (the weights loaded and serialized) are the peaks.
    path = large(tmp_path, external=False)
    patch = f"import onnx_path.model_file as e; e.SPILL_LIMIT = {WEIGHTS_MB * 2**20 // 2}"
    peak = peak_rss_mb(["fuse", str(path), "-o", str(tmp_path / "f.onnx")], patch)
    assert files(tmp_path) == {"large.onnx", "f.onnx"}, "one file in, one file out; the scratch folder removed"
    assert peak - baseline_rss < 2.5 * WEIGHTS_MB, (peak, baseline_rss)
    fused, original = onnx.load(tmp_path / "f.onnx"), onnx.load(path)
    weights = {t.name: t for t in fused.graph.initializer}
    assert weights["W"] == original.graph.initializer[0] and not uses_external_data(weights["W"])


def test_a_model_from_one_file_is_written_back_into_one(tmp_path, monkeypatch):
    from onnx_path import model_file

    # Weights in the main graph and in an If body, kept in a scratch file while open.
    model = matmul_swish(64, 32)
    body_weight = nh.from_array(np.arange(400, dtype=np.float32), "bw")
    branch = h.make_graph([h.make_node("ReduceSum", ["bw"], ["r"], keepdims=0)], "then", [],
                          [h.make_tensor_value_info("r", T.FLOAT, [])], initializer=[body_weight])
    other = h.make_graph([h.make_node("Constant", [], ["e"], value_float=0.0)], "else", [],
                         [h.make_tensor_value_info("e", T.FLOAT, [])])
    model.graph.node.extend([h.make_node("If", ["c"], ["k"], then_branch=branch, else_branch=other)])
    model.graph.input.extend([h.make_tensor_value_info("c", T.BOOL, [])])
    model.graph.output.extend([h.make_tensor_value_info("k", T.FLOAT, [])])
    full = onnx.ModelProto()
    full.CopyFrom(model)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    onnx.save(model, tmp_path / "m.onnx")
    monkeypatch.setattr(model_file, "SPILL_LIMIT", 1000)  # this model counts as large
    with open_model(tmp_path / "m.onnx", scratch=scratch) as opened:
        assert opened.one_file and opened.has_external_tensors() and opened.folder.parent == scratch
        skeleton = opened.proto.SerializeToString()
        out = opened.save(tmp_path / "one.onnx")
        assert opened.proto.SerializeToString() == skeleton, "saving changed the open model"
    assert files(tmp_path) == {"m.onnx", "scratch", "one.onnx"} and not list(scratch.iterdir())
    back = onnx.load(out)
    onnx.checker.check_model(back, full_check=True)
    assert not any(uses_external_data(t) for t in model_tensors(back))
    by_name = {t.name: nh.to_array(t) for t in model_tensors(back)}
    for tensor in model_tensors(full):
        np.testing.assert_array_equal(by_name[tensor.name], nh.to_array(tensor))
    assert [n.op_type for n in back.graph.node] == [n.op_type for n in full.graph.node]
