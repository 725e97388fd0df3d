"""torchtrt-swish export: a torch model (the seed Net, or a torchvision model with random weights) to ONNX, with
one SwishBias node per torchtrt_swish op (onnx_path.export)."""
from __future__ import annotations

import time
from pathlib import Path

from torchtrt_swish._output import say

from onnx_path.tools.args import (
    MAX_SEED,
    check_paths,
    dtype_arg,
    model_from_spec,
    opset_arg,
    seed_arg,
    shape_arg,
    write_output,
)
from onnx_path.tools.base import EXIT_OK, Tool, progress


class Export(Tool):
    """export a model to ONNX (SwishBias nodes for torchtrt_swish ops)"""

    name = "export"
    epilog = ("examples:\n  torchtrt-swish export -o seed_net.onnx\n"
              "  torchtrt-swish export --exporter dynamo --dynamic-hw -o seed_net_dyn.onnx\n"
              "  torchtrt-swish export --model torchvision:efficientnet_b0 --input-shape 1x3x64x64 "
              "-o effnet.onnx")

    def add_parser_args(self, parser):
        """The command's arguments."""
        parser.add_argument("--model", default="seed-net", help="seed-net or torchvision:<name> (random weights)")
        parser.add_argument("-o", "--output", required=True, type=Path,
                            help="ONNX file to write; its folder must exist (required)")
        parser.add_argument("--exporter", choices=("torchscript", "dynamo"), default="torchscript",
                            help="torch.onnx exporter")
        parser.add_argument("--opset", type=opset_arg, default=None,
                            help="ONNX opset, >= 11 (dynamo: >= 18) (default: 17 for torchscript, torch's for "
                                 "dynamo, 22 for bfloat16, where Conv first takes bfloat16)")
        parser.add_argument("--dtype", type=dtype_arg, default=None,
                            help="float32, float16 or bfloat16 (default: the model's, float32)")
        parser.add_argument("--input-shape", type=shape_arg, default=None,
                            help="example input shape NxCxHxW, e.g. 1x3x64x64 (default: 1x1x5x5 for seed-net, "
                                 "1x3x64x64 for torchvision models)")
        parser.add_argument("--static", action="store_true", help="no dynamic batch axis")
        parser.add_argument("--dynamic-hw", action="store_true", help="also make height/width of 4-D inputs dynamic")
        parser.add_argument("--seed", type=seed_arg, default=0,
                            help=f"seed for random weights/inputs, 0 to {MAX_SEED}")

    def run(self, args) -> int:
        """Export a torch model (seed Net or a torchvision model with random weights) to ONNX."""
        from onnx_path.functions import op_counts
        from onnx_path.model_file import save_model
        from onnx_path.export import export_onnx

        check_paths({}, {"-o": args.output})
        model, example = model_from_spec(args.model, args.seed, args.input_shape)
        progress(f"exporting {args.model} ({args.exporter} exporter) to {args.output} ...")
        start = time.perf_counter()
        onnx_model = export_onnx(model, example, exporter=args.exporter, opset=args.opset,
                                 dynamic_batch=not args.static, dynamic_spatial=args.dynamic_hw, dtype=args.dtype,
                                 output_names=["y"])
        write_output(args.output, "-o", lambda: save_model(onnx_model, args.output))
        counts = op_counts(onnx_model)
        listing = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
        say(f"wrote {args.output}: {sum(counts.values())} nodes ({listing}) in {time.perf_counter() - start:.1f} s")
        return EXIT_OK
