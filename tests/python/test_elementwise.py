"""Native pointwise kernels against CPU PyTorch: broadcasting, promotion, host scalars, out=,
in-place, strided and large (multi-threaded) inputs, and that none of them fall back."""

import pytest
import torch

import torchneuron
from tolerances import assert_close

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32, torch.uint8]


def sample(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 3).to(dtype)
    return torch.randint(0, 20, shape, generator=g).to(dtype)


def assert_same(device_result, cpu_result):
    actual = device_result.cpu()
    assert actual.dtype == cpu_result.dtype and actual.shape == cpu_result.shape
    if cpu_result.is_floating_point():
        assert_close(actual, cpu_result, equal_nan=True)  # assert_close's per-dtype defaults
    else:
        assert torch.equal(actual, cpu_result)


BINARY = [
    lambda a, b: a + b,
    lambda a, b: torch.add(a, b, alpha=2),
    lambda a, b: a - b,
    lambda a, b: a * b,
    lambda a, b: torch.maximum(a, b),
    lambda a, b: torch.minimum(a, b),
    lambda a, b: a == b,
    lambda a, b: a < b,
    lambda a, b: a >= b,
    lambda a, b: torch.logical_and(a, b),
    lambda a, b: torch.where(a > b, a, b),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("index", range(len(BINARY)))
def test_binary_broadcast(dtype, index, no_fallback):
    op = BINARY[index]
    a, b = sample((4, 1, 5), dtype, 1), sample((3, 1), dtype, 2)
    assert_same(op(a.to("neuron"), b.to("neuron")), op(a, b))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("name", ["exp", "log1p", "tanh", "sigmoid", "sqrt", "rsqrt", "sin", "erf",
                                  "floor", "round", "relu", "neg", "abs", "reciprocal"])
def test_unary_float(dtype, name, no_fallback):
    x = sample((6, 7), dtype, 3)
    if name in ("sqrt", "rsqrt", "log1p"):
        x = x.abs()
    op = getattr(torch, name)
    assert_same(op(x.to("neuron")), op(x))


def float_range():
    """Every 4099th float32 from the smallest subnormal to the largest finite one, both signs,
    and special values."""
    bits = torch.arange(1, 0x7F800000, 4099, dtype=torch.int64).to(torch.int32)
    positive = bits.view(torch.float32)
    inf, nan = float("inf"), float("nan")
    special = torch.tensor([0.0, -0.0, inf, -inf, nan, 1.0, -1.0, 2.0, 0.5, 1e-7, -1e-7, -0.9999999, 3e38])
    return torch.cat([positive, -positive, special])


def ulps_from_exact(result, exact):
    """|result - exact| in units of the last place of exact rounded to float32; 0 where both are
    the same infinity or both NaN."""
    rounded = exact.float()
    spacing = (torch.nextafter(rounded.abs(), torch.tensor(float("inf"))) - rounded.abs()).double()
    error = (result.double() - exact).abs() / spacing
    same_special = (result == rounded) | (result.isnan() & rounded.isnan())
    return torch.where(same_special, torch.zeros_like(error), error)


def test_float32_exp_rounds_as_well_as_cpu(no_fallback):
    """exp over a sweep of the floats where it is finite and normal: within 0.6 ulp of float64 and
    correctly rounded at least as often as CPU PyTorch's exp (a 1-ulp exp, times a timestep of
    ~1000 inside sin, drifted diffusion models' timestep embeddings from float64). Compiled
    kernels share the code: same bits."""
    bits = torch.arange(0, 1 << 32, 1009, dtype=torch.int64)
    x = (bits - (1 << 31)).to(torch.int32).view(torch.float32)
    x = x[(x > -87) & (x < 88)]
    exact = torch.exp(x.double())
    result = torch.exp(x.to("neuron")).cpu()
    ulps = ulps_from_exact(result, exact)
    worst = int(ulps.argmax())
    assert ulps.max() <= 0.6, f"exp({x[worst].item()!r}) = {result[worst].item()!r}, {ulps[worst].item():.3f} ulps off"
    wrong = (result != exact.float()).double().mean().item()
    cpu_wrong = (torch.exp(x) != exact.float()).double().mean().item()
    assert wrong <= cpu_wrong, (wrong, cpu_wrong)
    compiled = torch.compile(lambda t: torch.exp(t) * 1.0, backend="neuron")
    assert torch.equal(compiled(x.to("neuron")).cpu(), result)


@pytest.mark.parametrize("name", ["log", "log1p"])
def test_log_and_log1p_over_the_float_range_within_two_ulps(name, no_fallback):
    # Vectorized in the kernel library (vector_log): subnormals, the exponent split and the
    # special cases (0, negatives, -1 for log1p, infinities, NaN) are its own code.
    x = float_range()
    result = getattr(torch, name)(x.to("neuron")).cpu()
    ulps = ulps_from_exact(result, getattr(torch, name)(x.double()))
    worst = int(ulps.argmax())
    assert ulps.max() <= 2, f"{name}({x[worst].item()!r}) = {result[worst].item()!r}, {ulps[worst].item():.2f} ulps off"
    compiled = torch.compile(getattr(torch, name), backend="neuron")
    assert torch.equal(compiled(x.to("neuron")).cpu().nan_to_num(), result.nan_to_num())  # the same formula


MODULO_DTYPES = [torch.int64, torch.int32, torch.int8, torch.uint8, torch.float32, torch.float64, torch.bfloat16,
                 torch.float16]


def modulo_operands(dtype):
    """Dividends and divisors of both signs (uint8: positive), the minimum integer over -1, and
    for floats zeros, infinities, NaN and a dividend far larger than its divisor."""
    g = torch.Generator().manual_seed(5)
    if dtype.is_floating_point:
        # Magnitudes 2^-30..2^30 apart: quotients past 2^28 take the C library's fmod.
        scale = lambda: torch.exp2(torch.randint(-30, 31, (500,), generator=g).float())
        a = torch.cat([torch.randn(500, generator=g) * 50, torch.randn(500, generator=g) * scale(),
                       torch.tensor([0.0, -0.0, 5.0, -5.0, float("inf"), -float("inf"), float("nan"), 7.5, -7.5, 1e30,
                                     -0.0, -7.5, 123456789.0])])
        b = torch.cat([torch.randn(500, generator=g) * 5, torch.randn(500, generator=g) * scale(),
                       torch.tensor([3.0, 3.0, -3.0, 3.0, 2.0, 2.0, 2.0, float("inf"), float("inf"), 0.0, -3.0,
                                     -float("inf"), 1e-3])])
        return a.to(dtype), b.to(dtype)
    low = 0 if dtype == torch.uint8 else -100
    a = torch.randint(low, 100, (500,), generator=g).to(dtype)
    b = torch.randint(1, 13, (500,), generator=g).to(dtype)
    if dtype != torch.uint8:
        b = torch.where(torch.rand(500, generator=g) > 0.5, b, -b)
        a[0], b[0] = torch.iinfo(dtype).min, -1
    return a, b


@pytest.mark.parametrize("dtype", MODULO_DTYPES, ids=str)
def test_remainder_and_fmod_match_cpu_exactly(dtype, no_fallback):
    a, b = modulo_operands(dtype)
    cases = [torch.remainder, torch.fmod, lambda x, y: x % y, lambda x, y: x % 3, lambda x, y: torch.fmod(x, -2.5),
             lambda x, y: torch.remainder(7, y), lambda x, y: x.clone().remainder_(y), lambda x, y: x.clone().fmod_(y)]
    for op in cases:
        expected = op(a, b)
        result = op(a.to("neuron"), b.to("neuron")).cpu()
        assert result.dtype == expected.dtype
        assert torch.equal(result.nan_to_num(), expected.nan_to_num()), (op, result, expected)
        if dtype.is_floating_point:  # zeros carry the sign CPU gives them (equal() takes -0 == 0)
            numbers = ~expected.isnan()
            assert torch.equal(result.signbit()[numbers], expected.signbit()[numbers]), (op, result, expected)


def test_integer_modulo_by_zero_raises_at_synchronization():
    x = torch.arange(5, device="neuron")
    for op in (torch.remainder, torch.fmod):
        with pytest.raises(RuntimeError, match="ZeroDivisionError: integer modulo by zero"):
            op(x, torch.tensor(0, device="neuron"))
            torch.neuron.synchronize()


def test_mixed_dtypes_and_host_scalars_promote_like_cpu(no_fallback):
    f = sample((5,), torch.float32)
    d = sample((5,), torch.float64, 1)
    i = sample((5,), torch.int64, 2)
    cases = [
        (lambda x, y, z: x + y, (f, d, i)),       # float32 + float64 -> float64
        (lambda x, y, z: z * 2.5, (f, d, i)),     # int64 * python float -> float32
        (lambda x, y, z: z / 4, (f, d, i)),       # true division of ints -> float32
        (lambda x, y, z: x + z, (f, d, i)),       # float32 + int64 -> float32
        (lambda x, y, z: z.exp(), (f, d, i)),     # unary float op on ints
        (lambda x, y, z: x ** 2, (f, d, i)),
        (lambda x, y, z: z > 3.5, (f, d, i)),
        (lambda x, y, z: x.clamp(-1, 1), (f, d, i)),
        (lambda x, y, z: torch.where(x > 0, x, 0.0), (f, d, i)),
        (lambda x, y, z: x.masked_fill(x > 0, -2.0), (f, d, i)),
    ]
    for op, args in cases:
        assert_same(op(*[t.to("neuron") for t in args]), op(*args))


def test_out_and_inplace_forms(no_fallback):
    a, b = sample((4, 6), torch.float32), sample((6,), torch.float32, 1)
    out = torch.empty(4, 6, device="neuron")
    torch.mul(a.to("neuron"), b.to("neuron"), out=out)
    assert_same(out, a * b)
    wider = torch.empty(4, 6, dtype=torch.float64, device="neuron")  # safe cast of the result
    torch.add(a.to("neuron"), b.to("neuron"), out=wider)
    assert_same(wider, torch.add(a, b, out=torch.empty(4, 6, dtype=torch.float64)))
    x = a.to("neuron")
    x.mul_(b.to("neuron")).add_(1.0).tanh_()
    assert_same(x, (a * b + 1.0).tanh())
    view = a.to("neuron")
    view[:, ::2].zero_()
    view.t()[1:3].sigmoid_()
    expected = a.clone()
    expected[:, ::2] = 0
    expected.t()[1:3].sigmoid_()
    assert_same(view, expected)


def test_large_inputs_split_across_engines(no_fallback):
    a, b = sample((513, 1031), torch.float32), sample((1031,), torch.float32, 1)
    assert_same((a.to("neuron") * b.to("neuron")).sin(), (a * b).sin())
    t = a.t()
    assert_same(t.to("neuron") + 1, t + 1)


def test_training_backward_ops_are_native(no_fallback):
    x = sample((8, 5), torch.float32)
    results = []
    for device in ("cpu", "neuron"):
        leaf = x.detach().to(device).requires_grad_()
        y = torch.nn.functional.gelu(leaf).tanh() * torch.sigmoid(leaf) + torch.relu(leaf) + torch.nn.functional.silu(leaf)
        y.backward(torch.ones_like(y))
        results.append((y.detach(), leaf.grad))
    assert_same(results[1][0], results[0][0])
    assert_same(results[1][1], results[0][1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gelu_backward_across_its_erf_ranges(dtype, no_fallback):
    """The erf's three ranges (|x / sqrt 2| below 1, below 4, beyond), where the density's exp
    is shared with the erf's, and infinities, huge and signed-zero inputs, eager and compiled."""
    x = torch.cat([torch.linspace(-12, 12, 4001, dtype=dtype),
                   torch.tensor([float("inf"), -float("inf"), 1e20, -1e20, 3e38, 0.0, -0.0, float("nan")], dtype=dtype)])
    grad = torch.linspace(-2, 2, x.numel(), dtype=dtype)
    expected = torch.ops.aten.gelu_backward(grad, x)
    fn = lambda g, v: torch.ops.aten.gelu_backward(g, v)
    for run in (fn, torch.compile(fn, backend="neuron")):
        got = run(grad.to("neuron"), x.to("neuron"))
        assert_same(got, expected)


def test_bad_inputs_raise_like_cpu():
    b = torch.ones(3, dtype=torch.bool, device="neuron")
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool tensors"):
        b - b
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        torch.ones(3, device="neuron").add_(torch.ones(2, 3, device="neuron"))
    i = torch.ones(3, dtype=torch.int64, device="neuron")
    with pytest.raises(RuntimeError, match="alpha must not be a floating point"):
        torch.add(i, i, alpha=0.5)


def test_complex_op_without_a_kernel_falls_back_and_is_counted():
    torchneuron.reset_fallback_report()
    z = torch.tensor([1 + 2j, 3 - 1j])
    torch.testing.assert_close(z.to("neuron").atan().cpu(), z.atan())
    assert any(name.startswith("aten::atan") for name in torchneuron.fallback_report())


def complex_sample(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.complex(torch.randn(shape, generator=g), torch.randn(shape, generator=g)).to(dtype) * 3


COMPLEX_BINARY = [
    lambda a, b: a + b,
    lambda a, b: torch.add(a, b, alpha=-1.5),
    lambda a, b: a - b,
    lambda a, b: a * b,
    lambda a, b: a / b,
    lambda a, b: a == b,
    lambda a, b: a != a.conj(),
    lambda a, b: a * 2.5,
    lambda a, b: (1 - 2j) * a,
    lambda a, b: a / (0.5 + 3j),
    lambda a, b: a ** 2,
    lambda a, b: a.pow(0.5 - 1j),
    lambda a, b: a ** b,
    lambda a, b: a.real * b,  # a real tensor promoted to complex
    lambda a, b: a.conj() * b,  # a lazy conjugate, resolved on the device
    lambda a, b: a.mT * b.mT,  # strided operands
    lambda a, b: a * b[:1],  # broadcast
]


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
@pytest.mark.parametrize("index", range(len(COMPLEX_BINARY)))
def test_complex_binary_ops_match_cpu(dtype, index, no_fallback):
    a, b = complex_sample((5, 7), dtype, 0), complex_sample((5, 7), dtype, 1)
    op = COMPLEX_BINARY[index]
    expected = op(a, b)
    got = op(a.to("neuron"), b.to("neuron")).cpu()
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
def test_complex_unary_ops_and_real_results_match_cpu(dtype, no_fallback):
    z = complex_sample((6, 9), dtype, 2)
    z[0, :7] = torch.tensor([complex(float("inf"), float("nan")), complex(1e30, -1e30), 0, complex(-2, 0),
                             complex(float("inf"), 1), complex(1, float("-inf")), complex(1e-30, 1e-30)])
    d = z.to("neuron")
    for op in [torch.abs, torch.angle, torch.neg, torch.sgn, torch.exp, torch.log, torch.sqrt, torch.reciprocal,
               torch.sin, torch.cos, torch.tanh, torch.sinh, torch.cosh,
               torch.isnan, torch.isinf, torch.isfinite, torch.conj_physical, lambda t: t.conj().resolve_conj(),
               lambda t: t.T.abs(), lambda t: t / t, lambda t: (1 + 1j) / t, lambda t: t.masked_fill(t.real > 0, 1 - 1j)]:
        expected, got = op(z), op(d).cpu()
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got, expected, equal_nan=True)
    real = torch.empty(0, dtype=torch.float64, device="neuron")
    torch.abs(d, out=real)  # a wider real result
    torch.testing.assert_close(real.cpu(), z.abs().double(), equal_nan=True)
    into_complex = torch.empty_like(d)
    torch.abs(d, out=into_complex)  # |z| + 0i, as CPU PyTorch writes it
    torch.testing.assert_close(into_complex.cpu(), torch.abs(z, out=torch.empty_like(z)), equal_nan=True)
    w = d.clone()
    w.mul_(2j).sub_(d).conj_physical_()
    torch.testing.assert_close(w.cpu(), (z * 2j - z).conj(), equal_nan=True)
    target = torch.zeros_like(d).conj()  # writing into a lazy conjugate view
    target.copy_(d)
    torch.testing.assert_close(target.resolve_conj().cpu(), z, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_complex_reductions_constructors_and_selection_match_cpu(dtype, no_fallback):
    # Sums and means reduce the (real, imaginary) pairs; norms reduce magnitudes; torch.complex
    # and torch.polar write the two halves of the pairs; vdot conjugates its first vector.
    g = torch.Generator().manual_seed(4)
    real, imag = torch.randn(6, 33, generator=g, dtype=dtype), torch.randn(6, 33, generator=g, dtype=dtype)
    z = torch.complex(real, imag)
    cases = [lambda z, r, i: z.sum(), lambda z, r, i: z.sum(0), lambda z, r, i: z.sum(-1, keepdim=True),
             lambda z, r, i: z.mT.mean(0), lambda z, r, i: z.conj().sum(1),
             lambda z, r, i: torch.linalg.vector_norm(z), lambda z, r, i: torch.linalg.vector_norm(z, 3, dim=1),
             lambda z, r, i: torch.complex(r, i), lambda z, r, i: torch.complex(r[:, :1], i),
             lambda z, r, i: torch.polar(r.abs(), i), lambda z, r, i: torch.vdot(z[0], z[1]),
             lambda z, r, i: torch.where(r > 0, z, 0), lambda z, r, i: torch.where(i > 0, z, z.conj())]
    for op in cases:
        expected = op(z, real, imag)
        got = op(z.to("neuron"), real.to("neuron"), imag.to("neuron")).cpu()
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got.resolve_conj(), expected.resolve_conj())
    zd = z.to("neuron").requires_grad_()
    z.requires_grad_()
    (torch.linalg.vector_norm(z) + z.exp().mean().abs()).backward()
    (torch.linalg.vector_norm(zd) + zd.exp().mean().abs()).backward()
    torch.testing.assert_close(zd.grad.cpu(), z.grad)


def test_complex_constructor_errors_match_cpu():
    r = torch.ones(3, device="neuron")
    with pytest.raises(RuntimeError, match="Expected object of scalar type Float but got scalar type Double"):
        torch.complex(r, r.double())
    with pytest.raises(RuntimeError, match="Expected both inputs to be Half, Float or Double tensors"):
        torch.complex(r.int(), r.int())
    with pytest.raises(RuntimeError, match="Expected object of scalar type ComplexFloat but got scalar type Float"):
        torch.polar(r, r, out=torch.empty(3, device="neuron"))
    with pytest.raises(RuntimeError, match="dtype should be complex for complex inputs, but got Float"):
        torch.linalg.vector_norm(torch.complex(r, r), dtype=torch.float32)


def test_complex_errors_match_cpu():
    d = torch.ones(3, dtype=torch.complex64, device="neuron")
    with pytest.raises(RuntimeError, match="In-place abs is not supported for complex tensors"):
        d.abs_()
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        torch.abs(d, out=torch.empty(3, dtype=torch.int64, device="neuron"))
    with pytest.raises(NotImplementedError, match="Please use torch.sgn instead"):
        torch.sign(d)


def test_complex_rotary_embedding_trains_without_fallback(no_fallback):
    """Rotary position embedding written with complex numbers (as Meta's Llama reference and
    torchtitan write it): forward and gradients against CPU PyTorch."""
    def rotate(x, freqs):
        pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(pairs * freqs.view(1, x.shape[1], 1, -1)).flatten(3)

    torch.manual_seed(0)
    angles = torch.outer(torch.arange(32.0), 1.0 / 10000 ** (torch.arange(0, 16, 2).float() / 16))
    freqs = torch.polar(torch.ones_like(angles), angles)
    x = torch.randn(2, 32, 4, 16, requires_grad=True)
    rotate(x, freqs).sin().sum().backward()
    xd = x.detach().to("neuron").requires_grad_()
    out = rotate(xd, freqs.to("neuron"))
    out.sin().sum().backward()  # the product's backward multiplies by a lazy conjugate
    torch.testing.assert_close(out.detach().cpu(), rotate(x, freqs).detach())
    torch.testing.assert_close(xd.grad.cpu(), x.grad)


def test_broadcast_operands_in_dense_runs(no_fallback):
    # Stride-0 inputs take their own loops: a broadcast 0-dim value in unary, binary and ternary ops.
    scalar = torch.tensor(2.0).expand(5)
    row = sample((5,), torch.float32)
    assert_same(torch.exp(scalar.to("neuron")), torch.exp(scalar))
    assert_same(scalar.to("neuron") - row.to("neuron"), scalar - row)
    assert_same(row.to("neuron") * scalar.to("neuron"), row * scalar)
    assert_same(scalar.to("neuron") + scalar.to("neuron"), scalar + scalar)
    assert_same(torch.addcmul(scalar.to("neuron"), row.to("neuron"), scalar.to("neuron")), torch.addcmul(scalar, row, scalar))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32, torch.float64], ids=str)
def test_floor_and_trunc_division_match_cpu(dtype, no_fallback):
    g = torch.Generator().manual_seed(7)
    if dtype.is_floating_point:
        a, b = torch.randn(64, generator=g).to(dtype) * 7, torch.randn(64, generator=g).to(dtype)
    else:
        a = torch.randint(-20, 20, (64,), generator=g).to(dtype)
        b = torch.randint(1, 6, (64,), generator=g).to(dtype) * (torch.randint(0, 2, (64,), generator=g).to(dtype) * 2 - 1)
    da, db = a.to("neuron"), b.to("neuron")
    assert_same(torch.floor_divide(da, db), torch.floor_divide(a, b))
    assert_same(da // 3, a // 3)
    for mode in ("floor", "trunc"):
        assert_same(torch.div(da, db, rounding_mode=mode), torch.div(a, b, rounding_mode=mode))


def test_integer_division_by_zero_is_a_device_error():
    result = torch.floor_divide(torch.ones(2, dtype=torch.int64, device="neuron"), torch.zeros(2, dtype=torch.int64, device="neuron"))
    with pytest.raises(torch.AcceleratorError, match="ZeroDivisionError"):
        result.cpu()


def test_where_with_a_cpu_scalar_tensor_runs_on_the_device():
    # A 0-dim CPU tensor is a scalar to TensorIterator, in either value position.
    cond = torch.randn(3, 4, generator=torch.Generator().manual_seed(0)) > 0
    y = torch.randn(3, 4, generator=torch.Generator().manual_seed(1))
    scalar = torch.tensor(2.5)
    for args in ((cond, scalar, y), (cond, y, scalar)):
        got = torch.where(*(a if a is scalar else a.to("neuron") for a in args))
        assert got.device.type == "neuron"
        assert torch.equal(got.cpu(), torch.where(*args))


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_float32_sin_cos_within_one_ulp_over_the_whole_range(name, no_fallback):
    # The vectorized kernel reduces the argument in double; runs holding |x| >= 1e15, inf or
    # NaN take the C library. The float64 result is the reference.
    g = torch.Generator().manual_seed(0)
    parts = [torch.randn(50000, generator=g) * scale for scale in (1.0, 100.0, 1e5, 1e9, 1e14)]
    parts.append(torch.arange(-2000, 2000, dtype=torch.float64).mul(torch.pi / 4).float())
    parts.append(torch.tensor([0.0, -0.0, 1e-38, -1e-45, 1e15, -3e17, 1e20, 3.4e38,
                               float("inf"), float("-inf"), float("nan")]))
    op = getattr(torch, name)
    for x in parts:
        got = op(x.to("neuron")).cpu()
        exact = op(x.double())
        spacing = torch.finfo(torch.float32).eps * exact.float().double().abs().clamp_min(1e-38)
        finite = exact.isfinite()
        assert ((got.double() - exact).abs() / spacing)[finite].max() <= 1.0
        assert torch.equal(got.isnan(), exact.isnan())
        assert torch.equal(torch.signbit(got), torch.signbit(op(x)))
    x = torch.randn(64, 33, generator=g) * 10  # strided and in place take the other paths
    device = x.to("neuron")
    assert_same(op(device.t()), op(x.t()))
    getattr(device, name + "_")()
    assert_same(device, op(x))


def gamma_arguments():
    """Positive and negative arguments near 0 and the poles, large ones, and special values."""
    g = torch.Generator().manual_seed(11)
    return torch.cat([torch.randn(600, generator=g) * 12, torch.rand(300, generator=g) * 3,
                      -torch.rand(200, generator=g) * 6, torch.exp(torch.randn(200, generator=g) * 8),
                      torch.tensor([0.0, -0.0, 1.0, 2.0, 0.5, -0.5, -1.0, -2.0, -2.5, 1e-30, 1e30, -1e6 - 0.5,
                                    float("inf"), -float("inf"), float("nan")])]).double()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_gamma_functions_match_cpu(dtype, no_fallback):
    # Computed in double and rounded. The reference is CPU PyTorch's float64 result rounded to
    # dtype: for float32 trigamma of negative arguments it is more accurate than CPU's float32
    # (sin(pi x) in float). CPU's float64 trigamma is good to about 5e-10 only: the mpmath test
    # below checks the last digits.
    rounded = gamma_arguments().to(dtype)
    tol = {torch.float64: 1e-8, torch.float32: 2e-6, torch.bfloat16: 1e-2}[dtype]
    poles = (rounded <= 0) & (rounded == rounded.trunc())
    cases = [("lgamma", torch.lgamma)] + [(f"polygamma({n})", lambda t, n=n: torch.polygamma(n, t)) for n in range(5)]
    for name, op in cases:
        result = op(rounded.to("neuron")).cpu()
        expected = op(rounded.double()).to(dtype)
        keep = rounded.isfinite() & ~poles if name.startswith("polygamma") else torch.ones_like(poles)
        torch.testing.assert_close(result[keep], expected[keep], rtol=tol, atol=tol, equal_nan=True, msg=name)
    # Poles: digamma -+inf at +-0 and NaN at negative integers, as CPU; polygamma(n >= 1) +inf
    # times (-1)^(n+1) (CPU's float sin(pi x) is not 0 there and gives a large finite number).
    special = torch.tensor([0.0, -0.0, -2.0, float("inf"), -float("inf")], dtype=dtype, device="neuron")
    inf, nan = float("inf"), float("nan")
    expect = {0: [-inf, inf, nan, inf, nan], 1: [inf, inf, inf, 0.0, nan], 2: [-inf, -inf, -inf, 0.0, nan],
              3: [inf, inf, inf, 0.0, nan]}
    for n, values in expect.items():
        assert torch.equal(torch.polygamma(n, special).cpu().nan_to_num(), torch.tensor(values, dtype=dtype).nan_to_num()), n
    assert torch.equal(torch.digamma(special).cpu().nan_to_num(), torch.digamma(special.cpu()).nan_to_num())


def test_gamma_functions_in_float64_to_the_last_digits(no_fallback):
    import mpmath  # torch's sympy dependency brings it
    x = torch.tensor([1e-8, 0.3, 1.1338400840759277, 4.5, 9.99, 10.0, 12.5, 123.25, 1e7, -0.3, -3.9954527937614444, -5371.5],
                     dtype=torch.float64)
    with mpmath.workdps(40):  # at its default 15 digits mpmath's own polygamma(4, -5371.5) is off
        for n in range(5):
            result = torch.polygamma(n, x.to("neuron")).cpu()
            exact = torch.tensor([float(mpmath.psi(n, mpmath.mpf(v))) for v in x.tolist()], dtype=torch.float64)
            # Near a pole (-3.995) the reflection's cot(pi x) costs a few digits.
            torch.testing.assert_close(result, exact, rtol=1e-13, atol=0, msg=f"polygamma({n})")
        exact = torch.tensor([float(mpmath.loggamma(mpmath.mpf(v)).real) for v in x.tolist()], dtype=torch.float64)
        torch.testing.assert_close(torch.lgamma(x.to("neuron")).cpu(), exact, rtol=1e-14, atol=0)


def test_polygamma_of_integers_and_its_errors(no_fallback):
    x = torch.arange(0, 40)  # negative integers: see the poles above
    for n in (0, 1, 3):
        torch.testing.assert_close(torch.polygamma(n, x.to("neuron")).cpu(), torch.polygamma(n, x.double()).float(),
                                   equal_nan=True)
    out = torch.empty(3, device="neuron")
    torch.polygamma(2, torch.tensor([1.0, 2.0, 3.0], device="neuron"), out=out)
    torch.testing.assert_close(out.cpu(), torch.polygamma(2, torch.tensor([1.0, 2.0, 3.0])))
    with pytest.raises(RuntimeError, match="does not support negative n"):
        torch.polygamma(-1, x.to("neuron"))


def test_erfinv_over_its_domain(no_fallback):
    # Float: a polynomial in w = -log(1 - y^2), within 1.1 ulp; double: Halley steps on erf or
    # erfc, to the last bits.
    bits = torch.arange(0, 0x3F800000, 997, dtype=torch.int32)
    y = torch.cat([bits.view(torch.float32), torch.tensor([1 - 2 ** -24, 0.5, 0.9966, 1e-30])])
    y = torch.cat([y, -y])
    ulps = ulps_from_exact(torch.erfinv(y.to("neuron")).cpu(), torch.erfinv(y.double()))
    worst = int(ulps.argmax())
    assert ulps.max() <= 1.1, f"erfinv({y[worst].item()!r}) is {ulps[worst].item():.2f} ulps off"
    yd = torch.cat([y.double(), 1 - torch.logspace(-16, -1, 50, dtype=torch.float64), torch.rand(500, dtype=torch.float64)])
    torch.testing.assert_close(torch.erfinv(yd.to("neuron")).cpu(), torch.erfinv(yd), rtol=1e-14, atol=0)
    special = torch.tensor([1.0, -1.0, 1.5, -2.0, float("nan"), 0.0, -0.0])
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        result = torch.erfinv(special.to(dtype).to("neuron")).cpu()
        expected = torch.erfinv(special.to(dtype))
        numbers = ~expected.isnan()
        assert torch.equal(result.nan_to_num(), expected.nan_to_num())
        assert torch.equal(result[numbers].signbit(), expected[numbers].signbit())


def test_special_function_gradients_and_users(no_fallback):
    # Autograd composes these: lgamma' = digamma, digamma' = polygamma(1), erfinv' from exp.
    x = torch.rand(64, dtype=torch.float64) * 5 + 0.1
    for op in (torch.lgamma, torch.digamma, lambda t: torch.polygamma(2, t), lambda t: torch.erfinv(t / 6)):
        a, b = x.clone().requires_grad_(), x.to("neuron").requires_grad_()
        op(a).sum().backward()
        op(b).sum().backward()
        torch.testing.assert_close(b.grad.cpu(), a.grad)
    # Distributions that use them, and the truncated-normal initializer (erfinv).
    concentration = torch.tensor([0.5, 2.0, 7.0])
    value = torch.tensor([0.2, 0.3, 0.5])
    for dist in (lambda c, v: torch.distributions.Dirichlet(c).log_prob(v),
                 lambda c, v: torch.distributions.Gamma(c, 2.0).log_prob(v + 1),
                 lambda c, v: torch.distributions.Beta(c, c + 1).entropy()):
        torch.testing.assert_close(dist(concentration.to("neuron"), value.to("neuron")).cpu(), dist(concentration, value))
    weights = torch.empty(4096, device="neuron")
    torch.nn.init.trunc_normal_(weights, std=0.02, a=-0.04, b=0.04)
    weights = weights.cpu()
    assert weights.abs().max() <= 0.04 and 0.015 < weights.std() < 0.02


def test_xlogy_matches_cpu(no_fallback):
    # 0 log 0 = 0 and 0 log(inf) = 0, but NaN wherever y is NaN; integers promote to float.
    x = torch.tensor([0.0, 0.0, 0.0, 2.0, -3.0, 1.5, float("nan"), 0.0])
    y = torch.tensor([0.0, float("inf"), float("nan"), 0.0, 4.0, -1.0, 2.0, 1e-30])
    cases = [torch.xlogy, lambda a, b: torch.xlogy(a, 3.0), lambda a, b: torch.xlogy(2, b), lambda a, b: a.clone().xlogy_(b),
             lambda a, b: torch.xlogy(a[:, None], b), lambda a, b: torch.special.xlogy(a.long(), b.long())]
    for op in cases:
        expected = op(x, y)
        result = op(x.to("neuron"), y.to("neuron")).cpu()
        assert result.dtype == expected.dtype
        torch.testing.assert_close(result, expected, equal_nan=True)
