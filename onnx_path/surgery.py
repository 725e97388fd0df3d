"""Graph surgery with onnx-graphsurgeon: turn swish-like subgraphs of any ONNX model into SwishBias nodes.

Each pass is a small function registered on ``gs.Graph``, and ``run_surgery`` runs them; what each pass matches, folds
and refuses: docs/onnx_route.md#surgery-passes.
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np
import onnx
import onnx_graphsurgeon as gs
from onnx_graphsurgeon.logger import G_LOGGER

from torchtrt_swish.layout import SCALAR, plugin_layout

from .common import numpy_dtype_for, text_attribute_problem
from .contract import (
    PLUGIN_NAMESPACE,
    PLUGIN_VERSION,
    SWISH_DOMAIN,
    SWISH_OP,
    bias_problem,
    model_problems,
    x_dtype_problem,
)
from .model_file import OnnxInputError, OnnxModel, with_inferred_types
from .functions import called_functions, function_id, inline_functions, op_counts
from .surgery_model import (
    check_emitted,
    hide_non_tensor_types,
    initializers_as_inputs,
    prune_unused_domains,
    restore_types,
)
from .surgery_report import Refusal, Replacement, SurgeryReport
from .surgery_values import EXTERNAL_DIR, attr_str, const_values, elem_type, is_std, plain_constant

SEED_NAMES = ("Swish", "EfficientSwish")
SEED000_DOMAIN = "custom"
SEED001_DOMAIN = "ai.onnx.contrib"
SEED000_KIND = "original-torchscript"
SEED001_KIND = "original-ort-contrib"
PASSES = ("seed", "onnx-swish", "sigmoid-mul")


# ------------------------------------------------------------------------------------------------------ helpers


def _describe(values: np.ndarray, layout: str) -> str:
    if values.size == 1:
        return f"{float(values.reshape(-1)[0]):g} ({layout})"
    return f"{list(values.shape)} ({layout})"


def _unique(base: str, taken: set[str]) -> str:
    name, i = base, 1
    while name in taken:
        name, i = f"{base}_{i}", i + 1
    taken.add(name)
    return name


class _Names:
    """Unique node/tensor names for new objects (never used to *find* anything), across the graph and its bodies."""

    def __init__(self, graph: gs.Graph):
        self.taken = set()
        for g in (graph, *graph.subgraphs(recursive=True)):
            self.taken |= {n.name for n in g.nodes} | set(g.tensors().keys())

    def __call__(self, base: str) -> str:
        return _unique(base, self.taken)


def _detach(*nodes: gs.Node | None) -> None:
    # Clearing both lists unhooks the node from its tensors; cleanup() then drops it.
    for n in nodes:
        if n is not None:
            n.inputs.clear()
            n.outputs.clear()


# ----------------------------------------------------------------------------------------- registered passes


@gs.Graph.register()
def swish_bias(self, x, bias, output, *, name=None):
    """Add a SwishBias node producing `output` from `x` and the tensor `bias`."""
    attrs = {"plugin_version": PLUGIN_VERSION, "plugin_namespace": PLUGIN_NAMESPACE}
    node = gs.Node(op=SWISH_OP, name=name, attrs=attrs, inputs=[x, bias], outputs=[output], domain=SWISH_DOMAIN)
    self.nodes.append(node)
    return node


def _constant_bias(x: gs.Tensor, value: float, shape: tuple, names: _Names, base: str) -> gs.Constant | None:
    """A constant bias of x's dtype filled with float32(value); None when x's dtype is unknown."""
    et = elem_type(x)
    if et is None:
        return None
    return gs.Constant(names(f"{base}/bias"), np.full(shape, np.float32(value)).astype(numpy_dtype_for(et)))


def _bias_input(graph: gs.Graph, x: gs.Tensor, tensor: gs.Tensor, label: str, names: _Names, base: str):
    """(bias, description) for a constant `tensor` the plugin takes as x's bias, else why not (`label` names it)."""
    values = const_values(tensor, graph)
    if values is None:
        what = "a graph input" if any(tensor is t for t in graph.inputs) else "not a constant"
        return f"{label} {tensor.name!r} is {what}"
    x_type = (elem_type(x), None if x.shape is None else list(x.shape))
    if (why := bias_problem(x_type, (onnx.helper.np_dtype_to_tensor_dtype(values.dtype), list(values.shape)))):
        return why
    # A sparse initializer becomes a dense constant of its own dtype: the plugin takes a dense bias tensor.
    bias = tensor if plain_constant(tensor) else gs.Constant(names(f"{base}/bias"), values)
    return bias, _describe(values, plugin_layout(x.shape, values.shape)[0])


