"""GPU layer (`-m cuda`, H200): enqueue bit-identical to torchtrt_swish.swish for every dtype x bias layout x
shape (empty, odd, > 2^31 elements when memory allows) on a non-default stream, two plugins on two streams at
once, a scalar constant bias (what the ONNX surgery emits for the original material's format), CUDA-graph capture,
and no device memory kept by plugin objects.
"""
from __future__ import annotations

import os
import threading
import zlib

import pytest

from trt_plugin.harness import bias_shapes, bits, errors, gpu_available, make


cuda = [pytest.mark.cuda, pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")]


def _apply(marks):
    """Apply several marks at once (the GPU tests all carry `cuda` and the skip-without-GPU condition)."""
    def deco(fn):
        for m in marks:
            fn = m(fn)
        return fn
    return deco

GPU_DTYPES = ("float32", "float16", "bfloat16")
GPU_SHAPES = [(), (1,), (7,), (4096,), (3, 5), (13, 1031), (2, 3, 4, 5), (4, 64, 32, 33), (1, 3, 1, 1), (0,),
              (2, 0, 5), (8, 3, 224, 224)]


GPU_CASES = [(s, name, b) for s in GPU_SHAPES for name, b in bias_shapes(s)]


@pytest.fixture(scope="module")
def tt():
    """(torch, torchtrt_swish) for the GPU tests."""
    torch = pytest.importorskip("torch")
    ts = pytest.importorskip("torchtrt_swish")
    return torch, ts


def _tdtype(torch, name):
    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]


def _run(h, plugin, x, bias, stream, dtype_name, *, shape_change=True, out=None):
    """Run the plugin on (x, bias) on stream, into out (from its first element) or a new tensor. Returns y (after
    syncing)."""
    import torch

    y = torch.empty_like(x) if out is None else out
    ins = [h.TensorDesc(dtype_name, list(x.shape)), h.TensorDesc(dtype_name, list(bias.shape))]
    ptrs = [x.data_ptr(), bias.data_ptr()]
    outs = [h.TensorDesc(dtype_name, list(x.shape))]
    if shape_change:
        assert plugin.on_shape_change(ins, outs) == 0
    stream.wait_stream(torch.cuda.current_stream())  # inputs were written on the current stream
    rc = plugin.enqueue(ins, outs, ptrs, [y.data_ptr()], 0, stream.cuda_stream)
    assert rc == 0
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    return y


@_apply(cuda)
@pytest.mark.parametrize("dtype", GPU_DTYPES)
@pytest.mark.parametrize("shape, layout, bias_shape", GPU_CASES, ids=[f"{s}-{n}" for s, n, _ in GPU_CASES])
def test_enqueue_bit_identical_to_the_op(h, creator, logs, tt, dtype, shape, layout, bias_shape):
    torch, ts = tt
    dt = _tdtype(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(repr((shape, layout, dtype)).encode()))
    x = (torch.randn(shape, generator=gen, device="cuda") * 4).to(dt)
    bias = torch.randn(bias_shape, generator=gen, device="cuda").to(dt)
    p = make(creator)
    y = _run(h, p, x, bias, torch.cuda.Stream(), dtype)
    ref = ts.swish(x, bias)
    assert y.shape == ref.shape and y.dtype == ref.dtype
    assert torch.equal(bits(torch, y), bits(torch, ref))
    assert errors(logs) == []


@_apply(cuda)
@pytest.mark.parametrize("dtype", GPU_DTYPES)
def test_enqueue_special_values_bit_identical(h, creator, tt, dtype):
    torch, ts = tt
    dt = _tdtype(torch, dtype)
    vals = torch.tensor([0.0, -0.0, 1.0, -1.0, 88.0, -88.0, 100.0, -100.0, 1e-30, -1e-30, float("inf"),
                         float("-inf"), float("nan"), 3.0e38, -3.0e38, 20.0, -20.0], device="cuda")
    x = vals.repeat(61).reshape(61, -1).to(dt)  # 61 x 17: odd sizes, scalar tail
    for bias in (torch.tensor(0.5, device="cuda").to(dt), vals.to(dt), vals[:1].to(dt) * float("nan")):
        y = _run(h, make(creator), x, bias, torch.cuda.Stream(), dtype)
        assert torch.equal(bits(torch, y), bits(torch, ts.swish(x, bias)))


# (x shape, bias shape): launches whose last block has threads past the last pack (a store without its bound would
# write there): two packs a thread in a dividing mode (last-dim vector, dim-1 uniform) and in a guarded one (scalar),
# one pack a thread with an element-wise tail (periodic), 8-byte half packs (dim-1).
PAST_END_CASES = [((87_400, 24), (24,)), ((3, 5, 139_816), (5, 1)), ((2_097_160,), ()), ((13, 1031), (1031,)),
                  ((3, 16, 8, 9), (16, 1, 1))]


