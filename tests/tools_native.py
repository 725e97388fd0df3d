"""Test-side view of the build: setup.py's paths and toolchain checks (imported by path; setup() is not run)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("torchtrt_swish_setup", ROOT / "setup.py")
native_build = importlib.util.module_from_spec(_spec)
sys.modules.setdefault(_spec.name, native_build)  # dataclasses look their module up there
_spec.loader.exec_module(native_build)


def nvcc_available() -> bool:
    """True when the build could find nvcc."""
    return native_build.cuda_home() is not None
