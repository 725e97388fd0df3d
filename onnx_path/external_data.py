"""Models whose weights live in files beside them (ONNX external data): read in place, written with the model.

A model over protobuf's 2 GiB limit cannot be serialized, so it cannot be shape-inferred in memory, handed to ONNX
Runtime as bytes or saved in one file. The ONNX route therefore carries such a model as its *skeleton*: the proto
loaded with ``load_external_data=False`` (tensors keep ``data_location EXTERNAL`` and their ``location``, ``offset``
and ``length``), plus ``base_dir``, the folder those locations are relative to. The surgery, the contract and the
executors read the skeleton, and only the executors load the weights (from ``base_dir``).

Writing: ``save_with_external_data`` writes ``NAME`` and ``NAME.data`` beside it, both atomically: every tensor the
skeleton keeps outside is copied (streamed, never whole) from ``base_dir`` into ``NAME.data``, with in-memory tensors
of at least ``SIZE_THRESHOLD`` bytes. The data file's name follows the model's, so writing the same ``-o`` again
replaces it instead of leaving another file behind. The caller's model is never changed (onnx.save would empty its
tensors' raw_data).

A model that comes in one file is fused the same way above ``SPILL_LIMIT`` (``open_model`` moves its weights to a
scratch file first) and written back in one file up to ``INLINE_LIMIT`` (``save_in_one_file`` streams each large
initializer into it). Measured with /usr/bin/time on this package's CLI (2 cores, 24 GiB): ``fuse`` of a 2.3 GB
external-data model peaks at 0.7 GB (it failed before: "no matching nodes"), of a 1.9 GB single-file model at 4.3 GB
(onnx.load's read and parse; 15.4 GB before); ``check`` of the 2.3 GB model at 7.4 GB (it failed before), of the
1.9 GB one against its single-file original at 8.1 GB (17.3 GB with the models in memory).
"""
from __future__ import annotations

import contextlib
import math
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
from onnx.external_data_helper import ExternalDataInfo, load_external_data_for_tensor, uses_external_data

from .common import OnnxInputError, atomic_output, atomic_outputs, iter_graphs, load_model, model_tensors

# Above this a model is written with external data: protobuf refuses to serialize 2 GiB, and ByteSize grows a bit.
INLINE_LIMIT = 1_800_000_000
_PROTOBUF_LIMIT = (2 << 30) - 1
SIZE_THRESHOLD = 1024  # onnx.save's default: smaller tensors stay in the model file
_CHUNK = 16 << 20
# A single-file model above this is fused as a skeleton, its weights moved to a scratch file (onnx.load's copy is the
# peak then); a smaller one is fused as loaded.
SPILL_LIMIT = 256 << 20
# Scratch folders of open_model whose models came in one file small enough to go back into one (save_model does).
_ONE_FILE: set[str] = set()
# Packed below a byte per element: no NumPy dtype maps their raw bytes element by element.
_SUB_BYTE = {getattr(onnx.TensorProto, n) for n in ("INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2")
             if hasattr(onnx.TensorProto, n)}

__all__ = [
    "INLINE_LIMIT",
    "SIZE_THRESHOLD",
    "data_file_for",
    "has_external_tensors",
    "external_data_problem",
    "location_of",
    "needs_external_data",
    "SPILL_LIMIT",
    "save",
    "save_with_external_data",
    "save_in_one_file",
    "spill_weights",
    "open_model",
    "load_weights",
    "mapped_weights",
    "with_inferred_types",
]


def data_file_for(path: str | Path) -> Path:
    """The external data file written with the model at `path`: NAME.data beside it."""
    path = Path(path)
    return path.with_name(f"{path.name}.data")


def has_external_tensors(model: onnx.ModelProto) -> bool:
    """True when some tensor of the model (any graph, attribute or function) keeps its bytes in a file."""
    return any(uses_external_data(t) for t in model_tensors(model))


def needs_external_data(model: onnx.ModelProto) -> bool:
    """True when the model must be written with a data file: it has external tensors or is too large for one file."""
    return has_external_tensors(model) or model.ByteSize() > INLINE_LIMIT


