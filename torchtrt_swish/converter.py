"""Torch-TensorRT converter: torchtrt_swish.swish.default -> the C++ ``SwishBias`` plugin (IPluginV3).

Whether a node can go to TensorRT is a plain function of the FX node, testable without TensorRT, which is imported
only where needed; the API calls used here: docs/torch_tensorrt_api.md.
"""
from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Sequence
from typing import Any

import torch

from .layout import (  # noqa: F401  (re-exported: the converter's layout vocabulary)
    ACCEPTED_LAYOUTS,
    BLOCK,
    FULL,
    PER_CHANNEL_DIM1,
    PER_CHANNEL_LAST,
    SCALAR,
    classify_bias,
    format_shape,
    plugin_layout,
)
from .dtypes import DTYPES
from .plugin import PLUGIN_NAME, PLUGIN_NAMESPACE, PLUGIN_VERSION, load_plugin

# A child of the "torch_tensorrt" logger: torch_tensorrt.logging.debug() / set_level() then show our reasons next to
# the registry's own "Skipping option ..." lines, and nothing is printed at the default level.
_LOGGER = logging.getLogger("torch_tensorrt.dynamo.conversion.torchtrt_swish")

SUPPORTED_DTYPES = tuple(DTYPES.values())  # what the plugin's kernels take


def swish_op() -> Any:
    """The OpOverload the converter is registered for: torch.ops.torchtrt_swish.swish.default."""
    return torch.ops.torchtrt_swish.swish.default


# --------------------------------------------------------------------------------------------------------------
# Capability validator (plain function of the FX node; no TensorRT needed for the dtype/layout decisions).
# --------------------------------------------------------------------------------------------------------------


def _static(d: Any) -> int | None:
    if isinstance(d, int):
        return d
    try:  # a SymInt that is really a constant (e.g. specialized) still counts as static
        return d.node.maybe_as_int()
    except Exception:  # noqa: BLE001
        return None


def _fetch_attr(node: torch.fx.Node) -> Any:
    obj: Any = node.graph.owning_module
    for part in str(node.target).split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def tensor_info(arg: Any) -> tuple[tuple[int | None, ...], torch.dtype] | None:
    """(shape with None for dynamic dims, dtype) of an FX node argument, from its metadata; None if unknown."""
    val: Any = arg
    if isinstance(arg, torch.fx.Node):
        val = arg.meta.get("val")
        if val is None:
            val = arg.meta.get("tensor_meta")  # TensorMetadata: has .shape and .dtype
        if val is None and arg.op == "get_attr":
            # Torch-TensorRT's constant folding creates get_attr nodes that may carry no metadata.
            val = _fetch_attr(arg)
    if val is None or not hasattr(val, "shape") or not hasattr(val, "dtype"):
        return None
    return tuple(_static(d) for d in val.shape), val.dtype


def _swish_args(node: torch.fx.Node) -> tuple[Any, Any]:
    x = node.args[0] if len(node.args) > 0 else node.kwargs.get("x")
    bias = node.args[1] if len(node.args) > 1 else node.kwargs.get("bias")
    return x, bias


def node_support(node: torch.fx.Node) -> tuple[bool, str]:
    """Whether the SwishBias plugin can run this swish node: (True, layout) or (False, reason)."""
    x, bias = _swish_args(node)
    xi, bi = tensor_info(x), tensor_info(bias)
    if xi is None or bi is None:
        return False, "no shape/dtype metadata on the inputs"
    (x_shape, x_dtype), (b_shape, b_dtype) = xi, bi
    if x_dtype not in SUPPORTED_DTYPES:
        return False, f"dtype {x_dtype} is not supported by the plugin (float32, float16, bfloat16 only)"
    if b_dtype != x_dtype:
        return False, f"bias dtype {b_dtype} differs from x dtype {x_dtype}"
    if any(d is None for d in b_shape):
        return False, f"bias shape {format_shape(b_shape)} is dynamic; the plugin needs a static bias"
    layout, why = plugin_layout(x_shape, b_shape)  # type: ignore[arg-type]
    return (False, why) if layout is None else (True, layout)


