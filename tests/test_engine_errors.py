"""build_engine's unexpected failures: one EngineBuildError naming the TensorRT and Polygraphy versions (the CLI
prints it as one line, exit 2), against the stand-ins of tests/test_onnx_engine.py."""
from __future__ import annotations

import polygraphy
import pytest

from onnx_path.cli import main
from onnx_path.engine import EngineBuildError, build_engine
from test_onnx_engine import fake_tensorrt, plugin_lib, seed_paths  # noqa: F401 (fixtures)
from torchtrt_swish.extras import POLYGRAPHY_MIN

# Polygraphy 0.49.x (NVIDIA/TensorRT tools/Polygraphy, up to its v10.15 tag) reads layer.precision_is_set in
# CreateConfig unguarded; TensorRT 11's Python bindings no longer have it (python/src/infer/pyGraph.cpp, v10.16 vs
# v11.0). This is what its build step then raises.
PRECISION_IS_SET = "'tensorrt.ILayer' object has no attribute 'precision_is_set'"



def _raise_line() -> int:
    """The line of this file where the stand-in build step raises."""
    from pathlib import Path

    lines = Path(__file__).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.strip() == "raise exc  # the line _RAISE_LINE names")


def _failing_build(monkeypatch, exc):
    import polygraphy.backend.trt as poly_trt

    class EngineBytesFromNetwork:
        def __init__(self, network, config=None):
            pass

        def __call__(self):
            raise exc  # the line _RAISE_LINE names

    monkeypatch.setattr(poly_trt, "EngineBytesFromNetwork", EngineBytesFromNetwork)


@pytest.mark.parametrize("old", ["0.49.1", "0.53.5"])
def test_an_old_polygraphy_under_tensorrt_11_is_one_error_naming_the_versions(seed_paths, tmp_path, plugin_lib,
                                                                               monkeypatch, old):
    """Below POLYGRAPHY_MIN (one release below it included) the error says what failed, where, and to upgrade."""
    fake_tensorrt(monkeypatch)
    monkeypatch.setattr(polygraphy, "__version__", old)
    _failing_build(monkeypatch, AttributeError(PRECISION_IS_SET))
    with pytest.raises(EngineBuildError) as info:
        build_engine(seed_paths["dynamic"], tmp_path / "e.engine", plugin_library=plugin_lib)
    assert str(info.value) == (
        f"building the engine failed unexpectedly (AttributeError: {PRECISION_IS_SET}, at "
        f"test_engine_errors.py:{_RAISE_LINE} in __call__) with TensorRT 0.0-fake and Polygraphy {old}; "
        f"Polygraphy >= {POLYGRAPHY_MIN} is needed for TensorRT 11 (pip install 'polygraphy>={POLYGRAPHY_MIN}')")
    assert isinstance(info.value.__cause__, AttributeError)
    assert not (tmp_path / "e.engine").exists()


@pytest.mark.parametrize("current", [POLYGRAPHY_MIN, "0.54.0"])
def test_a_bug_under_a_current_polygraphy_says_what_failed_and_where_without_the_upgrade_hint(
        seed_paths, tmp_path, plugin_lib, monkeypatch, current):
    """At or above POLYGRAPHY_MIN an unexpected error (ours or Polygraphy's) is not blamed on the version."""
    fake_tensorrt(monkeypatch)
    monkeypatch.setattr(polygraphy, "__version__", current)
    _failing_build(monkeypatch, KeyError("tactic"))
    with pytest.raises(EngineBuildError) as info:
        build_engine(seed_paths["dynamic"], tmp_path / "e.engine", plugin_library=plugin_lib)
    assert str(info.value) == (
        f"building the engine failed unexpectedly (KeyError: 'tactic', at test_engine_errors.py:{_RAISE_LINE} in "
        f"__call__) with TensorRT 0.0-fake and Polygraphy {current}")


_RAISE_LINE = _raise_line()


def test_the_cli_prints_it_on_one_line(seed_paths, tmp_path, plugin_lib, monkeypatch, capsys):
    fake_tensorrt(monkeypatch)
    _failing_build(monkeypatch, TypeError("first line\nsecond line"))
    code = main(["build-engine", str(seed_paths["dynamic"]), "-o", str(tmp_path / "e.engine"),
                 "--plugin", str(plugin_lib)])
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("[torchtrt-swish] ")]
    assert code == 2 and len(err) == 1, err  # the progress line aside
    assert err[0].startswith("torchtrt-swish build-engine: error: building the engine failed unexpectedly "
                             "(TypeError: first line, at test_engine_errors.py:"), err


def test_an_unwritable_output_stays_an_oserror(seed_paths, tmp_path, plugin_lib, monkeypatch):
    # OSError is the output file's problem: the CLI reports it as '-o PATH could not be written'.
    fake_tensorrt(monkeypatch)
    _failing_build(monkeypatch, PermissionError(13, "Permission denied"))
    with pytest.raises(PermissionError):
        build_engine(seed_paths["dynamic"], tmp_path / "e.engine", plugin_library=plugin_lib)
