"""The torchtrt-swish command line: subcommands, --help examples, exit codes and messages for bad inputs."""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_path.cli import EXIT_OK, EXIT_PARITY_FAIL, EXIT_USAGE, build_parser, main
from onnx_path.contract import swish_nodes

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def seed_onnx(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "seed.onnx"
    assert main(["export", "-o", str(path)]) == EXIT_OK
    return path


@pytest.fixture
def silu_onnx(tmp_path):
    nodes = [h.make_node("Sigmoid", ["x"], ["s"]), h.make_node("Mul", ["x", "s"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["batch", 4])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["batch", 4])])
    path = tmp_path / "silu.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), path)
    return path


def test_console_script_is_declared():
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["torchtrt-swish"]
    assert declared == "onnx_path.cli:main"
    (ep,) = [e for e in entry_points(group="console_scripts") if e.name == "torchtrt-swish"]
    assert ep.value == declared, "the installed console script is stale: reinstall (pip install -e .)"
    assert ep.load() is main


@pytest.mark.parametrize("command", [[], ["export"], ["fuse"], ["build-engine"], ["check"]])
def test_help_has_examples(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([*command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "torchtrt-swish" in out


def test_export_writes_a_swishbias_model(tmp_path, capsys):
    path = tmp_path / "seed16.onnx"
    assert main(["export", "-o", str(path), "--dtype", "fp16", "--opset", "13", "--static"]) == EXIT_OK
    assert "torchtrt_swish::SwishBias: 1" in capsys.readouterr().out
    model = onnx.load(path)
    assert len(swish_nodes(model)) == 1
    assert model.graph.input[0].type.tensor_type.elem_type == T.FLOAT16
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim] == [1, 1, 5, 5]


def test_fuse_and_report(silu_onnx, tmp_path, capsys):
    out, report = tmp_path / "fused.onnx", tmp_path / "fuse.json"
    assert main(["fuse", str(silu_onnx), "-o", str(out), "--report", str(report)]) == EXIT_OK
    assert len(swish_nodes(onnx.load(out))) == 1
    assert json.loads(report.read_text())["replaced_by_kind"] == {"sigmoid-mul": 1}
    assert "sigmoid-mul" in capsys.readouterr().out


def test_fuse_of_an_already_fused_model_is_nothing_to_do(seed_onnx, silu_onnx, tmp_path, capsys):
    fused, again = tmp_path / "fused.onnx", tmp_path / "again.onnx"
    assert main(["fuse", str(silu_onnx), "-o", str(fused)]) == EXIT_OK
    capsys.readouterr()
    assert main(["fuse", str(fused), "-o", str(again)]) == EXIT_OK
    assert "nothing to do" in capsys.readouterr().out
    assert onnx.load(again) == onnx.load(fused), "idempotent: the fused model is written unchanged"
    # The seed export carries its SwishBias node from the exporter: nothing to do either.
    assert main(["fuse", str(seed_onnx), "-o", str(tmp_path / "seed_again.onnx")]) == EXIT_OK


def test_fuse_of_a_model_without_any_swish_is_an_input_error(tmp_path, capsys):
    graph = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g", [h.make_tensor_value_info("x", T.FLOAT, [2])],
                         [h.make_tensor_value_info("y", T.FLOAT, [2])])
    relu, out = tmp_path / "relu.onnx", tmp_path / "x.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), relu)
    assert main(["fuse", str(relu), "-o", str(out)]) == EXIT_USAGE
    assert "no matching nodes" in capsys.readouterr().err and not out.exists()
    assert main(["fuse", str(relu), "-o", str(out), "--allow-no-match"]) == EXIT_OK and out.exists()


@pytest.mark.parametrize("command", ["fuse", "check", "build-engine"])
def test_missing_file(command, tmp_path, capsys):
    args = [command, str(tmp_path / "nope.onnx")] + (["-o", str(tmp_path / "o")] if command != "check" else
                                                      ["--torch-model", "seed-net"])
    assert main(args) == EXIT_USAGE
    assert "nope.onnx: no such file" in capsys.readouterr().err


def test_not_an_onnx_file(tmp_path, capsys):
    bad = tmp_path / "notes.onnx"
    bad.write_text("these are not the weights you are looking for\n")
    assert main(["fuse", str(bad), "-o", str(tmp_path / "o.onnx")]) == EXIT_USAGE
    assert "not an ONNX model" in capsys.readouterr().err


def test_unknown_dtype_and_pass(seed_onnx, tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["export", "--dtype", "float8", "-o", str(tmp_path / "x.onnx")])
    assert info.value.code == EXIT_USAGE
    assert "unknown dtype 'float8'" in capsys.readouterr().err
    assert main(["fuse", str(seed_onnx), "-o", str(tmp_path / "x.onnx"), "--passes", "magic"]) == EXIT_USAGE
    assert "unknown pass" in capsys.readouterr().err


def test_check_passes_and_writes_json(seed_onnx, tmp_path, capsys):
    out = tmp_path / "parity.json"
    assert main(["check", str(seed_onnx), "--torch-model", "seed-net", "--json", str(out), "--batch", "3"]) == EXIT_OK
    data = json.loads(out.read_text())
    assert data["passed"] and len(data["comparisons"]) == 2
    assert "overall: PASS" in capsys.readouterr().out


def test_check_fails_with_exit_code_1(seed_onnx, tmp_path, capsys):
    model = onnx.load(seed_onnx)
    name = swish_nodes(model)[0].input[1]
    for init in model.graph.initializer:
        if init.name == name:
            init.CopyFrom(onnx.numpy_helper.from_array(np.array([2.5], dtype=np.float32), name))
    broken = tmp_path / "broken.onnx"
    onnx.save(model, broken)
    assert main(["check", str(broken), "--torch-model", "seed-net"]) == EXIT_PARITY_FAIL
    assert "overall: FAIL" in capsys.readouterr().out


def test_check_model_with_dynamic_height_width_needs_and_takes_dims(tmp_path, capsys):
    hw = tmp_path / "hw.onnx"
    assert main(["export", "--dynamic-hw", "-o", str(hw)]) == EXIT_OK
    capsys.readouterr()
    assert main(["check", str(hw), "--torch-model", "seed-net"]) == EXIT_USAGE
    assert "--dims" in capsys.readouterr().err
    assert main(["check", str(hw), "--torch-model", "seed-net", "--dims", "height=7,width=6"]) == EXIT_OK
    assert "overall: PASS" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["check", str(hw), "--dims", "height=x"])
    assert exc.value.code == EXIT_USAGE and "height=x" in capsys.readouterr().err


