"""Run ONNX graphs that contain SwishBias nodes on the CPU, without TensorRT, with this package's CPU kernel.

The two executors and their limits: docs/onnx_route.md#cpu-executors.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping

import numpy as np
import onnx
import torch
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun
from onnx.reference.ops import load_op

import torchtrt_swish

from .common import iter_graphs
from .contract import SWISH_DOMAIN, SWISH_OP, attribute_problem, identity_problem, is_swish_node, value_types
from .functions import inline_functions
from .model_file import OnnxInputError, OnnxModel
from .surgery_values import sparse_to_dense

ORT_DOMAIN = "ai.onnx.contrib"
BACKENDS = ("reference", "ort")
# Standard ops whose float16/bfloat16 inputs the ReferenceExecutor computes in float32 (docs/onnx_route.md).
ACCUMULATING_OPS = (
    "AveragePool", "BatchNormalization", "Conv", "ConvTranspose", "CumSum", "Einsum", "Gemm", "GlobalAveragePool",
    "GroupNormalization", "InstanceNormalization", "LayerNormalization", "LogSoftmax", "LpNormalization", "LRN",
    "MatMul", "MeanVarianceNormalization", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMean",
    "ReduceProd", "ReduceSum", "ReduceSumSquare", "Softmax",
)


class PluginIdentityError(ValueError):
    """A SwishBias node names a plugin version/namespace that this package does not provide."""


def _check_identity(node: onnx.NodeProto, version, namespace) -> None:
    if (why := identity_problem(version, namespace)) is not None:
        raise PluginIdentityError(f"{SWISH_OP} node {node.name!r} {why}")


def numpy_to_torch(a: np.ndarray) -> torch.Tensor:
    """CPU tensor sharing (or, for read-only buffers, copying) a NumPy array; ml_dtypes' bfloat16 included."""
    # torch.from_numpy shares memory; a read-only buffer (ONNX Runtime hands those to Python ops) must be copied.
    # np.asarray(order="C") rather than np.ascontiguousarray, which turns a 0-d array into shape (1,).
    a = np.asarray(a, order="C") if a.flags.writeable else np.array(a, order="C", copy=True)
    if a.dtype.name == "bfloat16":  # ml_dtypes' bfloat16: same bits as torch.bfloat16
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _to_numpy(t: torch.Tensor, like: np.dtype) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view(like)
    return t.numpy()


def swish_numpy(x: np.ndarray, bias: np.ndarray | float) -> np.ndarray:
    """y = x * sigmoid(x) + bias on NumPy arrays, computed by torchtrt_swish's CPU kernel."""
    x = np.asarray(x)
    xt = numpy_to_torch(x)
    if isinstance(bias, np.ndarray):
        bt = numpy_to_torch(np.asarray(bias))
    else:
        bt = torch.tensor(float(bias), dtype=xt.dtype)
    with torch.no_grad():
        y = torchtrt_swish.swish(xt, bt)
    return _to_numpy(y, x.dtype)


class SwishBias(OpRun):
    """onnx.reference implementation of torchtrt_swish::SwishBias: inputs [x, bias], no bias attribute."""

    op_domain = SWISH_DOMAIN

    def _run(self, x, bias_tensor=None, **attributes):
        # onnx.reference passes every attribute of the node: the contract's rules refuse what the plugin would not read.
        _check_identity(self.onnx_node, attributes.get("plugin_version"), attributes.get("plugin_namespace"))
        if "bias" in attributes or bias_tensor is None:
            raise ValueError(f"{SWISH_OP} node {self.onnx_node.name!r} takes [x, bias] with no bias attribute; got "
                             f"{'a bias attribute' if 'bias' in attributes else 'no bias input'}")
        if (why := attribute_problem(attributes)) is not None:
            raise ValueError(f"{SWISH_OP} node {self.onnx_node.name!r} {why}")
        return (swish_numpy(x, bias_tensor),)


_HALF = ("float16", "bfloat16")


def _accumulate_in_float32(op_type: str, version: int) -> type[OpRun]:
    """The standard op class of this opset, taking float16/bfloat16 inputs in float32 and rounding its outputs once."""
    base = load_op("", op_type, version)

    def _run(self, *inputs, **attrs):
        half = next((a.dtype for a in inputs if isinstance(a, np.ndarray) and a.dtype.name in _HALF), None)
        if half is None:
            return base._run(self, *inputs, **attrs)
        wide = [a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype == half else a for a in inputs]
        outs = base._run(self, *wide, **attrs)
        return tuple(o.astype(half) if isinstance(o, np.ndarray) and o.dtype == np.float32 else o for o in outs)

    # The class name must be the op_type (new_ops is keyed by it); op_schema pins the attributes to this opset's.
    schema = onnx.defs.get_schema(op_type, version, "")
    return type(op_type, (base,), {"op_domain": "", "op_schema": schema, "_run": _run})


