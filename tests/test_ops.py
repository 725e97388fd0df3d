"""torchtrt_swish::swish against an independent fp64 PyTorch reference, on CPU (and CUDA where present)."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import torchtrt_swish
from samples import FUSED_BACKWARD_SHAPES, reference, sample_inputs, tolerance

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]


def _dtypes_for(device):
    return DTYPES + ([torch.float64] if device == "cpu" else [])


def _cases(device):
    return [(dt, s) for dt in _dtypes_for(device) for s in sample_inputs(device, dt)]


def _assert_close_to_reference(y, x, bias):
    assert y.shape == x.shape and y.dtype == x.dtype and y.device == x.device
    err = (y.detach().to("cpu", torch.float64) - reference(x, bias)).abs()
    tol = tolerance(x, bias, x.dtype)
    bad = ~(err <= tol)
    assert not bad.any(), (
        f"{int(bad.sum())} of {err.numel()} elements off; worst err {err[bad].max().item():.3e} "
        f"vs tol {tol[bad].min().item():.3e}"
    )


# ----------------------------------------------------------------------------- forward parity


@pytest.mark.parametrize("device", DEVICES)
def test_forward_matches_fp64_reference(device):
    for dtype, s in _cases(device):
        y = torchtrt_swish.swish(s.x, s.bias)
        try:
            _assert_close_to_reference(y, s.x, s.bias)
        except AssertionError as e:
            raise AssertionError(f"{s.name} {dtype}: {e}") from None


def _expected_format(x: torch.Tensor) -> torch.memory_format:
    """The output format the op promises: x's when x is dense channels_last (3d) but not contiguous."""
    if not x.is_contiguous():
        for rank, fmt in ((4, torch.channels_last), (5, torch.channels_last_3d)):
            if x.dim() == rank and x.is_contiguous(memory_format=fmt):
                return fmt
    return torch.contiguous_format


@pytest.mark.parametrize("device", DEVICES)
def test_output_format_and_input_untouched(device):
    for dtype, s in _cases(device):
        x0 = s.x.clone()
        y = torchtrt_swish.swish(s.x, s.bias)
        assert y.is_contiguous(memory_format=_expected_format(s.x)), s.name
        assert torch.equal(s.x, x0), s.name


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_special_values_match_pytorch(device, dtype):
    """±inf, NaN, ±0, huge and tiny |x| give exactly what F.silu(x) + bias gives (silu(-inf) is NaN)."""
    fi = torch.finfo(dtype)
    vals = [float("inf"), float("-inf"), float("nan"), 0.0, -0.0, fi.max, -fi.max, 1e4, -1e4, fi.tiny, -fi.tiny,
            fi.smallest_normal * fi.eps, 100.0, -100.0]
    x = torch.tensor(vals, dtype=dtype, device=device)
    for b in (0.0, -0.0, 3.15, float("nan"), float("inf")):
        bias = torch.tensor([b], dtype=dtype, device=device)
        got = torchtrt_swish.swish(x, bias)
        want = F.silu(x) + bias
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True,
                                   msg=lambda m: f"bias={b}: {m}")
        # Signed zeros must match too (assert_close treats -0.0 == 0.0).
        assert torch.equal(torch.signbit(got[~got.isnan()]), torch.signbit(want[~want.isnan()])), f"bias={b}"


@pytest.mark.parametrize("device", DEVICES)
def test_nan_propagates_through_gradient(device):
    x = torch.tensor([float("nan"), 1.0], device=device, requires_grad=True)
    b = torch.tensor([0.5], device=device, requires_grad=True)
    torchtrt_swish.swish(x, b).sum().backward()
    assert torch.isnan(x.grad[0]) and torch.isfinite(x.grad[1])
    assert b.grad.item() == 2.0


# ----------------------------------------------------------------------------- opcheck


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for dtype, s in _cases(device):
        grad = dtype in (torch.float32, torch.float64)
        x = s.x.detach().clone().requires_grad_(grad)
        b = s.bias.detach().clone().requires_grad_(grad)
        torch.library.opcheck(torch.ops.torchtrt_swish.swish.default, (x, b))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_backward_op(device):
    for dtype, s in _cases(device)[:40]:
        g = torch.randn_like(s.x)
        torch.library.opcheck(torch.ops.torchtrt_swish.swish_backward.default, (g, s.x, s.bias))


# ----------------------------------------------------------------------------- gradients


def _fp64_layouts():
    return [s for s in sample_inputs("cpu", torch.float64) if s.x.numel() <= 2048]


@pytest.mark.parametrize("sample", _fp64_layouts(), ids=lambda s: s.name)
def test_gradcheck_every_layout(sample):
    x = sample.x.detach().clone().requires_grad_()
    b = sample.bias.detach().clone().requires_grad_()
    assert torch.autograd.gradcheck(torchtrt_swish.swish, (x, b))


@pytest.mark.parametrize("sample", _fp64_layouts()[:12], ids=lambda s: s.name)
def test_gradgradcheck(sample):
    x = sample.x.detach().clone().requires_grad_()
    b = sample.bias.detach().clone().requires_grad_()
    assert torch.autograd.gradgradcheck(torchtrt_swish.swish, (x, b))


