"""EfficientNet-B0 end to end, as a user would swap in the op: every nn.SiLU becomes a swish with a learnable
per-channel bias, written either in plain PyTorch (`F.silu(x) + bias`, bias a [C, 1, 1] parameter) or with the op
(`torchtrt_swish.EfficientSwish(0.0, bias_shape=(C, 1, 1))`). One row per dtype x eager/compiled x task, both
variants side by side.

Model: torchvision.models.efficientnet_b0(weights=None) (random weights: nothing is downloaded), batch 128,
3x224x224, NCHW (--channels-last: model and input channels_last). Both variants start from the same weights and the
same biases; before timing, their eval outputs must agree (fp32; the op's fp32 forward is F.silu(x) + b bit for bit).
  inference:  model.eval(), torch.no_grad(), one forward.
  train step: model.train(), forward, cross-entropy against fixed random labels, backward; parameter gradients set to
              None before each step (no optimizer step).
  bf16:       autocast (torch.autocast("cuda", torch.bfloat16) around forward and loss: weights, BatchNorm and the
              swish biases stay fp32 parameters, convolutions and activations run in bf16; both swish modules cast
              their bias to x's dtype) -- or, with --bf16 cast, model.to(torch.bfloat16) and a bf16 input.
  compiled:   torch.compile(model) (default inductor backend, default mode), one compile per dtype x task x variant.
Timing: triton.testing.do_bench (CUDA events, L2 flushed before each call), median in ms, after --warmup-steps
untimed calls; --rounds rounds per row with the variants' order alternating, each variant's median over the rounds
(the CSV also has each round's time and each variant's spread, (max - min) / median).

Usage (H200): python benchmarks/bench_efficientnet.py --out $OUT/efficientnet.csv [--dtypes fp32,bf16]
    [--compile-dtypes bf16] [--tasks train,inference] [--compile-tasks train,inference] [--batch 128]
    [--bf16 autocast|cast] [--channels-last]
Compiling B0 takes tens of seconds per model, so by default only bf16 is compiled (--compile-dtypes fp32,bf16 for
all rows). Rows print as they are measured; the CSV is written at the end, also when the run is cut short.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import signal
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


class PlainSwish(nn.Module):
    """What a user writes without the op: F.silu(x) + bias, bias a learnable [C, 1, 1] parameter."""

    def __init__(self, channels: int):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The bias follows x's dtype, as EfficientSwish's does (under autocast x is bf16, the parameter fp32)."""
        return F.silu(x) + self.bias.to(x.dtype)


def silu_channels(model: nn.Module, device: str) -> dict[str, int]:
    """Input channels of every nn.SiLU in the model, from one batch-1 forward with hooks."""
    found: dict[str, int] = {}
    hooks = [m.register_forward_hook(lambda mod, inp, out, name=name: found.__setitem__(name, inp[0].shape[1]))
             for name, m in model.named_modules() if isinstance(m, nn.SiLU)]
    with torch.no_grad():
        model.eval()(torch.randn(1, 3, 224, 224, device=device))
    for h in hooks:
        h.remove()
    return found


def replace_silu(model: nn.Module, channels: dict[str, int], make) -> nn.Module:
    """model with each nn.SiLU named in `channels` replaced by make(C) (in place); returns the model."""
    for name, c in channels.items():
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, attr, make(c))
    return model


def build(device: str) -> tuple[nn.Module, nn.Module, int]:
    """(plain, ours, number of swaps): two EfficientNet-B0s with the same weights and the same random biases."""
    from torchvision.models import efficientnet_b0
    import torchtrt_swish

    torch.manual_seed(0)
    base = efficientnet_b0(weights=None).to(device)
    channels = silu_channels(base, device)
    plain = replace_silu(copy.deepcopy(base), channels, PlainSwish).to(device)
    ours = replace_silu(copy.deepcopy(base), channels,
                        lambda c: torchtrt_swish.EfficientSwish(0.0, bias_shape=(c, 1, 1))).to(device)
    with torch.no_grad():
        for name in channels:
            b = 0.1 * torch.randn(channels[name], 1, 1, device=device)
            plain.get_submodule(name).bias.copy_(b)
            ours.get_submodule(name).bias.copy_(b)
    if any(isinstance(m, nn.SiLU) for m in ours.modules()):
        raise SystemExit("bench_efficientnet: an nn.SiLU was not replaced")
    return plain, ours, len(channels)


def check_same(plain: nn.Module, ours: nn.Module, x: torch.Tensor) -> float:
    """Largest |ours - plain| / max|plain| of the eval logits (fp32); fails loudly above 1e-4."""
    with torch.no_grad():
        a = plain.eval()(x)
        b = ours.eval()(x)
    err = ((a - b).abs().max() / a.abs().max()).item()
    if not err <= 1e-4:
        raise SystemExit(f"bench_efficientnet: ours and plain disagree (relative error {err:.3e})")
    return err


