"""torchtrt-swish doctor: the install check of torchtrt_swish/doctor/ as a sub-command (the CLI's front end of it;
where torchtrt_swish cannot load, onnx_path.cli runs the doctor's file by path instead)."""
from __future__ import annotations

from onnx_path.tools.base import Tool


class Doctor(Tool):
    """check this install: environment, the op's kernels, the plugin in each TensorRT, a tiny engine per route"""

    name = "doctor"
    epilog = ("examples:\n  torchtrt-swish doctor\n"
              "  torchtrt-swish doctor --json doctor.json   # the table, and the rows as JSON for a bug report\n"
              "  python -m torchtrt_swish.doctor --json     # the same checks, JSON on stdout\n"
              "every row is PASS, FAIL or SKIPPED with its reason; exit code 1 when any row fails")
    base_install = True  # it reports the missing extras itself

    def add_parser_args(self, parser):
        """The command's arguments (torchtrt_swish.doctor.add_arguments)."""
        from torchtrt_swish.doctor import add_arguments

        add_arguments(parser)

    def run(self, args) -> int:
        """Run every check and print the table (torchtrt_swish.doctor.run)."""
        from torchtrt_swish.doctor import run

        return run(args)
