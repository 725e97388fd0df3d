"""torchtrt-swish doctor: checks this install end to end, one row per check, each PASS, FAIL or SKIPPED with its reason
(in the manner of DeepSpeed's ``ds_report`` and ``python -m torch.utils.collect_env``); the rows: docs/cli.md#doctor.

A route check returns its detail or raises CheckFailed (``torch_tensorrt_route`` here, the ONNX parser's in
``onnx_path.selfcheck``); ``route_main`` runs it in a process of its own, so that a crash is a FAIL row.
"""
from __future__ import annotations

# Only the standard library and this folder at the top: the doctor runs where torchtrt_swish's __init__ raises, and
# its probes in processes without torch (__main__.py); what needs more is imported by the check that needs it.
import argparse
import dataclasses
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from .._output import first_line
from .probe import CheckFailed, emit, import_modules, probe_argv, run_child

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2  # the CLI's: 1 is "a check failed", 2 a usage error
PASS, FAIL, SKIPPED = "PASS", "FAIL", "SKIPPED"
ROUTE_TORCH_TENSORRT, ROUTE_ONNX = "Torch-TensorRT converter", "ONNX parser with the plugin"
# csrc/trt_plugin/exports.cpp: set (non-empty, not "0"), the library does not register itself when dlopen'ed.
NO_AUTO_REGISTER_ENV = "TORCHTRT_SWISH_NO_AUTO_REGISTER"
CHILD_TIMEOUT_S = 900  # an engine build with a cold CUDA context and Torch-TensorRT's import takes minutes at worst
IMPORT_TIMEOUT_S = 60  # importing TensorRT or an extra takes seconds; one that hangs must not hold the doctor for long
FLAVOUR_NAMES = {"tensorrt": "full", "tensorrt_lean": "lean", "tensorrt_dispatch": "dispatch"}
LOADING_PATHS = {"load_library": "registry load_library", "cdll": "ctypes.CDLL after import"}
#: torchtrt_swish/__init__.py's error where it raised (__main__.py, run by path, sets it); None: the package imported.
IMPORT_ERROR: str | None = None


@dataclasses.dataclass
class Row:
    """One check: its section and name, PASS / FAIL / SKIPPED, and the reason (versions, errors, what is missing)."""

    section: str
    check: str
    status: str
    detail: str


# ------------------------------------------------------------------------------------------- TensorRT flavours


def tensorrt_flavours() -> dict[str, tuple[str, ...]]:
    """Flavour -> its Python modules in order of preference: the frontend ``X`` and the bindings ``X_bindings``.

    Derived from torchtrt_swish.plugin.TENSORRT_MODULES (the modules the plugin loads into): NVIDIA's frontend
    package ``X`` re-exports ``X_bindings`` (NVIDIA/TensorRT python/packaging/frontend_sdist), one library, one
    plugin registry, so the two are one flavour.
    """
    from ..plugin import TENSORRT_MODULES

    out: dict[str, tuple[str, ...]] = {}
    for module in TENSORRT_MODULES:
        base = module.removesuffix("_bindings")
        out.setdefault(FLAVOUR_NAMES.get(base, base), (base, f"{base}_bindings"))
    return out


def _plugin_row(flavour: str, path: str, result: dict) -> Row:
    check = f"{flavour}: {LOADING_PATHS[path]}"
    where = f"TensorRT {result['version']} ({result['module']})"
    if "error" in result:
        return Row("plugin", check, FAIL, f"{where}: {result['error']}")
    count = result.get("count", 0)
    if count != 1:
        if path == "cdll" and count == 0 and os.environ.get(NO_AUTO_REGISTER_ENV, "") not in ("", "0"):
            return Row("plugin", check, SKIPPED, f"{NO_AUTO_REGISTER_ENV} is set: the library does not register "
                                                 "itself when dlopen'ed")
        return Row("plugin", check, FAIL, f"{where}: {count} SwishBias creators registered, expected exactly 1")
    created = result.get("created", [])
    if created != ["BUILD", "RUNTIME"]:
        return Row("plugin", check, FAIL, f"{where}: 1 creator, but create_plugin returned None in the "
                                          f"{' and '.join(p for p in ('BUILD', 'RUNTIME') if p not in created)} phase")
    return Row("plugin", check, PASS, f"{where}: 1 SwishBias creator; create_plugin works in the BUILD and RUNTIME "
                                      "phases")


