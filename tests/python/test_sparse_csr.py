"""Sparse CSR tensors on neuron: conversion from and to dense, the member tensors, moves between
devices, torch.sparse.mm(csr, dense, reduce) and torch.sparse.sampled_addmm with their gradients,
and bad input, each against CPU PyTorch; plus the sum of a sparse COO tensor (to_sparse's
gradient). What has no neuron kernel runs as the counted CPU fallback."""

import warnings

import pytest
import torch

import torchneuron

DEV = "neuron"


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*fell back to the CPU.*")
        warnings.filterwarnings("ignore", message=".*Sparse CSR tensor support is in beta.*")
        yield


def _dense(rows=5, cols=7, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=g).to(dtype)
    x[torch.rand(rows, cols, generator=g) < 0.5] = 0
    x[1] = 0  # an empty row
    return x


def _assert_csr_equal(actual, expected):
    assert actual.layout == torch.sparse_csr and actual.device.type == DEV
    assert actual.shape == expected.shape
    assert torch.equal(actual.crow_indices().cpu(), expected.crow_indices())
    assert torch.equal(actual.col_indices().cpu(), expected.col_indices())
    torch.testing.assert_close(actual.values().cpu(), expected.values())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool,
                                   torch.complex64])
def test_to_sparse_csr_and_back(dtype):
    x = _dense(dtype=dtype)
    expected = x.to_sparse_csr()
    actual = x.to(DEV).to_sparse_csr()
    _assert_csr_equal(actual, expected)
    _assert_csr_equal(x.to(DEV).to_sparse(layout=torch.sparse_csr), expected)
    assert actual._nnz() == expected._nnz() and actual.sparse_dim() == 2 and actual.dense_dim() == 0
    assert torch.equal(actual.to_dense().cpu(), x)
    torchneuron.reset_fallback_report()
    actual.to_dense()
    x.to(DEV).to_sparse_csr()
    if not dtype.is_complex:  # complex indexing itself falls back
        assert torchneuron.fallback_report() == {}  # 2-D conversions run on the device


def test_move_between_devices_and_empty_shapes():
    x = _dense()
    moved = x.to_sparse_csr().to(DEV)
    _assert_csr_equal(moved, x.to_sparse_csr())
    back = moved.cpu()
    assert back.layout == torch.sparse_csr and back.device.type == "cpu"
    assert torch.equal(back.to_dense(), x)
    assert torch.equal(moved.clone().to_dense().cpu(), x)
    for shape in [(0, 0), (3, 0), (0, 4), (3, 4)]:
        z = torch.zeros(shape)
        _assert_csr_equal(z.to(DEV).to_sparse_csr(), z.to_sparse_csr())
        assert torch.equal(z.to(DEV).to_sparse_csr().to_dense().cpu(), z)


def test_other_layouts_and_ops_match_cpu_through_the_fallback():
    x = _dense()
    d = x.to(DEV)
    for make in (lambda t: t.to_sparse_csc(), lambda t: t.to_sparse_bsr((1, 1)),
                 lambda t: torch.stack([t, 2 * t]).to_sparse_csr(), lambda t: t.to_sparse_csr() * 2,
                 lambda t: t.to_sparse_csr().sin(), lambda t: t.to_sparse_csr().to_sparse(),
                 lambda t: t.to_sparse_csr() @ torch.ones(7, 2, device=t.device)):
        expected, actual = make(x), make(d)
        assert actual.layout == expected.layout and actual.device.type == DEV
        dense = actual.cpu() if actual.layout == torch.strided else actual.cpu().to_dense()
        assert torch.equal(dense, expected if expected.layout == torch.strided else expected.to_dense())
    torchneuron.reset_fallback_report()
    d.to_sparse_csr() * 2
    assert torchneuron.fallback_report() == {"aten::mul.Tensor": 1}  # counted


def test_sparse_sums_reduce_everything():
    x = _dense()
    for layout_of in (lambda t: t.to_sparse(), lambda t: t.to_sparse_csr()):
        s = layout_of(x.to(DEV)).sum()
        assert s.shape == () and s.layout == torch.strided
        torch.testing.assert_close(s.cpu(), layout_of(x).sum())