class _ConverterState:
    """What the converter remembers per process: whether it is registered, and the creator check's answer."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.registered = False
        self.creator_status: tuple[bool, str] | None = None


_state = _ConverterState()


def _creator_status() -> tuple[bool, str]:
    """Whether the SwishBias creator can be found (loading the library once); cached per process."""
    with _state.lock:
        cached = _state.creator_status
    if cached is not None:
        return cached
    try:
        get_creator()
        status = (True, "")
    except Exception as exc:  # noqa: BLE001 - any failure means "leave the node to PyTorch"
        status = (False, f"the {PLUGIN_NAMESPACE}::{PLUGIN_NAME} v{PLUGIN_VERSION} plugin creator is unavailable "
                         f"({exc})")
    with _state.lock:
        _state.creator_status = status
    return status


def capability_validator(node: torch.fx.Node, settings: Any = None, *, creator_check: Any = None) -> bool:
    """Torch-TensorRT capability validator: False (with the reason in the debug log) sends the node to PyTorch."""
    ok, why = node_support(node)
    if ok:
        ok, detail = (creator_check or _creator_status)()
        why = detail if not ok else why
    if ok:
        _LOGGER.debug("%s: converting %s with the %s plugin (bias layout: %s)", PLUGIN_NAME, node.name,
                      PLUGIN_NAME, why)
    else:
        _LOGGER.debug("%s: leaving %s to PyTorch: %s", PLUGIN_NAME, node.name, why)
    return ok


# --------------------------------------------------------------------------------------------------------------
# Creator, layer.
# --------------------------------------------------------------------------------------------------------------


def no_fields() -> Any:
    """The empty trt.PluginFieldCollection the creator takes: the plugin has no fields (bias is its second input)."""
    import tensorrt as trt

    return trt.PluginFieldCollection([])


def get_creator() -> Any:
    """The SwishBias IPluginCreatorV3One from the registry of Torch-TensorRT's ``tensorrt`` (loaded on first use)."""
    import tensorrt as trt

    return load_plugin(trt)


def layer_name(node_name: str) -> str:
    """TensorRT layer name for a swish node: the plugin name plus the FX node name (survives into the engine)."""
    # Torch-TensorRT builds engines with LAYER_NAMES_ONLY profiling verbosity, so the engine inspector shows only
    # names: carrying the plugin name here is what lets tests find the plugin layer in a built engine.
    return f"[{PLUGIN_NAME}]-[{node_name}]"


def add_swish_plugin(ctx: Any, x: Any, bias: Any, name: str) -> Any:
    """Add a SwishBias IPluginV3 layer computing x*sigmoid(x)+bias to ctx.net; returns its output ITensor."""
    import tensorrt as trt
    from torch_tensorrt.dynamo.conversion.converter_utils import get_trt_tensor

    x_t = get_trt_tensor(ctx, x, f"{name}_x")
    b_t = get_trt_tensor(ctx, bias, f"{name}_bias")  # frozen parameter -> IConstantLayer; ITensor passes through
    plugin = get_creator().create_plugin(name, no_fields(), trt.TensorRTPhase.BUILD)
    if plugin is None:
        raise RuntimeError(f"{PLUGIN_NAME}: the creator returned no plugin for node {name} (see the TensorRT log)")
    layer = ctx.net.add_plugin_v3([x_t, b_t], [], plugin)
    if layer is None:
        raise RuntimeError(f"{PLUGIN_NAME}: INetworkDefinition.add_plugin_v3 failed for node {name}")
    layer.name = layer_name(name)
    return layer.get_output(0)


def convert_swish(ctx: Any, target: Any, args: Sequence[Any], kwargs: dict[str, Any], name: str) -> Any:
    """Dynamo converter for torchtrt_swish.swish.default (signature: ctx, target, args, kwargs, name)."""
    x = args[0] if len(args) > 0 else kwargs["x"]
    bias = args[1] if len(args) > 1 else kwargs["bias"]
    return add_swish_plugin(ctx, x, bias, name)


def _torch_tensorrt_present() -> bool:
    try:
        return importlib.util.find_spec("torch_tensorrt") is not None
    except (ImportError, ValueError):  # a half-imported or stubbed module can make find_spec raise
        return False


def register() -> bool:
    """Register the converter with Torch-TensorRT once; silently returns False when Torch-TensorRT is unusable."""
    with _state.lock:
        if _state.registered:
            return True
    if not _torch_tensorrt_present():
        return False
    try:
        # Importing torch_tensorrt is heavy and fails on machines without a GPU; that must stay silent here.
        from torch_tensorrt.dynamo.conversion import dynamo_tensorrt_converter
    except Exception as exc:  # noqa: BLE001
        _LOGGER.debug("%s: Torch-TensorRT is installed but not importable (%s); converter not registered",
                      PLUGIN_NAME, exc)
        return False
    with _state.lock:
        if _state.registered:
            return True
        dynamo_tensorrt_converter(
            swish_op(),
            capability_validator=capability_validator,
            supports_dynamic_shapes=True,  # without it, nodes with dynamic inputs fall back to PyTorch
        )(convert_swish)
        _state.registered = True
    return True
