"""Test-side view of the build (imports tools/native_build.py without side effects)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("native_build", ROOT / "tools" / "native_build.py")
native_build = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("native_build", native_build)
_spec.loader.exec_module(native_build)


def nvcc_available() -> bool:
    """True when the build could find nvcc."""
    return native_build.cuda_home() is not None
