"""Dense linear algebra on neuron against CPU PyTorch: LU factorization, LU solves, solve, inv,
det / slogdet and Cholesky (LAPACK through OpenBLAS), Cholesky solves and inverses, gradients, batch broadcasting,
inputs in either memory order (never overwritten) and CPU's errors for singular and
non-positive-definite matrices."""

import pytest
import torch

from test_nn_ops import sample

DTYPES = [torch.float32, torch.float64]


def assert_close(actual, expected):
    actual = actual.cpu()
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    tol = 1e-4 if expected.dtype == torch.float32 else 1e-10
    torch.testing.assert_close(actual, expected, atol=tol, rtol=tol)


def layouts(a):
    """The matrix in row-major and in column-major memory order (same values)."""
    return [a, a.mT.contiguous().mT]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_lu_factor_and_solve(dtype, no_fallback):
    a, b = sample((3, 5, 5)).to(dtype), sample((3, 5, 2), seed=1).to(dtype)
    for matrix in layouts(a):
        device = matrix.to("neuron")
        kept = device.cpu()
        lu, pivots = torch.linalg.lu_factor(matrix)
        device_lu, device_pivots = torch.linalg.lu_factor(device)
        assert_close(device_lu, lu)
        assert torch.equal(device_pivots.cpu(), pivots)
        for left in (True, False):
            for adjoint in (True, False):
                rhs = b if left else b.mT
                assert_close(torch.linalg.lu_solve(device_lu, device_pivots, rhs.to("neuron"), left=left, adjoint=adjoint),
                             torch.linalg.lu_solve(lu, pivots, rhs, left=left, adjoint=adjoint))
        assert torch.equal(device.cpu(), kept)  # factored on a copy
    # one factorization broadcast over a batch of right-hand sides; a rectangular LU
    lu, pivots = torch.linalg.lu_factor(a[:1])
    assert_close(torch.linalg.lu_solve(lu.to("neuron"), pivots.to("neuron"), b.to("neuron")),
                 torch.linalg.lu_solve(lu, pivots, b))
    wide = sample((2, 3, 6)).to(dtype)
    for device_value, cpu_value in zip(torch.linalg.lu_factor(wide.to("neuron")), torch.linalg.lu_factor(wide)):
        assert_close(device_value, cpu_value) if device_value.is_floating_point() else torch.equal(device_value.cpu(), cpu_value)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_solve_inv_det_slogdet(dtype, no_fallback):
    a, b = sample((4, 6, 6)).to(dtype), sample((4, 6, 3), seed=1).to(dtype)
    for matrix in layouts(a):
        device = matrix.to("neuron")
        assert_close(torch.linalg.solve(device, b.to("neuron")), torch.linalg.solve(matrix, b))
        assert_close(torch.linalg.solve(device, b[..., 0].to("neuron")), torch.linalg.solve(matrix, b[..., 0]))
        assert_close(torch.linalg.solve(device, b.mT.to("neuron"), left=False), torch.linalg.solve(matrix, b.mT, left=False))
        assert_close(torch.linalg.inv(device), torch.linalg.inv(matrix))
        assert_close(torch.linalg.det(device), torch.linalg.det(matrix))
        for device_value, cpu_value in zip(torch.linalg.slogdet(device), torch.linalg.slogdet(matrix)):
            assert_close(device_value, cpu_value)
    empty = torch.zeros(2, 0, 0, dtype=dtype)
    assert_close(torch.linalg.det(empty.to("neuron")), torch.linalg.det(empty))
    assert_close(torch.linalg.inv(empty.to("neuron")), torch.linalg.inv(empty))


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cholesky(upper, dtype, no_fallback):
    x = sample((3, 5, 5)).to(dtype)
    for matrix in layouts(x @ x.mT + 5 * torch.eye(5, dtype=dtype)):
        assert_close(torch.linalg.cholesky(matrix.to("neuron"), upper=upper), torch.linalg.cholesky(matrix, upper=upper))
    # only the triangle the factorization reads matters, as on CPU
    lopsided = (x @ x.mT + 5 * torch.eye(5, dtype=dtype)).tril() + torch.ones(5, 5, dtype=dtype).triu(1) * 7
    lopsided = lopsided.mT if upper else lopsided
    assert_close(torch.linalg.cholesky(lopsided.to("neuron"), upper=upper), torch.linalg.cholesky(lopsided, upper=upper))


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_and_inverse(upper, no_fallback):
    x = sample((2, 4, 4)).double()
    factor = torch.linalg.cholesky(x @ x.mT + 4 * torch.eye(4, dtype=torch.float64), upper=upper)
    b = sample((2, 4, 3), seed=2).double()
    assert_close(torch.cholesky_solve(b.to("neuron"), factor.to("neuron"), upper=upper), torch.cholesky_solve(b, factor, upper=upper))
    assert_close(torch.cholesky_inverse(factor.to("neuron"), upper=upper), torch.cholesky_inverse(factor, upper=upper))


