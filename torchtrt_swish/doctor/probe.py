"""The doctor's child processes: each check that may crash or hang runs in one, with a timeout, and hands back one
JSON result line; and the probes, processes (__main__.py run by path) that hold TensorRT and the plugin, or an extra,
but no torch, as a user's TensorRT process does.

The result line starts with RESULT_MARKER on a line of its own: a library that printed without a newline (C code
writing to stdout, flushed at exit) can neither glue itself to the result nor follow it unnoticed.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .._output import first_line

RESULT_MARKER = "torchtrt-swish-doctor-result:"
_TAIL = 3  # lines of a failed child's stderr (or stdout) quoted in its row
_MAIN = str(Path(__file__).resolve().with_name("__main__.py"))  # run by path: a process without the package's __init__


class CheckFailed(Exception):
    """A check ran and found something wrong (its message is the row's reason)."""


def version_of(module: Any) -> str:
    """A module's __version__, else its distribution's version, else '(version unknown)'."""
    version = getattr(module, "__version__", None)
    if version:
        return str(version)
    try:
        return importlib.metadata.version(module.__name__)
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown)"


def emit(result: dict) -> None:
    """Print `result` as this child's result line (after a newline, so nothing printed before can join it)."""
    sys.stdout.flush()
    print(f"\n{RESULT_MARKER} {json.dumps(result)}", flush=True)


def _tail(text: str) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-_TAIL:])


def results(stdout: str) -> list[dict]:
    """The results a child emit()ted, in order (lines that do not parse are left out)."""
    out = []
    for line in stdout.splitlines():
        if line.startswith(RESULT_MARKER):
            try:
                out.append(json.loads(line[len(RESULT_MARKER):]))
            except json.JSONDecodeError:
                pass
    return out


def run_child(argv: list[str], *, timeout: float, waited_for: str, env: dict[str, str] | None = None) -> dict:
    """The result a child process emit()s; CheckFailed naming how it ended otherwise (its exit or signal, the last
    lines it wrote, or what was waited for when it ran past `timeout` seconds)."""
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise CheckFailed(f"{waited_for} did not finish within {timeout:g} s (the check process was "
                              "stopped)") from None
    code = proc.returncode
    if code == 0 and (found := results(out)):
        return found[-1]
    how = f"was killed by signal {-code}" if code < 0 else f"exited {code}"
    if (tail := _tail(err)):
        raise CheckFailed(f"the check process {how}: {tail}")
    if out.strip():
        raise CheckFailed(f"the check process {how} without a result line; its output ended: {_tail(out)}")
    raise CheckFailed(f"the check process {how}" + (" without output" if code == 0 else ""))


def probe_imports(names: tuple[str, ...]) -> None:
    """In this process: import each module in turn and emit {name, version} or {name, error} before the next one,
    so that the parent knows which import hung when it stops the process."""
    for name in names:
        emit({"name": name, "started": True})
        try:
            emit({"name": name, "version": version_of(importlib.import_module(name))})
        except Exception as exc:  # noqa: BLE001 - a broken install raises all sorts of errors at import
            emit({"name": name, "error": first_line(exc, typed=True)})


def import_modules(names: tuple[str, ...], timeout: float) -> dict[str, dict]:
    """{name: {"version": ...} or {"error": ...}} for each module, imported in turn by a child process; each import
    has `timeout` seconds of its own: one that hangs is reported as such, and a new process goes on with the rest."""
    found: dict[str, dict] = {}
    while remaining := [n for n in names if n not in found]:
        found.update(_import_in_child(remaining, timeout))
    return found


def _import_in_child(names: list[str], timeout: float) -> dict[str, dict]:
    # At least one result: the modules this process imported, and the one it hung or died on.
    argv = [sys.executable, _MAIN, "--probe-imports", *names]
    found: dict[str, dict] = {}
    current, other, buffer = None, [], b""
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as proc:
        fd, deadline = proc.stdout.fileno(), time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([fd], [], [], left)[0]:
                continue
            if not (chunk := os.read(fd, 1 << 16)):
                break
            *lines, buffer = (buffer + chunk).split(b"\n")
            for line in (raw.decode(errors="replace") for raw in lines):
                if not (result := results(line)):
                    other.append(line)
                elif result[0].pop("started", False):
                    current, deadline = result[0]["name"], time.monotonic() + timeout  # each import its own time
                else:
                    found[result[0].pop("name")] = result[0]
                    current = None
        else:
            proc.kill()
        code = proc.wait()
    if len(found) < len(names):
        name = current or next(n for n in names if n not in found)
        if left <= 0:
            found[name] = {"error": f"import {name} did not finish within {timeout:g} s (the process was stopped)"}
        else:
            how = f"was killed by signal {-code}" if code < 0 else f"exited {code}"
            tail = _tail("\n".join(other + [buffer.decode(errors="replace")]))
            found[name] = {"error": f"the import process {how}" + (f": {tail}" if tail else "")}
    return found


def probe_plugin(module_names: tuple[str, ...], path: str) -> dict:
    """In this process (a fresh one): import a TensorRT flavour and, unless `path` is "import", load the plugin by
    `path` (load_library or cdll); report the module, its version and what registered, or why it did not import.

    Only TensorRT and torchtrt_swish/plugin.py (without torch) are loaded, as in a user's TensorRT process.
    """
    from .. import plugin
    from ..extras import installed

    out: dict[str, Any] = {"import_errors": []}
    trt = None
    for name in module_names:
        try:
            trt = importlib.import_module(name)
            break
        except Exception as exc:  # noqa: BLE001 - stub or broken wheels raise all sorts of errors at import
            if installed(name):
                out["import_errors"].append(f"{name}: {first_line(exc, typed=True)}")
    if trt is None:
        return out
    out = {"module": trt.__name__, "version": version_of(trt)}
    if path == "import":
        return out
    try:
        if path == "load_library":
            plugin.load_plugin(trt)
        else:
            import ctypes

            ctypes.CDLL(str(plugin.plugin_library_path()))
        identity = (plugin.PLUGIN_NAME, plugin.PLUGIN_VERSION, plugin.PLUGIN_NAMESPACE)
        registry = trt.get_plugin_registry()
        mine = [c for c in registry.all_creators if (c.name, c.plugin_version, c.plugin_namespace) == identity]
        out["count"] = len(mine)
        if len(mine) == 1:
            fields = trt.PluginFieldCollection([])
            out["created"] = [phase for phase in ("BUILD", "RUNTIME")
                              if mine[0].create_plugin("doctor", fields, getattr(trt.TensorRTPhase, phase))]
    except Exception as exc:  # noqa: BLE001 - reported as the row's reason
        out["error"] = first_line(exc, typed=True)
    return out


def probe_argv(path: str, modules: tuple[str, ...]) -> list[str]:
    """The command line of a probe process, for one loading path and a flavour's modules."""
    return [sys.executable, _MAIN, "--probe-plugin", path, *modules]


def main(argv: list[str]) -> int:
    """A probe process (__main__.py run by path): --probe-plugin {import,load_library,cdll} MODULE... or
    --probe-imports MODULE..."""
    if argv[:1] == ["--probe-imports"]:
        probe_imports(tuple(argv[1:]))
    else:
        emit(probe_plugin(tuple(argv[2:]), argv[1]))
    return 0
