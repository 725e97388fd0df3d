"""Export models that call torchtrt_swish::swish to ONNX, the op becoming one SwishBias node.

The two exporters and what an export is checked for: docs/onnx_route.md#export.
"""
from __future__ import annotations

import copy
import functools
import inspect
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import onnx
import torch

import torchtrt_swish  # noqa: F401  (loads the op so torch.ops.torchtrt_swish.swish exists)
from torchtrt_swish.dtypes import DTYPES, parse_dtype

from .common import all_nodes, node_label
from .contract import PLUGIN_NAMESPACE, PLUGIN_VERSION, SWISH_DOMAIN, SWISH_OP, bias_problem, is_swish_node, value_types
from .model_file import load_model, save_model
from .models import flush_denormals

MIN_OPSET = 11
DEFAULT_TORCHSCRIPT_OPSET = 17
# ONNX admits bfloat16 for Conv (and most other ops) from opset 22 on: the default opset of a bfloat16 export.
BFLOAT16_MIN_OPSET = 22
EXPORTERS = ("torchscript", "dynamo")


class ExportError(RuntimeError):
    """The export could not be done as asked (unsupported exporter/opset, failed check)."""


# --------------------------------------------------------------------------------------------- TorchScript exporter


def _swish_symbolic(g, x, bias):
    # setType keeps the output's shape/dtype in the graph: without it TorchScript's shape inference loses track of
    # everything downstream of a custom node (torch's register_custom_op_symbolic docstring recommends it).
    return g.op(
        f"{SWISH_DOMAIN}::{SWISH_OP}",
        x,
        bias,
        plugin_version_s=PLUGIN_VERSION,
        plugin_namespace_s=PLUGIN_NAMESPACE,
    ).setType(x.type())


@functools.cache
def register_torchscript_symbolic() -> None:
    """Register the TorchScript-exporter symbolic for torchtrt_swish::swish (idempotent; applies to opset >= 11)."""
    # A registration at opset N serves every opset >= N in the TorchScript exporter's registry.
    torch.onnx.register_custom_op_symbolic("torchtrt_swish::swish", _swish_symbolic, MIN_OPSET)


# ------------------------------------------------------------------------------------------ torch.export exporter


def dynamo_supported() -> bool:
    """Whether this torch's torch.onnx.export has the dynamo path with custom_translation_table."""
    try:
        import onnxscript  # noqa: F401
    except ImportError:
        return False
    return "custom_translation_table" in inspect.signature(torch.onnx.export).parameters


@functools.cache
def swish_translation_table() -> dict:
    """custom_translation_table for the dynamo exporter: torchtrt_swish.swish.default -> onnxscript SwishBias."""
    from ._onnxscript_swish import swish_bias

    return {torch.ops.torchtrt_swish.swish.default: swish_bias}


# ----------------------------------------------------------------------------------------------------- the API


def dynamic_axes_spec(
    input_names: Sequence[str], example_inputs: Sequence[torch.Tensor], *, batch: bool = True, spatial: bool = False
) -> dict[str, dict[int, str]]:
    """Named dynamic axes per input: axis 0 'batch'; with spatial, the last two axes 'height'/'width' of 4-D inputs."""
    spec: dict[str, dict[int, str]] = {}
    for name, t in zip(input_names, example_inputs):
        axes: dict[int, str] = {}
        if batch and t.dim() >= 1:
            axes[0] = "batch"
        if spatial and t.dim() == 4:
            axes[2], axes[3] = "height", "width"
        elif spatial and t.dim() == 3:
            axes[2] = "length"
        if axes:
            spec[name] = axes
    return spec


def _rename_dim_params(model: onnx.ModelProto, renames: Mapping[str, str]) -> None:
    """Replace exporter-chosen symbol names (s77, ...) by ours everywhere they appear in the graph's type info."""
    if not renames:
        return
    # Whole-token replacement: derived sizes are written as expressions of the symbols ("s53 - 2").
    pattern = re.compile(r"\b(" + "|".join(re.escape(k) for k in renames) + r")\b")
    g = model.graph
    for vi in [*g.input, *g.output, *g.value_info]:
        for dim in vi.type.tensor_type.shape.dim:
            if dim.HasField("dim_param"):
                dim.dim_param = pattern.sub(lambda m: renames[m.group(1)], dim.dim_param)


