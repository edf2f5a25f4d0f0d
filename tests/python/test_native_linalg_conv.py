"""Ops the conformance run saw on the counted CPU fallback, now native: float64 convolutions (1-D
to 3-D, plain and transposed, grouped, dilated, output padding past the stride) and their
gradients, max_unpool2d / 3d, index_reduce of a 0-dim tensor, the SVD and symmetric / Hermitian
eigendecompositions (torch.linalg.svd, svdvals, pinv, eigh, eigvalsh), nonzero_static, take's
out=, hash_tensor, complex sums / cumsums / norms / indexing, unsigned sums into a float,
scatter_reduce of bools and the batch-norm forms. Each against CPU PyTorch; decompositions
through what they define uniquely (singular values, |U|, U @ Vh, reconstructions), since
singular vectors' signs are free."""

import pytest
import torch
import torch.nn.functional as F

DEV = "neuron"


def close(actual, expected, tol):
    torch.testing.assert_close(actual.cpu(), expected, rtol=tol, atol=tol)


# ---- convolutions ------------------------------------------------------------------------------

# (dims, transposed, in, out, kernel, stride, padding, dilation, groups, output_padding)
CONV_CASES = [
    (1, False, 4, 6, 3, 1, 1, 1, 1, 0),
    (1, True, 4, 6, 3, 2, 1, 1, 2, 1),
    (2, False, 4, 6, (3, 2), (2, 1), (1, 0), (1, 2), 2, 0),
    (2, False, 3, 5, 1, 1, 0, 1, 1, 0),
    (2, True, 4, 6, 3, 2, 1, 1, 1, 1),
    (2, True, 6, 4, (3, 2), (1, 2), (0, 1), (3, 1), 2, (2, 1)),  # output padding past the stride
    (3, False, 2, 4, 2, (1, 2, 1), 1, 1, 2, 0),
    (3, True, 2, 4, 2, 2, (1, 0, 1), 1, 1, (1, 0, 1)),
]


def conv(dims, transposed, x, w, b, stride, padding, dilation, groups, output_padding):
    if transposed:
        fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[dims - 1]
        return fn(x, w, b, stride, padding, output_padding, groups, dilation)
    fn = (F.conv1d, F.conv2d, F.conv3d)[dims - 1]
    return fn(x, w, b, stride, padding, dilation, groups)


# float64 everywhere; float32 where it takes this path too (output padding past the stride).
CONV_RUNS = [(case, torch.float64) for case in CONV_CASES] + [(CONV_CASES[5], torch.float32)]


@pytest.mark.parametrize("case,dtype", CONV_RUNS,
                         ids=lambda c: f"{c[0]}d{'T' if c[1] else ''}" if isinstance(c, tuple) else str(c))
