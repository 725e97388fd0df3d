"""torchtrt-swish: the ONNX route from the command line — export, fuse, build-engine, check — and the doctor.

The entry point and the registry of the tools, each a module of onnx_path.tools; exit codes and outputs: docs/cli.md.
"""
from __future__ import annotations

# Only the standard library at the top (and onnx_path.tools.base, which is): this module must run where torchtrt_swish
# cannot load, to say so in one line (and to run the doctor); the tools import both packages when the parser is built.
import argparse
import importlib
import importlib.util
import os
import re
import subprocess
import sys

from onnx_path.tools.base import (
    EXIT_OK,
    EXIT_PARITY_FAIL,
    EXIT_USAGE,
    HelpFormatter,
    Terminated,
    Tool,
    UsageError,
    terminations,
)

_MAIN_EPILOG = """\
examples:
  torchtrt-swish export -o seed_net.onnx                      # seed Net, TorchScript exporter, opset 17
  torchtrt-swish export --model torchvision:efficientnet_b0 -o effnet.onnx
  torchtrt-swish fuse effnet.onnx -o effnet_swish.onnx --report fuse.json
  torchtrt-swish check effnet_swish.onnx --torch-model torchvision:efficientnet_b0 --json parity.json
  torchtrt-swish build-engine seed_net.onnx -o seed_net.engine --precision fp16

exit codes: 0 ok/parity passed, 1 parity failed, 2 usage or input error
"""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (argparse's own print the usage block first)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # `--atol -1e-3` is a value to refuse by its range (argparse's own pattern misses exponents, and took it for
        # an option: "expected one argument"); no option of this parser starts with "-" and a digit.
        self._negative_number_matcher = re.compile(r"-\.?\d")

    def error(self, message: str):
        """Print 'PROG: error: MESSAGE (see PROG --help)' and exit 2."""
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parse(argv: list[str] | None) -> argparse.Namespace:
    """build_parser().parse_args(argv); --help or --version into a closed stdout exits quietly."""
    from torchtrt_swish._output import flush_stdout

    try:
        return build_parser().parse_args(argv)
    except SystemExit:
        flush_stdout()
        raise


def _open_closed_std_streams() -> None:
    """Point stdout / stderr at /dev/null where they were closed at start (`torchtrt-swish ... >&-`, `2>&-`)."""
    # Python sets sys.stdout / sys.stderr to None then, which argparse's exit and every flush trip over, and the free
    # descriptor would go to the next file opened, where a library's own writes to fd 1 or 2 would then land.
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        try:
            os.fstat(fd)
            taken = True  # reused since the start: it belongs to whoever opened it
        except OSError:
            taken = False
        null = os.open(os.devnull, os.O_WRONLY)
        if not taken and null != fd:
            os.dup2(null, fd)
            os.close(null)
            null = fd
        setattr(sys, name, open(null, "w", closefd=taken, errors="backslashreplace"))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torchtrt_swish")
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown (not installed)"


# ------------------------------------------------------------------------------------------------------ tools

#: The tools, in the order of --help: (module of onnx_path.tools, its Tool class). Their modules are imported when the
#: parser is built, not with this one: they import torchtrt_swish, which may not load here.
TOOLS = (("export", "Export"), ("fuse", "Fuse"), ("build_engine", "BuildEngine"), ("check", "Check"),
         ("doctor", "Doctor"))


def tools() -> list[Tool]:
    """One instance of each tool of TOOLS, in their order."""
    return [getattr(importlib.import_module(f"onnx_path.tools.{module}"), cls)() for module, cls in TOOLS]


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser with one subcommand per tool of TOOLS."""
    parser = _Parser(prog="torchtrt-swish", description=__doc__.split("\n")[0], epilog=_MAIN_EPILOG,
                     formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for tool in tools():
        tool.setup_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit code (128 + the signal's number after SIGTERM or SIGHUP, once the
    command has removed what it was writing)."""
    _open_closed_std_streams()
    try:
        with terminations():
            return _main(argv)
    except Terminated as exc:
        print(f"torchtrt-swish: stopped by {exc}", file=sys.stderr)
        return 128 + exc.signum


def _main(argv: list[str] | None) -> int:
    if (broken := package_error()) is not None:
        return _without_the_package(sys.argv[1:] if argv is None else list(argv), broken)
    from torchtrt_swish.extras import install_hint, missing_extra_message

    args = _parse(argv)
    if args.tool.base_install:
        return args.tool.run(args)
    try:
        from onnx_path.model_file import OnnxInputError
        from onnx_path.engine import EngineBuildError, PluginNotFoundError, TensorRTUnavailable
        from onnx_path.export import ExportError
        from onnx_path.parity import ParityInputError
        from onnx_path.reference import PluginIdentityError
        from torchtrt_swish.plugin import PluginLoadError
    except ImportError as exc:  # the [onnx] extra is optional for the package, required for these sub-commands
        why = missing_extra_message(exc) or f"needs the ONNX tools ({exc}): {install_hint('onnx')}"
        print(f"torchtrt-swish {args.command}: error: {args.command} {why}", file=sys.stderr)
        return EXIT_USAGE

    try:
        return args.tool.run(args)
    except (UsageError, OnnxInputError, ExportError, EngineBuildError, PluginNotFoundError, TensorRTUnavailable,
            PluginIdentityError, ParityInputError, PluginLoadError) as exc:
        message = " ".join(str(exc).split())  # one line, whatever the exception's text looked like
        print(f"torchtrt-swish {args.command}: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    except ImportError as exc:  # a module of an extra imported on the way, e.g. torchvision for torchvision: models
        if (why := missing_extra_message(exc)) is None:
            raise
        print(f"torchtrt-swish {args.command}: error: {args.command} {why}", file=sys.stderr)
        return EXIT_USAGE


# --------------------------------------------------------------------------------------- a package that cannot load


def package_error() -> str | None:
    """torchtrt_swish's import error in one line (torch of another minor version, _C missing or broken), or None."""
    try:
        import torchtrt_swish  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - a broken torch raises OSError as well as ImportError
        return " ".join(str(exc).split()) or type(exc).__name__
    return None


def _without_the_package(argv: list[str], error: str) -> int:
    """Where torchtrt_swish cannot load: `doctor` runs its file by path (torchtrt_swish/doctor/__main__.py), which
    reports the error as a FAIL row; anything else is one line."""
    command = next((a for a in argv if not a.startswith("-")), None)
    spec = importlib.util.find_spec("torchtrt_swish") if command == "doctor" else None
    if spec is None or not spec.submodule_search_locations:
        print(f"torchtrt-swish: error: {error} (`torchtrt-swish doctor` checks the rest of this install)",
              file=sys.stderr)
        return EXIT_USAGE
    doctor = os.path.join(spec.submodule_search_locations[0], "doctor", "__main__.py")
    argv = [sys.executable, doctor, "--import-error", error, *argv[argv.index("doctor") + 1:]]
    return subprocess.run(argv).returncode


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
