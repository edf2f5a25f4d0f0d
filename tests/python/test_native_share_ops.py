"""Ops that ran through the counted CPU fallback in the conformance run, now native: logspace,
torch.max / torch.min with out= and no dim, narrow_copy's out=, mode, angle of real tensors,
frexp, nextafter, igamma / igammac. Each is compared with CPU PyTorch (bitwise where CPU is
exact, mode's index among ties included), out= into strided and wrongly sized tensors, and CPU's
errors; igamma / igammac also against SciPy."""

import math
import warnings

import numpy as np
import pytest
import torch

DEV = "neuron"
INF, NAN = math.inf, math.nan


def same(actual, expected):
    """Bitwise equal values (NaN equal to NaN), dtypes and shapes."""
    actual = actual.cpu()
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)


def same_error(cpu_call, neuron_call):
    """Both calls raise the same exception type with the same message."""
    with pytest.raises(Exception) as expected:
        cpu_call()
    with pytest.raises(type(expected.value)) as actual:
        neuron_call()
    assert str(actual.value).split("\n")[0] == str(expected.value).split("\n")[0]


def strided(shape, dtype):
    """A non-contiguous neuron tensor of `shape` (every other element of a larger one)."""
    return torch.zeros(*shape[:-1], 2 * shape[-1], dtype=dtype, device=DEV)[..., ::2]


# ---- logspace ---------------------------------------------------------------------------------

LOGSPACE_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16,
                   torch.float32, torch.float64, torch.complex64, torch.complex128]
LOGSPACE_CASES = [(0, 2, 5, 10.0), (-2.5, 3.7, 11, 2.0), (0.5, 3.7, 5, 10.0), (3, -3, 7, 10.0), (0, 3, 4, -2.0),
                  (0, 3, 4, -2.5), (0, 20, 5, 2.0), (0, 80, 5, 2.0), (-5, 3, 4, 10.0), (1, 1, 3, 10.0),
                  (0, 10, 2, 0.5), (-1.25, 40.5, 301, 1.5)]


@pytest.mark.parametrize("dtype", LOGSPACE_DTYPES)
def test_logspace_matches_cpu_bitwise(dtype, no_fallback):
    for start, end, steps, base in LOGSPACE_CASES:
        try:
            expected = torch.logspace(start, end, steps, base=base, dtype=dtype)
        except RuntimeError:  # a bound out of the dtype's range: the same error
            same_error(lambda: torch.logspace(start, end, steps, base=base, dtype=dtype),
                       lambda: torch.logspace(start, end, steps, base=base, dtype=dtype, device=DEV))
            continue
        same(torch.logspace(start, end, steps, base=base, dtype=dtype, device=DEV), expected)
    if dtype.is_complex:
        for start, end in [(1 + 1j, 3 - 2j), (-2j, 2.5 + 0.5j)]:
            same(torch.logspace(start, end, 9, base=3.0, dtype=dtype, device=DEV),
                 torch.logspace(start, end, 9, base=3.0, dtype=dtype))
    same(torch.logspace(1.5, 9, 1, dtype=dtype, device=DEV), torch.logspace(1.5, 9, 1, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.complex64])
def test_logspace_out_strided_resized_and_tensor_bounds(dtype, no_fallback):
    out = strided((6,), dtype)
    torch.logspace(-1, 2, 6, base=3.0, out=out)
    assert out.stride() == (2,)
    same(out, torch.logspace(-1, 2, 6, base=3.0, dtype=dtype))
    out = torch.zeros(2, 3, dtype=dtype, device=DEV)  # `steps` elements: keeps its shape, as on CPU
    expected = torch.logspace(0, 2, 6, out=torch.zeros(2, 3, dtype=dtype))
    same(torch.logspace(0, 2, 6, out=out), expected)
    out = torch.zeros(3, dtype=dtype, device=DEV)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # CPU resizes without a warning
        torch.logspace(0, 2, 7, out=out)
    same(out, torch.logspace(0, 2, 7, dtype=dtype))
    start, end = torch.tensor(0.5), torch.tensor(2.25)
    same(torch.logspace(start.to(DEV), end.to(DEV), 5, base=2.0, dtype=dtype, device=DEV),
         torch.logspace(start, end, 5, base=2.0, dtype=dtype))