def _assert_backward_close(x0: torch.Tensor, b0: torch.Tensor, g: torch.Tensor, label: str, fn=None) -> None:
    """dx and dbias of the op (or fn, e.g. a compiled wrapper of it) against fp64 autograd of the plain formula."""
    dtype = x0.dtype
    x = x0.detach().clone().requires_grad_()
    b = b0.detach().clone().requires_grad_()
    (fn or torchtrt_swish.swish)(x, b).backward(g)
    xd = x0.detach().to("cpu", torch.float64).requires_grad_()
    bd = b0.detach().to("cpu", torch.float64).requires_grad_()
    (xd * torch.sigmoid(xd) + bd).backward(g.to("cpu", torch.float64))
    eps = torch.finfo(dtype).eps
    sub = torch.finfo(dtype).smallest_normal * eps  # spacing of the subnormal range
    gabs = g.detach().to("cpu", torch.float64).abs()
    # dx: one rounding of g*f'(x) (half an ulp, one ulp allowed) plus a few fp32 ulps of g*|f'| (|f'| <= 1.1).
    tol_dx = eps * xd.grad.abs() + 16 * torch.finfo(torch.float32).eps * gabs + sub + 1e-300
    assert ((x.grad.double().cpu() - xd.grad).abs() <= tol_dx).all(), f"{label} {dtype} dx"
    # dbias: a sum of n terms accumulated in fp32 (any order), rounded once: n fp32 ulps of sum |g| + one ulp.
    n = max(x.numel() // max(b.numel(), 1), 1)
    gsum = gabs.sum_to_size(b.shape) if b.dim() <= x.dim() else gabs.sum()
    tol_db = (eps + n * torch.finfo(torch.float32).eps) * gsum + sub + 1e-300
    assert ((b.grad.double().cpu() - bd.grad).abs() <= tol_db).all(), f"{label} {dtype} dbias"


@pytest.mark.parametrize("device", DEVICES)
def test_backward_matches_fp64_reference(device):
    for dtype, s in _cases(device):
        g = torch.randn(s.x.shape, dtype=torch.float64).to(device=device, dtype=dtype)
        _assert_backward_close(s.x, s.bias, g, s.name)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,bshape", [((4096, 256), (1,)), *FUSED_BACKWARD_SHAPES])
def test_fused_backward_layouts_cuda(dtype, shape, bshape):
    """Shapes that exercise each fused-backward path (samples.FUSED_BACKWARD_SHAPES) and the unfused fallback."""
    x = torch.randn(shape, device="cuda", dtype=dtype) * 4
    b = torch.randn(bshape, device="cuda", dtype=dtype)
    _assert_backward_close(x, b, torch.randn_like(x), f"{shape}/{bshape}")
    # Misaligned (offset) views defeat 16-byte vectors: same answers through the scalar paths.
    flat = torch.randn(x.numel() + 1, device="cuda", dtype=dtype)
    _assert_backward_close(flat[1:].view(shape), b, torch.randn_like(x), f"offset {shape}/{bshape}")


@pytest.mark.cuda
@pytest.mark.parametrize("shape,bshape", [((8, 1152, 7, 7), (1152, 1, 1)), ((4100, 64, 16), (64, 1)),
                                          ((16384, 64), (64,)), ((1 << 20,), (1,))])
def test_backward_replayed_in_a_cuda_graph_gives_the_eager_bits(shape, bshape):
    """The column sums may start while the main kernel runs (a programmatic dependent launch) and wait for it before
    reading its partial sums. Captured in a CUDA graph and replayed on new gradients, dx and dbias are the bits of the
    eager call (both are deterministic), for the planes, columns and rows kernels and two column-sum stages
    ([4100, 64, 16]): a sum that read before the main kernel finished would carry the previous replay's partials.
    [8, 1152, 7, 7] takes the channels kernel, which writes dbias itself (no column sums)."""
    gen = torch.Generator().manual_seed(21)
    x = (torch.randn(shape, generator=gen) * 4).cuda()
    b = torch.randn(bshape, generator=gen).cuda()
    g = torch.randn(shape, generator=gen).cuda()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.ops.torchtrt_swish.swish_backward(g, x, b)  # warm-up on the capturing stream
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        got = torch.ops.torchtrt_swish.swish_backward(g, x, b)
    for k in range(3):
        g.copy_(torch.randn(shape, generator=gen) * (k + 1))
        graph.replay()
        want = torch.ops.torchtrt_swish.swish_backward(g, x, b)
        for name, a, e in zip(("dx", "dbias"), got, want):
            assert torch.equal(a, e), f"replay {k}: {name} differs from the eager call"


def test_backward_is_not_the_seed_sigmoid_derivative():
    """The seed returned g*s*(1-s); the right answer is g*s*(1+x*(1-s)). Catch a regression to the seed."""
    x = torch.tensor([2.0], requires_grad=True)
    torchtrt_swish.swish(x, torch.tensor([0.0])).backward()
    s = torch.sigmoid(torch.tensor(2.0, dtype=torch.float64))
    assert abs(x.grad.item() - float(s * (1 + 2 * (1 - s)))) < 1e-6
    assert abs(x.grad.item() - float(s * (1 - s))) > 0.5


# ----------------------------------------------------------------------------- forward AD and torch.func
#
# References are the same transforms applied to the plain formula F.silu(x) + b in fp64 on the CPU (PyTorch's own
# derivatives), never our kernels.


def _plain(x, b):
    return F.silu(x) + b


def _func_cases():
    """Small fp64 samples (Jacobians and Hessians are numel^2) over every bias layout, 0-d and views included."""
    return [s for s in sample_inputs("cpu", torch.float64) if 0 < s.x.numel() <= 256]


def _fp64_cpu(*ts):
    return tuple(t.detach().to("cpu", torch.float64) for t in ts)


@pytest.mark.parametrize("sample", _func_cases(), ids=lambda s: s.name)
def test_jvp_matches_fp64_reference(sample):
    """Tangent of y for tangents on x and bias, on x only, on bias only (issue 14: it was silently zero)."""
    x, b = sample.x, sample.bias
    tx, tb = torch.randn_like(x), torch.randn_like(b)
    for tangents in ((tx, tb), (tx, torch.zeros_like(b)), (torch.zeros_like(x), tb)):
        y, t = torch.func.jvp(torchtrt_swish.swish, (x, b), tangents)
        y_ref, t_ref = torch.func.jvp(_plain, (x, b), tangents)
        torch.testing.assert_close(y, y_ref)
        torch.testing.assert_close(t, t_ref)
        assert t.abs().sum() > 0


def test_forward_ad_dual_api_gives_the_tangent():
    """torch.autograd.forward_ad: the output's tangent exists and is dy = s (1 + x (1 - s)) dx + db."""
    import torch.autograd.forward_ad as fwAD

    x = torch.randn(4, 3, dtype=torch.float64)
    b = torch.randn(3, dtype=torch.float64)
    tx, tb = torch.randn_like(x), torch.randn_like(b)
    for with_bias_tangent in (False, True):
        with fwAD.dual_level():
            bias = fwAD.make_dual(b, tb) if with_bias_tangent else b
            t = fwAD.unpack_dual(torchtrt_swish.swish(fwAD.make_dual(x, tx), bias)).tangent
        assert t is not None
        s = torch.sigmoid(x)
        want = tx * s * (1 + x * (1 - s)) + (tb if with_bias_tangent else 0)
        torch.testing.assert_close(t, want)


@pytest.mark.parametrize("sample", _func_cases()[:8], ids=lambda s: s.name)
def test_jacfwd_jacrev_hessian_match_fp64_reference(sample):
    x, b = sample.x, sample.bias
    for transform in (torch.func.jacfwd, torch.func.jacrev):
        got = transform(torchtrt_swish.swish, argnums=(0, 1))(x, b)
        want = transform(_plain, argnums=(0, 1))(x, b)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)

    def loss(f):
        return lambda a, c: (f(a, c) ** 2).sum()  # second derivatives in x, in bias and across them

    got = torch.func.hessian(loss(torchtrt_swish.swish), argnums=(0, 1))(x, b)
    want = torch.func.hessian(loss(_plain), argnums=(0, 1))(x, b)
    for g_row, w_row in zip(got, want):
        for g, w in zip(g_row, w_row):
            torch.testing.assert_close(g, w)


