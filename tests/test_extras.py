"""The extras: the base install (torch, numpy) runs the console script's --help, --version and doctor; a sub-command
that needs an extra names it in one line. Missing modules are simulated in a subprocess by a meta-path blocker
(a sitecustomize on PYTHONPATH), not by uninstalling."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

from torchtrt_swish.extras import EXTRAS, POLYGRAPHY_MIN, extra_for, install_hint, missing_extra_message

ROOT = Path(__file__).resolve().parent.parent
BLOCK_ENV = "TORCHTRT_SWISH_TEST_BLOCK"
# Everything beyond torch and numpy that anything here might import.
OPTIONAL = sorted({m for ms in EXTRAS.values() for m in ms} | {
    "tensorrt", "tensorrt_bindings", "tensorrt_lean", "tensorrt_lean_bindings", "tensorrt_dispatch",
    "tensorrt_dispatch_bindings", "torch_tensorrt"})

SITECUSTOMIZE = textwrap.dedent('''
    import os, sys
    _BLOCKED = set(filter(None, os.environ.get("%s", "").split(",")))

    class _Blocker:
        """Makes every blocked top-level module (and its submodules) fail to import, as if not installed."""

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in _BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _Blocker())
''' % BLOCK_ENV)

# Runs main() once per argv, in one process; prints [exit code, stdout, stderr] per call as JSON.
DRIVER = textwrap.dedent('''
    import contextlib, io, json, sys
    from onnx_path.cli import main
    results = []
    for argv in json.loads(sys.argv[1]):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code
        results.append([code, out.getvalue(), err.getvalue()])
    print(json.dumps(results))
''')


def _env(tmp_path: Path, blocked) -> dict[str, str]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    env[BLOCK_ENV] = ",".join(blocked)
    return env


def _python(tmp_path, blocked, *args, timeout=600):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=tmp_path,
                          env=_env(tmp_path, blocked), timeout=timeout)


def _cli(tmp_path, blocked, *argvs):
    proc = _python(tmp_path, blocked, "-c", DRIVER, json.dumps([list(a) for a in argvs]))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _one_line_error(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


# ------------------------------------------------------------------------------------------ the rule itself


def test_every_extra_is_what_pyproject_declares():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, modules in EXTRAS.items():
        dists = [re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0] for req in declared[extra]]
        assert tuple(d.replace("-", "_").lower() for d in dists) == modules, extra
    assert f"polygraphy>={POLYGRAPHY_MIN}" in declared["onnx"]


def test_the_polygraphy_floor_guards_precision_is_set():
    # 0.53.6's CreateConfig reads layer.precision_is_set inside try/except AttributeError (TensorRT 11 removed it).
    import importlib.util

    import polygraphy

    # By its file: the package's `config` attribute is shadowed by polygraphy.config.
    source = Path(importlib.util.find_spec("polygraphy.backend.trt.config").origin).read_text()
    def numbers(v):
        return tuple(int(p) for p in v.split(".")[:3])

    assert numbers(polygraphy.__version__) >= numbers(POLYGRAPHY_MIN)
    guarded = re.search(r"try:\n(\s+)layer_with_precisions = \{.*?precision_is_set.*?\}\n\s+except AttributeError:",
                        source, re.S)
    assert guarded, "Polygraphy's CreateConfig no longer guards layer.precision_is_set"


def test_extra_for_and_the_message():
    assert extra_for("onnx") == "onnx" and extra_for("onnx_graphsurgeon") == "onnx"
    assert extra_for("polygraphy.backend.trt") == "onnx" and extra_for("torchvision.models") == "vision"
    assert extra_for("tensorrt") is None and extra_for(None) is None
    assert install_hint("vision") == "pip install 'torchtrt_swish[vision]'"
    exc = ModuleNotFoundError("No module named 'torchvision'", name="torchvision")
    assert missing_extra_message(exc) == ("needs torchvision, which is not installed: "
                                          "pip install 'torchtrt_swish[vision]'")
    assert missing_extra_message(ModuleNotFoundError("x", name="sympy")) is None


# ------------------------------------------------------------------------------------- the base install alone


def test_the_blocker_blocks(tmp_path):
    code = "import importlib\ntry:\n    import onnx\nexcept ModuleNotFoundError as e:\n    print('blocked', e.name)\n"
    assert _python(tmp_path, ["onnx"], "-c", code).stdout.split() == ["blocked", "onnx"]
    assert _python(tmp_path, [], "-c", code).stdout == ""  # without the block, onnx imports here


def test_base_install_help_version_and_extra_errors(tmp_path):
    help_, sub_help, version, export, fuse, build, check = _cli(
        tmp_path, OPTIONAL, ["--help"], ["doctor", "--help"], ["--version"], ["export", "-o", "m.onnx"],
        ["fuse", "m.onnx", "-o", "f.onnx"], ["build-engine", "m.onnx", "-o", "m.engine"],
        ["check", "m.onnx", "--torch-model", "seed-net"])
    assert help_[0] == 0 and "doctor" in help_[1] and "export" in help_[1]
    assert sub_help[0] == 0 and "--json" in sub_help[1]
    assert version[0] == 0 and version[1].startswith("torchtrt-swish ")
    for (code, _out, err), command in zip((export, fuse, build, check), ("export", "fuse", "build-engine", "check")):
        line = _one_line_error(err)
        assert code == 2, err
        assert line == (f"torchtrt-swish {command}: error: {command} needs onnx, which is not installed: "
                        "pip install 'torchtrt_swish[onnx]'")


def test_torchvision_models_name_the_vision_extra(tmp_path):
    (export,) = _cli(tmp_path, ["torchvision"], ["export", "--model", "torchvision:efficientnet_b0", "-o", "e.onnx"])
    assert export[0] == 2
    assert _one_line_error(export[2]) == ("torchtrt-swish export: error: export needs torchvision, which is not "
                                          "installed: pip install 'torchtrt_swish[vision]'")
    assert not (tmp_path / "e.onnx").exists()


def test_other_missing_modules_are_not_blamed_on_an_extra(tmp_path):
    # A module no extra provides, missing inside a sub-command: a real bug, so the traceback stays.
    code = DRIVER.replace("from onnx_path.cli import main", textwrap.dedent('''
        import onnx_path.cli as cli
        from onnx_path.tools.export import Export
        def broken(args):
            import no_such_module_anywhere
        Export.run = lambda self, args: broken(args)
        main = cli.main'''))
    proc = _python(tmp_path, [], "-c", code, json.dumps([["export", "-o", "m.onnx"]]))
    assert proc.returncode != 0 and "ModuleNotFoundError: No module named 'no_such_module_anywhere'" in proc.stderr


def test_doctor_runs_with_the_base_install(tmp_path):
    proc = _python(tmp_path, OPTIONAL, "-m", "torchtrt_swish.doctor", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {(r["section"], r["check"]): r for r in json.loads(proc.stdout)["rows"]}
    for extra, modules in EXTRAS.items():
        for name in modules:
            assert rows[("environment", name)]["status"] == "SKIPPED"
            assert rows[("environment", name)]["detail"] == f"not installed: {install_hint(extra)}"
    assert rows[("op", "CPU kernel")]["status"] == "PASS"
    assert rows[("environment", "TensorRT full")]["status"] == "SKIPPED"
    onnx_route = rows[("engine", "ONNX parser with the plugin")]
    assert onnx_route["status"] == "SKIPPED" and "onnx and polygraphy (pip install 'torchtrt_swish[onnx]')" in \
        onnx_route["detail"]
