"""torch.special's Bessel, Airy, normal-distribution and Hurwitz zeta functions on neuron with no
CPU fallback: against CPU PyTorch for dtypes, special values and out=, and against SciPy for
accuracy (float64 to ~1e-13; float32 to 1 ulp of SciPy's value rounded). CPU's own float64
kernels are less accurate than that in places (airy_ai(-2.5) is 2e-6 off, J0 at large x loses
its phase), so the CPU comparisons of ordinary values are loose."""

import math

import numpy as np
import pytest
import torch

S = torch.special
OSCILLATING = {"bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "airy_ai"}
UNARY = ["bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
         "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
         "spherical_bessel_j0", "airy_ai", "erfcx", "log_ndtr", "ndtri"]


def scipy_reference(name):
    sp = pytest.importorskip("scipy.special")
    return {"bessel_j0": sp.j0, "bessel_j1": sp.j1, "bessel_y0": sp.y0, "bessel_y1": sp.y1,
            "modified_bessel_i0": sp.i0, "modified_bessel_i1": sp.i1, "modified_bessel_k0": sp.k0,
            "modified_bessel_k1": sp.k1, "scaled_modified_bessel_k0": sp.k0e, "scaled_modified_bessel_k1": sp.k1e,
            "spherical_bessel_j0": lambda x: sp.spherical_jn(0, x), "airy_ai": lambda x: sp.airy(x)[0],
            "erfcx": sp.erfcx, "log_ndtr": sp.log_ndtr, "ndtri": sp.ndtri}[name]


def grid(name):
    """Small, moderate and large arguments of both signs (probabilities in [0, 1] for ndtri)."""
    if name == "ndtri":
        return np.concatenate([np.linspace(0, 1, 201), np.geomspace(1e-300, 0.4, 120),
                               1 - np.geomspace(1e-16, 0.4, 60)])
    tiny = np.geomspace(1e-300, 1e-3, 40)
    x = np.concatenate([np.linspace(-40, 40, 641), tiny, -tiny, [60, 100, 333.3, 700, 1000, -100, -1000]])
    if name == "erfcx":
        x = np.concatenate([x, [1e5, 1e20, 1e300, -26.5]])
    if name == "log_ndtr":
        x = np.concatenate([x, [-1e5, -1e150]])
    return x


def amplitude(name, x):
    """The envelope of an oscillating function, which sets the scale of its error near zeros."""
    a = np.abs(x)
    if name == "airy_ai":
        return np.where(x < -1, np.maximum(a, 1) ** -0.25 / math.sqrt(math.pi), 0)
    return np.where(a > 1, np.sqrt(2 / (math.pi * np.maximum(a, 1))), 1)


@pytest.mark.parametrize("name", UNARY)
def test_float64_against_scipy(name, no_fallback):
    x = grid(name)
    expected = scipy_reference(name)(x)
    actual = getattr(S, name)(torch.from_numpy(x).to("neuron")).cpu().numpy()
    assert np.array_equal(np.isnan(actual), np.isnan(expected))
    infinite = np.isinf(expected)
    assert np.array_equal(actual[infinite], expected[infinite])
    finite = np.isfinite(expected) & (np.abs(expected) > 1e-300)
    assert (np.abs(actual[np.abs(expected) <= 1e-300]) <= 1e-300).all()  # SciPy flushes some subnormals
    scale = np.abs(expected)
    if name in OSCILLATING:
        scale = np.maximum(scale, amplitude(name, x))
    error = np.abs(actual[finite] - expected[finite]) / scale[finite]
    assert error.max() < 5e-13, (x[finite][error.argmax()], error.max())


@pytest.mark.parametrize("name", UNARY)
def test_float32_rounds_to_scipy(name, no_fallback):
    x = torch.from_numpy(grid(name)).float()
    x = x[x.isfinite()]
    expected = torch.from_numpy(scipy_reference(name)(x.double().numpy())).float()
    actual = getattr(S, name)(x.to("neuron")).cpu()
    normal = expected.isfinite() & (expected.abs() > torch.finfo(torch.float32).tiny)
    ulp = torch.finfo(torch.float32).eps * expected.abs().clamp_min(torch.finfo(torch.float32).tiny)
    # within 1 ulp (a value on a rounding boundary of SciPy's own double error may round either way)
    assert ((actual - expected).abs()[normal] <= ulp[normal]).all()
    assert torch.equal(actual[~normal].isnan(), expected[~normal].isnan())


SPECIAL_VALUES = [0.0, -0.0, -1.0, -2.5, 1e-300, 1e-20, 0.5, 1.0, 2.0, 25.0, 700.0, math.inf, -math.inf, math.nan]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("name", UNARY)
def test_against_cpu(name, dtype, no_fallback):
    op = getattr(S, name)
    special = torch.tensor(SPECIAL_VALUES, dtype=dtype)
    actual, expected = op(special.to("neuron")).cpu(), op(special)
    assert actual.dtype == expected.dtype
    # CPU's float32 Bessel functions at 700 are 2e-7 off
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6 if dtype == torch.float32 else 1e-12,
                               equal_nan=True)
    zero = expected == 0
    assert torch.equal(actual[zero].signbit(), expected[zero].signbit())
    x = torch.linspace(0, 1, 301, dtype=dtype) if name == "ndtri" else torch.linspace(-30, 30, 301, dtype=dtype)
    # CPU's own error: up to 3e-6 absolute (airy_ai in float64), float32 kernels in float32
    torch.testing.assert_close(op(x.to("neuron")).cpu(), op(x), rtol=1e-4, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint16, torch.bool], ids=str)