def test_logspace_errors_match_cpu(no_fallback):
    for dtype in [torch.bool, torch.uint16, torch.uint32, torch.uint64]:
        same_error(lambda: torch.logspace(0, 2, 3, dtype=dtype), lambda: torch.logspace(0, 2, 3, dtype=dtype, device=DEV))
    same(torch.logspace(0, 2, 1, dtype=torch.bool, device=DEV), torch.logspace(0, 2, 1, dtype=torch.bool))
    same_error(lambda: torch.logspace(0, 2, -1), lambda: torch.logspace(0, 2, -1, device=DEV))
    same_error(lambda: torch.logspace(300, 3, 4, dtype=torch.int8), lambda: torch.logspace(300, 3, 4, dtype=torch.int8, device=DEV))
    same_error(lambda: torch.logspace(300.0, 3, 1, dtype=torch.int8),
               lambda: torch.logspace(300.0, 3, 1, dtype=torch.int8, device=DEV))


# ---- max / min with out= and no dim -----------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int8,
                                   torch.uint8, torch.bool])
def test_max_min_unary_out(dtype, no_fallback):
    x = (torch.randn(5, 7, generator=torch.Generator().manual_seed(0)) * 20).to(dtype)
    for op in (torch.max, torch.min):
        out = torch.empty(0, dtype=dtype, device=DEV)
        same(op(x.to(DEV).t(), out=out), op(x.t()))
        wide = torch.float64 if dtype.is_floating_point else torch.int64
        out = torch.empty(0, dtype=wide, device=DEV)
        op(x.to(DEV), out=out)
        same(out, op(x, out=torch.empty(0, dtype=wide)))
        empty_out = torch.empty(0, dtype=dtype, device=DEV)  # an empty input gives the identity
        same(op(torch.empty(0, dtype=dtype, device=DEV), out=empty_out),
             op(torch.empty(0, dtype=dtype), out=torch.empty(0, dtype=dtype)))
    if dtype.is_floating_point:
        y = torch.tensor([1.0, NAN, -INF], dtype=dtype)
        same(torch.max(y.to(DEV), out=torch.empty(0, dtype=dtype, device=DEV)), torch.max(y))


def test_max_min_unary_out_resizes_and_checks_like_cpu(no_fallback):
    x = torch.tensor([[1.5, 2.0], [3.0, -1.0]])
    out = strided((2,), torch.float32)
    with pytest.warns(UserWarning, match="was resized"):
        torch.max(x.to(DEV), out=out)
    assert out.shape == ()
    same(out, torch.max(x))
    for op in (torch.max, torch.min):
        same_error(lambda: op(x, out=torch.empty(0, dtype=torch.long)),
                   lambda: op(x.to(DEV), out=torch.empty(0, dtype=torch.long, device=DEV)))
        same_error(lambda: op(x, out=torch.empty(0, dtype=torch.bool)),
                   lambda: op(x.to(DEV), out=torch.empty(0, dtype=torch.bool, device=DEV)))


# ---- narrow_copy's out= ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
                                   torch.uint8, torch.bool, torch.complex64, torch.uint16])
