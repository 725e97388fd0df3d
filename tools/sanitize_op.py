"""Drive the op's CUDA kernels over every sample input (all dtypes, forward + backward) for compute-sanitizer,
plus shapes that reach each fused-backward tile shape (8-pack, narrow and whole-row column tiles, 32-pack tiles with
a partial last tile) and every forward launch shape (8-byte packs for small fp16/bf16 tensors, the 16-byte small
and large kernels)."""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import torchtrt_swish  # noqa: E402
from samples import FUSED_BACKWARD_SHAPES, sample_inputs  # noqa: E402


def main() -> int:
    """Run forward and backward on every sample; exit non-zero on a CUDA error."""
    count = 0
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        cases = [(s.x.detach().clone(), s.bias.detach().clone()) for s in sample_inputs("cuda", dtype)]
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