def test_to_sparse_gradient_matches_cpu():
    # The OpInfo's check: the sum of a sparse result, backward into the dense input.
    x = _dense()
    grads = []
    for device in ("cpu", DEV):
        leaf = x.to(device).requires_grad_()
        (g,) = torch.autograd.grad(leaf.to_sparse().float().sum(), [leaf])
        grads.append(g.cpu())
    assert grads[0].layout == grads[1].layout == torch.strided
    assert torch.equal(grads[1], grads[0])


def _mm_reduce_run(device, a, b, reduce):
    leaf_a = a.to_sparse_csr().to(device).requires_grad_()
    leaf_b = b.to(device).requires_grad_()
    out = torch.sparse.mm(leaf_a, leaf_b, reduce)
    weights = torch.arange(out.numel(), dtype=out.dtype).reshape(out.shape).to(device) / 7
    ga, gb = torch.autograd.grad((out * weights).sum(), [leaf_a, leaf_b])
    return out.detach().cpu(), ga.cpu(), gb.cpu()


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_sparse_mm_reduce_matches_cpu(reduce, dtype):
    a = _dense(6, 5, seed=1, dtype=dtype)
    a[3, 1] = a[3, 2] = 2.0  # ties within a row: CPU takes the first
    b = torch.randn(5, 4, generator=torch.Generator().manual_seed(2)).to(dtype)
    b[1] = b[2] = 1.5
    tol = {} if dtype in (torch.float32, torch.float64) else {"atol": 2e-2, "rtol": 2e-2}
    expected = _mm_reduce_run("cpu", a, b, reduce)
    torchneuron.reset_fallback_report()
    actual = _mm_reduce_run(DEV, a, b, reduce)
    assert not any("sparse_mm_reduce" in name for name in torchneuron.fallback_report())
    torch.testing.assert_close(actual[0], expected[0], **tol)
    assert actual[1].layout == torch.sparse_csr
    assert torch.equal(actual[1].crow_indices(), expected[1].crow_indices())
    torch.testing.assert_close(actual[1].values(), expected[1].values(), **tol)
    torch.testing.assert_close(actual[2], expected[2], **tol)


def test_int32_indices_match_cpu():
    c = _dense(5, 4, seed=10).to_sparse_csr()
    c32 = torch.sparse_csr_tensor(c.crow_indices().int(), c.col_indices().int(), c.values(), c.shape,
                                  check_invariants=True)
    b = torch.randn(4, 3, generator=torch.Generator().manual_seed(11))
    assert torch.equal(c32.to(DEV).to_dense().cpu(), c.to_dense())
    torch.testing.assert_close((c32.to(DEV) @ b.to(DEV)).cpu(), c32 @ b)
    for reduce in ("mean", "amax"):
        expected, actual = [], []
        for device, into in (("cpu", expected), (DEV, actual)):
            a, w = c32.to(device).requires_grad_(), b.to(device).requires_grad_()
            out, arg = torch.ops.aten._sparse_mm_reduce_impl(a, w, reduce)
            ga, gw = torch.autograd.grad(out.sum(), [a, w])
            into += [out.detach().cpu(), arg.cpu(), ga.cpu().to_dense(), gw.cpu()]
            assert ga.crow_indices().dtype == torch.int32
        assert actual[1].dtype == expected[1].dtype and torch.equal(actual[1], expected[1])
        for x, y in zip(actual, expected):
            torch.testing.assert_close(x, y)