def _foldable_add(graph: gs.Graph, x: gs.Tensor, y: gs.Tensor, names: _Names, base: str):
    """(add node, bias tensor, bias description, note) for an Add of a constant after `y`, else (None, ..., note)."""
    if len(y.outputs) != 1 or y in graph.outputs:
        return None, None, None, ""
    add = y.outputs[0]
    if not is_std(add, "Add") or len(add.inputs) != 2 or add.inputs[0] is add.inputs[1]:
        return None, None, None, ""
    other = add.inputs[1] if add.inputs[0] is y else add.inputs[0]
    match = _bias_input(graph, x, other, "its other input", names, base)
    if isinstance(match, str):
        return None, None, None, f"following Add not folded: {match}"
    return add, *match, ""


def _replace(graph, names, kind, matched, x, y, fold_bias):
    """Swap `matched` (computing y from x) and an optional constant Add for one SwishBias: a Replacement, or the
    Refusal when x's dtype, which a bias constant needs, is unknown."""
    base = matched[0].name or kind
    add, bias, desc, note = _foldable_add(graph, x, y, names, base) if fold_bias else (None, None, None, "")
    if bias is None:
        bias = _constant_bias(x, 0.0, (1,) if x.shape is not None and len(x.shape) >= 1 else (), names, base)
        if bias is None:
            return Refusal(kind, matched[0].name, "x's dtype is unknown (run shape inference first)")
        desc = "0 (scalar)"
    final = add.outputs[0] if add is not None else y
    replaced = [n.name for n in [*matched, add] if n is not None]
    _detach(*matched, add)
    node = graph.swish_bias(x, bias, final, name=names(f"{base}/SwishBias"))
    return Replacement(kind=f"{kind}-add" if add is not None else kind, replaced=replaced, node=node.name,
                       output=final.name, bias=desc, note=note)


@gs.Graph.register()
def fuse_sigmoid_mul(self, fold_bias=True, names=None):
    """Fuse Sigmoid(x) -> Mul(x, .) [-> Add(const)] into SwishBias; returns (replacements, refusals)."""
    names, done, refused = names or _Names(self), [], []
    for sig in list(self.nodes):
        if not is_std(sig, "Sigmoid") or len(sig.inputs) != 1 or len(sig.outputs) != 1:
            continue
        x, s = sig.inputs[0], sig.outputs[0]
        muls = [n for n in s.outputs if is_std(n, "Mul") and len(n.inputs) == 2
                and {id(n.inputs[0]), id(n.inputs[1])} == {id(x), id(s)}]
        if not muls:
            continue  # sigmoid used as a gate on another tensor: not a swish
        mul = muls[0]
        if len(s.outputs) > 1 or s in self.outputs:
            refused.append(Refusal("sigmoid-mul", sig.name, "the Sigmoid output is also used elsewhere "
                                                            "(graph output or another consumer)"))
            continue
        if (reason := x_dtype_problem(elem_type(x))) is not None:
            refused.append(Refusal("sigmoid-mul", sig.name, reason))
            continue
        rep = _replace(self, names, "sigmoid-mul", [sig, mul], x, mul.outputs[0], fold_bias)
        (done if isinstance(rep, Replacement) else refused).append(rep)
    return done, refused


