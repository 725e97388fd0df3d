"""torchtrt-swish: the ONNX route from the command line — export, fuse, build-engine, check.

Exit codes: 0 success / parity passed, 1 parity failed, 2 usage or input error (bad arguments, missing file, not an
ONNX model, nothing to fuse, unknown dtype, TensorRT or the plugin unavailable for build-engine).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

EXIT_OK, EXIT_PARITY_FAIL, EXIT_USAGE = 0, 1, 2
DTYPE_NAMES = ("float32", "float16", "bfloat16")

_MAIN_EPILOG = """\
examples:
  torchtrt-swish export -o seed_net.onnx                      # seed Net, TorchScript exporter, opset 17
  torchtrt-swish export --model torchvision:efficientnet_b0 -o effnet.onnx
  torchtrt-swish fuse effnet.onnx -o effnet_swish.onnx --report fuse.json
  torchtrt-swish check effnet_swish.onnx --torch-model torchvision:efficientnet_b0 --json parity.json
  torchtrt-swish build-engine seed_net.onnx -o seed_net.engine --precision fp16

exit codes: 0 ok/parity passed, 1 parity failed, 2 usage or input error
"""


class UsageError(Exception):
    """Bad arguments or inputs: reported on stderr, exit code 2."""


def _progress(msg: str) -> None:
    print(f"[torchtrt-swish] {msg}", file=sys.stderr, flush=True)


def _dtype_arg(text: str) -> str:
    aliases = {"fp32": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16"}
    name = aliases.get(text, text)
    if name not in DTYPE_NAMES:
        raise argparse.ArgumentTypeError(f"unknown dtype {text!r}; choose one of {', '.join(DTYPE_NAMES)}")
    return name


def _shape_arg(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(d) for d in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad shape {text!r}: expected e.g. 1x3x224x224") from None
    if not shape or any(d <= 0 for d in shape):
        raise argparse.ArgumentTypeError(f"bad shape {text!r}: dimensions must be positive")
    return shape


def _existing_file(text: str) -> Path:
    # Only for build-engine, which looks for TensorRT before it reads the model: a missing file is reported as
    # such also where TensorRT is absent. The other commands get the same message from load_model.
    path = Path(text)
    if not path.exists():
        raise UsageError(f"{path}: no such file")
    return path


def _build_model(spec: str, seed: int, input_shape):
    from onnx_path.models import build_model

    try:
        return build_model(spec, seed=seed, input_shape=input_shape)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


# ---------------------------------------------------------------------------------------------------- commands


def cmd_export(args) -> int:
    """Export a torch model (seed Net or a torchvision model with random weights) to ONNX."""
    from onnx_path.common import op_counts
    from onnx_path.export import export_onnx

    model, example = _build_model(args.model, args.seed, args.input_shape)
    _progress(f"exporting {args.model} ({args.exporter} exporter) to {args.output} ...")
    start = time.perf_counter()
    onnx_model = export_onnx(model, example, args.output, exporter=args.exporter, opset=args.opset,
                             dynamic_batch=not args.static, dynamic_spatial=args.dynamic_hw, dtype=args.dtype,
                             output_names=["y"])
    counts = op_counts(onnx_model)
    listing = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
    print(f"wrote {args.output}: {sum(counts.values())} nodes ({listing}) in {time.perf_counter() - start:.1f} s")
    return EXIT_OK


def cmd_fuse(args) -> int:
    """Run graph surgery on an ONNX file: seed-format conversion, ONNX Swish, Sigmoid/Mul(/Add) fusion."""
    from onnx_path.common import load_model, save_model
    from onnx_path.surgery import PASSES, run_surgery

    passes = [p.strip() for p in args.passes.split(",") if p.strip()]
    if unknown := [p for p in passes if p not in PASSES]:
        raise UsageError(f"unknown pass(es) {unknown}; choose from {', '.join(PASSES)}")
    model = load_model(args.input)
    _progress(f"running {', '.join(passes)} on {args.input} ...")
    fused, report = run_surgery(model, passes, fold_bias=not args.no_fold_bias)
    print(report.to_text())
    if args.report:
        Path(args.report).parent.mkdir(parents=True, exist_ok=True)
        Path(args.report).write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    if not report.replaced and not args.allow_no_match:
        raise UsageError(f"{args.input}: no matching nodes (nothing for passes {', '.join(passes)}); "
                         "use --allow-no-match to write the model unchanged")
    save_model(fused, args.output)
    print(f"wrote {args.output}")
    return EXIT_OK


def cmd_build_engine(args) -> int:
    """Build a TensorRT engine from an ONNX file with the SwishBias plugin loaded."""
    from onnx_path.engine import build_engine, parse_shape_spec

    path = _existing_file(args.input)
    try:
        shapes = {k: parse_shape_spec(getattr(args, f"{k}_shapes")) for k in ("min", "opt", "max")}
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    _progress(f"building a {args.precision} TensorRT engine from {path} ...")
    out = build_engine(path, args.output, precision=args.precision, min_shapes=shapes["min"],
                       opt_shapes=shapes["opt"], max_shapes=shapes["max"], plugin_library=args.plugin,
                       workspace_gib=args.workspace_gib, verbose=args.verbose)
    print(f"wrote {out}")
    return EXIT_OK


def _dims_arg(text: str) -> dict[str, int]:
    """Parse 'height=5,width=5' into {'height': 5, 'width': 5}."""
    out = {}
    for item in text.split(","):
        name, sep, size = item.partition("=")
        if not sep or not name.strip() or not size.strip().isdigit() or int(size) < 1:
            raise argparse.ArgumentTypeError(f"--dims entry {item!r} is not NAME=SIZE with SIZE >= 1")
        out[name.strip()] = int(size)
    return out


def cmd_check(args) -> int:
    """Parity report (Polygraphy) of an ONNX file's CPU executors (and a TensorRT engine) against a reference."""
    from onnx_path.common import SWISH_ELEM_TYPES, elem_type_name, graph_inputs, load_model, numpy_dtype_for
    from onnx_path.parity import check_parity, random_feeds

    model = load_model(args.input)
    if (args.torch_model is None) == (args.reference is None):
        raise UsageError("check needs exactly one reference: --torch-model SPEC or --reference ORIGINAL.onnx")
    inputs = graph_inputs(model)
    if not inputs:
        raise UsageError(f"{args.input}: the model has no inputs")
    elem = inputs[0].type.tensor_type.elem_type
    if elem not in SWISH_ELEM_TYPES:
        raise UsageError(f"{args.input}: input {inputs[0].name!r} has dtype "
                         f"{elem_type_name(elem)}; check supports {', '.join(DTYPE_NAMES)}")
    model_dtype = numpy_dtype_for(elem).name
    if args.dtype is not None and args.dtype != model_dtype:
        raise UsageError(f"--dtype {args.dtype} does not match the model's {model_dtype} inputs")
    backends = [b.strip() for b in args.backends.split(",") if b.strip()] if args.backends else (
        ["reference", "ort"] if model_dtype == "float32" else ["reference"])
    if unknown := [b for b in backends if b not in ("reference", "ort")]:
        raise UsageError(f"unknown backend(s) {unknown}; choose from reference, ort")
    torch_model = reference = None
    if args.torch_model:
        # Same example shape as the export (BatchNorm calibration of torchvision models depends on it).
        dims = inputs[0].type.tensor_type.shape.dim
        shape = tuple(1 if i == 0 else d.dim_value for i, d in enumerate(dims))
        torch_model, _ = _build_model(args.torch_model, args.seed, shape if all(shape) else None)
    else:
        reference = load_model(args.reference)
    try:
        feeds = random_feeds(model, batch=args.batch, dims=args.dims, seed=args.seed, count=args.iterations,
                             scale=args.scale)
    except ValueError as exc:
        raise UsageError(f"{exc} (with --dims NAME=SIZE)") from None
    tolerances = None
    if args.atol is not None or args.rtol is not None:
        from onnx_path.parity import TOLERANCES

        atol, rtol = TOLERANCES[model_dtype]
        tolerances = (args.atol if args.atol is not None else atol, args.rtol if args.rtol is not None else rtol)
    _progress(f"running {', '.join(backends)}{' + TensorRT' if args.engine else ''} against "
              f"{args.torch_model or args.reference} ...")
    report = check_parity(model, torch_model=torch_model, reference_onnx=reference, feeds=feeds, dtype=model_dtype,
                          backends=backends, engine_path=args.engine, per_layer=args.per_layer,
                          tolerances=tolerances, model_name=str(args.input))
    print(report.to_table())
    if args.json:
        report.to_json(args.json)
        print(f"wrote {args.json}")
    return EXIT_OK if report.passed else EXIT_PARITY_FAIL