def test_sparse_mm_reduce_nan_and_infinities_match_cpu():
    a = torch.tensor([[1.0, 2.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    b = torch.tensor([[float("nan"), 1.0], [1.0, float("-inf")], [float("nan"), float("inf")]])
    for reduce in ("amax", "amin", "sum"):
        expected = _mm_reduce_run("cpu", a, b, reduce)
        actual = _mm_reduce_run(DEV, a, b, reduce)
        for x, y in zip(actual, expected):
            torch.testing.assert_close(x.to_dense() if x.layout != torch.strided else x,
                                       y.to_dense() if y.layout != torch.strided else y, equal_nan=True)


def test_sampled_addmm_and_gradients_match_cpu():
    s = _dense(4, 6, seed=3)
    m1 = torch.randn(4, 3, generator=torch.Generator().manual_seed(4))
    m2 = torch.randn(3, 6, generator=torch.Generator().manual_seed(5))
    results = []
    for device in ("cpu", DEV):
        leaves = [s.to_sparse_csr().to(device).requires_grad_(), m1.to(device).requires_grad_(),
                  m2.to(device).requires_grad_()]
        torchneuron.reset_fallback_report()
        out = torch.sparse.sampled_addmm(*leaves, beta=0.2, alpha=0.6)
        grads = torch.autograd.grad(out.sum(), leaves)
        assert torchneuron.fallback_report() == {}  # forward and backward (sparse_mask, mm) native
        results.append([out.detach().cpu().to_dense()] + [g.cpu() for g in grads])
    (out_d, gs_d, g1_d, g2_d), (out_c, gs_c, g1_c, g2_c) = results[1], results[0]
    torch.testing.assert_close(out_d, out_c)
    torch.testing.assert_close(gs_d.to_dense(), gs_c.to_dense())
    torch.testing.assert_close(g1_d, g1_c)
    torch.testing.assert_close(g2_d, g2_c)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
def test_csr_dense_products_and_sparse_mask_match_cpu(dtype):
    a = _dense(4, 6, seed=6).to(dtype)
    csr = a.to_sparse_csr()
    right = torch.randn(6, 3, generator=torch.Generator().manual_seed(7)).to(dtype)
    left = torch.randn(2, 4, generator=torch.Generator().manual_seed(8)).to(dtype)
    dev = csr.to(DEV)
    torch.testing.assert_close((dev @ right.to(DEV)).cpu(), csr @ right)
    torch.testing.assert_close((left.to(DEV) @ dev).cpu(), left @ csr)
    masked = torch.randn(4, 6, generator=torch.Generator().manual_seed(9)).to(dtype)
    expected = masked.sparse_mask(csr)
    actual = masked.to(DEV).sparse_mask(dev)
    _assert_csr_equal(actual, expected)
    s = torch.zeros(3, 0).to_sparse_csr()  # empty operands
    assert (s.to(DEV) @ torch.ones(0, 2, device=DEV)).cpu().equal(torch.zeros(3, 2))


def _raises_like_cpu(fn):
    with pytest.raises(Exception) as cpu_error:
        fn("cpu")
    with pytest.raises(type(cpu_error.value)) as dev_error:
        fn(DEV)
    return str(cpu_error.value), str(dev_error.value)


def test_bad_input_raises_cpu_errors():
    x = _dense(4, 6)

    def csr(device):
        return x.to(device).to_sparse_csr()
    cpu, dev = _raises_like_cpu(lambda d: torch.sparse.mm(csr(d), torch.ones(5, 2, device=d), "sum"))
    assert cpu == dev
    cpu, dev = _raises_like_cpu(lambda d: torch.sparse.mm(csr(d), torch.ones(6, 2, device=d), "prod"))
    assert cpu == dev
    cpu, dev = _raises_like_cpu(lambda d: torch.sparse.mm(csr(d), torch.ones(6, 2, device=d), "median"))
    assert cpu == dev
    cpu, dev = _raises_like_cpu(
        lambda d: torch.sparse.mm(csr(d), torch.ones(6, 2, device=d, dtype=torch.float64), "sum"))
    assert "scalar type Float" in cpu and "scalar type Float" in dev
    cpu, dev = _raises_like_cpu(
        lambda d: torch.sparse.mm(x.long().to(d).to_sparse_csr(), torch.ones(6, 2, device=d).long(), "sum"))
    assert cpu == dev
    cpu, dev = _raises_like_cpu(
        lambda d: torch.sparse.sampled_addmm(csr(d), torch.ones(4, 3, device=d), torch.ones(2, 6, device=d)))
    assert cpu == dev
    cpu, dev = _raises_like_cpu(lambda d: csr(d).to_dense(dtype=torch.float64))
    assert cpu == dev


def test_mixed_devices_are_refused():
    a = _dense(4, 6).to(DEV).to_sparse_csr()
    with pytest.raises(RuntimeError, match="same device"):
        torch.sparse.mm(a, torch.ones(6, 2), "sum")
    with pytest.raises(RuntimeError, match="same device"):
        torch.sparse.sampled_addmm(a, torch.ones(4, 3), torch.ones(3, 6))
