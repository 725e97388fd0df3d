"""The CLI in its environment: SIGTERM and SIGHUP clean up as Ctrl-C does, a full disk or a file-size limit while
weights are moved out is one line, and external data never reads outside its declared bytes or the model's folder.

The commands run in child processes (`python -c` with the CLI's main), on models whose weights count as large (the
spill limit lowered in the child), so the scratch folder and the temporary files beside -o exist while they run.
"""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx.external_data_helper import set_external_data

from onnx_path.cli import EXIT_OK, EXIT_USAGE, main
from test_onnx_external_data import matmul_swish

ROOT = Path(__file__).resolve().parent.parent


def cli_child(args: list[str], patch: str = "", **popen) -> subprocess.Popen:
    """`torchtrt-swish ARGS` in a child process, after `patch` (Python run first)."""
    code = f"import sys\n{patch}\nfrom onnx_path.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT, **popen)


def leftovers(folder: Path, keep: set[str]) -> set[str]:
    """Names in `folder` other than `keep`: scratch folders and temporary files a command left."""
    return {p.name for p in folder.iterdir()} - keep


# ------------------------------------------------------------------------------------------------------ signals

# In the child, the step that runs while the scratch folder (or the temporary -o) exists waits for the parent's
# signal instead of racing it: it says where it is on stderr, then sleeps.
_PAUSE = """
import sys, time
import onnx_path.model_file as mf
mf.SPILL_LIMIT = 1000
def paused(real, where):
    def step(*args, **kwargs):
        print(f"PAUSED {where}", file=sys.stderr, flush=True)
        time.sleep(60)
        return real(*args, **kwargs)
    return step
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("where", ["surgery", "write"])
def test_a_termination_signal_leaves_no_scratch_folder_and_no_temporary_file(sig, where, tmp_path):
    src, out = tmp_path / "m.onnx", tmp_path / "f.onnx"
    onnx.save(matmul_swish(64, 32), src)
    target = ("import onnx_path.surgery as s; s._run_surgery = paused(s._run_surgery, 'surgery')" if where == "surgery"
              else "mf._append_initializer = paused(mf._append_initializer, 'write')")
    child = cli_child(["fuse", str(src), "-o", str(out)], _PAUSE + target)
    line = ""
    deadline = time.monotonic() + 120
    while "PAUSED" not in line and time.monotonic() < deadline:
        line = child.stderr.readline()
        assert line or child.poll() is None, child.stderr.read()
    assert f"PAUSED {where}" in line, line
    assert leftovers(tmp_path, {"m.onnx"}), "the scratch folder (and the write's temporary file) exist now"
    child.send_signal(sig)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 128 + sig, (child.returncode, err)
    assert err.strip().splitlines()[-1] == f"torchtrt-swish: stopped by {signal.Signals(sig).name}", err
    assert "Traceback" not in err, err
    assert leftovers(tmp_path, {"m.onnx"}) == set(), "a scratch folder or temporary file was left behind"


def test_the_handlers_are_put_back_after_the_command():
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    with pytest.raises(SystemExit):
        main(["--version"])
    assert {s: signal.getsignal(s) for s in before} == before


# --------------------------------------------------------------------------------------------------- full disks


def _limit_file_size(limit: int):
    # Writes past `limit` bytes fail with EFBIG (Python ignores SIGXFSZ), as on a full disk.
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.parametrize("command", ["fuse", "check"])
def test_no_room_for_the_scratch_weights_is_one_line(command, tmp_path):
    src = tmp_path / "m.onnx"
    onnx.save(matmul_swish(256, 512), src)  # 512 KiB of weights
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    args = (["fuse", str(src), "-o", str(tmp_path / "f.onnx")] if command == "fuse"
            else ["check", str(src), "--reference", str(src)])
    child = cli_child(args, "import onnx_path.model_file as mf; mf.SPILL_LIMIT = 1000",
                      preexec_fn=_limit_file_size(64 << 10), env={**os.environ, "TMPDIR": str(scratch)})
    _, err = child.communicate(timeout=300)
    assert child.returncode == EXIT_USAGE, (child.returncode, err)
    line = err.strip().splitlines()[-1]
    assert "Traceback" not in err and line.startswith(f"torchtrt-swish {command}: error: "), err
    assert str(src) in line and "could not be moved to a scratch file" in line and "File too large" in line, line
    where = tmp_path if command == "fuse" else scratch
    assert str(where) in line and ("TMPDIR" in line) == (command == "check"), line
    assert leftovers(tmp_path, {"m.onnx", "tmp"}) == set() and not list(scratch.iterdir())


# ------------------------------------------------------------------------------------------------ external data


def _external(tmp_path: Path, location: str, length: int | None = None) -> Path:
    """m.onnx in tmp_path/in whose W is read from `location` (offset 0, `length` if given)."""
    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    model = matmul_swish(8, 4)
    weight = model.graph.initializer[0]
    raw = weight.raw_data
    set_external_data(weight, location, 0, len(raw) if length is None else length)
    weight.ClearField("raw_data")
    path = folder / "m.onnx"
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("outside", ["../secret.bin", "ABSOLUTE"])
def test_external_data_outside_the_models_folder_is_never_read(outside, tmp_path, capsys):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.arange(32, dtype=np.float32).tobytes() + b"SECRET" * 100)
    location = str(secret) if outside == "ABSOLUTE" else outside
    path = _external(tmp_path, location)
    out = tmp_path / "f.onnx"
    for args in (["fuse", str(path), "-o", str(out)], ["check", str(path), "--reference", str(path)]):
        assert main(args) == EXIT_USAGE, args
        line = capsys.readouterr().err.strip().splitlines()[-1]
        assert f"external data location {location!r}" in line and "relative to the model's folder" in line, line
    assert not out.exists() and not (tmp_path / "f.onnx.data").exists()


def test_a_declared_length_that_is_not_the_dims_bytes_is_refused(tmp_path, capsys):
    # W's 8x4 floats take 128 bytes; it declares 64, and the file goes on with a neighbour's bytes.
    path = _external(tmp_path, "w.bin", length=64)
    neighbour = np.full(16, 7.0, np.float32).tobytes()
    (path.parent / "w.bin").write_bytes(np.ones(16, np.float32).tobytes() + neighbour)
    out = tmp_path / "f.onnx"
    for args in (["fuse", str(path), "-o", str(out)], ["check", str(path), "--reference", str(path)]):
        assert main(args) == EXIT_USAGE, args
        line = capsys.readouterr().err.strip().splitlines()[-1]
        assert "tensor 'W' declares 64 bytes of external data, but its dims [8, 4] of FLOAT take 128" in line, line
    assert not out.exists()


def test_the_executors_never_map_a_neighbours_bytes(tmp_path):
    from onnx_path.model_file import OnnxInputError, OnnxModel
    from onnx_path.reference import ReferenceExecutor

    path = _external(tmp_path, "w.bin", length=64)
    (path.parent / "w.bin").write_bytes(np.ones(16, np.float32).tobytes() + np.full(16, 7.0, np.float32).tobytes())
    model = OnnxModel(onnx.load(path, load_external_data=False), path.parent)
    assert model.mapped_weights()[1] == {}, "a tensor whose length is not its dims' bytes is not mapped"
    with pytest.raises(OnnxInputError, match="tensor 'W' declares 64 bytes"):
        ReferenceExecutor(model)


def test_a_model_within_its_limits_still_fuses_and_checks(tmp_path, capsys):
    # The rules above refuse only what they name: the same model with a right length and location passes.
    path = _external(tmp_path, "w.bin")
    (path.parent / "w.bin").write_bytes(np.ones(32, np.float32).tobytes())
    assert main(["fuse", str(path), "-o", str(tmp_path / "f.onnx")]) == EXIT_OK, capsys.readouterr().err
    assert main(["check", str(tmp_path / "f.onnx"), "--reference", str(path)]) == EXIT_OK, capsys.readouterr().err
