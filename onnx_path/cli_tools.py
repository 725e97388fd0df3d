"""The sub-commands of torchtrt-swish (onnx_path.cli is the entry point): export, fuse, build-engine, check, doctor.

Each is a Tool: its arguments (types from onnx_path.cli_args) and its run(), which raises UsageError for bad input.
"""
from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from torchtrt_swish._output import say as _say
from torchtrt_swish.dtypes import BASELINE_FACTOR, DTYPES, TOLERANCES
from torchtrt_swish.shapes import parse_shape_spec

from onnx_path.cli import EXIT_OK, EXIT_PARITY_FAIL, Tool, UsageError, _progress
from onnx_path.cli_args import (
    MAX_SEED,
    MAX_SIZE,
    dims_arg,
    dtype_arg,
    iterations_arg,
    opset_arg,
    scale_arg,
    seed_arg,
    shape_arg,
    size_arg,
    tolerance,
    tolerance_list,
    workspace_arg,
)

DTYPE_NAMES = tuple(DTYPES)


def _existing_file(text: str | Path) -> Path:
    # For files read by TensorRT (build-engine's model, check's engine): reported as missing even where TensorRT
    # is absent. ONNX inputs get the same message from load_model.
    path = Path(text)
    if not path.is_file():
        raise UsageError(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
    return path


def _same_file_key(path: Path):
    # Existing files by inode (hard links, symlinks, ./x vs x); others by their normalized absolute path.
    try:
        st = path.stat()
        return ("inode", st.st_dev, st.st_ino)
    except OSError:
        return ("path", os.path.realpath(path))


_ONNX_INPUTS = ("input", "--reference")  # the _check_paths inputs that are ONNX files


def _check_paths(inputs: dict[str, Path | str | None], outputs: dict[str, Path | None]) -> None:
    """UsageError unless every output can be written and none is an input (or its external data) or another output."""
    from onnx_path.common import external_data_files
    from torchtrt_swish._output import output_problem

    seen = {}
    for opt, p in inputs.items():
        if p is not None:
            seen[_same_file_key(Path(p))] = f"{opt} {p}"
            # An ONNX input's weights may live in other files: writing over one of them ruins the input too. Only
            # the ONNX inputs are read for them: an engine or a plugin library is no model (and may be large).
            for data in external_data_files(p) if opt in _ONNX_INPUTS and Path(p).is_file() else ():
                seen.setdefault(_same_file_key(data), f"{opt}'s external data {data}")
    for opt, path in outputs.items():
        if path is None:
            continue
        key = _same_file_key(Path(path))
        if key in seen:
            raise UsageError(f"{opt} {path} is the same file as {seen[key]}: refusing to overwrite it")
        seen[key] = f"{opt} {path}"
        if (why := output_problem(path)) is not None:
            raise UsageError(f"{opt} {path} cannot be written: {why}")


def _write(path: Path, opt: str, write) -> None:
    """Run write() and turn an OSError into a UsageError naming the option and path."""
    try:
        write()
    except OSError as exc:
        raise UsageError(f"{opt} {path} could not be written: {exc.strerror or exc}") from None


def _build_model(spec: str, seed: int, input_shape):
    from onnx_path.models import build_model

    try:
        return build_model(spec, seed=seed, input_shape=input_shape)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


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
        from onnx_path.common import op_counts, save_model
        from onnx_path.export import export_onnx

        _check_paths({}, {"-o": args.output})
        model, example = _build_model(args.model, args.seed, args.input_shape)
        _progress(f"exporting {args.model} ({args.exporter} exporter) to {args.output} ...")
        start = time.perf_counter()
        onnx_model = export_onnx(model, example, exporter=args.exporter, opset=args.opset,
                                 dynamic_batch=not args.static, dynamic_spatial=args.dynamic_hw, dtype=args.dtype,
                                 output_names=["y"])
        _write(args.output, "-o", lambda: save_model(onnx_model, args.output))
        counts = op_counts(onnx_model)
        listing = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
        _say(f"wrote {args.output}: {sum(counts.values())} nodes ({listing}) in {time.perf_counter() - start:.1f} s")
        return EXIT_OK


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
        from onnx_path.common import save_model, swish_nodes, write_text_atomic
        from onnx_path.external_data import data_file_for, open_model
        from onnx_path.surgery import PASSES, run_surgery

        passes = [p.strip() for p in args.passes.split(",") if p.strip()]
        if unknown := [p for p in passes if p not in PASSES]:
            raise UsageError(f"unknown pass(es) {unknown}; choose from {', '.join(PASSES)}")
        _check_paths({"input": args.input}, {"-o": args.output, "--report": args.report,
                                             "-o's external data": data_file_for(args.output)})
        # The weights stay in their files (onnx_path.external_data): a model over 2 GiB fuses in about its size.
        with open_model(args.input, scratch=args.output.parent) as (model, base_dir):
            _progress(f"running {', '.join(passes)} on {args.input} ...")
            fused, report = run_surgery(model, passes, fold_bias=not args.no_fold_bias, base_dir=base_dir)
            already = len(swish_nodes(model))
            if not report.replaced and not already and not args.allow_no_match:
                _say(report.to_text())
                raise UsageError(f"{args.input}: no matching nodes (nothing for passes {', '.join(passes)}); "
                                 "use --allow-no-match to write the model unchanged")
            _write(args.output, "-o", lambda: save_model(fused, args.output, base_dir=base_dir))
        # Files first, then the text (a reader that goes away must not cost the outputs); the report only once the
        # model it describes exists.
        if args.report:
            text = json.dumps(report.to_dict(), indent=2) + "\n"
            _write(args.report, "--report", lambda: write_text_atomic(args.report, text))
        _say(report.to_text())
        if not report.replaced and already:
            # Idempotent: a fused model fuses to itself (the passes never match a SwishBias node again).
            _say(f"nothing to do: {args.input} already has {already} SwishBias node(s) and nothing left to fuse")
        _say(f"wrote {args.output}")
        return EXIT_OK


def _profile_shapes(option: str, text: str | None) -> dict:
    """parse_shape_spec(text); UsageError naming the option and the value when it is no spec or a size is too large."""
    try:
        shapes = parse_shape_spec(text)
    except ValueError as exc:
        raise UsageError(f"{option} {text}: {exc}") from None
    if (big := next(((n, s) for n, s in shapes.items() if any(d > MAX_SIZE for d in s)), None)) is not None:
        raise UsageError(f"{option} {text}: a size of {big[0]!r} is larger than {MAX_SIZE}")
    return shapes


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
        from onnx_path.common import atomic_output, load_model
        from onnx_path.contract import check_swish_nodes
        from onnx_path.engine import build_engine

        path = _existing_file(args.input)
        _check_paths({"input": path, "--plugin": args.plugin}, {"-o": args.output})
        check_swish_nodes(load_model(path), str(path))  # the plugin's rejection, said before TensorRT is involved
        shapes = {k: _profile_shapes(f"--{k}-shapes", getattr(args, f"{k}_shapes")) for k in ("min", "opt", "max")}
        _progress(f"building a {args.precision} TensorRT engine from {path} ...")

        def build():
            with atomic_output(args.output) as tmp:
                build_engine(path, tmp, precision=args.precision, min_shapes=shapes["min"], opt_shapes=shapes["opt"],
                             max_shapes=shapes["max"], plugin_library=args.plugin, workspace_gib=args.workspace_gib,
                             verbose=args.verbose)

        _write(args.output, "-o", build)
        _say(f"wrote {args.output}")
        return EXIT_OK


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
        from onnx_path.common import SWISH_ELEM_TYPES, elem_type_name, first_line, graph_inputs, numpy_dtype_for
        from onnx_path.contract import check_swish_nodes
        from onnx_path.export import ExportError
        from onnx_path.external_data import open_model
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
        _check_paths({"input": args.input, "--reference": args.reference, "--engine": args.engine},
                     {"--json": args.json})
        # The weights stay in their files (a scratch file for a large single-file model): the executors read them
        # from there (a model over 2 GiB cannot be serialized whole, one near it costs its size many times over).
        model, base_dir = scratch.enter_context(open_model(args.input))
        # Before anything runs: a node the plugin would reject must not be reported as passing on the CPU.
        check_swish_nodes(model, str(args.input))
        if args.engine is not None:
            _existing_file(args.engine)
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
        reference_dir = None  # the reference's weights' folder (open_model), which is also the baseline's
        if args.torch_model:
            # Same example shape as the export (BatchNorm calibration of torchvision models depends on it).
            dims = inputs[0].type.tensor_type.shape.dim
            shape = tuple(1 if i == 0 else d.dim_value for i, d in enumerate(dims))
            torch_model, example = _build_model(args.torch_model, args.seed, shape if all(shape) else None)
            if (why := torch_output_mismatch(torch_model, example, model)) is not None:
                raise UsageError(f"{args.input} does not match --torch-model {args.torch_model}: {why}")
        else:
            reference, reference_dir = scratch.enter_context(open_model(args.reference))
        try:
            feeds = random_feeds(model, batch=args.batch, dims=args.dims, seed=args.seed, count=args.iterations,
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
                baseline = export_baseline(torch_model, model, feeds[0])
                baseline_name = f"{args.torch_model} exported in {model_dtype}"
            except (ExportError, RuntimeError, ValueError) as exc:  # the check goes on, judged by the tolerances alone
                baseline_skipped = (f"{args.torch_model} could not be exported as a baseline "
                                    f"({first_line(exc) or type(exc).__name__})")
        tolerances = None
        if args.atol is not None or args.rtol is not None:
            atol, rtol = TOLERANCES[model_dtype]
            tolerances = (args.atol if args.atol is not None else atol, args.rtol if args.rtol is not None else rtol)
        _progress(f"running {', '.join(backends)}{' + TensorRT' if args.engine else ''} against "
                  f"{args.torch_model or args.reference} ...")
        try:
            report = check_parity(model, torch_model=torch_model, reference_onnx=reference, feeds=feeds,
                                  dtype=model_dtype, backends=backends, engine_path=args.engine,
                                  per_layer=args.per_layer, tolerances=tolerances, model_name=str(args.input),
                                  baseline_onnx=baseline, baseline_name=baseline_name,
                                  baseline_skipped=baseline_skipped, base_dir=base_dir,
                                  reference_base_dir=reference_dir, baseline_base_dir=reference_dir)
        except RunFailure as exc:
            raise UsageError(f"{exc} (the model may not take these sizes: change --batch {args.batch} or --dims; or "
                             "it needs an op this executor lacks: choose others with --backends)") from None
        if args.torch_model and (far := far_beyond_baseline(report)):
            report.warnings.append(
                f"output(s) {', '.join(far)} fail by a wide margin while the baseline passes: {args.input} may come "
                f"from other weights (not exported by `torchtrt-swish export --model {args.torch_model}` with the "
                f"same --seed {args.seed}); compare it with the model it was made from: --reference ORIGINAL.onnx")
        if args.json:
            _write(args.json, "--json", lambda: report.to_json(args.json))
        _say(report.to_table())
        if args.json:
            _say(f"wrote {args.json}")
        return EXIT_OK if report.passed else EXIT_PARITY_FAIL


# ------------------------------------------------------------------------------------------------------- main


class Doctor(Tool):
    """check this install: environment, the op's kernels, the plugin in each TensorRT, a tiny engine per route"""

    name = "doctor"
    epilog = ("examples:\n  torchtrt-swish doctor\n"
              "  torchtrt-swish doctor --json doctor.json   # the table, and the rows as JSON for a bug report\n"
              "  python -m torchtrt_swish.doctor --json     # the same checks, JSON on stdout\n"
              "every row is PASS, FAIL or SKIPPED with its reason; exit code 1 when any row fails")
    base_install = True  # runs with the base install alone: it reports the missing extras itself

    def add_parser_args(self, parser):
        """The command's arguments (torchtrt_swish.doctor.add_arguments)."""
        from torchtrt_swish.doctor import add_arguments

        add_arguments(parser)

    def run(self, args) -> int:
        """Run every check and print the table (torchtrt_swish.doctor.run)."""
        from torchtrt_swish.doctor import run

        return run(args)


TOOLS = (Export(), Fuse(), BuildEngine(), Check(), Doctor())