@pytest.mark.parametrize("sample", _func_cases()[:8], ids=lambda s: s.name)
def test_grad_and_per_sample_grads_match_fp64_reference(sample):
    """torch.func.grad, and vmap(grad) with a per-example bias and with a shared bias."""
    x, b = sample.x, sample.bias

    def loss(f):
        return lambda a, c: (f(a, c) * torch.arange(1.0, a.numel() + 1, dtype=a.dtype).view(a.shape)).sum()

    for g, w in zip(torch.func.grad(loss(torchtrt_swish.swish), argnums=(0, 1))(x, b),
                    torch.func.grad(loss(_plain), argnums=(0, 1))(x, b)):
        torch.testing.assert_close(g, w)
    xs = torch.stack([x, 0.5 * x, -x])
    bs = torch.stack([b, 2 * b, b - 1])
    for in_dims, bias in (((0, 0), bs), ((0, None), b)):
        got = torch.func.vmap(torch.func.grad(loss(torchtrt_swish.swish), argnums=(0, 1)), in_dims=in_dims)(xs, bias)
        want = torch.func.vmap(torch.func.grad(loss(_plain), argnums=(0, 1)), in_dims=in_dims)(xs, bias)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)


@pytest.mark.parametrize("sample", _func_cases()[:8], ids=lambda s: s.name)
def test_vmap_and_reverse_over_forward(sample):
    x, b = sample.x, sample.bias
    xs, bs = torch.stack([x, -x]), torch.stack([b, b + 1])
    torch.testing.assert_close(torch.func.vmap(torchtrt_swish.swish)(xs, bs), torch.func.vmap(_plain)(xs, bs))
    torch.testing.assert_close(torch.func.vmap(torchtrt_swish.swish, in_dims=(None, 0))(x, bs),
                               torch.func.vmap(_plain, in_dims=(None, 0))(x, bs))
    t = torch.randn_like(x)

    def jvp_sum(f):
        return lambda a: torch.func.jvp(lambda u: f(u, b), (a,), (t,))[1].sum()

    torch.testing.assert_close(torch.func.grad(jvp_sum(torchtrt_swish.swish))(x), torch.func.grad(jvp_sum(_plain))(x))