def test_convolution_and_gradients_match_cpu(case, dtype, no_fallback):
    dims, transposed, cin, cout, kernel, stride, padding, dilation, groups, output_padding = case
    torch.manual_seed(0)
    ks = kernel if isinstance(kernel, tuple) else (kernel,) * dims
    x = torch.randn(2, cin, *[7 - d for d in range(dims)], dtype=dtype)
    w_shape = (cin, cout // groups, *ks) if transposed else (cout, cin // groups, *ks)
    w, b = torch.randn(w_shape, dtype=dtype), torch.randn(cout, dtype=dtype)
    args = (stride, padding, dilation, groups, output_padding)
    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    expected = conv(dims, transposed, *leaves, *args)
    expected_grads = torch.autograd.grad(expected.sin().sum(), leaves)
    device_leaves = [t.detach().to(DEV).requires_grad_() for t in leaves]
    got = conv(dims, transposed, *device_leaves, *args)
    got_grads = torch.autograd.grad(got.sin().sum(), device_leaves)
    tol = 1e-10 if dtype == torch.float64 else 1e-4
    assert got.dtype == dtype and got.shape == expected.shape
    close(got, expected.detach(), tol)
    for g, e in zip(got_grads, expected_grads):
        close(g, e, tol)


def test_channels_last_float64_convolution_keeps_the_layout(no_fallback):
    x = torch.randn(2, 3, 6, 5, dtype=torch.float64).to(memory_format=torch.channels_last)
    w = torch.randn(4, 3, 3, 3, dtype=torch.float64)
    got = F.conv2d(x.to(DEV), w.to(DEV), padding=1)
    expected = F.conv2d(x, w, padding=1)
    assert got.is_contiguous(memory_format=torch.channels_last) == expected.is_contiguous(
        memory_format=torch.channels_last)
    close(got, expected, 1e-10)


@pytest.mark.parametrize("transposed", [False, True])
def test_empty_batch_float64_convolution_and_gradients(transposed, no_fallback):
    fn = F.conv_transpose2d if transposed else F.conv2d
    x = torch.randn(0, 3, 5, 5, dtype=torch.float64)
    w = torch.randn(3, 4, 3, 3, dtype=torch.float64) if transposed else torch.randn(4, 3, 3, 3, dtype=torch.float64)
    leaves = [x.clone().requires_grad_(), w.clone().requires_grad_()]
    expected = fn(*leaves)
    expected_grads = torch.autograd.grad(expected.sum(), leaves)
    device_leaves = [t.detach().to(DEV).requires_grad_() for t in leaves]
    got = fn(*device_leaves)
    got_grads = torch.autograd.grad(got.sum(), device_leaves)
    assert got.shape == expected.shape
    for g, e in zip(got_grads, expected_grads):
        close(g, e, 0)


# ---- max unpooling -----------------------------------------------------------------------------

@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_max_unpool_matches_cpu_and_its_gradient(dims, dtype, no_fallback):
    torch.manual_seed(0)
    size = (2, 3) + (6,) * dims
    x = torch.randn(size, dtype=dtype)
    pool = F.max_pool2d if dims == 2 else F.max_pool3d
    unpool = F.max_unpool2d if dims == 2 else F.max_unpool3d
    values, indices = pool(x, 3, stride=2, return_indices=True)  # overlapping windows: repeated indices
    out_size = (6,) * dims
    leaf = values.clone().requires_grad_()
    expected = unpool(leaf, indices, 3, stride=2, output_size=out_size)
    (expected_grad,) = torch.autograd.grad((expected * expected).sum(), leaf)
    device_leaf = values.to(DEV).requires_grad_()
    got = unpool(device_leaf, indices.to(DEV), 3, stride=2, output_size=out_size)
    (got_grad,) = torch.autograd.grad((got * got).sum(), device_leaf)
    assert got.shape == expected.shape
    torch.testing.assert_close(got.cpu(), expected.detach(), rtol=0, atol=0)
    torch.testing.assert_close(got_grad.cpu(), expected_grad, rtol=0, atol=0)


def test_max_unpool_unbatched_channels_last_and_errors():
    values, indices = F.max_pool2d(torch.randn(3, 4, 4), 2, return_indices=True)
    torch.testing.assert_close(F.max_unpool2d(values.to(DEV), indices.to(DEV), 2).cpu(),
                               F.max_unpool2d(values, indices, 2))
    batched, batched_indices = F.max_pool2d(torch.randn(2, 3, 4, 4), 2, return_indices=True)
    cl = batched.contiguous(memory_format=torch.channels_last)
    cl_indices = batched_indices.contiguous(memory_format=torch.channels_last)
    expected = F.max_unpool2d(cl, cl_indices, 2)
    got = F.max_unpool2d(cl.to(DEV), cl_indices.to(DEV), 2)
    assert got.stride() == expected.stride()
    torch.testing.assert_close(got.cpu(), expected)
    bad = indices.clone()
    bad.view(-1)[1] = 100
    with pytest.raises(RuntimeError, match="Found an invalid max index: 100"):
        F.max_unpool2d(values, bad, 2)
    with pytest.raises(RuntimeError, match="Found an invalid max index: 100"):
        F.max_unpool2d(values.to(DEV), bad.to(DEV), 2)
    with pytest.raises(RuntimeError, match="elements in indices should be type int64"):
        torch.ops.aten.max_unpool2d(values.to(DEV), indices.int().to(DEV), (4, 4))


# ---- index_reduce of a scalar ------------------------------------------------------------------

@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_of_a_0dim_tensor(reduce, include_self, no_fallback):
    self_, source, index = torch.tensor(3.0), torch.tensor(-2.0), torch.tensor([0])
    expected = self_.index_reduce(0, index, source, reduce, include_self=include_self)
    got = self_.to(DEV).index_reduce(0, index.to(DEV), source.to(DEV), reduce, include_self=include_self)
    assert got.shape == expected.shape
    torch.testing.assert_close(got.cpu(), expected)
    inplace = self_.to(DEV)
    inplace.index_reduce_(0, index.to(DEV), source.to(DEV), reduce, include_self=include_self)
    torch.testing.assert_close(inplace.cpu(), expected)


# ---- SVD and eigh ------------------------------------------------------------------------------

SPECTRAL_DTYPES = [torch.float32, torch.float64, torch.complex64, torch.complex128]


def tol_of(dtype):
    return 1e-4 if dtype in (torch.float32, torch.complex64) else 1e-10


@pytest.mark.parametrize("dtype", SPECTRAL_DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 6, 4), (0, 3), (3, 0), (2, 0, 4)])
@pytest.mark.parametrize("full", [False, True])
def test_svd_matches_cpu_up_to_signs(dtype, shape, full, no_fallback):
    torch.manual_seed(0)
    a = torch.randn(shape, dtype=dtype)
    U, S, Vh = torch.linalg.svd(a, full_matrices=full)
    u, s, vh = torch.linalg.svd(a.to(DEV), full_matrices=full)
    assert (u.shape, s.shape, vh.shape) == (U.shape, S.shape, Vh.shape)
    assert (u.stride(), vh.stride()) == (U.stride(), Vh.stride())  # column-major, as CPU's
    assert s.dtype == S.dtype
    tol, k = tol_of(dtype), S.shape[-1]
    close(s, S, tol)
    # The first k singular vectors up to sign (the rest of a full basis is any orthonormal one).
    close(u[..., :k].abs(), U[..., :k].abs(), tol)
    close(vh[..., :k, :].abs(), Vh[..., :k, :].abs(), tol)
    close(u[..., :k] @ vh[..., :k, :], U[..., :k] @ Vh[..., :k, :], tol)
    eye_m = torch.eye(shape[-2], dtype=dtype).expand(*shape[:-2], -1, -1)
    if full:  # complete orthonormal bases
        close(u @ u.mH, eye_m, tol)


