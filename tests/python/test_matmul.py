"""Native matrix products against CPU PyTorch: mm, addmm, bmm, baddbmm, addbmm, matmul and linear,
with transposed and sliced operands, half types, integers, out=, and shape errors; and
triangular solves (linalg.solve_triangular) and pairwise distances (cdist) with their gradients."""

import pytest
import torch

import torchneuron
from tolerances import assert_close, rounding_step


def sample(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-4, 5, shape, generator=g).to(dtype)


def assert_same(device_result, cpu_result):
    actual = device_result.cpu()
    assert actual.dtype == cpu_result.dtype and actual.shape == cpu_result.shape
    if cpu_result.dtype in (torch.bfloat16, torch.float16):
        # CPU rounds partial products (each batch's, in addbmm) to the half type before summing
        # them: its error is a rounding step of the largest term, not of each result.
        assert_close(actual, cpu_result, atol=rounding_step(cpu_result))
    elif cpu_result.is_floating_point():
        # Loosened for float32 (and float64 by the same factor): the blocked product sums in
        # another order than CPU's BLAS.
        assert_close(actual, cpu_result, atol=1e-4, rtol=1e-5)
    else:
        assert torch.equal(actual, cpu_result)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64], ids=str)
def test_mm_layouts(dtype, no_fallback):
    a, b = sample((7, 5), dtype), sample((5, 9), dtype, 1)
    da, db = a.to("neuron"), b.to("neuron")
    assert_same(da @ db, a @ b)
    assert_same(da.t().contiguous().t() @ db, a @ b)       # column-major left operand
    assert_same(db.t() @ da.t(), b.t() @ a.t())             # both transposed views
    big = sample((9, 12), dtype, 2)
    assert_same(big.to("neuron")[:, ::2] @ db.t()[:6], big[:, ::2] @ b.t()[:6])  # strided: copied


def test_addmm_baddbmm_and_linear(no_fallback):
    bias, a, b = sample((9,), torch.float32), sample((7, 5), torch.float32, 1), sample((5, 9), torch.float32, 2)
    assert_same(torch.addmm(bias.to("neuron"), a.to("neuron"), b.to("neuron"), beta=0.5, alpha=2.0),
                torch.addmm(bias, a, b, beta=0.5, alpha=2.0))
    x, w = sample((3, 4, 5), torch.float32, 3), sample((6, 5), torch.float32, 4)
    assert_same(torch.nn.functional.linear(x.to("neuron"), w.to("neuron"), bias[:6].to("neuron")),
                torch.nn.functional.linear(x, w, bias[:6]))
    b1, b2, c = sample((4, 3, 5), torch.float32, 5), sample((4, 5, 2), torch.float32, 6), sample((4, 3, 2), torch.float32, 7)
    assert_same(torch.bmm(b1.to("neuron"), b2.to("neuron")), torch.bmm(b1, b2))
    assert_same(torch.baddbmm(c.to("neuron"), b1.to("neuron"), b2.to("neuron"), beta=2, alpha=0.5),
                torch.baddbmm(c, b1, b2, beta=2, alpha=0.5))
    assert_same(b1.to("neuron").transpose(1, 2).matmul(sample((3, 2), torch.float32, 8).to("neuron")),
                b1.transpose(1, 2).matmul(sample((3, 2), torch.float32, 8)))


def test_beta_zero_ignores_nan_and_out_forms(no_fallback):
    nan_bias = torch.full((4, 4), float("nan"))
    a = sample((4, 3), torch.float32)
    assert_same(torch.addmm(nan_bias.to("neuron"), a.to("neuron"), a.t().to("neuron"), beta=0),
                torch.addmm(nan_bias, a, a.t(), beta=0))
    out = torch.empty(4, 4, device="neuron").t()  # not row-major: written through a temporary
    torch.mm(a.to("neuron"), a.t().to("neuron"), out=out)
    assert_same(out, a @ a.t())
    empty_inner = torch.mm(torch.ones(3, 0, device="neuron"), torch.ones(0, 2, device="neuron"))
    assert_same(empty_inner, torch.zeros(3, 2))