@pytest.mark.parametrize("op", ["inv", "det", "slogdet", "solve", "cholesky"])
def test_gradients(op, no_fallback):
    a, b = sample((3, 5, 5)).double(), sample((3, 5, 2), seed=1).double()
    spd = a @ a.mT + 5 * torch.eye(5, dtype=torch.float64)
    functions = {
        "inv": lambda m: torch.linalg.inv(m).sum(),
        "det": lambda m: torch.linalg.det(m).sum(),
        "slogdet": lambda m: torch.linalg.slogdet(m)[1].sum(),
        "solve": lambda m: (torch.linalg.solve(m, b.to(m.device)) ** 2).sum(),
        "cholesky": lambda m: (torch.linalg.cholesky(m) * torch.arange(25.0, dtype=m.dtype, device=m.device).view(5, 5)).sum(),
    }
    base = spd if op == "cholesky" else a
    for matrix in layouts(base):
        grads = []
        for device in ("cpu", "neuron"):
            leaf = matrix.to(device).detach().requires_grad_()
            functions[op](leaf).backward()
            grads.append(leaf.grad)
        assert_close(grads[1], grads[0])


def test_errors_match_cpu():
    with pytest.raises(RuntimeError, match="not positive-definite"):
        torch.linalg.cholesky(-torch.eye(3, device="neuron"))
    singular = torch.zeros(3, 3, device="neuron")
    with pytest.raises(RuntimeError, match="singular"):
        torch.linalg.inv(singular)
    with pytest.raises(RuntimeError, match="singular"):
        torch.linalg.solve(singular, torch.ones(3, device="neuron"))
    info = torch.linalg.cholesky_ex(-torch.eye(3, device="neuron")).info
    assert info.item() == 1
    with pytest.raises(RuntimeError, match="square"):
        torch.linalg.inv(torch.ones(2, 3, device="neuron"))
    assert torch.linalg.det(singular).item() == 0.0


@pytest.mark.parametrize("shape", [(3, 5, 5), (2, 4, 3), (2, 3, 6)])
def test_lu_unpack_and_its_gradient(shape, no_fallback):
    a = sample(shape).double()
    lu, pivots = torch.linalg.lu_factor(a)
    for device_value, cpu_value in zip(torch.lu_unpack(lu.to("neuron"), pivots.to("neuron")), torch.lu_unpack(lu, pivots)):
        assert_close(device_value, cpu_value)
    p, lower, upper = torch.linalg.lu(a.to("neuron"))
    assert_close(p @ lower @ upper, a)
    grads = []
    for device in ("cpu", "neuron"):
        leaf = a.to(device).detach().requires_grad_()
        factors = torch.linalg.lu_factor(leaf).LU
        (factors * torch.arange(factors.numel(), dtype=factors.dtype, device=device).view(factors.shape)).sum().backward()
        grads.append(leaf.grad)
    assert_close(grads[1], grads[0])
    with pytest.raises(RuntimeError, match="pivots must be between"):
        torch.lu_unpack(lu.to("neuron"), torch.full_like(pivots, 9).to("neuron"))[0].cpu()


@pytest.mark.parametrize("shape", [(2, 6, 4), (2, 4, 6), (5, 5)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr(shape, mode, no_fallback):
    a = sample(shape).double()
    for device_value, cpu_value in zip(torch.linalg.qr(a.to("neuron"), mode=mode), torch.linalg.qr(a, mode=mode)):
        assert_close(device_value, cpu_value)
    if mode != "r":
        grads = []
        for device in ("cpu", "neuron"):
            leaf = a.to(device).detach().requires_grad_()
            q, r = torch.linalg.qr(leaf, mode="reduced")
            (q.sum() + (r * r).sum()).backward()
            grads.append(leaf.grad)
        assert_close(grads[1], grads[0])
