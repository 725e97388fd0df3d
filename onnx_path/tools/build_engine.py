"""torchtrt-swish build-engine: an ONNX file to a TensorRT engine with the SwishBias plugin loaded
(onnx_path.engine, needs TensorRT)."""
from __future__ import annotations

from pathlib import Path

from torchtrt_swish._output import say

from onnx_path.tools.args import check_paths, existing_file, profile_shapes, workspace_arg, write_output
from onnx_path.tools.base import EXIT_OK, Tool, progress


class BuildEngine(Tool):
    """ONNX -> TensorRT engine with the SwishBias plugin (needs TensorRT)"""

    name = "build-engine"
    epilog = ("examples:\n  torchtrt-swish build-engine seed_net.onnx -o seed.engine\n"
              "  torchtrt-swish build-engine net.onnx -o net.engine --precision fp16 \\\n"
              "      --min-shapes x:1x3x64x64 --opt-shapes x:8x3x224x224 --max-shapes x:32x3x320x320")

    def add_parser_args(self, parser):
        """The command's arguments."""
        parser.add_argument("input", help="ONNX file")
        parser.add_argument("-o", "--output", required=True, type=Path, help="engine file to write (required)")
        parser.add_argument("--precision", choices=("fp32", "fp16", "bf16"), default="fp32", help="builder precision")
        for which in ("min", "opt", "max"):
            parser.add_argument(f"--{which}-shapes", default=None, help=f"{which} profile shapes, e.g. x:1x3x224x224 "
                                                                         "(default: batch 1/8/32 on axis 0)")
        parser.add_argument("--plugin", type=Path, default=None,
                            help="plugin library (default: the one in the package)")
        parser.add_argument("--workspace-gib", type=workspace_arg, default=None,
                            help="builder workspace limit in GiB, 0.0009765625 (1 MiB) to 1048576 "
                                 "(default: TensorRT's)")
        parser.add_argument("--verbose", action="store_true", help="TensorRT verbose log")

    def run(self, args) -> int:
        """Build a TensorRT engine from an ONNX file with the SwishBias plugin loaded."""
        from onnx_path.model_file import atomic_output, load_model
        from onnx_path.contract import check_swish_nodes
        from onnx_path.engine import build_engine

        path = existing_file(args.input)
        check_paths({"input": path, "--plugin": args.plugin}, {"-o": args.output})
        check_swish_nodes(load_model(path, load_external_data=False), str(path))  # the plugin's rejection, said before TensorRT is involved
        shapes = {k: profile_shapes(f"--{k}-shapes", getattr(args, f"{k}_shapes")) for k in ("min", "opt", "max")}
        progress(f"building a {args.precision} TensorRT engine from {path} ...")

        def build():
            with atomic_output(args.output) as tmp:
                build_engine(path, tmp, precision=args.precision, min_shapes=shapes["min"], opt_shapes=shapes["opt"],
                             max_shapes=shapes["max"], plugin_library=args.plugin, workspace_gib=args.workspace_gib,
                             verbose=args.verbose)

        write_output(args.output, "-o", build)
        say(f"wrote {args.output}")
        return EXIT_OK
