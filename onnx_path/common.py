"""Shared pieces of the ONNX route: the node contract, input errors, loading/saving and small graph queries."""
from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx

from torchtrt_swish import _output
from torchtrt_swish.plugin import PLUGIN_NAME, PLUGIN_NAMESPACE, PLUGIN_VERSION

# The node contract: TensorRT's ONNX parser falls back to the plugin registry with the node's op_type as plugin name
# and its `plugin_version` (default "1") and `plugin_namespace` (default "") attributes; it never reads the domain, so
# a fused node carries both attributes (the domain only keeps ONNX tools from taking it for a standard op).
SWISH_OP = PLUGIN_NAME
SWISH_DOMAIN = PLUGIN_NAMESPACE
SWISH_OPSET_VERSION = 1
# Element types the plugin (and so a fused node) accepts; float64 exists only on the torch CPU path.
SWISH_ELEM_TYPES = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)

__all__ = [
    "SWISH_OP",
    "SWISH_DOMAIN",
    "SWISH_OPSET_VERSION",
    "SWISH_ELEM_TYPES",
    "PLUGIN_NAME",
    "PLUGIN_VERSION",
    "PLUGIN_NAMESPACE",
    "OnnxInputError",
    "OutputPathError",
    "load_model",
    "save_model",
    "external_data_files",
    "model_tensors",
    "atomic_output",
    "atomic_outputs",
    "write_text_atomic",
    "node_label",
    "first_line",
    "subgraphs",
    "iter_graphs",
    "all_nodes",
    "text_attribute_problem",
    "is_swish_node",
    "op_counts",
    "swish_nodes",
    "graph_inputs",
    "elem_type_name",
    "numpy_dtype_for",
    "flush_denormals",
]


class OnnxInputError(ValueError):
    """A user-supplied ONNX input is unusable (missing file, not an ONNX model, nothing to work on)."""


class OutputPathError(OnnxInputError, _output.OutputPathError):
    """An output path that must not be written: neither a regular file nor a new path (torchtrt_swish._output.output_target)."""


@contextlib.contextmanager
def _output_errors() -> Iterator[None]:
    # The rule lives in torchtrt_swish._output; here its refusal is an OnnxInputError like every other bad input.
    try:
        yield
    except _output.OutputPathError as exc:
        if isinstance(exc, OutputPathError):
            raise
        raise OutputPathError(str(exc)) from None


def _tensors(graph: onnx.GraphProto, sparse: bool = True) -> Iterator[onnx.TensorProto]:
    yield from graph.initializer
    for part in graph.sparse_initializer if sparse else ():
        yield part.values
        yield part.indices
    yield from _node_tensors(graph.node, sparse)


def _node_tensors(nodes, sparse: bool) -> Iterator[onnx.TensorProto]:
    for node in nodes:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            for part in ([attr.sparse_tensor] if attr.HasField("sparse_tensor") else []) if sparse else ():
                yield part.values
                yield part.indices
            for part in attr.sparse_tensors if sparse else ():
                yield part.values
                yield part.indices
            if attr.HasField("g"):
                yield from _tensors(attr.g, sparse)
            for g in attr.graphs:
                yield from _tensors(g, sparse)


def model_tensors(model: onnx.ModelProto, *, sparse: bool = True) -> Iterator[onnx.TensorProto]:
    """Every TensorProto of the model, in place: initializers and attribute tensors of every graph and function,
    and (with `sparse`) the values and indices of sparse initializers and attributes."""
    yield from _tensors(model.graph, sparse)
    for function in model.functions:
        yield from _node_tensors(function.node, sparse)


def external_data_files(path: str | Path) -> list[Path]:
    """The files the model at `path` keeps tensors in (ONNX external data), resolved beside it; [] when unreadable."""
    path = Path(path)
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001 - not a model: load_model says so in its own words
        return []
    locations = []
    for tensor in model_tensors(model):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            where = {e.key: e.value for e in tensor.external_data}.get("location")
            if where and (found := path.parent / where) not in locations:
                locations.append(found)
    return locations


def load_model(path: str | Path, *, load_external_data: bool = True) -> onnx.ModelProto:
    """Load an ONNX model from a file, raising OnnxInputError with a plain message when it cannot be read."""
    path = Path(path)
    if not path.exists():
        raise OnnxInputError(f"{path}: no such file")
    if not path.is_file():
        raise OnnxInputError(f"{path}: not a file")
    try:
        model = onnx.load(str(path), load_external_data=load_external_data)
    except Exception as exc:  # noqa: BLE001 - protobuf raises several unrelated types for garbage input
        raise OnnxInputError(f"{path}: not an ONNX model ({type(exc).__name__}: {exc})") from exc
    # A random file can occasionally parse as an (empty) protobuf message: require an actual graph.
    if not model.HasField("graph") or (len(model.graph.node) == 0 and len(model.graph.output) == 0):
        raise OnnxInputError(f"{path}: not an ONNX model (no graph in it)")
    return model


def save_model(model: onnx.ModelProto, path: str | Path, *, base_dir: str | Path | None = None) -> Path:
    """Save a model atomically, creating the parent folder; one with external tensors (read from `base_dir`) or
    too large for one file is written with NAME.data beside it (onnx_path.external_data)."""
    from . import external_data

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if external_data.needs_external_data(model):
        return external_data.save(model, path, base_dir)
    with atomic_output(path) as tmp:
        onnx.save(model, str(tmp))
    return path


