"""Python side of torchtrt_swish::swish: fake (meta) kernels, vmap rules, inductor decompositions, the wrapper.

The schema, the real kernels and autograd live in C++ (csrc/torch); this module only registers what torch.compile,
torch.export and torch.func need on top of them.
"""
from __future__ import annotations

import hashlib
import inspect
import re

import torch

from .dtypes import DTYPES

_OPS = torch.ops.torchtrt_swish
_FLOATS = tuple(DTYPES.values())


def _check_inputs(x: torch.Tensor, bias: torch.Tensor, what: str) -> None:
    """The C++ checks, restated with torch._check so fake tensors fail the same way as real ones."""
    ok = x.dtype in _FLOATS or (x.dtype == torch.float64 and x.device.type in ("cpu", "meta"))
    torch._check(ok, lambda: f"{what}: expected x of dtype float32, float16 or bfloat16 (or float64 on CPU), "
                             f"got {x.dtype} on {x.device}")
    torch._check(bias.dtype == x.dtype,
                 lambda: f"{what}: expected bias of the same dtype as x ({x.dtype}), got {bias.dtype}")
    torch._check(bias.device == x.device,
                 lambda: f"{what}: expected bias on the same device as x ({x.device}), got {bias.device}")
    torch._check(bias.dim() <= x.dim(),
                 lambda: f"{what}: expected bias broadcastable to x without changing x's shape, got bias "
                         f"{list(bias.shape)} for x {list(x.shape)}")
    off = x.dim() - bias.dim()
    for j, b in enumerate(bias.shape):
        xd = x.shape[j + off]
        torch._check(b == 1 or b == xd,
                     lambda: f"{what}: expected bias broadcastable to x without changing x's shape, got bias "
                             f"{list(bias.shape)} for x {list(x.shape)}")


def _kept_format(x: torch.Tensor) -> torch.memory_format:
    """The memory format the kernels give their outputs (keptFormat in csrc/torch/swish_common.h)."""
    if x.is_contiguous():
        return torch.contiguous_format
    if x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last):
        return torch.channels_last
    if x.dim() == 5 and x.is_contiguous(memory_format=torch.channels_last_3d):
        return torch.channels_last_3d
    return torch.contiguous_format


def _empty_like_kernel_output(x: torch.Tensor) -> torch.Tensor:
    """An empty tensor with the shape and the strides of the kernels' output for input x."""
    return torch.empty(x.shape, dtype=x.dtype, device=x.device, memory_format=_kept_format(x))


