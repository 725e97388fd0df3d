"""The networks the benchmarks run, each built once with nn.SiLU and then given two swish variants that a user would
write: plain PyTorch (`F.silu(x) + bias`) or the op (`torchtrt_swish.EfficientSwish(0.0, bias_shape=...)`).

Every nn.SiLU is swapped for a swish with a learnable bias whose shape follows the activation it replaces: [C, 1, 1]
on a convolution's NCHW (or channels_last) output, [D] on a transformer's last dim. Both variants start from the same
weights and the same random biases (0.1 * randn), so their eval outputs must agree (`check_same`).

Networks (`NETWORKS`): torchvision EfficientNet-B0 and EfficientNet-V2-S (SiLU is their activation), torchvision
RegNetY-400MF built with `activation=nn.SiLU` (its SE blocks then use SiLU too), and `transformer`: pre-norm blocks of
causal attention and an MLP `Linear(D, H) -> swish + bias[H] -> Linear(H, D)` at LLM-like shapes. Random weights:
nothing is downloaded. `smoke=True` gives the same architectures at sizes a CPU runs in a second.
"""
from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


class PlainSwish(nn.Module):
    """What a user writes without the op: F.silu(x) + bias, bias a learnable parameter ([C, 1, 1] or [D])."""

    def __init__(self, bias_shape: tuple[int, ...]):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The bias follows x's dtype, as EfficientSwish's does (under autocast x is bf16, the parameter fp32)."""
        return F.silu(x) + self.bias.to(x.dtype)


def ours_swish(bias_shape: tuple[int, ...]) -> nn.Module:
    """The op's module with a zero bias of bias_shape (set afterwards to the plain variant's values)."""
    import torchtrt_swish

    return torchtrt_swish.EfficientSwish(0.0, bias_shape=bias_shape)


VARIANTS: dict[str, Callable[[tuple[int, ...]], nn.Module]] = {"plain": PlainSwish, "ours": ours_swish}


class TransformerBlock(nn.Module):
    """Pre-norm block: x + attention(norm(x)), then x + down(SiLU(up(norm(x)))); the SiLU's input is [B, S, H]."""

    def __init__(self, dim: int, hidden: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)
        self.norm2 = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden, bias=False)  # the swish adds the bias, so the Linear has none
        self.act = nn.SiLU()
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Causal self-attention and the MLP, each with a residual."""
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.down(self.act(self.up(self.norm2(x))))


class Transformer(nn.Module):
    """A stack of TransformerBlocks and a final LayerNorm, [B, S, D] in and out."""

    def __init__(self, dim: int, hidden: int, heads: int, blocks: int):
        super().__init__()
        self.blocks = nn.Sequential(*(TransformerBlock(dim, hidden, heads) for _ in range(blocks)))
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The blocks, then the final norm."""
        return self.norm(self.blocks(x))


@dataclasses.dataclass(frozen=True)
class Network:
    """How to build one benchmark network with nn.SiLU, feed it, score it, and shape its swish biases."""

    name: str
    describe: Callable[[bool], str]  # smoke -> shape summary for the table
    build: Callable[[bool], nn.Module]  # smoke -> the model (random weights, nn.SiLU activations)
    input_shape: Callable[[int, bool], tuple[int, ...]]  # (batch, smoke) -> input shape
    batch: int  # default batch (the transformer's batch is its number of sequences)
    channels_last: bool  # default memory format of model and input
    classes: int  # > 0: cross-entropy against labels in [0, classes); 0: MSE against a target like the output
    bias_shape: Callable[[torch.Size], tuple[int, ...]]  # a SiLU's input shape -> its bias's shape


def _conv_bias(shape: torch.Size) -> tuple[int, ...]:
    return (shape[1], 1, 1)


def _last_dim_bias(shape: torch.Size) -> tuple[int, ...]:
    return (shape[-1],)


def _torchvision(factory: str, **kwargs) -> Callable[[bool], nn.Module]:
    def build(smoke: bool) -> nn.Module:
        import torchvision.models

        return getattr(torchvision.models, factory)(weights=None, **kwargs)

    return build


def _image(batch: int, smoke: bool) -> tuple[int, ...]:
    return (batch, 3, 32, 32) if smoke else (batch, 3, 224, 224)


# LLM-like MLP: 8 sequences of 1024 tokens ([8192, 2048] activations entering the MLP, hidden 5632), 4 blocks.
_TRANSFORMER = {False: dict(dim=2048, hidden=5632, heads=16, blocks=4, seq=1024),
                True: dict(dim=32, hidden=64, heads=4, blocks=2, seq=16)}


def _transformer_build(smoke: bool) -> nn.Module:
    c = _TRANSFORMER[smoke]
    return Transformer(c["dim"], c["hidden"], c["heads"], c["blocks"])