def _probe(path: str, modules: tuple[str, ...]) -> dict:
    # A fresh process with TensorRT and the plugin but no torch, as a user's TensorRT process (see probe.py).
    waited_for = f"import {' or '.join(modules)}" + ("" if path == "import" else f" and {LOADING_PATHS[path]}")
    try:
        return run_child(probe_argv(path, modules), timeout=IMPORT_TIMEOUT_S, waited_for=waited_for)
    except CheckFailed as exc:
        return {"crash": str(exc)}


def tensorrt_rows(library: Path | None) -> tuple[list[Row], list[Row], dict[str, str]]:
    """(environment rows, plugin rows, {flavour: module} of the flavours that import) for every TensorRT flavour."""
    from ..extras import installed

    env_rows, plugin_rows, importable = [], [], {}
    for flavour, modules in tensorrt_flavours().items():
        check = f"TensorRT {flavour}"
        if not any(installed(m) for m in modules):
            env_rows.append(Row("environment", check, SKIPPED, f"not installed (no module {' or '.join(modules)})"))
            plugin_rows.extend(Row("plugin", f"{flavour}: {how}", SKIPPED, f"TensorRT {flavour} is not installed")
                               for how in LOADING_PATHS.values())
            continue
        imported = _probe("import", modules)
        if "module" in imported:
            importable[flavour] = imported["module"]
            env_rows.append(Row("environment", check, PASS, f"{imported['module']} {imported['version']}"))
        else:
            why = imported.get("crash") or "; ".join(imported["import_errors"])
            env_rows.append(Row("environment", check, FAIL, f"installed, but does not import: {why}"))
        for path, how in LOADING_PATHS.items():
            name = f"{flavour}: {how}"
            if flavour not in importable:
                plugin_rows.append(Row("plugin", name, SKIPPED, f"TensorRT {flavour} does not import"))
            elif library is None:
                plugin_rows.append(Row("plugin", name, FAIL, "the plugin library is not built"))
            elif "crash" in (result := _probe(path, modules)):
                plugin_rows.append(Row("plugin", name, FAIL, result["crash"]))
            else:
                plugin_rows.append(_plugin_row(flavour, path, result))
    return env_rows, plugin_rows, importable


# ------------------------------------------------------------------------------------------------ environment


def module_rows(gpu: bool) -> tuple[list[Row], dict[str, bool]]:
    """(rows, {name: imports}) for Torch-TensorRT and the extras' modules: version, not installed (naming the extra),
    or the error; all imported by one child process, each import within IMPORT_TIMEOUT_S."""
    from ..extras import EXTRAS, POLYGRAPHY_MIN, install_hint, installed, older_than

    extras = {"torch_tensorrt": None, **{name: extra for extra, names in EXTRAS.items() for name in names}}
    present = tuple(name for name in extras if installed(name))
    imported = import_modules(present, IMPORT_TIMEOUT_S) if present else {}
    rows, found = [], {}
    for name, extra in extras.items():
        result = imported.get(name)
        found[name] = result is not None and "version" in result
        if result is None:
            rows.append(Row("environment", name, SKIPPED, "not installed" + (f": {install_hint(extra)}" if extra
                                                                            else "")))
        elif "error" in result:
            detail = f"installed, but does not import: {result['error']}"
            if name == "torch_tensorrt" and not gpu:
                rows.append(Row("environment", name, SKIPPED, f"installed; needs a GPU to import ({detail})"))
            else:
                rows.append(Row("environment", name, FAIL, detail))
        elif name == "polygraphy" and older_than(result["version"], POLYGRAPHY_MIN):
            rows.append(Row("environment", name, FAIL, f"{result['version']} is older than the {POLYGRAPHY_MIN} this "
                                                       f"package needs: pip install '{name}>={POLYGRAPHY_MIN}'"))
        else:
            rows.append(Row("environment", name, PASS, result["version"]))
    return rows, found