@pytest.mark.parametrize("dtype", SPECTRAL_DTYPES)
def test_svd_gradients_of_invariant_parts_match_cpu(dtype, no_fallback):
    torch.manual_seed(1)
    a = torch.randn(3, 5, 4, dtype=dtype)

    def loss(x):
        U, S, Vh = torch.linalg.svd(x, full_matrices=False)
        return S.sum() + (U @ Vh).abs().sum() + U.abs().sum()

    leaf = a.clone().requires_grad_()
    (expected,) = torch.autograd.grad(loss(leaf), leaf)
    device_leaf = a.to(DEV).requires_grad_()
    (got,) = torch.autograd.grad(loss(device_leaf), device_leaf)
    close(got, expected, 1e-3 if dtype in (torch.float32, torch.complex64) else 1e-9)


def test_svd_composites_run_natively(no_fallback):
    torch.manual_seed(2)
    a = torch.randn(2, 5, 3, dtype=torch.float64)
    close(torch.linalg.svdvals(a.to(DEV)), torch.linalg.svdvals(a), 1e-12)
    close(torch.linalg.pinv(a.to(DEV)), torch.linalg.pinv(a), 1e-10)
    close(torch.linalg.matrix_norm(a.to(DEV), "nuc"), torch.linalg.matrix_norm(a, "nuc"), 1e-12)
    close(torch.linalg.matrix_rank(a.to(DEV)), torch.linalg.matrix_rank(a), 0)


def test_svd_of_non_finite_input_raises():
    a = torch.randn(3, 3)
    a[1, 1] = float("nan")
    with pytest.raises(RuntimeError, match="linalg.svd: The algorithm failed to converge because the input matrix "
                                           "contained non-finite values"):
        torch.linalg.svd(a.to(DEV))
        torch.neuron.synchronize()