@contextlib.contextmanager
def atomic_output(path: str | Path, *, inputs=()) -> Iterator[Path]:
    """Yield a temporary path beside `path` to write to; it replaces `path` only when the block succeeds.

    The project's one output rule (torchtrt_swish._output.atomic_output): a regular file or a new path, a symlink
    written through to its regular file, nothing else; no temporary file left behind. OutputPathError otherwise.
    """
    with _output_errors(), _output.atomic_output(path, inputs=inputs) as tmp:
        yield tmp


@contextlib.contextmanager
def atomic_outputs(paths, *, inputs=()) -> Iterator[list[Path]]:
    """atomic_output for several files (torchtrt_swish._output.atomic_outputs): renamed in the order given."""
    with _output_errors(), _output.atomic_outputs(paths, inputs=inputs) as tmps:
        yield tmps


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write a text file atomically (see atomic_output)."""
    with _output_errors():
        return _output.write_text(path, text)


def first_line(exc: BaseException) -> str:
    """The first line of an exception's text ('' when it has none): one-line messages from multi-line errors."""
    return (str(exc).strip().splitlines() or [""])[0]


def node_label(node: onnx.NodeProto, index: int) -> str:
    """How reports name a node: its name, or '<OpType>_<index>' (index in the graph) when it has none."""
    return node.name or f"{node.op_type}_{index}"


def subgraphs(node: onnx.NodeProto) -> Iterator[tuple[str, onnx.GraphProto]]:
    """(attribute name, graph) for each body of the node: If's branches, Loop's and Scan's body, any GRAPH(S)."""
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.name, attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            for i, g in enumerate(attr.graphs):
                yield f"{attr.name}[{i}]", g


def iter_graphs(graph: onnx.GraphProto, where: str = "") -> Iterator[tuple[str, onnx.GraphProto]]:
    """(where, graph) for `graph` and every subgraph in it, depth first; `where` is '' for `graph` itself, else
    e.g. "If node 'cond' then_branch / ..." (the path of nodes and attributes down to it)."""
    yield where, graph
    for index, node in enumerate(graph.node):
        for attr, body in subgraphs(node):
            inner = f"{node.op_type} node {node_label(node, index)!r} {attr}"
            yield from iter_graphs(body, f"{where} / {inner}" if where else inner)


def _nodes_of(graphs: Iterator[tuple[str, onnx.GraphProto]]) -> Iterator[tuple[str, int, onnx.NodeProto]]:
    for where, graph in graphs:
        for index, node in enumerate(graph.node):
            yield where, index, node


def all_nodes(model: onnx.ModelProto) -> Iterator[tuple[str, int, onnx.NodeProto]]:
    """(where, index, node) for the nodes of the main graph, its subgraphs and the model's functions."""
    yield from _nodes_of(iter_graphs(model.graph))
    for function in model.functions:
        where = f"function {function.name!r}"
        for index, node in enumerate(function.node):
            yield where, index, node
            for attr, body in subgraphs(node):
                yield from _nodes_of(iter_graphs(body, f"{where} / {node.op_type} {attr}"))


def text_attribute_problem(model: onnx.ModelProto) -> str | None:
    """'node LABEL attribute NAME ...' for the first string attribute that is not UTF-8 text, or None."""
    for where, index, node in all_nodes(model):
        for attr in node.attribute:
            for value in [attr.s] if attr.type == onnx.AttributeProto.STRING else list(attr.strings):
                try:
                    value.decode("utf-8")
                except UnicodeDecodeError:
                    place = f" (in {where})" if where else ""
                    return (f"node {node_label(node, index)!r}{place} has attribute {attr.name!r} that is not UTF-8 "
                            f"text ({value[:40]!r})")
    return None


def is_swish_node(node: onnx.NodeProto) -> bool:
    """True for a node that follows the SwishBias contract's op_type and domain."""
    return node.op_type == SWISH_OP and node.domain == SWISH_DOMAIN


def swish_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The SwishBias nodes of the main graph, of its If/Loop/Scan bodies and of the model-local functions."""
    return [n for _, _, n in all_nodes(model) if is_swish_node(n)]


def op_counts(model: onnx.ModelProto) -> collections.Counter:
    """Node count per op type of the model as it runs: the main graph and its bodies, each call of a model-local
    function counted as the function's nodes (custom domains prefixed, e.g. 'torchtrt_swish::SwishBias')."""
    from .functions import inline_functions

    with contextlib.suppress(OnnxInputError):  # functions onnx cannot inline: their calls count as nodes
        model = inline_functions(model)
    return collections.Counter(
        f"{n.domain}::{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type
        for _, g in iter_graphs(model.graph) for n in g.node
    )


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """Real graph inputs: graph.input minus initializers (old exporters list weights as inputs too)."""
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def elem_type_name(elem_type: int) -> str:
    """'FLOAT', 'FLOAT16', ... for a TensorProto element type."""
    return onnx.TensorProto.DataType.Name(elem_type)


def numpy_dtype_for(elem_type: int) -> np.dtype:
    """The NumPy dtype ONNX uses for an element type (ml_dtypes' bfloat16 for BFLOAT16)."""
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))


@contextlib.contextmanager
def flush_denormals():
    """Within the block, torch's CPU ops flush subnormal numbers to zero, single-threaded; both restored after.

    Randomly initialized deep nets (EfficientNet's SiLU of large negative values) produce subnormals, and CPU
    arithmetic on them is ~100x slower: a float64 EfficientNet-B0 forward pass goes from 0.2 s to 45 s. Values
    below 2.2e-308 (float64) or 1.2e-38 (float32) are far below every tolerance used here. The flag is a per-thread
    CPU setting made on the calling thread only, and torch's worker threads may already exist: so the block runs on
    one thread.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)  # torch has no getter; False is its default
        torch.set_num_threads(threads)