@pytest.mark.parametrize("sample", _fp64_layouts()[:12], ids=lambda s: s.name)
def test_gradcheck_forward_mode_and_batched(sample):
    """Finite differences against forward AD, vmapped grads and forward-over-reverse, including the bias."""
    x = sample.x.detach().clone().requires_grad_()
    b = sample.bias.detach().clone().requires_grad_()
    assert torch.autograd.gradcheck(torchtrt_swish.swish, (x, b), check_forward_ad=True, check_batched_grad=True,
                                    check_batched_forward_grad=True)
    assert torch.autograd.gradgradcheck(torchtrt_swish.swish, (x, b), check_fwd_over_rev=True,
                                        check_batched_grad=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_ad_and_func_transforms_low_precision(device, dtype):
    """jvp (tangent computed in fp32 and rounded once), jacrev and vmap(grad) against the fp64 CPU reference."""
    x = (torch.randn(4, 6, 5, dtype=torch.float64) * 4).to(device, dtype)
    b = torch.randn(6, 1, dtype=torch.float64).to(device, dtype)
    tx, tb = torch.randn_like(x), torch.randn_like(b)
    y, t = torch.func.jvp(torchtrt_swish.swish, (x, b), (tx, tb))
    _, t_ref = torch.func.jvp(_plain, _fp64_cpu(x, b), _fp64_cpu(tx, tb))
    # One rounding in the output type, plus a few fp32 roundings of terms up to |tx| (1 + |x|) and |tb|.
    xd, txd, tbd = _fp64_cpu(x, tx, tb)
    tol = (torch.finfo(dtype).eps * t_ref.abs()
           + 8 * torch.finfo(torch.float32).eps * (txd.abs() * (1 + xd.abs()) + tbd.abs()))
    assert ((t.double().cpu() - t_ref).abs() <= tol + 1e-30).all()
    if dtype == torch.float32:
        jx, jb = torch.func.jacrev(torchtrt_swish.swish, argnums=(0, 1))(x, b)
        jx_ref, jb_ref = torch.func.jacrev(_plain, argnums=(0, 1))(*_fp64_cpu(x, b))
        torch.testing.assert_close(jx.double().cpu(), jx_ref, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(jb.double().cpu(), jb_ref, rtol=1e-5, atol=1e-6)
        xs, bs = torch.stack([x, -x]), torch.stack([b, b + 1])
        loss = lambda f: lambda a, c: (f(a, c) ** 2).sum()  # noqa: E731
        got = torch.func.vmap(torch.func.grad(loss(torchtrt_swish.swish), argnums=(0, 1)))(xs, bs)
        want = torch.func.vmap(torch.func.grad(loss(_plain), argnums=(0, 1)))(*_fp64_cpu(xs, bs))
        for g, w in zip(got, want):
            torch.testing.assert_close(g.double().cpu(), w, rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------- dbias: same bits on any thread count

# The case (scalar bf16 bias over [64, 16, 32, 32] gave 720/720/724 on 1/2/3 threads) and each reduction
# shape: dim-1 per-channel, last-dim per-channel, rows of a long inner run, a materialized block, 0-d, full.
BIAS_GRAD_SHAPES = [((64, 16, 32, 32), (1,)), ((64, 16, 32, 32), (16, 1, 1)), ((512, 300), (300,)),
                    ((3, 5, 40000), (5, 1)), ((8, 6, 40, 50), (6, 1, 50)), ((2, 70001), ()), ((400, 301), (400, 301))]


@pytest.mark.parametrize("shape,bshape", BIAS_GRAD_SHAPES, ids=str)
def test_bias_grad_same_bits_for_any_thread_count(shape, bshape):
    """dbias on the CPU: identical bits with 1, 2, 3 and 4 threads, and the fp64 sum rounded once."""
    gen = torch.Generator().manual_seed(14)
    g64 = torch.randn(shape, generator=gen, dtype=torch.float64) + 0.25  # a mean, so sums grow and round
    x64 = torch.randn(shape, generator=gen, dtype=torch.float64)
    threads = torch.get_num_threads()
    try:
        for dtype in (torch.bfloat16, torch.float16, torch.float32, torch.float64):
            g, x = g64.to(dtype), x64.to(dtype)
            b = torch.zeros(bshape, dtype=dtype)
            results = []
            for n in (1, 2, 3, 4):
                torch.set_num_threads(n)
                results.append(torch.ops.torchtrt_swish.swish_backward(g, x, b)[1])
            for r in results[1:]:
                assert torch.equal(r, results[0]), f"{dtype}: dbias differs with the thread count"
            gd = g.double()
            want = gd.sum_to_size(bshape) if bshape else gd.sum()
            n_terms = max(g.numel() // max(b.numel(), 1), 1)
            # Correctly rounded up to the fp64 accumulation error: half an output ulp (one allowed).
            tol = (torch.finfo(dtype).eps * want.abs() + n_terms * torch.finfo(torch.float64).eps
                   * gd.abs().sum_to_size(bshape if bshape else ()) + torch.finfo(dtype).tiny)
            got = results[0].double()
            fits = want.abs() <= torch.finfo(dtype).max  # a larger sum rounds to inf of its sign
            assert ((got - want).abs() <= tol)[fits].all(), dtype
            assert torch.equal(got[~fits], want[~fits].sign() * float("inf")), dtype
    finally:
        torch.set_num_threads(threads)


# ----------------------------------------------------------------------------- TorchScript


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning")
def test_torchscript_scripting_matches_eager():
    """torch.jit.script compiles swish() and EfficientSwish; outputs and gradients equal the eager ones."""
    scripted = torch.jit.script(torchtrt_swish.swish)
    x = torch.randn(2, 3, 4, 5)
    b = torch.randn(3, 1, 1)
    assert torch.equal(scripted(x, b), torchtrt_swish.swish(x, b))
    assert torch.equal(scripted(x, 0.5), torchtrt_swish.swish(x, 0.5))
    eager = torchtrt_swish.EfficientSwish(0.5, bias_shape=(3, 1, 1))
    module = torch.jit.script(torchtrt_swish.EfficientSwish(0.5, bias_shape=(3, 1, 1)))
    xe, xs = x.clone().requires_grad_(), x.clone().requires_grad_()
    ye, ys = eager(xe), module(xs)
    assert torch.equal(ye, ys)
    g = torch.randn_like(ye)
    ye.backward(g)
    ys.backward(g)
    assert torch.equal(xe.grad, xs.grad) and torch.equal(eager.bias.grad, module.bias.grad)


# ----------------------------------------------------------------------------- property-based


@st.composite
def _case(draw):
    rank = draw(st.integers(0, 4))
    shape = draw(st.lists(st.integers(0, 6), min_size=rank, max_size=rank))
    layout = draw(st.sampled_from(["scalar", "scalar0d", "dim1", "last", "full", "random"]))
    if layout == "scalar":
        bshape = [1] if rank >= 1 else []
    elif layout == "scalar0d":
        bshape = []
    elif layout == "dim1" and rank >= 2:
        bshape = [shape[1]] + [1] * (rank - 2)
    elif layout == "last" and rank >= 1:
        bshape = [shape[-1]]
    elif layout == "full":
        bshape = list(shape)
    else:  # any broadcastable shape: drop leading dims, set some to 1
        keep = draw(st.integers(0, rank))
        bshape = [d if draw(st.booleans()) else 1 for d in shape[rank - keep:]]
    dtype = draw(st.sampled_from([torch.float32, torch.float16, torch.bfloat16]))
    seed = draw(st.integers(0, 2**31 - 1))
    return shape, bshape, dtype, seed


def _check_property(device, case):
    shape, bshape, dtype, seed = case
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g, dtype=torch.float64) * 6).to(device=device, dtype=dtype)
    b = torch.randn(bshape, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)
    _assert_close_to_reference(torchtrt_swish.swish(x, b), x, b)
    if x.numel() > 0:
        gr = torch.randn(shape, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)
        _assert_backward_close(x, b, gr, f"{shape}/{bshape}")


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_case())
def test_property_random_shapes_layouts_dtypes_cpu(case):
    _check_property("cpu", case)


@pytest.mark.cuda
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_case())
def test_property_random_shapes_layouts_dtypes_cuda(case):
    _check_property("cuda", case)


# ----------------------------------------------------------------------------- bad inputs


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,name", [(torch.int32, "Int"), (torch.bool, "Bool"), (torch.complex64, "ComplexFloat"),
                                        (torch.int64, "Long")])
