"""Model-level steps of the surgery around graphsurgeon: opset pruning, old IR rules, the emitted model's check."""
from __future__ import annotations

import tempfile
from pathlib import Path

import onnx

from torchtrt_swish._output import first_line

from .common import all_nodes, iter_graphs
from .model_file import OnnxInputError, external_locations


def prune_unused_domains(model: onnx.ModelProto) -> None:
    """Drop opset imports no node of the model (bodies and functions included) uses."""
    # A domain used only inside an If/Loop/Scan body or a function is used: dropping it makes the model invalid.
    used = {n.domain for _, _, n in all_nodes(model)} | {f.domain for f in model.functions}
    used |= {"", "ai.onnx"}
    keep = [o for o in model.opset_import if o.domain in used]
    del model.opset_import[:]
    model.opset_import.extend(keep)


def initializers_as_inputs(model: onnx.ModelProto) -> None:
    """IR < 4: every initializer must also be a graph input. The main graph lists its new ones as inputs; a body
    (whose inputs are fixed by If/Loop/Scan) gets Constant nodes instead."""
    g = model.graph
    listed = {i.name for i in g.input}
    g.input.extend(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                   for t in g.initializer if t.name not in listed)
    for _, body in list(iter_graphs(g))[1:]:
        listed = {i.name for i in body.input}
        moved = [t for t in body.initializer if t.name not in listed]
        if not moved:
            continue
        kept = [t for t in body.initializer if t.name in listed]
        del body.initializer[:]
        body.initializer.extend(kept)
        constants = [onnx.helper.make_node("Constant", [], [t.name], name=f"{t.name}/Constant", value=t)
                     for t in moved]
        nodes = constants + list(body.node)
        del body.node[:]
        body.node.extend(nodes)


def _check_model(model: onnx.ModelProto) -> None:
    """onnx.checker.check_model; a model with external tensors by path, beside stand-ins for its data files.

    The checker reads no external bytes, but insists that each tensor's file is a regular file (not a link) in the
    model's folder (the working folder for a model given in memory); the real files are never written to, and the
    writer checks them (onnx_path.model_file).
    """
    locations = external_locations(model)
    if not locations:
        onnx.checker.check_model(model)
        return
    with tempfile.TemporaryDirectory() as tmp:
        for location in locations:
            stand_in = Path(tmp, location)
            stand_in.parent.mkdir(parents=True, exist_ok=True)
            stand_in.touch()
        Path(tmp, "model.onnx").write_bytes(model.SerializeToString())
        onnx.checker.check_model(str(Path(tmp, "model.onnx")))


def check_emitted(model: onnx.ModelProto, out: onnx.ModelProto) -> None:
    """RuntimeError when `out` fails onnx.checker though `model` passes; OnnxInputError when `model` fails too."""
    if out.ByteSize() > 2_000_000_000:
        return  # onnx.checker takes a model over protobuf's 2 GiB only as a file, with its external data beside it
    try:
        _check_model(out)
    except onnx.checker.ValidationError as exc:
        try:
            _check_model(model)
        except onnx.checker.ValidationError as original:
            raise OnnxInputError(f"the input model fails onnx.checker ({first_line(original)}); fix it before "
                                 "fusing") from None
        raise RuntimeError(f"surgery emitted a model that fails onnx.checker: {first_line(exc)}") from exc


def hide_non_tensor_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """Clear the types of values that are not tensors (sequence, optional, map), in every graph; returns them by name.

    graphsurgeon reads every value as a tensor: it fails to export an optional (UnboundLocalError) and turns the
    others' element types into tensor dtypes. The passes never touch such a value; restore_types puts them back.
    """
    hidden: dict[str, onnx.TypeProto] = {}
    for _, graph in iter_graphs(model.graph):
        for vi in [*graph.input, *graph.output, *graph.value_info]:
            if vi.HasField("type") and not vi.type.HasField("tensor_type"):
                hidden[vi.name] = onnx.TypeProto()
                hidden[vi.name].CopyFrom(vi.type)
                vi.ClearField("type")
    return hidden


def restore_types(model: onnx.ModelProto, hidden: dict[str, onnx.TypeProto]) -> None:
    """Give the inputs and outputs of every graph of `model` the types hide_non_tensor_types took away."""
    for _, graph in iter_graphs(model.graph):
        for vi in [*graph.input, *graph.output]:
            if vi.name in hidden:
                vi.type.CopyFrom(hidden[vi.name])
