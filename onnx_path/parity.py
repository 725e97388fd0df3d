"""Numerical parity of the ONNX route, built on Polygraphy's ``Comparator`` and ``CompareFunc``.

Runners (all Polygraphy ``BaseRunner`` s, run by ``Comparator.run`` on the same inputs):

* ``TorchRunner`` — a PyTorch module run eagerly. As the *reference* it runs a float64 copy with
  ``torchtrt_swish::swish`` replaced by ``F.silu(x) + bias`` (a ``torch.overrides.TorchFunctionMode``), so the
  reference is independent of this package's kernel. Without that it can run any module, e.g. a Torch-TensorRT
  compiled one.
* ``ReferenceExecutorRunner`` — the CPU plugin-graph executor (``onnx.reference`` + this package's CPU kernel).
* Polygraphy's ``OnnxrtRunner`` over ``reference.ort_session`` (ONNX Runtime + onnxruntime-extensions op).
* Polygraphy's ``TrtRunner`` over a serialized engine, where TensorRT is importable (reported as skipped otherwise).

Every candidate is compared with the reference by ``CompareFunc.simple`` (element-wise: a value passes when within
``atol`` *or* ``rtol``) with per-dtype tolerances. The report lists each output's max abs/rel error and pass/fail
as a table and as JSON. Per-layer mode marks every tensor of the ONNX graphs as an output (Polygraphy's
``modify_outputs(MARK_ALL)``) and also compares the ONNX runners tensor by tensor, matching outputs by exact name.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import time
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
from polygraphy.comparator import Comparator, CompareFunc
from polygraphy.logger import G_LOGGER

from .common import flush_denormals, graph_inputs, numpy_dtype_for
from .reference import ReferenceExecutor, numpy_to_torch, ort_session

# (atol, rtol) of a candidate against the float64 reference; a value passes within either bound. float32 leaves
# room for summation-order differences of long conv chains; the half types allow a few ulps at O(1) magnitudes.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-3),
    "float16": (1e-2, 1e-2),
    "bfloat16": (6e-2, 3e-2),
}
REFERENCE_NAME = "pytorch-fp64"

__all__ = [
    "TOLERANCES",
    "REFERENCE_NAME",
    "TorchRunner",
    "ReferenceExecutorRunner",
    "independent_swish",
    "onnx_input_metadata",
    "random_feeds",
    "ParityReport",
    "compare_runners",
    "check_parity",
]


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

    def __init__(self, model: onnx.ModelProto, name: str | None = None):
        super().__init__(name=name, prefix="onnx-reference+swish")
        self._onnx = model

    def activate_impl(self):
        """Build the evaluator."""
        self.executor = ReferenceExecutor(self._onnx)

    def get_input_metadata_impl(self):
        """Input metadata read from the ONNX graph."""
        return onnx_input_metadata(self._onnx)

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
    a = np.asarray(a)
    return np.ascontiguousarray(a.astype(np.float32) if a.dtype.name == "bfloat16" else a)


def onnx_input_metadata(model: onnx.ModelProto) -> TensorMetadata:
    """Polygraphy TensorMetadata for the model's real inputs (dynamic dims as None)."""
    meta = TensorMetadata()
    for vi in graph_inputs(model):
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        meta.add(vi.name, numpy_dtype_for(tt.elem_type), shape)
    return meta


def random_feeds(
    model: onnx.ModelProto, *, batch: int = 2, dims: Mapping[str, int] | None = None, seed: int = 0, count: int = 1,
    scale: float = 1.0,
) -> list[OrderedDict]:
    """`count` feed dicts of normal(0, scale) values for the model's inputs; dynamic dims from `dims` or `batch`.

    Keep `scale` near the data the model was calibrated on: a randomly initialized deep net fed far larger inputs
    is chaotic, and then even float32 PyTorch disagrees with float64 PyTorch.
    """
    rng = np.random.default_rng(seed)
    dims = dict(dims or {})
    inputs = graph_inputs(model)
    feeds = []
    for _ in range(count):
        feed = OrderedDict()
        for vi in inputs:
            name, tt = vi.name, vi.type.tensor_type
            shape = []
            for axis, d in enumerate(tt.shape.dim):
                if d.HasField("dim_value"):
                    shape.append(d.dim_value)
                elif d.dim_param in dims:
                    shape.append(int(dims[d.dim_param]))
                elif axis == 0:
                    shape.append(batch)
                else:
                    raise ValueError(f"input {name!r} axis {axis} ({d.dim_param or '?'}) is dynamic: give its size")
            feed[name] = (rng.standard_normal(shape) * scale).astype(numpy_dtype_for(tt.elem_type))
        feeds.append(feed)
    return feeds