def test_narrow_copy_out(dtype, no_fallback):
    x = torch.arange(60).reshape(3, 4, 5).to(dtype)
    for dim, start, length in [(0, 1, 2), (1, -3, 2), (2, 0, 5), (-1, 4, 1), (1, 4, 0), (2, -5, 3)]:
        out = torch.empty(0, dtype=dtype, device=DEV)
        same(torch.narrow_copy(x.to(DEV), dim, start, length, out=out),
             torch.narrow_copy(x, dim, start, length, out=torch.empty(0, dtype=dtype)))
    out = strided((3, 2, 5), dtype)
    torch.narrow_copy(x.to(DEV), 1, 1, 2, out=out)
    assert out.stride() == (20, 10, 2)
    same(out, torch.narrow_copy(x, 1, 1, 2))
    out = torch.empty(7, dtype=dtype, device=DEV)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # CPU resizes without a warning
        torch.narrow_copy(x.to(DEV).transpose(0, 2), 0, 1, 3, out=out)
    same(out, torch.narrow_copy(x.transpose(0, 2), 0, 1, 3))


def test_narrow_copy_out_errors_match_cpu(no_fallback):
    x = torch.ones(3)
    for args, out_dtype in [((0, 0, 1), torch.long), ((1, 0, 1), torch.float32), ((-2, 0, 1), torch.float32),
                            ((0, 4, 1), torch.float32), ((0, -4, 1), torch.float32), ((0, 1, 3), torch.float32),
                            ((0, 1, -1), torch.float32)]:
        same_error(lambda: torch.narrow_copy(x, *args, out=torch.empty(0, dtype=out_dtype)),
                   lambda: torch.narrow_copy(x.to(DEV), *args, out=torch.empty(0, dtype=out_dtype, device=DEV)))
    same_error(lambda: torch.narrow_copy(torch.tensor(1.0), 0, 0, 1, out=torch.empty(0)),
               lambda: torch.narrow_copy(torch.tensor(1.0, device=DEV), 0, 0, 1, out=torch.empty(0, device=DEV)))


# ---- mode ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
                                   torch.int16, torch.int8, torch.uint8, torch.bool])
def test_mode_values_and_tie_indices_match_cpu(dtype, no_fallback):
    g = torch.Generator().manual_seed(1)
    for shape, high in [((6, 37), 4), ((4, 3, 70), 9), ((2, 200), 3), ((3, 17), 40), ((9, 5), 2)]:
        x = torch.randint(0, high, shape, generator=g).to(dtype)
        for dim in range(-1, len(shape)):
            for keepdim in (False, True):
                values, indices = torch.mode(x.to(DEV), dim, keepdim)
                expected = torch.mode(x, dim, keepdim)
                same(values, expected.values)
                same(indices, expected.indices)
    x = torch.randint(0, 3, (5, 30), generator=g).to(dtype)
    got = torch.mode(x.to(DEV).t(), 0)  # a non-contiguous input
    same(got.indices, torch.mode(x.t(), 0).indices)
    if dtype.is_floating_point:
        y = torch.tensor([[NAN, 1.0, NAN, 1.0, -0.0, 0.0, 0.0], [NAN, NAN, INF, INF, 2.0, NAN, -INF]], dtype=dtype)
        same(torch.mode(y.to(DEV)).values, torch.mode(y).values)
        same(torch.mode(y.to(DEV)).indices, torch.mode(y).indices)


def test_mode_edges_out_and_errors(no_fallback):
    same(torch.mode(torch.tensor(3.0, device=DEV)).indices, torch.mode(torch.tensor(3.0)).indices)
    for shape, dim, keepdim in [((2, 0), 0, False), ((0, 3), 1, False), ((0, 3), 1, True)]:
        got, expected = torch.mode(torch.empty(shape, device=DEV), dim, keepdim), torch.mode(torch.empty(shape), dim, keepdim)
        same(got.values, expected.values)
        same(got.indices, expected.indices)
    x = torch.randint(0, 3, (4, 25), generator=torch.Generator().manual_seed(2)).float()
    values, indices = strided((4,), torch.float32), strided((4,), torch.int64)
    torch.mode(x.to(DEV), 1, out=(values, indices))
    assert values.stride() == (2,)
    same(values, torch.mode(x, 1).values)
    same(indices, torch.mode(x, 1).indices)
    same_error(lambda: torch.mode(torch.empty(0)), lambda: torch.mode(torch.empty(0, device=DEV)))
    for dtype in (torch.uint16, torch.uint64, torch.complex64):
        x = torch.ones(2, 3, dtype=dtype)
        same_error(lambda: torch.mode(x), lambda: torch.mode(x.to(DEV)))
        same(torch.mode(x[0, 0].to(DEV)).values, torch.mode(x[0, 0]).values)  # 0-dim: returned as is
    same_error(lambda: torch.mode(torch.ones(2, 3), 5), lambda: torch.mode(torch.ones(2, 3, device=DEV), 5))