# ------------------------------------------------------------------------------------------------------ parser


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser with the four subcommands."""
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(prog="torchtrt-swish", description=__doc__.split("\n")[0], epilog=_MAIN_EPILOG,
                                     formatter_class=fmt)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("export", help="export a model to ONNX (SwishBias nodes for torchtrt_swish ops)",
                       formatter_class=fmt, epilog="examples:\n  torchtrt-swish export -o seed_net.onnx\n"
                       "  torchtrt-swish export --exporter dynamo --dynamic-hw -o seed_net_dyn.onnx\n"
                       "  torchtrt-swish export --model torchvision:efficientnet_b0 --input-shape 1x3x64x64 "
                       "-o effnet.onnx")
    p.add_argument("--model", default="seed-net", help="seed-net (default) or torchvision:<name> (random weights)")
    p.add_argument("-o", "--output", required=True, type=Path, help="ONNX file to write")
    p.add_argument("--exporter", choices=("torchscript", "dynamo"), default="torchscript")
    p.add_argument("--opset", type=int, default=None, help="ONNX opset (>= 11; dynamo: >= 18)")
    p.add_argument("--dtype", type=_dtype_arg, default=None, help="float32 (default), float16 or bfloat16")
    p.add_argument("--input-shape", type=_shape_arg, default=None, help="example input shape, e.g. 1x3x64x64")
    p.add_argument("--static", action="store_true", help="no dynamic batch axis")
    p.add_argument("--dynamic-hw", action="store_true", help="also make height/width of 4-D inputs dynamic")
    p.add_argument("--seed", type=int, default=0, help="seed for random weights/inputs (default 0)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("fuse", help="graph surgery: seed formats / ONNX Swish / Sigmoid*Mul(+Add) -> SwishBias",
                       formatter_class=fmt, epilog="examples:\n  torchtrt-swish fuse model.onnx -o model_swish.onnx\n"
                       "  torchtrt-swish fuse seed.onnx -o seed_swish.onnx --passes seed --report report.json")
    p.add_argument("input", help="ONNX file")
    p.add_argument("-o", "--output", required=True, type=Path, help="ONNX file to write")
    p.add_argument("--passes", default="seed,onnx-swish,sigmoid-mul", help="comma-separated passes (default: all)")
    p.add_argument("--no-fold-bias", action="store_true", help="do not fold a following Add of a constant")
    p.add_argument("--report", type=Path, default=None, help="write the surgery report as JSON")
    p.add_argument("--allow-no-match", action="store_true", help="succeed (and copy the model) when nothing matches")
    p.set_defaults(func=cmd_fuse)

    p = sub.add_parser("build-engine", help="ONNX -> TensorRT engine with the SwishBias plugin (needs TensorRT)",
                       formatter_class=fmt,
                       epilog="examples:\n  torchtrt-swish build-engine seed_net.onnx -o seed.engine\n"
                       "  torchtrt-swish build-engine net.onnx -o net.engine --precision fp16 \\\n"
                       "      --min-shapes x:1x3x64x64 --opt-shapes x:8x3x224x224 --max-shapes x:32x3x320x320")
    p.add_argument("input", help="ONNX file")
    p.add_argument("-o", "--output", required=True, type=Path, help="engine file to write")
    p.add_argument("--precision", choices=("fp32", "fp16", "bf16"), default="fp32")
    for which in ("min", "opt", "max"):
        p.add_argument(f"--{which}-shapes", default=None, help=f"{which} profile shapes, e.g. x:1x3x224x224 "
                                                                "(default: batch 1/8/32 on axis 0)")
    p.add_argument("--plugin", type=Path, default=None, help="plugin library (default: the one in the package)")
    p.add_argument("--workspace-gib", type=float, default=None, help="builder workspace limit in GiB")
    p.add_argument("--verbose", action="store_true", help="TensorRT verbose log")
    p.set_defaults(func=cmd_build_engine)

    p = sub.add_parser("check", help="Polygraphy parity report against a float64 PyTorch (or ONNX) reference",
                       formatter_class=fmt,
                       epilog="examples:\n  torchtrt-swish check seed_net.onnx --torch-model seed-net\n"
                       "  torchtrt-swish check effnet_swish.onnx --reference effnet.onnx --per-layer\n"
                       "  torchtrt-swish check seed_net.onnx --torch-model seed-net --engine seed.engine \\\n"
                       "      --json p.json\n"
                       "exit code 0 when every output is within tolerance, 1 otherwise")
    p.add_argument("input", help="ONNX file to check (may contain SwishBias nodes)")
    p.add_argument("--torch-model", default=None, help="reference: seed-net or torchvision:<name> (same --seed as "
                                                       "export), run in float64 with an independent swish")
    p.add_argument("--reference", default=None, help="reference: an ONNX file (e.g. before fusion) run by ONNX Runtime")
    p.add_argument("--dtype", type=_dtype_arg, default=None, help="expected input dtype (default: the model's)")
    p.add_argument("--backends", default=None, help="reference,ort (default: both for float32, reference otherwise)")
    p.add_argument("--engine", type=Path, default=None,
                   help="also compare a TensorRT engine (reported as skipped without TensorRT)")
    p.add_argument("--per-layer", action="store_true", help="mark every tensor as an output and compare them all")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--dims", type=_dims_arg, default=None, metavar="NAME=SIZE[,NAME=SIZE]",
                   help="sizes of named dynamic axes other than the batch, e.g. height=5,width=5")
    p.add_argument("--iterations", type=int, default=1, help="number of random input sets")
    p.add_argument("--scale", type=float, default=1.0, help="standard deviation of the random inputs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--atol", type=float, default=None)
    p.add_argument("--rtol", type=float, default=None)
    p.add_argument("--json", type=Path, default=None, help="write the report as JSON")
    p.set_defaults(func=cmd_check)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        from onnx_path.common import OnnxInputError
        from onnx_path.engine import EngineBuildError, PluginNotFoundError, TensorRTUnavailable
        from onnx_path.export import ExportError
        from onnx_path.reference import PluginIdentityError
    except ImportError as exc:  # the [onnx] extra is optional for the package, required for this CLI
        print(f"torchtrt-swish {args.command}: error: the ONNX tools are not installed ({exc}); "
              "install them with: pip install 'torchtrt_swish[onnx]'", file=sys.stderr)
        return EXIT_USAGE

    try:
        return args.func(args)
    except (UsageError, OnnxInputError, ExportError, EngineBuildError, PluginNotFoundError, TensorRTUnavailable,
            PluginIdentityError) as exc:
        print(f"torchtrt-swish {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
