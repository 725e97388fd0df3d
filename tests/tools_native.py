"""Test-side view of the build: what the CMake configure of the editable build decided (build/native)."""
from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# pyproject.toml's build-dir of editable builds (`./dev setup`, `pip install --no-build-isolation -e .`).
BUILD = ROOT / "build" / "native"
SUMMARY = BUILD / "build_summary.json"


def build_summary() -> dict:
    """build/native/build_summary.json, written by CMakeLists.txt; {} before the first build."""
    try:
        return json.loads(SUMMARY.read_text())
    except FileNotFoundError:
        return {}


def nvcc_available() -> bool:
    """True when the build found a CUDA toolkit and compiled the CUDA kernels."""
    return bool(build_summary().get("cuda"))


def cuda_root() -> Path | None:
    """The CUDA toolkit root the build used, or None."""
    root = build_summary().get("cuda_root")
    return Path(root) if root else None