def step_fn(model: nn.Module, task: str, x: torch.Tensor, labels: torch.Tensor, amp):
    """One call of the timed work: an inference forward, or forward + loss + backward."""
    if task == "inference":
        model.eval()

        def run():
            with torch.no_grad(), amp():
                return model(x)
    else:
        model.train()
        params = [p for p in model.parameters()]

        def run():
            for p in params:
                p.grad = None
            with amp():
                loss = F.cross_entropy(model(x).float(), labels)
            loss.backward()
    return run


def main() -> int:
    """Parse arguments, time every row, print the table, write CSV."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("efficientnet.csv"))
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--compile-dtypes", default="bf16", help="dtypes that also get torch.compile rows ('' for none)")
    ap.add_argument("--tasks", default="train,inference", help="eager rows")
    ap.add_argument("--compile-tasks", default="train,inference", help="compiled rows")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--bf16", choices=["autocast", "cast"], default="autocast")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--rep-ms", type=int, default=1000, help="do_bench's rep (ms of timed calls per round)")
    ap.add_argument("--warmup-steps", type=int, default=10,
                    help="untimed calls per variant first (compiled training got faster over its first rounds)")
    ap.add_argument("--rounds", type=int, default=4, help="timing rounds per row, alternating the variants' order")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_efficientnet: needs a CUDA GPU")
        return 2
    from triton.testing import do_bench

    from benchmarks import bench_swish  # write_csv; raises dynamo's recompile limits (fails instead of eager)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))  # `timeout` cuts a run short: still write the CSV
    dev = "cuda"
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    plain, ours, swaps = build(dev)
    x32 = torch.randn(args.batch, 3, 224, 224, device=dev).contiguous(memory_format=fmt)
    labels = torch.randint(0, 1000, (args.batch,), device=dev)
    plain.to(memory_format=fmt)
    ours.to(memory_format=fmt)
    err = check_same(plain, ours, x32[:8])
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, EfficientNet-B0 batch {args.batch}, "
          f"{'channels_last' if args.channels_last else 'NCHW'}, {swaps} SiLU replaced, bf16 by {args.bf16}; "
          f"ours vs plain eval logits: relative error {err:.1e}")
    print(f"{'dtype':5} {'mode':8} {'task':9} {'plain ms':>9} {'ours ms':>9} {'ours/plain':>10} {'spread':>13}",
          flush=True)
    rows = []
    compile_dtypes = [d for d in args.compile_dtypes.split(",") if d]
    try:
        for dname in args.dtypes.split(","):
            cast = dname == "bf16" and args.bf16 == "cast"
            x = x32.to(torch.bfloat16) if cast else x32
            if dname == "bf16" and not cast:
                amp = lambda: torch.autocast("cuda", dtype=torch.bfloat16)  # noqa: E731
            else:
                amp = contextlib.nullcontext
            models = {"plain": plain, "ours": ours}
            if cast:
                models = {k: copy.deepcopy(m).to(torch.bfloat16) for k, m in models.items()}
            for mode in ["eager"] + (["compile"] if dname in compile_dtypes else []):
                for task in (args.tasks if mode == "eager" else args.compile_tasks).split(","):
                    row = {"dtype": dname, "bf16": args.bf16 if dname == "bf16" else "", "mode": mode, "task": task,
                           "batch": args.batch, "format": "channels_last" if args.channels_last else "contiguous"}
                    runs = {}
                    for name, model in models.items():
                        runs[name] = step_fn(torch.compile(model) if mode == "compile" else model, task, x, labels,
                                             amp)
                        for _ in range(args.warmup_steps):  # the first compiles (compiled rows)
                            runs[name]()
                    torch.cuda.synchronize()
                    # Rounds alternate the order (plain, ours, ours, plain, ...) and each variant's median over them
                    # is reported: one timing per variant swung by 20 % between processes for the compiled step.
                    times: dict = {name: [] for name in runs}
                    for r in range(args.rounds):
                        for name in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
                            times[name].append(do_bench(runs[name], warmup=200, rep=args.rep_ms,
                                                        return_mode="median"))
                    for name, t in times.items():
                        row[f"{name}_ms"] = statistics.median(t)
                        row[f"{name}_spread"] = (max(t) - min(t)) / statistics.median(t)
                        row[f"{name}_rounds"] = " ".join(f"{v:.2f}" for v in t)
                    del runs
                    torch.cuda.empty_cache()
                    row["ours_over_plain"] = row["ours_ms"] / row["plain_ms"]
                    rows.append(row)
                    print(f"{dname:5} {mode:8} {task:9} {row['plain_ms']:9.2f} {row['ours_ms']:9.2f} "
                          f"{row['ours_over_plain']:10.3f} {row['plain_spread']:6.1%} {row['ours_spread']:6.1%}  "
                          f"rounds: plain {row['plain_rounds']} / ours {row['ours_rounds']}", flush=True)
    finally:
        bench_swish.write_csv(rows, args.out, ("dtype", "bf16", "mode", "task", "batch", "format", "plain_ms",
                                               "ours_ms", "ours_over_plain", "plain_spread", "ours_spread"))
        print(f"wrote {args.out} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
