"""nn.Modules around the op: EfficientSwish with a learnable bias, and the seed's demo network."""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from .ops import swish


class EfficientSwish(nn.Module):
    """y = x * sigmoid(x) + bias with a learnable bias (scalar by default; e.g. bias_shape=(C, 1, 1) per channel)."""

    def __init__(self, bias_init: float = 3.15, bias_shape: Sequence[int] = (1,)):
        super().__init__()
        self.bias = nn.Parameter(torch.full(tuple(bias_shape), float(bias_init)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the op; the bias follows x's dtype so half-precision models need no manual casts."""
        return swish(x, self.bias.to(x.dtype))

    def extra_repr(self) -> str:
        return f"bias_shape={tuple(self.bias.shape)}"


class Net(nn.Module):
    """The seed network: a 1->1 channel 3x3 convolution with an identity-diagonal weight, then EfficientSwish."""

    def __init__(self, bias_init: float = 3.15):
        super().__init__()
        self.conv = nn.Conv2d(1, 1, kernel_size=3, bias=False)
        with torch.no_grad():
            self.conv.weight.copy_(torch.eye(3).view(1, 1, 3, 3))
        self.act = EfficientSwish(bias_init)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """conv -> swish."""
        return self.act(self.conv(x))
