"""Child process of tests/test_tensorrt_runtime.py: loads the SwishBias plugin into one real TensorRT lean runtime
(the one on PYTHONPATH) by the given steps, observes what TensorRT reports, and prints it as JSON on the last line.

It only observes; the test decides what is right. It imports torchtrt_swish/plugin.py by path, so the process
holds TensorRT and the plugin library but not torch.

usage: trt_runtime_probe.py STEPS [--logger]
  STEPS    comma-separated: load_plugin (torchtrt_swish.plugin.load_plugin), load_plugin_threads (16 calls of it
           from 8 threads at once), cdll (ctypes.CDLL of the library, what
           Polygraphy --plugins does), load_library (the registry's own load_library), missing (load_plugin of a
           path that does not exist), not_a_plugin (load_plugin of a shared library without the plugin entry points)
  --logger create trt.Runtime with a Python ILogger subclass first (needs a GPU) and report what it captured
"""
from __future__ import annotations

import concurrent.futures
import ctypes
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _plugin_module():
    spec = importlib.util.spec_from_file_location("torchtrt_swish_plugin", ROOT / "torchtrt_swish" / "plugin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> dict:
    """Run the steps and the observations; returns the JSON-able result."""
    import numpy as np

    plugin = _plugin_module()
    trt = plugin.tensorrt_module()
    identity = (plugin.PLUGIN_NAME, plugin.PLUGIN_VERSION, plugin.PLUGIN_NAMESPACE)
    lib = str(plugin.plugin_library_path())
    out: dict = {"module": trt.__name__, "version": trt.__version__, "steps": []}

    captured: list[tuple[int, str]] = []
    runtime = None
    if "--logger" in argv:
        class Capture(trt.ILogger):
            def __init__(self):
                trt.ILogger.__init__(self)

            def log(self, severity, msg):
                captured.append((int(severity), msg))

        logger = Capture()
        runtime = trt.Runtime(logger)
        out["runtime"] = runtime is not None

    registry = trt.get_plugin_registry()

    def mine():
        return [c for c in registry.all_creators
                if (c.name, c.plugin_version, c.plugin_namespace) == identity]

    for step in argv[0].split(","):
        entry: dict = {"step": step}
        if step == "load_plugin":
            creator = plugin.load_plugin(trt)
            entry["returned"] = [creator.name, creator.plugin_version, creator.plugin_namespace]
        elif step == "load_plugin_threads":
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                creators = list(pool.map(lambda _: plugin.load_plugin(trt), range(16)))
            entry["returned"] = sorted({(c.name, c.plugin_version, c.plugin_namespace) for c in creators})
        elif step == "cdll":
            ctypes.CDLL(lib)
        elif step == "load_library":
            entry["handle"] = registry.load_library(lib) is not None
        elif step in ("missing", "not_a_plugin"):
            path = (Path(lib).parent / "no_such_plugin.so" if step == "missing"
                    else Path(trt.__file__).parent / next(p.name for p in Path(trt.__file__).parent.glob("*.so")))
            try:
                plugin.load_plugin(trt, path)
                entry["error"] = None
            except plugin.PluginLoadError as exc:
                entry["error"] = str(exc)
            entry["path"] = str(path)
        else:
            raise SystemExit(f"unknown step {step!r}")
        entry["count"] = len(mine())
        out["steps"].append(entry)

    out["count"] = len(mine())
    if out["count"] != 1:
        return out
    creator = registry.get_creator(*identity)
    out["get_creator"] = None if creator is None else [creator.name, creator.plugin_version, creator.plugin_namespace]
    out["fields"] = [[f.name, f.type.name, f.size] for f in creator.field_names]

    def fields(*specs):
        return trt.PluginFieldCollection([trt.PluginField(n, np.asarray(v, dtype=d), getattr(trt.PluginFieldType, t))
                                          for n, v, d, t in specs])

    made = {}
    for phase in ("BUILD", "RUNTIME"):
        made[phase] = creator.create_plugin("probe", fields(), getattr(trt.TensorRTPhase, phase))
    out["created"] = {k: p is not None for k, p in made.items()}
    # SwishBias has no fields: createPlugin ignores any it is given, with a warning naming each.
    ignored = {
        "former bias field": fields(("bias", [0.5], "float32", "FLOAT32")),
        "length 2": fields(("bias", [0.5, 1.0], "float32", "FLOAT32")),
        "unknown name": fields(("no_such_field", [0.5], "float32", "FLOAT32")),
        "int32 type": fields(("bias", [1], "int32", "INT32")),
    }
    out["ignored"] = {k: creator.create_plugin("probe", fc, trt.TensorRTPhase.BUILD) is not None
                      for k, fc in ignored.items()}

    build_plugin = made["BUILD"]
    core = build_plugin.get_capability_interface(trt.PluginCapabilityType.CORE)
    out["core"] = [core.plugin_name, core.plugin_version, core.plugin_namespace]
    build = build_plugin.get_capability_interface(trt.PluginCapabilityType.BUILD)
    out["build"] = {k: getattr(build, k) for k in ("num_outputs", "format_combination_limit", "metadata_string",
                                                   "timing_cache_id")}
    runtime_cap = made["RUNTIME"].get_capability_interface(trt.PluginCapabilityType.RUNTIME)
    out["runtime_capability"] = runtime_cap is not None
    out["captured"] = [[s, m] for s, m in captured if "SwishBias" in m]
    return out


if __name__ == "__main__":
    result = main(sys.argv[1:])
    sys.stdout.flush()
    print(json.dumps(result))
