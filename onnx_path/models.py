"""Torch models the CLI, the demo and the examples export and check, built the same way each time from a seed."""
from __future__ import annotations

import contextlib
import math

import torch

import torchtrt_swish

MODEL_CHOICES = ("seed-net", "torchvision:<name>")


@contextlib.contextmanager
def flush_denormals():
    """Within the block, torch's CPU ops flush subnormal numbers to zero, single-threaded; both restored after.

    Randomly initialized deep nets (EfficientNet's SiLU of large negative values) produce subnormals, and CPU
    arithmetic on them is ~100x slower: a float64 EfficientNet-B0 forward pass goes from 0.2 s to 45 s. Values
    below 2.2e-308 (float64) or 1.2e-38 (float32) are far below every tolerance used here. The flag is a per-thread
    CPU setting made on the calling thread only, and torch's worker threads may already exist: so the block runs on
    one thread.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)  # torch has no getter; False is its default
        torch.set_num_threads(threads)


def calibrate_batchnorm(model: torch.nn.Module, example: torch.Tensor, *, seed: int = 0, batch: int = 16) -> None:
    """Set BatchNorm running stats from one random batch, so a randomly initialized net has O(1) activations.

    With torchvision's init and default stats (mean 0, var 1) EfficientNet's logits are ~1e-14: every comparison
    would pass trivially. One forward pass in train mode with cumulative averaging gives real statistics.
    """
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average: one batch sets the stats outright
    gen = torch.Generator().manual_seed(seed + 1)
    data = torch.randn((batch, *example.shape[1:]), generator=gen, dtype=example.dtype)
    model.train()
    with torch.no_grad(), flush_denormals():
        model(data)
    model.eval()


def _check_input_shape(spec: str, model: torch.nn.Module, example: torch.Tensor,
                       min_size: tuple[int, int] | None = None) -> None:
    """ValueError naming the shape and the model's complaint when `model` cannot take `example` (rank, channels,
    size); with the model's smallest input size `min_size` (H, W), the --input-shape to use when the size is below."""
    shape = "x".join(str(d) for d in example.shape) or "() (a scalar)"
    # Both model kinds are image networks: a 3-D input would pass Conv2d as an unbatched image, with its
    # channels read as the batch axis that the export makes dynamic.
    if example.dim() != 4:
        raise ValueError(f"input shape {shape} has rank {example.dim()}; {spec} takes NxCxHxW (rank 4)")
    try:
        with torch.no_grad(), flush_denormals():
            model.eval()(example)
    except Exception as exc:  # noqa: BLE001 - RuntimeError from a conv, AssertionError from torch._assert (ViT), ...
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        hint = ""
        if min_size is not None and tuple(example.shape[2:]) != tuple(min_size):
            n, c = example.shape[:2]
            h, w = min_size
            hint = f" (its smallest input is {h}x{w}: --input-shape {n}x{c}x{h}x{w})"
        raise ValueError(f"input shape {shape} does not fit {spec}: {why}{hint}") from None


def _torchvision_builder(spec: str, name: str):
    """(builder, smallest input (H, W) or None) of a torchvision classification model; ValueError naming the spec
    for anything else (a class, a helper function, a detection or video model, which take other inputs)."""
    import torchvision

    # list_models(module=torchvision.models): the registered builders of image classifiers, not the module's classes
    # or helpers, and not the detection/segmentation/video models of its submodules.
    if name.lower() not in torchvision.models.list_models(module=torchvision.models):
        raise ValueError(f"{spec} is not a torchvision classification model builder (choose one of "
                         "torchvision.models.list_models(module=torchvision.models), e.g. torchvision:efficientnet_b0)")
    weights = list(torchvision.models.get_model_weights(name))
    min_size = weights[0].meta.get("min_size") if weights else None
    return torchvision.models.get_model_builder(name), min_size


def _example(shape: tuple[int, ...], generator: torch.Generator | None = None) -> torch.Tensor:
    """torch.randn(shape); ValueError naming the shape when it is too large to allocate."""
    try:
        return torch.randn(shape, generator=generator)
    except (MemoryError, RuntimeError) as exc:  # torch's CPU allocator raises RuntimeError ("can't allocate memory")
        if not isinstance(exc, MemoryError) and "allocate" not in str(exc):
            raise
        text = "x".join(str(d) for d in shape)
        raise ValueError(f"input shape {text} is too large to allocate ({4 * math.prod(shape):.3g} bytes of "
                         "float32): choose a smaller input shape") from None


def build_model(spec: str, *, seed: int = 0, input_shape: tuple[int, ...] | None = None):
    """(model, example input) for 'seed-net' or 'torchvision:<name>' (random weights, BN calibrated, from `seed`).

    ValueError for an unknown spec or an input shape the model cannot take (message names the shape and why).
    """
    if spec == "seed-net":
        model, example = torchtrt_swish.Net().eval(), _example(input_shape or (1, 1, 5, 5))
        _check_input_shape(spec, model, example)
        return model, example
    if spec.startswith("torchvision:"):
        factory, min_size = _torchvision_builder(spec, spec.split(":", 1)[1])
        torch.manual_seed(seed)
        model = factory(weights=None)
        example = _example(input_shape or (1, 3, 64, 64), torch.Generator().manual_seed(seed))
        _check_input_shape(spec, model, example, min_size)  # before calibration, which would fail the same way
        calibrate_batchnorm(model, example, seed=seed)
        return model.eval(), example
    raise ValueError(f"unknown model {spec!r}; choose seed-net or torchvision:<name> "
                     "(e.g. torchvision:efficientnet_b0)")
