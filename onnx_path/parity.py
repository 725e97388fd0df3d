"""Numerical parity of the ONNX route, built on Polygraphy's ``Comparator`` and ``CompareFunc``.

The runners, the baselines and what a request that cannot be compared raises: docs/onnx_route.md#parity.
"""
from __future__ import annotations

import contextlib
import copy
import importlib.util
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
import torch
from polygraphy import constants
from polygraphy.backend.base import BaseRunner
from polygraphy.backend.onnx import modify_outputs
from polygraphy.backend.onnxrt import OnnxrtRunner
from polygraphy.common import TensorMetadata
from polygraphy.comparator import Comparator, RunResults, SimpleCompareFunc
from polygraphy.logger import G_LOGGER

from torchtrt_swish._output import first_line
from torchtrt_swish.dtypes import TOLERANCES

from .common import elem_type_name, graph_inputs, numpy_dtype_for, value_type
from .feeds import FeedError, non_tensor_io, onnx_input_metadata, random_feeds, show_shape
from .functions import inline_functions
from .model_file import OnnxInputError, OnnxModel, with_inferred_types
from .models import flush_denormals
from .reference import ReferenceExecutor, numpy_to_torch, ort_session
from .verdict import (
    BASELINE_FACTOR,
    BASELINE_SUFFIX,
    ParityReport,
    check_tolerance,
    empty_outputs,
    error_stats,
    is_empty,
    judge,
    magnitudes,
    make_row,
    merge_stats,
    output_notes,
)

REFERENCE_NAME = "pytorch-fp64"


class ParityInputError(ValueError):
    """The comparison cannot be made as asked (docs/onnx_route.md#parity); the message names what is wrong."""


class RunFailure(ParityInputError):
    """A runner raised while it loaded the model or ran it on the inputs; the message names the runner and inputs."""