def export_onnx(
    model: torch.nn.Module,
    example_inputs: torch.Tensor | Sequence[torch.Tensor],
    path: str | Path | None = None,
    *,
    exporter: str = "torchscript",
    opset: int | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    dynamic_batch: bool = True,
    dynamic_spatial: bool = False,
    dtype: str | torch.dtype | None = None,
    check: bool = True,
) -> onnx.ModelProto:
    """Export `model` with either exporter; returns the (checked) ModelProto and saves it when `path` is given."""
    if exporter not in EXPORTERS:
        raise ExportError(f"unknown exporter {exporter!r}; choose one of {', '.join(EXPORTERS)}")
    args = tuple(example_inputs) if isinstance(example_inputs, (list, tuple)) else (example_inputs,)
    model = model.eval()
    if opset is not None and int(opset) > onnx.defs.onnx_opset_version():
        raise ExportError(f"opset {opset} does not exist: onnx {onnx.__version__} knows opsets up to "
                          f"{onnx.defs.onnx_opset_version()}")
    bfloat16 = dtype is not None and parse_dtype(dtype) == torch.bfloat16
    if bfloat16 and opset is None:
        opset = BFLOAT16_MIN_OPSET
    if dtype is not None:
        tdtype = parse_dtype(dtype)
        model = copy.deepcopy(model).to(tdtype)  # Module.to is in place: leave the caller's model as it was
        args = tuple(a.to(tdtype) if a.is_floating_point() else a for a in args)
    input_names = list(input_names or (["x"] if len(args) == 1 else [f"x{i}" for i in range(len(args))]))
    output_names = list(output_names or ["y"])
    axes = dynamic_axes_spec(input_names, args, batch=dynamic_batch, spatial=dynamic_spatial)

    try:
        # The exporters run the model: subnormals (randomly initialized nets, half types) make that ~5x slower.
        with flush_denormals():
            if exporter == "torchscript":
                onnx_model = _export_torchscript(model, args, opset, input_names, output_names, axes, dynamic_batch)
            else:
                onnx_model = _export_dynamo(model, args, opset, input_names, output_names, axes)
    except (RuntimeError, ValueError) as exc:
        # The exporters say "Unsupported onnx_opset_version: 24" (TorchScript) or fail in ONNX's version converter.
        if opset is not None and "version" in str(exc).lower():
            first = str(exc).strip().splitlines()[-1]
            raise ExportError(f"opset {opset} is not supported by the {exporter} exporter of torch "
                              f"{torch.__version__} ({first})") from exc
        raise
    if check:
        if problems := bias_layout_problems(onnx_model):
            raise ExportError("; ".join(problems))
        try:
            check_onnx(onnx_model)
        except ExportError as exc:
            if bfloat16 and "bfloat16" in str(exc) and int(opset) < BFLOAT16_MIN_OPSET:
                raise ExportError(f"opset {opset} does not admit bfloat16 for every op of this model (Conv takes it "
                                  f"from opset {BFLOAT16_MIN_OPSET}): export with opset >= {BFLOAT16_MIN_OPSET} "
                                  f"(the default for bfloat16); {exc}") from exc
            raise
    if path is not None:
        save_model(onnx_model, path)
    return onnx_model


