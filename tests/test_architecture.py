"""The dependency direction of the Python packages: onnx_path builds on torchtrt_swish, never the other way round; the
install tooling (torchtrt_swish/doctor/) sits beside the product, which never imports it."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from torchtrt_swish.doctor.probe import results

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM, DOWNSTREAM = "torchtrt_swish", "onnx_path"


def _imported_modules(path: Path, *, names_too: bool = False) -> set[str]:
    """Module names a source file imports anywhere (top level or inside functions), relative ones made absolute; with
    `names_too`, also ``X.a`` for each ``from X import a`` (which may be a module: ``from torchtrt_swish import
    doctor``)."""
    package = path.relative_to(ROOT).parent.parts if path.is_relative_to(ROOT) else None  # for relative imports
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.level == 0 or package is not None):
            base = ".".join([*package[:len(package) - node.level + 1], node.module or ""] if node.level else
                            [node.module]).strip(".")
            names.add(base)
            if names_too:
                names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def test_scan_sees_imports_inside_functions(tmp_path):
    """The scan below can fail: an import hidden in a function body is found."""
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from onnx_path.engine import build_engine\n    import onnx_path.parity\n"
                   "    from torchtrt_swish import doctor\n")
    assert _imported_modules(src) == {"onnx_path.engine", "onnx_path.parity", "torchtrt_swish"}
    assert "torchtrt_swish.doctor" in _imported_modules(src, names_too=True)


def test_scan_resolves_relative_imports():
    """Relative imports count by their absolute names (`from .extras import`, `from ..extras import`, `from .. import
    _C`, `from .probe import`)."""
    assert "torchtrt_swish.extras" in _imported_modules(ROOT / UPSTREAM / "compile.py")
    doctor = _imported_modules(ROOT / UPSTREAM / "doctor" / "__init__.py")
    assert {"torchtrt_swish.extras", "torchtrt_swish.doctor.probe"} <= doctor, doctor
    assert "torchtrt_swish._C" in _imported_modules(ROOT / UPSTREAM / "doctor" / "switch_points.py", names_too=True)


def test_no_torchtrt_swish_module_imports_onnx_path():
    sources = sorted((ROOT / UPSTREAM).rglob("*.py"))
    assert sources, f"no sources under {ROOT / UPSTREAM}"
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in _imported_modules(path)
                                            if m == DOWNSTREAM or m.startswith(DOWNSTREAM + "."))
        for path in sources
    }
    assert not {k: v for k, v in offenders.items() if v}, offenders


def test_importing_every_torchtrt_swish_module_leaves_onnx_path_unloaded():
    # The Python sources only: the package folder also holds the plugin library, which is no Python module.
    modules = [".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
               for p in sorted((ROOT / UPSTREAM).rglob("*.py")) if p.stem != "__main__"]
    code = (
        "import importlib, sys\n"
        f"for name in {[UPSTREAM, *modules]!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] == '{DOWNSTREAM}'))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]", proc.stdout


DOCTOR = f"{UPSTREAM}.doctor"
# The doctor's users: the CLI's front end of it, and the ONNX route's check, which the doctor runs as a process and
# which takes its protocol (tiny case, comparison, route_main) from the doctor.
DOCTOR_USERS = {f"{DOWNSTREAM}/tools/doctor.py", f"{DOWNSTREAM}/selfcheck.py"}


def _is_doctor(module: str) -> bool:
    return module == DOCTOR or module.startswith(DOCTOR + ".")


def test_only_the_doctor_and_its_users_import_it():
    """The op, the routes and the rest of onnx_path never import the install tooling (tests and tools may)."""
    sources = sorted([*(ROOT / UPSTREAM).rglob("*.py"), *(ROOT / DOWNSTREAM).rglob("*.py")])
    users = {name for path in sources if any(_is_doctor(m) for m in _imported_modules(path, names_too=True))
             and not (name := str(path.relative_to(ROOT))).startswith(f"{UPSTREAM}/doctor/")}
    assert users == DOCTOR_USERS, users


def test_a_probe_process_holds_no_torch(tmp_path):
    """A probe runs doctor/__main__.py by path, without the package's __init__: the doctor's modules import with the
    standard library alone (as where that __init__ raises), so torch and the op are not loaded."""
    (tmp_path / "peek.py").write_text("import sys\n__version__ = ' '.join(sorted(m for m in sys.modules if "
                                      "m.split('.')[0] in ('torch', 'torchtrt_swish', 'onnx_path')))\n")
    proc = subprocess.run([sys.executable, str(ROOT / UPSTREAM / "doctor" / "__main__.py"), "--probe-imports", "peek"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    loaded = results(proc.stdout)[-1]["version"].split()
    # _output: the one-line and output rules, standard library only like the doctor's own modules.
    assert loaded == [UPSTREAM, f"{UPSTREAM}._output", DOCTOR, f"{DOCTOR}.probe"], \
        f"{loaded}: import the others in the check that needs them"


def test_the_cli_sits_on_top_of_both_packages():
    """The console script's module is in onnx_path (it imports both packages); none is left in torchtrt_swish."""
    assert not (ROOT / UPSTREAM / "cli.py").exists()
    assert (ROOT / DOWNSTREAM / "cli.py").is_file()