def _package_row() -> tuple[Row, bool]:
    # The doctor exists for broken installs: the package's own import error, which names the fix, is the row.
    import importlib.metadata

    try:
        own = importlib.metadata.version("torchtrt_swish")
    except importlib.metadata.PackageNotFoundError:
        own = "not installed (a source tree)"
    if IMPORT_ERROR is not None:
        return Row("environment", "torchtrt_swish", FAIL, f"{own}; does not import: {IMPORT_ERROR}"), False
    import torchtrt_swish

    return Row("environment", "torchtrt_swish", PASS, f"{own}; extension {Path(torchtrt_swish._C.__file__).name} "
                                                      f"loaded from {Path(torchtrt_swish.__file__).parent}"), True


def environment_rows() -> tuple[list[Row], list[Row], dict[str, Any]]:
    """(Python, torch, this package and the GPU; Torch-TensorRT and the extras' modules; what later checks need)."""
    rows = [Row("environment", "python", PASS, f"{platform.python_version()} ({sys.executable})")]
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - a broken torch is a row like any other
        torch = None
        rows.append(Row("environment", "torch", FAIL, f"does not import: {first_line(exc, typed=True)}"))
    else:
        rows.append(Row("environment", "torch", PASS,
                        f"{torch.__version__} (CUDA {torch.version.cuda or 'none: a CPU build'})"))
    package, loads = _package_row()
    rows.append(package)
    gpu = torch is not None and torch.cuda.is_available()
    if gpu:
        index = torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        rows.append(Row("environment", "CUDA GPU", PASS, f"{torch.cuda.device_count()} visible; cuda:{index} is "
                                                         f"{torch.cuda.get_device_name(index)} (sm_{major}{minor})"))
    else:
        why = ("torch does not import" if torch is None else "torch is a CPU build" if torch.version.cuda is None
               else "torch.cuda.is_available() is False")
        rows.append(Row("environment", "CUDA GPU", SKIPPED, f"no CUDA GPU visible ({why})"))
    extras, found = module_rows(gpu)
    return rows, extras, {**found, "gpu": gpu, "package": loads}


# --------------------------------------------------------------------------------------------------------- op


def compare(got: Any, expected: Any, dtype_name: str) -> float:
    """Max abs error of `got` against `expected`; CheckFailed at any NaN or unmatched infinity (the rule of `check`,
    torchtrt_swish.dtypes.unmatched_positions) or past the dtype's tolerance, naming the worst element."""
    import torch

    from ..dtypes import tolerance, unmatched_positions

    atol, rtol = tolerance(dtype_name)
    got, expected = got.detach().double().cpu(), expected.detach().double().cpu()
    if got.shape != expected.shape:
        raise CheckFailed(f"shape {tuple(got.shape)}, expected {tuple(expected.shape)}")
    unmatched = torch.from_numpy(unmatched_positions(got.numpy(), expected.numpy()))
    if unmatched.any():
        first = tuple(int(i) for i in unmatched.nonzero()[0])
        raise CheckFailed(f"{int(unmatched.sum())} of {got.numel()} elements are NaN or an infinity the other side "
                          f"lacks (NaN never passes); first at index {first}: got {got[first].item()}, expected "
                          f"{expected[first].item()}")
    try:
        torch.testing.assert_close(got, expected, atol=atol, rtol=rtol, equal_nan=False)
    except AssertionError as exc:
        raise CheckFailed(" ".join(str(exc).split())) from None
    finite = torch.isfinite(expected)
    return float((got[finite] - expected[finite]).abs().max()) if finite.any() else 0.0


