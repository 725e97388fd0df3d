"""torchtrt_swish::swish under torch.compile with inductor: the decompositions give y, dx and dbias the strides the
kernels (and the fake kernels) give them, on odd layouts, forward and backward, CPU and CUDA; and a changed
decomposition is never served from the AOTAutograd or FX graph caches."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from torch._prims_common import check_significant_strides

import torchtrt_swish
from samples import reference, tolerance
from torchtrt_swish.ops import _kept_format

OPS = torch.ops.torchtrt_swish
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
CL, CL3 = torch.channels_last, torch.channels_last_3d


def _layout(name: str, device: str, dtype: torch.dtype):
    """(x, bias, g) for one named layout; values spread over swish's interesting range."""
    gen = torch.Generator().manual_seed(sum(map(ord, name)))

    def r(*shape):
        return (torch.randn(shape, generator=gen, dtype=torch.float64) * 4).to(device, dtype)

    cases = {
        "transposed": lambda: (r(5, 4).t(), r(5)),
        "permuted": lambda: (r(2, 3, 4).permute(2, 0, 1), r()),
        "channels_last": lambda: (r(2, 3, 4, 5).contiguous(memory_format=CL), r(3, 1, 1)),
        # A contiguous full-shape bias next to a channels_last x: the pointwise math could take either's strides.
        "channels_last_full_bias": lambda: (r(2, 3, 4, 5).contiguous(memory_format=CL), r(2, 3, 4, 5)),
        "channels_last_3d": lambda: (r(2, 3, 2, 4, 5).contiguous(memory_format=CL3), r(3, 1, 1, 1)),
        # Contiguous and channels_last at once (C == 1): the kernels' rule picks contiguous, canonical strides.
        "channels_last_one_channel": lambda: (r(2, 1, 4, 5).contiguous(memory_format=CL), r(1, 1, 1)),
        # A full-shape bias sums g over no dim: dbias must still come out contiguous for a transposed g.
        "transposed_full_bias": lambda: (r(5, 4).t(), r(4, 5), r(5, 4).t()),
        "expanded": lambda: (r(5, 1).expand(5, 4), r(4)),
        "sliced": lambda: (r(6, 8)[:, ::2], r()),
        "sliced_channels_last": lambda: (r(2, 3, 4, 6).contiguous(memory_format=CL)[..., ::2], r(3, 1, 1)),
    }
    x, b, *g = cases[name]()
    # g contiguous unless the case gives one: the kernels lay dx out by x alone.
    return x, b, g[0] if g else torch.randn(x.shape, generator=gen, dtype=torch.float64).to(device, dtype)


LAYOUTS = ["transposed", "permuted", "channels_last", "channels_last_full_bias", "channels_last_3d",
           "channels_last_one_channel", "transposed_full_bias", "expanded", "sliced", "sliced_channels_last"]


def _declared_strides(x: torch.Tensor) -> tuple[int, ...]:
    """The strides the fake kernels declare for y and dx (the kernels' rule, ops._kept_format)."""
    return torch.empty(x.shape, device="meta", memory_format=_kept_format(x)).stride()


def _assert_strides(label: str, compiled: torch.Tensor, eager: torch.Tensor, declared) -> None:
    assert compiled.stride() == eager.stride() == tuple(declared), (
        f"{label}: compiled strides {compiled.stride()}, eager {eager.stride()}, declared {tuple(declared)}")


def _assert_dbias_strides(label: str, compiled: torch.Tensor, eager: torch.Tensor) -> None:
    """dbias exactly as the fake kernel declares it (contiguous), and as eager's where a stride means anything."""
    # The kernels' dbias can differ from the canonical strides on size-1 dims (a per-channel bias over channels_last
    # memory comes back as (1, C, C)); no view or copy can tell such strides apart.
    declared = torch.empty(eager.shape, device="meta").stride()
    assert compiled.stride() == declared, f"{label}: compiled strides {compiled.stride()}, declared {declared}"
    same, dim = check_significant_strides(compiled, eager, only_cuda=False)
    assert same, f"{label}: compiled strides {compiled.stride()} vs eager {eager.stride()} differ at dim {dim}"


