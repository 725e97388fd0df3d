"""Where the torchtrt-swish CLI writes: regular files or new paths only, never a device, a link or an input.

Every special file here is made in a temporary folder (a FIFO, a socket, a character device made with mknod like
/dev/null): a wrong write can only replace that copy, never a system file.
"""
from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_path.cli import EXIT_OK, EXIT_USAGE, main
from test_output import kind

CONSOLE_SCRIPT = Path(sys.executable).with_name("torchtrt-swish")


def silu_add_model() -> onnx.ModelProto:
    nodes = [h.make_node("Sigmoid", ["x"], ["s"]), h.make_node("Mul", ["x", "s"], ["m"]),
             h.make_node("Add", ["m", "b"], ["y"])]
    bias = onnx.numpy_helper.from_array(np.linspace(-1, 1, 64, dtype=np.float32).reshape(4, 16), "b")
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["batch", 4, 16])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["batch", 4, 16])], initializer=[bias])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


@pytest.fixture
def model(tmp_path) -> Path:
    path = tmp_path / "m.onnx"
    onnx.save(silu_add_model(), path)
    return path


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    # A reader that never blocks: should a wrong write open the FIFO, it finds a reader instead of hanging.
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    yield path
    os.close(fd)


@pytest.fixture
def unix_socket(tmp_path):
    path = tmp_path / "sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    yield path
    sock.close()


@pytest.fixture
def char_device(tmp_path):
    path = tmp_path / "null"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a copy of /dev/null, in the temporary folder
    except PermissionError:
        pytest.skip("mknod of a character device needs root (CAP_MKNOD)")
    return path


def commands(model: Path, target: Path, tmp: Path) -> dict[str, list[str]]:
    return {
        "export -o": ["export", "-o", str(target)],
        "fuse -o": ["fuse", str(model), "-o", str(target)],
        "fuse --report": ["fuse", str(model), "-o", str(tmp / "f.onnx"), "--report", str(target)],
        "check --json": ["check", str(model), "--reference", str(model), "--backends", "reference", "--json",
                         str(target)],
    }


@pytest.mark.parametrize("special", ["fifo", "unix_socket", "char_device", "folder"])
def test_special_files_are_refused_and_left_as_they_are(special, model, tmp_path, capsys, request):
    if special == "folder":
        target = tmp_path / "folder"
        target.mkdir()
    else:
        target = request.getfixturevalue(special)
    before = kind(target)
    for what, args in commands(model, target, tmp_path).items():
        assert main(args) == EXIT_USAGE, what
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(target) in err[0] and "cannot be written" in err[0], (what, err)
        assert kind(target) == before, f"{what} replaced the {before}"
    assert not (tmp_path / "f.onnx").exists(), "a refused command writes nothing"


def test_a_symlink_to_a_regular_file_is_written_through(model, tmp_path, capsys):
    target = tmp_path / "real.onnx"
    target.write_bytes(b"old")
    link = tmp_path / "link.onnx"
    link.symlink_to(target)
    assert main(["fuse", str(model), "-o", str(link)]) == EXIT_OK
    assert kind(link) == "link" and os.readlink(link) == str(target), "the link itself must stay"
    assert onnx.load(target).graph.node[0].op_type == "SwishBias"
    rel = tmp_path / "rel.json"
    rel.symlink_to("report.json")  # a relative link to a file that exists
    (tmp_path / "report.json").write_text("{}")
    assert main(["fuse", str(model), "-o", str(tmp_path / "f2.onnx"), "--report", str(rel)]) == EXIT_OK
    assert kind(rel) == "link" and '"replaced"' in (tmp_path / "report.json").read_text()


@pytest.mark.parametrize("points_to", ["nothing", "fifo", "folder", "loop"])
def test_a_symlink_to_anything_but_a_regular_file_is_refused(points_to, model, tmp_path, capsys, request):
    link = tmp_path / "link.onnx"
    if points_to == "nothing":
        link.symlink_to(tmp_path / "missing.onnx")
    elif points_to == "fifo":
        link.symlink_to(request.getfixturevalue("fifo"))
    elif points_to == "folder":
        (tmp_path / "d").mkdir()
        link.symlink_to(tmp_path / "d")
    else:
        link.symlink_to(link)
    target = os.readlink(link)
    assert main(["fuse", str(model), "-o", str(link)]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot be written" in err[0] and str(link) in err[0], err
    assert kind(link) == "link" and os.readlink(link) == target
    assert not (tmp_path / "missing.onnx").exists()


def external_model(tmp_path) -> tuple[Path, Path]:
    path = tmp_path / "ext.onnx"
    onnx.save(silu_add_model(), path, save_as_external_data=True, all_tensors_to_one_file=True,
              location="weights.bin", size_threshold=0)
    return path, tmp_path / "weights.bin"


def test_external_data_files_of_an_input_count_as_inputs(tmp_path, capsys):
    model, weights = external_model(tmp_path)
    data = weights.read_bytes()
    link = tmp_path / "weights_link.bin"
    link.symlink_to(weights)
    for args in (["fuse", str(model), "-o", str(weights)],
                 ["fuse", str(model), "-o", str(tmp_path / "f.onnx"), "--report", str(weights)],
                 ["fuse", str(model), "-o", str(link)],
                 ["check", str(model), "--reference", str(model), "--backends", "reference", "--json",
                  str(weights)]):
        assert main(args) == EXIT_USAGE, args
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "is the same file as" in err[0] and "weights.bin" in err[0], err
        assert weights.read_bytes() == data
    # The reference's external data too.
    other = tmp_path / "other"
    other.mkdir()
    plain = other / "plain.onnx"
    onnx.save(silu_add_model(), plain)
    assert main(["check", str(plain), "--reference", str(model), "--backends", "reference", "--json",
                 str(weights)]) == EXIT_USAGE
    assert "same file as --reference's external data" in capsys.readouterr().err
    assert weights.read_bytes() == data
    # Writing beside them is fine, and the fused model still reads its weights.
    assert main(["fuse", str(model), "-o", str(tmp_path / "fused.onnx")]) == EXIT_OK
    assert weights.read_bytes() == data


def test_library_writes_refuse_special_files_too(fifo, tmp_path):
    from onnx_path.model_file import OnnxInputError, save_model, write_text_atomic

    with pytest.raises(OnnxInputError, match="FIFO"):
        save_model(silu_add_model(), fifo)
    with pytest.raises(OnnxInputError, match="FIFO"):
        write_text_atomic(fifo, "{}")
    assert kind(fifo) == "fifo"


# --------------------------------------------------------------------------------------------------- pipes


def test_a_closed_stdout_loses_nothing_and_prints_no_traceback(model, tmp_path):
    out, report = tmp_path / "out.onnx", tmp_path / "r.json"
    # head -c0 exits at once, long before the CLI has imported torch: every line the CLI prints meets a closed pipe.
    script = (f"set -o pipefail; {CONSOLE_SCRIPT} fuse {model} -o {out} --report {report} | head -c0; "
              "echo rc=${PIPESTATUS[0]} >&2")
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=600)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
    assert "rc=0" in proc.stderr, proc.stderr
    assert onnx.load(out).graph.node[0].op_type == "SwishBias" and '"replaced"' in report.read_text()


