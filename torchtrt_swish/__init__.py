"""torchtrt_swish: Swish with a learnable bias (y = x * sigmoid(x) + b) as a custom op, carried into TensorRT."""
from __future__ import annotations

import torch  # noqa: F401  (libtorch must be loaded before our extension)

from ._torch_pin import mismatch_message

try:
    from ._build_info import TORCH_VERSION as _BUILT_WITH_TORCH
except ImportError:  # pragma: no cover - a tree built before the build recorded it: loading _C is the only check
    pass
else:
    # Checked before _C loads: under another torch its load fails with an undefined C++ symbol, or worse, succeeds.
    if _mismatch := mismatch_message(_BUILT_WITH_TORCH, torch.__version__):
        # name: the package that failed, so `python -m torchtrt_swish.doctor` reports it in one line (runpy), too.
        raise ImportError(_mismatch, name=__name__)

try:
    from . import _C  # noqa: F401  (registers torchtrt_swish::swish and its CPU/CUDA kernels)
except ImportError as exc:  # pragma: no cover - exercised only on broken installs
    raise ImportError(
        "torchtrt_swish: the compiled extension torchtrt_swish._C could not be loaded "
        f"({exc}). Build it with `pip install --no-build-isolation -e .` against the torch you run "
        f"(this is torch {torch.__version__}).", name=__name__
    ) from exc

from . import ops  # noqa: E402  (fake kernels and autograd)
from .modules import EfficientBlock, EfficientSwish, Net  # noqa: E402
from .ops import swish  # noqa: E402
from .plugin import PLUGIN_NAME, PLUGIN_NAMESPACE, PLUGIN_VERSION, plugin_library_path  # noqa: E402

__all__ = [
    "swish",
    "EfficientSwish",
    "EfficientBlock",
    "Net",
    "plugin_library_path",
    "PLUGIN_NAME",
    "PLUGIN_VERSION",
    "PLUGIN_NAMESPACE",
]


def _register_optional_integrations() -> None:
    """Register the Torch-TensorRT converter when Torch-TensorRT is importable; silent otherwise."""
    try:
        from . import converter

        converter.register()
    except Exception as exc:  # noqa: BLE001 - optional integration must never break the base import
        # register() is silent when Torch-TensorRT is absent; reaching here means it is installed but the
        # registration broke (e.g. an API change): say so, or the op would silently stay in PyTorch.
        import logging

        logging.getLogger(__name__).warning("torchtrt_swish: Torch-TensorRT converter not registered: %s", exc,
                                            exc_info=True)


_register_optional_integrations()
