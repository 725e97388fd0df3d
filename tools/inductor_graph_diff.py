"""What inductor receives for each swish variant of a network: the post-grad FX graphs of `torch.compile(model)`
(plain `F.silu(x) + bias` and the op, benchmarks/networks.py), and the ATen ops whose counts differ between them.

Inductor fuses and emits kernels from these graphs, so two variants with equal op counts get the same program; a
difference names what their compiled steps do differently. Runs on the CPU at smoke sizes (no GPU needed):
    python tools/inductor_graph_diff.py [--network regnet_y_400mf] [--task inference|train] [--format channels_last]
"""
from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import networks  # noqa: E402


def post_grad_graphs(model, x, task: str) -> list[torch.fx.Graph]:
    """The post-grad graphs inductor compiles for one step of model (forward, and backward when training)."""
    from torch._inductor import config

    graphs: list[torch.fx.Graph] = []
    torch._dynamo.reset()
    with mock.patch.object(config, "post_grad_custom_post_pass", graphs.append):
        fn = torch.compile(model)
        if task == "train":
            model.train()
            fn(x).float().sum().backward()
        else:
            model.eval()
            with torch.no_grad():
                fn(x)
    return graphs


def op_counts(graphs: list[torch.fx.Graph]) -> collections.Counter:
    """call_function targets of every graph, counted."""
    return collections.Counter(str(n.target) for g in graphs for n in g.nodes if n.op == "call_function")


def main(argv: list[str] | None = None) -> int:
    """Print each variant's graph count and node count, then the ops whose counts differ (plain - ours)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--network", choices=sorted(networks.NETWORKS), default="regnet_y_400mf")
    ap.add_argument("--task", choices=["inference", "train"], default="inference")
    ap.add_argument("--format", choices=["auto", "nchw", "channels_last"], default="auto")
    args = ap.parse_args(argv)
    net = networks.NETWORKS[args.network]
    cl = net.channels_last if args.format == "auto" else args.format == "channels_last"
    models, _, x, _ = networks.variants_with_batch(net, "cpu", True, 2, cl)
    counts = {}
    for v, m in models.items():
        graphs = post_grad_graphs(m, x, args.task)
        counts[v] = op_counts(graphs)
        print(f"{v}: {len(graphs)} graphs, {sum(counts[v].values())} ops")
    plain, ours = counts["plain"], counts["ours"]
    diff = {k: plain[k] - ours[k] for k in sorted(set(plain) | set(ours)) if plain[k] != ours[k]}
    print("same op counts" if not diff else "plain - ours: " + ", ".join(f"{k} {d:+d}" for k, d in diff.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
