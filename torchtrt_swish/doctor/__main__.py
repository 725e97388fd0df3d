"""``python -m torchtrt_swish.doctor [--json [PATH]]``: the checks of ``torchtrt-swish doctor``.

Run by path, it is each doctor process that does without torchtrt_swish/__init__.py (which imports torch and loads
``_C``): a probe (probe.py), or ``torchtrt-swish doctor`` where that ``__init__`` raises (onnx_path.cli passes its
error, which is then the torchtrt_swish row). There the package is its folder alone: it goes into ``sys.modules``
under its own name, its ``__init__`` not run, so that its modules import.
usage: python torchtrt_swish/doctor/__main__.py --import-error ERROR [--json [PATH]]   (or a probe's: probe.py)
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path


def _without_the_package(doctor, error: str, argv: list[str]) -> int:
    """The CLI's doctor where torchtrt_swish does not import, with its one-line usage errors."""
    doctor.IMPORT_ERROR = error
    parser = argparse.ArgumentParser(prog="torchtrt-swish doctor",
                                     description="check this install (torchtrt_swish does not load here)")
    doctor.add_arguments(parser)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # the only usage error --json can give
        return doctor.usage_error(f"unrecognized arguments: {' '.join(unknown)} (see {parser.prog} --help)")
    return doctor.run(args)


if __name__ == "__main__":
    if __spec__ is not None:  # python -m torchtrt_swish.doctor: the package imported
        from . import main

        sys.exit(main())
    del sys.path[0]  # run by path: this file's folder, whose modules must not shadow top-level names
    folder = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location(folder.name, folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    import torchtrt_swish.doctor as doctor

    if sys.argv[1:2] == ["--import-error"] and len(sys.argv) > 2:
        sys.exit(_without_the_package(doctor, sys.argv[2], sys.argv[3:]))
    sys.exit(doctor.probe.main(sys.argv[1:]))