def mapped_weights(model: onnx.ModelProto, base_dir: str | Path | None) -> tuple[onnx.ModelProto, dict]:
    """(model without its main graph's external initializers, {name: copy-on-write memory map of each}).

    An executor that takes the maps as inputs reads the weights from the page cache instead of holding copies: a
    model over 2 GiB otherwise costs its size twice more (the loaded proto and the NumPy arrays made from it).
    Tensors that cannot be mapped (strings, empty ones, sub-byte types) stay initializers.
    """
    graph = model.graph
    mappable = [t for t in graph.initializer if _mappable(t, base_dir)]
    if not mappable:
        return model, {}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    names = {t.name for t in mappable}
    weights = {}
    for tensor in mappable:
        source, offset, _ = _source(tensor, Path(base_dir))
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
        # mode "c": an op that wrote to its input would write to private pages, never to the file.
        weights[tensor.name] = np.memmap(source, dtype=dtype, mode="c", offset=offset, shape=tuple(tensor.dims))
    kept = [t for t in out.graph.initializer if t.name not in names]
    del out.graph.initializer[:]
    out.graph.initializer.extend(kept)
    listed = {vi.name for vi in out.graph.input}
    out.graph.input.extend(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                           for t in mappable if t.name not in listed)
    return out, weights


def _mappable(tensor: onnx.TensorProto, base_dir: str | Path | None) -> bool:
    """An external tensor of a fixed-width NumPy dtype with at least one element, readable in place."""
    if base_dir is None or not uses_external_data(tensor) or math.prod(tensor.dims) == 0:
        return False
    try:
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
    except (KeyError, ValueError):
        return False
    if dtype.kind in "OSU" or tensor.data_type in _SUB_BYTE:
        return False
    length = ExternalDataInfo(tensor).length
    return length is None or int(length) == math.prod(tensor.dims) * dtype.itemsize


def _source(tensor: onnx.TensorProto, base_dir: Path) -> tuple[Path, int, int | None]:
    """(file, offset, length or None for 'to the end') of an external tensor; OnnxInputError for a location outside."""
    info = ExternalDataInfo(tensor)
    return base_dir / location_of(tensor), int(info.offset or 0), None if info.length is None else int(info.length)


def location_of(tensor: onnx.TensorProto) -> str:
    """An external tensor's location; OnnxInputError unless it is a path inside the model's folder."""
    location = ExternalDataInfo(tensor).location
    where = Path(location)
    if not location or where.is_absolute() or ".." in where.parts:
        raise OnnxInputError(f"tensor {tensor.name!r} has external data location {location!r}: only a file name "
                             "relative to the model's folder is read")
    return location


def external_data_problem(model: onnx.ModelProto, base_dir: str | Path | None) -> str | None:
    """Why the model's external tensors cannot all be read from `base_dir` (a location outside it, a missing or
    short file), naming the first such tensor and file; None when they can."""
    for tensor in model_tensors(model):
        if not uses_external_data(tensor):
            continue
        if base_dir is None:
            return f"tensor {tensor.name!r} keeps its data in a file, but the model's folder is not known"
        try:
            source, offset, length = _source(tensor, Path(base_dir))
        except OnnxInputError as exc:
            return str(exc)
        if not source.is_file():
            what = "does not exist" if not source.exists() else "is not a regular file"
            return f"tensor {tensor.name!r} keeps its data in {source}, which {what}"
        if length is not None and source.stat().st_size < offset + length:
            return (f"tensor {tensor.name!r} needs bytes {offset}..{offset + length} of {source}, which holds "
                    f"{source.stat().st_size}")
    return None


def _copy_range(sink, source: Path, offset: int, length: int | None, name: str) -> int:
    """Append `length` bytes of `source` from `offset` to `sink` in chunks; returns the count copied."""
    try:
        with open(source, "rb") as f:
            f.seek(offset)
            copied = 0
            while length is None or copied < length:
                chunk = f.read(_CHUNK if length is None else min(_CHUNK, length - copied))
                if not chunk:
                    break
                sink.write(chunk)
                copied += len(chunk)
    except FileNotFoundError:
        raise OnnxInputError(f"tensor {name!r} keeps its data in {source}, which does not exist") from None
    if length is not None and copied != length:
        raise OnnxInputError(f"tensor {name!r}: {source} holds {copied} of its {length} bytes from offset {offset}")
    return copied


def _point_to(tensor: onnx.TensorProto, location: str, offset: int, length: int) -> None:
    # onnx.external_data_helper.set_external_data insists on raw_data, which a tensor read in place never has.
    del tensor.external_data[:]
    tensor.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, str(value)


