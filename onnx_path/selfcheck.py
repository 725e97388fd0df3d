"""The doctor's ONNX-route check, run by torchtrt_swish/doctor as ``python -m onnx_path.selfcheck``.

Its tiny model goes through export_onnx, build_engine and Polygraphy's TrtRunner, compared with the op. It lives here
because it uses onnx_path, which torchtrt_swish never imports.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from torchtrt_swish.doctor import ROUTE_ONNX, CheckFailed, compare, route_main, tiny_case


def onnx_route() -> str:
    """Export, build, serialize, deserialize and run the tiny model; its output against the op's."""
    import tensorrt as trt
    import torch
    from polygraphy.backend.common import BytesFromPath
    from polygraphy.backend.trt import EngineFromBytes, TrtRunner

    from torchtrt_swish.ops import swish
    from torchtrt_swish.plugin import load_plugin

    from .contract import swish_nodes
    from .engine import build_engine
    from .export import export_onnx

    model, x, bias = tiny_case()
    expected = swish(x.cuda(), bias.cuda())
    with tempfile.TemporaryDirectory(prefix="torchtrt_swish_doctor_") as tmp:
        onnx_file, engine_file = Path(tmp) / "tiny.onnx", Path(tmp) / "tiny.engine"
        nodes = len(swish_nodes(export_onnx(model, x, onnx_file, input_names=["x"], output_names=["y"])))
        if nodes != 1:
            raise CheckFailed(f"the export has {nodes} SwishBias nodes, expected 1")
        build_engine(onnx_file, engine_file)
        size = engine_file.stat().st_size
        load_plugin(trt)  # the engine names the plugin: its creator must be registered before deserializing
        with TrtRunner(EngineFromBytes(BytesFromPath(str(engine_file)))) as runner:
            outputs = runner.infer({"x": x.numpy()})
    error = compare(torch.from_numpy(outputs["y"]), expected, "float32")
    return (f"exported (1 SwishBias node), built and serialized ({size} bytes), deserialized and run by "
            f"TensorRT {trt.__version__}: max abs error vs the op {error:.1e}")


if __name__ == "__main__":
    sys.exit(route_main(ROUTE_ONNX, onnx_route))