def op_parity(device: str, swish: Any = None) -> str:
    """The op against F.silu(x) + b in float64 for every dtype and bias layout on `device`; CheckFailed naming the
    first case that fails, else a summary with the largest error."""
    import torch
    import torch.nn.functional as F

    from ..dtypes import DTYPES

    if swish is None:
        from ..ops import swish
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 4, 5, generator=gen, dtype=torch.float64) * 4
    x.view(-1)[:6] = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), -30.0])
    biases = {"scalar": (1,), "per-channel [C,1,1]": (3, 1, 1), "per-channel last dim": (5,), "full": (2, 3, 4, 5)}
    worst = 0.0
    for name, dtype in DTYPES.items():
        for layout, shape in biases.items():
            xd = x.to(dtype).to(device)
            bd = torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype).to(device)
            expected = F.silu(xd.double().cpu()) + bd.double().cpu()
            try:
                got = swish(xd, bd)
                if got.dtype != dtype or got.device != xd.device:
                    raise CheckFailed(f"returned {got.dtype} on {got.device}")
                got = got.detach().double().cpu()
                if got.shape != expected.shape:
                    raise CheckFailed(f"shape {tuple(got.shape)}, expected {tuple(expected.shape)}")
                # NaN in must be NaN out (the contract); compare() judges the rest, where NaN never passes.
                if not got[(nan := expected.isnan())].isnan().all():
                    raise CheckFailed(f"NaN did not propagate: {int((~got[nan].isnan()).sum())} of {int(nan.sum())} "
                                      "NaN positions hold numbers")
                worst = max(worst, compare(got[~nan], expected[~nan], name))
            except (CheckFailed, RuntimeError) as exc:
                raise CheckFailed(f"{name}, {layout} bias: {exc}") from None
    return (f"{len(DTYPES)} dtypes x {len(biases)} bias layouts, with 0, inf, -inf, NaN: "
            f"max abs error {worst:.1e} (within torchtrt_swish.dtypes.TOLERANCES)")


def op_rows(gpu: bool, package: bool = True) -> list[Row]:
    """The CPU and the CUDA kernel (SKIPPED without a GPU, or when the package does not import) on the parity check."""
    rows = []
    for device, name in (("cpu", "CPU kernel"), ("cuda", "CUDA kernel")):
        if not package:
            rows.append(Row("op", name, SKIPPED, "torchtrt_swish does not import (its row says why)"))
            continue
        if device == "cuda" and not gpu:
            rows.append(Row("op", name, SKIPPED, "no CUDA GPU visible"))
            continue
        try:
            rows.append(Row("op", name, PASS, op_parity(device)))
        except CheckFailed as exc:
            rows.append(Row("op", name, FAIL, str(exc)))
        if device == "cuda" and rows[-1].status == PASS:
            rows.append(plan_row())
    return rows


def plan_row(budget_s: float = 5.0) -> Row:
    """The CUDA kernels' plans for this GPU: forward + backward at the backward planner's switch points for its SM
    count (switch_points.py), so a GPU unlike ours verifies the plans it gets."""
    from .switch_points import check_switch_points

    try:
        sms, checked, failures = check_switch_points("cuda", budget_s=budget_s)
    except Exception as exc:  # noqa: BLE001 - a CUDA error, no kernel for this GPU, out of memory: the row says it
        return Row("op", "CUDA plans", FAIL, f"the switch-point check failed: {first_line(exc, typed=True)}")
    if failures:
        return Row("op", "CUDA plans", FAIL, f"{len(failures)} of {checked} switch-point shapes wrong on this GPU "
                                             f"({sms} SMs), first: {failures[0]}")
    return Row("op", "CUDA plans", PASS, f"{checked} shapes at the fused backward's switch points for this GPU "
                                         f"({sms} SMs): forward and backward against float64, dbias exact")


# ------------------------------------------------------------------------------------------------- engines


def tiny_case() -> tuple[Any, Any, Any]:
    """(model, x, bias): an EfficientSwish with a distinct bias per channel and a small random input, on the CPU."""
    import torch

    from ..modules import EfficientSwish

    model = EfficientSwish(bias_shape=(4, 1, 1)).eval()
    with torch.no_grad():
        model.bias.copy_(torch.linspace(-1.0, 1.0, 4).view(4, 1, 1))
    x = torch.randn(2, 4, 3, 5, generator=torch.Generator().manual_seed(0)) * 3
    return model, x, model.bias.detach().clone()


