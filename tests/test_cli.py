"""The torchtrt-swish command line: subcommands, --help examples, exit codes and messages for bad inputs."""
from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_path.common import swish_nodes
from torchtrt_swish.cli import EXIT_OK, EXIT_PARITY_FAIL, EXIT_USAGE, main


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
    (ep,) = [e for e in entry_points(group="console_scripts") if e.name == "torchtrt-swish"]
    assert ep.value == "torchtrt_swish.cli:main"


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


def test_fuse_with_nothing_to_do_is_an_input_error(seed_onnx, tmp_path, capsys):
    out = tmp_path / "x.onnx"
    assert main(["fuse", str(seed_onnx), "-o", str(out)]) == EXIT_USAGE
    assert "no matching nodes" in capsys.readouterr().err and not out.exists()
    assert main(["fuse", str(seed_onnx), "-o", str(out), "--allow-no-match"]) == EXIT_OK and out.exists()


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
    run = [sys.executable, "-m", "torchtrt_swish.cli"]
    ok = subprocess.run([*run, "check", str(seed_onnx), "--torch-model", "seed-net"], capture_output=True, text=True,
                        timeout=600)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([*run, "fuse", str(tmp_path / "missing.onnx"), "-o", "x.onnx"], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "no such file" in bad.stderr


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
