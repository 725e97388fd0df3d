"""Example 01: the seed network through the compiled op: eager and torch.compile, forward + backward, gradcheck."""
from __future__ import annotations

import sys

import torch

import torchtrt_swish


def main() -> int:
    """Run the seed Net on a 1x1x5x5 input and check its gradient; exit non-zero on any mismatch."""
    torch.manual_seed(0)
    net = torchtrt_swish.Net()
    x = torch.arange(25, dtype=torch.float32).view(1, 1, 5, 5) / 12.5 - 1.0
    print(f"torchtrt_swish on torch {torch.__version__}; net: {net}")

    y = net(x)
    print("eager output (1x1x3x3):")
    print(y.detach())

    compiled = torch.compile(net, fullgraph=True)
    yc = compiled(x)
    torch.testing.assert_close(yc, y)
    print("torch.compile(fullgraph=True) output matches eager")

    # Backward through the op, against fp64 autograd of the plain formula.
    xr = x.clone().requires_grad_()
    net.zero_grad()
    net(xr).sum().backward()
    xd = x.double().requires_grad_()
    conv = torch.nn.functional.conv2d(xd, net.conv.weight.detach().double())
    bias = net.act.bias.detach().double().requires_grad_()
    (conv * torch.sigmoid(conv) + bias).sum().backward()
    torch.testing.assert_close(xr.grad.double(), xd.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(net.act.bias.grad.double(), bias.grad, rtol=1e-5, atol=1e-6)
    print(f"backward matches fp64 autograd (dbias = {net.act.bias.grad.item():.6f})")

    # Numerical gradient check of the op itself in fp64, scalar bias as in the seed.
    ok = torch.autograd.gradcheck(torchtrt_swish.swish,
                                  (conv.detach().clone().requires_grad_(), bias.detach().clone().requires_grad_()))
    print(f"gradcheck (fp64, seed input): {'PASSED' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
