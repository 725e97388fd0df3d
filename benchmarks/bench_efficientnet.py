"""EfficientNet-B0 end to end: benchmarks/bench_networks.py with --networks efficientnet_b0 (batch 128, 224x224,
NCHW unless --format channels_last), every nn.SiLU as plain `F.silu(x) + bias` or `EfficientSwish(0.0,
bias_shape=(C, 1, 1))`; eager, compiled and compiled in CUDA graphs; training step and inference; fp32, pure bf16
and bf16 autocast (`--dtypes fp32,bf16,amp`). Every other option is bench_networks.py's, e.g.
    python benchmarks/bench_efficientnet.py --out $OUT/efficientnet.csv --compile-dtypes bf16
The previous script's `--bf16 autocast` rows are the `amp` dtype now, its `--bf16 cast` rows the `bf16` dtype.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import bench_networks  # noqa: E402

if __name__ == "__main__":
    sys.exit(bench_networks.main(["--networks", "efficientnet_b0", *sys.argv[1:]]))