def test_rejects_non_float_x(device, dtype, name):
    x = torch.ones(4, dtype=dtype, device=device)
    with pytest.raises(RuntimeError, match=rf"expected x of dtype float32, float16 or bfloat16.*got {name}"):
        torchtrt_swish.swish(x, torch.ones(1, dtype=dtype, device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_rejects_bias_of_other_dtype(device):
    x = torch.ones(4, device=device)
    with pytest.raises(RuntimeError, match=r"bias of the same dtype as x \(Float\), got Half"):
        torchtrt_swish.swish(x, torch.ones(1, dtype=torch.float16, device=device))


def test_rejects_bias_on_other_device_meta():
    with pytest.raises(RuntimeError, match=r"bias on the same device as x \(cpu\), got meta"):
        torchtrt_swish.swish(torch.ones(4), torch.ones(1, device="meta"))


@pytest.mark.cuda
def test_rejects_bias_on_other_device_cuda():
    with pytest.raises(RuntimeError, match=r"bias on the same device as x \(cuda:0\), got cpu"):
        torchtrt_swish.swish(torch.ones(4, device="cuda"), torch.ones(1))


@pytest.mark.cuda
def test_rejects_float64_on_cuda():
    with pytest.raises(RuntimeError, match=r"float64 is supported on CPU only"):
        torchtrt_swish.swish(torch.ones(4, device="cuda", dtype=torch.float64),
                             torch.ones(1, device="cuda", dtype=torch.float64))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("xs,bs", [((4, 3), (2,)), ((2, 3, 4), (3, 3)), ((5,), (2, 5)), ((), (1,)), ((3,), (1, 1)),
                                   ((1, 3), (0, 3))])
def test_rejects_bias_that_does_not_broadcast_or_changes_shape(device, xs, bs):
    x = torch.ones(xs, device=device)
    b = torch.ones(bs, device=device)
    with pytest.raises(RuntimeError, match=r"expected bias broadcastable to x without changing x's shape, got bias"):
        torchtrt_swish.swish(x, b)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("xs,bs", [((4, 3), (5,)), ((3,), (2, 3)), ((2, 3, 4), (3, 3)), ((3,), (1, 1)),
                                   ((4, 3), (4, 1, 1))])
@pytest.mark.parametrize("channels_last", [False, True])
def test_backward_op_rejects_bias_that_does_not_broadcast(device, xs, bs, channels_last):
    """The public swish_backward refuses what the forward refuses, on every device and in eager and fake mode alike
    (it returned a dbias summed from the wrong elements, or zeros, on the CPU and raised length_error on CUDA)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    if channels_last:
        xs = (2, 3, 4, 5)
        bs = (4, 1, 1) if len(bs) == 3 else (3, 1, 1, 1)
    x = torch.ones(xs, device=device)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    b = torch.ones(bs, device=device)
    message = r"swish_backward: expected bias broadcastable to x without changing x's shape, got bias \["
    with pytest.raises(RuntimeError, match=message):
        torch.ops.torchtrt_swish.swish_backward(torch.ones_like(x), x, b)
    with FakeTensorMode():
        with pytest.raises(RuntimeError, match=message):
            torch.ops.torchtrt_swish.swish_backward(torch.ones(xs), torch.ones(xs), torch.ones(bs))


@pytest.mark.parametrize("xs,bs", [((4, 3), (2,)), ((5,), (2, 5))])
def test_fake_kernel_rejects_the_same_inputs(xs, bs):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        with pytest.raises(RuntimeError, match=r"broadcastable to x without changing x's shape"):
            torchtrt_swish.swish(torch.ones(xs), torch.ones(bs))


def test_python_number_bias():
    x = torch.randn(10)
    torch.testing.assert_close(torchtrt_swish.swish(x, 3.15), F.silu(x) + 3.15)


# ----------------------------------------------------------------------------- build facts


def test_cuda_kernels_compiled_when_nvcc_present():
    """CI has nvcc and a CUDA torch but no GPU: the CUDA impl must still be compiled and registered."""
    from tools_native import nvcc_available

    has_cuda_impl = torch._C._dispatch_has_kernel_for_dispatch_key("torchtrt_swish::swish", "CUDA")
    if nvcc_available() and torch.version.cuda is not None:
        assert has_cuda_impl
    else:
        pytest.skip("no nvcc or CPU-only torch: the CUDA impl is legitimately absent")


# ----------------------------------------------------------------------------- forward launch shapes


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", [1, 16, 256])
def test_forward_launch_shapes_agree_cuda(dtype, channels):
    """Every forward launch shape gives the fp64-close answer and the same bits for the same elements.

    2^20 elements is the largest fp16/bf16 tensor of the 8-byte-pack kernel and the largest fp32 one of the
    one-pack kernel; 2^20 + 2048 takes the one-pack kernel with 16-byte packs (fp16/bf16) or the two-pack one (fp32),
    2^22 + 256 the two-pack one; 2^20 + 3 with a scalar bias adds the scalar tail kernel. x is viewed as rows of
    `channels` (bias on the last dim) or of 256 (scalar bias). The element math does not depend on the launch shape, so
    the first 2^20 outputs must be the same bits in every case.
    """
    small = 1 << 20
    flat = torch.randn((1 << 22) + 256, device="cuda", dtype=dtype) * 4
    b = torch.randn(channels, device="cuda", dtype=dtype)
    width = 256 if channels == 1 else channels
    outs = []
    for n in (small, small + 2048, flat.numel()):
        x = flat[:n].view(-1, width)
        y = torchtrt_swish.swish(x, b)
        _assert_close_to_reference(y, x, b)
        outs.append(y.reshape(-1)[:small])
    if channels == 1:
        y = torchtrt_swish.swish(flat[: small + 3], b)
        _assert_close_to_reference(y, flat[: small + 3], b)
        outs.append(y[:small])
    bits = {4: torch.int32, 2: torch.int16}[flat.element_size()]
    for y in outs[1:]:
        assert torch.equal(y.view(bits), outs[0].view(bits))


@pytest.mark.cuda
@pytest.mark.parametrize("plane", [10, 16], ids=["two_channel", "uniform"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_dim1_packs_either_side_of_the_one_pack_limit_cuda(dtype, plane):
    """Planes of 10 elements (packs that span two channels) and of 16 (a channel per pack) on both sides of the
    largest tensor that runs one pack per thread (2^20 packs for bf16 two-channel packs, 2^18 for the others): the
    fp64-close answer, and the same bits for the samples both tensors hold."""
    vec = 16 // torch.empty(0, dtype=dtype).element_size()
    limit = (1 << 20) if dtype == torch.bfloat16 and plane == 10 else (1 << 18)
    per_sample = 4 * plane
    below = limit * vec // per_sample
    assert below * per_sample <= limit * vec < (below + 1) * per_sample
    x = (torch.randn(below + 1, 4, plane, device="cuda") * 4).to(dtype)
    b = torch.randn(4, 1, device="cuda", dtype=dtype)
    ys = []
    for xs in (x[:below], x):
        y = torchtrt_swish.swish(xs, b)
        _assert_close_to_reference(y, xs, b)
        ys.append(y[:below])
    bits = {4: torch.int32, 2: torch.int16}[x.element_size()]
    assert torch.equal(ys[0].view(bits), ys[1].view(bits))


# ----------------------------------------------------------------------------- 64-bit indexing


def _assert_rows_past(limit: int, sample: tuple, bshape: tuple, below: bool = False) -> None:
    """fp16 x of [rows, *sample] with just over `limit` elements (below: the most rows within it): the first and last
    rows and random ones between get the right value and the right channel's bias."""
    per_row = math.prod(sample)
    rows = limit // per_row if below else limit // per_row + 2
    n = rows * per_row
    free, _ = torch.cuda.mem_get_info()
    if free < 2 * n * 2 + (1 << 30):
        pytest.skip(f"needs {2 * n * 2 / 2**30:.1f} GiB of free GPU memory, {free / 2**30:.1f} GiB free")
    x = torch.empty((rows, *sample), device="cuda", dtype=torch.float16).uniform_(-8, 8)
    b = torch.randn(bshape, device="cuda", dtype=torch.float16)
    y = torchtrt_swish.swish(x, b)
    torch.cuda.synchronize()
    pick = torch.cat([torch.arange(0, 4), torch.randint(0, rows, (64,)), torch.arange(rows - 4, rows)])
    _assert_close_to_reference(y[pick.cuda()].cpu(), x[pick.cuda()].cpu(), b.cpu())
    assert (pick.max() + 1) * per_row > limit - (per_row if below else 0)
    del x, y
    torch.cuda.empty_cache()


@pytest.mark.cuda
@pytest.mark.parametrize("layout", ["scalar", "per_channel_last"])
def test_more_than_2_pow_31_elements(layout):
    """Elements past index 2^31 get the right value and the right channel's bias (64-bit indexing)."""
    c = 4099  # odd row length: the bias period does not align with 2^31 or with 16-byte packs
    _assert_rows_past(1 << 31, (c,), (1,) if layout == "scalar" else (c,))


@pytest.mark.cuda
@pytest.mark.parametrize("limit,below", [(1 << 31, True), (1 << 31, False), (1 << 32, False)],
                         ids=["just_below_2^31", "just_past_2^31", "past_2^32"])
@pytest.mark.parametrize("sample,bshape", [((4104,), (4104,)), ((3, 16), (3, 1)), ((5, 49), (5, 1))],
                         ids=["last_dim", "uniform_packs", "two_channel_packs"])
def test_the_dividing_modes_either_side_of_2_pow_31_elements(sample, bshape, limit, below):
    """The forward's per-pack bias lookups take 32-bit index math up to 2^31 elements (fwdNarrow: FastDiv::div31 at
    its largest dividends just below), 64-bit past it and past 2^32."""
    _assert_rows_past(limit, sample, bshape, below)


# ----------------------------------------------------------------------------- every fp32 input


def _every_fp32(chunk: int):
    """All 2^32 fp32 bit patterns (NaNs, infinities, subnormals, signed zeros included), `chunk` at a time."""
    for lo in range(-(1 << 31), 1 << 31, chunk):
        yield torch.arange(lo, lo + chunk, dtype=torch.int32, device="cuda").view(torch.float32)


def _first_mismatch(got: torch.Tensor, want: torch.Tensor, x: torch.Tensor) -> str:
    """'' when got and want are the same bits (any NaN matching any NaN), else the first offending input."""
    same = (got.view(torch.int32) == want.view(torch.int32)) | (got.isnan() & want.isnan())
    if bool(same.all()):
        return ""
    i = int((~same).nonzero()[0])
    return (f"{int((~same).sum())} inputs differ; first x = {x[i].item()!r} (bits {x.view(torch.int32)[i].item():#x}): "
            f"got {got[i].item()!r}, want {want[i].item()!r}")


@pytest.mark.cuda
@pytest.mark.parametrize("bias", [0.375, -0.0])
def test_fp32_forward_every_input_matches_pytorch(bias):
    """The fp32 forward divides without a branch per element (a shared fast path, one range check per pack):
    for every one of the 2^32 fp32 inputs it must give exactly F.silu(x) + b. 0.375 makes most additions
    inexact; -0.0 leaves the quotient itself in the output (tiny |x| and signed zeros included), which an
    inexact addition would round away."""
    b = torch.tensor([bias], device="cuda")
    for x in _every_fp32(1 << 28):
        msg = _first_mismatch(torchtrt_swish.swish(x, b), F.silu(x) + b, x)
        assert not msg, msg


@pytest.mark.cuda
def test_fp32_backward_every_input_matches_pytorch():
    """dx of the fused fp32 backward (exact reciprocal without a branch per element) for every fp32 x is
    exactly PyTorch's silu_backward."""
    gen = torch.Generator(device="cuda").manual_seed(6)
    b = torch.zeros(1, device="cuda")
    for x in _every_fp32(1 << 28):
        g = torch.randn(x.shape, device="cuda", generator=gen)
        dx, _ = torch.ops.torchtrt_swish.swish_backward(g, x, b)
        msg = _first_mismatch(dx, torch.ops.aten.silu_backward(g, x), x)
        assert not msg, msg


# ----------------------------------------------------------------------------- every fp16 / bf16 input


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_every_input_cuda(dtype):
    """All 2^16 bit patterns of the type as x, forward and backward, with a zero, a negative zero, an inexact and a
    per-channel bias, against the fp64 reference (exactly F.silu(x) + b where that is not finite or x < -88.72).

    The half-type kernels take the reciprocal from the hardware estimate alone except in packs with a denominator
    above 2^126 (x < -87.3), whose reciprocal is subnormal; bf16 results there are nonzero, and only the exact
    path gets them (flushed, they would be off by the whole value)."""
    x = torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32).to(torch.int16).view(dtype).cuda().view(256, 256)
    assert ((x.float() > -88.7) & (x.float() < -87.3)).any()
    finite = x.isfinite()
    gen = torch.Generator(device="cuda").manual_seed(16)
    for b in (torch.tensor([0.0]), torch.tensor([-0.0]), torch.tensor([0.375]), torch.randn(256)):
        b = b.to("cuda", dtype)
        for xs in (x, x.repeat(33, 1)):  # the 8-byte-pack kernel; the large one (two 16-byte packs per thread)
            y = torchtrt_swish.swish(xs, b)
            want = (F.silu(xs.float()) + b.float()).to(dtype)
            # Below -88.72 exp(-x) overflows fp32 and silu is -0 (PyTorch's too), although bf16 could hold it.
            ok = want.isfinite() & (xs.float() >= -88.72)
            _assert_close_to_reference(y[ok], xs[ok], b.expand_as(xs)[ok])
            assert torch.equal(y[~ok].isnan(), want[~ok].isnan())
            rest = ~ok & ~want.isnan()
            assert torch.equal(y[rest], want[rest])
        g = torch.randn(x.shape, device="cuda", generator=gen).to(dtype)
        _assert_backward_close(torch.where(finite, x, 0), b, torch.where(finite, g, 0), f"bias {b.numel()}")


# ----------------------------------------------------------------------------- channels_last memory

# (x shape, memory format, bias shape): every bias layout on channels_last (3d) memory, which the kernels stream as
# [N*H*W, C] (a per-channel bias becomes a last-dim one); a bias that is not one block there is materialized.
CL = torch.channels_last
CL3 = torch.channels_last_3d
CHANNELS_LAST_CASES = [
    ((2, 8, 5, 5), CL, (8, 1, 1)), ((2, 8, 5, 5), CL, (1, 8, 1, 1)), ((2, 8, 5, 5), CL, (1,)),
    ((2, 8, 5, 5), CL, ()), ((2, 8, 5, 5), CL, (2, 8, 5, 5)), ((2, 8, 5, 5), CL, (8, 5, 5)),
    ((2, 8, 5, 5), CL, (5, 1)), ((2, 8, 5, 5), CL, (5,)), ((2, 8, 5, 5), CL, (2, 8, 1, 5)),
    ((3, 33, 7, 9), CL, (33, 1, 1)), ((2, 1, 5, 5), CL, (1, 1, 1)), ((2, 8, 1, 1), CL, (8, 1, 1)),
    ((2, 6, 3, 4, 5), CL3, (6, 1, 1, 1)), ((2, 6, 3, 4, 5), CL3, (1,)), ((2, 6, 3, 4, 5), CL3, (2, 6, 3, 4, 5)),
    ((2, 6, 3, 4, 5), CL3, (4, 1)),
]
CL_IDS = [f"{list(xs)}-{str(f).split('.')[-1]}-bias{list(bs)}" for xs, f, bs in CHANNELS_LAST_CASES]


def _cl_inputs(shape, fmt, bshape, dtype, device="cpu", seed=15):
    """x in fmt and a contiguous bias, values spread over swish's interesting range."""
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=gen, dtype=torch.float64) * 4).to(device, dtype).contiguous(memory_format=fmt)
    b = torch.randn(bshape, generator=gen, dtype=torch.float64).to(device, dtype)
    return x, b, gen