def _assert_backward_values(x, b, g, dx, db, label: str) -> None:
    """dx and dbias against fp64 autograd of the plain formula (an independent reference)."""
    xd = x.detach().to("cpu", torch.float64).requires_grad_()
    bd = b.detach().to("cpu", torch.float64).requires_grad_()
    gd = g.detach().to("cpu", torch.float64)
    (xd * torch.sigmoid(xd) + bd).backward(gd)
    eps, eps32 = torch.finfo(x.dtype).eps, torch.finfo(torch.float32).eps
    # One rounding of dx (an ulp) plus a few fp32 ulps of |g| * |f'| (|f'| <= 1.1); dbias: n fp32 ulps of sum |g|.
    tol_dx = eps * xd.grad.abs() + 16 * eps32 * gd.abs() + 1e-30
    assert ((dx.double().cpu() - xd.grad).abs() <= tol_dx).all(), f"{label}: dx"
    n = max(x.numel() // max(b.numel(), 1), 1)
    tol_db = (eps + n * eps32) * gd.abs().sum_to_size(b.shape) + 1e-30
    assert ((db.double().cpu() - bd.grad).abs() <= tol_db).all(), f"{label}: dbias"


def _both_ops(x, b, g):
    return torchtrt_swish.swish(x, b), *OPS.swish_backward(g, x, b)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", LAYOUTS)
def test_compiled_ops_keep_the_kernels_strides(device, name):
    """y and dx from inductor's decompositions have eager's strides, which are the fake kernels' (_kept_format);
    dbias is contiguous like eager's. Values match fp64. bf16 too where the rounding step could move the layout."""
    for dtype in (torch.float32, torch.bfloat16) if name in ("transposed", "channels_last") else (torch.float32,):
        label = f"{name} {dtype} on {device}"
        x, b, g = _layout(name, device, dtype)
        torch._dynamo.reset()
        y, dx, db = torch.compile(_both_ops, fullgraph=True)(x, b, g)
        ey, edx, edb = _both_ops(x, b, g)
        _assert_strides(f"{label}: y", y, ey, _declared_strides(x))
        _assert_strides(f"{label}: dx", dx, edx, _declared_strides(x))
        _assert_dbias_strides(f"{label}: dbias", db, edb)
        err = (y.double().cpu() - reference(x, b)).abs()
        assert (err <= tolerance(x, b, dtype)).all(), f"{label}: y off by {err.max().item():.3e}"
        _assert_backward_values(x, b, g, dx, db, label)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["transposed", "channels_last", "sliced_channels_last"])