@contextlib.contextmanager
def independent_swish():
    """Within the block, torchtrt_swish::swish computes F.silu(x) + bias with stock torch ops instead of our kernel."""
    packet = torch.ops.torchtrt_swish.swish

    class _Mode(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            # The overload (swish.default) and the packet (swish) are both ways to call the op.
            if func is packet or getattr(func, "_overloadpacket", None) is packet:
                bound = dict(zip(("x", "bias"), args), **kwargs)
                return torch.nn.functional.silu(bound["x"]) + bound["bias"]
            return func(*args, **kwargs)

    with _Mode():
        yield


class TorchRunner(BaseRunner):
    """Polygraphy runner for a torch module run eagerly; `reference=True` gives the float64 independent reference."""

    def __init__(
        self,
        model: torch.nn.Module | Callable[[], torch.nn.Module],
        input_metadata: TensorMetadata,
        output_names: Sequence[str],
        *,
        reference: bool = False,
        dtype: torch.dtype | None = None,
        device: str = "cpu",
        name: str | None = None,
    ):
        super().__init__(name=name or (REFERENCE_NAME if reference else None), prefix="pytorch-runner")
        self._model = model
        self._input_metadata = input_metadata
        self._output_names = list(output_names)
        self._reference = reference
        self._dtype = torch.float64 if reference else dtype
        self._device = device

    def activate_impl(self):
        """Materialize the module (a float64 copy for the reference)."""
        model = self._model() if callable(self._model) and not isinstance(self._model, torch.nn.Module) else self._model
        if self._dtype is not None:
            model = copy.deepcopy(model).to(self._dtype)
        self.model = model.to(self._device).eval()

    def get_input_metadata_impl(self):
        """Input names, dtypes and shapes as given."""
        return self._input_metadata

    def infer_impl(self, feed_dict):
        """Run the module on the feeds; outputs keyed by the ONNX output names."""
        inputs = []
        for value in feed_dict.values():
            t = value if isinstance(value, torch.Tensor) else numpy_to_torch(np.asarray(value))
            inputs.append(t.to(self._device, self._dtype) if self._dtype is not None else t.to(self._device))
        ctx = independent_swish() if self._reference else contextlib.nullcontext()
        start = time.perf_counter()
        with torch.no_grad(), ctx, flush_denormals():
            outputs = self.model(*inputs)
        self.inference_time = time.perf_counter() - start
        if isinstance(outputs, torch.Tensor):
            outputs = (outputs,)
        return OrderedDict(
            (name, out.detach().cpu().numpy()) for name, out in zip(self._output_names, outputs)
        )

    def deactivate_impl(self):
        """Drop the module."""
        del self.model


class ReferenceExecutorRunner(BaseRunner):
    """Polygraphy runner around the CPU plugin-graph executor (onnx.reference + this package's kernel)."""

    def __init__(self, model: OnnxModel | onnx.ModelProto, name: str | None = None):
        super().__init__(name=name, prefix="onnx-reference+swish")
        self._onnx = OnnxModel.of(model)

    def activate_impl(self):
        """Build the evaluator."""
        self.executor = ReferenceExecutor(self._onnx)

    def get_input_metadata_impl(self):
        """Input metadata read from the ONNX graph."""
        return onnx_input_metadata(self._onnx.proto)

    def infer_impl(self, feed_dict):
        """Evaluate the graph once."""
        start = time.perf_counter()
        out = self.executor.run(feed_dict)
        self.inference_time = time.perf_counter() - start
        return OrderedDict((k, _comparable(v)) for k, v in out.items())

    def deactivate_impl(self):
        """Drop the evaluator."""
        del self.executor


def _comparable(a: np.ndarray) -> np.ndarray:
    # Polygraphy's array utilities do not know ml_dtypes' bfloat16 (float32 holds every bfloat16 value exactly)
    # and reshape outputs with view(), which needs contiguous memory (reference ops may return strided views).
    # np.asarray(order="C"), not np.ascontiguousarray: that one turns a 0-d output into shape (1,).
    a = np.asarray(a)
    return np.asarray(a.astype(np.float32) if a.dtype.name == "bfloat16" else a, order="C")


def _exact_name(output_name, index, iter_result, *args):
    # Only compare tensors of the same name: Polygraphy's default would pair unmatched outputs by position.
    return [output_name] if output_name in iter_result else None


def _run_each(runners: Sequence[BaseRunner], feeds: Sequence[Mapping[str, np.ndarray]]) -> RunResults:
    """Comparator.run, one runner at a time, so that a failure names its runner; RunFailure instead of its exception."""
    results = RunResults()
    for runner in runners:
        try:
            one = Comparator.run([runner], data_loader=list(feeds))
        except Exception as exc:  # noqa: BLE001 - executors raise their own types (ORT's Fail, NumPy's, MemoryError)
            shapes = ", ".join(f"{k}: {show_shape(np.shape(v))}" for k, v in feeds[0].items()) if feeds else "none"
            text = first_line(exc, typed=True) if not isinstance(exc, MemoryError) else f"MemoryError: cannot allocate ({exc})"
            raise RunFailure(f"{runner.name} could not run the model on inputs {shapes}: {text[:400]}") from None
        for name, iterations in one.items():  # (RunResults.update assigns to a list by name in Polygraphy 0.53)
            results[name] = iterations
    return results


# NumPy's floating-point warnings (0 * inf in the executors, inf - inf in Polygraphy's statistics) are third-party
# text on stderr; the non-finite values themselves stay in the outputs and count as evidence.
@np.errstate(all="ignore")
def compare_runners(
    runners: Sequence[BaseRunner],
    feeds: Sequence[Mapping[str, np.ndarray]],
    *,
    reference_index: int = 0,
    dtype: str = "float32",
    tolerances: tuple[float, float] | None = None,
    extra_pairs: Sequence[tuple[int, int]] = (),
    baseline_of: Mapping[int, int] | None = None,
    per_layer: bool = False,
    model_name: str = "",
    baseline_model: str = "",
    skipped: Sequence[dict] = (),
    warn_outputs: Sequence[str] | None = None,
) -> ParityReport:
    """Run `runners` on `feeds` with Comparator.run and compare each with the reference (SimpleCompareFunc).

    `baseline_of` maps a candidate runner's index to its baseline runner's (the unfused or reference model run by
    the same executor). A baseline is compared with the reference too, and a candidate output that fails the
    absolute bounds still passes when its max |err| is at most BASELINE_FACTOR times its baseline's: the candidate
    then adds no error beyond what running the model in this dtype on this executor costs anyway. Reference outputs
    (those in `warn_outputs`, default all) whose magnitude is not above atol, or that have no elements, get a
    warning; ParityInputError when no compared output has any element (nothing was compared).
    """
    atol, rtol = tolerances or TOLERANCES[dtype]
    atol, rtol = check_tolerance("atol", atol), check_tolerance("rtol", rtol)
    baseline_of = dict(baseline_of or {})
    baseline_indices = set(baseline_of.values())
    pairs = [(i, reference_index) for i in range(len(runners)) if i != reference_index] + list(extra_pairs)
    with G_LOGGER.verbosity(G_LOGGER.CRITICAL), warnings.catch_warnings():
        # Polygraphy averages an output with no elements too; the rows say what was compared (verdict.is_empty).
        warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)
        results = _run_each(runners, feeds)
        accuracy = Comparator.compare_accuracy(
            results,
            comparisons=pairs,
            compare_func=SimpleCompareFunc(atol=atol, rtol=rtol, find_output_func=_exact_name,
                                           check_error_stat="elemwise", infinities_compare_equal=True),
        )
    reference_name = runners[reference_index].name
    by_pair: dict[tuple[str, str], list[dict]] = {}
    for result in accuracy:  # one AccuracyResult per compare func
        for (name0, name1), iterations in result.items():
            within: dict[str, bool] = {}
            for it in iterations:
                for out_name, res in it.items():
                    within[out_name] = within.get(out_name, True) and bool(res)
            # The statistics come from the outputs themselves: Polygraphy's per-output maxima would be folded with
            # Python's max(), which drops a NaN.
            pairs_of_iterations = list(zip(results[name0], results[name1]))
            by_pair[(name0, name1)] = [
                make_row(out, merge_stats([error_stats(a[out], b[out]) for a, b in pairs_of_iterations]), ok)
                for out, ok in within.items()]

    magnitude = magnitudes(results[reference_name])
    comparisons, baselines = [], []
    for i, j in pairs:
        rows = by_pair.get((runners[i].name, runners[j].name), [])
        entry = {"runner": runners[i].name, "reference": runners[j].name, "outputs": rows}
        if i in baseline_indices:
            baselines.append(entry)
            continue
        base_rows = {r["name"]: r for r in by_pair.get((runners[baseline_of[i]].name, reference_name), [])} \
            if i in baseline_of and j == reference_index else {}
        for row in rows:
            judge(row, base_rows.get(row["name"]), atol, rtol)
            if j == reference_index:
                row["reference_max_abs"] = magnitude.get(row["name"])
        entry["passed"] = bool(rows) and all(r["passed"] for r in rows)
        comparisons.append(entry)
    empty = empty_outputs(results[reference_name])
    rows = [r for c in comparisons for r in c["outputs"]]
    if rows and all(is_empty(r) for r in rows):
        raise ParityInputError("nothing to compare: every output has no elements on these inputs ("
                               + ", ".join(f"{n}: {show_shape(s)}" for n, s in empty.items()) + ")")
    notes = output_notes(reference_name, magnitude, empty, atol, warn_outputs)
    return ParityReport(dtype=dtype, atol=atol, rtol=rtol, reference=reference_name, comparisons=comparisons,
                        skipped=list(skipped), per_layer=per_layer, model=model_name, baselines=baselines,
                        baseline_model=baseline_model, warnings=notes)


