"""An ONNX model and where its weights live: open, save (atomically), weights. The ONNX route's one I/O home.

A model over protobuf's 2 GiB limit cannot be serialized, so every model is an :class:`OnnxModel`: the proto loaded
without its external data, and the folder that data is relative to. What is written where: docs/cli.md#large-models.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
from onnx.external_data_helper import ExternalDataInfo, load_external_data_for_tensor, uses_external_data

from torchtrt_swish import _output

from .common import iter_graphs, model_tensors

# Above this a model is written with external data: protobuf refuses to serialize 2 GiB, and ByteSize grows a bit.
INLINE_LIMIT = 1_800_000_000
_PROTOBUF_LIMIT = (2 << 30) - 1
SIZE_THRESHOLD = 1024  # onnx.save's default: smaller tensors stay in the model file
_CHUNK = 16 << 20
# A single-file model above this is opened with its weights moved to a scratch file (onnx.load's copy is the peak
# then); a smaller one is used as loaded.
SPILL_LIMIT = 256 << 20
# Packed below a byte per element: no NumPy dtype maps their raw bytes element by element.
_SUB_BYTE = {getattr(onnx.TensorProto, n) for n in ("INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2")
             if hasattr(onnx.TensorProto, n)}


class OnnxInputError(ValueError):
    """A user-supplied ONNX input is unusable (missing file, not an ONNX model, nothing to work on)."""


class OutputPathError(OnnxInputError, _output.OutputPathError):
    """An output path that must not be written: neither a regular file nor a new path (torchtrt_swish._output)."""


@contextlib.contextmanager
def _output_errors() -> Iterator[None]:
    # The rule lives in torchtrt_swish._output; here its refusal is an OnnxInputError like every other bad input.
    try:
        yield
    except _output.OutputPathError as exc:
        if isinstance(exc, OutputPathError):
            raise
        raise OutputPathError(str(exc)) from None


@contextlib.contextmanager
def atomic_output(path: str | Path, *, inputs=()) -> Iterator[Path]:
    """torchtrt_swish._output.atomic_output, its refusal an OutputPathError (an OnnxInputError)."""
    with _output_errors(), _output.atomic_output(path, inputs=inputs) as tmp:
        yield tmp


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write a text file atomically (see atomic_output)."""
    with _output_errors():
        return _output.write_text(path, text)


def data_file_for(path: str | Path) -> Path:
    """The external data file written with the model at `path`: NAME.data beside it."""
    path = Path(path)
    return path.with_name(f"{path.name}.data")


def location_of(tensor: onnx.TensorProto) -> str:
    """An external tensor's location; OnnxInputError unless it is a path inside the model's folder."""
    location = ExternalDataInfo(tensor).location
    where = Path(location)
    if not location or where.is_absolute() or ".." in where.parts:
        raise OnnxInputError(f"tensor {tensor.name!r} has external data location {location!r}: only a file name "
                             "relative to the model's folder is read")
    return location


def external_locations(proto: onnx.ModelProto) -> set[str]:
    """The locations of the model's external tensors (location_of each: OnnxInputError for one outside its folder)."""
    return {location_of(t) for t in model_tensors(proto) if uses_external_data(t)}


def _source(tensor: onnx.TensorProto, folder: Path) -> tuple[Path, int, int | None]:
    """(file, offset, length or None for 'to the end') of an external tensor; OnnxInputError for a location outside."""
    info = ExternalDataInfo(tensor)
    return folder / location_of(tensor), int(info.offset or 0), None if info.length is None else int(info.length)


def _fixed_width(tensor: onnx.TensorProto) -> np.dtype | None:
    """The NumPy dtype of a tensor whose bytes map element by element (not strings, not sub-byte types), else None."""
    try:
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
    except (KeyError, ValueError):
        return None
    return None if dtype.kind in "OSU" or tensor.data_type in _SUB_BYTE else dtype


def _length_problem(tensor: onnx.TensorProto) -> str | None:
    """Why an external tensor's declared length cannot be its dims' bytes (a reader would take a neighbour's), or
    None; lengths of types that do not map element by element are left to onnx's reader."""
    length, dtype = ExternalDataInfo(tensor).length, _fixed_width(tensor)
    if length is None or dtype is None or int(length) == (need := math.prod(tensor.dims) * dtype.itemsize):
        return None
    return (f"tensor {tensor.name!r} declares {int(length)} bytes of external data, but its dims "
            f"{list(tensor.dims)} of {onnx.TensorProto.DataType.Name(tensor.data_type)} take {need}")


def _mappable(tensor: onnx.TensorProto, folder: Path | None) -> bool:
    """An external tensor of a fixed-width NumPy dtype with at least one element, readable in place."""
    if folder is None or not uses_external_data(tensor) or math.prod(tensor.dims) == 0:
        return False
    return _fixed_width(tensor) is not None and _length_problem(tensor) is None


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


