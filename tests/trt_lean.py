"""The real TensorRT lean runtimes the `tensorrt_runtime` tests run against, and TensorRT-RTX (whose builder the
plugin must refuse): pins, install, where they live.

``python tests/trt_lean.py install [VERSION ...]`` installs each pinned version (all by default: the lean runtimes of
trt_lean_pins.txt and TensorRT-RTX of trt_rtx_pins.txt) with ``pip install --no-deps --require-hashes --target
build/trt-<kind>-<version>/`` and skips versions already there. Set TORCHTRT_SWISH_TRT_WHEELS to a folder of the
pinned wheels to install without an index (the hashes are still checked). ``python tests/trt_lean.py status`` prints
one line per version.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PINS_FILE = Path(__file__).resolve().with_name("trt_lean_pins.txt")
WHEELS_ENV = "TORCHTRT_SWISH_TRT_WHEELS"
MODULE = "tensorrt_lean_bindings"  # what both wheels provide: the bindings import their libs wheel themselves
# kind: (pins file, module, what the status lines call it)
KINDS = {"lean": (PINS_FILE, MODULE, "TensorRT lean"),
         "rtx": (PINS_FILE.with_name("trt_rtx_pins.txt"), "tensorrt_rtx_bindings", "TensorRT-RTX")}
_MARKER = ".pins"  # written last: a folder without it is an interrupted install


def pins(kind: str = "lean") -> dict[str, dict[str, list[str]]]:
    """{version: {distribution: [sha256, ...]}} from the kind's pins file, in file order."""
    pins_file = KINDS[kind][0]
    out: dict[str, dict[str, list[str]]] = {}
    for n, line in enumerate(pins_file.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) < 3 or any(len(h) != 64 for h in parts[2:]):
            raise ValueError(f"{pins_file}:{n}: expected 'version distribution sha256...', got {line!r}")
        out.setdefault(parts[0], {})[parts[1]] = parts[2:]
    return out


def versions(kind: str = "lean") -> list[str]:
    """The pinned versions of one kind."""
    return list(pins(kind))


def kind_of(version: str) -> str:
    """The kind whose pins file holds `version`; KeyError for none."""
    return next(k for k in KINDS if version in pins(k))


def major(version: str) -> int:
    """10 for '10.16.1.11'."""
    return int(version.split(".", 1)[0])


def runtime_dir(version: str) -> Path:
    """build/trt-<kind>-<version>: the folder to put on PYTHONPATH for that runtime."""
    return ROOT / "build" / f"trt-{kind_of(version)}-{version}"


def requirements(version: str) -> str:
    """The pip requirements (with every allowed hash) for one pinned version."""
    return "".join(f"{dist}=={version} " + " ".join(f"--hash=sha256:{h}" for h in hashes) + "\n"
                   for dist, hashes in pins(kind_of(version))[version].items())


def installed(version: str) -> bool:
    """Whether build/trt-<kind>-<version> holds a complete install of exactly these pins."""
    marker = runtime_dir(version) / _MARKER
    return marker.is_file() and marker.read_text() == requirements(version)


def install(version: str) -> str:
    """Install one pinned version unless it is already there; returns a one-line status."""
    dest = runtime_dir(version)
    name = KINDS[kind_of(version)][2]
    if installed(version):
        return f"{name} {version}: present in {dest.relative_to(ROOT)}"
    reqs = requirements(version)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{dest.name}-", dir=dest.parent) as tmp:
        req_file = Path(tmp) / "requirements.txt"
        req_file.write_text(reqs)
        target = Path(tmp) / "site"
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
               "--require-hashes", "--only-binary=:all:", "--no-compile", "--target", str(target), "-r", str(req_file)]
        wheels = os.environ.get(WHEELS_ENV)
        if wheels:
            cmd += ["--no-index", "--find-links", wheels]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"installing {name} {version} failed (pip exit {proc.returncode}):\n"
                               f"{proc.stdout}{proc.stderr}")
        (target / _MARKER).write_text(reqs)
        shutil.rmtree(dest, ignore_errors=True)
        target.rename(dest)
    return f"{name} {version}: installed into {dest.relative_to(ROOT)}"


def main(argv: list[str]) -> int:
    """CLI: install [VERSION ...] | status."""
    if not argv or argv[0] not in ("install", "status"):
        print(__doc__.strip().splitlines()[0], "\nusage: trt_lean.py install [VERSION ...] | status", file=sys.stderr)
        return 2
    every = [v for k in KINDS for v in versions(k)]
    chosen = argv[1:] or every
    unknown = [v for v in chosen if v not in every]
    if unknown:
        print(f"unknown TensorRT version(s) {unknown}; pinned: {every}", file=sys.stderr)
        return 2
    for v in chosen:
        if argv[0] == "status":
            print(f"{KINDS[kind_of(v)][2]} {v}: {'present' if installed(v) else 'missing'} in {runtime_dir(v)}")
        else:
            try:
                print(install(v), flush=True)
            except RuntimeError as exc:
                print(exc, file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
