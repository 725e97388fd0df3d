"""Create/clone/attach/destroy churn without leaks (resident set size), and valgrind (marked slow)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trt_plugin.harness import HARNESS_FILE, PLUGIN_PATH, errors, make


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs /proc to read the resident set size")
def test_create_clone_attach_destroy_churn_does_not_leak(creator, logs):
    assert creator.churn(20_000) == 20_000  # warm up allocator pools
    before = _rss_bytes()
    assert creator.churn(300_000) == 300_000  # 900k plugin objects: a leak of even 16 bytes each shows
    grown = _rss_bytes() - before
    assert grown < 8 * 2**20, f"RSS grew by {grown / 2**20:.1f} MiB over 900k plugin objects"
    assert errors(logs) == []


def test_python_level_create_destroy_does_not_leak(h, creator):
    def cycle(n):
        for i in range(n):
            p = make(creator, "build" if i % 2 else "runtime")
            q = creator.create("rt", p.fields_to_serialize(), "runtime")
            a = q.attach_to_context(h.ResourceContext())
            for obj in (p, q, a):
                obj.close()

    cycle(3_000)
    before = _rss_bytes()
    cycle(30_000)
    assert _rss_bytes() - before < 8 * 2**20


VALGRIND_SCRIPT = textwrap.dedent("""
    import importlib.util, struct, sys
    spec = importlib.util.spec_from_file_location("_trt_harness", sys.argv[1])
    h = importlib.util.module_from_spec(spec); spec.loader.exec_module(h)
    lib = h.Library(sys.argv[2]); lib2 = h.Library(sys.argv[2])
    (c,) = lib.creators()
    T = h.TensorDesc
    for i in range(50):
        p = c.create("v", None, "build")
        p.output_shapes([["N", 3, 4], [3, 1]]); p.output_data_types(["float16", "float16"])
        [p.supports(k, [T("float16", [2])] * 3, 2) for k in range(3)]
        p.configure([T("float16", [-1, 3, 4]), T("float16", [3, 1])], [T("float16", [-1, 3, 4])])
        p.configure([T("float16", [2, 3, 4]), T("float16", [3, 4])], [T("float16", [2, 3, 4])])
        q = c.create("r", p.fields_to_serialize(), "runtime")
        a = q.attach_to_context(h.ResourceContext())
        a.on_shape_change([T("float16", [2, 3, 4]), T("float16", [3, 4])], [T("float16", [2, 3, 4])])
        a.enqueue([T("float16", [4])], [T("float16", [4])], [0], [0])
        k = a.clone()
        for ignored in ([("bias", "float32", struct.pack("<f", i), 1)], [("beta", "int32", b"1234", 1)],
                        [("bias", "float32", None, 1)]):
            c.create("ignored", ignored, "build").close()
        assert c.create("bad", None, 7) is None
        for o in (p, q, a, k):
            o.close()
    c.churn(2000)
    h.take_logs(); lib.close(); lib2.close()
    print("VALGRIND-SCRIPT-OK")
""")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_valgrind_reports_no_leaks_or_invalid_accesses_in_the_plugin(h, tmp_path):
    script = tmp_path / "vg.py"
    script.write_text(VALGRIND_SCRIPT)
    log = tmp_path / "valgrind.log"
    env = dict(os.environ, PYTHONMALLOC="malloc")
    proc = subprocess.run(["valgrind", "--leak-check=full", "--show-leak-kinds=definite", "--num-callers=40",
                           f"--log-file={log}", sys.executable, str(script), str(HARNESS_FILE), str(PLUGIN_PATH)],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0 and "VALGRIND-SCRIPT-OK" in proc.stdout, proc.stderr[-3000:]
    # Drop the "==PID== " prefixes; records are then separated by blank lines.
    lines = [line.split("== ", 1)[1] if line.startswith("==") and "== " in line else "" for line in
             log.read_text().splitlines()]
    records = "\n".join(lines).split("\n\n")
    ours = [r for r in records if "libtorchtrt_swish_plugin" in r or "_trt_harness" in r]
    kinds = ("definitely lost", "Invalid read", "Invalid write", "Invalid free", "Mismatched free",
             "uninitialised", "overlap")
    bad = [r for r in ours if any(k in r for k in kinds)]
    assert not bad, "\n\n".join(bad)[:6000]
