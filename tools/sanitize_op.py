"""Drive the op's CUDA kernels over every sample input (all dtypes, forward + backward) for compute-sanitizer,
plus shapes that reach each fused-backward tile shape (8-pack, narrow and whole-row column tiles, 32-pack tiles with
a partial last tile), every forward launch shape (8-byte packs for small fp16/bf16 tensors, the 16-byte small
and large kernels), and the network layouts of tests/test_kernels_layouts.py (each block shape of the planes
backward, the forward's two-channel packs, a partial matrix tall enough for the two-stage column sums).

--switch-points: instead, the planner's switch points for this GPU's SM count (torchtrt_swish.doctor.switch_points),
aligned and misaligned, plus --random N seeded random layouts of tests/test_kernels_property_gpu.py. Run memcheck with
PYTORCH_NO_CUDA_MEMORY_CACHING=1: the caching allocator keeps small tensors inside one block, where a write past
one of them goes unseen.

Usage: compute-sanitizer --tool memcheck python3 tools/sanitize_op.py [--layouts-only | --switch-points [--random N]]
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


def switch_point_run(random_cases: int, max_elems: int) -> int:
    """Forward and backward of every switch-point case (aligned and misaligned) and of random layouts; the values
    are checked by tests/test_kernels_property_gpu.py, here only the memory the kernels touch matters."""
    import math
    import random

    from test_kernels_property_gpu import _random_case
    from torchtrt_swish.doctor import switch_points

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    cases = switch_points.switch_point_cases(sms, max_elems)
    for case in cases:
        dtype = getattr(torch, case.dtype)
        flat = torch.randn(math.prod(case.x_shape) + 1, device="cuda", dtype=dtype)
        b = torch.randn(case.bias_shape, device="cuda", dtype=dtype)
        for x in (flat[:-1].view(case.x_shape), flat[1:].view(case.x_shape)):  # aligned, then 2 or 4 bytes off
            torchtrt_swish.swish(x, b)
            torch.ops.torchtrt_swish.swish_backward(torch.randn_like(x), x, b)
    rng = random.Random(3030)
    for _ in range(random_cases):
        x, b, g, _ = _random_case(rng)
        torch.ops.torchtrt_swish.swish_backward(g, x, b)
        torchtrt_swish.swish(x, b)
    torch.cuda.synchronize()
    stages = sum(1 for c in cases if c.plan[1] > 1)
    print(f"sanitize_op: {2 * len(cases)} switch-point cases on {sms} SMs ({stages} with two-stage sums), "
          f"{random_cases} random layouts ran")
    return 0


def main() -> int:
    """Run forward and backward on every case; exit non-zero on a CUDA error."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layouts-only", action="store_true", help="only the network layouts (the planes backward)")
    ap.add_argument("--switch-points", action="store_true", help="this GPU's planner switch points instead")
    ap.add_argument("--random", type=int, default=0, metavar="N", help="with --switch-points: N random layouts too")
    ap.add_argument("--max-elems", type=int, default=1 << 21, help="largest switch-point case (elements)")
    args = ap.parse_args()
    if args.switch_points:
        return switch_point_run(args.random, args.max_elems)
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