@_apply(cuda)
@pytest.mark.parametrize("dtype", GPU_DTYPES)
@pytest.mark.parametrize("shape, bias_shape", PAST_END_CASES, ids=[str(s) for s, _ in PAST_END_CASES])
def test_enqueue_writes_nothing_past_the_output(h, creator, tt, dtype, shape, bias_shape):
    """y is the head of a larger buffer of a NaN pattern: the op's bits in y, the pattern untouched after it."""
    torch, ts = tt
    dt = _tdtype(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(repr((shape, dtype)).encode()))
    x = (torch.randn(shape, generator=gen, device="cuda") * 4).to(dt)
    bias = torch.randn(bias_shape, generator=gen, device="cuda").to(dt)
    n = x.numel()
    buf = torch.empty(n + 8192, device="cuda", dtype=dt)
    pattern = 0x7FC0_5A5A if buf.element_size() == 4 else 0x7FDA  # NaNs
    bits(torch, buf).fill_(pattern)
    _run(h, make(creator), x, bias, torch.cuda.Stream(), dtype, out=buf)
    assert torch.equal(bits(torch, buf[:n]), bits(torch, ts.swish(x, bias).reshape(-1)))
    assert bool((bits(torch, buf[n:]) == pattern).all()), "the kernel wrote past the output"


@_apply(cuda)
@pytest.mark.parametrize("dtype", GPU_DTYPES)
def test_enqueue_misaligned_views(h, creator, tt, dtype):
    """Offset views (not 16-byte aligned) take the scalar path and must still match."""
    torch, ts = tt
    dt = _tdtype(torch, dtype)
    base = torch.randn(10_003, device="cuda").to(dt)
    x = base[1:]  # contiguous, but 1 element past a 16-byte boundary
    full_bias = torch.randn(10_003, device="cuda").to(dt)[1:]
    scalar_bias = base[3:4].reshape(())
    for b in (full_bias, scalar_bias):
        y = _run(h, make(creator), x, b, torch.cuda.Stream(), dtype)
        assert torch.equal(bits(torch, y), bits(torch, ts.swish(x, b)))


@_apply(cuda)
@pytest.mark.parametrize("dtype", GPU_DTYPES)
@pytest.mark.parametrize("value", [0.0, 0.3, -1.5, 1e-8, 1e30, 65504.0, 70000.0, float("inf")])
def test_scalar_constant_bias_in_every_plugin_object(h, creator, logs, tt, dtype, value):
    torch, ts = tt
    dt = _tdtype(torch, dtype)
    x = (torch.randn(5, 7, 9, device="cuda") * 3).to(dt)
    bias = torch.tensor(value, dtype=torch.float32, device="cuda").to(dt)  # 0-d, in x's dtype, as the surgery writes
    ref = ts.swish(x, bias)
    build = make(creator)
    runtime = creator.create("rt", build.fields_to_serialize(), "runtime")
    attached = runtime.attach_to_context(h.ResourceContext())
    for p in (build, runtime, attached, build.clone()):
        y = _run(h, p, x, bias, torch.cuda.Stream(), dtype)
        assert torch.equal(bits(torch, y), bits(torch, ref))
    assert errors(logs) == []


@_apply(cuda)
def test_one_plugin_serves_every_dtype_and_shape_in_turn(h, creator, tt):
    torch, ts = tt
    p = make(creator)
    s = torch.cuda.Stream()
    for dtype in GPU_DTYPES * 2:
        for shape in ((3,), (4, 5), (2, 3, 7)):
            x = torch.randn(shape, device="cuda").to(_tdtype(torch, dtype))
            scalar = torch.tensor(-0.75, device="cuda").to(x.dtype)
            assert torch.equal(_run(h, p, x, scalar, s, dtype), ts.swish(x, scalar))
            b = torch.randn(shape[-1], device="cuda").to(x.dtype)
            q = make(creator)
            assert torch.equal(_run(h, q, x, b, s, dtype), ts.swish(x, b))


@_apply(cuda)
def test_enqueue_replans_when_shapes_change_without_on_shape_change(h, creator, tt):
    torch, ts = tt
    p = make(creator)
    x1, b1 = torch.randn(4, 6, device="cuda"), torch.randn(6, device="cuda")
    assert torch.equal(_run(h, p, x1, b1, torch.cuda.Stream(), "float32"), ts.swish(x1, b1))
    x2, b2 = torch.randn(3, 5, 2, device="cuda"), torch.randn(5, 1, device="cuda")  # now per-channel on dim 1
    y = _run(h, p, x2, b2, torch.cuda.Stream(), "float32", shape_change=False)
    assert torch.equal(y, ts.swish(x2, b2))