def _assert_format(t: torch.Tensor, x: torch.Tensor, label: str) -> None:
    """t laid out as the op promises for input x (same strides as x when x is dense channels_last)."""
    fmt = _expected_format(x)
    assert t.is_contiguous(memory_format=fmt), f"{label}: strides {t.stride()} not {fmt}"
    if fmt != torch.contiguous_format:
        assert t.stride() == x.stride(), f"{label}: strides {t.stride()} vs x {x.stride()}"


@pytest.mark.parametrize("shape,fmt,bshape", CHANNELS_LAST_CASES, ids=CL_IDS)
def test_channels_last_forward_keeps_format_and_matches_fp64(shape, fmt, bshape):
    """y keeps x's channels_last format and equals F.silu(x) + b computed in fp64, every dtype."""
    for dtype in (*DTYPES, torch.float64):
        x, b, _ = _cl_inputs(shape, fmt, bshape, dtype)
        y = torchtrt_swish.swish(x, b)
        _assert_format(y, x, f"{dtype}")
        want = F.silu(x.double()) + b.double()
        err = (y.double() - want).abs()
        assert (err <= tolerance(x, b, dtype)).all(), f"{dtype}: worst err {err.max().item():.3e}"


@pytest.mark.parametrize("shape,fmt,bshape", CHANNELS_LAST_CASES, ids=CL_IDS)
def test_channels_last_backward_keeps_format_and_matches_fp64(shape, fmt, bshape):
    """dx keeps x's format whatever g's format is; dx and dbias match fp64 autograd; dbias is bias-shaped."""
    for dtype in (*DTYPES, torch.float64):
        x, b, gen = _cl_inputs(shape, fmt, bshape, dtype)
        g0 = torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
        for g in (g0.contiguous(), g0.contiguous(memory_format=fmt)):
            label = f"{dtype} g strides {g.stride()}"
            dx, db = torch.ops.torchtrt_swish.swish_backward(g, x, b)
            _assert_format(dx, x, label)
            assert db.shape == b.shape and db.is_contiguous(), label
            # Same values as the contiguous path (the formula does not depend on the layout) ...
            dx_c, db_c = torch.ops.torchtrt_swish.swish_backward(g.contiguous(), x.contiguous(), b)
            assert torch.equal(dx, dx_c), label
            if dtype != torch.float64:  # both are an fp64 sum (in another order) rounded once to dtype
                torch.testing.assert_close(db, db_c, rtol=0, atol=0)
            # ... and fp64 autograd of the plain formula, through the op's autograd.
            _assert_backward_close(x, b, g, label)
            xr = x.detach().clone().requires_grad_()
            torchtrt_swish.swish(xr, b).backward(g)
            _assert_format(xr.grad, x, label)


