"""What the CMake build needs from the torch it builds against, and the wheel's torch pin.

The one piece of the build that stays in Python: torch's version, paths and GPU are facts of the Python environment.
* ``python cmake/torch_info.py BUILD_INFO_FILE`` (CMake's configure step) prints ``key=value`` lines for CMake and
  writes ``_build_info.py`` (only when its text changes, so an unchanged rebuild stays a no-op).
* ``dynamic_metadata`` / ``dynamic_wheel``: the ``[[tool.dynamic-metadata]]`` provider of the ``dependencies`` field,
  ``torch==X.Y.*`` of the torch that builds, which the sdist therefore declares Dynamic (PEP 643).
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _torch_pin():
    """torchtrt_swish/_torch_pin.py by path: importing the package would load the _C being built."""
    spec = importlib.util.spec_from_file_location("torchtrt_swish_torch_pin", ROOT / "torchtrt_swish" / "_torch_pin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dynamic_metadata(settings, project):
    """The wheel's requirements: _C runs only under the torch minor version it was built with."""
    import torch

    if settings:
        raise ValueError(f"torch_info takes no settings, got {sorted(settings)}")
    return {"dependencies": [_torch_pin().torch_requirement(torch.__version__), "numpy"]}


def dynamic_wheel(settings):
    """A wheel built from the sdist pins the torch that builds it, not the one that made the sdist."""
    return {"dependencies": True}


def _visible_gpu_archs(torch) -> str:
    """The visible GPUs' compute capabilities ('9.0;12.0'), or '' without a usable GPU."""
    try:
        if torch.cuda.is_available():
            caps = sorted({torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())})
            return ";".join(f"{a}.{b}" for a, b in caps)
    except Exception:  # noqa: BLE001 - no usable GPU means the portable default list
        pass
    return ""


def _write_if_changed(path: Path, text: str) -> None:
    try:
        if path.read_text() == text:
            return
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def main(build_info: str) -> None:
    """Print the facts CMake reads and write _build_info.py."""
    import torch

    pin = _torch_pin()
    root = Path(torch.__file__).resolve().parent
    config = root / "include" / "ATen" / "Config.h"
    facts = {
        "VERSION": torch.__version__,
        "REQUIREMENT": pin.torch_requirement(torch.__version__),
        "ROOT": root.as_posix(),
        "CUDA": torch.version.cuda or "",
        "CXX11_ABI": int(torch.compiled_with_cxx11_abi()),
        # torch's headers run at::parallel_for through `#pragma omp parallel` only when ATen uses OpenMP.
        "PARALLEL_OPENMP": int("#define AT_PARALLEL_OPENMP 1" in (config.read_text() if config.exists() else "")),
        "GPU_ARCHS": "" if os.environ.get("TORCH_CUDA_ARCH_LIST") else _visible_gpu_archs(torch),
    }
    try:
        import pybind11

        facts["PYBIND11_CMAKE_DIR"] = Path(pybind11.get_cmake_dir()).as_posix()
    except ImportError:
        facts["PYBIND11_CMAKE_DIR"] = ""
    _write_if_changed(Path(build_info), pin.build_info_source(torch.__version__))
    for key, value in facts.items():
        print(f"{key}={value}")


if __name__ == "__main__":
    main(sys.argv[1])