@pytest.mark.parametrize("dtype", SPECTRAL_DTYPES)
@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("shape", [(5, 5), (3, 4, 4), (0, 0), (2, 0, 0)])
def test_eigh_matches_cpu_up_to_signs(dtype, uplo, shape, no_fallback):
    torch.manual_seed(3)
    a = torch.randn(shape, dtype=dtype)  # only the `uplo` triangle is read: the other one is noise
    L, V = torch.linalg.eigh(a, UPLO=uplo)
    w, v = torch.linalg.eigh(a.to(DEV), UPLO=uplo)
    assert (w.shape, v.shape, w.dtype, v.stride()) == (L.shape, V.shape, L.dtype, V.stride())
    tol = tol_of(dtype)
    close(w, L, tol)
    close(v.abs(), V.abs(), tol)
    close(torch.linalg.eigvalsh(a.to(DEV), UPLO=uplo), L, tol)
    # A V = V diag(w) for the Hermitian matrix the triangle defines.
    tri = a.tril() if uplo == "L" else a.triu()
    herm = tri + tri.mH - torch.diag_embed(tri.diagonal(dim1=-2, dim2=-1).real.to(dtype))
    v_host = v.cpu()
    close(herm @ v_host, v_host * w.cpu().to(dtype).unsqueeze(-2), 10 * tol)


def test_eigh_gradient_matches_cpu(no_fallback):
    torch.manual_seed(4)
    a = torch.randn(4, 4, dtype=torch.float64)
    a = a + a.mT

    def loss(x):
        w, v = torch.linalg.eigh(x)
        return w.sum() + (w * w).sum() + v.abs().sum()

    leaf = a.clone().requires_grad_()
    (expected,) = torch.autograd.grad(loss(leaf), leaf)
    device_leaf = a.to(DEV).requires_grad_()
    (got,) = torch.autograd.grad(loss(device_leaf), device_leaf)
    close(got, expected, 1e-9)


# ---- nonzero_static, take's out=, hash_tensor --------------------------------------------------

@pytest.mark.parametrize("size", [0, 2, 5, 9])
def test_nonzero_static_matches_cpu(size, no_fallback):
    x = torch.tensor([[0, 1, 0], [2, 0, 3], [0, 0, 4]])
    for fill in (-1, 7):
        torch.testing.assert_close(torch.nonzero_static(x.to(DEV), size=size, fill_value=fill).cpu(),
                                   torch.nonzero_static(x, size=size, fill_value=fill))
    torch.testing.assert_close(torch.nonzero_static(torch.tensor(5.0, device=DEV), size=size).cpu(),
                               torch.nonzero_static(torch.tensor(5.0), size=size))
    out = torch.empty(0, dtype=torch.long, device=DEV)
    torch.nonzero_static(x.to(DEV), size=size, out=out)
    torch.testing.assert_close(out.cpu(), torch.nonzero_static(x, size=size))
    with pytest.raises(RuntimeError, match="'size' must be an non-negative integer"):
        torch.nonzero_static(x.to(DEV), size=-1)


def test_take_out_matches_cpu(no_fallback):
    x, index = torch.randn(3, 4), torch.tensor([[0, -1], [5, 11]])
    out = torch.empty(0, device=DEV)
    torch.take(x.to(DEV), index.to(DEV), out=out)
    torch.testing.assert_close(out.cpu(), torch.take(x, index))
    with pytest.raises(RuntimeError, match="self and out expected to have the same dtype"):
        torch.take(x.to(DEV), index.to(DEV), out=torch.empty(4, dtype=torch.float64, device=DEV))


HASH_DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.int8, torch.uint8, torch.int64, torch.bool]


