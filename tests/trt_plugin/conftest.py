"""The harness fixtures (h, lib, creator and the autouse logs) for every test in this folder."""
from trt_plugin.harness import creator, h, lib, logs  # noqa: F401  (fixtures)
