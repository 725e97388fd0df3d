"""ONNX -> TensorRT engine over Polygraphy's TensorRT loaders, with the SwishBias plugin library loaded first.

What Polygraphy does and what stays here, and why: docs/onnx_route.md#engine.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import onnx

from torchtrt_swish.extras import POLYGRAPHY_MIN, older_than
from torchtrt_swish.plugin import PluginLoadError, load_plugin, plugin_identity, plugin_library_path
from torchtrt_swish.shapes import DEFAULT_BATCH_RANGE, input_range, parse_shape_spec

from torchtrt_swish._output import first_line

from .common import graph_inputs
from .contract import SwishContractError, attribute_problem, is_swish_node, swish_nodes
from .functions import tensorrt_function_problems
from .model_file import OnnxInputError, load_model

PRECISIONS = ("fp32", "fp16", "bf16")
_HALF_TYPES = {onnx.TensorProto.FLOAT16: "fp16", onnx.TensorProto.BFLOAT16: "bf16"}


class TensorRTUnavailable(ImportError):
    """TensorRT's Python package cannot be imported here."""


class PluginNotFoundError(PluginLoadError):
    """The SwishBias plugin is not there for the build (library missing or not registering, or parser lookup failed)."""


class EngineBuildError(RuntimeError):
    """The engine could not be built as asked (bad shapes/precision, parser or builder failure)."""


def import_tensorrt():
    """The tensorrt module, or TensorRTUnavailable with the reason."""
    try:
        import tensorrt as trt  # noqa: PLC0415 - optional dependency
    except Exception as exc:  # noqa: BLE001 - stub wheels raise all sorts of errors at import
        raise TensorRTUnavailable(f"TensorRT is not importable here ({type(exc).__name__}: {exc})") from exc
    return trt


# --------------------------------------------------------------------------------------------- shape profiles


def profile_shapes(
    model: onnx.ModelProto,
    min_shapes: Mapping[str, tuple[int, ...]] | None = None,
    opt_shapes: Mapping[str, tuple[int, ...]] | None = None,
    max_shapes: Mapping[str, tuple[int, ...]] | None = None,
    *,
    batch_range: tuple[int, int, int] = DEFAULT_BATCH_RANGE,
) -> dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
    """(min, opt, max) shapes per dynamic input: given ones, else batch_range on axis 0; {} when nothing is dynamic."""
    given = {"min": dict(min_shapes or {}), "opt": dict(opt_shapes or {}), "max": dict(max_shapes or {})}
    inputs = graph_inputs(model)
    names = [vi.name for vi in inputs]
    unknown = sorted({n for g in given.values() for n in g} - set(names))
    if unknown:
        raise EngineBuildError(f"shape given for unknown input(s) {unknown}; the model's inputs are {names}")
    profiles = {}
    for vi in inputs:
        name = vi.name
        # A fixed axis as its size, a dynamic one as its name (dim_param, "" when unnamed).
        dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in vi.type.tensor_type.shape.dim]
        if all(isinstance(d, int) for d in dims) and not any(name in g for g in given.values()):
            continue
        try:
            profiles[name] = input_range(name, dims, {w: g[name] for w, g in given.items() if name in g},
                                         batch_range=batch_range)
        except ValueError as exc:
            raise EngineBuildError(str(exc)) from None
    return profiles


# ---------------------------------------------------------------------------------------------------- plugin


def _load_plugin(trt, library: str | Path | None) -> Path | None:
    """Put the SwishBias creator into trt's registry; returns the library path (for error messages)."""
    try:
        load_plugin(trt, library)
    except PluginLoadError as exc:
        raise PluginNotFoundError(str(exc)) from exc
    try:
        return Path(library) if library is not None else plugin_library_path()
    except FileNotFoundError:
        return None  # registered without our copy of the library (it was dlopen'ed next to TensorRT)