@pytest.mark.parametrize("dtype", HASH_DTYPES)
def test_hash_tensor_matches_cpu(dtype, no_fallback):
    torch.manual_seed(5)
    x = (torch.randn(3, 5, 7) * 100).to(dtype) if dtype.is_floating_point or dtype == torch.bool else \
        torch.randint(0, 100, (3, 5, 7)).to(dtype)
    if dtype == torch.int8:
        x = x - 50  # negative words: sign-extended
    for dim, keepdim in [((), False), (0, False), (1, True), ((0, 2), False), ((0, 2), True), ((0, 1, 2), False)]:
        expected = torch.hash_tensor(x, dim=dim, keepdim=keepdim)
        got = torch.hash_tensor(x.to(DEV), dim=dim, keepdim=keepdim)
        assert got.dtype == torch.uint64 and got.shape == expected.shape
        assert torch.equal(got.cpu(), expected)
    assert torch.equal(torch.hash_tensor(torch.tensor(2.5, device=DEV)).cpu(), torch.hash_tensor(torch.tensor(2.5)))
    with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
        torch.hash_tensor(torch.empty(0, 3, device=DEV), dim=0)
    with pytest.raises(RuntimeError, match="Unknown hash_tensor mode: 1"):
        torch.hash_tensor(x.to(DEV), mode=1)


# ---- complex reductions and indexing, unsigned sums, bool scatter_reduce, batch norm -----------

def test_complex_sums_cumsums_and_norms(no_fallback):
    torch.manual_seed(6)
    z = torch.randn(3, 4, dtype=torch.complex64)
    close(torch.sum(z[0, 0].to(DEV)), torch.sum(z[0, 0]), 0)  # 0-dim
    close(torch.sum(z[0, 0].to(DEV), dim=0), torch.sum(z[0, 0], dim=0), 0)
    close(torch.sum(z.to(DEV).conj(), dim=1), torch.sum(z.conj(), dim=1), 1e-6)
    for dim in (0, 1, -1):
        close(torch.cumsum(z.to(DEV), dim), torch.cumsum(z, dim), 1e-6)
    close(torch.cumsum(z[0, 0].to(DEV), 0), torch.cumsum(z[0, 0], 0), 0)
    close(torch.norm(z.to(DEV), p=3, dim=1), torch.norm(z, p=3, dim=1), 1e-5)
    close(torch.dist(z.to(DEV), z.flip(0).to(DEV)), torch.dist(z, z.flip(0)), 1e-5)


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_unsigned_sum_into_a_float(dtype, no_fallback):
    x = torch.randint(0, 1000, (5, 6)).to(dtype)
    for dim in (None, 0, (0, 1)):
        close(torch.sum(x.to(DEV), dim=dim, dtype=torch.float32), torch.sum(x, dim=dim, dtype=torch.float32), 0)


def test_complex_indexing_and_index_put(no_fallback):
    torch.manual_seed(7)
    z = torch.randn(4, 5, dtype=torch.complex64)
    rows, mask = torch.tensor([3, 0, 3]), z.real > 0
    close(z.to(DEV)[rows], z[rows], 0)
    close(z.to(DEV)[:, rows], z[:, rows], 0)
    close(z.to(DEV)[mask.to(DEV)], z[mask], 0)
    close(z.to(DEV).conj()[rows], z.conj()[rows], 0)
    values = torch.randn(3, 5, dtype=torch.complex64)
    for accumulate in (False, True):
        expected = z.clone().index_put_((torch.tensor([1, 2, 1]),), values, accumulate=accumulate)
        got = z.to(DEV).index_put_((torch.tensor([1, 2, 1], device=DEV),), values.to(DEV), accumulate=accumulate)
        if accumulate:
            close(got, expected, 1e-6)
        else:  # a repeated index keeps one of its values, as on CPU
            close(got[[0, 2, 3]], expected[[0, 2, 3]], 0)
    scalar = z.to(DEV)
    scalar[mask.to(DEV)] = torch.tensor(2 - 1j)
    expected = z.clone()
    expected[mask] = 2 - 1j
    close(scalar, expected, 0)


@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_of_bools(reduce, include_self, no_fallback):
    torch.manual_seed(8)
    self_, src = torch.rand(4, 6) > 0.5, torch.rand(4, 6) > 0.5
    index = torch.randint(0, 6, (4, 6))
    expected = self_.scatter_reduce(1, index, src, reduce, include_self=include_self)
    got = self_.to(DEV).scatter_reduce(1, index.to(DEV), src.to(DEV), reduce, include_self=include_self)
    assert got.dtype == torch.bool
    close(got, expected, 0)