# ---- angle of real tensors ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int8,
                                   torch.uint8, torch.bool, torch.uint16])
def test_angle_of_real_tensors(dtype, no_fallback):
    values = [-1.0, 0.0, 2.0, -0.0, 3.0, -7.0]
    if dtype.is_floating_point:
        values += [NAN, -INF, INF, -1e-30]
    x = torch.tensor(values).to(dtype) if dtype != torch.uint16 else torch.tensor([0, 1, 65535], dtype=dtype)
    same(torch.angle(x.to(DEV)), torch.angle(x))
    out = strided((x.numel(),), torch.float64)
    torch.angle(x.to(DEV), out=out)
    same(out, torch.angle(x, out=torch.empty(0, dtype=torch.float64)))


def test_angle_out_errors_match_cpu(no_fallback):
    x = torch.tensor([-1, 0, 2])
    same_error(lambda: torch.angle(x, out=torch.empty(0, dtype=torch.long)),
               lambda: torch.angle(x.to(DEV), out=torch.empty(0, dtype=torch.long, device=DEV)))


# ---- frexp, nextafter --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_frexp_matches_cpu(dtype, no_fallback):
    finfo = torch.finfo(dtype)
    x = torch.tensor([0.0, -0.0, INF, -INF, NAN, 3.5, -0.75, 1.0, finfo.tiny, finfo.tiny / 4, finfo.max, -finfo.min,
                      finfo.eps, 1e-3, 12345.0], dtype=dtype)
    x = torch.cat([x, torch.randn(50, generator=torch.Generator().manual_seed(3)).to(dtype) * 100])
    mantissa, exponent = torch.frexp(x.to(DEV))
    expected = torch.frexp(x)
    same(mantissa, expected.mantissa)
    same(exponent, expected.exponent)
    m, e = strided((x.numel(),), dtype), strided((x.numel(),), torch.int32)
    torch.frexp(x.to(DEV), out=(m, e))
    assert m.stride() == (2,) and e.stride() == (2,)
    same(m, expected.mantissa)
    same(e, expected.exponent)


def test_frexp_errors_match_cpu(no_fallback):
    x = torch.ones(3)
    same_error(lambda: torch.frexp(x.long()), lambda: torch.frexp(x.long().to(DEV)))
    same_error(lambda: torch.frexp(x, out=(torch.empty(0, dtype=torch.double), torch.empty(0, dtype=torch.int))),
               lambda: torch.frexp(x.to(DEV), out=(torch.empty(0, dtype=torch.double, device=DEV),
                                                    torch.empty(0, dtype=torch.int, device=DEV))))
    same_error(lambda: torch.frexp(x, out=(torch.empty(0), torch.empty(0, dtype=torch.long))),
               lambda: torch.frexp(x.to(DEV), out=(torch.empty(0, device=DEV), torch.empty(0, dtype=torch.long, device=DEV))))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_nextafter_matches_cpu_bitwise(dtype, no_fallback):
    finfo = torch.finfo(dtype)
    points = [0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, finfo.tiny, -finfo.tiny, finfo.max, 2.5, -3.75]
    a = torch.tensor(points, dtype=dtype).repeat_interleave(len(points))
    b = torch.tensor(points, dtype=dtype).repeat(len(points))
    same(torch.nextafter(a.to(DEV), b.to(DEV)), torch.nextafter(a, b))
    out = strided((a.numel(),), dtype)
    torch.nextafter(a.to(DEV), b.to(DEV), out=out)
    same(out, torch.nextafter(a, b))
    # broadcasting against a 0-dim tensor of another float dtype
    same(torch.nextafter(a.to(DEV), torch.tensor(0.0, dtype=torch.float64, device=DEV)),
         torch.nextafter(a, torch.tensor(0.0, dtype=torch.float64)))


