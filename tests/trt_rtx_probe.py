"""Child process of tests/test_tensorrt_rtx.py: the SwishBias plugin library next to the real TensorRT-RTX (the
folder on PYTHONPATH), loaded one way, then an ONNX model with a SwishBias node parsed by TensorRT-RTX's parser
(its builder runs on the CPU). Prints what it saw as JSON on the last line; the test decides what is right. A
process that TensorRT-RTX aborts prints nothing.

usage: trt_rtx_probe.py load_library|cdll
"""
from __future__ import annotations

import ctypes
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(how: str) -> dict:
    import numpy as np
    import onnx
    import tensorrt_rtx_bindings as trt
    from onnx import TensorProto, helper

    # torchtrt_swish/plugin.py by path: the process holds TensorRT-RTX and the plugin library, not torch.
    spec = importlib.util.spec_from_file_location("torchtrt_swish_plugin", ROOT / "torchtrt_swish" / "plugin.py")
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    lib = str(plugin.plugin_library_path())
    registry = trt.get_plugin_registry()
    out: dict = {"version": trt.__version__}
    if how == "load_library":
        out["handle"] = registry.load_library(lib) is not None
    else:
        ctypes.CDLL(lib)  # what Polygraphy --plugins does
    out["creators"] = sum(c.name == plugin.PLUGIN_NAME for c in registry.all_creators)

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    bias = onnx.numpy_helper.from_array(np.zeros(4, np.float32), "bias")
    node = helper.make_node(plugin.PLUGIN_NAME, ["x", "bias"], ["y"], domain=plugin.PLUGIN_NAMESPACE,
                            plugin_version=plugin.PLUGIN_VERSION, plugin_namespace=plugin.PLUGIN_NAMESPACE)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(plugin.PLUGIN_NAMESPACE, 1)]
    model = helper.make_model(helper.make_graph([node], "g", [x], [y], [bias]), opset_imports=opsets)
    logger = trt.Logger(trt.Logger.WARNING)
    network = trt.Builder(logger).create_network(0)
    parser = trt.OnnxParser(network, logger)
    out["parsed"] = parser.parse(model.SerializeToString())
    out["errors"] = [str(parser.get_error(i).desc()) for i in range(parser.num_errors)]
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])), flush=True)
