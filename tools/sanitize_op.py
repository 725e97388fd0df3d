"""Drive the op's CUDA kernels over every sample input (all dtypes, forward + backward) for compute-sanitizer,
plus shapes that reach each fused-backward tile shape (8-pack, narrow and whole-row column tiles, 32-pack tiles with
a partial last tile), every forward launch shape (8-byte packs for small fp16/bf16 tensors, the 16-byte small
and large kernels), and the network layouts of tests/test_kernels_layouts.py (each block shape of the planes
backward, the forward's two-channel packs, a partial matrix tall enough for the two-stage column sums).

Usage: compute-sanitizer --tool memcheck python3 tools/sanitize_op.py [--layouts-only]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import torchtrt_swish  # noqa: E402
from samples import FUSED_BACKWARD_SHAPES, sample_inputs  # noqa: E402
from test_kernels_layouts import LAYOUTS  # noqa: E402

# fp32 blocks of the planes kernel hold 4096 elements: 2048 blocks of whole [64, 16] samples, two-stage sums.
TALL = (((1 << 23) // 1024, 64, 16), (64, 1))


def layout_cases(dtype: torch.dtype) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(x, bias) for every network layout, plus the tall partial matrix for fp32."""
    cases = []
    for shape, bshape, channels_last in LAYOUTS:
        fmt = torch.channels_last if channels_last else torch.contiguous_format
        x = torch.randn(shape, device="cuda", dtype=dtype).contiguous(memory_format=fmt)
        cases.append((x, torch.randn(bshape, device="cuda", dtype=dtype)))
    if dtype == torch.float32:
        cases.append((torch.randn(TALL[0], device="cuda"), torch.randn(TALL[1], device="cuda")))
    return cases


def main() -> int:
    """Run forward and backward on every case; exit non-zero on a CUDA error."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layouts-only", action="store_true", help="only the network layouts (the planes backward)")
    args = ap.parse_args()
    count = 0
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        cases = layout_cases(dtype)
        if not args.layouts_only:
            cases += [(s.x.detach().clone(), s.bias.detach().clone()) for s in sample_inputs("cuda", dtype)]
            # Every forward launch shape (the large one needs > 2^18 packs; fp16/bf16 with a fixed bias take 8-byte
            # packs up to 2^20 elements, 16-byte ones above) and every fused-backward tile shape.
            for shape, bshape in [((1 << 19, 8), (8,)), ((1 << 13, 256), (256,)), *FUSED_BACKWARD_SHAPES]:
                cases.append((torch.randn(shape, device="cuda", dtype=dtype),
                              torch.randn(bshape, device="cuda", dtype=dtype)))
        for x, b in cases:
            x.requires_grad_()
            b.requires_grad_()
            torchtrt_swish.swish(x, b).backward(torch.randn_like(x))
            count += 1
    torch.cuda.synchronize()
    print(f"sanitize_op: {count} forward+backward cases ran")
    return 0


if __name__ == "__main__":
    sys.exit(main())