@pytest.mark.parametrize("shape,fmt,bshape", [c for c in CHANNELS_LAST_CASES if c[2] in ((8, 1, 1), (33, 1, 1))])
def test_channels_last_dbias_same_bits_for_any_thread_count(shape, fmt, bshape):
    """The per-channel dbias over channels_last memory is the same on 1-4 threads."""
    x, b, gen = _cl_inputs((4, *shape[1:]), fmt, bshape, torch.bfloat16)
    g = (torch.randn(x.shape, generator=gen) + 0.25).to(torch.bfloat16).contiguous(memory_format=fmt)
    threads = torch.get_num_threads()
    try:
        results = []
        for n in (1, 2, 3, 4):
            torch.set_num_threads(n)
            results.append(torch.ops.torchtrt_swish.swish_backward(g, x, b)[1])
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(r, results[0]) for r in results[1:])


def test_channels_last_not_dense_falls_back_to_contiguous():
    """A sliced channels_last x (not dense) gives a contiguous output with the right values; opcheck agrees."""
    x, b, _ = _cl_inputs((2, 8, 6, 6), CL, (8, 1, 1), torch.float32)
    xs = x[:, :, ::2, 1:]
    y = torchtrt_swish.swish(xs, b)
    assert y.is_contiguous()
    torch.testing.assert_close(y.double(), F.silu(xs.double()) + b.double(), rtol=1e-6, atol=1e-6)
    torch.library.opcheck(torch.ops.torchtrt_swish.swish.default, (xs, b))