def _dense_initializers(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with sparse initializers as dense ones of their dtype (onnx.reference cannot read sparse ones)."""
    if not any(g.sparse_initializer for _, g in iter_graphs(model.graph)):
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for _, g in iter_graphs(out.graph):
        g.initializer.extend(onnx.numpy_helper.from_array(sparse_to_dense(sp), sp.values.name)
                             for sp in g.sparse_initializer)
        del g.sparse_initializer[:]
    return out


class ReferenceExecutor:
    """onnx.reference.ReferenceEvaluator over a model, with SwishBias computed by this package's CPU kernel.

    An OnnxModel's external tensors are read from its folder (onnx_path.model_file).
    """

    def __init__(self, model: OnnxModel | onnx.ModelProto):
        model = OnnxModel.of(model)
        if (why := model.weights_problem()) is not None:
            raise OnnxInputError(why)
        model = model.with_proto(inline_functions(model.proto))  # onnx.reference runs no new_ops in a function
        self.model = model.proto
        version = next((o.version for o in self.model.opset_import if o.domain in ("", "ai.onnx")), None)
        used = {n.op_type for _, g in iter_graphs(self.model.graph) for n in g.node if n.domain in ("", "ai.onnx")}
        wide = []
        for op in ACCUMULATING_OPS if version else ():
            if op in used:
                try:
                    wide.append(_accumulate_in_float32(op, version))
                except Exception:  # noqa: BLE001 - an op this opset lacks: the evaluator reports it as it always did
                    pass
        # The main graph's external weights go in as memory-mapped inputs, the rest is loaded.
        runnable, self._weights = model.mapped_weights()
        runnable = _dense_initializers(runnable.weights())
        self._evaluator = ReferenceEvaluator(runnable, new_ops=[SwishBias, *wide])

    @property
    def input_names(self) -> list[str]:
        """Graph input names (without initializers)."""
        return [n for n in self._evaluator.input_names if n not in self._weights]

    @property
    def output_names(self) -> list[str]:
        """Graph output names."""
        return list(self._evaluator.output_names)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Outputs by name for one set of inputs."""
        values = self._evaluator.run(None, {**self._weights, **feeds})
        return dict(zip(self.output_names, values))


# ------------------------------------------------------------------------------------------ ONNX Runtime route

_ORT_OP = "TorchtrtSwishBiasFloat"


@functools.cache
def _register_ort_op() -> None:
    """Declare the Python custom op once per process (onnxruntime-extensions keeps it in a global table)."""
    from onnxruntime_extensions import PyCustomOpDef, onnx_op

    onnx_op(op_type=_ORT_OP, inputs=[PyCustomOpDef.dt_float] * 2, outputs=[PyCustomOpDef.dt_float])(swish_numpy)


def rewrite_for_ort(model: onnx.ModelProto) -> onnx.ModelProto:
    """Copy of `model` whose SwishBias nodes are onnxruntime-extensions Python ops in ai.onnx.contrib."""
    out = onnx.ModelProto()
    out.CopyFrom(inline_functions(model))  # a SwishBias node inside a function is rewritten where it runs
    types = value_types(out)  # best effort: an x of unknown type falls back to float32 below
    for node in (n for _, g in iter_graphs(out.graph) for n in g.node):  # If/Loop/Scan bodies included
        if not is_swish_node(node):
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        _check_identity(node, attrs.get("plugin_version"), attrs.get("plugin_namespace"))
        elem = types.get(node.input[0], (None, None))[0] or onnx.TensorProto.FLOAT
        if elem != onnx.TensorProto.FLOAT:
            raise ValueError(
                f"{SWISH_OP} node {node.name!r}: the ONNX Runtime route supports float32 only, got "
                f"{onnx.TensorProto.DataType.Name(elem)}; use the 'reference' backend"
            )
        if len(node.input) != 2 or "" in node.input or "bias" in attrs:
            raise ValueError(f"{SWISH_OP} node {node.name!r} takes [x, bias] with no bias attribute; got inputs "
                             f"{list(node.input)}{' and a bias attribute' if 'bias' in attrs else ''}")
        if (why := attribute_problem(attrs)) is not None:
            raise ValueError(f"{SWISH_OP} node {node.name!r} {why}")
        node.domain = ORT_DOMAIN
        node.op_type = _ORT_OP
        del node.attribute[:]  # the Python op declares none; the identity was checked above
    if not any(o.domain == ORT_DOMAIN for o in out.opset_import):
        out.opset_import.append(onnx.helper.make_opsetid(ORT_DOMAIN, 1))
    return out


def ort_session(model: OnnxModel | onnx.ModelProto, *, swish: bool = True):
    """An onnxruntime.InferenceSession (CPU) running `model`; with `swish`, on rewrite_for_ort's copy, its SwishBias
    nodes computed by this package's kernel.

    The proto goes to ONNX Runtime as bytes (a model over 2 GiB cannot be serialized whole) and ONNX Runtime reads
    an OnnxModel's external weights from its folder.
    """
    import onnxruntime as ort

    model = OnnxModel.of(model)
    options, proto = ort.SessionOptions(), model.proto
    if swish:
        from onnxruntime_extensions import get_library_path

        _register_ort_op()
        options.register_custom_ops_library(get_library_path())
        options.log_severity_level = 3  # the Python-op bridge logs a warning per op otherwise
        proto = rewrite_for_ort(proto)
    if model.folder is not None and model.has_external_tensors():
        # ONNX Runtime resolves external data against the model file's folder; bytes have none, so name it.
        options.add_session_config_entry("session.model_external_initializers_file_folder_path",
                                         str(model.folder.resolve()))
    return ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


def run_graph(model: OnnxModel | onnx.ModelProto, feeds: Mapping[str, np.ndarray], backend: str = "reference"
              ) -> dict:
    """Run `model` once on the CPU with the chosen backend ('reference' or 'ort'); outputs by name."""
    if backend == "reference":
        return ReferenceExecutor(model).run(feeds)
    if backend == "ort":
        sess = ort_session(model)
        names = [o.name for o in sess.get_outputs()]
        return dict(zip(names, sess.run(names, dict(feeds))))
    raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
