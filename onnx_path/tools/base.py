"""What every torchtrt-swish tool is made of: the Tool shape (a name, `add_parser_args`, `run`), the exit codes, the
one-line usage error and the help layout.

Only the standard library: onnx_path.cli imports this where torchtrt_swish may not load.
"""
from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

EXIT_OK, EXIT_PARITY_FAIL, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad arguments or inputs: reported on stderr, exit code 2."""


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: raised where the command was, so that its cleanup runs as for Ctrl-C."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


# What kill, systemd, Kubernetes and CI timeouts send, and a closed terminal; SIGINT already raises KeyboardInterrupt.
_TERMINATIONS = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def terminations() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise Terminated (once; a second one is ignored while cleaning up)."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return

    def terminate(signum, frame):
        for sig in _TERMINATIONS:
            signal.signal(sig, signal.SIG_IGN)
        raise Terminated(signum)

    previous = {sig: signal.signal(sig, terminate) for sig in _TERMINATIONS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Examples kept as written, every option's default shown (a help text that explains its default keeps it)."""

    def _get_help_string(self, action):
        text = action.help or ""
        return text if "(default:" in text or action.required else super()._get_help_string(action)


def progress(msg: str) -> None:
    """A progress line on stderr (stdout holds the results)."""
    print(f"[torchtrt-swish] {msg}", file=sys.stderr, flush=True)


class Tool:
    """A sub-command: `name` on the command line, the docstring its help, `epilog` its examples."""

    name = ""
    epilog = None
    base_install = False  # True: runs with the base install alone (no check for the [onnx] extra first)

    def setup_parser(self, subparsers) -> argparse.ArgumentParser:
        """Add this tool's sub-parser with its arguments; parsed args carry the tool as `args.tool`."""
        summary = " ".join(self.__doc__.split())
        parser = subparsers.add_parser(self.name, help=summary, description=summary, epilog=self.epilog,
                                       formatter_class=HelpFormatter)
        self.add_parser_args(parser)
        parser.set_defaults(tool=self)
        return parser

    def add_parser_args(self, parser: argparse.ArgumentParser) -> None:
        """Declare this tool's arguments on `parser`."""
        raise NotImplementedError

    def run(self, args: argparse.Namespace) -> int:
        """Carry out the command; returns the exit code (raise UsageError for bad input)."""
        raise NotImplementedError
