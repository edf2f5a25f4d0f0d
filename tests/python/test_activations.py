"""Parameterized activations on neuron against CPU PyTorch, forward and backward, in float32
and bfloat16, including boundary points, NaN, infinities and signed zeros; nan_to_num's defaults
per dtype."""

import pytest
import torch
import torch.nn.functional as F

from test_nn_ops import assert_same

ACTIVATIONS = {
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2),
    "elu": lambda x: F.elu(x, alpha=1.3),
    "celu": lambda x: F.celu(x, alpha=0.7),
    "selu": F.selu,
    "softplus": lambda x: F.softplus(x, beta=2.0, threshold=3.0),
    "hardtanh": lambda x: F.hardtanh(x, -0.5, 2.0),
    "relu6": F.relu6,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "mish": F.mish,
    "logsigmoid": F.logsigmoid,
    "threshold": lambda x: F.threshold(x, 0.5, -1.0),
}


def inputs(dtype):
    boundary = torch.tensor([-3.0, 3.0, -0.5, 2.0, 0.0, 0.5, 6.0, 1.5])
    return torch.cat([torch.linspace(-8, 8, 101), boundary]).to(dtype)


def forward_backward_on_both(fn, x):
    """[(output, input gradient)] on CPU, then on neuron, for a fixed ramp of output gradients."""
    grad = torch.linspace(-1, 1, x.numel()).to(x.dtype)
    results = []
    for device in ("cpu", "neuron"):
        leaf = x.to(device).detach().requires_grad_()
        out = fn(leaf)
        out.backward(grad.to(device))
        results.append((out.detach(), leaf.grad))
    return results


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_forward_backward(name, dtype, no_fallback):
    results = forward_backward_on_both(ACTIVATIONS[name], inputs(dtype))
    assert_same(results[1][0], results[0][0])
    if name != "threshold":  # threshold's gradient is threshold_backward, covered elsewhere
        assert_same(results[1][1], results[0][1])


# NaN, infinities and signed zeros first: CPU PyTorch's vectorized loop takes the head of a
# tensor, and for some gradients at NaN (hardtanh's, the shrinks') its scalar tail answers
# differently. The vectorized answer is the one every long tensor gets.
SPECIAL_HEAD = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, -1e-30, 1e-30]
WITH_SPECIALS = dict(ACTIVATIONS, relu=F.relu, softshrink=F.softshrink, hardshrink=lambda x: F.hardshrink(x, 0.7),
                     abs=torch.abs, gelu=F.gelu, silu=F.silu, sigmoid=torch.sigmoid)


def assert_same_specials(actual, expected, tol, exact=None):
    """Values within tol, NaN where CPU has NaN, and zeros signed as CPU signs them. CPU's answer
    at a zero depends on its vector width (its AVX2 GELU gives +0.0 at -0.0 and flushes -5e-15 to
    +0.0, its AVX-512 one does not): where ours differs from it there, ours must have the sign of
    `exact`, the float64 answer."""
    actual = actual.cpu()
    assert torch.equal(actual.isnan(), expected.isnan())
    torch.testing.assert_close(actual, expected, atol=tol, rtol=tol, equal_nan=True)
    at_cpu_zero = expected == 0
    differs = at_cpu_zero & (actual.signbit() != expected.signbit())
    differs |= at_cpu_zero & (actual != 0)
    if differs.any():
        assert exact is not None, f"signs of zero differ from CPU's: {actual[differs].tolist()}"
        exact = exact.cpu()[differs]
        assert torch.equal(actual[differs].signbit(), exact.signbit()), "signs differ from CPU's and float64's"
        assert bool(((actual[differs] == 0) == (exact == 0)).all()), "a zero where float64 has none"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", list(WITH_SPECIALS))
def test_activations_at_nan_infinities_and_signed_zeros(name, dtype, no_fallback):
    x = torch.cat([torch.tensor(SPECIAL_HEAD), torch.linspace(-8, 8, 121)]).to(dtype)
    (cpu_out, cpu_grad), (out, grad) = forward_backward_on_both(WITH_SPECIALS[name], x)
    (exact_out, exact_grad), _ = forward_backward_on_both(WITH_SPECIALS[name], x.double())
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    head = len(SPECIAL_HEAD)
    if name == "gelu":  # CPU's float32 GELU gives NaN at +inf, where x * P(X <= x) is +inf
        cpu_out[1] = float("inf")
    assert_same_specials(out, cpu_out, tol, exact_out)
    if name != "threshold":
        assert_same_specials(grad[:head], cpu_grad[:head], tol, exact_grad[:head])