def _trt_runner(engine_path: str | Path, name: str):
    from torchtrt_swish.plugin import load_plugin

    from .engine import import_tensorrt

    trt = import_tensorrt()  # Polygraphy imports TensorRT lazily: fail here, not in the middle of Comparator.run
    # An engine with SwishBias layers deserializes only when the creator is registered in this process: the engine
    # file may come from another process (build-engine), so load the plugin before EngineFromBytes runs.
    load_plugin(trt)
    from polygraphy.backend.common import BytesFromPath
    from polygraphy.backend.trt import EngineFromBytes, TrtRunner

    return TrtRunner(EngineFromBytes(BytesFromPath(str(engine_path))), name=name)


def io_mismatch(candidate: onnx.ModelProto, reference: onnx.ModelProto, what: str = "reference") -> str | None:
    """How the candidate's inputs/outputs differ from the reference's (names, dtypes, ranks, fixed dims), or None."""
    for kind, values in (("inputs", graph_inputs), ("outputs", lambda m: m.graph.output)):
        mine, theirs = ({vi.name: value_type(vi.type) for vi in values(m)} for m in (candidate, reference))
        if list(mine) != list(theirs):
            return f"the model's {kind} {list(mine)} differ from the {what}'s {list(theirs)}"
        for name, (elem, shape) in mine.items():
            r_elem, r_shape = theirs[name]
            if elem and r_elem and elem != r_elem:
                return (f"{kind[:-1]} {name!r} is {elem_type_name(elem)} in the model but {elem_type_name(r_elem)} "
                        f"in the {what}")
            if shape is None or r_shape is None:
                continue
            fixed_differ = any(a is not None and b is not None and a != b for a, b in zip(shape, r_shape))
            if len(shape) != len(r_shape) or fixed_differ:
                return (f"{kind[:-1]} {name!r} has shape {show_shape(shape)} in the model but "
                        f"{show_shape(r_shape)} in the {what}")
    return None


