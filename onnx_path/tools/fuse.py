"""torchtrt-swish fuse: graph surgery (onnx_path.surgery) that turns the original material's formats, ONNX Swish
and Sigmoid*Mul(+Add) patterns into SwishBias nodes."""
from __future__ import annotations

import json
from pathlib import Path

from torchtrt_swish._output import say

from onnx_path.tools.args import check_paths, write_output
from onnx_path.tools.base import EXIT_OK, Tool, UsageError, progress


class Fuse(Tool):
    """graph surgery: original formats / ONNX Swish / Sigmoid*Mul(+Add) -> SwishBias"""

    name = "fuse"
    epilog = ("examples:\n  torchtrt-swish fuse model.onnx -o model_swish.onnx\n"
              "  torchtrt-swish fuse seed.onnx -o seed_swish.onnx --passes seed --report report.json\n"
              "passes: seed = the original material's export formats (custom::Plugin node with a JSON "
              "info\n  attribute, or its ai.onnx.contrib variant); onnx-swish = ONNX Swish with alpha 1; "
              "sigmoid-mul =\n  x*Sigmoid(x) (+ constant) patterns. A model that already has SwishBias "
              "nodes and nothing\n  left to fuse is written unchanged (exit 0, 'nothing to do').")

    def add_parser_args(self, parser):
        """The command's arguments."""
        parser.add_argument("input", help="ONNX file")
        parser.add_argument("-o", "--output", required=True, type=Path,
                            help="ONNX file to write, not the input (required)")
        parser.add_argument("--passes", default="seed,onnx-swish,sigmoid-mul", help="comma-separated passes")
        parser.add_argument("--no-fold-bias", action="store_true", help="do not fold a following Add of a constant")
        parser.add_argument("--report", type=Path, default=None,
                            help="write the surgery report as JSON (default: none)")
        parser.add_argument("--allow-no-match", action="store_true",
                            help="succeed (and copy the model) when nothing matches")

    def run(self, args) -> int:
        """Run graph surgery on an ONNX file: seed-format conversion, ONNX Swish, Sigmoid/Mul(/Add) fusion."""
        from onnx_path.contract import SWISH_DOMAIN, SWISH_OP
        from onnx_path.model_file import data_file_for, open_model, write_text_atomic
        from onnx_path.surgery import PASSES, run_surgery

        passes = [p.strip() for p in args.passes.split(",") if p.strip()]
        if unknown := [p for p in passes if p not in PASSES]:
            raise UsageError(f"unknown pass(es) {unknown}; choose from {', '.join(PASSES)}")
        check_paths({"input": args.input}, {"-o": args.output, "--report": args.report,
                                             "-o's external data": data_file_for(args.output)})
        # The weights stay in their files (onnx_path.model_file): a model over 2 GiB fuses in about its size.
        with open_model(args.input, scratch=args.output.parent) as model:
            progress(f"running {', '.join(passes)} on {args.input} ...")
            fused, report = run_surgery(model, passes, fold_bias=not args.no_fold_bias)
            already = report.counts_before.get(f"{SWISH_DOMAIN}::{SWISH_OP}", 0)  # as the model runs: per call
            if not report.replaced and not already and not args.allow_no_match:
                say(report.to_text())
                raise UsageError(f"{args.input}: no matching nodes (nothing for passes {', '.join(passes)}); "
                                 "use --allow-no-match to write the model unchanged")
            write_output(args.output, "-o", lambda: fused.save(args.output))
        # Files first, then the text (a reader that goes away must not cost the outputs); the report only once the
        # model it describes exists.
        if args.report:
            text = json.dumps(report.to_dict(), indent=2) + "\n"
            write_output(args.report, "--report", lambda: write_text_atomic(args.report, text))
        say(report.to_text())
        if not report.replaced and already:
            # Idempotent: a fused model fuses to itself (the passes never match a SwishBias node again).
            say(f"nothing to do: {args.input} already has {already} SwishBias node(s) and nothing left to fuse")
        say(f"wrote {args.output}")
        return EXIT_OK