@dataclasses.dataclass
class ParityReport:
    """Result of a parity run: per-comparison, per-output max abs/rel errors and verdicts."""

    dtype: str
    atol: float
    rtol: float
    reference: str
    comparisons: list[dict]
    skipped: list[dict] = dataclasses.field(default_factory=list)
    per_layer: bool = False
    model: str = ""

    @property
    def passed(self) -> bool:
        """True when every compared output of every comparison passed (and something was compared)."""
        return bool(self.comparisons) and all(c["passed"] for c in self.comparisons)

    def to_dict(self) -> dict:
        """JSON-serializable form."""
        return {
            "model": self.model,
            "dtype": self.dtype,
            "reference": self.reference,
            "tolerances": {"atol": self.atol, "rtol": self.rtol},
            "per_layer": self.per_layer,
            "passed": self.passed,
            "comparisons": self.comparisons,
            "skipped": self.skipped,
        }

    def to_json(self, path: str | Path | None = None) -> str:
        """JSON text; also written to `path` when given."""
        text = json.dumps(self.to_dict(), indent=2)
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text + "\n")
        return text

    def to_table(self, max_rows_per_comparison: int = 12) -> str:
        """Fixed-width table: runner vs reference, output, max abs / max rel error, tolerances, PASS/FAIL."""
        head = f"{'runner':<28} {'vs':<28} {'output':<28} {'max_abs':>10} {'max_rel':>10}  result"
        lines = [
            f"parity ({self.dtype}; pass if |err| <= {self.atol:g} or rel <= {self.rtol:g}; reference "
            f"{self.reference}){' [per-layer]' if self.per_layer else ''}",
            head,
            "-" * len(head),
        ]
        for comp in self.comparisons:
            rows = comp["outputs"]
            # Long (per-layer) lists: failures first, then the largest errors.
            shown = rows if len(rows) <= max_rows_per_comparison else sorted(
                rows, key=lambda r: (r["passed"], -r["max_abs"]))[:max_rows_per_comparison]
            for row in shown:
                lines.append(
                    f"{comp['runner'][:28]:<28} {comp['reference'][:28]:<28} {row['name'][-28:]:<28} "
                    f"{row['max_abs']:>10.3g} {row['max_rel']:>10.3g}  {'PASS' if row['passed'] else 'FAIL'}"
                )
            if len(shown) < len(rows):
                lines.append(f"  ... {len(rows) - len(shown)} more tensor(s) of this comparison, "
                             f"{sum(r['passed'] for r in rows)}/{len(rows)} passed")
        for s in self.skipped:
            lines.append(f"{s['runner']:<28} skipped: {s['reason']}")
        lines.append(f"overall: {'PASS' if self.passed else 'FAIL'}")
        return "\n".join(lines)


def _exact_name(output_name, index, iter_result, *args):
    # Only compare tensors of the same name: Polygraphy's default would pair unmatched outputs by position.
    return [output_name] if output_name in iter_result else None


def _simple_compare_func(**kwargs):
    # Polygraphy 0.53 deprecates CompareFunc.simple in favour of the SimpleCompareFunc class it returns.
    import polygraphy.comparator as comparator

    factory = getattr(comparator, "SimpleCompareFunc", None) or CompareFunc.simple
    return factory(**kwargs)


def _results_list(accuracy):
    # Polygraphy >= 0.50 returns AccuracyResults (one per compare func); older versions one AccuracyResult.
    return list(accuracy) if isinstance(accuracy, list) or hasattr(accuracy, "lst") else [accuracy]


def compare_runners(
    runners: Sequence[BaseRunner],
    feeds: Sequence[Mapping[str, np.ndarray]],
    *,
    reference_index: int = 0,
    dtype: str = "float32",
    tolerances: tuple[float, float] | None = None,
    extra_pairs: Sequence[tuple[int, int]] = (),
    per_layer: bool = False,
    model_name: str = "",
    skipped: Sequence[dict] = (),
) -> ParityReport:
    """Run `runners` on `feeds` with Comparator.run and compare each with the reference via CompareFunc.simple."""
    atol, rtol = tolerances or TOLERANCES[dtype]
    pairs = [(i, reference_index) for i in range(len(runners)) if i != reference_index] + list(extra_pairs)
    with G_LOGGER.verbosity(G_LOGGER.CRITICAL):
        results = Comparator.run(list(runners), data_loader=list(feeds))
        accuracy = Comparator.compare_accuracy(
            results,
            comparisons=pairs,
            compare_func=_simple_compare_func(atol=atol, rtol=rtol, find_output_func=_exact_name,
                                              check_error_stat="elemwise"),
        )
    comparisons = []
    for result in _results_list(accuracy):
        for (name0, name1), iterations in result.items():
            per_output: dict[str, dict] = {}
            for it in iterations:
                for out_name, res in it.items():
                    row = per_output.setdefault(
                        out_name, {"name": out_name, "max_abs": 0.0, "max_rel": 0.0, "mean_abs": 0.0, "passed": True}
                    )
                    row["max_abs"] = max(row["max_abs"], float(res.max_absdiff))
                    row["max_rel"] = max(row["max_rel"], float(res.max_reldiff))
                    row["mean_abs"] = max(row["mean_abs"], float(res.mean_absdiff))
                    row["passed"] = row["passed"] and bool(res)
            rows = list(per_output.values())
            comparisons.append({
                "runner": name0,
                "reference": name1,
                "outputs": rows,
                "passed": bool(rows) and all(r["passed"] for r in rows),
            })
    return ParityReport(dtype=dtype, atol=atol, rtol=rtol, reference=runners[reference_index].name,
                        comparisons=comparisons, skipped=list(skipped), per_layer=per_layer, model=model_name)