@torch.library.register_fake("torchtrt_swish::swish")
def _swish_fake(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    # Fake kernels run when dynamo or export traces the op, i.e. before inductor picks its decompositions.
    register_inductor_decompositions()
    _check_inputs(x, bias, "swish")
    return _empty_like_kernel_output(x)


@torch.library.register_fake("torchtrt_swish::swish_backward")
def _swish_backward_fake(grad: torch.Tensor, x: torch.Tensor, bias: torch.Tensor):
    register_inductor_decompositions()
    _check_inputs(x, bias, "swish_backward")
    torch._check(grad.shape == x.shape,
                 lambda: f"swish_backward: expected grad of shape {list(x.shape)}, got {list(grad.shape)}")
    return _empty_like_kernel_output(x), bias.new_empty(bias.shape)


# ----------------------------------------------------------------------------- vmap (docs/architecture.md)


def _batched(t: torch.Tensor, bdim: int | None, size: int) -> torch.Tensor:
    """t with its vmap dim first; an unbatched t expanded (no copy) to the batch size."""
    return t.movedim(bdim, 0) if bdim is not None else t.expand(size, *t.shape)


def _batched_bias(bias: torch.Tensor, bdim: int | None, size: int, x_dim: int) -> torch.Tensor:
    """bias as [B, 1, ..., *per-example bias shape] for a per-example x of x_dim dims."""
    b = _batched(bias, bdim, size)
    shape = b.shape[1:]
    return b.reshape(size, *([1] * (x_dim - len(shape))), *shape)


@torch.library.register_vmap("torchtrt_swish::swish")
def _swish_vmap(info, in_dims, x: torch.Tensor, bias: torch.Tensor):
    """swish over a vmap dim: one call on the batch-first tensors."""
    x_bdim, b_bdim = in_dims
    n = info.batch_size
    xb = _batched(x, x_bdim, n)
    bb = _batched_bias(bias, b_bdim, n, xb.dim() - 1) if b_bdim is not None else bias
    return _OPS.swish.default(xb, bb), 0


@torch.library.register_vmap("torchtrt_swish::swish_backward")
def _swish_backward_vmap(info, in_dims, grad: torch.Tensor, x: torch.Tensor, bias: torch.Tensor):
    """swish_backward over a vmap dim: one call, with one dbias per example."""
    g_bdim, x_bdim, b_bdim = in_dims
    n = info.batch_size
    gb, xb = _batched(grad, g_bdim, n), _batched(x, x_bdim, n)
    # Always a batched bias: each example's dbias sums only that example's grad.
    bb = _batched_bias(bias, b_bdim, n, xb.dim() - 1)
    bias_shape = _batched(bias, b_bdim, n).shape[1:]  # one example's bias shape
    dx, dbias = _OPS.swish_backward.default(gb, xb, bb)
    return (dx, dbias.reshape(n, *bias_shape)), (0, 0)


# ----------------------------------------------------------------------------- inductor (docs/architecture.md)


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The kernels' compute type: fp32 for fp32/fp16/bf16, fp64 for fp64."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _laid_out_as_kernel_output(t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """t with the strides the kernels (and the fake kernels) give their output for input x."""
    # Only where needed (channels_last [N, C, 1, 1] is also contiguous): inductor keeps such a clone as a node.
    fmt = _kept_format(x)
    return t if t.is_contiguous(memory_format=fmt) else torch.clone(t, memory_format=fmt)


def swish_decomposition(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """torchtrt_swish::swish as ATen ops: silu(x) + bias in the compute type, rounded once.

    F.silu rather than x * sigmoid(x): for fp32, inductor then gets the very graph plain F.silu(x) + b gives it
    (silu's x / (1 + exp(-x)), the division form of the fp32 kernel too); for fp16/bf16 it differs only in
    rounding once, after the bias add, where plain rounds silu(x) first."""
    acc = _compute_dtype(x.dtype)
    xf = x.to(acc)
    return _laid_out_as_kernel_output((torch.nn.functional.silu(xf) + bias.to(acc)).to(x.dtype), x)


def swish_backward_decomposition(grad: torch.Tensor, x: torch.Tensor, bias: torch.Tensor):
    """torchtrt_swish::swish_backward as ATen ops: (g * s * (1 + x * (1 - s)), g summed to bias's shape)."""
    acc = _compute_dtype(x.dtype)
    xf, gf = x.to(acc), grad.to(acc)
    s = torch.sigmoid(xf)
    dx = _laid_out_as_kernel_output((gf * s * (1 + xf * (1 - s))).to(x.dtype), x)
    lead = x.dim() - bias.dim()
    dims = [*range(lead), *(lead + j for j, b in enumerate(bias.shape) if b == 1)]
    dbias = gf.sum(dims, keepdim=True) if dims else gf  # sum over no dims would sum over all of them
    # The kernels' dbias is contiguous in bias's shape (the fake kernel's bias.new_empty), whatever g's layout.
    return dx, torch.clone(dbias.reshape(bias.shape).to(bias.dtype), memory_format=torch.contiguous_format)


# ----------------------------------------------------------------------------- compile caches (docs/architecture.md)

_CACHE_TAG_PREFIX = "torchtrt_swish.decompositions="
_CACHE_TAG_PART = re.compile(";?" + re.escape(_CACHE_TAG_PREFIX) + "[0-9a-f]*")


def _code_parts(code) -> list[bytes]:
    """What a function's code object computes: its bytecode, constants and names, nested code included (line
    numbers and comments left out, so an edit that does not change the program keeps the fingerprint)."""
    parts = [code.co_code, repr(code.co_names).encode(), repr(code.co_varnames).encode()]
    for const in code.co_consts:
        parts += _code_parts(const) if inspect.iscode(const) else [repr(const).encode()]
    return parts


def _names(code) -> set[str]:
    """Global names a code object and its nested code read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _names(const)
    return names


def decompositions_fingerprint(*fns) -> str:
    """A short hash of what the decompositions compute: their code, the code of the functions of their module they
    call (transitively), and the build (the torch _C was built with)."""
    digest = hashlib.sha256(_built_with_torch().encode())
    seen: set[int] = set()
    queue = list(fns)
    while queue:
        fn = queue.pop(0)
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        digest.update(f"{fn.__module__}.{fn.__qualname__}".encode())
        for part in _code_parts(fn.__code__):
            digest.update(part)
        for name in sorted(_names(fn.__code__)):
            helper = fn.__globals__.get(name)
            if inspect.isfunction(helper) and helper.__module__ == fn.__module__:
                queue.append(helper)
    return digest.hexdigest()[:16]


def _built_with_torch() -> str:
    """The torch the compiled op was built with (the generated _build_info), or the running torch's version."""
    try:
        from ._build_info import TORCH_VERSION
    except ImportError:  # a source tree that was never built: the running torch is the build's
        return torch.__version__
    return TORCH_VERSION


# What register_inductor_decompositions will register; it recomputes this from what it did register.
_registered_fingerprint = decompositions_fingerprint(swish_decomposition, swish_backward_decomposition)


def cache_key_tag_with_ours(tag: str, fingerprint: str) -> str:
    """tag with our part for fingerprint in it: the user's parts kept, an older part of ours replaced."""
    ours = _CACHE_TAG_PREFIX + fingerprint
    if ours in tag:
        return tag
    rest = _CACHE_TAG_PART.sub("", tag)
    return f"{rest};{ours}" if rest else ours


def tag_compile_caches() -> None:
    """Fold the decompositions' fingerprint into torch.compile's cache keys (torch.compiler.config.cache_key_tag)."""
    tag = torch.compiler.config.cache_key_tag
    new = cache_key_tag_with_ours(tag, _registered_fingerprint)
    if new != tag:
        torch.compiler.config.cache_key_tag = new


tag_compile_caches()

_inductor_decompositions_registered = False


def register_inductor_decompositions() -> None:
    """Put swish / swish_backward into inductor's decomposition table (once) and our part into the cache tag."""
    global _inductor_decompositions_registered, _registered_fingerprint
    if not _inductor_decompositions_registered:
        _inductor_decompositions_registered = True
        # Imported here, not at package import: torch._inductor costs seconds, and only compilation needs it.
        from torch._inductor import decomposition as inductor_decomposition

        forward, backward = swish_decomposition, swish_backward_decomposition
        inductor_decomposition.register_decomposition(_OPS.swish.default)(forward)
        inductor_decomposition.register_decomposition(_OPS.swish_backward.default)(backward)
        _registered_fingerprint = decompositions_fingerprint(forward, backward)
        # select_decomp_table() serves a cached copy of the table when fallback_random is off (the default); a
        # copy made before this registration (something else compiled first) would not have our entries.
        cached = getattr(inductor_decomposition, "fast_random_decomps", None)
        if hasattr(cached, "cache_clear"):
            cached.cache_clear()
    tag_compile_caches()


# ----------------------------------------------------------------------------- public wrapper


def swish(x: torch.Tensor, bias: torch.Tensor | float) -> torch.Tensor:
    """y = x * sigmoid(x) + bias through the compiled op; a Python number bias becomes a scalar tensor."""
    # Written so torch.jit.script compiles it too (torch.ops spelled out, no module globals).
    if isinstance(bias, torch.Tensor):
        return torch.ops.torchtrt_swish.swish(x, bias)
    return torch.ops.torchtrt_swish.swish(x, torch.tensor(bias, dtype=x.dtype, device=x.device))
