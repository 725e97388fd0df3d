"""The one source of op inputs for tests: sample_inputs(device, dtype) and the fp64 reference."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Sample:
    """An (x, bias) pair with a label for test ids."""

    name: str
    x: torch.Tensor
    bias: torch.Tensor


# (x shape, bias shape) pairs that reach each fused-backward path: rows; columns with 8-pack tiles, narrow
# power-of-two tiles (2 or 4 packs: the warp-shuffle epilogue over 8-16 rows per warp), whole-row and 32-pack tiles
# and a partial last tile; tails; and the unfused fallback.
FUSED_BACKWARD_SHAPES = [((4096, 256), (256,)), ((64, 16), (16,)), ((64, 48, 32, 32), (48, 1, 1)), ((3, 5, 1000), (5, 1)),
                         (((1 << 20) + 3,), (1,)), ((512, 1000), (1000,)), ((300, 1001), (1001,)),
                         ((8, 2048), (8, 2048)), ((2, 7, 9, 9), (7, 1, 1))]

def _rand(shape, device, dtype, gen) -> torch.Tensor:
    # Spread over the interesting range of swish (negative tail, the minimum near -1.28, linear part).
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * 4).to(device=device, dtype=dtype)


def sample_inputs(device: str | torch.device, dtype: torch.dtype, seed: int = 0) -> list[Sample]:
    """Every bias layout x shapes incl. empty, 0-d, odd sizes, non-contiguous and misaligned views."""
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: _rand(s, device, dtype, g)  # noqa: E731
    out = [
        Sample("0d_x_0d_bias", r(), r()),
        Sample("empty_scalar", r(0, 3), r(1)),
        Sample("empty_per_channel_last", r(0, 3), r(3)),
        Sample("odd_1031_scalar", r(1031), r(1)),
        Sample("scalar_1elem_4d", r(2, 3, 5, 7), r(1)),
        Sample("scalar_0d_4d", r(2, 3, 5, 7), r()),
        Sample("per_channel_dim1_C11", r(2, 3, 5, 7), r(3, 1, 1)),
        Sample("per_channel_dim1_1C11", r(2, 3, 5, 7), r(1, 3, 1, 1)),
        Sample("per_channel_last", r(4, 33), r(33)),
        Sample("per_channel_last_4d", r(2, 3, 5, 7), r(7)),
        Sample("full", r(2, 3, 5, 7), r(2, 3, 5, 7)),
        Sample("full_odd", r(3, 337), r(3, 337)),
        Sample("block_trailing", r(2, 3, 5, 7), r(5, 7)),
        Sample("block_middle", r(2, 3, 5, 7), r(3, 5, 1)),
        Sample("materialized", r(2, 3, 5, 7), r(2, 1, 5, 1)),
        Sample("per_channel_big_inner", r(2, 4, 33, 65), r(4, 1, 1)),
    ]
    # Non-contiguous and misaligned inputs must give the same answer as their contiguous copies.
    base = r(6, 10, 9)
    out.append(Sample("transposed", base.transpose(0, 2), r(6)))
    out.append(Sample("strided_slice", base[:, ::3, 1:], r(1)))
    flat = r(1 + 4099)
    out.append(Sample("misaligned_offset", flat[1:], r(1)))
    out.append(Sample("misaligned_full_bias", flat[1:].view(4099), r(4100)[1:]))
    cl = r(2, 8, 5, 5).contiguous(memory_format=torch.channels_last)
    out.append(Sample("channels_last_per_channel", cl, r(8, 1, 1)))
    return out


def reference(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Independent fp64 CPU reference: x * sigmoid(x) + bias, computed by PyTorch, not by our kernels."""
    xd = x.detach().to("cpu", torch.float64)
    return xd * torch.sigmoid(xd) + bias.detach().to("cpu", torch.float64)


def tolerance(x: torch.Tensor, bias: torch.Tensor, dtype: torch.dtype, device: str | torch.device = "cpu"
              ) -> torch.Tensor:
    """Per-element error bound for the op's output against the fp64 reference, on `device` (tools/gpu_accuracy.py
    takes it where its inputs are).

    The op computes in fp32 (fp64 for float64) and rounds once to the output type, so the error is at most
    half an output ulp of the result plus the fp32 math error: expf (<= 2 ulp), the divide and the two adds
    contribute a few fp32 ulps of the *terms* |silu(x)| and |b| (cancellation can make the result small
    while the terms are not). Subnormal floors cover results near zero.
    """
    xd = x.detach().to(device, torch.float64)
    bd = bias.detach().to(device, torch.float64)
    silu = xd * torch.sigmoid(xd)
    ref = (silu + bd).abs()  # reference(x, bias), on `device`
    silu, b = silu.abs(), bd.abs()
    compute_eps = torch.finfo(torch.float64 if dtype == torch.float64 else torch.float32).eps
    out = torch.finfo(dtype)
    half_ulp = out.eps / 2 * ref + out.smallest_normal * out.eps  # rounding once, incl. the subnormal range
    return half_ulp + 6 * compute_eps * (silu + b) + 1e-300