@gs.Graph.register()
def convert_onnx_swish(self, fold_bias=True, names=None):
    """Convert standard ONNX Swish nodes with alpha == 1 into SwishBias; returns (replacements, refusals)."""
    names, done, refused = names or _Names(self), [], []
    for node in list(self.nodes):
        if not is_std(node, "Swish") or len(node.inputs) != 1 or len(node.outputs) != 1:
            continue
        alpha = float(node.attrs.get("alpha", 1.0))
        if alpha != 1.0:
            refused.append(Refusal("onnx-swish", node.name, f"alpha={alpha:g}: only alpha=1 is x*sigmoid(x)"))
            continue
        if (reason := x_dtype_problem(elem_type(node.inputs[0]))) is not None:
            refused.append(Refusal("onnx-swish", node.name, reason))
            continue
        rep = _replace(self, names, "onnx-swish", [node], node.inputs[0], node.outputs[0], fold_bias)
        (done if isinstance(rep, Replacement) else refused).append(rep)
    return done, refused


def _malformed(node: gs.Node, why: str) -> OnnxInputError:
    return OnnxInputError(f"original-format node {node.name!r} {why}")


def _parse_info(node: gs.Node, text: str):
    """json.loads(text); None when it is not JSON; OnnxInputError for a number too large to parse."""
    try:
        return json.loads(text)
    except ValueError as exc:
        # Python refuses integers of over 4300 digits (a ValueError of its own): malformed, not merely "not JSON".
        if "integer string conversion" in str(exc):
            raise _malformed(node, "has an info holding a number too large to parse") from None
        return None


def _decode_info(node: gs.Node, values: np.ndarray | None) -> dict | None:
    if values is None or values.dtype.kind not in "iu" or values.ndim > 1:
        return None
    try:
        text = bytes(int(c) for c in values.reshape(-1)).decode("utf-8")
    except ValueError:  # codes outside 0..255
        return None
    except UnicodeDecodeError:
        raise _malformed(node, "has an info input whose character codes are not UTF-8 text") from None
    info = _parse_info(node, text)
    return info if isinstance(info, dict) else None


def _check_seed_structure(node: gs.Node, max_inputs: int) -> None:
    """OnnxInputError unless the node has x (and at most `max_inputs` inputs) and exactly one output."""
    if not node.inputs:
        raise _malformed(node, "has no inputs: the swish takes x (and a bias)")
    if len(node.inputs) > max_inputs:
        raise _malformed(node, f"has {len(node.inputs)} inputs: the swish takes at most {max_inputs}")
    if len(node.outputs) != 1:
        raise _malformed(node, "has no outputs: the swish has one" if not node.outputs else
                         f"has {len(node.outputs)} outputs: the swish has one")


def _seed_match(node: gs.Node, graph: gs.Graph):
    """(info, bias tensor or None) for a seed-format swish node, or a refusal reason string, or None.

    OnnxInputError for a malformed one (no inputs, not one output, a number too large to parse).
    """
    if node.domain == SEED000_DOMAIN and node.op == "Plugin":
        if attr_str(node, "name") not in SEED_NAMES:
            return None  # another plugin of the seed's framework
        _check_seed_structure(node, 2)
        raw = attr_str(node, "info") or "{}"
        if (info := _parse_info(node, raw)) is None:
            return f"info attribute is not JSON: {raw[:60]!r}"
        return info if isinstance(info, dict) else {}, node.inputs[1] if len(node.inputs) > 1 else None
    if node.domain == SEED001_DOMAIN and node.op in ("Plugin", *SEED_NAMES):
        if node.op != "Plugin":
            _check_seed_structure(node, 3)
        info = _decode_info(node, const_values(node.inputs[1], graph)) if len(node.inputs) > 1 else None
        if info is None:
            return None if node.op == "Plugin" else "second input is not a Constant of character codes holding JSON"
        if node.op == "Plugin":  # a generic Plugin is ours only once its info names a swish
            if info.get("name") not in SEED_NAMES:
                return None
            _check_seed_structure(node, 3)
        return info, node.inputs[2] if len(node.inputs) > 2 else None
    return None