@pytest.mark.parametrize("eps", [None, 0.1])
def test_logit_gradient_outside_its_domain(eps, no_fallback):
    # Without eps, NaN where logit itself is NaN (x < 0 or x > 1); with eps, zero outside
    # [eps, 1 - eps] and at NaN.
    x = torch.cat([torch.tensor([-0.5, 1.5, float("nan"), float("inf"), -float("inf"), 0.05, 0.95]),
                   torch.linspace(0.01, 0.99, 40)])
    (cpu_out, cpu_grad), (out, grad) = forward_backward_on_both(lambda t: torch.logit(t, eps), x)
    assert_same_specials(out, cpu_out, 1e-5)
    assert_same_specials(grad, cpu_grad, 1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("name", ["softplus", "softplus_default", "mish", "logsigmoid"])
def test_log1p_activations_over_a_wide_range(name, dtype, no_fallback):
    # Past the thresholds (softplus's, mish's x > 20) and where exp over- or underflows.
    fn = {"softplus_default": F.softplus}.get(name) or ACTIVATIONS[name]
    x = torch.cat([torch.linspace(-120, 120, 2401), torch.tensor([-20.0, 20.0, 20.001, 44.5, 88.7, 89.0, -87.4,
                                                                  -103.9, 1e-8, -1e-8, float("inf"), float("-inf")])])
    results = forward_backward_on_both(fn, x.to(dtype))
    assert_same(results[1][0], results[0][0])
    assert_same(results[1][1], results[0][1])


@pytest.mark.parametrize("name", ["leaky_relu", "elu", "hardtanh", "hardswish"])
def test_inplace_activation(name, no_fallback):
    inplace = {"leaky_relu": lambda x: F.leaky_relu_(x, 0.1), "elu": lambda x: F.elu_(x),
               "hardtanh": lambda x: F.hardtanh_(x), "hardswish": lambda x: F.hardswish(x, inplace=True)}[name]
    x = inputs(torch.float32)
    expected = inplace(x.clone())
    actual = x.to("neuron")
    inplace(actual)
    assert_same(actual, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64], ids=str)
def test_nan_to_num(dtype, no_fallback):
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.5, -2.0]) if dtype.is_floating_point else torch.arange(5)
    x = x.to(dtype)
    assert_same(torch.nan_to_num(x.to("neuron")), torch.nan_to_num(x))
    assert_same(torch.nan_to_num(x.to("neuron"), nan=7.0, posinf=1.0, neginf=-1.0), torch.nan_to_num(x, nan=7.0, posinf=1.0, neginf=-1.0))


@pytest.mark.parametrize("dim", [-1, 1])
def test_glu_forward_backward(dim, no_fallback):
    x = inputs(torch.float32)[:108].reshape(3, 6, 6)
    results = []
    for device in ("cpu", "neuron"):
        leaf = x.to(device).detach().requires_grad_()
        out = F.glu(leaf, dim)
        out.backward(torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(device))
        results.append((out.detach(), leaf.grad))
    assert_same(results[1][0], results[0][0])
    assert_same(results[1][1], results[0][1])
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        F.glu(torch.ones(3, 5, device="neuron"))


def test_pow_with_a_scalar_base(no_fallback):
    e = inputs(torch.float32)[:50]
    assert_same(torch.pow(2.0, e.to("neuron")), torch.pow(2.0, e))
    assert_same(torch.pow(0.5, e.to("neuron")), torch.pow(0.5, e))


SPECIALS = torch.tensor([1.5, -2.0, 0.0, -0.0, float("nan"), float("inf"), -float("inf"), 1e-30, 3.0, -0.7])


def same_bits(a, b):
    a = a.cpu()
    return a.dtype == b.dtype and torch.equal(a.isnan(), b.isnan()) and torch.equal(a[~a.isnan()], b[~b.isnan()])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("exponent", [2, 3, 0.5, -0.5, -1, -2, 2.5])
def test_pow_by_common_exponents(dtype, exponent, no_fallback):
    # 2, 3, 0.5, -0.5, -1 and -2 use exact forms (x * x, sqrt, ...) instead of std::pow per element.
    x = torch.cat([SPECIALS, inputs(torch.float32)[:200]]).to(dtype)
    got, expected = x.to("neuron").pow(exponent), x.pow(exponent)
    assert torch.equal(got.cpu().isnan(), expected.isnan())
    torch.testing.assert_close(got.cpu(), expected, equal_nan=True)
    if exponent == 2:
        assert same_bits(got, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_clamp_scalar_bounds_match_cpu(dtype):
    x = SPECIALS.to(dtype) if dtype.is_floating_point else torch.tensor([1, -2, 0, 5, 9])
    bounds = [(-0.5, 0.5), (None, 0.5), (-0.5, None), (1.0, -1.0), (0, 3)]
    if dtype.is_floating_point:
        bounds += [(float("nan"), 1.0), (1.0, float("nan"))]  # a NaN bound makes every element NaN
    for lo, hi in bounds:
        assert same_bits(x.to("neuron").clamp(lo, hi), x.clamp(lo, hi)), (lo, hi)
    # An integer tensor with floating bounds gives a floating result, as on CPU.
    if not dtype.is_floating_point:
        assert same_bits(x.to("neuron").clamp(-0.5, 2.5), x.clamp(-0.5, 2.5))