def test_nextafter_igamma_errors_match_cpu(no_fallback):
    for op in (torch.nextafter, torch.igamma, torch.igammac):
        for dtype in (torch.int64, torch.bool):
            x = torch.ones(2, dtype=dtype)
            same_error(lambda: op(x, x), lambda: op(x.to(DEV), x.to(DEV)))
        y = torch.ones(2, dtype=torch.float64)
        same_error(lambda: op(y, y, out=torch.empty(0, dtype=torch.long)),
                   lambda: op(y.to(DEV), y.to(DEV), out=torch.empty(0, dtype=torch.long, device=DEV)))


# ---- igamma / igammac --------------------------------------------------------------------------

def test_igamma_special_values_match_cpu(no_fallback):
    a = torch.tensor([0.0, 1, -1, 0, INF, 1, NAN, 2, 0, INF, 1, 3, 5], dtype=torch.float64)
    x = torch.tensor([1.0, 0, 1, 0, 1, INF, 1, -1, INF, INF, NAN, 1e-300, 0], dtype=torch.float64)
    for op in (torch.igamma, torch.igammac):
        same(op(a.to(DEV), x.to(DEV)), op(a, x))


def incomplete_gamma_grid():
    a = np.concatenate([np.geomspace(1e-3, 150, 31), [0.5, 1, 1.5, 2, 7.25, 9.99, 10, 10.01, 50, 123.4]])
    x = np.concatenate([np.geomspace(1e-4, 600, 37), [0.5, 1, 2, 10, 11, 100]])
    aa, xx = np.meshgrid(a, x)
    return aa.ravel(), xx.ravel()


@pytest.mark.parametrize("upper", [False, True])
def test_igamma_float64_against_scipy(upper, no_fallback):
    """Within 3e-13 of SciPy where the value is a normal double (1.6e-13 seen; for a in the
    hundreds SciPy's own error reaches 8e-13 against mpmath, ours 1e-13)."""
    sp = pytest.importorskip("scipy.special")
    a, x = incomplete_gamma_grid()
    op = torch.igammac if upper else torch.igamma
    got = op(torch.tensor(a, device=DEV), torch.tensor(x, device=DEV)).cpu().numpy()
    reference = (sp.gammaincc if upper else sp.gammainc)(a, x)
    meaningful = reference > 1e-290
    error = np.abs(got - reference)[meaningful] / reference[meaningful]
    assert error.max() < 3e-13, (a[meaningful][error.argmax()], x[meaningful][error.argmax()], error.max())
    assert np.median(error) < 1e-15


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_igamma_matches_cpu_within_dtype_tolerance(dtype, no_fallback):
    g = torch.Generator().manual_seed(4)
    a = (torch.rand(400, generator=g, dtype=torch.float64) * 12).to(dtype)
    x = (torch.rand(400, generator=g, dtype=torch.float64) * 15).to(dtype)
    for op in (torch.igamma, torch.igammac):
        got = op(a.to(DEV), x.to(DEV))
        assert got.dtype == dtype
        torch.testing.assert_close(got.cpu(), op(a, x), equal_nan=True)
        out = strided((400,), dtype)
        op(a.to(DEV), x.to(DEV), out=out)
        torch.testing.assert_close(out.cpu(), op(a, x), equal_nan=True)
    # a float32 tensor with an int64 one promotes to float32, as on CPU
    mixed = torch.igamma(a.float().to(DEV), torch.ones(400, dtype=torch.long, device=DEV))
    same(mixed, torch.igamma(a.float().to(DEV), torch.ones(400, device=DEV)).cpu())