def _info_bias(node: gs.Node, value: int | float, x_elem: int | None) -> float:
    """The info's bias as a float that stays finite in float32 and in x's dtype; OnnxInputError naming it otherwise."""
    # JSON admits NaN, Infinity, 1e400 (read as inf) and integers of any length: none is a bias the plugin can use.
    shown = f"{value:.6g}" if isinstance(value, float) else (str(value) if len(str(value)) <= 20 else
                                                             f"an integer of {len(str(value))} digits")
    try:
        wide = float(value)
    except OverflowError:
        wide = math.inf
    with np.errstate(over="ignore"):
        narrow = np.float32(wide)
        in_x = narrow.astype(numpy_dtype_for(x_elem)) if x_elem is not None else narrow
    if not math.isfinite(wide) or not np.isfinite(narrow):
        raise _malformed(node, f"has an info bias {shown} that is not a finite float32 number (the original "
                               "material stored the bias as a float32 attribute)")
    if not np.isfinite(in_x):
        raise _malformed(node, f"has an info bias {shown} that overflows x's dtype "
                               f"{onnx.TensorProto.DataType.Name(x_elem)}")
    return wide


@gs.Graph.register()
def convert_seed_swish(self, names=None):
    """Convert the original material's swish nodes (custom::Plugin, ai.onnx.contrib); returns (replaced, refused)."""
    names, done, refused = names or _Names(self), [], []
    for node in list(self.nodes):
        match = _seed_match(node, self)
        if match is None:
            continue
        kind = SEED000_KIND if node.domain == SEED000_DOMAIN else SEED001_KIND
        if isinstance(match, str):
            refused.append(Refusal(kind, node.name, match))
            continue
        info, bias_in = match
        x, y = node.inputs[0], node.outputs[0]
        if (reason := x_dtype_problem(elem_type(x))) is not None:
            refused.append(Refusal(kind, node.name, reason))
            continue
        if bias_in is not None:
            # A bias the plugin cannot take (dtype, layout) would only fail at run or build time: refused here.
            match = _bias_input(self, x, bias_in, "bias input", names, node.name)
            if isinstance(match, str):
                refused.append(Refusal(kind, node.name, match))
                continue
            bias, desc = match
        elif isinstance(info.get("bias"), (int, float)) and not isinstance(info.get("bias"), bool):
            bias = _constant_bias(x, _info_bias(node, info["bias"], elem_type(x)), (), names, node.name or kind)
            if bias is None:
                refused.append(Refusal(kind, node.name, "x's dtype is unknown (run shape inference first), so the "
                                                        "bias constant's dtype cannot be chosen"))
                continue
            desc = _describe(bias.values, SCALAR)
        else:
            refused.append(Refusal(kind, node.name, "no bias: neither a bias input nor a numeric 'bias' in info"))
            continue
        _detach(node)
        new = self.swish_bias(x, bias, y, name=names(f"{node.name or kind}/SwishBias"))
        done.append(Replacement(kind=kind, replaced=[node.name], node=new.name, output=y.name, bias=desc))
    return done, refused


# ------------------------------------------------------------------------------------------------- model level


def run_surgery(model: OnnxModel | onnx.ModelProto, passes: Sequence[str] = PASSES, *, fold_bias: bool = True
                ) -> tuple[OnnxModel | onnx.ModelProto, SurgeryReport]:
    """Run the chosen passes ('seed', 'onnx-swish', 'sigmoid-mul') on a model; returns (new model, report).

    The new model is of the kind given: an OnnxModel's external tensors stay in its folder, unread unless a pass
    needs one's values (a bias).
    """
    opened = OnnxModel.of(model)
    token = EXTERNAL_DIR.set(str(opened.folder or ""))
    try:
        fused, report = _run_surgery(opened.proto, passes, fold_bias)
    finally:
        EXTERNAL_DIR.reset(token)
    return (opened.with_proto(fused) if isinstance(model, OnnxModel) else fused), report


