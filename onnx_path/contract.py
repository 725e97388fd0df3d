"""The SwishBias node contract, checked in one place: what the plugin (reached through TensorRT's parser) accepts.

The rules, and which host checks them where: docs/onnx_route.md#the-node-contract.
"""
from __future__ import annotations

from collections.abc import Mapping

import onnx

from torchtrt_swish.layout import plugin_layout
from torchtrt_swish.plugin import PLUGIN_NAME, PLUGIN_NAMESPACE, PLUGIN_VERSION

from .common import all_nodes, elem_type_name, iter_graphs, node_label, value_type
from .functions import function_id, function_nodes, origin, tagged_inline
from .model_file import OnnxInputError

# The node's identity: TensorRT's ONNX parser falls back to the plugin registry with the node's op_type as plugin
# name and its `plugin_version` (default "1") and `plugin_namespace` (default "") attributes; it never reads the
# domain, so a node carries both attributes (the domain only keeps ONNX tools from taking it for a standard op).
SWISH_OP = PLUGIN_NAME
SWISH_DOMAIN = PLUGIN_NAMESPACE
SWISH_OPSET_VERSION = 1
# Element types the plugin (and so a SwishBias node) accepts; float64 exists only on the torch CPU path.
SWISH_ELEM_TYPES = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)

# (elem_type or None, shape or None); a shape lists ints for fixed dims and None for dynamic ones.
ValueType = tuple[int | None, list[int | None] | None]
_STRING = onnx.AttributeProto.STRING


# The only attributes a SwishBias node may carry: the ones TensorRT's parser reads to find the creator.
PLUGIN_ATTRIBUTES = ("plugin_version", "plugin_namespace")


class SwishContractError(OnnxInputError):
    """A SwishBias node that the plugin would reject."""


def is_swish_node(node: onnx.NodeProto) -> bool:
    """True for a node that follows the SwishBias contract's op_type and domain."""
    return node.op_type == SWISH_OP and node.domain == SWISH_DOMAIN


