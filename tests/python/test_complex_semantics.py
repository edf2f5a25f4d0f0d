"""Complex tensors on neuron as CPU PyTorch computes them: random fills (real and imaginary parts
drawn separately; randn's parts each of variance 1/2), and add / sub / mean where infinities and
NaNs meet (CPU multiplies by the complex alpha and divides the sum by the count as complex
numbers, so a NaN or infinity in one part reaches the other)."""

import pytest
import torch

DEV = "neuron"
COMPLEX = [torch.complex64, torch.complex128]


@pytest.mark.parametrize("dtype", COMPLEX)
def test_randn_complex_parts_have_half_variance(dtype):
    torch.manual_seed(0)
    z = torch.randn(200_000, dtype=dtype, device=DEV).cpu()
    assert z.dtype == dtype
    re, im = z.real.double(), z.imag.double()
    for part in (re, im):
        assert abs(float(part.mean())) < 0.01
        assert abs(float(part.var()) - 0.5) < 0.01
    assert abs(float(torch.corrcoef(torch.stack([re, im]))[0, 1])) < 0.01
    assert abs(float(z.abs().pow(2).double().mean()) - 1.0) < 0.02


@pytest.mark.parametrize("dtype", COMPLEX)
def test_rand_and_uniform_complex_fill_both_parts(dtype):
    z = torch.rand(50_000, dtype=dtype, device=DEV).cpu()
    for part in (z.real, z.imag):
        assert float(part.min()) >= 0.0 and float(part.max()) < 1.0
        assert abs(float(part.double().mean()) - 0.5) < 0.01
    u = torch.empty(50_000, dtype=dtype, device=DEV).uniform_(-3, -1).cpu()
    for part in (u.real, u.imag):
        assert float(part.min()) >= -3.0 and float(part.max()) < -1.0


@pytest.mark.parametrize("dtype", COMPLEX)
def test_normal_complex_mean_and_std(dtype):
    z = torch.empty(100_000, dtype=dtype, device=DEV).normal_(2.0, 4.0).cpu()
    for part in (z.real.double(), z.imag.double()):
        assert abs(float(part.mean()) - 2.0) < 0.05
        assert abs(float(part.var()) - 8.0) < 0.2  # variance 16 / 2 per part


def _special_values(dtype):
    vals = torch.tensor([-3.0, -0.0, 0.0, 2.5, float("inf"), -float("inf"), float("nan"), 1e30])
    a, b = (x.flatten() for x in torch.meshgrid(vals, vals, indexing="ij"))
    return torch.complex(a, b).to(dtype), torch.complex(b.flip(0), a).to(dtype)


def _assert_same_including_nan(actual, expected):
    torch.testing.assert_close(actual, expected, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("alpha", [1, 2, -0.5])
def test_add_sub_with_infinities_match_cpu(dtype, alpha):
    x, y = _special_values(dtype)
    for fn in (torch.add, torch.sub):
        _assert_same_including_nan(fn(x.to(DEV), y.to(DEV), alpha=alpha).cpu(), fn(x, y, alpha=alpha))
    _assert_same_including_nan((x.to(DEV) - y.to(DEV)).cpu(), x - y)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_mean_with_infinities_matches_cpu(dtype):
    x, _ = _special_values(dtype)
    x = x.reshape(8, 8)
    _assert_same_including_nan(x.to(DEV).mean(1).cpu(), x.mean(1))
    _assert_same_including_nan(x.to(DEV).mean().cpu(), x.mean())
    finite = torch.randn(6, 5, dtype=dtype)
    torch.testing.assert_close(finite.to(DEV).mean(0).cpu(), finite.mean(0))
