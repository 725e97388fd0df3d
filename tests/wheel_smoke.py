"""Smoke test of an installed torchtrt_swish wheel, run by `./dev wheel` from outside the source tree.

Checks what a user of the wheel without extras meets first: the package comes from the venv (not a source checkout),
the op on the CPU against a float64 PyTorch reference, the plugin library inside the package, the console script's
--help and --version, the torch pin in the wheel's metadata and its license. Exits 1 with the failed check's line;
prints one line per passed check.
"""
from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path


def check(ok: bool, what: str) -> None:
    """Print a passed check, or exit 1 naming the failed one."""
    if not ok:
        print(f"[wheel smoke] FAILED: {what}", flush=True)
        sys.exit(1)
    print(f"[wheel smoke] ok: {what}", flush=True)


def main() -> None:
    """Run the checks in order; the first failure ends the run."""
    import torch

    import torchtrt_swish
    from torchtrt_swish import _build_info
    from torchtrt_swish._torch_pin import torch_requirement

    prefix = Path(sys.prefix).resolve()
    package = Path(torchtrt_swish.__file__).resolve().parent
    check(package.is_relative_to(prefix), f"torchtrt_swish imported from the venv ({package})")

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 5, 7, generator=gen) * 6
    bias = torch.randn(1, 3, 1, 1, generator=gen)
    y = torchtrt_swish.swish(x, bias)
    ref = (x.double() * torch.sigmoid(x.double()) + bias.double()).float()
    torch.testing.assert_close(y, ref)
    check(True, f"torchtrt_swish.swish on the CPU matches float64 PyTorch ({tuple(x.shape)}, per-channel bias)")

    try:
        lib = torchtrt_swish.plugin_library_path()
    except FileNotFoundError as exc:
        check(False, f"plugin_library_path(): {exc}")
    check(lib.is_file() and lib.resolve().parent == package, f"plugin_library_path() exists in the package ({lib})")

    script = prefix / "bin" / "torchtrt-swish"
    for arg, want in (("--help", "usage: torchtrt-swish"), ("--version", "torchtrt-swish ")):
        proc = subprocess.run([str(script), arg], capture_output=True, text=True)
        last_err = (proc.stderr.strip().splitlines() or [""])[-1]
        check(proc.returncode == 0 and proc.stdout.startswith(want),
              f"{script.name} {arg} exits 0 and prints {want.strip()!r}... (rc {proc.returncode}"
              f"{'; ' + last_err if last_err else ''})")

    requires = importlib.metadata.requires("torchtrt_swish") or []
    base = [r for r in requires if "extra ==" not in r]
    want = torch_requirement(_build_info.TORCH_VERSION)
    check(want in base, f"the wheel requires {want} (Requires-Dist without extras: {', '.join(base)})")
    check(_build_info.TORCH_VERSION == torch.__version__,
          f"built with the torch that runs it ({_build_info.TORCH_VERSION})")
    dist = importlib.metadata.distribution("torchtrt_swish")
    check(dist.metadata.get_all("Dynamic") is None, "the wheel's metadata leaves no field Dynamic (only an sdist may)")
    names = dist.metadata.get_all("License-File") or []
    text = dist.read_text("licenses/LICENSE") or ""
    check(names == ["LICENSE"] and "Apache License" in text and "Version 2.0, January 2004" in text,
          f"the wheel ships its license (License-File {names}, dist-info/licenses/LICENSE of {len(text)} characters)")


if __name__ == "__main__":
    main()