def test_batch_norm_out_forms_and_with_update(no_fallback):
    torch.manual_seed(9)
    x, w, b = torch.randn(4, 3, 5), torch.randn(3), torch.randn(3)
    expected = torch.native_batch_norm(x, w, b, None, None, True, 0.1, 1e-5)
    outs = [torch.empty(0, device=DEV) for _ in range(3)]
    torch.native_batch_norm(x.to(DEV), w.to(DEV), b.to(DEV), None, None, True, 0.1, 1e-5, out=outs)
    for got, want in zip(outs, expected):
        close(got, want, 1e-5)
    mean, var = torch.zeros(3), torch.ones(3)
    device_mean, device_var = mean.to(DEV), var.to(DEV)
    leaf = x.clone().requires_grad_()
    want = torch.ops.aten._batch_norm_with_update(leaf, w, b, mean, var, 0.1, 1e-5)
    device_leaf = x.to(DEV).requires_grad_()
    got = torch.ops.aten._batch_norm_with_update(device_leaf, w.to(DEV), b.to(DEV), device_mean, device_var, 0.1, 1e-5)
    for g, e in zip(got[:3], want[:3]):
        close(g, e.detach(), 1e-5)
    assert got[3].numel() == 0 and got[3].dtype == want[3].dtype
    close(device_mean, mean, 1e-6)
    close(device_var, var, 1e-6)
    (grad,) = torch.autograd.grad(got[0].sin().sum(), device_leaf)
    (expected_grad,) = torch.autograd.grad(want[0].sin().sum(), leaf)
    close(grad, expected_grad, 1e-5)


# ---- 3-D adaptive pooling ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("shape,out", [((2, 3, 5, 7, 6), (2, 3, 4)), ((3, 4, 4, 4), (3, 1, 2)), ((1, 2, 3, 5, 4), (5, 7, 4))])
def test_adaptive_pool3d_and_gradients_match_cpu(dtype, shape, out, no_fallback):
    torch.manual_seed(10)
    x = torch.randn(shape, dtype=dtype)
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    for pool in (F.adaptive_avg_pool3d, F.adaptive_max_pool3d):
        leaf = x.clone().requires_grad_()
        expected = pool(leaf, out)
        (expected_grad,) = torch.autograd.grad((expected * expected).sum(), leaf)
        device_leaf = x.to(DEV).requires_grad_()
        got = pool(device_leaf, out)
        (got_grad,) = torch.autograd.grad((got * got).sum(), device_leaf)
        assert got.shape == expected.shape and got.dtype == dtype
        close(got, expected.detach(), tol)
        close(got_grad, expected_grad, tol)
    values, indices = F.adaptive_max_pool3d(x, out, return_indices=True)
    got_values, got_indices = F.adaptive_max_pool3d(x.to(DEV), out, return_indices=True)
    assert torch.equal(got_indices.cpu(), indices)  # the first maximum in (depth, row, column) order, as CPU


def test_adaptive_pool3d_ties_empty_batch_and_errors(no_fallback):
    x = torch.zeros(1, 2, 4, 4, 4)
    x[0, 0, 1:, :, :] = 1.0  # ties across depths and rows
    assert torch.equal(F.adaptive_max_pool3d(x.to(DEV), 2, return_indices=True)[1].cpu(),
                       F.adaptive_max_pool3d(x, 2, return_indices=True)[1])
    empty = torch.randn(0, 3, 4, 4, 4)
    assert F.adaptive_avg_pool3d(empty.to(DEV), 2).shape == F.adaptive_avg_pool3d(empty, 2).shape
    with pytest.raises(RuntimeError, match="Expected input to have non-zero size for non-batch dimensions"):
        F.adaptive_avg_pool3d(torch.randn(2, 3, 0, 4, 4, device=DEV), 2)
    with pytest.raises(RuntimeError, match="Expected 4D or 5D tensor"):
        F.adaptive_max_pool3d(torch.randn(3, 4, 4, device=DEV), 2)