def _plugin_lookup(node: onnx.NodeProto) -> str:
    """What TensorRT's ONNX parser looks up for `node` in the plugin registry, as the fallback importer reads it."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}

    def text(name: str, default: str) -> str:
        value = attrs.get(name, default)
        return value.decode() if isinstance(value, bytes) else str(value)

    found = (f"node {node.name!r} asks for plugin {node.op_type} version {text('plugin_version', '1')!r} "
             f"namespace {text('plugin_namespace', '')!r}")
    if "plugin_namespace" not in attrs and node.domain:
        found += f" (its domain {node.domain!r} is not used: set the plugin_namespace attribute)"
    return found


def _parser_failure(parser, model: onnx.ModelProto, library: Path | None) -> Exception:
    lines, missing_plugin = [], []
    for i in range(parser.num_errors):
        err = parser.get_error(i)
        desc = err.desc()
        idx = err.node()
        node = model.graph.node[idx] if 0 <= idx < len(model.graph.node) else None
        op = node.op_type if node is not None else ""
        lines.append(f"  node {idx} ({op or '?'} {node.name if node is not None else ''}): {desc}")
        if node is not None and ("Plugin not found" in desc or is_swish_node(node)):
            missing_plugin.append(_plugin_lookup(node))
    if missing_plugin:
        return PluginNotFoundError(
            "TensorRT's ONNX parser could not find a plugin: " + "; ".join(missing_plugin)
            + f". This package provides {plugin_identity()}"
            + (f", loaded from {library}." if library else " (its library was not loaded).")
            + " The parser looks a node up by its op_type and its plugin_version (default \"1\") and "
              "plugin_namespace (default \"\") attributes; it never reads the node's domain."
            + "\nparser errors:\n" + "\n".join(lines)
        )
    return EngineBuildError("TensorRT's ONNX parser failed:\n" + "\n".join(lines))


# ------------------------------------------------------------------------------------------------------ build


def _where(exc: BaseException) -> str:
    """file:line in function of the frame that raised exc."""
    import traceback  # noqa: PLC0415

    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "an unknown place"
    f = frames[-1]
    return f"{Path(f.filename).name}:{f.lineno} in {f.name}"


@contextlib.contextmanager
def _unexpected_errors(trt) -> Iterator[None]:
    """Any exception but ours and OSError (the output file) -> one EngineBuildError saying what failed and where,
    with TensorRT's and Polygraphy's versions; the upgrade hint only when Polygraphy is older than POLYGRAPHY_MIN
    (e.g. 0.49.x reading ``layer.precision_is_set``, which TensorRT 11 removed)."""
    try:
        yield
    except (EngineBuildError, PluginLoadError, OSError):
        raise
    except Exception as exc:  # noqa: BLE001 - turned into the one-line error the CLI prints
        import polygraphy  # noqa: PLC0415

        poly = getattr(polygraphy, "__version__", "?")
        text = (f"building the engine failed unexpectedly ({type(exc).__name__}: {first_line(exc)}, at "
                f"{_where(exc)}) with TensorRT {getattr(trt, '__version__', '?')} and Polygraphy {poly}")
        if older_than(poly, POLYGRAPHY_MIN):
            text += (f"; Polygraphy >= {POLYGRAPHY_MIN} is needed for TensorRT 11 "
                     f"(pip install 'polygraphy>={POLYGRAPHY_MIN}')")
        raise EngineBuildError(text) from exc


def build_engine(
    onnx_path: str | Path,
    engine_path: str | Path,
    *,
    precision: str = "fp32",
    min_shapes: Mapping[str, tuple[int, ...]] | None = None,
    opt_shapes: Mapping[str, tuple[int, ...]] | None = None,
    max_shapes: Mapping[str, tuple[int, ...]] | None = None,
    plugin_library: str | Path | None = None,
    workspace_gib: float | None = None,
    verbose: bool = False,
) -> Path:
    """Parse `onnx_path` with TensorRT's ONNX parser (plugin loaded), build and write the serialized engine."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    model = load_model(onnx_path, load_external_data=False)  # the graph is enough here; TensorRT reads the file
    for node in swish_nodes(model):
        # TensorRT's parser drops such attributes without a word; every other contract breach it reports itself.
        if (why := attribute_problem(a.name for a in node.attribute)) is not None:
            raise SwishContractError(f"{onnx_path}: {node.op_type} node {node.name!r} {why}")
    if problems := tensorrt_function_problems(model):  # TensorRT's parser imports these functions in its own way
        raise OnnxInputError(f"{onnx_path}: " + "; ".join(problems))
    if not graph_inputs(model):
        raise OnnxInputError(f"{onnx_path}: the model has no inputs")
    profiles = profile_shapes(model, min_shapes, opt_shapes, max_shapes)
    graph_half = {_HALF_TYPES[t] for t in {vi.type.tensor_type.elem_type for vi in graph_inputs(model)}
                  if t in _HALF_TYPES}
    if graph_half and precision != "fp32" and precision not in graph_half:
        raise EngineBuildError(f"precision {precision} conflicts with the model's {'/'.join(graph_half)} inputs")

    trt = import_tensorrt()
    library = _load_plugin(trt, plugin_library) if swish_nodes(model) else None
    flag_precision = precision if precision != "fp32" and not graph_half else None
    has_precision_flags = hasattr(trt.BuilderFlag, "FP16")
    if flag_precision and not hasattr(trt.BuilderFlag, flag_precision.upper()):
        raise EngineBuildError(
            f"TensorRT {getattr(trt, '__version__', '?')} has no BuilderFlag.{flag_precision.upper()} (networks are "
            f"strongly typed): export the model in {'float16' if precision == 'fp16' else 'bfloat16'} instead "
            f"(torchtrt-swish export --dtype ...)"
        )
    from polygraphy.backend import trt as poly_trt  # noqa: PLC0415 - optional dependency, as TensorRT
    from polygraphy.backend.common import SaveBytes  # noqa: PLC0415
    from polygraphy.exception import PolygraphyException  # noqa: PLC0415
    from polygraphy.logger import G_LOGGER  # noqa: PLC0415

    # TensorRT's log goes through Polygraphy's logger: TensorRT VERBOSE is its EXTRA_VERBOSE.
    with G_LOGGER.verbosity(G_LOGGER.EXTRA_VERBOSE if verbose else G_LOGGER.WARNING), _unexpected_errors(trt):
        try:
            # The graph carries its precision: strong typing keeps TensorRT from re-choosing it.
            builder, network = poly_trt.CreateNetwork(strongly_typed=bool(graph_half) or not has_precision_flags)()
        except Exception as exc:  # noqa: BLE001 - e.g. no GPU / driver: a usage-level error, not a traceback
            raise EngineBuildError(f"TensorRT could not create a builder (is a CUDA GPU visible?): {exc}") from exc
        parser = trt.OnnxParser(network, poly_trt.get_trt_logger())
        if not parser.parse_from_file(str(onnx_path)):
            raise _parser_failure(parser, model, library)
        profile = poly_trt.Profile()
        for name, (mn, op, mx) in profiles.items():
            profile.add(name, mn, op, mx)
        config = poly_trt.CreateConfig(
            fp16=flag_precision == "fp16",
            bf16=flag_precision == "bf16",
            profiles=[profile],  # inputs it leaves out are static: Polygraphy fills in their shapes
            memory_pool_limits=None if workspace_gib is None else {
                trt.MemoryPoolType.WORKSPACE: int(workspace_gib * (1 << 30))},
        )
        try:
            SaveBytes(poly_trt.EngineBytesFromNetwork((builder, network, parser), config=config), str(engine_path))()
        except PolygraphyException as exc:
            raise EngineBuildError(f"TensorRT's builder returned no engine ({exc}; see the TensorRT log above)") from exc
    return Path(engine_path)
