"""Two GPUs: the op and the SwishBias plugin on cuda:1 while cuda:0 is current, and DistributedDataParallel.

Marked `multi_gpu` and skipped below two visible GPUs; tools/multi_gpu_check.sh runs them on nvidia-h200-x2.

In this process, cuda:0 is made current with a live context (as in a server that also uses cuda:0), so the calls
below really run while the CUDA runtime's current device is 0; each of those tests checks afterwards that cuda:0
is still current and that its memory did not change (torch's allocator and the device's free memory, which also
sees allocations made outside torch, such as the plugin's). Whether a cuda:0 *context* gets created at all shows
only in a process that never used cuda:0: the probe tests run each workload in such a process
(tests/multi_gpu_worker.py) next to the same workload in plain torch ops.
"""
from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import warnings
import zlib
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import torchtrt_swish
from multi_gpu_worker import BIAS_INITS, CudaDriver
from samples import sample_inputs
from test_ops import _assert_backward_close, _assert_close_to_reference
from trt_plugin.harness import (  # noqa: F401  (h, lib, creator, logs are fixtures)
    bias_shapes,
    bits,
    creator,
    errors,
    h,
    lib,
    logs,
    make,
)

WORKER = Path(__file__).resolve().parent / "multi_gpu_worker.py"
GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = [
    pytest.mark.multi_gpu,
    pytest.mark.skipif(GPUS < 2, reason=f"needs 2 CUDA GPUs: the second GPU (cuda:1) is missing ({GPUS} visible)"),
]

CUDA1 = torch.device("cuda", 1)
DTYPES = [pytest.param(d, id=str(d).removeprefix("torch.")) for d in (torch.float32, torch.float16, torch.bfloat16)]
# One sample per bias layout: scalar (numel 1 and 0-d), per-channel on the last dim [C], on dim 1 [C,1,1], full.
LAYOUTS = ("scalar_1elem_4d", "scalar_0d_4d", "per_channel_last_4d", "per_channel_dim1_C11", "full")
# Environment for child processes: NVLink multicast stays off on the shared hosts (KINDS.md of the device tool).
CHILD_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def _layout_samples(dtype):
    return [s for s in sample_inputs(CUDA1, dtype) if s.name in LAYOUTS]


def _child_env() -> dict:
    return {**os.environ, **CHILD_ENV}


# ---------------------------------------------------------------------------------------------- cuda:0 current


@pytest.fixture(scope="module")
def driver():
    """(CudaDriver, cuda:0's primary context), retained for the module (torch may use it once it exists)."""
    drv = CudaDriver()
    return drv, drv.retain_primary(0)


def _device0_state():
    return {"memory_allocated": torch.cuda.memory_allocated(0),
            "max_memory_reserved": torch.cuda.max_memory_reserved(0), "free": torch.cuda.mem_get_info(0)[0]}


@pytest.fixture
def cuda0_current(driver):
    """cuda:0 current on this thread during the test; afterwards still current and its memory unchanged."""
    drv, ctx0 = driver
    drv.set_current(ctx0)
    assert torch.cuda.current_device() == 0 and drv.current_device() == 0
    before = _device0_state()
    yield drv
    torch.cuda.synchronize(1)
    assert drv.current_device() == 0 and torch.cuda.current_device() == 0, "cuda:0 is no longer the current device"
    after = _device0_state()
    # Any device allocation takes at least a 2 MiB page, so less than 1 MiB of free memory lost means none was made.
    assert after["free"] > before["free"] - 2**20, f"cuda:0 lost {before['free'] - after['free']} bytes of free memory"
    torch_side = ("memory_allocated", "max_memory_reserved")
    assert [after[k] for k in torch_side] == [before[k] for k in torch_side], (
        f"torch's allocator used cuda:0: {before} -> {after}")


def _labelled(label, check, *args, **kwargs):
    try:
        check(*args, **kwargs)
    except AssertionError as e:
        raise AssertionError(f"{label}: {e}") from None


