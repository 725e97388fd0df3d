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


class EfficientBlock(nn.Module):
    """EfficientNet-style block: conv-BN-swish, depthwise conv-BN-swish, 1x1 projection; per-channel swish bias."""

    def __init__(self, cin: int = 3, channels: int = 16, cout: int = 8):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(cin, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels))
        self.act1 = EfficientSwish(bias_shape=(channels, 1, 1))
        self.dw = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1, groups=channels, bias=False),
                                nn.BatchNorm2d(channels))
        self.act2 = EfficientSwish(bias_shape=(channels, 1, 1))
        self.project = nn.Conv2d(channels, cout, 1)
        with torch.no_grad():  # distinct per-channel biases, so a wrong channel index shows up in the outputs
            self.act1.bias.copy_(torch.linspace(-1.0, 1.0, channels).view(channels, 1, 1))
            self.act2.bias.copy_(torch.linspace(0.5, -0.5, channels).view(channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """stem -> swish -> depthwise -> swish -> project."""
        return self.project(self.act2(self.dw(self.act1(self.stem(x)))))
