"""The compiled op's own input checks in eager mode, on every device (the fake kernels' are in test_ops.py): each
refusal is one RuntimeError naming the value, before any kernel reads memory."""
from __future__ import annotations

import re

import pytest
import torch

import torchtrt_swish  # noqa: F401  (registers torch.ops.torchtrt_swish)

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("gshape", [(2, 3), (8, 3), (3, 4), (12,), (4, 3, 1), (), (0, 3)], ids=str)
def test_swish_backward_refuses_a_grad_of_another_shape(device, gshape):
    # Smaller than x the kernels would read past g's end; the same numel in another shape would silently pair the
    # wrong elements; neither may return numbers.
    x = torch.randn(4, 3, device=device)
    bias = torch.randn(3, device=device)
    grad = torch.ones(gshape, device=device)
    want = f"swish_backward: expected grad of shape [4, 3], got {list(gshape)}"
    with pytest.raises(RuntimeError, match=re.escape(want)):
        torch.ops.torchtrt_swish.swish_backward(grad, x, bias)


@pytest.mark.parametrize("device", DEVICES)
def test_swish_backward_of_the_right_shape_runs(device):
    x, bias = torch.randn(4, 3, device=device), torch.randn(3, device=device)
    dx, dbias = torch.ops.torchtrt_swish.swish_backward(torch.ones(4, 3, device=device), x, bias)
    assert dx.shape == x.shape and dbias.shape == bias.shape
