"""torchtrt-swish check: a Polygraphy parity report of an ONNX file's CPU executors (and a TensorRT engine) against
a float64 PyTorch model or an ONNX reference (onnx_path.parity; the verdict's rules in onnx_path.verdict)."""
from __future__ import annotations

import contextlib
from pathlib import Path

from torchtrt_swish._output import first_line, say
from torchtrt_swish.dtypes import BASELINE_FACTOR, DTYPES, TOLERANCES

from onnx_path.tools.args import (
    MAX_SEED,
    MAX_SIZE,
    check_paths,
    dims_arg,
    dtype_arg,
    existing_file,
    iterations_arg,
    model_from_spec,
    scale_arg,
    seed_arg,
    size_arg,
    tolerance,
    tolerance_list,
    write_output,
)
from onnx_path.tools.base import EXIT_OK, EXIT_PARITY_FAIL, Tool, UsageError, progress


class Check(Tool):
    """Polygraphy parity report against a float64 PyTorch (or ONNX) reference"""

    name = "check"
    epilog = ("examples:\n  torchtrt-swish check seed_net.onnx --torch-model seed-net\n"
              "  torchtrt-swish check effnet_swish.onnx --reference effnet.onnx --per-layer\n"
              "  torchtrt-swish check seed_net.onnx --torch-model seed-net --engine seed.engine \\\n"
              "      --json p.json\n"
              "verdict: an output passes when every element is within --atol or --rtol of the reference\n"
              "(default atol / rtol: "
              + ", ".join(f"{d} {a:g} / {r:g}" for d, (a, r) in TOLERANCES.items()) + "),\n"
              f"or when its max error is at most {BASELINE_FACTOR:g}x its baseline's: the unfused --reference model,\n"
              "or the --torch-model exported in the model's dtype, run by the same executor against the same\n"
              "reference. The table shows both.\n"
              "NaN never passes; infinities pass only where the reference has the same one.\n"
              "exit code 0 when every output passes, 1 otherwise, 2 when nothing could be compared")

    def add_parser_args(self, parser):
        """The command's arguments."""
        parser.add_argument("input", help="ONNX file to check (may contain SwishBias nodes)")
        parser.add_argument("--torch-model", default=None,
                            help="reference: seed-net or torchvision:<name> (same --seed as export), run in float64 "
                                 "with an independent swish (default: none; give this or --reference)")
        parser.add_argument("--reference", default=None,
                            help="reference: an ONNX file (e.g. before fusion) run by ONNX Runtime "
                                 "(default: none; give this or --torch-model)")
        parser.add_argument("--dtype", type=dtype_arg, default=None,
                            help="expected input dtype (default: the model's)")
        parser.add_argument("--backends", default=None,
                            help="comma-separated CPU executors: reference, ort (default: both for float32, reference "
                                 "otherwise)")
        parser.add_argument("--engine", type=Path, default=None,
                            help="also compare a TensorRT engine, loading the plugin first (reported as skipped "
                                 "without TensorRT) (default: none)")
        parser.add_argument("--per-layer", action="store_true",
                            help="mark every tensor as an output and compare them all")
        parser.add_argument("--no-baseline", action="store_true", help="judge by --atol/--rtol only (no baseline runs)")
        parser.add_argument("--batch", type=size_arg, default=2, help=f"size of a dynamic batch axis, 1 to {MAX_SIZE}")
        parser.add_argument("--dims", type=dims_arg, default=None, metavar="NAME=SIZE[,NAME=SIZE]",
                            help="sizes of named dynamic axes other than the batch, e.g. height=5,width=5 "
                                 "(default: none)")
        parser.add_argument("--iterations", type=iterations_arg, default=1,
                            help="number of random input sets, 1 to 10000")
        parser.add_argument("--scale", type=scale_arg, default=1.0,
                            help="standard deviation of the random inputs, at most 10000 (beyond, float16 overflows)")
        parser.add_argument("--seed", type=seed_arg, default=0,
                            help=f"seed for the random inputs (and --torch-model weights), 0 to {MAX_SEED}")
        parser.add_argument("--atol", type=tolerance, default=None,
                            help=f"absolute tolerance, finite and >= 0 (default: per dtype, {tolerance_list(0)})")
        parser.add_argument("--rtol", type=tolerance, default=None,
                            help=f"relative tolerance, finite and >= 0 (default: per dtype, {tolerance_list(1)})")
        parser.add_argument("--json", type=Path, default=None, help="write the report as JSON (default: none)")

    def run(self, args) -> int:
        """Parity report (Polygraphy) of an ONNX file's CPU executors (and a TensorRT engine) against a reference."""
        with contextlib.ExitStack() as scratch:  # the models' scratch copies of their weights, removed at the end
            return self._run(args, scratch)

    def _run(self, args, scratch: contextlib.ExitStack) -> int:
        """run() with `scratch`, which holds the open models until the report is done."""
        from onnx_path.common import elem_type_name, graph_inputs, numpy_dtype_for
        from onnx_path.contract import SWISH_ELEM_TYPES, check_swish_nodes
        from onnx_path.export import ExportError
        from onnx_path.model_file import open_model
        from onnx_path.parity import (
            FeedError,
            RunFailure,
            check_parity,
            export_baseline,
            random_feeds,
            torch_output_mismatch,
        )
        from onnx_path.verdict import far_beyond_baseline

        if (args.torch_model is None) == (args.reference is None):
            raise UsageError("check needs exactly one reference: --torch-model SPEC or --reference ORIGINAL.onnx")
        check_paths({"input": args.input, "--reference": args.reference, "--engine": args.engine},
                     {"--json": args.json})
        # The weights stay in their files (a scratch file for a large single-file model): the executors read them
        # from there (a model over 2 GiB cannot be serialized whole, one near it costs its size many times over).
        model = scratch.enter_context(open_model(args.input))
        # Before anything runs: a node the plugin would reject must not be reported as passing on the CPU.
        check_swish_nodes(model.proto, str(args.input))
        if args.engine is not None:
            existing_file(args.engine)
        inputs = graph_inputs(model.proto)
        if not inputs:
            raise UsageError(f"{args.input}: the model has no inputs")
        elem = inputs[0].type.tensor_type.elem_type
        if elem not in SWISH_ELEM_TYPES:
            raise UsageError(f"{args.input}: input {inputs[0].name!r} has dtype "
                             f"{elem_type_name(elem)}; check supports {', '.join(DTYPES)}")
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
            torch_model, example = model_from_spec(args.torch_model, args.seed, shape if all(shape) else None)
            if (why := torch_output_mismatch(torch_model, example, model.proto)) is not None:
                raise UsageError(f"{args.input} does not match --torch-model {args.torch_model}: {why}")
        else:
            reference = scratch.enter_context(open_model(args.reference))
        try:
            feeds = random_feeds(model.proto, batch=args.batch, dims=args.dims, seed=args.seed, count=args.iterations,
                                 scale=args.scale)
        except FeedError as exc:  # batch, count and scale are validated by the parser: axes and sizes are left
            change = "with --dims NAME=SIZE" if exc.option == "dims" else "use a smaller --batch or --dims"
            raise UsageError(f"{exc} ({change})") from None
        baseline, baseline_name, baseline_skipped = None, "", ""
        if args.no_baseline:
            baseline_skipped = "--no-baseline"
        elif reference is not None:
            baseline, baseline_name = reference, str(args.reference)
        else:
            try:
                baseline = export_baseline(torch_model, model.proto, feeds[0])
                baseline_name = f"{args.torch_model} exported in {model_dtype}"
            except (ExportError, RuntimeError, ValueError) as exc:  # the check goes on, judged by the tolerances alone
                baseline_skipped = (f"{args.torch_model} could not be exported as a baseline "
                                    f"({first_line(exc) or type(exc).__name__})")
        tolerances = None
        if args.atol is not None or args.rtol is not None:
            atol, rtol = TOLERANCES[model_dtype]
            tolerances = (args.atol if args.atol is not None else atol, args.rtol if args.rtol is not None else rtol)
        progress(f"running {', '.join(backends)}{' + TensorRT' if args.engine else ''} against "
                  f"{args.torch_model or args.reference} ...")
        try:
            report = check_parity(model, torch_model=torch_model, reference_onnx=reference, feeds=feeds,
                                  dtype=model_dtype, backends=backends, engine_path=args.engine,
                                  per_layer=args.per_layer, tolerances=tolerances, model_name=str(args.input),
                                  baseline_onnx=baseline, baseline_name=baseline_name,
                                  baseline_skipped=baseline_skipped)
        except RunFailure as exc:
            raise UsageError(f"{exc} (the model may not take these sizes: change --batch {args.batch} or --dims; or "
                             "it needs an op this executor lacks: choose others with --backends)") from None
        if args.torch_model and (far := far_beyond_baseline(report)):
            report.warnings.append(
                f"output(s) {', '.join(far)} fail by a wide margin while the baseline passes: {args.input} may come "
                f"from other weights (not exported by `torchtrt-swish export --model {args.torch_model}` with the "
                f"same --seed {args.seed}); compare it with the model it was made from: --reference ORIGINAL.onnx")
        if args.json:
            write_output(args.json, "--json", lambda: report.to_json(args.json))
        say(report.to_table())
        if args.json:
            say(f"wrote {args.json}")
        return EXIT_OK if report.passed else EXIT_PARITY_FAIL