def test_check_argument_errors(seed_onnx, capsys):
    assert main(["check", str(seed_onnx)]) == EXIT_USAGE
    assert "exactly one reference" in capsys.readouterr().err
    assert main(["check", str(seed_onnx), "--torch-model", "seed-net", "--dtype", "float16"]) == EXIT_USAGE
    assert "does not match" in capsys.readouterr().err
    assert main(["check", str(seed_onnx), "--torch-model", "resnet"]) == EXIT_USAGE
    assert "unknown model 'resnet'" in capsys.readouterr().err


def test_build_engine_without_tensorrt(seed_onnx, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt", None)
    assert main(["build-engine", str(seed_onnx), "-o", str(tmp_path / "e.engine")]) == EXIT_USAGE
    assert "TensorRT is not importable" in capsys.readouterr().err
    assert main(["build-engine", str(seed_onnx), "-o", str(tmp_path / "e"), "--min-shapes", "x=1"]) == EXIT_USAGE
    assert "bad shape spec" in capsys.readouterr().err


def test_exit_codes_through_a_real_process(seed_onnx, tmp_path):
    run = [sys.executable, "-m", "onnx_path.cli"]
    ok = subprocess.run([*run, "check", str(seed_onnx), "--torch-model", "seed-net"], capture_output=True, text=True,
                        timeout=600)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([*run, "fuse", str(tmp_path / "missing.onnx"), "-o", "x.onnx"], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "no such file" in bad.stderr
    usage = subprocess.run([*run, "check", str(seed_onnx)], capture_output=True, text=True, timeout=600)
    assert usage.returncode == 2 and "needs exactly one reference" in usage.stderr, usage.stderr
    assert "Traceback" not in usage.stderr


def test_torchvision_round_trip_export_fuse_check(tmp_path, capsys):
    # A non-default input size: check must rebuild the same random model (BatchNorm calibration depends on it).
    original, fused = tmp_path / "effnet.onnx", tmp_path / "effnet_swish.onnx"
    model = ["--model", "torchvision:efficientnet_b0"]
    assert main(["export", *model, "--input-shape", "1x3x48x48", "--seed", "3", "-o", str(original)]) == EXIT_OK
    assert main(["fuse", str(original), "-o", str(fused)]) == EXIT_OK
    assert "sigmoid-mul: 49" in capsys.readouterr().out
    assert main(["check", str(fused), "--torch-model", "torchvision:efficientnet_b0", "--seed", "3"]) == EXIT_OK
    assert main(["check", str(fused), "--torch-model", "torchvision:efficientnet_b0", "--seed", "4"]) == \
        EXIT_PARITY_FAIL, "other random weights must not pass"
    assert main(["check", str(fused), "--reference", str(original), "--per-layer"]) == EXIT_OK


# ------------------------------------------------------------------ every user error: exit 2, one line, no traceback

CONSOLE_SCRIPT = Path(sys.executable).with_name("torchtrt-swish")


def silu_model(elem, *, names=("x", "y"), shape=("batch", 4), opset=22):
    nodes = [h.make_node("Sigmoid", [names[0]], ["s"]), h.make_node("Mul", [names[0], "s"], [names[1]])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info(names[0], elem, list(shape))],
                         [h.make_tensor_value_info(names[1], elem, list(shape))])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


@pytest.fixture(scope="module")
def model_files(tmp_path_factory, seed_onnx):
    """The models the bad-input cases use, built once."""
    d = tmp_path_factory.mktemp("models")
    paths = {"seed": d / "seed.onnx"}
    shutil.copy(seed_onnx, paths["seed"])
    for key, model in {"silu32": silu_model(T.FLOAT), "silu16": silu_model(T.FLOAT16),
                       "silubf16": silu_model(T.BFLOAT16), "renamed": silu_model(T.FLOAT, names=("z", "y")),
                       "reshaped": silu_model(T.FLOAT, shape=("batch", 5)),
                       "outrenamed": silu_model(T.FLOAT, names=("x", "out"))}.items():
        paths[key] = d / f"{key}.onnx"
        onnx.save(model, paths[key])
    for key in ("silu32", "silu16", "silubf16"):
        paths[f"{key}_fused"] = d / f"{key}_fused.onnx"
        assert main(["fuse", str(paths[key]), "-o", str(paths[f"{key}_fused"])]) == EXIT_OK
    return paths


@pytest.fixture
def files(model_files, tmp_path):
    """Paths the bad-input cases refer to by name: fresh copies of the models (a case must not see another's
    leftovers), a file, a folder."""
    paths = {key: Path(shutil.copy(path, tmp_path / path.name)) for key, path in model_files.items()}
    paths.update({"tmp": tmp_path, "file": tmp_path / "a_file.txt", "dir": tmp_path / "a_dir"})
    paths["file"].write_text("a file, not a folder\n")
    paths["dir"].mkdir()
    return paths


BAD_INPUTS = {
    # id: (arguments with {placeholders} from `files`, text the one error line must contain)
    "export-opset-99": (["export", "--opset", "99", "-o", "{tmp}/o.onnx"], "--opset: must be an integer >= 11"),
    "export-input-shape-rank": (["export", "--input-shape", "5x5", "-o", "{tmp}/o.onnx"], "5x5"),
    "export-input-shape-channels": (["export", "--input-shape", "1x3x5x5", "-o", "{tmp}/o.onnx"], "1x3x5x5"),
    "export-o-under-a-file": (["export", "-o", "{file}/o.onnx"], "a_file.txt/o.onnx"),
    "export-o-is-a-directory": (["export", "-o", "{dir}"], "a_dir"),
    "export-o-in-a-missing-folder": (["export", "-o", "{tmp}/missing/o.onnx"], "missing"),
    "fuse-report-under-a-file": (["fuse", "{silu32}", "-o", "{tmp}/f.onnx", "--report", "{file}/r.json"],
                                 "a_file.txt/r.json"),
    "fuse-report-is-the-input": (["fuse", "{silu32}", "-o", "{tmp}/f.onnx", "--report", "{silu32}"], "silu32.onnx"),
    "fuse-report-is-the-output": (["fuse", "{silu32}", "-o", "{tmp}/f.onnx", "--report", "{tmp}/f.onnx"],
                                  "f.onnx"),
    "fuse-output-is-the-input": (["fuse", "{silu32}", "-o", "{silu32}"], "silu32.onnx"),
    "check-json-is-the-input": (["check", "{seed}", "--torch-model", "seed-net", "--json", "{seed}"], "seed.onnx"),
    "check-json-is-a-directory": (["check", "{seed}", "--torch-model", "seed-net", "--json", "{dir}"], "a_dir"),
    "check-json-in-a-missing-folder": (["check", "{seed}", "--torch-model", "seed-net", "--json",
                                        "{tmp}/nowhere/p.json"], "nowhere"),
    "check-iterations-0": (["check", "{seed}", "--torch-model", "seed-net", "--iterations", "0"], "--iterations"),
    "check-iterations-minus-1": (["check", "{seed}", "--torch-model", "seed-net", "--iterations", "-1"],
                                 "--iterations"),
    "check-batch-0": (["check", "{seed}", "--torch-model", "seed-net", "--batch", "0"], "--batch"),
    "check-batch-minus-3": (["check", "{seed}", "--torch-model", "seed-net", "--batch", "-3"], "--batch"),
    "check-scale-0": (["check", "{seed}", "--torch-model", "seed-net", "--scale", "0"], "--scale"),
    "check-scale-negative": (["check", "{seed}", "--torch-model", "seed-net", "--scale", "-2"], "--scale"),
    "check-atol-nan": (["check", "{seed}", "--torch-model", "seed-net", "--atol", "nan"], "--atol"),
    "check-rtol-nan": (["check", "{seed}", "--torch-model", "seed-net", "--rtol", "nan"], "--rtol"),
    "check-atol-negative": (["check", "{seed}", "--torch-model", "seed-net", "--atol", "-1e-3"], "--atol"),
    "check-engine-missing": (["check", "{seed}", "--torch-model", "seed-net", "--engine", "{tmp}/missing.engine"],
                             "missing.engine"),
    "check-bf16-reference-ort-cannot-run": (["check", "{silubf16_fused}", "--reference", "{silubf16}"],
                                            "ONNX Runtime cannot run"),
    "check-input-names-differ": (["check", "{silu32_fused}", "--reference", "{renamed}"], "'z'"),
    "check-input-shapes-differ": (["check", "{silu32_fused}", "--reference", "{reshaped}"], "?x5"),
    "check-input-dtypes-differ": (["check", "{silu16_fused}", "--reference", "{silu32}"], "FLOAT16"),
    "check-output-names-differ": (["check", "{silu32_fused}", "--reference", "{outrenamed}"], "'out'"),
    "check-backends-ort-nothing-compared": (["check", "{silu16_fused}", "--reference", "{silu16}", "--backends",
                                             "ort"], "nothing to compare"),
    "check-torchvision-channel-mismatch": (["check", "{seed}", "--torch-model", "torchvision:resnet18"], "channels"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS), ids=list(BAD_INPUTS))
def test_console_script_user_errors_exit_2_with_one_line(case, files):
    args, needle = BAD_INPUTS[case]
    args = [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    before = {p: p.read_bytes() for p in files["tmp"].glob("*.onnx")}
    proc = subprocess.run([str(CONSOLE_SCRIPT), *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == EXIT_USAGE, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    # Progress lines ("[torchtrt-swish] ...") may precede the error; the error itself is exactly one line.
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("[torchtrt-swish] ")]
    assert len(errors) == 1 and errors[0].startswith(f"torchtrt-swish {args[0]}: error: "), proc.stderr
    assert needle in errors[0], errors[0]
    if case == "check-batch-minus-3":
        assert "--dims" not in errors[0]
    assert {p: p.read_bytes() for p in before} == before, "no input may be changed by a refused command"


def test_check_rejects_nan_tolerances_that_would_pass_different_models(seed_onnx, tmp_path, capsys):
    # A model that differs from the reference (bias 3.25 vs 3.15): NaN tolerances made every element "within".
    model = onnx.load(seed_onnx)
    bias = swish_nodes(model)[0].input[1]
    init = next(t for t in model.graph.initializer if t.name == bias)
    init.CopyFrom(onnx.numpy_helper.from_array(np.array([3.25], dtype=np.float32), bias))
    other = str(tmp_path / "other_bias.onnx")
    onnx.save(model, other)
    assert main(["check", other, "--torch-model", "seed-net"]) == EXIT_PARITY_FAIL
    for flags in (["--atol", "nan", "--rtol", "nan"], ["--atol", "inf"], ["--rtol", "-0.5"]):
        with pytest.raises(SystemExit) as info:
            main(["check", other, "--torch-model", "seed-net", *flags])
        assert info.value.code == EXIT_USAGE
        assert "must be a finite number >= 0" in capsys.readouterr().err


def test_check_model_with_0d_input_and_output(tmp_path, capsys):
    nodes = [h.make_node("Sigmoid", ["x"], ["s"]), h.make_node("Mul", ["x", "s"], ["m"]),
             h.make_node("Add", ["m", "b"], ["y"])]
    b = onnx.numpy_helper.from_array(np.array(0.5, dtype=np.float32), "b")
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [])],
                         [h.make_tensor_value_info("y", T.FLOAT, [])], initializer=[b])
    original, fused = tmp_path / "scalar.onnx", tmp_path / "scalar_swish.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), original)
    assert main(["fuse", str(original), "-o", str(fused)]) == EXIT_OK
    out = tmp_path / "p.json"
    assert main(["check", str(fused), "--reference", str(original), "--iterations", "3", "--json", str(out)]) == \
        EXIT_OK
    report = json.loads(out.read_text())
    assert report["passed"] and {r["name"] for c in report["comparisons"] for r in c["outputs"]} == {"y"}


