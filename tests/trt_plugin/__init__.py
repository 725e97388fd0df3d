"""Conformance tests of the SwishBias TensorRT plugin (csrc/trt_plugin), driven through tests/trt_harness."""
