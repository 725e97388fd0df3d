"""Thin user entry points for the Torch-TensorRT route: AOT compile, torch.compile, engine export, save/load.

Each registers the converter and loads the plugin first, so the op becomes a ``SwishBias`` layer, not a PyTorch
fallback; the options and how they differ between versions: docs/torch_tensorrt_route.md.
"""
from __future__ import annotations

import copy
import dataclasses
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from . import converter
from ._output import write_bytes
from .extras import installed
from .plugin import plugin_library_path
from .shapes import DynamicShapes, shape_ranges

# Module -> the torch_tensorrt.Input specs it was compiled with, so save() can re-export without being told.
_COMPILED_INPUTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def unavailable_reason() -> str | None:
    """Why the TensorRT route cannot run in this process (missing package, GPU or plugin library); None if it can."""
    for name in ("torch_tensorrt", "tensorrt"):
        if not installed(name):
            return f"{name} is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU is visible"
    try:
        plugin_library_path()
    except FileNotFoundError as exc:
        return str(exc)
    try:
        import tensorrt  # noqa: F401
        import torch_tensorrt  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import failure means "not available here"
        return f"importing torch_tensorrt/tensorrt failed: {exc}"
    if not converter.register():
        return "the SwishBias converter could not be registered with Torch-TensorRT"
    return None


def _require() -> Any:
    reason = unavailable_reason()
    if reason is not None:
        raise RuntimeError(f"Torch-TensorRT/TensorRT not available ({reason})")
    import torch_tensorrt

    converter.get_creator()
    return torch_tensorrt


def export(model: torch.nn.Module, inputs: Sequence[torch.Tensor], *,
           dynamic_shapes: DynamicShapes | None = None) -> torch.export.ExportedProgram:
    """torch.export the model (runs anywhere, no TensorRT); dynamic dims become torch.export.Dim ranges."""
    ranges = shape_ranges([tuple(t.shape) for t in inputs], dynamic_shapes)
    spec: list[dict[int, Any] | None] = []
    for i, (lo, _opt, hi) in enumerate(ranges):
        dims = {d: torch.export.Dim(f"in{i}_d{d}", min=lo[d], max=hi[d]) for d in range(len(lo)) if lo[d] != hi[d]}
        spec.append(dims or None)
    ds = tuple(spec) if any(s is not None for s in spec) else None
    return torch.export.export(model, tuple(inputs), dynamic_shapes=ds)


def trt_inputs(torch_tensorrt: Any, ranges: Sequence[tuple], inputs: Sequence[torch.Tensor]) -> list[Any]:
    """One torch_tensorrt.Input per example tensor: its shape range, and the dtype of that (prepared) tensor."""
    # Each Input takes its own tensor's dtype: _prepare casts only the floating-point inputs, and an integer input
    # given a float Input would not match the exported program. torch_tensorrt.Input accepts any torch dtype it
    # maps (dtype._from: uint8, int8, int32, int64, bool, the float types).
    specs = []
    for (lo, opt, hi), tensor in zip(ranges, inputs, strict=True):
        if lo == hi:
            specs.append(torch_tensorrt.Input(shape=opt, dtype=tensor.dtype))
        else:
            specs.append(torch_tensorrt.Input(min_shape=lo, opt_shape=opt, max_shape=hi, dtype=tensor.dtype))
    return specs


def _settings(torch_tensorrt: Any, user: Mapping[str, Any]) -> dict[str, Any]:
    # Defaults that make a two-op model convert at all; a user setting always wins.
    out: dict[str, Any] = {"min_block_size": 1}
    fields = {f.name for f in dataclasses.fields(torch_tensorrt.dynamo.CompilationSettings)}
    if "use_explicit_typing" in fields:  # 2.9+: honour the model's dtypes instead of the weak-typing heuristics
        out["use_explicit_typing"] = True
    out.update(user)
    return out


def _prepare(model: torch.nn.Module, inputs: Sequence[torch.Tensor], dtype: torch.dtype, device: Any
             ) -> tuple[torch.nn.Module, list[torch.Tensor]]:
    # A copy: casting and moving must not change the caller's model.
    model = copy.deepcopy(model).eval().to(device=device, dtype=dtype)
    cast = [t.to(device=device, dtype=dtype) if t.is_floating_point() else t.to(device=device) for t in inputs]
    return model, cast


