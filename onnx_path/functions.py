"""Model-local functions (ONNX ``FunctionProto``): what the ONNX route does with them, in one place.

What each tool does with them, and what is refused: docs/onnx_route.md#model-local-functions.
"""
from __future__ import annotations

import collections
import contextlib

import onnx
import onnx.inliner

from torchtrt_swish._output import first_line

from .common import iter_graphs, node_label, subgraphs
from .model_file import OnnxInputError

# Node metadata key (a private copy only) saying which function node a node was inlined from: the inliner renames
# nodes and values.
ORIGIN_KEY = "torchtrt_swish.function"
_STANDARD_DOMAINS = ("", "ai.onnx")


def _show(key: tuple[str, str, str]) -> str:
    domain, name, overload = key
    return (f"{domain}::{name}" if domain else name) + (f"[{overload}]" if overload else "")


def function_id(item: onnx.FunctionProto | onnx.NodeProto) -> str:
    """How messages name a function (or the one a node calls): 'domain::name', 'name' in the ONNX domain, and
    '[overload]' after it when it has one."""
    return _show(_key(item))


def _domain(domain: str) -> str:
    return "" if domain in _STANDARD_DOMAINS else domain


def _key(item: onnx.NodeProto | onnx.FunctionProto) -> tuple[str, str, str]:
    """What a call (a node) and the function it calls have in common: domain, name (op_type) and overload."""
    name = item.name if isinstance(item, onnx.FunctionProto) else item.op_type
    return _domain(item.domain), name, item.overload


def called_functions(model: onnx.ModelProto) -> list[onnx.FunctionProto]:
    """The model's local functions that some node calls, from the main graph, a body or another called function."""
    local = {_key(f): f for f in model.functions}
    calls = {_key(n) for _, g in iter_graphs(model.graph) for n in g.node} & set(local)
    todo = list(calls)
    while todo:
        inner = {_key(n) for n in function_nodes(local[todo.pop()])} & set(local)
        todo += inner - calls
        calls |= inner
    return [f for key, f in local.items() if key in calls]


def _standard_op(name: str) -> bool:
    return onnx.defs.has(name, "")


def ambiguity_problem(model: onnx.ModelProto) -> str | None:
    """Why the nodes of `model` do not say which computation they mean (a function shadowing a standard op), or None."""
    for f in model.functions:
        if f.domain in _STANDARD_DOMAINS and _standard_op(f.name):
            return (f"model-local function {f.name!r} is in the ONNX domain and has the name of a standard op: ONNX "
                    "tools disagree about which one its nodes mean (onnx's inliner takes the function, ONNX Runtime "
                    "the op); give the function a domain of its own")
    return None


def _add_function_opsets(model: onnx.ModelProto, functions) -> None:
    """Import into `model` the domains its inlined nodes came with (the inliner leaves the imports as they were)."""
    have = {_domain(o.domain) for o in model.opset_import}
    for f in functions:
        for o in f.opset_import:
            if _domain(o.domain) not in have:
                model.opset_import.append(onnx.helper.make_opsetid(o.domain, o.version))
                have.add(_domain(o.domain))


def _give_defaults(nodes, local: dict) -> None:
    """Give each call among `nodes` the defaults (FunctionProto.attribute_proto) of the attributes it leaves out."""
    for node in nodes:
        if (f := local.get(_key(node))) is not None:
            given = {a.name for a in node.attribute}
            node.attribute.extend(a for a in f.attribute_proto if a.name not in given)


def _in_a_cycle(calls: dict) -> str | None:
    """A function that calls itself, directly or through others (`calls`: key -> the keys its nodes call)."""
    done, path = set(), []

    def visit(key) -> bool:
        if key in path:
            return True
        if key in done:
            return False
        path.append(key)
        found = any(visit(inner) for inner in calls[key])
        path.pop()
        done.add(key)
        return found

    return next((_show(key) for key in calls if visit(key)), None)


def inline_functions(model: onnx.ModelProto, source: str = "") -> onnx.ModelProto:
    """`model` with every call of a model-local function replaced by the function's nodes (onnx.inliner); `model`
    itself when it has no functions. OnnxInputError (its text starting 'SOURCE: ' when given) when they cannot be."""
    if not model.functions:
        return model
    where = f"{source}: " if source else ""
    if (why := ambiguity_problem(model)) is not None:
        raise OnnxInputError(f"{where}{why}")
    local = {_key(f): f for f in model.functions}
    calls = {key: {_key(n) for n in function_nodes(f)} & set(local) for key, f in local.items()}
    if (looping := _in_a_cycle(calls)) is not None:
        raise OnnxInputError(f"{where}the model-local functions cannot be inlined (function {looping!r} calls itself, "
                             "directly or through others: model-local functions must not be recursive)")
    out = onnx.ModelProto()
    out.CopyFrom(model)
    # onnx's inliner binds the attributes a call sets, never the function's defaults. So each round inlines the
    # called functions that no other of them calls, after giving their calls the defaults they leave out: a call
    # from a function body is inlined only once it stands where it runs, its references bound or left unset.
    while outer := {_key(n) for _, g in iter_graphs(out.graph) for n in g.node} & set(local):
        now = {key for key in outer if not any(key in calls[other] for other in outer)}
        _give_defaults((n for _, g in iter_graphs(out.graph) for n in g.node), local)
        del out.functions[:]
        out.functions.extend(local[key] for key in now)
        try:
            # convert_version: a function written for another ONNX opset than the model's is converted, not left
            # a call.
            out = onnx.inliner.inline_local_functions(out, convert_version=True)
        except Exception as exc:  # noqa: BLE001 - the inliner raises ValidationError, RuntimeError (C++ asserts), ...
            raise OnnxInputError(f"{where}the model-local functions cannot be inlined ({first_line(exc)})") from None
        if left := sorted(_show(key) for key in now & {_key(n) for _, g in iter_graphs(out.graph) for n in g.node}):
            raise OnnxInputError(f"{where}model-local function(s) {', '.join(left)} could not be inlined (onnx "
                                 "cannot convert them to the model's ONNX opset)")
    _add_function_opsets(out, model.functions)
    return out