@pytest.mark.parametrize(
    ("change", "problem"),
    [("bias-string", "attribute bias of type STRING"),
     ("bias-int", "attribute bias of type INT"),
     ("three-inputs", "has inputs ['x', 'b', 'b']"),
     ("attribute-and-input", "both as input 'b' and as attribute"),
     ("float64-bias", "bias dtype DOUBLE differs from x's FLOAT"),
     ("bias-not-broadcastable", "does not broadcast"),
     ("unknown-domain", "unknown domain 'my.ops'"),
     ("no-namespace", "namespace ''")],
)
def test_check_validates_every_swishbias_node_against_the_plugin_contract(change, problem, tmp_path, capsys):
    attrs = {"plugin_version": "1", "plugin_namespace": "torchtrt_swish"}
    inputs, bias, domain = ["x", "b"], np.full((1,), 0.5, dtype=np.float32), "torchtrt_swish"
    if change == "bias-string":
        inputs, attrs["bias"] = ["x"], "0.5"
    elif change == "bias-int":
        inputs, attrs["bias"] = ["x"], 1
    elif change == "three-inputs":
        inputs = ["x", "b", "b"]
    elif change == "attribute-and-input":
        attrs["bias"] = 0.5
    elif change == "float64-bias":
        bias = bias.astype(np.float64)
    elif change == "bias-not-broadcastable":
        bias = np.zeros((3,), dtype=np.float32)
    elif change == "unknown-domain":
        domain = "my.ops"
    elif change == "no-namespace":
        del attrs["plugin_namespace"]
    node = h.make_node("SwishBias", inputs, ["y"], domain=domain, **attrs)  # unnamed: reported as SwishBias_0
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, ["batch", 4])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["batch", 4])],
                         initializer=[onnx.numpy_helper.from_array(bias, "b")])
    path = tmp_path / "bad.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid(domain, 1)]), path)
    assert main(["check", str(path), "--reference", str(path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "SwishBias node 'SwishBias_0'" in err and problem in err, err
    assert len(err.strip().splitlines()) == 1


def test_check_engine_missing_file_is_an_input_error_not_a_pass(seed_onnx, tmp_path, capsys):
    missing = tmp_path / "missing.engine"
    assert main(["check", str(seed_onnx), "--torch-model", "seed-net", "--engine", str(missing)]) == EXIT_USAGE
    assert f"{missing}: no such file" in capsys.readouterr().err


def test_nothing_compared_is_exit_2_not_a_parity_failure(tmp_path, capsys):
    original, fused = tmp_path / "silu16.onnx", tmp_path / "silu16_swish.onnx"
    onnx.save(silu_model(T.FLOAT16), original)
    assert main(["fuse", str(original), "-o", str(fused)]) == EXIT_OK
    assert main(["check", str(fused), "--reference", str(original), "--backends", "ort"]) == EXIT_USAGE
    assert "nothing to compare" in capsys.readouterr().err
    assert main(["check", str(fused), "--reference", str(original)]) == EXIT_OK


def test_outputs_equal_to_an_input_or_each_other_are_refused(silu_onnx, seed_onnx, tmp_path, capsys):
    model_bytes, seed_bytes = silu_onnx.read_bytes(), seed_onnx.read_bytes()
    out = tmp_path / "out.onnx"
    assert main(["fuse", str(silu_onnx), "-o", str(out), "--report", str(silu_onnx)]) == EXIT_USAGE
    assert main(["fuse", str(silu_onnx), "-o", str(out), "--report", str(out)]) == EXIT_USAGE
    # The same file under another spelling (./, a symlink) is the same file.
    link = tmp_path / "link.onnx"
    link.symlink_to(silu_onnx)
    assert main(["fuse", str(link), "-o", str(silu_onnx.parent / "." / silu_onnx.name)]) == EXIT_USAGE
    assert main(["check", str(seed_onnx), "--torch-model", "seed-net", "--json", str(seed_onnx)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("is the same file as") == 4, err
    assert silu_onnx.read_bytes() == model_bytes and seed_onnx.read_bytes() == seed_bytes and not out.exists()


def test_outputs_are_written_atomically(silu_onnx, tmp_path, monkeypatch):
    out = tmp_path / "out.onnx"
    out.write_bytes(b"the previous model")

    def interrupted_save(model, path, **kwargs):
        with open(path, "wb") as f:
            f.write(model.SerializeToString()[:10])
        raise KeyboardInterrupt

    monkeypatch.setattr(onnx, "save", interrupted_save)
    with pytest.raises(KeyboardInterrupt):
        main(["fuse", str(silu_onnx), "-o", str(out)])
    assert out.read_bytes() == b"the previous model", "an interrupted write must not truncate the output"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.onnx", silu_onnx.name], "no temporary file is left"


@pytest.mark.parametrize("command", ["export", "fuse", "build-engine", "check"])
def test_help_shows_a_default_for_every_option(command, capsys):
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    options = [a for a in sub._actions if a.option_strings and a.dest != "help"]
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = "".join(capsys.readouterr().out.split())  # argparse wraps lines (and breaks at hyphens)
    for action in options:
        help_text = "".join(sub.formatter_class(command)._get_help_string(action).split())
        shown = help_text % {"default": action.default} if "%(default)" in help_text else help_text
        assert shown in text and ("(default:" in shown or action.required), (action.option_strings, shown)


def test_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"torchtrt-swish {version('torchtrt_swish')}"


def test_fp16_efficientnet_correct_fusion_passes_against_its_baseline(tmp_path, capsys):
    # A correct fusion of fp16 EfficientNet misses the fixed fp16 bounds with more samples, and so does the
    # unfused model: the baseline row shows it, and the verdict judges the candidate against it.
    original, fused = tmp_path / "effnet16.onnx", tmp_path / "effnet16_swish.onnx"
    model = ["--torch-model", "torchvision:efficientnet_b0"]
    assert main(["export", "--model", "torchvision:efficientnet_b0", "--dtype", "fp16", "-o", str(original)]) == EXIT_OK
    assert main(["fuse", str(original), "-o", str(fused)]) == EXIT_OK
    capsys.readouterr()
    assert main(["check", str(fused), *model, "--iterations", "4", "--no-baseline"]) == EXIT_PARITY_FAIL
    out = tmp_path / "p.json"
    assert main(["check", str(fused), *model, "--iterations", "4", "--json", str(out)]) == EXIT_OK
    table = capsys.readouterr().out
    assert "PASS (<= 2x baseline)" in table and "[baseline]" in table
    (row,) = json.loads(out.read_text())["comparisons"][0]["outputs"]
    assert not row["within_tolerance"] and row["within_baseline"] and row["baseline_max_abs"] > 0
    # Other weights have the same baseline (the reference exported) and still fail.
    assert main(["check", str(fused), *model, "--seed", "1", "--iterations", "4"]) == EXIT_PARITY_FAIL


def test_build_engine_validates_swishbias_nodes_before_tensorrt(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt", None)
    node = h.make_node("SwishBias", ["x"], ["y"], domain="torchtrt_swish", name="act", plugin_version="1",
                       plugin_namespace="torchtrt_swish", bias="3.15")
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 4])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 4])])
    path = tmp_path / "bad.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("torchtrt_swish", 1)]), path)
    assert main(["build-engine", str(path), "-o", str(tmp_path / "e.engine")]) == EXIT_USAGE
    assert "SwishBias node 'act' has attribute bias of type STRING" in capsys.readouterr().err


def test_check_without_an_exportable_baseline_says_why_and_uses_the_tolerances(seed_onnx, tmp_path, monkeypatch,
                                                                               capsys):
    import onnx_path.parity as parity

    def cannot_export(*args, **kwargs):
        raise RuntimeError("this model's forward cannot be traced\nsecond line")

    monkeypatch.setattr(parity, "export_baseline", cannot_export)
    out = tmp_path / "p.json"
    assert main(["check", str(seed_onnx), "--torch-model", "seed-net", "--json", str(out)]) == EXIT_OK
    assert "baseline" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["baselines"] == [] and report["baseline_model"] == ""
    (skip,) = [s for s in report["skipped"] if s["runner"] == "baseline"]
    assert skip["reason"] == "seed-net could not be exported as a baseline (this model's forward cannot be traced)"
