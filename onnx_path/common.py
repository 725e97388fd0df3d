"""Graph queries of the ONNX route: tensors, subgraphs and nodes of a model, inputs, element types."""
from __future__ import annotations

import collections
from collections.abc import Iterator

import numpy as np
import onnx


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


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """Real graph inputs: graph.input minus initializers (old exporters list weights as inputs too)."""
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def value_type(tp: onnx.TypeProto) -> tuple[int | None, list[int | None] | None]:
    """(elem_type, shape with None for a dynamic dim) of a tensor type, each None where unknown; (None, None) else."""
    if not tp.HasField("tensor_type"):
        return None, None
    tt = tp.tensor_type
    shape = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim] if tt.HasField("shape") else None
    return tt.elem_type or None, shape


def elem_type_name(elem_type: int) -> str:
    """'FLOAT', 'FLOAT16', ... for a TensorProto element type."""
    return onnx.TensorProto.DataType.Name(elem_type)


def numpy_dtype_for(elem_type: int) -> np.dtype:
    """The NumPy dtype ONNX uses for an element type (ml_dtypes' bfloat16 for BFLOAT16)."""
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