def route_main(check: str, route: Any) -> int:
    """A route check's process: run `route` and emit its row (probe.emit); 0, since the row carries the verdict (an
    exit other than 0 tells the doctor that the process itself broke)."""
    try:
        row = Row("engine", check, PASS, route())
    except Exception as exc:  # noqa: BLE001 - every failure is the row's reason
        row = Row("engine", check, FAIL, " ".join(str(exc).split()) if isinstance(exc, CheckFailed)
                  else first_line(exc, typed=True))
    emit(dataclasses.asdict(row))
    return 0


def swish_nodes_left(module: Any) -> int:
    """How many torchtrt_swish.swish calls a (compiled) module's FX graphs still run in PyTorch."""
    import torch

    target = torch.ops.torchtrt_swish.swish.default
    return sum(1 for sub in module.modules() if isinstance(sub, torch.fx.GraphModule)
               for node in sub.graph.nodes if node.op == "call_function" and node.target is target)


def _output(result: Any) -> Any:
    return result[0] if isinstance(result, (tuple, list)) else result


def torch_tensorrt_route(device: str = "cuda") -> str:
    """Torch-TensorRT: compile (the converter must take the op), save, load, run; each output against the op."""
    import tempfile

    from .. import compile as trt_compile
    from ..ops import swish

    model, x, bias = tiny_case()
    x = x.to(device)
    expected = swish(x, bias.to(device))
    # require_full_compilation: Torch-TensorRT raises instead of leaving the op to PyTorch (AOT only; the torch.compile
    # backend ignores it), and the graph is still searched for swish calls left behind.
    compiled = trt_compile.compile(model, [x], device=device, require_full_compilation=True)
    if (left := swish_nodes_left(compiled)):
        raise CheckFailed(f"{left} swish node(s) stayed in PyTorch: the converter did not take them")
    compiled_error = compare(_output(compiled(x)), expected, "float32")
    with tempfile.TemporaryDirectory(prefix="torchtrt_swish_doctor_") as tmp:
        path = Path(tmp) / "tiny.ep"
        trt_compile.save(compiled, path)
        loaded = trt_compile.load(path)
        if (left := swish_nodes_left(loaded)):
            raise CheckFailed(f"the loaded module runs {left} swish node(s) in PyTorch")
        loaded_error = compare(_output(loaded(x)), expected, "float32")
    return (f"compiled (no swish left in PyTorch), saved, loaded and run; max abs error vs the op "
            f"{compiled_error:.1e} compiled, {loaded_error:.1e} loaded")


def engine_rows(found: dict[str, Any], importable: dict[str, str], library: Path | None) -> list[Row]:
    """The two engine routes, each in its own process, where a full TensorRT, a GPU and the plugin library exist."""
    from ..extras import install_hint

    needs = []
    if "full" not in importable:
        needs.append("a full TensorRT (the tensorrt package, with its builder and ONNX parser)")
    if not found["gpu"]:
        needs.append("a CUDA GPU")
    if library is None:
        needs.append("the plugin library")
    if not found.get("package", True):
        needs.append("torchtrt_swish to import")
    # Each route check is a module run with -m that prints its row (route_main): this one, and onnx_path.selfcheck.
    routes = {
        ROUTE_TORCH_TENSORRT: ([] if found.get("torch_tensorrt") else ["torch_tensorrt"],
                               [sys.executable, "-m", "torchtrt_swish.doctor", "--route", "torch_tensorrt"]),
        ROUTE_ONNX: ([m for m in ("onnx", "polygraphy") if not found.get(m)],
                     [sys.executable, "-m", "onnx_path.selfcheck"]),
    }
    rows = []
    for check, (missing, argv) in routes.items():
        hint = "pip install torch-tensorrt" if missing == ["torch_tensorrt"] else install_hint("onnx")
        reasons = needs + ([f"{' and '.join(missing)} ({hint})"] if missing else [])
        if reasons:
            rows.append(Row("engine", check, SKIPPED, "needs " + ", ".join(reasons)))
            continue
        try:
            rows.append(Row(**run_child(argv, timeout=CHILD_TIMEOUT_S, waited_for=f"the {check} check",
                                        env=_child_env())))
        except CheckFailed as exc:
            rows.append(Row("engine", check, FAIL, str(exc)))
    return rows


