"""torchtrt_swish.doctor.probe, the doctor's child processes: each import has its own timeout, whatever came before
it."""
from __future__ import annotations

from torchtrt_swish.doctor.probe import import_modules


def test_each_import_has_its_own_timeout(tmp_path, monkeypatch):
    # Three imports of 1.6 s each under a 3 s timeout: all pass (the clock restarts per import), the hanging one
    # fails alone, and the one after it is still imported.
    for name, body in (("slow_a", "time.sleep(1.6)"), ("slow_b", "time.sleep(1.6)"), ("stuck", "time.sleep(600)"),
                       ("slow_c", "time.sleep(1.6)")):
        (tmp_path / f"{name}.py").write_text(f"import time\n{body}\n__version__ = '1.{len(name)}'\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    found = import_modules(("slow_a", "slow_b", "stuck", "slow_c"), 3)
    assert found == {"slow_a": {"version": "1.6"}, "slow_b": {"version": "1.6"},
                     "stuck": {"error": "import stuck did not finish within 3 s (the process was stopped)"},
                     "slow_c": {"version": "1.6"}}


def test_an_import_error_is_its_first_line(tmp_path, monkeypatch):
    (tmp_path / "broken.py").write_text("raise ImportError('libfoo.so: cannot open shared object file\\nmore')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert import_modules(("broken", "shlex"), 10) == {
        "broken": {"error": "ImportError: libfoo.so: cannot open shared object file"},
        "shlex": {"version": "(version unknown)"}}