def tagged_inline(model: onnx.ModelProto, source: str = ""):
    """(inline_functions of a copy, origins): each node of the copy's functions carries a key of `origins`, which
    maps it to (function, the node's label, where it is in the function, the node as the function writes it); see
    origin()."""
    tagged = onnx.ModelProto()
    tagged.CopyFrom(model)
    origins = {}
    for f in tagged.functions:
        for where, index, node in _indexed_nodes(f):
            key = str(len(origins))
            origins[key] = (function_id(f), node_label(node, index), where,
                            onnx.NodeProto.FromString(node.SerializeToString()))
            entry = node.metadata_props.add()
            entry.key, entry.value = ORIGIN_KEY, key
    return inline_functions(tagged, source), origins


def origin(node: onnx.NodeProto) -> str | None:
    """The origins key (tagged_inline) of a node inlined from a function, else None."""
    return next((e.value for e in node.metadata_props if e.key == ORIGIN_KEY), None)


# Nodes of these op_types are TensorRT's own importers (onnx-tensorrt's builtin op importers: the ONNX ops and a few
# names of its own); it looks a node up there first, by op_type alone, and only then among the model's functions.
_TENSORRT_OWN_NAMES = ("ImageScaler", "ParametricSoftplus", "ScaledTanh")


def _tensorrt_builtin(name: str) -> bool:
    return _standard_op(name) or name in _TENSORRT_OWN_NAMES or name.startswith("TRT_")


def tensorrt_function_problems(model: onnx.ModelProto) -> list[str]:
    """What TensorRT's ONNX parser would import otherwise than ONNX defines it, for each called local function.

    The parser (onnx-tensorrt's parseNode and LocalFunctionImporter) looks a node up by op_type alone: first among
    its built-in importers, then among the model's functions, keyed by name without the domain; and it resolves an
    attribute reference (ref_attr_name) against the innermost call only, so a reference passed on to a nested call
    arrives as an empty value.
    """
    called = called_functions(model)
    problems = []
    for f in called:
        if _tensorrt_builtin(f.name):
            problems.append(f"model-local function {function_id(f)!r} is called, but TensorRT's ONNX parser imports "
                            f"every node of op_type {f.name!r} as its built-in op, whatever the domain; rename the "
                            "function")
        if len(twins := [g for g in model.functions if g.name == f.name]) > 1:
            names = ", ".join(sorted(repr(function_id(g)) for g in twins))
            problems.append(f"model-local functions {names} share a name, and TensorRT's ONNX parser keys functions "
                            "by name alone (it would run one of them for every call); rename them")
    local = {_key(f): f for f in model.functions}
    calls = [(f"node {node_label(n, i)!r}{f' (in {where})' if where else ''}", None, n)
             for where, g in iter_graphs(model.graph) for i, n in enumerate(g.node)]
    calls += [(f"a node of function {function_id(f)!r}", f, n) for f in called for n in function_nodes(f)]
    for who, caller, node in calls:
        if (f := local.get(_key(node))) is None:
            continue
        if caller is not None and (passed := [a.name for a in node.attribute if a.ref_attr_name]):
            problems.append(
                f"model-local function {function_id(caller)!r} passes attribute(s) {', '.join(map(repr, passed))} on "
                f"to function {function_id(f)!r} by reference: TensorRT's ONNX parser resolves a reference only in "
                "the function that holds it, so the inner function would read an empty value; pass the value "
                "itself, or inline the functions")
        given = {a.name for a in node.attribute} | {a.name for a in f.attribute_proto}
        if unset := sorted({a.ref_attr_name for n in function_nodes(f) for a in n.attribute if a.ref_attr_name}
                           - given):
            problems.append(
                f"{who} calls function {function_id(f)!r} without its attribute(s) {', '.join(map(repr, unset))}, "
                "which has no default: ONNX leaves the attributes that refer to it unset, TensorRT's ONNX parser "
                "reads them as empty values; set them on the call")
    return list(dict.fromkeys(problems))


def _indexed_nodes(function: onnx.FunctionProto):
    """(where in the function, index in its graph, node) for a function's nodes and those of their bodies; `where`
    as iter_graphs says it ('' for the function's own nodes)."""
    for index, node in enumerate(function.node):
        yield "", index, node
        for attr, body in subgraphs(node):
            for where, graph in iter_graphs(body, f"{node.op_type} node {node_label(node, index)!r} {attr}"):
                for inner, child in enumerate(graph.node):
                    yield where, inner, child


def function_nodes(function: onnx.FunctionProto):
    """A function's nodes and the nodes of their If/Loop/Scan bodies."""
    return (node for _, _, node in _indexed_nodes(function))


def op_counts(model: onnx.ModelProto) -> collections.Counter:
    """Node count per op type of the model as it runs: the main graph and its bodies, each call of a model-local
    function counted as the function's nodes (custom domains prefixed, e.g. 'torchtrt_swish::SwishBias')."""
    with contextlib.suppress(OnnxInputError):  # functions onnx cannot inline: their calls count as nodes
        model = inline_functions(model)
    return collections.Counter(
        f"{n.domain}::{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type
        for _, g in iter_graphs(model.graph) for n in g.node
    )
