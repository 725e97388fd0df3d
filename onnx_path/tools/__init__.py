"""The tools of the ``torchtrt-swish`` console script, one module each, in the manner of Polygraphy's ``tools/``.

Nothing is imported here: the entry point (onnx_path.cli) imports ``base`` where torchtrt_swish may not load.
"""
