"""torchtrt_swish._output, the one output rule: regular files only, atomically, in the umask's mode, none left behind.

Every special file is made in the test's temporary folder (a FIFO, a socket, a /dev/null copy made with mknod), so a
wrong write can only replace that copy.
"""
from __future__ import annotations

import errno
import ast
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from torchtrt_swish import _output
from torchtrt_swish._output import OutputPathError, atomic_output, atomic_outputs, write_bytes, write_text


def kind(path: Path) -> str:
    """What a path is, without following a link: link, fifo, socket, chardev, dir, file or other."""
    mode = os.lstat(path).st_mode
    for test, name in ((stat.S_ISLNK, "link"), (stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"),
                       (stat.S_ISCHR, "chardev"), (stat.S_ISDIR, "dir"), (stat.S_ISREG, "file")):
        if test(mode):
            return name
    return "other"


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.fixture
def specials(tmp_path):
    """name -> a path that must never be written: FIFO, socket, folder, links to nothing/itself/a FIFO, a chardev."""
    made = {}
    made["fifo"] = tmp_path / "fifo"
    os.mkfifo(made["fifo"])
    fd = os.open(made["fifo"], os.O_RDWR | os.O_NONBLOCK)  # a reader: a wrong open finds one instead of hanging
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    made["socket"] = tmp_path / "sock"
    made["folder"] = tmp_path / "folder"
    made["folder"].mkdir()
    for name, to in (("dangling link", tmp_path / "missing"), ("link loop", None), ("link to a FIFO", made["fifo"])):
        link = tmp_path / name.replace(" ", "_")
        link.symlink_to(link if to is None else to)
        made[name] = link
    try:
        os.mknod(tmp_path / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        made["character device"] = tmp_path / "null"
    except PermissionError:  # without CAP_MKNOD the other kinds still run
        pass
    yield made
    os.close(fd)
    sock.close()


@pytest.mark.parametrize("writer", ["write_text", "write_bytes", "atomic_output"])
def test_anything_but_a_regular_file_or_a_new_path_is_refused_and_left_alone(writer, specials, tmp_path):
    for name, path in specials.items():
        before = (kind(path), os.readlink(path) if path.is_symlink() else None)
        with pytest.raises(OutputPathError, match=str(path)):
            if writer == "write_text":
                write_text(path, "x")
            elif writer == "write_bytes":
                write_bytes(path, b"x")
            else:
                with atomic_output(path) as tmp:
                    tmp.write_text("x")
        assert (kind(path), os.readlink(path) if path.is_symlink() else None) == before, name
    assert not (tmp_path / "missing").exists(), "a dangling link is not written through"
    assert leftovers(tmp_path) == []


def test_a_symlink_to_a_regular_file_is_written_through_and_stays_a_link(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "out.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(Path("real") / "out.json")  # relative, into another folder
    write_text(link, "new")
    assert kind(link) == "link" and os.readlink(link) == str(Path("real") / "out.json")
    assert target.read_text() == "new"
    assert leftovers(tmp_path) == [] and leftovers(tmp_path / "real") == []


def test_a_name_at_the_length_limit_is_written(tmp_path):
    target = tmp_path / ("n" * 250 + ".json")  # 255 bytes, the limit of one name on Linux filesystems
    write_text(target, "{}")
    assert target.read_text() == "{}" and leftovers(tmp_path) == []


def test_the_file_is_swapped_in_whole(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    with atomic_output(target) as tmp:
        assert tmp.parent == tmp_path and tmp.is_file() and tmp.stat().st_size == 0  # reserved beside the target
        tmp.write_bytes(b"half")
        assert target.read_bytes() == b"old", "the target changes only at the end"
    assert target.read_bytes() == b"half" and leftovers(tmp_path) == []


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_a_new_file_follows_the_umask(umask, mode, tmp_path):
    old = os.umask(umask)
    try:
        write_text(tmp_path / "new.json", "{}")
        with atomic_output(tmp_path / "new.onnx") as tmp:
            tmp.write_bytes(b"x")  # a library writing by name: the reserved file's mode stays
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "new.json").st_mode) == mode
    assert stat.S_IMODE(os.stat(tmp_path / "new.onnx").st_mode) == mode


def test_a_replaced_file_keeps_its_permissions(tmp_path):
    target = tmp_path / "private.json"
    target.write_text("old")
    target.chmod(0o600)
    write_text(target, "new")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600 and target.read_text() == "new"


@pytest.mark.parametrize("failure", [KeyboardInterrupt, OSError(errno.ENOSPC, "No space left on device")])
def test_a_failed_or_interrupted_write_leaves_the_old_file_and_no_temporary(failure, tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")
    with pytest.raises(type(failure) if isinstance(failure, BaseException) else failure):
        with atomic_output(target) as tmp:
            tmp.write_text("partial")
            raise failure
    assert target.read_text() == "old" and leftovers(tmp_path) == []
    with pytest.raises(KeyboardInterrupt):
        with atomic_output(tmp_path / "new.json") as tmp:
            raise KeyboardInterrupt
    assert not (tmp_path / "new.json").exists() and leftovers(tmp_path) == []


def test_a_write_past_the_file_size_limit_leaves_no_temporary(tmp_path):
    # A real RLIMIT_FSIZE in a child: Python ignores SIGXFSZ, so the write fails with EFBIG inside the block.
    target = tmp_path / "out.json"
    target.write_text("old")
    code = ("import resource, sys\n"
            "from torchtrt_swish._output import write_text\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
            "try:\n"
            f"    write_text({str(target)!r}, 'x' * 100_000)\n"
            "except OSError as exc:\n"
            "    print(exc.errno)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parent.parent)
    assert proc.stdout.strip() == str(errno.EFBIG), proc.stdout + proc.stderr
    assert target.read_text() == "old" and leftovers(tmp_path) == []


def test_what_changes_at_the_path_during_the_write_is_checked_again(tmp_path):
    target = tmp_path / "out.json"
    with pytest.raises(OutputPathError, match="FIFO"):
        with atomic_output(target) as tmp:
            tmp.write_text("x")
            os.mkfifo(target)
    assert kind(target) == "fifo" and leftovers(tmp_path) == []


def test_an_input_is_never_replaced_under_any_spelling(tmp_path):
    source = tmp_path / "model.onnx"
    source.write_bytes(b"input")
    os.link(source, tmp_path / "hard.onnx")
    (tmp_path / "soft.onnx").symlink_to(source)
    for spelling in (source, tmp_path / "hard.onnx", tmp_path / "soft.onnx", tmp_path / "." / "model.onnx"):
        with pytest.raises(OutputPathError, match="same file as the input"):
            write_bytes(spelling, b"output", inputs=[source])
    assert source.read_bytes() == b"input" and leftovers(tmp_path) == []
    write_bytes(tmp_path / "other.onnx", b"output", inputs=[source, tmp_path / "absent.onnx"])


def test_several_outputs_are_all_replaced_in_order_or_none(tmp_path):
    data, model = tmp_path / "m.data", tmp_path / "m.onnx"
    with atomic_outputs([data, model]) as (data_tmp, model_tmp):
        data_tmp.write_bytes(b"weights")
        model_tmp.write_bytes(b"graph")
    assert (data.read_bytes(), model.read_bytes()) == (b"weights", b"graph")
    assert data.stat().st_mtime_ns <= model.stat().st_mtime_ns
    with pytest.raises(RuntimeError):
        with atomic_outputs([data, model]) as (data_tmp, model_tmp):
            data_tmp.write_bytes(b"new weights")
            raise RuntimeError("the model could not be serialized")
    assert (data.read_bytes(), model.read_bytes()) == (b"weights", b"graph") and leftovers(tmp_path) == []
    with pytest.raises(OutputPathError, match="named twice"):
        with atomic_outputs([data, tmp_path / "." / "m.data"]):
            pass


def _own_writes(source: str) -> list[str]:
    """Calls that write a file by hand (Path.write_text/write_bytes, os.replace/rename, NamedTemporaryFile, mkstemp),
    except those inside a `with tempfile.TemporaryDirectory()` block: scratch files in a private folder, no output."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def in_scratch(node) -> bool:
        while (node := parents.get(node)) is not None:
            if isinstance(node, ast.With) and any("TemporaryDirectory" in ast.unparse(i.context_expr)
                                                   for i in node.items):
                return True
        return False

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            own = (name.endswith((".write_text", ".write_bytes")) and not name.startswith("_output.")
                   or name in ("os.replace", "os.rename") or name.endswith(("NamedTemporaryFile", "mkstemp")))
            if own and not in_scratch(node):
                found.append(f"line {node.lineno}: {name}")
    return found


def test_the_scan_for_own_writes_can_fail():
    hand_made = "from pathlib import Path\nPath('x').write_bytes(b'')\nimport os\nos.replace('a', 'b')\n"
    assert _own_writes(hand_made) == ["line 2: Path('x').write_bytes", "line 4: os.replace"]
    scratch = "import tempfile\nwith tempfile.TemporaryDirectory() as t:\n    Path(t).write_text('')\n"
    assert _own_writes(scratch + "_output.write_text('p', 'x')\n") == []


def test_every_writer_of_the_project_uses_this_rule():
    # The rule's home is below both packages; the others import it instead of writing their own.
    import onnx_path.model_file as model_file

    assert issubclass(model_file.OutputPathError, _output.OutputPathError)
    assert issubclass(model_file.OutputPathError, model_file.OnnxInputError)
    root = Path(__file__).resolve().parent.parent
    for path in [*(root / "torchtrt_swish").glob("*.py"), *(root / "onnx_path").rglob("*.py")]:
        if path.name != "_output.py":
            own = _own_writes(path.read_text())
            assert not own, f"{path.name} writes a file itself ({own}): use torchtrt_swish._output"