def _externalize(proto: onnx.ModelProto, sink, location: str, folder: Path | None) -> None:
    """Move every external tensor's bytes and every large in-memory one into `sink` (the file named `location`).

    A sparse tensor's in-memory parts stay in the model: onnx.checker reads a sparse tensor's indices to check them.
    """
    kept = list(model_tensors(proto, sparse=False))  # alive, so that upb hands out these same wrappers again
    dense = {id(t) for t in kept}
    for tensor in model_tensors(proto):
        offset = sink.tell()
        if uses_external_data(tensor):
            if folder is None:
                raise OnnxInputError(f"tensor {tensor.name!r} keeps its data in a file, but the model's folder is "
                                     "not known (load it from a file)")
            length = _copy_range(sink, *_source(tensor, folder), tensor.name)
        elif id(tensor) in dense and tensor.HasField("raw_data") and _raw_size(tensor) >= SIZE_THRESHOLD:
            data = tensor.raw_data
            sink.write(data)
            length = len(data)
            tensor.ClearField("raw_data")
        else:
            continue
        _point_to(tensor, location, offset, length)


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


def _append_initializer(sink, tensor: onnx.TensorProto, folder: Path) -> None:
    """Append `ModelProto{graph{initializer: tensor}}` with the tensor's bytes streamed from its file.

    A protobuf parser merges a repeated message field into the one before it and appends to repeated fields, so
    the model file can carry each large initializer on its own, and no copy of it is ever whole in memory.
    """
    source, offset, length = _source(tensor, folder)
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


