"""The tools of the ``torchtrt-swish`` console script (``onnx_path.cli`` is its entry point), one module each, in the
manner of Polygraphy's ``tools/``: ``export``, ``fuse``, ``build_engine``, ``check``, ``doctor``, each a ``Tool``
with its ``add_parser_args`` and ``run``.

* ``base`` — the Tool shape, the exit codes, ``UsageError`` and the help layout (standard library only).
* ``args`` — what the tools share: the argparse types of their values and the checks of their input and output paths.

Nothing is imported here: the entry point imports ``base`` where torchtrt_swish may not load.
"""