def test_compiled_autograd_gives_eager_strides(device, name):
    """Through the op's autograd (AOTAutograd's joint graph), y and the dx that torch.autograd.grad returns have
    eager's strides; x.grad would not show it (AccumulateGrad lays gradients out like x)."""
    x, b, g = _layout(name, device, torch.float32)

    def grads(fn):
        xr, br = x.detach().requires_grad_(), b.detach().requires_grad_()  # detach keeps the strides; clone might not
        y = fn(xr, br)
        return y, *torch.autograd.grad(y, (xr, br), g)

    torch._dynamo.reset()
    y, dx, db = grads(torch.compile(torchtrt_swish.swish, fullgraph=True))
    ey, edx, edb = grads(torchtrt_swish.swish)
    _assert_strides(f"{name}: y", y, ey, _declared_strides(x))
    _assert_strides(f"{name}: dx", dx, edx, _declared_strides(x))
    _assert_dbias_strides(f"{name}: dbias", db, edb)
    _assert_backward_values(x, b, g, dx, db, name)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_view_of_output_compiles_as_in_eager(device, dynamic):
    """The issue's case: y of a transposed x is contiguous in eager, so y.view(-1) works there and must compile,
    forward and backward (dx.view(-1) too), with static and dynamic shapes; still one fused kernel, no op call."""
    from torch._inductor.utils import run_and_get_code

    x, b, g = _layout("transposed", device, torch.float32)
    assert not x.is_contiguous() and torchtrt_swish.swish(x, b).view(-1).shape == (x.numel(),)

    def flat(xr, br):
        return torchtrt_swish.swish(xr, br).view(-1)

    def flat_dx(gr, xr, br):
        return OPS.swish_backward(gr, xr, br)[0].view(-1)

    torch._dynamo.reset()
    xr, br = x.detach().requires_grad_(), b.detach().requires_grad_()  # detach keeps the strides; clone might not
    y, codes = run_and_get_code(torch.compile(flat, fullgraph=True, dynamic=dynamic), xr, br)
    torch.testing.assert_close(y.detach(), torchtrt_swish.swish(x, b).reshape(-1), rtol=1e-6, atol=1e-6)
    assert all("torch.ops.torchtrt_swish" not in c for c in codes), codes
    if device == "cpu":
        assert codes[0].count("async_compile.cpp_pybinding(") == 1, codes[0]
    dx, db = torch.autograd.grad(y, (xr, br), g.reshape(-1))
    _assert_backward_values(x, b, g, dx, db, "view(-1), autograd")
    dxf = torch.compile(flat_dx, fullgraph=True, dynamic=dynamic)(g, x, b)
    _assert_backward_values(x, b, g, dxf.view(x.shape), OPS.swish_backward(g, x, b)[1], "swish_backward.view(-1)")


# ----------------------------------------------------------------------------- compile caches (issue 22 item 7)

# Compiles swish forward and backward in a fresh process and prints what the caches did, as JSON on the last line.
# argv[1] picks the decompositions: "original", "doubled" (a new decomposition whose result old compiled code
# cannot give) or "same_math" (new source, the same traced graph).
_CACHE_SCRIPT = '''
import json, sys
import torch
import torchtrt_swish
from torch._dynamo.utils import counters
from torchtrt_swish import ops

original = ops.swish_decomposition


def doubled(x, bias):
    return original(x, bias) * 2


def same_math(x, bias):
    return original(x, bias)


if sys.argv[1] != "original":
    ops.swish_decomposition = {"doubled": doubled, "same_math": same_math}[sys.argv[1]]
b = torch.linspace(-1, 1, 4).requires_grad_()
x = torch.linspace(-3, 3, 32).reshape(8, 4).requires_grad_()
y = torch.compile(lambda t: torchtrt_swish.swish(t * 2, b), fullgraph=True)(x)
y.sum().backward()
print(json.dumps({"aot": dict(counters["aot_autograd"]), "fx": dict(counters["inductor"]), "y": y.tolist(),
                  "dx": x.grad.tolist(), "tag": torch.compiler.config.cache_key_tag}))
'''


