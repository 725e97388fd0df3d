"""GPU layer (`-m cuda`): the plugin enqueued inside a CUDA graph capture (what TensorRT does when an application
captures enqueueV3), in each capture mode (global, thread_local, relaxed), gives the op's bits on replay. A call
that a capture forbids (any CUDA runtime query of the stream in global mode, for one) would invalidate the capture
and make `torch.cuda.graph` raise."""
from __future__ import annotations

import pytest

from trt_plugin.harness import gpu_available, make

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")]


@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_enqueue_inside_graph_capture_replays_the_ops_bits(h, creator, dtype, mode):
    torch = pytest.importorskip("torch")
    ts = pytest.importorskip("torchtrt_swish")
    dt = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
    x = torch.randn(8, 16, 9, 9, device="cuda").to(dt)
    bias = torch.randn(16, 1, 1, device="cuda").to(dt)
    y = torch.full_like(x, float("nan"))
    p = make(creator)
    ins = [h.TensorDesc(dtype, list(x.shape)), h.TensorDesc(dtype, list(bias.shape))]
    outs = [h.TensorDesc(dtype, list(x.shape))]
    assert p.on_shape_change(ins, outs) == 0
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.cuda.graph(g, stream=s, capture_error_mode=mode):
        assert p.enqueue(ins, outs, [x.data_ptr(), bias.data_ptr()], [y.data_ptr()], 0, s.cuda_stream) == 0
    torch.cuda.synchronize()
    assert torch.isnan(y).all(), "capture must record the launch, not run it"
    x.copy_(torch.randn(x.shape, device="cuda").to(dt))  # replay reads the buffers as they are now
    g.replay()
    torch.cuda.synchronize()
    expected = ts.swish(x, bias)
    assert torch.equal(y.view(torch.int16 if dt != torch.float32 else torch.int32),
                       expected.view(torch.int16 if dt != torch.float32 else torch.int32))