def torch_output_mismatch(torch_model: torch.nn.Module, example: torch.Tensor,
                          candidate: onnx.ModelProto) -> str | None:
    """How the torch model's outputs on `example` differ from the candidate's (count, rank, fixed non-batch dims)."""
    with torch.no_grad(), flush_denormals():
        outputs = torch_model.eval()(example)
    outputs = (outputs,) if isinstance(outputs, torch.Tensor) else tuple(outputs)
    declared = {vi.name: value_type(vi.type) for vi in candidate.graph.output}
    if len(outputs) != len(declared):
        return f"the torch model returns {len(outputs)} output(s), the model has {len(declared)} ({list(declared)})"
    for (name, (_, shape)), out in zip(declared.items(), outputs):
        got = list(out.shape)
        # Axis 0 is the batch, which the example fixes at 1 and the model usually leaves dynamic.
        if shape is not None and (len(shape) != len(got) or any(
                a is not None and a != b for axis, (a, b) in enumerate(zip(shape, got)) if axis > 0)):
            return (f"output {name!r} has shape {show_shape(shape)} in the model, the torch model gives "
                    f"{show_shape(got)}")
    return None


def export_baseline(torch_model: torch.nn.Module, candidate: onnx.ModelProto,
                    feed: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """The torch reference model exported like the candidate (dtype, opset, input/output names, `feed`'s shapes).

    This is the baseline of a ``--torch-model`` check: the same network as the reference, in the candidate's
    precision, run by the candidate's executors. Raises onnx_path.export.ExportError when it cannot be exported.
    """
    from .export import export_onnx

    inputs = graph_inputs(candidate)
    example = tuple(numpy_to_torch(np.asarray(feed[vi.name])) for vi in inputs)
    dtype = numpy_dtype_for(inputs[0].type.tensor_type.elem_type).name
    opset = next((o.version for o in candidate.opset_import if o.domain in ("", "ai.onnx")), None)
    return export_onnx(torch_model, example, exporter="torchscript", opset=opset,
                       input_names=[vi.name for vi in inputs], output_names=[o.name for o in candidate.graph.output],
                       dynamic_batch=False, dtype=dtype)


def _all_outputs(model: OnnxModel) -> OnnxModel:
    """`model` with every intermediate tensor marked as an output (per-layer comparisons)."""
    return model.with_proto(modify_outputs(with_inferred_types(model.proto), outputs=constants.MARK_ALL, copy=True))


def _ort_reference_runner(model: OnnxModel, name: str, what: str):
    try:
        session = ort_session(model, swish=False)
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own exception types per failure
        dtypes = sorted({elem_type_name(vi.type.tensor_type.elem_type) for vi in graph_inputs(model.proto)})
        raise ParityInputError(f"ONNX Runtime cannot run the {what} ({'/'.join(dtypes)} inputs): "
                               f"{first_line(exc, typed=True)}") from None
    return OnnxrtRunner(session, name=name)


def _inlined(model: OnnxModel | None, what: str) -> OnnxModel | None:
    """`model` with its local functions inlined (inline_functions), or ParityInputError naming `what`."""
    try:
        return None if model is None else model.with_proto(inline_functions(model.proto, what))
    except OnnxInputError as exc:
        raise ParityInputError(str(exc)) from None


def _check_parity(
    onnx_model: OnnxModel | onnx.ModelProto,
    *,
    torch_model: torch.nn.Module | None = None,
    reference_onnx: OnnxModel | onnx.ModelProto | None = None,
    baseline_onnx: OnnxModel | onnx.ModelProto | None = None,
    feeds: Sequence[Mapping[str, np.ndarray]] | None = None,
    dtype: str = "float32",
    backends: Sequence[str] = ("reference", "ort"),
    engine_path: str | Path | None = None,
    extra_runners: Sequence[BaseRunner] = (),
    per_layer: bool = False,
    tolerances: tuple[float, float] | None = None,
    batch: int = 2,
    seed: int = 0,
    model_name: str = "",
    baseline_name: str = "",
    baseline_skipped: str = "",
) -> ParityReport:
    """Implementation of check_parity (without the logger setting)."""
    if dtype not in TOLERANCES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(TOLERANCES)}")
    if torch_model is None and reference_onnx is None:
        raise ValueError("check_parity needs a reference: torch_model or reference_onnx")
    if tolerances is not None:
        tolerances = (check_tolerance("atol", tolerances[0]), check_tolerance("rtol", tolerances[1]))
    if engine_path is not None and not Path(engine_path).is_file():
        raise ParityInputError(f"{engine_path}: no such engine file")
    model, reference, baseline = (None if m is None else OnnxModel.of(m) for m in (onnx_model, reference_onnx,
                                                                                   baseline_onnx))
    if (why := non_tensor_io(model.proto)) is not None:
        raise ParityInputError(why)
    # Every runner sees the models with their local functions inlined (per-layer mode marks what runs in them too).
    model, reference, baseline = (_inlined(m, what) for m, what in ((model, model_name or "the model"),
                                                                   (reference, "the reference"), (baseline, "the baseline")))
    for what, opened in ((model_name or "the model", model), ("the reference", reference), ("the baseline", baseline)):
        if opened is not None and (why := opened.weights_problem()) is not None:
            raise ParityInputError(f"{what}: its weights cannot be read: {why}")
    if reference is not None and (why := io_mismatch(model.proto, reference.proto)) is not None:
        raise ParityInputError(why)
    if baseline is not None and (why := io_mismatch(model.proto, baseline.proto, "baseline")) is not None:
        raise ParityInputError(why)
    feeds = list(feeds) if feeds is not None else random_feeds(model.proto, batch=batch, seed=seed)
    output_names = [o.name for o in model.proto.graph.output]
    candidate = _all_outputs(model) if per_layer else model
    runners: list[BaseRunner] = []
    skipped: list[dict] = []
    if torch_model is not None:
        runners.append(TorchRunner(torch_model, onnx_input_metadata(model.proto), output_names, reference=True))
    else:
        runners.append(_ort_reference_runner(_all_outputs(reference) if per_layer else reference,
                                             "onnxruntime-original", "reference model"))
    onnx_runner_indices = []
    for backend in backends:
        if backend == "reference":
            runners.append(ReferenceExecutorRunner(candidate, name="onnx-reference+swish"))
        elif backend == "ort":
            if importlib.util.find_spec("onnxruntime_extensions") is None:
                skipped.append({"runner": "onnxruntime+swish", "reason": "onnxruntime-extensions is not installed "
                                                                       "(pip install onnxruntime-extensions)"})
                continue
            if dtype != "float32":
                skipped.append({"runner": "onnxruntime+swish", "reason": f"ONNX Runtime route is float32 only "
                                                                       f"(dtype {dtype})"})
                continue
            runners.append(OnnxrtRunner(lambda m=candidate: ort_session(m), name="onnxruntime+swish"))
        else:
            raise ValueError(f"unknown backend {backend!r}; choose from reference, ort")
        onnx_runner_indices.append(len(runners) - 1)
    if engine_path is not None:
        try:
            runners.append(_trt_runner(engine_path, "tensorrt"))
        except ImportError as exc:
            skipped.append({"runner": "tensorrt", "reason": str(exc)})
    runners.extend(extra_runners)
    if len(runners) == 1:
        reasons = "; ".join(f"{s['runner']}: {s['reason']}" for s in skipped) or "no backend was asked for"
        raise ParityInputError(f"nothing to compare: no candidate could run ({reasons})")
    baseline_of = {}
    if baseline is not None:
        # The same executors over the baseline model (graph outputs only: intermediates have other names).
        for i in onnx_runner_indices:
            name = runners[i].name + BASELINE_SUFFIX
            if isinstance(runners[i], ReferenceExecutorRunner):
                runners.append(ReferenceExecutorRunner(baseline, name=name))
            else:
                runners.append(OnnxrtRunner(lambda m=baseline: ort_session(m), name=name))
            baseline_of[i] = len(runners) - 1
    elif baseline_skipped:
        skipped.append({"runner": "baseline", "reason": baseline_skipped})
    extra_pairs = []
    if per_layer and len(onnx_runner_indices) > 1:
        # Tensor-by-tensor agreement between the ONNX executors localizes a divergence to a layer.
        extra_pairs.append((onnx_runner_indices[1], onnx_runner_indices[0]))
    return compare_runners(runners, feeds, reference_index=0, dtype=dtype, tolerances=tolerances,
                           extra_pairs=extra_pairs, baseline_of=baseline_of, per_layer=per_layer,
                           model_name=model_name, baseline_model=baseline_name if baseline is not None else "",
                           skipped=skipped, warn_outputs=output_names)


def check_parity(onnx_model: OnnxModel | onnx.ModelProto, **kwargs) -> ParityReport:
    """Compare the CPU executors (and a TensorRT engine, if given and possible) of `onnx_model` with a reference.

    Keyword arguments: torch_model (reference, run in float64 with the independent swish — preferred) or
    reference_onnx (e.g. the model before fusion, run by plain ONNX Runtime); baseline_onnx (the unfused model, or
    the reference exported by ``export_baseline``: run by the same ONNX executors, docs/onnx_route.md#parity) with
    baseline_name, or baseline_skipped (why there is none, for the report); feeds (list of input dicts, default
    `random_feeds`); dtype; backends ('reference', 'ort'); engine_path (TensorRT engine, skipped without
    TensorRT); extra_runners (e.g. a TorchRunner over a Torch-TensorRT module); per_layer; tolerances
    (atol, rtol); batch; seed; model_name. Raises ParityInputError for requests that cannot be compared.
    """
    # Polygraphy logs every comparison (and each mismatch at ERROR); the report carries the same numbers.
    with G_LOGGER.verbosity(G_LOGGER.CRITICAL):
        return _check_parity(onnx_model, **kwargs)