def _has_ort_extensions() -> bool:
    import importlib.util

    return importlib.util.find_spec("onnxruntime_extensions") is not None


def _trt_runner(engine_path: str | Path, name: str):
    from .engine import import_tensorrt

    import_tensorrt()  # Polygraphy imports TensorRT lazily: fail here, not in the middle of Comparator.run
    from polygraphy.backend.common import BytesFromPath
    from polygraphy.backend.trt import EngineFromBytes, TrtRunner

    return TrtRunner(EngineFromBytes(BytesFromPath(str(engine_path))), name=name)


def _check_parity(
    onnx_model: onnx.ModelProto,
    *,
    torch_model: torch.nn.Module | None = None,
    reference_onnx: onnx.ModelProto | None = None,
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
) -> ParityReport:
    """Implementation of check_parity (without the logger setting).

    The reference is `torch_model` run in float64 with the independent swish (preferred) or, for ONNX-only
    checks, `reference_onnx` (e.g. the model before fusion) run by plain ONNX Runtime.
    """
    if dtype not in TOLERANCES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(TOLERANCES)}")
    if torch_model is None and reference_onnx is None:
        raise ValueError("check_parity needs a reference: torch_model or reference_onnx")
    feeds = list(feeds) if feeds is not None else random_feeds(onnx_model, batch=batch, seed=seed)
    output_names = [o.name for o in onnx_model.graph.output]
    candidate = onnx_model
    if per_layer:
        candidate = modify_outputs(onnx.shape_inference.infer_shapes(onnx_model), outputs=constants.MARK_ALL,
                                   copy=True)
    runners: list[BaseRunner] = []
    skipped: list[dict] = []
    if torch_model is not None:
        runners.append(TorchRunner(torch_model, onnx_input_metadata(onnx_model), output_names, reference=True))
    else:
        ref = reference_onnx
        if per_layer:
            ref = modify_outputs(onnx.shape_inference.infer_shapes(ref), outputs=constants.MARK_ALL, copy=True)
        import onnxruntime as ort

        runners.append(OnnxrtRunner(ort.InferenceSession(ref.SerializeToString(),
                                                         providers=["CPUExecutionProvider"]),
                                    name="onnxruntime-original"))
    onnx_runner_indices = []
    for backend in backends:
        if backend == "reference":
            runners.append(ReferenceExecutorRunner(candidate, name="onnx-reference+swish"))
        elif backend == "ort":
            if not _has_ort_extensions():
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
    extra_pairs = []
    if per_layer and len(onnx_runner_indices) > 1:
        # Tensor-by-tensor agreement between the ONNX executors localizes a divergence to a layer.
        extra_pairs.append((onnx_runner_indices[1], onnx_runner_indices[0]))
    return compare_runners(runners, feeds, reference_index=0, dtype=dtype, tolerances=tolerances,
                           extra_pairs=extra_pairs, per_layer=per_layer, model_name=model_name, skipped=skipped)


def check_parity(onnx_model: onnx.ModelProto, **kwargs) -> ParityReport:
    """Compare the CPU executors (and a TensorRT engine, if given and possible) of `onnx_model` with a reference.

    Keyword arguments: torch_model (reference, run in float64 with the independent swish — preferred) or
    reference_onnx (e.g. the model before fusion, run by plain ONNX Runtime); feeds (list of input dicts, default
    `random_feeds`); dtype; backends ('reference', 'ort'); engine_path (TensorRT engine, skipped without
    TensorRT); extra_runners (e.g. a TorchRunner over a Torch-TensorRT module); per_layer; tolerances
    (atol, rtol); batch; seed; model_name.
    """
    # Polygraphy logs every comparison (and each mismatch at ERROR); the report carries the same numbers.
    with G_LOGGER.verbosity(G_LOGGER.CRITICAL):
        return _check_parity(onnx_model, **kwargs)