def test_check_through_a_closed_pipe_keeps_its_exit_code_and_json(model, tmp_path):
    wrong = tmp_path / "wrong.onnx"
    m = silu_add_model()
    m.graph.initializer[0].CopyFrom(onnx.numpy_helper.from_array(np.full((4, 16), 5.0, np.float32), "b"))
    onnx.save(m, wrong)
    js = tmp_path / "p.json"
    proc = subprocess.Popen([str(CONSOLE_SCRIPT), "check", str(wrong), "--reference", str(model), "--backends",
                             "reference", "--json", str(js)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader goes away before anything is printed
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, err.decode()
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()
    assert '"passed": false' in js.read_text()


# ---------------------------------------------------------------------------------------- closed std streams

# What the shell does for `torchtrt-swish ... >&-` (a service manager, nohup variants): Python then starts with
# sys.stdout (or sys.stderr) None. The exit code must mean what it always means.
CLOSED = {"stdout": ">&-", "stderr": "2>&-", "both": ">&- 2>&-"}
EXITS = {"--version": (["--version"], EXIT_OK), "--help": (["--help"], EXIT_OK),
         "usage error": (["no-such-command"], EXIT_USAGE), "sub-command --help": (["export", "--help"], EXIT_OK)}


def _run_closed(args: list[str], closed: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", f'exec "$@" {CLOSED[closed]}', "sh", str(CONSOLE_SCRIPT), *args],
                          capture_output=True, text=True, cwd=cwd, timeout=600)


@pytest.mark.parametrize("closed", list(CLOSED))
@pytest.mark.parametrize("case", list(EXITS))
def test_closed_standard_streams_keep_the_exit_code(case, closed, tmp_path):
    args, want = EXITS[case]
    proc = _run_closed(args, closed, tmp_path)
    assert proc.returncode == want, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    if want == EXIT_USAGE and closed == "stdout":
        assert proc.stderr.startswith("torchtrt-swish"), proc.stderr  # the one-line error still reaches stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.fixture(scope="module")
def doctor_exit_code(tmp_path_factory) -> int:
    proc = subprocess.run([str(CONSOLE_SCRIPT), "doctor"], capture_output=True, text=True, timeout=600,
                          cwd=tmp_path_factory.mktemp("doctor"))
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode


@pytest.mark.parametrize("closed", ["stdout", "stderr"])
def test_the_doctor_with_a_closed_stream_keeps_its_exit_code(closed, doctor_exit_code, tmp_path):
    proc = _run_closed(["doctor"], closed, tmp_path)
    assert proc.returncode == doctor_exit_code and "Traceback" not in proc.stderr, proc.stderr + proc.stdout


def test_a_command_with_both_streams_closed_still_writes_its_files(model, tmp_path):
    out, report = tmp_path / "out.onnx", tmp_path / "r.json"
    proc = _run_closed(["fuse", str(model), "-o", str(out), "--report", str(report)], "both", tmp_path)
    assert proc.returncode == EXIT_OK
    assert onnx.load(out).graph.node[0].op_type == "SwishBias" and '"replaced"' in report.read_text()


@pytest.mark.parametrize("redirect", [">&-", "<&- >&-"])  # with stdin closed too, /dev/null opens as fd 0
def test_a_closed_stdout_descriptor_is_not_handed_to_the_next_file(redirect, tmp_path):
    # Left free, fd 1 would go to the next file opened, and a library's own write to fd 1 would land in that file.
    target = tmp_path / "data.txt"
    code = ("import os, sys\nfrom onnx_path import cli\ncli._open_closed_std_streams()\n"
            "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT)\nos.write(fd, b'data')\n"
            "os.write(1, b'stray')  # what a C library's printf does\nos.close(fd)\n")
    proc = subprocess.run(["sh", "-c", f'exec "$@" {redirect}', "sh", sys.executable, "-c", code, str(target)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert target.read_text() == "data"