@pytest.mark.parametrize("shape,fmt,bshape", CHANNELS_LAST_CASES[::3], ids=CL_IDS[::3])
def test_channels_last_opcheck(shape, fmt, bshape):
    """Fake kernels report the real kernels' strides (opcheck compares them), forward and backward."""
    x, b, gen = _cl_inputs(shape, fmt, bshape, torch.float32)
    torch.library.opcheck(torch.ops.torchtrt_swish.swish.default,
                          (x.clone().requires_grad_(), b.clone().requires_grad_()))
    g = torch.randn(shape, generator=gen)  # contiguous g with channels_last x
    torch.library.opcheck(torch.ops.torchtrt_swish.swish_backward.default, (g, x, b))
    torch.library.opcheck(torch.ops.torchtrt_swish.swish_backward.default,
                          (g.contiguous(memory_format=fmt), x, b))


@pytest.mark.parametrize("shape,fmt", [((2, 8, 5, 5), CL), ((2, 6, 3, 4, 5), CL3)])
def test_channels_last_export_and_compile(shape, fmt):
    """torch.export keeps the op on channels_last input; torch.compile (eager backend: the op itself; inductor: its
    decomposition) keeps the format and the values, forward and backward."""
    x, b, gen = _cl_inputs(shape, fmt, (shape[1],) + (1,) * (len(shape) - 2), torch.float32)
    m = torchtrt_swish.EfficientSwish(0.0, bias_shape=tuple(b.shape))
    with torch.no_grad():
        m.bias.copy_(b)
    ep = torch.export.export(m, (x,))
    nodes = [n for n in ep.graph_module.graph.nodes if n.target == torch.ops.torchtrt_swish.swish.default]
    assert len(nodes) == 1
    assert nodes[0].meta["val"].stride() == x.stride()
    want = F.silu(x.double()) + b.double()
    y = ep.module()(x)
    _assert_format(y, x, "export")
    torch.testing.assert_close(y.double(), want, rtol=1e-6, atol=1e-6)
    g = torch.randn(shape, generator=gen)
    for backend in ("eager", "inductor"):
        torch._dynamo.reset()
        xr = x.clone().requires_grad_()
        y = torch.compile(m, backend=backend, fullgraph=True)(xr)
        _assert_format(y, x, backend)
        torch.testing.assert_close(y.double(), want, rtol=1e-6, atol=1e-6)
        y.backward(g)
        _assert_backward_close(x, b, g, backend, fn=lambda a, c: torch.compile(
            torchtrt_swish.swish, backend=backend, fullgraph=True)(a, c))


# ----------------------------------------------------------------------------- host cost: no ops of our own


def _aten_ops_inside(fn) -> list[str]:
    """Names of the aten ops that run while fn() runs (torch.profiler, CPU events)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return [e.name for e in prof.events() if e.name.startswith("aten::")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fmt", [torch.contiguous_format, torch.channels_last], ids=["contiguous", "channels_last"])
def test_per_channel_call_makes_no_view_ops(device, fmt):
    """A conv activation with a [C, 1, 1] bias, in either layout, reaches its kernels without a view, permute or
    reshape: in a network each of those is a dispatched op on every call, host time that plain F.silu(x) + b does
    not spend (the channels_last bias is already in the kernels' order). On CUDA the outputs are allocated without
    the dispatcher too, forward and backward, so the op makes no aten call at all."""
    x = torch.randn(4, 8, 5, 6, device=device).contiguous(memory_format=fmt)
    b = torch.randn(8, 1, 1, device=device)
    g = torch.randn(x.shape, device=device).contiguous(memory_format=fmt)
    torchtrt_swish.swish(x, b)  # first calls (library loading, caches) out of the trace
    torch.ops.torchtrt_swish.swish_backward(g, x, b)
    banned = ("aten::view", "aten::permute", "aten::reshape", "aten::as_strided", "aten::_reshape_alias")
    calls = {"forward": lambda: torchtrt_swish.swish(x, b)}
    if device == "cuda":
        banned += ("aten::empty", "aten::empty_strided")
        calls["backward"] = lambda: torch.ops.torchtrt_swish.swish_backward(g, x, b)
    for what, fn in calls.items():
        seen = [n for n in _aten_ops_inside(fn) if n.startswith(banned)]
        assert not seen, f"{what} on {device}, {fmt}: {seen}"
