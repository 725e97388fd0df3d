"""The optional extras (pyproject's [project.optional-dependencies]): which module comes with which extra, and the
one-line install hint that names it, for every place that reports a missing optional module."""
from __future__ import annotations

import importlib.util

#: Extra -> the top-level modules its distributions provide (tests/test_extras.py holds this to pyproject.toml).
EXTRAS: dict[str, tuple[str, ...]] = {
    "onnx": ("onnx", "onnxscript", "onnxruntime", "onnxruntime_extensions", "onnx_graphsurgeon", "polygraphy"),
    "vision": ("torchvision",),
}

#: The lowest Polygraphy that works with TensorRT 11: earlier releases' CreateConfig reads
#: ``layer.precision_is_set`` unguarded, and TensorRT 11 removed that property.
POLYGRAPHY_MIN = "0.53.6"


def extra_for(module: str | None) -> str | None:
    """The extra that provides `module` (a dotted name counts by its top-level package), or None."""
    top = (module or "").split(".", 1)[0]
    return next((extra for extra, modules in EXTRAS.items() if top in modules), None)


def install_hint(extra: str) -> str:
    """"pip install 'torchtrt_swish[EXTRA]'": the command that installs one extra."""
    return f"pip install 'torchtrt_swish[{extra}]'"


def installed(name: str) -> bool:
    """Whether a module of that name can be found (without importing it; a broken parent package counts as no)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def missing_extra_message(exc: ImportError) -> str | None:
    """'needs MODULE, which is not installed: pip install ...' for a module of an extra; None for any other."""
    extra = extra_for(getattr(exc, "name", None))
    if extra is None:
        return None
    return f"needs {exc.name.split('.', 1)[0]}, which is not installed: {install_hint(extra)}"


def older_than(version: str, minimum: str) -> bool:
    """Whether `version` sorts before `minimum` by PEP 440 (False when it cannot be read, or torch cannot load)."""
    try:
        from torch.torch_version import TorchVersion  # PEP 440 ordering (torch's vendored packaging) for any version

        return TorchVersion(version) < minimum
    except Exception:  # noqa: BLE001 - torch broken or a version that is no version: nothing to say about it
        return False