def _export_torchscript(model, args, opset, input_names, output_names, axes, dynamic_batch) -> onnx.ModelProto:
    import io
    import warnings

    opset = DEFAULT_TORCHSCRIPT_OPSET if opset is None else int(opset)
    if opset < MIN_OPSET:
        raise ExportError(f"opset {opset} is too old: the SwishBias export needs opset >= {MIN_OPSET}")
    register_torchscript_symbolic()
    dynamic_axes = dict(axes)
    if dynamic_batch:
        for name in output_names:
            dynamic_axes.setdefault(name, {})[0] = "batch"
    buf = io.BytesIO()
    with warnings.catch_warnings():
        # The legacy exporter announces its deprecation on every call; the seed route uses it on purpose.
        warnings.simplefilter("ignore", DeprecationWarning)
        # It also says any opset above 20 "is not supported"; we choose 22 on purpose (the bfloat16 default: the
        # first where Conv takes bfloat16), the exporter writes the ops at 22, and check_onnx verifies them there.
        warnings.filterwarnings("ignore", category=torch.onnx.errors.OnnxExporterWarning,
                                message=f"Exporting to ONNX opset version {BFLOAT16_MIN_OPSET} is not supported")
        torch.onnx.export(
            model,
            args,
            buf,
            dynamo=False,
            opset_version=opset,
            input_names=input_names,
            output_names=output_names,
            dynamic_axes=dynamic_axes or None,
            # no custom_opsets: the custom domain gets version 1 by default, and naming it for a model without
            # the op makes the exporter warn about an unused domain.
        )
    return onnx.load_from_string(buf.getvalue())


def _export_dynamo(model, args, opset, input_names, output_names, axes) -> onnx.ModelProto:
    if not dynamo_supported():
        raise ExportError(
            f"torch {torch.__version__} has no dynamo ONNX exporter with custom_translation_table "
            "(or onnxscript is missing): use exporter='torchscript'"
        )
    if opset is not None and int(opset) < 18:
        raise ExportError(f"opset {opset}: the dynamo exporter emits opset >= 18")
    # Dim.DYNAMIC rather than a named Dim: torch.export refuses a named Dim whose example size is 1 (it
    # specializes 0/1 sizes); the exporter's own symbol names are renamed to ours afterwards.
    dynamic_shapes = tuple(
        {axis: torch.export.Dim.DYNAMIC for axis in axes.get(name, {})} or None for name in input_names
    )
    program = torch.onnx.export(
        model,
        args,
        dynamo=True,
        opset_version=opset,
        input_names=input_names,
        output_names=output_names,
        dynamic_shapes=dynamic_shapes if any(d is not None for d in dynamic_shapes) else None,
        custom_translation_table=swish_translation_table(),
        verbose=False,
    )
    onnx_model = program.model_proto
    renames: dict[str, str] = {}
    graph_inputs = {vi.name: vi for vi in onnx_model.graph.input}
    for name, spec in axes.items():
        dims = graph_inputs[name].type.tensor_type.shape.dim
        for axis, wanted in spec.items():
            if dims[axis].HasField("dim_param"):
                renames[dims[axis].dim_param] = wanted
    _rename_dim_params(onnx_model, renames)
    return onnx_model


def bias_layout_problems(model: onnx.ModelProto) -> list[str]:
    """'SwishBias node LABEL: why' for each exported node whose bias the plugin rejects (layout, dtype)."""
    types = value_types(model)
    problems = []
    for where, index, node in all_nodes(model):
        if not is_swish_node(node) or len(node.input) != 2:
            continue
        why = bias_problem(types.get(node.input[0], (None, None)), types.get(node.input[1], (None, None)))
        if why is not None:
            place = f" (in {where})" if where else ""
            problems.append(f"{SWISH_OP} node {node_label(node, index)!r}{place}: {why}; the plugin rejects this bias "
                            "at build time (it runs a scalar, per-channel (dim 1 or last dim) or full-shape bias, "
                            "on axes that are not dynamic): change the bias, export static shapes, or pass "
                            "check=False to write the node anyway")
    return problems


def check_onnx(model: onnx.ModelProto | str | Path) -> onnx.ModelProto:
    """Run onnx.checker (full check) and strict shape inference; returns the shape-inferred model."""
    proto = load_model(model) if isinstance(model, (str, Path)) else model
    try:
        onnx.checker.check_model(proto, full_check=True)
        return onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True, data_prop=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        raise ExportError(f"exported model failed the ONNX check: {exc}") from exc
