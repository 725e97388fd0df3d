"""Where a step's host time goes, op by op, for both swish variants of a network (benchmarks/networks.py); with
--kernels, where its device time goes, kernel by kernel.

bench_networks.py reports the host time of a step as one number (the self-CPU total); this prints, per variant,
the ATen ops with the most self-CPU time per step (torch.profiler's key_averages), and then the ops whose per-step
calls or self-CPU time differ most between plain and ours, so a difference in host cost can be put down to the ops
that make it. A small batch keeps the GPU from backing up the launch queue, which would add blocked time to the ops
that happen to launch then.
With --compile (torch.compile, optionally --graphs for mode="reduce-overhead") it is the compiled step's; --kernels
lists the GPU kernels by device time per step, and the kernels whose time differs most between the variants.
    python tools/host_ops.py [--network regnet_y_400mf] [--dtype bf16|fp32] [--task train|inference] [--batch 8]
                             [--compile [--graphs]] [--kernels]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import bench_networks, networks  # noqa: E402


def per_step(step, steps: int, device: str, kernels: bool) -> dict[str, tuple[float, float]]:
    """{op name: (calls per step, self-CPU µs per step)} over `steps` profiled calls of step() after three unprofiled;
    with kernels, {GPU kernel name: (launches per step, device µs per step)} instead."""
    for _ in range(3):
        step()
    bench_networks._sync(device)()
    acts = [torch.profiler.ProfilerActivity.CPU]
    if kernels:
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(steps):
            step()
        bench_networks._sync(device)()
    if not kernels:
        return {e.key: (e.count / steps, e.self_cpu_time_total / steps) for e in prof.key_averages()}
    out: dict[str, tuple[float, float]] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            calls, us = out.get(e.name, (0.0, 0.0))
            out[e.name] = (calls + 1 / steps, us + e.device_time / steps)
    return out


def main(argv: list[str] | None = None) -> int:
    """Print each variant's top ops (or kernels), then the largest differences (ours - plain)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--network", choices=sorted(networks.NETWORKS), default="regnet_y_400mf")
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--task", choices=["train", "inference"], default="train")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--compile", action="store_true", help="time torch.compile(model) instead of the eager model")
    ap.add_argument("--graphs", action="store_true", help="with --compile: mode='reduce-overhead' (CUDA graphs)")
    ap.add_argument("--kernels", action="store_true", help="GPU kernels by device time instead of ops by host time")
    args = ap.parse_args(argv)
    if args.batch < 1 or args.steps < 1 or args.top < 1:
        ap.error(f"--batch, --steps and --top must be >= 1, got {args.batch}, {args.steps} and {args.top}")
    if args.graphs and not args.compile:
        ap.error("--graphs needs --compile")
    if args.kernels and args.device != "cuda":
        ap.error(f"--kernels needs --device cuda, got --device {args.device}")
    smoke = args.device == "cpu"
    net = networks.NETWORKS[args.network]
    models, _, x, target = networks.variants_with_batch(net, args.device, smoke, args.batch, net.channels_last)
    models, x, amp = bench_networks.dtype_setup(args.dtype, models, x, args.device)
    loss = networks.loss_fn(net)
    ops = {}
    what, unit = ("device", "launches") if args.kernels else ("self-CPU", "calls")
    for v, m in models.items():
        torch._dynamo.reset()
        fn = torch.compile(m, mode="reduce-overhead" if args.graphs else None) if args.compile else m
        step = bench_networks.make_step(fn, args.task, x, target, loss, amp, args.graphs)
        ops[v] = per_step(step, args.steps, args.device, args.kernels)
        total = sum(us for _, us in ops[v].values())
        print(f"{v}: {what} {total / 1e3:.3f} ms per step, {sum(c for c, _ in ops[v].values()):.0f} {unit}")
        for name, (calls, us) in sorted(ops[v].items(), key=lambda kv: -kv[1][1])[:args.top]:
            print(f"  {us / 1e3:8.3f} ms  {calls:7.0f} {unit}  {name[:110]}")
    names = set(ops["plain"]) | set(ops["ours"])
    diff = {k: (ops["ours"].get(k, (0, 0))[0] - ops["plain"].get(k, (0, 0))[0],
                ops["ours"].get(k, (0, 0))[1] - ops["plain"].get(k, (0, 0))[1]) for k in names}
    print(f"ours - plain, largest {what} differences per step:")
    for name, (calls, us) in sorted(diff.items(), key=lambda kv: -abs(kv[1][1]))[:args.top]:
        print(f"  {us / 1e3:+8.3f} ms  {calls:+7.0f} {unit}  {name[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