def _raw_size(tensor: onnx.TensorProto) -> int:
    """The size of a tensor's raw_data from its dims and type (upb's ByteSize and raw_data both copy the bytes)."""
    return math.prod(tensor.dims) * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize


def _externalize(model: onnx.ModelProto, sink, location: str, base_dir: Path | None) -> None:
    """Move every external tensor's bytes and every large in-memory one into `sink` (the file named `location`).

    A sparse tensor's in-memory parts stay in the model: onnx.checker reads a sparse tensor's indices to check them.
    """
    kept = list(model_tensors(model, sparse=False))  # alive, so that upb hands out these same wrappers again
    dense = {id(t) for t in kept}
    for tensor in model_tensors(model):
        offset = sink.tell()
        if uses_external_data(tensor):
            if base_dir is None:
                raise OnnxInputError(f"tensor {tensor.name!r} keeps its data in a file, but the model's folder is "
                                     "not known (load it from a file)")
            length = _copy_range(sink, *_source(tensor, base_dir), tensor.name)
        elif id(tensor) in dense and tensor.HasField("raw_data") and _raw_size(tensor) >= SIZE_THRESHOLD:
            data = tensor.raw_data
            sink.write(data)
            length = len(data)
            tensor.ClearField("raw_data")
        else:
            continue
        _point_to(tensor, location, offset, length)


def _sources(model: onnx.ModelProto, base_dir: Path | None) -> list[Path]:
    """The files the model's external tensors are read from."""
    if base_dir is None:
        return []
    return list(dict.fromkeys(_source(t, base_dir)[0] for t in model_tensors(model) if uses_external_data(t)))


def save_with_external_data(model: onnx.ModelProto, path: str | Path, base_dir: str | Path | None = None) -> Path:
    """Write `model` to `path` and its tensors to NAME.data beside it, both atomically; `model` is left as it was.

    `base_dir`: the folder the model's external tensors are read from (where it was loaded); none of those files is
    ever written. The data file is renamed into place just before the model, so a finished model file never points
    to a missing or partial one.
    """
    path = Path(path)
    data = data_file_for(path)
    base = None if base_dir is None else Path(base_dir)
    out = onnx.ModelProto()
    out.CopyFrom(model)  # the caller's tensors keep their bytes
    with atomic_outputs([data, path], inputs=_sources(model, base)) as (tmp_data, tmp_model):
        with open(tmp_data, "wb") as sink:
            _externalize(out, sink, data.name, base)
        onnx.save(out, str(tmp_model))
    return path


def save(model: onnx.ModelProto, path: str | Path, base_dir: str | Path | None = None) -> Path:
    """Write a model that needs external data: back into one file when it came from one (open_model), else with
    NAME.data beside it (save_with_external_data)."""
    if base_dir is not None and str(Path(base_dir).resolve()) in _ONE_FILE:
        return save_in_one_file(model, path, base_dir)
    return save_with_external_data(model, path, base_dir)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _length_delimited(field: int, length: int) -> bytes:
    """A protobuf key (wire type 2) and the length that follows it."""
    return _varint(field << 3 | 2) + _varint(length)


_GRAPH = onnx.ModelProto.DESCRIPTOR.fields_by_name["graph"].number
_INITIALIZER = onnx.GraphProto.DESCRIPTOR.fields_by_name["initializer"].number
_RAW_DATA = onnx.TensorProto.DESCRIPTOR.fields_by_name["raw_data"].number


def _append_initializer(sink, tensor: onnx.TensorProto, base_dir: Path) -> None:
    """Append `ModelProto{graph{initializer: tensor}}` with the tensor's bytes streamed from its file.

    A protobuf parser merges a repeated message field into the one before it and appends to repeated fields, so
    the model file can carry each large initializer on its own, and no copy of it is ever whole in memory.
    """
    source, offset, length = _source(tensor, base_dir)
    size = length if length is not None else source.stat().st_size - offset
    head = onnx.TensorProto()
    head.CopyFrom(tensor)
    del head.external_data[:]
    head.ClearField("data_location")
    head_bytes = head.SerializeToString()
    raw_key = _length_delimited(_RAW_DATA, size)
    tensor_length = len(head_bytes) + len(raw_key) + size
    initializer_key = _length_delimited(_INITIALIZER, tensor_length)
    sink.write(_length_delimited(_GRAPH, len(initializer_key) + tensor_length) + initializer_key + head_bytes + raw_key)
    _copy_range(sink, source, offset, size, tensor.name)