def _run_surgery(model: onnx.ModelProto, passes: Sequence[str], fold_bias: bool):
    unknown = [p for p in passes if p not in PASSES]
    if unknown:
        raise ValueError(f"unknown surgery pass(es) {unknown}; choose from {', '.join(PASSES)}")
    if (why := text_attribute_problem(model)) is not None:
        raise OnnxInputError(why)  # graphsurgeon (and TensorRT's parser) read string attributes as UTF-8
    report = SurgeryReport(counts_before=dict(op_counts(model)))
    # Patterns inside model-local functions are fused like the main graph's: on the model with its calls inlined.
    flat = inline_functions(model)
    # Initializers also listed as graph inputs are defaults the caller may override. graphsurgeon would import them
    # as constants (and export them as plain initializers): take them out, so they are graph inputs to the passes
    # (never folded), and put the defaults back afterwards.
    overridable = {i.name for i in model.graph.input} & {t.name for t in model.graph.initializer}
    defaults = [t for t in model.graph.initializer if t.name in overridable]
    work = onnx.ModelProto()
    work.CopyFrom(flat)
    if defaults:
        kept = [t for t in work.graph.initializer if t.name not in overridable]
        del work.graph.initializer[:]
        work.graph.initializer.extend(kept)
    try:
        # Intermediate dtypes/shapes are needed for the dtype and bias-layout checks.
        inferred = with_inferred_types(work)
    except Exception:  # noqa: BLE001 - inference is best effort; unknown types lead to refusals, not errors
        inferred = work
    hidden = hide_non_tensor_types(inferred)
    with G_LOGGER.suppress(G_LOGGER.ERROR):  # its warnings are about values the passes never read (stdout noise)
        graph = gs.import_onnx(inferred)
    graphs = [graph, *graph.subgraphs(recursive=True)]  # If/Loop/Scan bodies are fused like the main graph
    taken = {n.name for g in graphs for n in g.nodes if n.name}
    for g in graphs:
        for index, node in enumerate(g.nodes):
            if not node.name:
                node.name = _unique(f"{node.op}_{index}", taken)
    names = _Names(graph)
    steps = {"seed": lambda g: g.convert_seed_swish(names=names),
             "onnx-swish": lambda g: g.convert_onnx_swish(fold_bias, names=names),
             "sigmoid-mul": lambda g: g.fuse_sigmoid_mul(fold_bias, names=names)}
    for name in PASSES:  # fixed order: seeds first, then ONNX Swish, then the generic pattern
        if name not in passes:
            continue
        for g in graphs:
            done, refused = steps[name](g)
            report.replaced += done
            report.refused += refused
    if not report.replaced:
        out = onnx.ModelProto()
        out.CopyFrom(model)
    else:
        graph.cleanup().toposort()
        out = gs.export_onnx(graph, do_type_check=False)
        restore_types(out, hidden)
        still_inputs = {i.name for i in out.graph.input}
        out.graph.initializer.extend(t for t in defaults if t.name in still_inputs)
        out.ir_version = model.ir_version
        if out.ir_version < 4:
            initializers_as_inputs(out)
        out.producer_name, out.producer_version = model.producer_name, model.producer_version
        del out.metadata_props[:]
        out.metadata_props.extend(model.metadata_props)
        prune_unused_domains(out)
        report.inlined = [function_id(f) for f in called_functions(model)]
        # The passes check the contract before they replace anything; a node they emit that breaks it is a bug here.
        if problems := model_problems(out, only={r.node for r in report.replaced}):
            raise RuntimeError("surgery emitted nodes that break the SwishBias contract: " + "; ".join(problems))
        check_emitted(model, out)
    report.counts_after = dict(op_counts(out))
    return out, report


def convert_seed_nodes(model: onnx.ModelProto) -> tuple[onnx.ModelProto, SurgeryReport]:
    """Only the seed-format conversion."""
    return run_surgery(model, ("seed",))


def fuse_swish(model: onnx.ModelProto, *, fold_bias: bool = True) -> tuple[onnx.ModelProto, SurgeryReport]:
    """ONNX Swish conversion and Sigmoid/Mul(/Add) fusion, for third-party models."""
    return run_surgery(model, ("onnx-swish", "sigmoid-mul"), fold_bias=fold_bias)
