"""Where `torchtrt-swish doctor` writes: --json keeps the output rule of every other command (torchtrt_swish._output),
the file comes before the table, and a reader of the table that goes away costs neither the file nor the exit code.

The checks themselves are replaced by fixed rows (doctor.collect): these tests are about the writing only. Every
special file is made in the test's temporary folder.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from torchtrt_swish import doctor
from torchtrt_swish.doctor import FAIL, PASS, Row

ROOT = Path(__file__).resolve().parent.parent
CONSOLE_SCRIPT = Path(sys.executable).with_name("torchtrt-swish")


def fixed_rows(count: int = 3, failed: bool = False) -> list[Row]:
    rows = [Row("environment", f"check {i}", PASS, "fine " * 12) for i in range(count)]
    return rows + ([Row("op", "CPU kernel", FAIL, "float32, scalar bias: not close")] if failed else [])


def cli_code(count: int, failed: bool) -> str:
    """A `torchtrt-swish` process whose doctor reports fixed rows (the console script's main, the real run)."""
    return ("import sys\n"
            "from torchtrt_swish import doctor\n"
            f"rows = [doctor.Row('environment', f'check {{i}}', doctor.PASS, 'fine ' * 12) for i in range({count})]\n"
            f"rows += [doctor.Row('op', 'CPU kernel', doctor.FAIL, 'not close')] if {failed} else []\n"
            "doctor.collect = lambda: rows\n"
            "from onnx_path.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")


def run_doctor(monkeypatch, target, rows=None) -> int:
    monkeypatch.setattr(doctor, "collect", lambda: rows or fixed_rows())
    return doctor.run(type("Args", (), {"json": str(target)}))


def kind(path: Path) -> str:
    mode = os.lstat(path).st_mode
    return next(name for test, name in ((stat.S_ISLNK, "link"), (stat.S_ISFIFO, "fifo"), (stat.S_ISCHR, "chardev"),
                                        (stat.S_ISDIR, "dir"), (stat.S_ISREG, "file")) if test(mode))


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# ---------------------------------------------------------------------------------------------------- files


def test_json_through_a_symlink_keeps_the_link(monkeypatch, tmp_path, capsys):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert run_doctor(monkeypatch, link) == doctor.EXIT_OK
    assert kind(link) == "link" and os.readlink(link) == str(real)
    assert json.loads(real.read_text())["counts"][PASS] == 3


@pytest.mark.parametrize("special", ["dangling link", "fifo", "character device", "folder"])
def test_json_refuses_what_is_not_a_regular_file(special, monkeypatch, tmp_path, capsys):
    target = tmp_path / "target"
    if special == "dangling link":
        target.symlink_to(tmp_path / "nowhere.json")
    elif special == "fifo":
        os.mkfifo(target)
    elif special == "folder":
        target.mkdir()
    else:
        try:
            os.mknod(target, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null copy in the temporary folder
        except PermissionError:
            pytest.skip("mknod of a character device needs root (CAP_MKNOD)")
    before = kind(target)
    ran = []
    monkeypatch.setattr(doctor, "collect", lambda: ran.append(1) or fixed_rows())
    assert doctor.run(type("Args", (), {"json": str(target)})) == doctor.EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"torchtrt-swish doctor: error: --json {target} cannot be written"), err
    assert kind(target) == before and not (tmp_path / "nowhere.json").exists()
    assert ran == [], "refused before minutes of checks, not after"
    assert leftovers(tmp_path) == []


def test_json_follows_the_umask(monkeypatch, tmp_path, capsys):
    old = os.umask(0o022)
    try:
        assert run_doctor(monkeypatch, tmp_path / "d.json") == doctor.EXIT_OK
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "d.json").stat().st_mode) == 0o644


def test_a_failed_json_write_leaves_no_temporary_file(tmp_path):
    # A real file-size limit in a child: the report does not fit, the write fails, nothing is left behind.
    target = tmp_path / "d.json"
    code = ("import resource\n" + cli_code(200, False).replace(
        "from onnx_path.cli import main\n",
        "from onnx_path.cli import main\nresource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))\n"))
    proc = subprocess.run([sys.executable, "-c", code, "doctor", "--json", str(target)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == doctor.EXIT_USAGE, proc.stderr
    assert proc.stderr.strip() == f"torchtrt-swish doctor: error: --json {target} could not be written: File too large"
    assert "Traceback" not in proc.stderr and not target.exists() and leftovers(tmp_path) == []


def test_the_file_is_written_before_the_table_is_printed(monkeypatch, tmp_path):
    from torchtrt_swish import _output

    target, seen = tmp_path / "d.json", []
    monkeypatch.setattr(_output, "say", lambda text, end="\n": seen.append((text.splitlines()[0], target.exists())))
    assert run_doctor(monkeypatch, target) == doctor.EXIT_OK
    assert seen[0][1] and all(exists for _, exists in seen), seen
    assert seen[-1] == (f"wrote {target}", True)


# ---------------------------------------------------------------------------------------------------- pipes


@pytest.mark.parametrize("failed", [False, True])
def test_a_closed_stdout_keeps_the_file_and_the_exit_status(failed, tmp_path):
    target = tmp_path / "d.json"
    proc = subprocess.Popen([sys.executable, "-c", cli_code(3, failed), "doctor", "--json", str(target)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    proc.stdout.close()  # `doctor --json d.json | true`: the reader is gone before the table is printed
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == (doctor.EXIT_FAILED if failed else doctor.EXIT_OK), err.decode()
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()
    assert json.loads(target.read_text())["counts"][FAIL] == int(failed)


@pytest.mark.parametrize("reader", ["true", "head -1"])
@pytest.mark.parametrize("json_arg", [[], ["--json"]])
def test_doctor_into_a_pipe_that_closes(reader, json_arg, tmp_path):
    # More than a pipe's 64 KiB of rows: the reader leaves while the doctor still writes.
    script = (f"set -o pipefail; {sys.executable} -c \"$CODE\" doctor {' '.join(json_arg)} | {reader}; "
              "echo rc=${PIPESTATUS[0]} >&2")
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=dict(os.environ, CODE=cli_code(3000, True)))
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert f"rc={doctor.EXIT_FAILED}" in proc.stderr, proc.stderr


def test_the_console_script_and_python_m_agree(tmp_path):
    # Both entries run the same run(): the same file, the same refusal.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for argv in ([str(CONSOLE_SCRIPT), "doctor", "--json", str(fifo)],
                 [sys.executable, "-m", "torchtrt_swish.doctor", "--json", str(fifo)]):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert proc.returncode == doctor.EXIT_USAGE and "is a FIFO" in proc.stderr, (argv, proc.stderr)
        assert kind(fifo) == "fifo"


def _section(text: str, heading: str) -> str:
    """The body of a `## heading` section of a markdown page, on one line."""
    body = text[text.index(f"\n## {heading}\n"):]
    return " ".join(body[len(heading) + 5:].split("\n## ")[0].split())


def test_the_cli_page_states_the_doctors_rules():
    # The CLI rules (docs/cli.md) name the doctor, and the doctor's section the import timeout it really has.
    text = (ROOT / "docs" / "cli.md").read_text()
    assert "`doctor --json PATH` writes its file through the same output helper" in _section(text, "Output files")
    assert "`torchtrt-swish doctor` still runs" in _section(text, "Exit codes")
    assert "`doctor | head -1` exits as the checks decided" in _section(text, "Interrupts, full disks, closed streams")
    assert (f"each import it probes has a {doctor.IMPORT_TIMEOUT_S} s timeout of its own"
            in _section(text, "`doctor`"))