def test_the_public_kernel_header_exposes_only_entry_points_and_their_types():
    """swish_kernel.h, which the op and the plugin include, pulls in the bias layout and the element types, not the
    launch internals (block sizes, FastDiv, the planners)."""
    import re

    header = (ROOT / "csrc" / "kernels" / "swish_kernel.h").read_text()
    ours = set(re.findall(r'#include "([^"]+)"', header))
    assert ours == {"bias_layout.h", "swish_types.h"}, ours
    types = (ROOT / "csrc" / "kernels" / "swish_types.h").read_text()
    assert "#include \"" not in types


def test_no_python_source_of_the_packages_is_over_600_lines():
    """Split by concern before that (docs/architecture.md): one module per CLI tool, the doctor's processes apart."""
    sources = sorted([*(ROOT / UPSTREAM).rglob("*.py"), *(ROOT / DOWNSTREAM).rglob("*.py")])
    long = {str(p.relative_to(ROOT)): n for p in sources if (n := len(p.read_text().splitlines())) > 600}
    assert not long, long


def test_one_module_per_cli_tool():
    """onnx_path/tools/ holds one module per sub-command (named after it), each registered in onnx_path.cli.TOOLS
    with its own add_parser_args and run; base.py and args.py are what they share."""
    from onnx_path import cli
    from onnx_path.tools.base import Tool

    modules = {p.stem for p in (ROOT / DOWNSTREAM / "tools").glob("*.py")} - {"__init__", "base", "args"}
    assert sorted(module for module, _ in cli.TOOLS) == sorted(modules)
    for (module, _), tool in zip(cli.TOOLS, cli.tools()):
        assert type(tool).__module__ == f"{DOWNSTREAM}.tools.{module}" and tool.name.replace("-", "_") == module
        assert type(tool).add_parser_args is not Tool.add_parser_args and type(tool).run is not Tool.run, module


def _package_import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports (absolute and relative imports, at any depth in the file)."""
    sources = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
               for p in [*(ROOT / UPSTREAM).rglob("*.py"), *(ROOT / DOWNSTREAM).rglob("*.py")]}
    graph = {}
    for name, path in sources.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{parent}.{base}" if base else parent
                found.add(base)
                found.update(f"{base}.{a.name}" for a in node.names)
        graph[name] = {m for m in found if m in sources and m != name and not name.startswith(m + ".")}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph` (a list of modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    return next((c for n in sorted(graph) if n not in state and (c := visit(n))), None)


def test_the_cycle_finder_can_fail():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_circle_between_the_modules_of_the_packages():
    graph = _package_import_graph()
    assert "onnx_path.model_file" in graph["onnx_path.tools.fuse"] and "onnx_path.common" in graph["onnx_path.model_file"]
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_model_files_are_read_and_written_in_one_module():
    """onnx_path.model_file is the one home of ONNX model I/O: no other module calls onnx's load/save or its
    external-data helpers, and it imports nothing of the route above the graph queries."""
    io_calls = {"onnx.load", "onnx.save", "onnx.load_model", "onnx.save_model", "onnx.external_data_helper"}
    offenders = {}
    for path in sorted((ROOT / DOWNSTREAM).rglob("*.py")):
        text = path.read_text()
        used = sorted(c for c in io_calls if f"{c}(" in text or f"from {c} import" in text or f"import {c}" in text)
        if used and path.name != "model_file.py":
            offenders[str(path.relative_to(ROOT))] = used
    assert not offenders, offenders
    assert _package_import_graph()["onnx_path.model_file"] <= {"onnx_path.common", UPSTREAM, f"{UPSTREAM}._output"}