@dataclasses.dataclass(frozen=True)
class OnnxModel:
    """An ONNX model and where its weights live: `proto` (external tensors left in their files) and `folder`, the
    folder their locations are relative to (None for a model made in memory); `one_file`: it came in one file small
    enough to go back into one, which `save` does."""

    proto: onnx.ModelProto
    folder: Path | None = None
    one_file: bool = False

    @classmethod
    def of(cls, model: OnnxModel | onnx.ModelProto) -> OnnxModel:
        """`model` itself, or a proto made in memory as an OnnxModel (no folder)."""
        return model if isinstance(model, OnnxModel) else cls(model)

    def with_proto(self, proto: onnx.ModelProto) -> OnnxModel:
        """Another proto whose external tensors live where this model's do (a fused or rewritten copy)."""
        return dataclasses.replace(self, proto=proto)

    def has_external_tensors(self) -> bool:
        """True when some tensor (any graph, attribute or function) keeps its bytes in a file."""
        return any(uses_external_data(t) for t in model_tensors(self.proto))

    def sources(self) -> list[Path]:
        """The files the external tensors are read from (never written by `save`)."""
        if self.folder is None:
            return []
        return list(dict.fromkeys(_source(t, self.folder)[0] for t in model_tensors(self.proto)
                                  if uses_external_data(t)))

    def weights_problem(self) -> str | None:
        """Why the external tensors cannot all be read (a location outside the folder, a missing or short file),
        naming the first such tensor and file; None when they can."""
        for tensor in model_tensors(self.proto):
            if not uses_external_data(tensor):
                continue
            if self.folder is None:
                return f"tensor {tensor.name!r} keeps its data in a file, but the model's folder is not known"
            try:
                source, offset, length = _source(tensor, self.folder)
            except OnnxInputError as exc:
                return str(exc)
            if (why := _length_problem(tensor)) is not None:
                return why
            if not source.is_file():
                what = "does not exist" if not source.exists() else "is not a regular file"
                return f"tensor {tensor.name!r} keeps its data in {source}, which {what}"
            if length is not None and source.stat().st_size < offset + length:
                return (f"tensor {tensor.name!r} needs bytes {offset}..{offset + length} of {source}, which holds "
                        f"{source.stat().st_size}")
        return None

    def weights(self) -> onnx.ModelProto:
        """The proto with its external tensors loaded (a copy; the proto itself when it has none)."""
        if self.folder is None or not self.has_external_tensors():
            return self.proto
        full = onnx.ModelProto()
        full.CopyFrom(self.proto)
        for tensor in model_tensors(full):
            if uses_external_data(tensor):
                _source(tensor, self.folder)  # the same location rule as the writer's
                load_external_data_for_tensor(tensor, str(self.folder))
                tensor.ClearField("data_location")  # as a tensor that came in the file: the default, unset
        return full

    def mapped_weights(self) -> tuple[OnnxModel, dict]:
        """(this model without its main graph's external initializers, {name: copy-on-write memory map of each}).

        An executor that takes the maps as inputs reads the weights from the page cache instead of holding copies.
        Tensors that cannot be mapped (strings, empty ones, sub-byte types) stay initializers.
        """
        mappable = [t for t in self.proto.graph.initializer if _mappable(t, self.folder)]
        if not mappable:
            return self, {}
        out = onnx.ModelProto()
        out.CopyFrom(self.proto)
        names = {t.name for t in mappable}
        weights = {}
        for tensor in mappable:
            source, offset, _ = _source(tensor, self.folder)
            dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
            # mode "c": an op that wrote to its input would write to private pages, never to the file.
            weights[tensor.name] = np.memmap(source, dtype=dtype, mode="c", offset=offset, shape=tuple(tensor.dims))
        kept = [t for t in out.graph.initializer if t.name not in names]
        del out.graph.initializer[:]
        out.graph.initializer.extend(kept)
        listed = {vi.name for vi in out.graph.input}
        out.graph.input.extend(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                               for t in mappable if t.name not in listed)
        return self.with_proto(out), weights

    def save(self, path: str | Path) -> Path:
        """Write the model to `path` atomically, creating its folder; with NAME.data beside it when it keeps
        tensors in files or is too large for one file, unless it came in one file (docs/cli.md#large-models)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        external = self.has_external_tensors()
        if not external and self.proto.ByteSize() <= INLINE_LIMIT:
            with atomic_output(path) as tmp:
                onnx.save(self.proto, str(tmp))
        elif external and self.one_file:
            self._save_in_one_file(path)
        else:
            self._save_with_data_file(path)
        return path

    def _save_in_one_file(self, path: Path) -> None:
        # The main graph's external initializers are streamed from their files (_append_initializer), the rest is
        # loaded: onnx.save of the whole model loaded costs twice its size more (docs/performance-notes.md).
        out = onnx.ModelProto()
        out.CopyFrom(self.proto)
        streamed = [t for t in out.graph.initializer if _mappable(t, self.folder)]
        names = {t.name for t in streamed}
        kept = [t for t in out.graph.initializer if t.name not in names]
        streamed = [onnx.TensorProto.FromString(t.SerializeToString()) for t in streamed]  # outlive the list below
        del out.graph.initializer[:]
        out.graph.initializer.extend(kept)
        with atomic_output(path, inputs=self.sources()) as tmp:
            with open(tmp, "wb") as sink:
                sink.write(self.with_proto(out).weights().SerializeToString())
                for tensor in streamed:
                    _append_initializer(sink, tensor, self.folder)

    def _save_with_data_file(self, path: Path) -> None:
        # The data file is renamed into place just before the model, so a finished model file never points to a
        # missing or partial one; the caller's proto keeps its bytes (onnx.save would empty its raw_data).
        data = data_file_for(path)
        out = onnx.ModelProto()
        out.CopyFrom(self.proto)
        with _output_errors(), _output.atomic_outputs([data, path], inputs=self.sources()) as (tmp_data, tmp_model):
            with open(tmp_data, "wb") as sink:
                _externalize(out, sink, data.name, self.folder)
            onnx.save(out, str(tmp_model))


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


def save_model(model: OnnxModel | onnx.ModelProto, path: str | Path) -> Path:
    """Save a model atomically (OnnxModel.save); a proto made in memory has no external tensors to read."""
    return OnnxModel.of(model).save(path)


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


@contextlib.contextmanager
def open_model(path: str | Path, scratch: str | Path | None = None) -> Iterator[OnnxModel]:
    """The model at `path` with its external tensors left in their files.

    A model in one file over SPILL_LIMIT has its weights moved to a temporary folder in `scratch` (default: the
    system's), removed when the block ends.
    """
    path = Path(path)
    model = OnnxModel(load_model(path, load_external_data=False), path.parent)
    if (why := model.weights_problem()) is not None:
        raise OnnxInputError(f"{path}: {why}")
    # The file's size, not ByteSize(): upb computes that by serializing the whole model once more.
    size = path.stat().st_size
    if model.has_external_tensors() or size <= SPILL_LIMIT:
        yield model
        return
    where = None
    try:
        try:
            where = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=scratch)).resolve()
            # The proto is ours (just loaded): its in-memory tensors move into the scratch file.
            with open(where / "weights.data", "wb") as sink:
                _externalize(model.proto, sink, "weights.data", None)
        except OSError as exc:  # a full disk (ENOSPC), a file-size limit (EFBIG), a folder that cannot be written
            folder = Path(scratch or tempfile.gettempdir())
            raise OnnxInputError(f"{path}: its {size} bytes of weights could not be moved to a scratch file in "
                                 f"{folder} ({exc.strerror or exc}); free room there"
                                 f"{'' if scratch else ' or name another folder with TMPDIR'}") from None
        yield OnnxModel(model.proto, where, one_file=size <= INLINE_LIMIT)
    finally:
        if where is not None:
            shutil.rmtree(where, ignore_errors=True)


def with_inferred_types(model: onnx.ModelProto, *, data_prop: bool = True) -> onnx.ModelProto:
    """onnx.shape_inference's result for `model`; over protobuf's limit by path (infer_shapes_path), with the
    inferred value_info added to `model` itself (copying it again would double the memory)."""
    if model.ByteSize() < _PROTOBUF_LIMIT:
        return onnx.shape_inference.infer_shapes(model, data_prop=data_prop)
    with tempfile.TemporaryDirectory() as tmp:
        source, inferred = Path(tmp) / "model.onnx", Path(tmp) / "inferred.onnx"
        OnnxModel(model)._save_with_data_file(source)
        onnx.shape_inference.infer_shapes_path(source, inferred, data_prop=data_prop)
        types = onnx.load(str(inferred), load_external_data=False)
    for (_, mine), (_, theirs) in zip(iter_graphs(model.graph), iter_graphs(types.graph)):
        known = {vi.name for vi in mine.value_info}
        mine.value_info.extend(vi for vi in theirs.value_info if vi.name not in known)
    return model