def swish_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The SwishBias nodes of the main graph, of its If/Loop/Scan bodies and of the model-local functions."""
    return [n for _, _, n in all_nodes(model) if is_swish_node(n)]


def _attr_type(attr: onnx.AttributeProto) -> str:
    return onnx.AttributeProto.AttributeType.Name(attr.type)


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def identity_problem(version: str | bytes | None, namespace: str | bytes | None) -> str | None:
    """Why TensorRT's parser would not find this package's creator for these attribute values, or None."""
    version = PLUGIN_VERSION if version is None else _text(version)  # the parser's default version is "1"
    namespace = "" if namespace is None else _text(namespace)
    if version != PLUGIN_VERSION or namespace != PLUGIN_NAMESPACE:
        return (f"asks for plugin version {version!r} in namespace {namespace!r} (TensorRT's parser reads the "
                f"plugin_version/plugin_namespace attributes, never the domain); this package provides {SWISH_OP} "
                f"version {PLUGIN_VERSION!r} in namespace {PLUGIN_NAMESPACE!r}")
    return None


def attribute_problem(names) -> str | None:
    """Why a SwishBias node with these attribute names breaks the contract (beyond a `bias` attribute), or None."""
    extra = [str(n) for n in names if n not in PLUGIN_ATTRIBUTES and n != "bias"]
    if not extra:
        return None
    return (f"has attribute{'s' if len(extra) > 1 else ''} {', '.join(map(repr, extra))} that the plugin ignores "
            f"(TensorRT's parser passes a plugin only the fields its creator declares, and {SWISH_OP} declares none): "
            f"remove {'them' if len(extra) > 1 else 'it'}; {SWISH_OP} takes only {' and '.join(PLUGIN_ATTRIBUTES)}")


def x_dtype_problem(elem_type: int | None) -> str | None:
    """Why the plugin cannot take an x of this element type (None when it can or the type is unknown)."""
    if elem_type is not None and elem_type not in SWISH_ELEM_TYPES:
        return (f"dtype {elem_type_name(elem_type)} is not supported by the plugin "
                "(float32, float16, bfloat16 only)")
    return None


def bias_problem(x_type: ValueType, bias_type: ValueType) -> str | None:
    """Why the plugin cannot take this bias tensor for this x (dtype, layout), or None; unknown facts pass."""
    (x_elem, x_shape), (b_elem, b_shape) = x_type, bias_type
    if b_elem is not None and x_elem is not None and b_elem != x_elem:
        return f"bias dtype {elem_type_name(b_elem)} differs from x's {elem_type_name(x_elem)}"
    if b_elem is not None and (reason := x_dtype_problem(b_elem)) is not None:
        return f"bias {reason}"
    if b_shape is None or any(d is None for d in b_shape):
        return None
    return plugin_layout(x_shape, b_shape)[1] or None


def value_types(model: onnx.ModelProto) -> dict[str, ValueType]:
    """(elem_type, shape) of every tensor ONNX shape inference can type, initializers included."""
    try:
        model = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - best effort: what stays unknown is not checked
        pass
    types = {}
    for _, g in iter_graphs(model.graph):  # names are unique across scopes (SSA): one table for every body
        types.update({vi.name: value_type(vi.type) for vi in [*g.input, *g.value_info, *g.output]})
        types.update({t.name: (t.data_type, list(t.dims)) for t in g.initializer})
        for node in g.node:  # a Constant node's value is as good as an initializer
            if node.op_type == "Constant" and len(node.output) == 1:
                value = next((a.t for a in node.attribute if a.name == "value" and a.HasField("t")), None)
                if value is not None:
                    types.setdefault(node.output[0], (value.data_type, list(value.dims)))
    return types


def node_problem(node: onnx.NodeProto, types: Mapping[str, ValueType]) -> str | None:
    """Why the plugin would reject this SwishBias node (the first problem found), or None when it meets the contract."""
    if node.domain != SWISH_DOMAIN:
        return f"is in the unknown domain {node.domain!r}: the plugin's node is {SWISH_OP} in {SWISH_DOMAIN!r}"
    attrs = {a.name: a for a in node.attribute}
    for key in ("plugin_version", "plugin_namespace"):
        if key in attrs and attrs[key].type != _STRING:
            return f"has attribute {key} of type {_attr_type(attrs[key])}, not STRING"
    value = {k: onnx.helper.get_attribute_value(a) for k, a in attrs.items()}
    if (why := identity_problem(value.get("plugin_version"), value.get("plugin_namespace"))) is not None:
        return why
    inputs = list(node.input)
    if "bias" in attrs:
        where = f"a bias both as input {inputs[1]!r} and as " if len(inputs) == 2 and inputs[1] else ""
        return (f"has {where}attribute bias of type {_attr_type(attrs['bias'])}; the plugin has no fields: "
                f"{SWISH_OP} takes its bias as the second input [x, bias] (onnx_path.surgery.convert_seed_nodes "
                "converts the original material's attribute form)")
    if (why := attribute_problem(attrs)) is not None:
        return why
    if len(inputs) != 2 or "" in inputs:
        return f"has inputs {inputs}; {SWISH_OP} takes [x, bias]"
    if len(node.output) != 1:
        return f"has {len(node.output)} outputs; {SWISH_OP} has one"
    x_type = types.get(inputs[0], (None, None))
    if (why := x_dtype_problem(x_type[0])) is not None:
        return f"has an x whose {why}"
    why = bias_problem(x_type, types.get(inputs[1], (None, None)))
    return None if why is None else f"has an unusable bias input {inputs[1]!r}: {why}"


def model_problems(model: onnx.ModelProto, *, only: set[str] | None = None) -> list[str]:
    """'node LABEL: problem' for every SwishBias node (op_type match, any domain) that breaks it, in the main graph,
    in every If/Loop/Scan body (the label then says where) and in every call of a model-local function
    (function_problems).

    `only`: restrict to nodes with these names.
    """
    nodes = [(where, i, n) for where, g in iter_graphs(model.graph) for i, n in enumerate(g.node)
             if n.op_type == SWISH_OP and (only is None or n.name in only)]
    problems = []
    if nodes:
        types = value_types(model)
        problems = [f"{SWISH_OP} node {node_label(n, i)!r}{f' (in {where})' if where else ''} {why}"
                    for where, i, n in nodes if (why := node_problem(n, types)) is not None]
    return problems + function_problems(model, only=only)


def function_problems(model: onnx.ModelProto, *, only: set[str] | None = None) -> list[str]:
    """model_problems for the SwishBias nodes of the model-local functions, and a function that takes the plugin's name.

    Each call is checked on the model with its functions inlined (onnx_path.functions), with the attribute values
    the call gives and the dtypes shape inference finds there; as in the main graph, a type it cannot find is not
    checked. A node is named by its label in its function; a function no node calls never runs and is not checked.
    """
    problems = [f"model-local function {function_id(f)!r} has the plugin's op_type: TensorRT's ONNX parser would "
                f"import every {SWISH_OP} node as this function (it looks functions up by name before plugins), never "
                "the plugin; rename it" for f in model.functions if f.name == SWISH_OP]
    if not any(n.op_type == SWISH_OP for f in model.functions for n in function_nodes(f)):
        return problems
    try:
        inlined, origins = tagged_inline(model)
    except OnnxInputError as exc:
        return [*problems, f"the {SWISH_OP} nodes of the model-local functions cannot be checked: {exc}"]
    types = value_types(inlined)
    for where, node in ((w, n) for w, g in iter_graphs(inlined.graph) for n in g.node):
        if node.op_type != SWISH_OP or (key := origin(node)) is None:
            continue
        function, label, inside, written = origins[key]
        if only is not None and label not in only:
            continue
        # `where` runs down to the node: the call's place, then the bodies inside the function that hold the node.
        depth = inside.count(" / ") + 1 if inside else 0
        called = " / ".join(where.split(" / ")[:-depth]) if depth else where
        place = f"in function {function!r}{f', {inside}' if inside else ''}{f'; called in {called}' if called else ''}"
        # The call's attribute values and types, told in the names the function uses (the inliner renames values).
        shown = onnx.NodeProto()
        shown.CopyFrom(node)
        shown.input[:], shown.output[:] = written.input, written.output
        known = {mine: types.get(theirs, (None, None)) for mine, theirs in zip(written.input, node.input)}
        if (why := node_problem(shown, known)) is not None:
            problems.append(f"{SWISH_OP} node {label!r} ({place}) {why}")
    return list(dict.fromkeys(problems))  # one line per problem, however many calls share it


def check_swish_nodes(model: onnx.ModelProto, source: str = "model") -> None:
    """Raise SwishContractError (one line naming each bad node and its problem) unless every SwishBias node is valid."""
    problems = model_problems(model)
    if problems:
        raise SwishContractError(f"{source}: " + "; ".join(problems))