# ---------------------------------------------------------------------------------------------- the op on cuda:1


@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_on_cuda1_while_cuda0_is_current(cuda0_current, dtype):
    for s in sample_inputs(CUDA1, dtype):
        y = torchtrt_swish.swish(s.x, s.bias)
        _labelled(f"{s.name} {dtype}", _assert_close_to_reference, y, s.x, s.bias)


@pytest.mark.parametrize("dtype", DTYPES)
def test_backward_on_cuda1_while_cuda0_is_current(cuda0_current, dtype):
    for s in sample_inputs(CUDA1, dtype):
        g = torch.randn(s.x.shape, dtype=torch.float64).to(device=CUDA1, dtype=dtype)
        _assert_backward_close(s.x, s.bias, g, s.name)


def _assert_double_backward_close(x0: torch.Tensor, b0: torch.Tensor, label: str) -> None:
    """Second derivatives of the op against fp64 autograd of the plain formula on the CPU.

    L = <v, dx> + <w, dbias> with (dx, dbias) the first backward for g; dL/dx = v g f''(x), dL/dg = v f'(x) + w,
    f' = s (1 + x (1 - s)), f'' = s (1 - s) (2 + x (1 - 2 s)), s = sigmoid(x). The op evaluates these in x's dtype
    with about ten roundings, so the bound is 16 eps times the formula with every difference replaced by the sum of
    its operands' magnitudes (a - b carries an error of eps (|a| + |b|), however small a - b is), and s by
    s + smallest_normal (a subnormal s is off by up to smallest_normal * eps).
    """
    dtype = x0.dtype
    gen = torch.Generator().manual_seed(zlib.crc32(label.encode()))
    rnd = lambda t: torch.randn(t.shape, generator=gen, dtype=torch.float64)  # noqa: E731
    g64, v64, w64 = rnd(x0), rnd(x0), rnd(b0)
    x = x0.detach().clone().requires_grad_()
    b = b0.detach().clone().requires_grad_()
    g = g64.to(device=x0.device, dtype=dtype).requires_grad_()
    dx, db = torch.autograd.grad(torchtrt_swish.swish(x, b), (x, b), g, create_graph=True)
    ggx, ggg = torch.autograd.grad((dx, db), (x, g), (v64.to(x0.device, dtype), w64.to(x0.device, dtype)))

    xd = x0.detach().to("cpu", torch.float64).requires_grad_()
    bd = b0.detach().to("cpu", torch.float64).requires_grad_()
    gd = g.detach().to("cpu", torch.float64).requires_grad_()
    vd, wd = v64.to(dtype).double(), w64.to(dtype).double()  # the values the op saw
    dxd, dbd = torch.autograd.grad(F.silu(xd) + bd, (xd, bd), gd, create_graph=True)
    ggxd, gggd = torch.autograd.grad((dxd, dbd), (xd, gd), (vd, wd))

    fi = torch.finfo(dtype)
    xa, s = xd.detach().abs(), torch.sigmoid(xd.detach())
    s_env = s + fi.smallest_normal
    env_x = vd.abs() * gd.detach().abs() * s_env * (1 + s) * (2 + xa * (1 + 2 * s))
    env_g = vd.abs() * s_env * (1 + xa * (1 + s)) + wd.abs().expand(xd.shape)
    for name, got, want, env in (("d/dx", ggx, ggxd, env_x), ("d/dg", ggg, gggd, env_g)):
        err = (got.detach().to("cpu", torch.float64) - want).abs()
        bad = ~(err <= 16 * fi.eps * env + fi.smallest_normal * fi.eps)
        assert not bad.any(), (f"{label} {dtype} {name}: {int(bad.sum())} of {err.numel()} off, worst "
                               f"{err[bad].max().item():.3e}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_double_backward_on_cuda1_while_cuda0_is_current(cuda0_current, dtype):
    for s in sample_inputs(CUDA1, dtype):
        _assert_double_backward_close(s.x, s.bias, s.name)


def _grads(x0, b0, g):
    x = x0.detach().clone().requires_grad_()
    b = b0.detach().clone().requires_grad_()
    y = torchtrt_swish.swish(x, b)
    dx, db = torch.autograd.grad(y, (x, b), g)
    return y, dx, db


@pytest.mark.parametrize("dtype", DTYPES)
def test_side_stream_of_cuda1(cuda0_current, dtype):
    """The op and its backward on a side stream of cuda:1 wait for that stream's earlier work and nothing else.

    The inputs hold NaN until the side stream writes them behind a long sleep kernel: an op launched on any other
    stream would run first and read the NaNs. The results must be the default stream's bits.
    """
    side = torch.cuda.Stream(device=CUDA1)
    for s in _layout_samples(dtype):
        g0 = torch.randn(s.x.shape, dtype=torch.float64).to(device=CUDA1, dtype=dtype)
        want = _grads(s.x, s.bias, g0)
        x_buf, b_buf, g_buf = (torch.full_like(t, float("nan")) for t in (s.x, s.bias, g0))
        torch.cuda.synchronize(1)
        with torch.cuda.stream(side):
            torch.cuda._sleep(100_000_000)  # ~50 ms of the side stream's time
            x_buf.copy_(s.x)
            b_buf.copy_(s.bias)
            g_buf.copy_(g0)
            x, b = x_buf.detach().requires_grad_(), b_buf.detach().requires_grad_()
            y = torchtrt_swish.swish(x, b)
            dx, db = torch.autograd.grad(y, (x, b), g_buf)
        assert torch.cuda.current_device() == 0
        side.synchronize()
        _labelled(f"{s.name} {dtype}", _assert_close_to_reference, y, s.x, s.bias)
        for name, got, ref in zip(("y", "dx", "dbias"), (y, dx, db), want):
            assert torch.equal(got, ref), f"{s.name} {dtype}: {name} on the side stream differs from the default stream"


@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_graph_captured_on_cuda1(cuda0_current, dtype):
    """Forward and backward captured in one CUDA graph on cuda:1, replayed (from cuda:0 current) on new data."""
    gen = torch.Generator().manual_seed(7)
    fresh = lambda t: (torch.randn(t.shape, generator=gen, dtype=torch.float64) * 4).to(CUDA1, dtype)  # noqa: E731
    for s in _layout_samples(dtype):
        x = s.x.detach().clone().requires_grad_()
        b = s.bias.detach().clone().requires_grad_()
        g = fresh(x)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.device(CUDA1):  # capture needs its device current; replay does not
            warm = torch.cuda.Stream()
            warm.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(warm):  # warm-up on a side stream before capture, as torch.cuda.graph asks
                for _ in range(2):
                    torch.autograd.grad(torchtrt_swish.swish(x, b), (x, b), g)
            torch.cuda.current_stream().wait_stream(warm)
            with torch.cuda.graph(graph):
                y = torchtrt_swish.swish(x, b)
                dx, db = torch.autograd.grad(y, (x, b), g)
        assert torch.cuda.current_device() == 0
        for replay in range(2):
            nx, nb, ng = fresh(x), fresh(b), fresh(x)
            with torch.no_grad():
                x.copy_(nx)
                b.copy_(nb)
                g.copy_(ng)
            graph.replay()
            torch.cuda.synchronize(1)
            label = f"{s.name} {dtype} replay {replay}"
            _labelled(label, _assert_close_to_reference, y, nx, nb)
            _, want_dx, want_db = _grads(nx, nb, ng)  # eager, itself checked against fp64 above
            assert torch.equal(dx, want_dx) and torch.equal(db, want_db), f"{label}: gradients differ from eager"


@pytest.mark.parametrize("dtype", DTYPES)
def test_compile_with_tensors_on_cuda1(cuda0_current, dtype):
    for s in _layout_samples(dtype):
        torch.compiler.reset()  # a fresh cache per shape: no recompile limit can send a call back to eager
        compiled = torch.compile(lambda x, b: torchtrt_swish.swish(x, b), fullgraph=True)
        _labelled(f"{s.name} {dtype}", _assert_close_to_reference, compiled(s.x, s.bias), s.x, s.bias)
        g = torch.randn(s.x.shape, dtype=torch.float64).to(device=CUDA1, dtype=dtype)
        _assert_backward_close(s.x, s.bias, g, f"compiled {s.name}", fn=compiled)


# ---------------------------------------------------------------------------------------------- the plugin

PLUGIN_SHAPES = [(), (7,), (13, 1031), (2, 3, 4, 5), (4, 64, 32, 33), (0,)]
PLUGIN_CASES = [(s, name, b) for s in PLUGIN_SHAPES for name, b in bias_shapes(s)]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
# cuda1-current first: should cuda0-current crash cuda:1's context, the tests in child processes below still run.
@pytest.mark.parametrize("current", [1, 0], ids=["cuda1-current", "cuda0-current"])
def test_plugin_enqueue_on_cuda1_bit_identical_to_the_op(h, creator, logs, cuda0_current, current, dtype):
    """Buffers and stream on cuda:1; current device cuda:0 (the issue's case) or cuda:1 (what TensorRT sets up).

    An application calling TensorRT makes the engine's device current before enqueueV3 (TensorRT's FAQ on several
    GPUs), so cuda1-current is the plugin's everyday case; cuda0-current needs enqueue to follow the stream's
    device for the kernel launch.
    """
    drv = cuda0_current
    dt = getattr(torch, dtype)
    cases = PLUGIN_CASES
    side = torch.cuda.Stream(device=CUDA1)
    failures = []
    free0 = torch.cuda.mem_get_info(0)[0]
    for shape, layout, bias_shape in cases:
        gen = torch.Generator(device=CUDA1).manual_seed(zlib.crc32(repr((shape, layout, dtype)).encode()))
        x = (torch.randn(shape, generator=gen, device=CUDA1) * 4).to(dt)
        bias, p = torch.randn(bias_shape, generator=gen, device=CUDA1).to(dt), make(creator)
        want = torchtrt_swish.swish(x, bias)
        y = torch.full_like(x, float("nan"))
        inputs = [x, bias]
        ins = [h.TensorDesc(dtype, list(t.shape)) for t in inputs]
        outs = [h.TensorDesc(dtype, list(x.shape))]
        ptrs = [t.data_ptr() for t in inputs]
        torch.cuda.synchronize(1)  # inputs ready: the side stream needs no event
        with torch.cuda.device(CUDA1) if current == 1 else contextlib.nullcontext():
            assert drv.current_device() == current
            rcs = (p.on_shape_change(ins, outs), p.enqueue(ins, outs, ptrs, [y.data_ptr()], 0, side.cuda_stream))
        side.synchronize()
        if rcs != (0, 0) or not torch.equal(bits(torch, y), bits(torch, want)):
            failures.append(f"{shape} {layout}: rc {rcs}, {errors(logs)[-1:] or 'wrong bits'}")
        # Checked before close(): anything put on cuda:0 and freed again would escape the fixture's check.
        lost = free0 - torch.cuda.mem_get_info(0)[0]
        if lost >= 2**20:
            failures.append(f"{shape} {layout}: cuda:0 lost {lost} bytes of free memory")
        p.close()
    assert not failures, f"{len(failures)} of {len(cases)} cases failed: " + "; ".join(failures[:6])
    assert errors(logs) == []


# ---------------------------------------------------------------------------------------------- fresh processes

# scenario -> the same workload in plain torch ops: the probe of our code is judged against it, because torch's own
# lazy initialisation, not ours, may be what touches cuda:0.
PROBES = {"op_eager": "torch_eager", "op_stream": "torch_stream", "op_graph": "torch_graph",
          "op_compile": "torch_compile", "plugin": "torch_eager"}


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """probe(scenario) -> the JSON the worker wrote after running the scenario in a fresh process (cached)."""
    cache: dict[str, dict] = {}

    def run(scenario: str) -> dict:
        if scenario not in cache:
            out = tmp_path_factory.mktemp("probe") / f"{scenario}.json"
            proc = subprocess.run([sys.executable, str(WORKER), "probe", scenario, "--out", str(out)],
                                  capture_output=True, text=True, timeout=600, env=_child_env())
            assert proc.returncode == 0, f"probe {scenario} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
            cache[scenario] = json.loads(out.read_text())
        return cache[scenario]

    return run


@pytest.mark.parametrize("scenario", list(PROBES))
def test_cuda0_untouched_in_a_fresh_process(probe, scenario):
    """Work on cuda:1 only, in a process that never used cuda:0: no cuda:0 memory, and no cuda:0 context."""
    got, base = probe(scenario), probe(PROBES[scenario])
    assert got["pci_bus_ids_match"], "driver and torch number the GPUs differently; the context check would lie"
    assert got["ok"], f"{scenario} computed wrong results: {got}"
    assert got["torch_current_device_before"] == got["torch_current_device_after"] == 0, got
    assert (got["memory_allocated0"], got["max_memory_reserved0"]) == (0, 0), f"torch's allocator used cuda:0: {got}"
    if base["ctx0_active"]:
        warnings.warn(f"plain torch ({PROBES[scenario]}) already creates a cuda:0 context, so this probe cannot see "
                      f"whether {scenario} would; cuda:0 memory was still checked")
    assert not got["ctx0_active"] or base["ctx0_active"], (
        f"{scenario} created a context on cuda:0 (plain torch doing the same work does not): {got}")


# ---------------------------------------------------------------------------------------------- DDP


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _assert_same_training(got: dict, want: dict, what: str, rel: float = 1e-4) -> None:
    """Every parameter and gradient within rel * its tensor's largest magnitude (fp32 sums in another order)."""
    assert got.keys() == want.keys(), what
    for k, ref in want.items():
        scale = ref.abs().max().item()
        err = (got[k].double() - ref.double()).abs().max().item()
        assert err <= rel * scale, f"{what}: {k} differs by {err:.3e} (largest |value| {scale:.3e})"


@pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_nccl_available(),
                    reason="needs torch.distributed with NCCL (this torch build has none)")
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compile"])
def test_ddp_two_gpus_equals_one_process_on_the_whole_batch(tmp_path, compiled):
    """A conv net with EfficientSwish (per-channel, scalar and last-dim biases) trained 3 steps on 2 GPUs (NCCL)."""
    prefix = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc-per-node=2",
           "--master-addr=127.0.0.1", f"--master-port={_free_port()}", str(WORKER), "ddp", "--out", str(prefix)]
    proc = subprocess.run(cmd + (["--compile"] if compiled else []), capture_output=True, text=True, timeout=600,
                          env=_child_env())
    assert proc.returncode == 0, f"torchrun failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-8000:]}"
    r0, r1 = (torch.load(f"{prefix}.rank{r}.pt") for r in (0, 1))
    for k in r0["ddp"]:
        assert torch.equal(r0["ddp"][k], r1["ddp"][k]), f"ranks disagree on {k}"
    for name in BIAS_INITS:
        assert r0["fp64"][f"{name}.bias.grad"].abs().max() > 0, f"{name}'s bias got no gradient in the reference"
    _assert_same_training(r0["ddp"], r0["single"], "DDP vs one process (fp32, same op)")
    _assert_same_training(r0["ddp"], r0["fp64"], "DDP vs one process (fp64 CPU, plain formula)")
    for rank, r in enumerate((r0, r1)):
        for dev, used in r["other_devices"].items():
            assert (used["memory_allocated"], used["max_memory_reserved"]) == (0, 0), (
                f"rank {rank} allocated on cuda:{dev}: {used}")
