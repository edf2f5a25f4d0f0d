"""torch.special's orthogonal polynomials and multigammaln on neuron against CPU PyTorch, with no
CPU fallback: every kind at degrees below and above the closed-form switch, at x = +-1, outside
[-1, 1], with NaN, negative and fractional degrees, scalar forms and integer inputs."""

import pytest
import torch

S = torch.special
POLYNOMIALS = [S.chebyshev_polynomial_t, S.chebyshev_polynomial_u, S.chebyshev_polynomial_v,
               S.chebyshev_polynomial_w, S.shifted_chebyshev_polynomial_t, S.shifted_chebyshev_polynomial_u,
               S.shifted_chebyshev_polynomial_v, S.shifted_chebyshev_polynomial_w, S.hermite_polynomial_h,
               S.hermite_polynomial_he, S.laguerre_polynomial_l, S.legendre_polynomial_p]


def grid(dtype):
    x = torch.tensor([-1.0, -0.7, 0.0, 0.3, 0.5, 1.0, 1.5, -2.5, 0.999, float("nan")], dtype=torch.float64)
    n = torch.tensor([-1.0, 0.0, 1.0, 2.0, 3.0, 5.0, 7.0, 9.0, 12.0, 2.7, float("nan")], dtype=torch.float64)
    return x[:, None].expand(-1, n.numel()).to(dtype), n[None, :].expand(x.numel(), -1).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("op", POLYNOMIALS, ids=lambda f: f.__name__)
def test_polynomials(op, dtype, no_fallback):
    x, n = grid(dtype)
    expected = op(x.double(), n.double()).to(dtype)  # float64's values, rounded: CPU float32 recurs in float32
    torch.testing.assert_close(op(x.to("neuron"), n.to("neuron")).cpu(), expected, equal_nan=True,
                               rtol=1e-6 if dtype == torch.float32 else 1e-12, atol=1e-6)
    # the scalar form without the NaN row: CPU's value there is undefined (0, or uninitialized memory)
    torch.testing.assert_close(op(x[:-1].to("neuron"), 4).cpu(), op(x[:-1], 4))
    out = torch.empty_like(x, device="neuron")
    op(x.to("neuron"), n.to("neuron"), out=out)
    torch.testing.assert_close(out.cpu(), expected, equal_nan=True, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", [S.chebyshev_polynomial_t, S.hermite_polynomial_h, S.legendre_polynomial_p],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [torch.int64, torch.uint16, torch.bool], ids=str)
def test_polynomials_of_integers(op, dtype, no_fallback):
    x = torch.tensor([[0, 1, 2], [3, 1, 0]]).to(dtype)
    n = torch.tensor([[1, 3, 2], [0, 4, 5]]).to(dtype)
    torch.testing.assert_close(op(x.to("neuron"), n.to("neuron")).cpu(), op(x, n))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.uint32], ids=str)
@pytest.mark.parametrize("p", [1, 3, 5])
def test_multigammaln(p, dtype, no_fallback):
    x = (torch.arange(12, dtype=torch.float64).reshape(3, 4) * 0.7 + 2.6).to(dtype)
    torch.testing.assert_close(torch.mvlgamma(x.to("neuron"), p).cpu(), torch.mvlgamma(x, p))
    # outside the domain CPU PyTorch 2.13 checks nothing: lgamma's poles give inf
    torch.testing.assert_close(torch.mvlgamma(torch.zeros(3, device="neuron"), 3).cpu(), torch.mvlgamma(torch.zeros(3), 3))


def test_polygamma_of_unsigned(no_fallback):
    x = torch.tensor([1, 2, 7, 65535], dtype=torch.uint16)
    for n in (0, 1, 3):
        torch.testing.assert_close(torch.polygamma(n, x.to("neuron")).cpu(), torch.polygamma(n, x))