def test_large_gemm_and_training_step(no_fallback):
    a, b = sample((256, 300), torch.float32), sample((300, 128), torch.float32, 1)
    assert_same(a.to("neuron") @ b.to("neuron"), a @ b)
    layer = torch.nn.Linear(300, 10)
    x = sample((32, 300), torch.float32, 2)
    layer(x).square().sum().backward()
    device_layer = torch.nn.Linear(300, 10)
    device_layer.load_state_dict(layer.state_dict())
    device_layer.to("neuron")
    device_layer(x.to("neuron")).square().sum().backward()
    assert_same(device_layer.weight.grad, layer.weight.grad)
    assert_same(device_layer.bias.grad, layer.bias.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_products_split_over_threads_and_batches_side_by_side(dtype, no_fallback):
    """Products large enough for one block per thread, split by rows and by columns (the
    column split with a transposed left operand), one small enough for four blocks per thread,
    and batches whose entries run side by side: too small to split each, small enough for
    unpacked BLAS, mid-sized with many entries, and a batch too small in all to split (run one
    after another)."""
    for (m, k, n), transposed in [((1024, 64, 256), False), ((64, 1024, 256), True), ((1024, 64, 64), False)]:
        a = sample((k, m), dtype).t() if transposed else sample((m, k), dtype)
        b = sample((k, n), dtype, 1)
        assert_same(a.to("neuron") @ b.to("neuron"), a @ b)
    for batch, m, k, n in [(64, 64, 16, 64), (32, 128, 32, 128), (16, 128, 256, 128), (3, 4, 5, 6)]:
        x, y, c = sample((batch, m, k), dtype, 2), sample((batch, n, k), dtype, 3), sample((batch, m, n), dtype, 4)
        y = y.transpose(1, 2)  # column-major entries
        assert_same(torch.bmm(x.to("neuron"), y.to("neuron")), torch.bmm(x, y))
        assert_same(torch.baddbmm(c.to("neuron"), x.to("neuron"), y.to("neuron"), beta=0.5, alpha=2),
                    torch.baddbmm(c, x, y, beta=0.5, alpha=2))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_addbmm_as_one_product(dtype, no_fallback):
    """addbmm sums its batch of products: one addmm over the batch and inner dims together;
    broadcast self, out=, in place, an empty batch, and gradients."""
    b1, b2 = sample((5, 3, 4), dtype, 1), sample((5, 4, 6), dtype, 2)
    d = lambda t: t.to("neuron")
    for self_shape in ((3, 6), (6,)):
        x = sample(self_shape, dtype, 3)
        assert_same(torch.addbmm(d(x), d(b1), d(b2), beta=2, alpha=3), torch.addbmm(x, b1, b2, beta=2, alpha=3))
    x = sample((3, 6), dtype, 4)
    out = torch.empty(3, 6, dtype=dtype, device="neuron")
    torch.addbmm(d(x), d(b1.transpose(1, 2).contiguous().transpose(1, 2)), d(b2), out=out)
    assert_same(out, torch.addbmm(x, b1, b2))
    inplace = d(x).clone()
    inplace.addbmm_(d(b1), d(b2), alpha=0.5 if dtype.is_floating_point else 1)
    assert_same(inplace, x.clone().addbmm_(b1, b2, alpha=0.5 if dtype.is_floating_point else 1))
    assert_same(torch.addbmm(d(x), d(b1[:0]), d(b2[:0])), torch.addbmm(x, b1[:0], b2[:0]))
    if dtype == torch.float32:
        grads = []
        for device in ("cpu", "neuron"):
            leaves = [t.detach().to(device).requires_grad_() for t in (x, b1, b2)]
            torch.addbmm(*leaves, beta=0.5).square().sum().backward()
            grads.append([leaf.grad for leaf in leaves])
        for got, ref in zip(grads[1], grads[0]):
            assert_same(got, ref)
    with pytest.raises(RuntimeError, match="batch1 and batch2 must have same number of batches"):
        torch.addbmm(d(x), d(b1), d(b2[:4]))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
def test_complex_products_and_gradients_match_cpu(dtype, no_fallback):
    """cgemm / zgemm: plain, transposed and lazily conjugated operands, batches (the spectral
    convolution of Fourier neural operators is a complex einsum), addmm, an empty inner
    dimension, and the backward pass, whose products take conjugated operands."""
    g = torch.Generator().manual_seed(5)
    def c(*shape):
        return torch.complex(torch.randn(shape, generator=g), torch.randn(shape, generator=g)).to(dtype)
    a, b, batch1, batch2, x, w = c(37, 50), c(50, 29), c(6, 20, 30), c(6, 30, 10), c(4, 8, 6, 6), c(8, 16, 6, 6)
    cases = [lambda a, b, p, q, x, w: a @ b, lambda a, b, p, q, x, w: b.mT @ a.mT,
             lambda a, b, p, q, x, w: a.conj() @ b, lambda a, b, p, q, x, w: b.mH @ a.mH,
             lambda a, b, p, q, x, w: p @ q, lambda a, b, p, q, x, w: torch.einsum("bixy,ioxy->boxy", x, w),
             lambda a, b, p, q, x, w: torch.addmm(a[:, :29], a, b, beta=0.5, alpha=2),
             lambda a, b, p, q, x, w: torch.baddbmm(p[:, :, :10], p, q, beta=-1),
             lambda a, b, p, q, x, w: a @ b[:, 0], lambda a, b, p, q, x, w: a[:, :0] @ b[:0]]
    device = [t.to("neuron") for t in (a, b, batch1, batch2, x, w)]
    for op in cases:
        torch.testing.assert_close(op(*device).cpu(), op(a, b, batch1, batch2, x, w))
    p, q = a.clone().requires_grad_(), b.clone().requires_grad_()
    (p @ q).abs().sum().backward()
    pd, qd = a.to("neuron").requires_grad_(), b.to("neuron").requires_grad_()
    (pd @ qd).abs().sum().backward()  # abs's backward is sgn, also native for complex
    torch.testing.assert_close(pd.grad.cpu(), p.grad)
    torch.testing.assert_close(qd.grad.cpu(), q.grad)


def test_complex_alpha_takes_the_counted_fallback():
    a = torch.randn(3, 4, dtype=torch.complex64)
    b = torch.randn(4, 2, dtype=torch.complex64)
    torchneuron.reset_fallback_report()
    got = torch.addmm(a[:, :2].to("neuron"), a.to("neuron"), b.to("neuron"), alpha=1j)
    torch.testing.assert_close(got.cpu(), torch.addmm(a[:, :2], a, b, alpha=1j))
    assert "aten::addmm.out" in torchneuron.fallback_report()


def test_shape_and_dtype_errors():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        torch.mm(torch.ones(2, 3, device="neuron"), torch.ones(4, 5, device="neuron"))
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.mm(torch.ones(2, 3, device="neuron"), torch.ones(3, 2, dtype=torch.float64, device="neuron"))
    with pytest.raises(RuntimeError, match="2D tensor"):
        torch.mm(torch.ones(2, 3, 4, device="neuron"), torch.ones(4, 5, device="neuron"))


def test_empty_inner_dimension_never_reaches_blas(no_fallback):
    # A batch of 0 rows gives a weight gradient with K = 0: exact zeros, or beta * C for addmm.
    x = torch.zeros(0, 3, device="neuron", requires_grad=True)
    layer = torch.nn.Linear(3, 4).to("neuron")
    layer(x).sum().backward()
    assert_same(layer.weight.grad, torch.zeros(4, 3))
    c = sample((2, 5), torch.float32)
    empty = torch.ones(2, 0, device="neuron"), torch.ones(0, 5, device="neuron")
    assert_same(torch.addmm(c.to("neuron"), *empty, beta=3.0), torch.addmm(c, torch.ones(2, 0), torch.ones(0, 5), beta=3.0))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_type_addr_rounds_once(dtype, no_fallback):
    """beta * M + alpha * outer(v1, v2) in a half type is computed in float32 and rounded once:
    within one unit of the float64 result rounded to the dtype (the composite, rounding each
    term first, was up to two units off). Gradients match CPU PyTorch's."""
    torch.manual_seed(0)
    m, v1, v2 = torch.randn(64, 48).to(dtype), torch.randn(64).to(dtype), torch.randn(48).to(dtype)
    for kwargs in ({}, dict(beta=0.6, alpha=0.2), dict(beta=0, alpha=3)):
        got = torch.addr(m.to("neuron"), v1.to("neuron"), v2.to("neuron"), **kwargs).cpu()
        exact = torch.addr(m.double(), v1.double(), v2.double(), **kwargs)
        assert got.dtype == dtype
        # One unit of the dtype at the result, plus float32's rounding of the two terms (which
        # matters where they cancel).
        terms = torch.addr(m.double().abs(), v1.double().abs(), v2.double().abs(),
                           **{k: abs(v) for k, v in kwargs.items()})
        bound = torch.finfo(dtype).eps * exact.abs() + 2 * torch.finfo(torch.float32).eps * terms
        assert bool(((got.double() - exact).abs() <= bound).all()), kwargs
    leaves = [t.clone().requires_grad_() for t in (m, v1, v2)]
    on_device = [t.to("neuron").requires_grad_() for t in (m, v1, v2)]
    torch.addr(*leaves, beta=0.5, alpha=2).float().square().sum().backward()
    torch.addr(*on_device, beta=0.5, alpha=2).float().square().sum().backward()
    for got, expected in zip(on_device, leaves):
        scale = float(expected.grad.float().abs().max())
        torch.testing.assert_close(got.grad.cpu().float(), expected.grad.float(), atol=2e-2 * scale, rtol=2e-2)


def triangular_system(batch, n, upper, seed=0):
    # A well-conditioned triangle (dominant diagonal) under junk in the other triangle, which
    # the solve must not read.
    a = sample(batch + (n, n), torch.float64, seed) * 0.3
    a = a + torch.diag_embed(2 + sample(batch + (n,), torch.float64, seed + 1).abs())
    junk = sample(batch + (n, n), torch.float64, seed + 2) * 100
    return a.triu() + junk.tril(-1) if upper else a.tril() + junk.triu(1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("upper, left, unitriangular", [(False, True, False), (True, True, False), (False, False, True),
                                                        (True, False, False), (False, True, True)])
def test_solve_triangular_matches_cpu_with_gradients(dtype, upper, left, unitriangular, no_fallback):
    # Batched and broadcast (A [2, 1, n, n] against B [3, ...]), as gated delta-rule attention
    # solves its chunks' unit-lower systems.
    a = triangular_system((2, 1), 16, upper).to(dtype)
    b = sample((3, 16, 5) if left else (3, 5, 16), dtype, seed=4)
    results = []
    for device in ("cpu", "neuron"):
        la, lb = a.detach().to(device).requires_grad_(), b.detach().to(device).requires_grad_()
        x = torch.linalg.solve_triangular(la, lb, upper=upper, left=left, unitriangular=unitriangular)
        x.backward(sample(x.shape, dtype, seed=5).to(device))
        results.append((x, la.grad, lb.grad))
    tol = 1e-4 if dtype == torch.float32 else 1e-10
    assert results[1][0].stride() == results[0][0].stride()  # batches of column-major matrices, as on CPU
    for dev, cpu in zip(results[1], results[0]):
        torch.testing.assert_close(dev.cpu(), cpu, atol=tol, rtol=tol)


def test_solve_triangular_out_half_and_errors(no_fallback):
    a, b = triangular_system((), 8, False).float(), sample((8, 3), torch.float32, seed=1)
    out = torch.empty(0, device="neuron")
    torch.linalg.solve_triangular(a.to("neuron"), b.to("neuron"), upper=False, out=out)
    torch.testing.assert_close(out.cpu(), torch.linalg.solve_triangular(a, b, upper=False), atol=1e-5, rtol=1e-5)
    half = torch.linalg.solve_triangular(a.bfloat16().to("neuron"), b.bfloat16().to("neuron"), upper=False)
    torch.testing.assert_close(half.cpu().float(), torch.linalg.solve_triangular(a.bfloat16().float(), b.bfloat16().float(),
                                                                                 upper=False), atol=2e-2, rtol=2e-2)
    dev = torch.ones(3, 4, device="neuron")
    with pytest.raises(RuntimeError, match="A must be batches of square matrices, but they are 3 by 4 matrices"):
        torch.linalg.solve_triangular(dev, dev, upper=False)
    with pytest.raises(RuntimeError, match=r"Incompatible shapes of A and B for the equation XA = B \(3x3 and 3x4\)"):
        torch.linalg.solve_triangular(torch.eye(3, device="neuron"), dev, upper=False, left=False)


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 2.0, 3.0, float("inf")])
def test_cdist_matches_cpu_with_gradients(p, no_fallback):
    # Small problems: p = 2 takes the direct kernel too (larger ones use matrix products).
    x1, x2 = sample((2, 4, 6), torch.float32, seed=1), sample((1, 5, 6), torch.float32, seed=2)
    x2[0, 0] = x1[0, 0]  # a zero distance: its gradient is 0
    x2[0, 1, :3] = x1[1, 2, :3]  # some equal coordinates
    results = []
    for device in ("cpu", "neuron"):
        a, b = x1.detach().to(device).requires_grad_(), x2.detach().to(device).requires_grad_()
        distance = torch.cdist(a, b, p=p)
        distance.backward(sample(distance.shape, torch.float32, seed=3).to(device))
        results.append((distance, a.grad, b.grad))
    for dev, cpu in zip(results[1], results[0]):
        torch.testing.assert_close(dev.cpu(), cpu, atol=1e-4, rtol=1e-4)
    with pytest.raises(RuntimeError, match="cdist only supports non-negative p values"):
        torch.cdist(x1.to("neuron"), x2.to("neuron"), p=-1.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("m,k,n", [(16, 1024, 300), (3, 512, 2100), (64, 1024, 65), (1, 2048, 4)])
def test_short_products_with_a_transposed_weight(m, k, n, dtype):
    """x @ w.t() with few rows of x (a linear layer at decode) runs as w @ x.t() transposed on the
    device for large k or n; x given both row-major and transposed."""
    g = torch.Generator().manual_seed(m + k + n)
    w = torch.randn(n, k, generator=g, dtype=dtype)
    # Sums of k products in another order: float32's tolerance grows with k.
    tol = dict(atol=4e-6 * k ** 0.5 * 10, rtol=1e-5) if dtype == torch.float32 else {}
    for x in (torch.randn(m, k, generator=g, dtype=dtype), torch.randn(k, m, generator=g, dtype=dtype).t()):
        got = torch.nn.functional.linear(x.to("neuron"), w.to("neuron")).cpu()
        torch.testing.assert_close(got, torch.nn.functional.linear(x, w), **tol)
        batched = torch.bmm(x.expand(2, m, k).to("neuron"), w.t().expand(2, k, n).to("neuron")).cpu()
        torch.testing.assert_close(batched, (x @ w.t()).expand(2, m, n), **tol)