def _compile_in_fresh_process(tmp_path, variant: str, *, user_tag: str | None = None, aot_cache: bool = True):
    """Run _CACHE_SCRIPT with its own inductor cache dir (tmp_path/cache) and both caches on; its JSON."""
    script = tmp_path / "compile_swish.py"
    script.write_text(_CACHE_SCRIPT)
    env = {k: v for k, v in os.environ.items()
           if k not in ("TORCH_COMPILE_CACHE_KEY_TAG", "TORCHINDUCTOR_FORCE_DISABLE_CACHES")}
    env.update(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"), TORCHINDUCTOR_FX_GRAPH_CACHE="1",
               TORCHINDUCTOR_AUTOGRAD_CACHE="1" if aot_cache else "0")
    if user_tag is not None:
        env["TORCH_COMPILE_CACHE_KEY_TAG"] = user_tag
    r = subprocess.run([sys.executable, str(script), variant], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _aot(run) -> tuple[int, int]:
    return run["aot"].get("autograd_cache_hit", 0), run["aot"].get("autograd_cache_miss", 0)


def _fx(run) -> tuple[int, int]:
    return run["fx"].get("fxgraph_cache_hit", 0), run["fx"].get("fxgraph_cache_miss", 0)


def _swish_of_2x(scale: float = 1.0) -> torch.Tensor:
    """The script's y in fp64, times scale."""
    x = torch.linspace(-3, 3, 32, dtype=torch.float64).reshape(8, 4) * 2
    return scale * (x * torch.sigmoid(x) + torch.linspace(-1, 1, 4, dtype=torch.float64))


def test_changed_decomposition_misses_the_compile_caches(tmp_path):
    """In new processes sharing one cache dir: an unchanged decomposition hits the AOTAutograd cache (and, with that
    off, the FX graph cache); a changed one misses the AOTAutograd cache and gives the new decomposition's result,
    not the old compiled code's; one with new source but the same graph misses the FX graph cache (our part of
    cache_key_tag is in that key too, not only the graph)."""
    first = _compile_in_fresh_process(tmp_path, "original")
    assert _aot(first) == (0, 1) and _fx(first) == (0, 2), (first["aot"], first["fx"])  # forward and backward
    torch.testing.assert_close(torch.tensor(first["y"], dtype=torch.float64), _swish_of_2x(), rtol=1e-5, atol=1e-5)
    again = _compile_in_fresh_process(tmp_path, "original")
    assert _aot(again) == (1, 0), again["aot"]
    assert again["y"] == first["y"] and again["dx"] == first["dx"]
    changed = _compile_in_fresh_process(tmp_path, "doubled")
    assert _aot(changed) == (0, 1), f"a changed decomposition was served from the cache: {changed['aot']}"
    torch.testing.assert_close(torch.tensor(changed["y"], dtype=torch.float64), _swish_of_2x(2.0),
                               rtol=1e-5, atol=1e-5)
    fx_again = _compile_in_fresh_process(tmp_path, "original", aot_cache=False)
    assert _fx(fx_again) == (2, 0), fx_again["fx"]
    same = _compile_in_fresh_process(tmp_path, "same_math", aot_cache=False)
    assert _fx(same)[0] == 0, f"new decomposition source, same graph, served from the cache: {same['fx']}"
    assert same["y"] == first["y"]


def test_user_cache_key_tag_is_kept():
    """cache_key_tag: our part is added once, replaces an older part of ours, keeps the user's text (from the
    environment or set later), and comes back when the user replaces the tag after import (the fake kernels put it
    back before dynamo's graph is keyed)."""
    ops = torchtrt_swish.ops
    with_ours = ops.cache_key_tag_with_ours
    assert with_ours("", "ab12") == "torchtrt_swish.decompositions=ab12"
    assert with_ours("a;b", "ab12") == "a;b;torchtrt_swish.decompositions=ab12"
    assert with_ours("a;torchtrt_swish.decompositions=ab12", "ab12") == "a;torchtrt_swish.decompositions=ab12"
    assert with_ours("a;torchtrt_swish.decompositions=00ff", "ab12") == "a;torchtrt_swish.decompositions=ab12"
    ours = with_ours("", ops._registered_fingerprint)
    assert torch.compiler.config.cache_key_tag.endswith(ours)
    from torch._subclasses.fake_tensor import FakeTensorMode

    with torch.compiler.config.patch(cache_key_tag="set after import"):
        with FakeTensorMode():
            torchtrt_swish.swish(torch.randn(3), torch.zeros(()))
        assert torch.compiler.config.cache_key_tag == f"set after import;{ours}"
    env = dict(os.environ, TORCH_COMPILE_CACHE_KEY_TAG="mine")
    show = "import torch, torchtrt_swish; print(torch.compiler.config.cache_key_tag)"
    r = subprocess.run([sys.executable, "-c", show], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == f"mine;{ours}", r.stdout + r.stderr


# ----------------------------------------------------------------------------- the same program as plain PyTorch


def _block(act, channels_last: bool) -> torch.nn.Module:
    """conv → act(x) + bias → conv (channels_last), or linear → act(x) + bias → linear, the bias a parameter."""
    torch.manual_seed(0)
    if channels_last:
        first, last, bias = torch.nn.Conv2d(4, 8, 3, padding=1), torch.nn.Conv2d(8, 4, 1), torch.randn(8, 1, 1)
    else:
        first, last, bias = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16), torch.randn(32)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first, self.last, self.bias = first, last, torch.nn.Parameter(bias)

        def forward(self, x):
            return self.last(act(self.first(x), self.bias))

    m = Block()
    return m.to(memory_format=CL) if channels_last else m


@pytest.mark.parametrize("task", ["inference", "train"])
@pytest.mark.parametrize("shape", [(2, 4, 6, 6), (2, 4, 1, 1), (8, 16)], ids=["conv_channels_last", "conv_1x1", "tokens"])
def test_inductor_compiles_the_same_graph_as_plain_silu(task, shape):
    """Inductor gets the same post-grad graph for the op as for plain F.silu(x) + b: the same ATen ops in the same
    order for inference, the same op counts for a training step (the backward sums dbias in another place). A
    different form of the math (x * sigmoid(x) against silu's x / (1 + exp(-x))) or a layout clone that the strides
    do not need would make the compiled networks two different programs (benchmarks/RESULTS.md, RegNetY). A
    channels_last [N, C, 1, 1] activation is also contiguous, but with other strides: the kernels' rule is met
    without a clone to canonical strides, which inductor would not drop as a no-op."""
    from tools.inductor_graph_diff import op_counts, post_grad_graphs

    channels_last = len(shape) == 4
    x = torch.randn(shape).contiguous(memory_format=CL) if channels_last else torch.randn(shape)
    variants = {"plain": lambda t, b: torch.nn.functional.silu(t) + b, "ours": torchtrt_swish.swish}
    graphs = {v: post_grad_graphs(_block(act, channels_last), x.clone(), task) for v, act in variants.items()}
    ops = {v: [[str(n.target) for n in g.nodes if n.op == "call_function"] for g in gs] for v, gs in graphs.items()}
    assert any("sigmoid" in t or "exp" in t for seq in ops["plain"] for t in seq), ops["plain"]
    if task == "inference":
        assert ops["ours"] == ops["plain"]
    else:
        assert op_counts(graphs["ours"]) == op_counts(graphs["plain"])


def _fingerprint_of(source: str, *names: str) -> str:
    """decompositions_fingerprint of the functions `names` defined by source, in a module namespace of their own
    that looks like ops.py to the fingerprint (same __name__)."""
    space = {"__name__": torchtrt_swish.ops.__name__, "torch": torch}
    exec(compile(source, "<decomposition>", "exec"), space)  # noqa: S102 - test-only, our own text
    return torchtrt_swish.ops.decompositions_fingerprint(*(space[n] for n in names))


_DECOMP = '''
def _helper(x):
    return x * 2

def swish_decomposition(x, bias):
    # a comment
    return _helper(x) + bias
'''


def test_fingerprint_covers_the_bodies_not_the_names():
    """Same names, another body (or another helper body) -> another fingerprint; a comment or a blank line -> the
    same. Hashing only the functions' names, or only the decomposition without its helpers, fails here."""
    base = _fingerprint_of(_DECOMP, "swish_decomposition")
    assert base == _fingerprint_of(_DECOMP.replace("# a comment", "# another comment\n"), "swish_decomposition")
    assert base != _fingerprint_of(_DECOMP.replace("+ bias", "- bias"), "swish_decomposition")
    assert base != _fingerprint_of(_DECOMP.replace("x * 2", "x * 3"), "swish_decomposition")
    assert len(base) == 16 and int(base, 16) >= 0


def test_fingerprint_needs_no_source_file():
    """Without a source file (python -c, a frozen install) the fingerprint still follows the code, never a constant."""
    a = _fingerprint_of(_DECOMP, "swish_decomposition")  # compiled from a string: inspect finds no source
    b = _fingerprint_of(_DECOMP.replace("x * 2", "x * 4"), "swish_decomposition")
    assert a != b