def save_in_one_file(model: onnx.ModelProto, path: str | Path, base_dir: str | Path) -> Path:
    """Write `model` and every tensor it keeps in files under `base_dir` into the one file `path`, atomically.

    The main graph's external initializers are streamed (_append_initializer); others (bodies, attributes) are
    loaded. `model` is left as it was.
    """
    path, base = Path(path), Path(base_dir)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    streamed = [t for t in out.graph.initializer if _mappable(t, base)]
    names = {t.name for t in streamed}
    kept = [t for t in out.graph.initializer if t.name not in names]
    streamed = [onnx.TensorProto.FromString(t.SerializeToString()) for t in streamed]  # outlive the list below
    del out.graph.initializer[:]
    out.graph.initializer.extend(kept)
    out = load_weights(out, base)
    with atomic_output(path, inputs=_sources(model, base)) as tmp:
        with open(tmp, "wb") as sink:
            sink.write(out.SerializeToString())
            for tensor in streamed:
                _append_initializer(sink, tensor, base)
    return path


def spill_weights(model: onnx.ModelProto, folder: str | Path) -> Path:
    """Move the in-memory tensors of `model` (which it must own) into FOLDER/weights.data; returns FOLDER.

    A model near 2 GiB loaded whole is then a skeleton: copies, shape inference and graph surgery stay small.
    """
    folder = Path(folder)
    with open(folder / "weights.data", "wb") as sink:
        _externalize(model, sink, "weights.data", None)
    return folder


@contextlib.contextmanager
def open_model(path: str | Path, scratch: str | Path | None = None) -> Iterator[tuple[onnx.ModelProto, Path]]:
    """(skeleton, base_dir) of the model at `path`: external tensors left in their files (see the module docstring).

    A model in one file over SPILL_LIMIT has its weights moved to a temporary folder in `scratch` (default: the
    system's), removed when the block ends; save_model writes it back in one file up to INLINE_LIMIT.
    """
    path = Path(path)
    model = load_model(path, load_external_data=False)
    if (why := external_data_problem(model, path.parent)) is not None:
        raise OnnxInputError(f"{path}: {why}")
    # The file's size, not ByteSize(): upb computes that by serializing the whole model once more.
    size = path.stat().st_size
    if has_external_tensors(model) or size <= SPILL_LIMIT:
        yield model, path.parent
        return
    where = str(Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=scratch)).resolve())
    if size <= INLINE_LIMIT:
        _ONE_FILE.add(where)
    try:
        yield model, spill_weights(model, where)
    finally:
        _ONE_FILE.discard(where)
        shutil.rmtree(where, ignore_errors=True)


def load_weights(model: onnx.ModelProto, base_dir: str | Path | None) -> onnx.ModelProto:
    """`model` with its external tensors loaded from `base_dir` (a copy; `model` itself when it has none)."""
    if base_dir is None or not has_external_tensors(model):
        return model
    full = onnx.ModelProto()
    full.CopyFrom(model)
    for tensor in model_tensors(full):
        if uses_external_data(tensor):
            _source(tensor, Path(base_dir))  # the same location rule as the writer's
            load_external_data_for_tensor(tensor, str(base_dir))
    return full


def with_inferred_types(model: onnx.ModelProto, *, data_prop: bool = True) -> onnx.ModelProto:
    """onnx.shape_inference's result for `model`; over protobuf's limit by path (infer_shapes_path), with the
    inferred value_info added to `model` itself (copying it again would double the memory)."""
    if model.ByteSize() < _PROTOBUF_LIMIT:
        return onnx.shape_inference.infer_shapes(model, data_prop=data_prop)
    with tempfile.TemporaryDirectory() as tmp:
        source, inferred = Path(tmp) / "model.onnx", Path(tmp) / "inferred.onnx"
        save_with_external_data(model, source)
        onnx.shape_inference.infer_shapes_path(source, inferred, data_prop=data_prop)
        types = onnx.load(str(inferred), load_external_data=False)
    for (_, mine), (_, theirs) in zip(iter_graphs(model.graph), iter_graphs(types.graph)):
        known = {vi.name for vi in mine.value_info}
        mine.value_info.extend(vi for vi in theirs.value_info if vi.name not in known)
    return model