def compile(model: torch.nn.Module, inputs: Sequence[torch.Tensor], *, dtype: torch.dtype = torch.float32,
            dynamic_shapes: DynamicShapes | None = None, device: Any = "cuda", **settings: Any) -> torch.nn.Module:
    """AOT-compile with torch_tensorrt.compile(ir="dynamo"); the model is cast to dtype, swish -> SwishBias plugin."""
    torch_tensorrt = _require()
    model, inputs = _prepare(model, inputs, dtype, device)
    ranges = shape_ranges([tuple(t.shape) for t in inputs], dynamic_shapes)
    specs = trt_inputs(torch_tensorrt, ranges, inputs)
    program = export(model, inputs, dynamic_shapes=dynamic_shapes)
    trt_model = torch_tensorrt.compile(program, ir="dynamo", arg_inputs=specs,
                                       **_settings(torch_tensorrt, settings))
    _COMPILED_INPUTS[trt_model] = specs
    return trt_model


def torch_compile(model: torch.nn.Module, *, options: Mapping[str, Any] | None = None, dynamic: bool = False
                  ) -> Any:
    """torch.compile(model, backend="tensorrt") with min_block_size=1 (options: docs/torch_tensorrt_route.md)."""
    torch_tensorrt = _require()  # importing torch_tensorrt registers the "tensorrt" backend with torch._dynamo
    return torch.compile(model, backend="tensorrt", dynamic=dynamic,
                         options=_settings(torch_tensorrt, dict(options or {})))


def trtexec_command(engine_path: Any, library: Any, shapes: Mapping[str, Sequence[int]] | None = None) -> str:
    """The trtexec line that runs a serialized engine with the SwishBias plugin library loaded."""
    cmd = f"trtexec --loadEngine={engine_path} --dynamicPlugins={library}"
    if shapes:
        cmd += " --shapes=" + ",".join(f"{n}:{'x'.join(str(int(d)) for d in s)}" for n, s in shapes.items())
    return cmd


def export_engine(model: torch.nn.Module, inputs: Sequence[torch.Tensor], path: Any, *,
                  dtype: torch.dtype = torch.float32, dynamic_shapes: DynamicShapes | None = None,
                  device: Any = "cuda", **settings: Any) -> Path:
    """Write a standalone serialized TensorRT engine (whole graph, no PyTorch) and print how to run it."""
    torch_tensorrt = _require()
    model, inputs = _prepare(model, inputs, dtype, device)
    ranges = shape_ranges([tuple(t.shape) for t in inputs], dynamic_shapes)
    program = export(model, inputs, dynamic_shapes=dynamic_shapes)
    engine = torch_tensorrt.dynamo.convert_exported_program_to_serialized_trt_engine(
        program, arg_inputs=trt_inputs(torch_tensorrt, ranges, inputs), **_settings(torch_tensorrt, settings))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes(path, bytes(engine))
    # Engine inputs are named after the exported program's user inputs (placeholders).
    names = [str(s.arg.name) for s in program.graph_signature.input_specs
             if s.kind == torch.export.graph_signature.InputKind.USER_INPUT]
    shapes = {n: r[1] for n, r in zip(names, ranges) if r[0] != r[2]}
    print(f"wrote {path} ({path.stat().st_size} bytes). Run it without Python with:\n"
          f"  {trtexec_command(path, plugin_library_path(), shapes)}")
    return path


def save(model: torch.nn.Module, path: Any, inputs: Sequence[Any] | None = None) -> Path:
    """torch_tensorrt.save a compiled module as an ExportedProgram; inputs default to those it was compiled with."""
    torch_tensorrt = _require()
    arg_inputs = list(inputs) if inputs is not None else _COMPILED_INPUTS.get(model)
    if arg_inputs is None:
        raise ValueError("save: this module was not compiled by torchtrt_swish.compile; pass the inputs")
    torch_tensorrt.save(model, str(path), output_format="exported_program", arg_inputs=arg_inputs)
    return Path(path)


def load(path: Any) -> torch.nn.Module:
    """torch_tensorrt.load a saved module, after loading the plugin library so its engines deserialize."""
    torch_tensorrt = _require()  # loads libtorchtrt_swish_plugin.so into the registry before any engine is read
    loaded = torch_tensorrt.load(str(path))
    return loaded.module() if isinstance(loaded, torch.export.ExportedProgram) else loaded