def _child_env() -> dict[str, str]:
    # The route processes import this package by name: where it was found here (a source tree that was not
    # installed, say), they must find it too; appended, so that anything the user put first stays first.
    env, above = dict(os.environ), str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), above) if p)
    return env


# ----------------------------------------------------------------------------------------------------- report


def collect() -> list[Row]:
    """Every row, in the order of the table."""
    from ..plugin import plugin_library_path

    machine, modules, found = environment_rows()
    try:
        library = plugin_library_path()
    except FileNotFoundError as exc:
        library, missing = None, " ".join(str(exc).split())
    trt_env, plugin, importable = tensorrt_rows(library)
    if library is not None:
        library_row = Row("plugin", "library", PASS, str(library))
    else:
        library_row = Row("plugin", "library", FAIL if importable else SKIPPED,
                          missing if importable else f"no TensorRT imports, so it is not needed here ({missing})")
    return machine + trt_env + modules + op_rows(found["gpu"], found["package"]) + [library_row, *plugin] + engine_rows(
        found, importable, library)


def counts(rows: list[Row]) -> dict[str, int]:
    """How many rows have each status, PASS, FAIL and SKIPPED in that order."""
    return {s: sum(r.status == s for r in rows) for s in (PASS, FAIL, SKIPPED)}


def table(rows: list[Row]) -> str:
    """The rows as an aligned text table with a one-line verdict."""
    widths = [max(len(getattr(r, f)) for r in rows) for f in ("section", "check", "status")]
    lines = [f"{r.section:<{widths[0]}}  {r.check:<{widths[1]}}  {r.status:<{widths[2]}}  {r.detail}" for r in rows]
    verdict = ", ".join(f"{n} {s}" for s, n in counts(rows).items())
    return "\n".join(lines + [f"torchtrt-swish doctor: {verdict}"])


def report(rows: list[Row]) -> dict:
    """The rows as the JSON object of --json."""
    return {"rows": [dataclasses.asdict(r) for r in rows], "counts": counts(rows)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The doctor's command-line options, on `parser`."""
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH",
                        help="print the rows as JSON instead of the table, or with PATH write them there "
                             "(default: the table only)")


def run(args: argparse.Namespace) -> int:
    """Run every check; write --json PATH, then print the table (or the JSON); 1 when any row failed, else 0."""
    from .._output import OutputPathError, output_problem, say, write_text

    target = None if args.json in (None, "-") else Path(args.json)
    if target is not None and (why := output_problem(target)) is not None:  # before minutes of checks, not after
        return usage_error(f"--json {target} cannot be written: {why}")
    rows = collect()
    text = json.dumps(report(rows), indent=2) + "\n"
    if target is None and args.json == "-":
        say(text, end="")
        return _exit_status(rows)
    if target is not None:
        # The file first: a reader of the table that goes away (`| head -1`) must not cost the report.
        try:
            write_text(target, text)
        except (OSError, OutputPathError) as exc:
            return usage_error(f"--json {target} could not be written: {getattr(exc, 'strerror', None) or exc}")
    say(table(rows))
    if target is not None:
        say(f"wrote {target}")
    return _exit_status(rows)


def _exit_status(rows: list[Row]) -> int:
    return EXIT_FAILED if any(r.status == FAIL for r in rows) else EXIT_OK


def usage_error(message: str) -> int:
    """Print 'torchtrt-swish doctor: error: MESSAGE' on stderr (one line); returns the usage exit code, 2."""
    print(f"torchtrt-swish doctor: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    """``python -m torchtrt_swish.doctor``: the same as ``torchtrt-swish doctor``."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--route"]:
        return route_main(ROUTE_TORCH_TENSORRT, torch_tensorrt_route)
    parser = argparse.ArgumentParser(prog="python -m torchtrt_swish.doctor", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))
