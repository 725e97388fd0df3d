"""The numbers and model specs torchtrt-swish reads from its command line (onnx_path/tools/args.py, the torchvision
specs of onnx_path/models.py): a value out of range is one line naming the option and the value, exit 2, never a
traceback and never a run that cannot end.
"""
from __future__ import annotations

import pytest

from onnx_path.cli import EXIT_OK, EXIT_USAGE, main
from onnx_path.tools.args import MAX_SEED, MAX_SIZE


@pytest.fixture(scope="module")
def seed_onnx(tmp_path_factory):
    path = tmp_path_factory.mktemp("args") / "seed.onnx"
    assert main(["export", "-o", str(path)]) == EXIT_OK
    return path


def usage_error(args: list[str], capsys) -> str:
    """The one stderr line of a command refused before it runs (argparse's exit, or main's return)."""
    try:
        code = main(args)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_USAGE, (args, err)
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


BAD_NUMBERS = [
    ("--seed", "-1"), ("--seed", str(MAX_SEED + 1)), ("--seed", str(2**64)), ("--seed", "1.5"),
    ("--batch", "0"), ("--batch", str(MAX_SIZE + 1)), ("--batch", "99999999999999999999999"),
    ("--iterations", "0"), ("--iterations", "10001"), ("--iterations", "999999999999999999999"),
    ("--scale", "0"), ("--scale", "-1"), ("--scale", "nan"), ("--scale", "inf"), ("--scale", "1e308"),
    ("--atol", "-1e-3"), ("--atol", "nan"), ("--rtol", "1e400"),
    ("--dims", f"height={MAX_SIZE + 1}"), ("--dims", "height=99999999999999999999999"), ("--dims", "height=0"),
]


@pytest.mark.parametrize("option, value", BAD_NUMBERS)
def test_check_numbers_out_of_range(option, value, seed_onnx, capsys):
    line = usage_error(["check", str(seed_onnx), "--torch-model", "seed-net", option, value], capsys)
    assert line.startswith("torchtrt-swish check: error: "), line
    assert option in line and value in line, line


@pytest.mark.parametrize("option, value", [
    ("--seed", "-1"), ("--seed", str(2**64)), ("--opset", "10"), ("--opset", "999999999999999999999"),
    ("--input-shape", f"1x1x{MAX_SIZE + 1}x5"), ("--input-shape", "1x1x99999999999999999999x5"),
])
def test_export_numbers_out_of_range(option, value, tmp_path, capsys):
    out = tmp_path / "a.onnx"
    line = usage_error(["export", "-o", str(out), option, value], capsys)
    assert option in line and value in line, line
    assert not out.exists()


@pytest.mark.parametrize("value", ["0", "-1", "nan", "1e300", str(2**20 + 1), "1e-300"])
def test_build_engine_workspace_out_of_range(value, seed_onnx, tmp_path, capsys):
    line = usage_error(["build-engine", str(seed_onnx), "-o", str(tmp_path / "e.engine"), "--workspace-gib", value],
                       capsys)
    assert "--workspace-gib" in line and value in line, line


@pytest.mark.parametrize("option, value", [("--min-shapes", "x=1"), ("--opt-shapes", "x:1x-1"),
                                           ("--max-shapes", "x:99999999999999999999x1x5x5")])
def test_build_engine_profile_shapes_name_the_option(option, value, seed_onnx, tmp_path, capsys):
    line = usage_error(["build-engine", str(seed_onnx), "-o", str(tmp_path / "e.engine"), option, value], capsys)
    assert line.startswith(f"torchtrt-swish build-engine: error: {option} {value}: "), line


def test_the_bounds_themselves_are_accepted(seed_onnx, tmp_path, capsys):
    # The largest seed goes through every generator: torch's, NumPy's and seed + 1 for BatchNorm calibration.
    assert main(["check", str(seed_onnx), "--torch-model", "seed-net", "--seed", str(MAX_SEED)]) == EXIT_OK
    assert main(["check", str(seed_onnx), "--torch-model", "seed-net", "--seed", "0", "--scale", "1e4",
                 "--iterations", "2"]) in (EXIT_OK, 1)
    assert main(["export", "-o", str(tmp_path / "t.onnx"), "--model", "torchvision:squeezenet1_0",
                 "--seed", str(MAX_SEED), "--input-shape", "1x3x64x64"]) == EXIT_OK


# ------------------------------------------------------------------------------------------- torchvision specs


@pytest.mark.parametrize("name", ["EfficientNet", "get_model", "list_models", "fasterrcnn_resnet50_fpn", "r3d_18",
                                  "", "no_such_model"])
def test_a_torchvision_spec_that_is_no_classifier_builder_is_one_line(name, tmp_path, capsys):
    # A class, a helper function, a detection or a video model: none is built with weights=None on an image batch.
    spec = f"torchvision:{name}"
    line = usage_error(["export", "--model", spec, "-o", str(tmp_path / "a.onnx")], capsys)
    assert line == (f"torchtrt-swish export: error: {spec} is not a torchvision classification model builder (choose "
                    "one of torchvision.models.list_models(module=torchvision.models), e.g. "
                    "torchvision:efficientnet_b0)")


@pytest.mark.parametrize("name, smallest", [("vit_b_16", 224), ("inception_v3", 75)])
def test_a_model_that_needs_another_input_size_names_the_input_shape_to_use(name, smallest, tmp_path, capsys):
    # ViT asserts its size (AssertionError), Inception's convolutions run out of pixels (RuntimeError).
    spec = f"torchvision:{name}"
    line = usage_error(["export", "--model", spec, "-o", str(tmp_path / "a.onnx")], capsys)
    assert line.startswith(f"torchtrt-swish export: error: input shape 1x3x64x64 does not fit {spec}: "), line
    assert line.endswith(f"(its smallest input is {smallest}x{smallest}: --input-shape 1x3x{smallest}x{smallest})")
    line = usage_error(["check", str(tmp_path / "missing.onnx"), "--torch-model", spec], capsys)
    assert "no such file" in line  # the file is checked first; the spec's size comes from the model it reads
