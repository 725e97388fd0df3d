"""Child processes for tests/test_multi_gpu.py, plus the CUDA driver queries those tests need.

Run as a script, one command per process:

* ``probe SCENARIO --out FILE``: one workload on ``cuda:1`` in a fresh process (device 0 never used before), then
  whether device 0 got a primary CUDA context and any memory from torch's allocator. A fresh process is the only
  clean slate: torch and the CUDA runtime create contexts lazily and never destroy them.
* ``ddp --out PREFIX [--compile] [--backend nccl|gloo] [--device cuda|cpu]``: one rank of a DistributedDataParallel
  run (launch it with ``torch.distributed.run``). Every rank writes its parameters and gradients; rank 0 also
  writes two single-process runs on the concatenated batch: the same fp32 model without DDP, and an fp64 CPU model
  whose activation is the plain formula (no torchtrt_swish code at all).
"""
from __future__ import annotations

import argparse
import copy
import ctypes
import json
import os
import sys
import threading
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

# ---------------------------------------------------------------------------------------------- CUDA driver


class CudaDriver:
    """The few CUDA driver API calls that tell which device has a context (torch exposes none of them publicly)."""

    def __init__(self) -> None:
        self._lib = ctypes.CDLL("libcuda.so.1")
        self._check(self._lib.cuInit(0), "cuInit")

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"{what} failed with CUresult {rc}")

    def _device(self, ordinal: int) -> ctypes.c_int:
        dev = ctypes.c_int()
        self._check(self._lib.cuDeviceGet(ctypes.byref(dev), ordinal), f"cuDeviceGet({ordinal})")
        return dev

    def primary_context_active(self, ordinal: int) -> bool:
        """True when device `ordinal`'s primary context exists (the one the runtime and torch use)."""
        flags, active = ctypes.c_uint(), ctypes.c_int()
        self._check(self._lib.cuDevicePrimaryCtxGetState(self._device(ordinal), ctypes.byref(flags),
                                                         ctypes.byref(active)), "cuDevicePrimaryCtxGetState")
        return bool(active.value)

    def retain_primary(self, ordinal: int) -> int:
        """Create (or reference) device `ordinal`'s primary context; the handle as an int."""
        ctx = ctypes.c_void_p()
        self._check(self._lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), self._device(ordinal)),
                    "cuDevicePrimaryCtxRetain")
        return ctx.value

    def current_context(self) -> int | None:
        """The calling thread's current context, None when it has none."""
        ctx = ctypes.c_void_p()
        self._check(self._lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        return ctx.value

    def set_current(self, ctx: int | None) -> None:
        """Make ctx the calling thread's current context (None: no context)."""
        self._check(self._lib.cuCtxSetCurrent(ctypes.c_void_p(ctx)), "cuCtxSetCurrent")

    def current_device(self) -> int | None:
        """The device of the calling thread's current context, None when it has none."""
        if self.current_context() is None:
            return None
        dev = ctypes.c_int()
        self._check(self._lib.cuCtxGetDevice(ctypes.byref(dev)), "cuCtxGetDevice")
        return dev.value

    def pci_bus_id(self, ordinal: int) -> int:
        """CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, to match driver ordinals with torch's device indices."""
        value = ctypes.c_int()
        self._check(self._lib.cuDeviceGetAttribute(ctypes.byref(value), 33, self._device(ordinal)),
                    "cuDeviceGetAttribute(PCI_BUS_ID)")
        return value.value


# ---------------------------------------------------------------------------------------------- probes


def _fp64_silu_bias(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The plain formula in fp64 on the CPU: the reference no probe takes from our kernels."""
    return F.silu(x.detach().cpu().double()) + b.detach().cpu().double()


def _probe_inputs(dtype: torch.dtype = torch.float32):
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(4, 8, 33, 17, generator=g) * 4).to(device="cuda:1", dtype=dtype)
    b = torch.randn(8, 1, 1, generator=g).to(device="cuda:1", dtype=dtype)
    return x, b


def _close(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Loose agreement: the probes look for the device that was touched; test_multi_gpu checks the numbers."""
    return bool(torch.allclose(got.detach().cpu().double(), want, rtol=2e-2, atol=2e-2))


def _forward_backward(fn, dtype: torch.dtype, *, double: bool = False) -> bool:
    x0, b0 = _probe_inputs(dtype)
    x, b = x0.clone().requires_grad_(), b0.clone().requires_grad_()
    y = fn(x, b)
    g = torch.ones_like(y, requires_grad=double)
    dx, db = torch.autograd.grad(y, (x, b), g, create_graph=double)
    ok = _close(y, _fp64_silu_bias(x0, b0))
    xd = x0.cpu().double().requires_grad_()
    bd = b0.cpu().double().requires_grad_()
    dxd, dbd = torch.autograd.grad(F.silu(xd) + bd, (xd, bd), torch.ones_like(xd), create_graph=double)
    ok &= _close(dx, dxd) and _close(db, dbd)
    if double:
        (ggx,) = torch.autograd.grad(dx.sum(), (x,))
        (ggxd,) = torch.autograd.grad(dxd.sum(), (xd,))
        ok &= _close(ggx, ggxd)
    return ok


def _plain(x, b):
    return F.silu(x) + b


def _op(x, b):
    import torchtrt_swish

    return torchtrt_swish.swish(x, b)


def _eager(fn) -> bool:
    ok = _forward_backward(fn, torch.float32, double=True)
    for dtype in (torch.float16, torch.bfloat16):  # their double backward is too coarse for _close's bounds
        ok &= _forward_backward(fn, dtype)
    return ok


def _side_stream(fn) -> bool:
    s = torch.cuda.Stream(device=1)
    # torch.cuda.device(1) first: torch.cuda.stream(s) alone, entered from device 0, switches back on exit with
    # cudaSetDevice(0), which since CUDA 12 creates cuda:0's primary context: torch's doing, not the op's.
    with torch.cuda.device(1), torch.cuda.stream(s):
        ok = _forward_backward(fn, torch.float32)
    s.synchronize()
    return ok


def _graph(fn) -> bool:
    x0, b0 = _probe_inputs()
    x, b = x0.clone().requires_grad_(), b0.clone().requires_grad_()
    g = torch.randn_like(x0)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.device(1):  # capture needs the capturing device current; replay below does not
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):  # warm-up on a side stream, as torch.cuda.graph's docs ask
                torch.autograd.grad(fn(x, b), (x, b), g)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(graph):
            y = fn(x, b)
            dx, db = torch.autograd.grad(y, (x, b), g)
    with torch.no_grad():
        x.copy_(x0 * -0.5)
    graph.replay()
    torch.cuda.synchronize(1)
    xd = (x0 * -0.5).cpu().double().requires_grad_()
    bd = b0.cpu().double().requires_grad_()
    yd = F.silu(xd) + bd
    dxd, dbd = torch.autograd.grad(yd, (xd, bd), g.cpu().double())
    return _close(y, yd.detach()) and _close(dx, dxd) and _close(db, dbd)


def _compiled(fn) -> bool:
    torch._dynamo.reset()
    return _forward_backward(torch.compile(fn, fullgraph=True), torch.float32)


def _plugin() -> dict:
    """SwishBias.enqueue on cuda:1 buffers and a cuda:1 stream, called from a thread with no current context.

    A fresh thread is where the CUDA runtime's current device is its default, 0, with no context behind it: what
    `torch.cuda.current_device() == 0` means in a process that never used device 0.
    """
    import torchtrt_swish
    from trt_plugin.harness import HARNESS_FILE, PLUGIN_PATH, load_module_from

    if PLUGIN_PATH is None or not HARNESS_FILE.exists():
        raise RuntimeError(f"the plugin library or {HARNESS_FILE.name} is not built")
    h = load_module_from(HARNESS_FILE, "_trt_harness")
    lib = h.Library(str(PLUGIN_PATH))
    (creator,) = lib.creators()
    x, b = _probe_inputs()
    y2, y1 = torch.empty_like(x), torch.empty_like(x)
    s = torch.cuda.Stream(device=1)
    torch.cuda.synchronize(1)
    desc = lambda shape: h.TensorDesc("float32", list(shape))  # noqa: E731
    result: dict = {}

    b0 = b[0, 0, 0].clone()  # a scalar bias: the other layout a converted network feeds the plugin

    def enqueue():
        result["thread_context_before"] = CudaDriver().current_context()
        rcs = []
        for bias, y in ((b, y2), (b0, y1)):
            p = creator.create("swish", None, "runtime")
            ins = [desc(x.shape), desc(bias.shape)]
            rcs += [p.on_shape_change(ins, [desc(x.shape)]),
                    p.enqueue(ins, [desc(x.shape)], [x.data_ptr(), bias.data_ptr()], [y.data_ptr()], 0, s.cuda_stream)]
        result["rcs"] = rcs
        result["logs"] = [m for _, m in h.take_logs()]

    t = threading.Thread(target=enqueue)
    t.start()
    t.join()
    s.synchronize()
    result["ok"] = (result["rcs"] == [0, 0, 0, 0] and torch.equal(y2, torchtrt_swish.swish(x, b))
                    and torch.equal(y1, torchtrt_swish.swish(x, b0)))
    return result


SCENARIOS = {
    "torch_eager": lambda: _eager(_plain),
    "op_eager": lambda: _eager(_op),
    "torch_stream": lambda: _side_stream(_plain),
    "op_stream": lambda: _side_stream(_op),
    "torch_graph": lambda: _graph(_plain),
    "op_graph": lambda: _graph(_op),
    "torch_compile": lambda: _compiled(_plain),
    "op_compile": lambda: _compiled(_op),
    "plugin": _plugin,
}


def probe(scenario: str) -> dict:
    """Run one scenario on cuda:1 and report what it left on device 0."""
    drv = CudaDriver()
    assert drv.primary_context_active(0) is False, "device 0 had a context before the scenario ran"
    import torchtrt_swish  # noqa: F401  (loading the library must not touch a device either)

    out: dict = {"scenario": scenario, "torch_current_device_before": torch.cuda.current_device(),
                 "ctx0_after_torch_init": drv.primary_context_active(0)}
    res = SCENARIOS[scenario]()
    out.update(res if isinstance(res, dict) else {"ok": bool(res)})
    torch.cuda.synchronize(1)
    # Read the context state first: the queries below go through torch and must not be what created it.
    out["ctx0_active"] = drv.primary_context_active(0)
    out["ctx1_active"] = drv.primary_context_active(1)
    out["torch_current_device_after"] = torch.cuda.current_device()
    out["memory_allocated0"] = torch.cuda.memory_allocated(0)
    out["max_memory_reserved0"] = torch.cuda.max_memory_reserved(0)
    out["memory_allocated1"] = torch.cuda.memory_allocated(1)
    props = [torch.cuda.get_device_properties(i) for i in (0, 1)]
    out["pci_bus_ids_match"] = all(getattr(p, "pci_bus_id", drv.pci_bus_id(i)) == drv.pci_bus_id(i)
                                   for i, p in enumerate(props))
    return out


# ---------------------------------------------------------------------------------------------- DDP


class PlainSwish(nn.Module):
    """x * sigmoid(x) + bias in plain torch ops: the reference activation (same parameter name as EfficientSwish)."""

    def __init__(self, bias: torch.Tensor):
        super().__init__()
        self.bias = nn.Parameter(bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The formula, nothing of torchtrt_swish."""
        return F.silu(x) + self.bias


# One bias layout per activation: per-channel on dim 1 ([C,1,1]), scalar, per-channel on the last dim ([C]).
# Distinct values, so a channel mix-up shows in the outputs.
BIAS_INITS = {"act1": torch.linspace(-0.5, 0.5, 8).view(8, 1, 1), "act2": torch.tensor([0.25]),
              "act3": torch.tensor([0.1, -0.2, 0.3, -0.4])}


class SmallNet(nn.Module):
    """conv -> swish -> conv -> swish -> mean pool -> linear -> swish, the activations' biases as in BIAS_INITS.

    No BatchNorm: its per-rank batch statistics would make DDP differ from the single-process run by design.
    """

    def __init__(self, plain: bool = False):
        super().__init__()
        from torchtrt_swish import EfficientSwish

        def act(init: torch.Tensor) -> nn.Module:
            if plain:
                return PlainSwish(init)
            m = EfficientSwish(0.0, tuple(init.shape))
            with torch.no_grad():
                m.bias.copy_(init)
            return m

        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.act1 = act(BIAS_INITS["act1"])
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.act2 = act(BIAS_INITS["act2"])
        self.fc = nn.Linear(8, 4)
        self.act3 = act(BIAS_INITS["act3"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """conv-swish-conv-swish-pool-linear-swish."""
        x = self.act2(self.conv2(self.act1(self.conv1(x))))
        return self.act3(self.fc(x.mean(dim=(2, 3))))


def make_model() -> SmallNet:
    """The fp32 model every run starts from (same seed, so every rank and every reference starts equal)."""
    torch.manual_seed(1234)
    return SmallNet()


def plain_twin(model: SmallNet) -> SmallNet:
    """The same weights with PlainSwish activations, in fp64 on the CPU."""
    twin = SmallNet(plain=True)
    twin.load_state_dict({k: v.detach().cpu() for k, v in model.state_dict().items()})
    return twin.double()


def batches(steps: int, total: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(input, target) pairs of the whole (concatenated) batch, one per step, the same in every process."""
    g = torch.Generator().manual_seed(99)
    return [(torch.randn(total, 3, 12, 12, generator=g), torch.randn(total, 4, generator=g)) for _ in range(steps)]


def train(model: nn.Module, data, device: torch.device, lo: int, hi: int, dtype=torch.float32) -> None:
    """SGD with momentum on rows lo:hi of each batch; the loss is a mean, so DDP's gradient average matches."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, t in data:
        opt.zero_grad(set_to_none=True)
        out = model(x[lo:hi].to(device=device, dtype=dtype))
        F.mse_loss(out, t[lo:hi].to(device=device, dtype=dtype)).backward()
        opt.step()


def snapshot(model: nn.Module) -> dict:
    """Parameters and their last gradients, on the CPU, by name (pass the module DDP wraps, not the wrapper)."""
    out = {}
    for name, p in model.named_parameters():
        out[name] = p.detach().cpu().clone()
        out[name + ".grad"] = p.grad.detach().cpu().clone()
    return out


def ddp(args: argparse.Namespace) -> None:
    """One rank of the DDP run (env:// rendezvous from torch.distributed.run)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    on_gpu = args.device == "cuda"
    device = torch.device("cuda", local) if on_gpu else torch.device("cpu")
    if on_gpu:
        torch.cuda.set_device(device)  # before NCCL: otherwise its first collective may pick cuda:0
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.allow_tf32 = False  # fp32 convolutions, or the comparison measures TF32 instead
        torch.set_float32_matmul_precision("highest")
    dist.init_process_group(args.backend, device_id=device if on_gpu else None)
    try:
        import torchtrt_swish  # noqa: F401

        model0 = make_model()
        data = batches(args.steps, world * args.per_rank)
        module = copy.deepcopy(model0).to(device)
        net = DistributedDataParallel(module, device_ids=[local] if on_gpu else None)
        if args.compile:
            torch._dynamo.reset()
            net = torch.compile(net)
        train(net, data, device, rank * args.per_rank, (rank + 1) * args.per_rank)
        result = {"rank": rank, "world": world, "ddp": snapshot(module)}
        if on_gpu:
            torch.cuda.synchronize(device)
            others = [i for i in range(torch.cuda.device_count()) if i != local]
            result["other_devices"] = {
                i: {"memory_allocated": torch.cuda.memory_allocated(i),
                    "max_memory_reserved": torch.cuda.max_memory_reserved(i),
                    "primary_context_active": CudaDriver().primary_context_active(i)} for i in others}
        if rank == 0:
            single = copy.deepcopy(model0).to(device)
            train(single, data, device, 0, world * args.per_rank)
            result["single"] = snapshot(single)
            ref = plain_twin(model0)
            train(ref, data, torch.device("cpu"), 0, world * args.per_rank, dtype=torch.float64)
            result["fp64"] = snapshot(ref)
        torch.save(result, f"{args.out}.rank{rank}.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


# ---------------------------------------------------------------------------------------------- entry


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: `probe SCENARIO --out FILE` or `ddp --out PREFIX ...`."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("probe")
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    p.add_argument("--out", type=Path, required=True)
    d = sub.add_parser("ddp")
    d.add_argument("--out", required=True, help="file prefix; each rank writes PREFIX.rankN.pt")
    d.add_argument("--compile", action="store_true")
    d.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    d.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    d.add_argument("--steps", type=int, default=3)
    d.add_argument("--per-rank", type=int, default=4)
    args = ap.parse_args(argv)
    if args.cmd == "probe":
        args.out.write_text(json.dumps(probe(args.scenario)))
    else:
        ddp(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