@pytest.mark.parametrize("name", UNARY)
def test_integer_inputs_give_default_float(name, dtype, no_fallback):
    op = getattr(S, name)
    x = torch.tensor([0, 1, 0, 1]) if dtype == torch.bool or name == "ndtri" else torch.tensor([0, 1, 2, 3, 7, 20])
    x = x.to(dtype)
    actual, expected = op(x.to("neuron")).cpu(), op(x)
    assert actual.dtype == expected.dtype == torch.float32
    torch.testing.assert_close(actual, expected, equal_nan=True)


@pytest.mark.parametrize("name", UNARY)
def test_out_non_contiguous(name, no_fallback):
    op = getattr(S, name)
    x = torch.linspace(0.01, 0.99, 12) if name == "ndtri" else torch.linspace(0.1, 9, 12)
    out = torch.full((12, 2), -7.0, device="neuron")[:, 0]
    assert op(x.to("neuron"), out=out) is out
    torch.testing.assert_close(out.cpu(), op(x), rtol=1e-5, atol=1e-6)
    # a float64 out= of a float32 input: computed in float32 and widened, as on CPU
    wide = torch.empty(3, 12, dtype=torch.float64, device="neuron").t()[:, 1]
    op(x.to("neuron"), out=wide)
    torch.testing.assert_close(wide.cpu(), op(x, out=torch.empty(12, dtype=torch.float64)), rtol=1e-5, atol=1e-6)


ZETA_X = [1.0, 1.5, 2.0, 3.0, 4.5, 10.0, 60.0, 0.5, -2.0, math.inf, math.nan]
ZETA_Q = [1.0, 0.3, 2.5, 1e4, 0.0, -0.0, -1.0, -1.5, -2.25, -10.7, math.inf, -math.inf, math.nan, 1e-300]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_zeta_against_cpu(dtype, no_fallback):
    x = torch.tensor(ZETA_X, dtype=dtype)[:, None].expand(-1, len(ZETA_Q))
    q = torch.tensor(ZETA_Q, dtype=dtype)[None, :].expand(len(ZETA_X), -1)
    torch.testing.assert_close(S.zeta(x.to("neuron"), q.to("neuron")).cpu(), S.zeta(x, q),
                               rtol=1e-12 if dtype == torch.float64 else 1e-5, atol=0, equal_nan=True)
    qs = torch.tensor([0.3, 1.0, 2.5, -1.5], dtype=dtype)
    torch.testing.assert_close(S.zeta(3.0, qs.to("neuron")).cpu(), S.zeta(3.0, qs))
    torch.testing.assert_close(S.zeta(qs.abs().to("neuron") + 1, 2).cpu(), S.zeta(qs.abs() + 1, 2))
    out = torch.empty(len(ZETA_X), 2 * len(ZETA_Q), dtype=dtype, device="neuron")[:, ::2]
    S.zeta(x.to("neuron"), q.to("neuron"), out=out)
    torch.testing.assert_close(out.cpu(), S.zeta(x, q), rtol=1e-5, atol=0, equal_nan=True)


def test_zeta_integer_inputs(no_fallback):
    x, q = torch.tensor([2, 3, 4, 1, 0]), torch.tensor([1, 2, -1, 3, 1])
    actual, expected = S.zeta(x.to("neuron"), q.to("neuron")).cpu(), S.zeta(x, q)
    assert actual.dtype == expected.dtype == torch.float32
    torch.testing.assert_close(actual, expected, equal_nan=True)


def test_zeta_against_scipy(no_fallback):
    sp = pytest.importorskip("scipy.special")
    rng = np.random.default_rng(0)
    x = np.concatenate([1 + np.geomspace(1e-6, 1, 100), rng.uniform(1, 80, 200)])
    q = np.concatenate([np.geomspace(1e-3, 1e6, 150), rng.uniform(0, 4, 150)])
    actual = S.zeta(torch.from_numpy(x).to("neuron"), torch.from_numpy(q).to("neuron")).cpu().numpy()
    expected = sp.zeta(x, q)
    normal = np.abs(expected) > 1e-300
    assert (np.abs(actual - expected)[normal] <= 1e-12 * np.abs(expected)[normal]).all()
    # negative q: the sum of the terms on either side of 0 (integer x only)
    for s in (2.0, 3.0, 6.0, 7.0):
        for a in (-0.5, -1.5, -2.25, -10.7):
            terms = sum((a + k) ** -s for k in range(int(math.ceil(-a))))
            want = terms + sp.zeta(s, a + math.ceil(-a))
            got = S.zeta(torch.tensor(s, dtype=torch.float64, device="neuron"), a).item()
            assert got == pytest.approx(want, rel=1e-12)