@_apply(cuda)
def test_two_plugins_on_two_streams_concurrently(h, creator, tt):
    torch, ts = tt
    jobs = []
    for dtype, shape in (("float16", (64, 1024, 33)), ("bfloat16", (32, 3, 127, 129))):
        dt = _tdtype(torch, dtype)
        x = torch.randn(shape, device="cuda").to(dt)
        bias = torch.randn(shape[1], *([1] * (len(shape) - 2)), device="cuda").to(dt)
        p = make(creator)
        ins = [h.TensorDesc(dtype, list(x.shape)), h.TensorDesc(dtype, list(bias.shape))]
        outs = [h.TensorDesc(dtype, list(x.shape))]
        assert p.on_shape_change(ins, outs) == 0
        ys = [torch.empty_like(x) for _ in range(20)]
        jobs.append(dict(p=p, x=x, bias=bias, ins=ins, outs=outs, ys=ys, stream=torch.cuda.Stream(), rcs=[]))
    torch.cuda.synchronize()

    def worker(j):
        for y in j["ys"]:
            j["rcs"].append(j["p"].enqueue(j["ins"], j["outs"], [j["x"].data_ptr(), j["bias"].data_ptr()],
                                           [y.data_ptr()], 0, j["stream"].cuda_stream))

    threads = [threading.Thread(target=worker, args=(j,)) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    for j in jobs:
        assert j["rcs"] == [0] * len(j["ys"])
        ref = ts.swish(j["x"], j["bias"])
        assert all(torch.equal(y, ref) for y in j["ys"])


@_apply(cuda)
def test_first_enqueue_inside_cuda_graph_capture(h, creator, tt):
    """A plugin object's first enqueue may happen inside a graph capture: it must do nothing a capture forbids."""
    torch, ts = tt
    x = torch.randn(1000, 3, device="cuda")
    bias = torch.tensor(2.0, device="cuda")
    # Warm the library (CUDA runtime init, lazy kernel loading) with another plugin object outside the capture:
    # what is under test is this plugin's first use, not the CUDA runtime's own first use.
    _run(h, make(creator), x, bias, torch.cuda.current_stream(), "float32")
    y = torch.empty_like(x)
    p = make(creator)
    ins = [h.TensorDesc("float32", [1000, 3]), h.TensorDesc("float32", [])]
    outs = [h.TensorDesc("float32", [1000, 3])]
    assert p.on_shape_change(ins, outs) == 0
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(g, stream=s):
            assert p.enqueue(ins, outs, [x.data_ptr(), bias.data_ptr()], [y.data_ptr()], 0, s.cuda_stream) == 0
    torch.cuda.synchronize()
    x.copy_(torch.randn(1000, 3, device="cuda"))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, ts.swish(x, bias))


def _under_compute_sanitizer() -> bool:
    """compute-sanitizer injects itself through CUDA's injection hook; its own allocations skew mem_get_info."""
    if os.environ.get("TORCHTRT_SWISH_UNDER_SANITIZER") == "1":
        return True
    return any("sanitizer" in os.environ.get(k, "").lower() for k in ("CUDA_INJECTION64_PATH", "LD_PRELOAD"))


@_apply(cuda)
@pytest.mark.skipif(_under_compute_sanitizer(), reason="device memory accounting is not meaningful under compute-sanitizer")
def test_plugin_objects_keep_no_device_memory(h, creator, tt):
    torch, _ = tt
    x, bias = torch.randn(16, device="cuda"), torch.tensor(1.0, device="cuda")

    def cycle(n):
        for _ in range(n):
            p = make(creator)
            _run(h, p, x, bias, torch.cuda.current_stream(), "float32")
            p.clone().close()
            p.close()

    cycle(50)
    # mem_get_info counts the whole device, so other processes on it (parallel test workers, a sanitizer run) move
    # it too: a leak shows in every round, their allocations in some at most.
    drops = []
    for _ in range(3):
        torch.cuda.synchronize()
        free_before, _ = torch.cuda.mem_get_info()
        cycle(10_000)  # any per-object device allocation (>= 512 bytes each) would show as >= 5 MiB here
        torch.cuda.synchronize()
        free_after, _ = torch.cuda.mem_get_info()
        drops.append(free_before - free_after)
    assert min(drops) < 2 * 2**20, f"device memory lost per round of 10000 plugin objects: {drops}"


HUGE = 2**31 + 77  # elements: past int32 indexing


@_apply(cuda)
@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("TORCHTRT_SWISH_SKIP_HUGE") == "1", reason="TORCHTRT_SWISH_SKIP_HUGE=1 (sanitizer runs)")
@pytest.mark.parametrize("dtype, layout", [("float16", "last"), ("bfloat16", "scalar")])
def test_enqueue_huge_more_than_2_31_elements(h, creator, tt, dtype, layout):
    torch, ts = tt
    dt = _tdtype(torch, dtype)
    need = 3 * HUGE * 2 + 2**30
    free, _ = torch.cuda.mem_get_info()
    if free < need:
        pytest.skip(f"needs {need / 2**30:.1f} GiB free GPU memory, {free / 2**30:.1f} GiB free")
    if layout == "last":
        x = torch.empty(HUGE // 13 + 1, 13, dtype=dt, device="cuda")  # periodic indexing past 2^31
        bias = torch.randn(13, device="cuda").to(dt)
    else:
        x = torch.empty(HUGE, dtype=dt, device="cuda")
        bias = torch.randn((), device="cuda").to(dt)
    x.uniform_(-8, 8)
    assert x.numel() > 2**31
    y = _run(h, make(creator), x, bias, torch.cuda.Stream(), dtype)
    ref = ts.swish(x, bias)
    assert torch.equal(bits(torch, y), bits(torch, ref))
    del y, ref