def _transformer_input(batch: int, smoke: bool) -> tuple[int, ...]:
    c = _TRANSFORMER[smoke]
    return (batch, c["seq"], c["dim"])


def _transformer_describe(smoke: bool) -> str:
    c = _TRANSFORMER[smoke]
    return f"{c['blocks']} blocks, D {c['dim']}, hidden {c['hidden']}, {c['heads']} heads, seq {c['seq']}"


def _image_describe(smoke: bool) -> str:
    return "32x32" if smoke else "224x224"


NETWORKS: dict[str, Network] = {n.name: n for n in (
    Network("transformer", _transformer_describe, _transformer_build, _transformer_input, 8, False, 0,
            _last_dim_bias),
    Network("regnet_y_400mf", _image_describe, _torchvision("regnet_y_400mf", activation=nn.SiLU), _image, 128,
            True, 1000, _conv_bias),
    Network("efficientnet_b0", _image_describe, _torchvision("efficientnet_b0"), _image, 128, False, 1000,
            _conv_bias),
    Network("efficientnet_v2_s", _image_describe, _torchvision("efficientnet_v2_s"), _image, 64, True, 1000,
            _conv_bias),
)}


def silu_bias_shapes(model: nn.Module, net: Network, device: str, smoke: bool) -> dict[str, tuple[int, ...]]:
    """{module name: bias shape} for every nn.SiLU, from one batch-1 eval forward with hooks."""
    found: dict[str, tuple[int, ...]] = {}
    hooks = [m.register_forward_hook(lambda mod, inp, out, name=name: found.__setitem__(name, net.bias_shape(
        inp[0].shape))) for name, m in model.named_modules() if isinstance(m, nn.SiLU)]
    try:
        with torch.no_grad():
            model.eval()(torch.randn(net.input_shape(1, smoke), device=device))
    finally:
        for h in hooks:
            h.remove()
    return found


def build_variants(net: Network, device: str, smoke: bool, seed: int = 0) -> tuple[dict[str, nn.Module], int]:
    """({variant: model}, number of swaps): the network with every nn.SiLU swapped, same weights and biases."""
    torch.manual_seed(seed)
    base = net.build(smoke).to(device)
    shapes = silu_bias_shapes(base, net, device, smoke)
    if not shapes:
        raise ValueError(f"network {net.name!r} has no nn.SiLU to swap")
    biases = {name: 0.1 * torch.randn(s, device=device) for name, s in shapes.items()}
    models = {}
    for variant, make in VARIANTS.items():
        m = copy.deepcopy(base)
        for name, s in shapes.items():
            parent_name, _, attr = name.rpartition(".")
            swish = make(s).to(device)
            with torch.no_grad():
                swish.bias.copy_(biases[name])
            setattr(m.get_submodule(parent_name) if parent_name else m, attr, swish)
        if any(isinstance(mod, nn.SiLU) for mod in m.modules()):
            raise RuntimeError(f"{net.name}: an nn.SiLU was not replaced in the {variant} variant")
        models[variant] = m
    return models, len(shapes)


def check_same(models: dict[str, nn.Module], x: torch.Tensor, tol: float = 1e-4) -> float:
    """Largest |ours - plain| / max|plain| of the fp32 eval outputs; raises above tol (the variants must agree)."""
    with torch.no_grad():
        a = models["plain"].eval()(x)
        b = models["ours"].eval()(x)
    err = ((a - b).abs().max() / a.abs().max()).item()
    if not err <= tol:  # also catches NaN
        raise RuntimeError(f"ours and plain disagree: relative error {err:.3e} of the eval outputs (limit {tol:g})")
    return err


def loss_fn(net: Network) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The training loss: cross-entropy for classifiers, MSE for the transformer (computed in fp32)."""
    if net.classes:
        return lambda out, target: F.cross_entropy(out.float(), target)
    return lambda out, target: F.mse_loss(out.float(), target)


def make_batch(net: Network, batch: int, device: str, smoke: bool, channels_last: bool):
    """(fp32 input, training target): random normal input, random labels or a random target like the output."""
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(net.input_shape(batch, smoke), generator=g).to(device)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    if net.classes:
        target = torch.randint(0, net.classes, (batch,), generator=g).to(device)
    else:
        target = torch.randn(net.input_shape(batch, smoke), generator=g).to(device)
    return x, target


def variants_with_batch(net: Network, device: str, smoke: bool, batch: int, channels_last: bool):
    """(models, swaps, fp32 input, target): build_variants, in channels_last memory when asked, and make_batch."""
    models, swaps = build_variants(net, device, smoke)
    if channels_last:
        models = {k: m.to(memory_format=torch.channels_last) for k, m in models.items()}
    x, target = make_batch(net, batch, device, smoke, channels_last)
    return models, swaps, x, target
