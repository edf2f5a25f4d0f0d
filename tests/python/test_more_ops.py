"""More native operators against CPU PyTorch: the pointwise long tail (logaddexp, copysign,
hypot, fmax / fmin, heaviside, frac, sinc, signbit, entr, xlog1py, round to decimals, soft and
hard shrinkage, PReLU, integer rounding, rsub of two tensors), masked_fill with a device value,
the 2-D NLL loss of segmentation models, and composed ops (equal, nansum, aminmax,
count_nonzero, isin, repeat_interleave, unique_consecutive, channel_shuffle, linalg.cross, vdot,
take, put_), and the modified Bessel functions."""

import math

import pytest
import torch
import torch.nn.functional as F

from test_nn_ops import assert_same, forward_backward, sample

NAN, INF = float("nan"), float("inf")


def special_values(dtype):
    """Random values with the IEEE edge cases mixed in."""
    x = sample((6, 40), seed=3) * 3
    x[0, :8] = torch.tensor([NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5])
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("op", [torch.logaddexp, torch.logaddexp2, torch.copysign, torch.hypot, torch.fmax, torch.fmin,
                                torch.special.xlog1py, torch.heaviside],
                         ids=lambda f: f.__name__)
def test_binary_long_tail(op, dtype, no_fallback):
    a, b = special_values(dtype), special_values(dtype).flip(1)
    b[1, :4] = torch.tensor([NAN, INF, -INF, 0.0]).to(dtype)
    assert_same(op(a.to("neuron"), b.to("neuron")), op(a, b))
    # broadcasting against a row
    assert_same(op(a.to("neuron"), b[2].to("neuron")), op(a, b[2]))


@pytest.mark.parametrize("op", [torch.fmax, torch.fmin, torch.heaviside], ids=lambda f: f.__name__)
def test_integer_binary_long_tail(op, no_fallback):
    a = torch.randint(-3, 4, (5, 7))
    b = torch.randint(-3, 4, (5, 7))
    assert_same(op(a.to("neuron"), b.to("neuron")), op(a, b))


def test_rsub_of_tensors(no_fallback):
    a, b = sample((4, 5)), sample((5,), seed=1)
    assert_same(torch.rsub(a.to("neuron"), b.to("neuron"), alpha=2.5), torch.rsub(a, b, alpha=2.5))
    ints = torch.arange(6).view(2, 3)
    assert_same(torch.rsub(ints.to("neuron"), ints.flip(1).to("neuron")), torch.rsub(ints, ints.flip(1)))
    with pytest.raises(RuntimeError, match="bool"):
        torch.rsub(torch.ones(2, dtype=torch.bool, device="neuron"), torch.ones(2, dtype=torch.bool, device="neuron"))


def test_heaviside_rejects_mixed_dtypes():
    with pytest.raises(RuntimeError, match="different dtypes"):
        torch.heaviside(torch.ones(3, device="neuron"), torch.ones(3, dtype=torch.float64, device="neuron"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("op", [torch.frac, torch.sinc, torch.special.entr, torch.signbit,
                                lambda x: torch.round(x, decimals=2), lambda x: torch.round(x, decimals=-1),
                                lambda x: F.softshrink(x, 0.7), lambda x: F.hardshrink(x, 0.7)],
                         ids=["frac", "sinc", "entr", "signbit", "round2", "round-1", "softshrink", "hardshrink"])
def test_unary_long_tail(op, dtype, no_fallback):
    x = special_values(dtype)
    assert_same(op(x.to("neuron")), op(x))


@pytest.mark.parametrize("op", [torch.floor, torch.ceil, torch.round, torch.trunc, torch.signbit, torch.sinc],
                         ids=lambda f: f.__name__)
def test_integer_rounding_and_predicates(op, no_fallback):
    x = torch.randint(-50, 50, (4, 9))
    assert_same(op(x.to("neuron")), op(x))


@pytest.mark.parametrize("op", [lambda x: F.softshrink(x, 0.4), lambda x: F.hardshrink(x, 0.4)], ids=["soft", "hard"])
def test_shrink_gradients(op, no_fallback):
    (cpu_out, cpu_grads), (out, grads) = forward_backward(op, sample((5, 8)))
    assert_same(out, cpu_out)
    assert_same(grads[0], cpu_grads[0])


@pytest.mark.parametrize("channels", [1, 3])
def test_prelu_and_gradients(channels, no_fallback):
    results = []
    x, w = sample((4, 3, 5, 5)), sample((channels,), seed=2).abs() * 0.3
    for device in ("cpu", "neuron"):
        module = torch.nn.PReLU(channels).to(device)
        with torch.no_grad():
            module.weight.copy_(w)
        leaf = x.to(device).detach().requires_grad_()
        out = module(leaf)
        out.backward(sample(out.shape, seed=7).to(device))
        results.append((out.detach(), leaf.grad, module.weight.grad))
    for device_value, cpu_value in zip(results[1], results[0]):
        assert_same(device_value, cpu_value)


def test_masked_fill_with_device_value(no_fallback):
    x, mask = sample((6, 7)), sample((6, 7), seed=1) > 0
    value = torch.tensor(-2.5)
    assert_same(x.to("neuron").masked_fill(mask.to("neuron"), value.to("neuron")), x.masked_fill(mask, value))
    # a broadcast mask, an integer tensor filled with a float value (truncated as on CPU)
    ints = torch.arange(12).view(3, 4)
    assert_same(ints.to("neuron").masked_fill(mask[0, :4].to("neuron"), torch.tensor(7.9, device="neuron")),
                ints.masked_fill(mask[0, :4], torch.tensor(7.9)))
    with pytest.raises(RuntimeError, match="0-dimensional"):
        x.to("neuron").masked_fill(mask.to("neuron"), torch.ones(2, device="neuron"))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_segmentation_cross_entropy(reduction, weighted, no_fallback):
    logits = sample((2, 5, 6, 7))
    target = torch.randint(0, 5, (2, 6, 7), generator=torch.Generator().manual_seed(1))
    target[0, 0, :3] = -100  # ignored pixels
    weight = sample((5,), seed=4).abs() + 0.1 if weighted else None
    results = []
    for device in ("cpu", "neuron"):
        leaf = logits.to(device).detach().requires_grad_()
        loss = F.cross_entropy(leaf, target.to(device), weight=None if weight is None else weight.to(device),
                               reduction=reduction)
        loss.backward(torch.ones_like(loss) if reduction != "none" else sample(loss.shape, seed=9).to(device))
        results.append((loss.detach(), leaf.grad))
    assert_same(results[1][0], results[0][0])
    assert_same(results[1][1], results[0][1])


def test_segmentation_nll_rejects_bad_input():
    logits = torch.randn(2, 5, 6, 7, device="neuron").log_softmax(1)
    with pytest.raises(RuntimeError, match="size mismatch"):
        F.nll_loss(logits, torch.zeros(2, 6, 8, dtype=torch.long, device="neuron"))
    bad = torch.zeros(2, 6, 7, dtype=torch.long, device="neuron")
    bad[1, 2, 3] = 5
    with pytest.raises(RuntimeError, match="out of bounds"):
        F.nll_loss(logits, bad).item()


def test_equal(no_fallback):
    x = sample((4, 5))
    device = x.to("neuron")
    assert torch.equal(device, device.clone())
    changed = device.clone()
    changed[2, 3] += 1
    assert not torch.equal(device, changed)
    assert not torch.equal(device, device[:3])
    assert torch.equal(torch.arange(4, device="neuron"), torch.arange(4.0, device="neuron"))  # promoted, as on CPU
    nan = torch.tensor([1.0, NAN], device="neuron")
    assert torch.equal(nan, nan) == torch.equal(nan.cpu(), nan.cpu())
    with pytest.raises(RuntimeError, match="different devices"):
        torch.equal(device, x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_reductions_long_tail(dtype, no_fallback):
    x = special_values(torch.float32).clamp(-5, 5).nan_to_num(0.0)
    x[1, 3] = NAN
    x = x.to(dtype) if dtype.is_floating_point else (x * 4).to(dtype)
    d = x.to("neuron")
    assert_same(torch.nansum(d), torch.nansum(x))
    assert_same(torch.nansum(d, dim=1, keepdim=True), torch.nansum(x, dim=1, keepdim=True))
    for dim, keepdim in [(None, False), (None, True), (0, False), (1, True)]:
        for device_value, cpu_value in zip(torch.aminmax(d, dim=dim, keepdim=keepdim), torch.aminmax(x, dim=dim, keepdim=keepdim)):
            assert_same(device_value, cpu_value)
    assert_same(torch.count_nonzero(d, dim=1), torch.count_nonzero(x, dim=1))
    assert_same(torch.count_nonzero(d), torch.count_nonzero(x))


@pytest.mark.parametrize("tests", [3, 200])
@pytest.mark.parametrize("invert", [False, True])
def test_isin(tests, invert, no_fallback):
    g = torch.Generator().manual_seed(tests)
    elements = torch.randint(0, 300, (7, 9), generator=g)
    test_elements = torch.randint(0, 300, (tests,), generator=g)
    assert_same(torch.isin(elements.to("neuron"), test_elements.to("neuron"), invert=invert),
                torch.isin(elements, test_elements, invert=invert))
    floats = elements.float()
    floats[0, 0] = NAN
    assert_same(torch.isin(floats.to("neuron"), test_elements.to("neuron")), torch.isin(floats, test_elements))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32], ids=str)
def test_repeat_interleave_counts(dtype, no_fallback):
    repeats = torch.tensor([2, 0, 3, 1, 0], dtype=dtype)
    assert_same(torch.repeat_interleave(repeats.to("neuron")), torch.repeat_interleave(repeats))
    x = sample((5, 3))
    assert_same(torch.repeat_interleave(x.to("neuron"), repeats.to("neuron"), dim=0),
                torch.repeat_interleave(x, repeats, dim=0))
    assert_same(torch.repeat_interleave(repeats.to("neuron"), output_size=6), torch.repeat_interleave(repeats, output_size=6))
    assert_same(torch.repeat_interleave(repeats[:0].to("neuron")), torch.repeat_interleave(repeats[:0]))
    with pytest.raises(RuntimeError, match="can not be negative"):
        torch.repeat_interleave(torch.tensor([1, -1], dtype=dtype, device="neuron"))
    with pytest.raises(RuntimeError, match="does not match"):
        torch.repeat_interleave(repeats.to("neuron"), output_size=4)


@pytest.mark.parametrize("dim", [None, 0, 1])
def test_unique_consecutive(dim, no_fallback):
    x = torch.tensor([[1, 1, 2, 2], [1, 1, 2, 2], [3, 1, 1, 2], [3, 1, 1, 2], [0, 0, 0, 0]])
    floats = x.float()
    floats[0, 0] = floats[0, 1] = float("nan")  # NaNs never merge, as on CPU
    for values in (x, floats, x[:0] if dim != 1 else x[:, :0]):
        for device_value, cpu_value in zip(
                torch.unique_consecutive(values.to("neuron"), return_inverse=True, return_counts=True, dim=dim),
                torch.unique_consecutive(values, return_inverse=True, return_counts=True, dim=dim)):
            assert_same(device_value, cpu_value)
    assert_same(torch.unique_consecutive(x.to("neuron"), dim=dim), torch.unique_consecutive(x, dim=dim))


def test_channel_shuffle_with_gradient(no_fallback):
    (cpu_out, cpu_grads), (out, grads) = forward_backward(lambda x: F.channel_shuffle(x, 3), sample((2, 6, 4, 5)))
    assert_same(out, cpu_out)
    assert_same(grads[0], cpu_grads[0])
    with pytest.raises(RuntimeError, match="divisible by groups"):
        F.channel_shuffle(torch.ones(2, 5, 3, device="neuron"), 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_cross_vdot_take(dtype, no_fallback):
    a, b = (sample((4, 3, 5)) * 3).to(dtype), (sample((1, 3, 5), seed=1) * 3).to(dtype)
    assert_same(torch.linalg.cross(a.to("neuron"), b.to("neuron"), dim=1), torch.linalg.cross(a, b, dim=1))
    assert_same(torch.vdot(a[0, 0].to("neuron"), b[0, 1].to("neuron")), torch.vdot(a[0, 0], b[0, 1]))
    index = torch.tensor([[0, -1, 7], [59, -60, 3]])
    assert_same(torch.take(a.to("neuron"), index.to("neuron")), torch.take(a, index))
    with pytest.raises(RuntimeError, match="must have length 3"):
        torch.linalg.cross(a.to("neuron"), b.to("neuron"), dim=2)


@pytest.mark.parametrize("accumulate", [False, True])
def test_put_at_negative_indices_and_into_strided_tensors(accumulate, no_fallback):
    index = torch.tensor([[0, -1], [7, -20]])
    source = torch.tensor([[1.5, -2.0], [3.0, 4.0]])
    for make in (lambda: torch.arange(20.0).view(4, 5), lambda: torch.arange(20.0).view(5, 4).t()):
        expected = make().put_(index, source, accumulate=accumulate)
        actual = make().to("neuron").put_(index.to("neuron"), source.to("neuron"), accumulate=accumulate)
        assert_same(actual, expected)


def test_take_and_put_name_the_index_out_of_range_as_given():
    a = torch.arange(20.0, device="neuron")
    for bad in (20, -45):  # raised at the call, as CPU's IndexError
        with pytest.raises(IndexError, match=f"index {bad} is out of bounds for dimension 0 with size 20"):
            torch.take(a, torch.tensor([0, bad], device="neuron"))
        with pytest.raises(IndexError, match=f"index {bad} is out of bounds for dimension 0 with size 20"):
            a.put_(torch.tensor([bad], device="neuron"), torch.ones(1, device="neuron"))


def test_cross_gradients(no_fallback):
    (cpu_out, cpu_grads), (out, grads) = forward_backward(lambda x, y: torch.linalg.cross(x, y), sample((6, 3)),
                                                          sample((6, 3), seed=1))
    assert_same(out, cpu_out)
    for device_grad, cpu_grad in zip(grads, cpu_grads):
        assert_same(device_grad, cpu_grad)


BESSEL = {"i0": torch.i0, "i0e": torch.special.i0e, "i1": torch.special.i1, "i1e": torch.special.i1e}


@pytest.mark.parametrize("name", list(BESSEL))
def test_modified_bessel_functions_match_cpu_in_double(name, no_fallback):
    # Both sides of the switch from the power series to the asymptotic one at |x| = 30.
    fn = BESSEL[name]
    x = torch.cat([torch.linspace(-120, 120, 4801, dtype=torch.float64),
                   torch.tensor([0.0, -0.0, 1e-300, 29.999999, 30.000001, -30.5, 700.0, 705.0, float("nan")], dtype=torch.float64)])
    got, expected = fn(x.to("neuron")).cpu(), fn(x)
    assert torch.equal(got.isnan(), expected.isnan())
    torch.testing.assert_close(got, expected, rtol=1e-13, atol=0, equal_nan=True)
    zeros = expected == 0
    assert torch.equal(got[zeros].signbit(), expected[zeros].signbit())
    # Rounded from double in float32: within an ulp of the double value, where CPU PyTorch's
    # float formulas are off by up to 1e-6 (i1(-8) among them).
    x32 = x[:4801].float()
    torch.testing.assert_close(fn(x32.to("neuron")).cpu(), fn(x32.double()).float(), rtol=1.2e-7, atol=0)
    # The limits at infinity (CPU PyTorch's formulas give NaN for the unscaled ones there).
    ends = fn(torch.tensor([float("inf"), -float("inf")], dtype=torch.float64, device="neuron")).cpu().tolist()
    assert ends == {"i0": [math.inf, math.inf], "i0e": [0.0, 0.0], "i1": [math.inf, -math.inf], "i1e": [0.0, -0.0]}[name]


def test_modified_bessel_gradients_and_kaiser_window(no_fallback):
    (cpu_out, cpu_grads), (out, grads) = forward_backward(
        lambda t: torch.i0(t) + torch.special.i0e(t) + torch.special.i1(t) * torch.special.i1e(t),
        torch.linspace(-40, 40, 257, dtype=torch.float64))
    assert_same(out, cpu_out)
    torch.testing.assert_close(grads[0].cpu(), cpu_grads[0], rtol=1e-12, atol=0)
    # kaiser_window (torchaudio's resampling filters) ran through a CPU kernel stub with no entry
    # for other devices, an internal assert on neuron.
    for args in ((256, True, 5.0), (255, False, 12.0), (64, False), (64,), (1,), (0,)):
        for dtype, tol in ((torch.float64, 1e-13), (torch.float32, 1e-6)):
            window = torch.kaiser_window(*args, dtype=dtype, device="neuron")
            torch.testing.assert_close(window.cpu(), torch.kaiser_window(*args, dtype=dtype), rtol=tol, atol=tol)
    with pytest.raises(RuntimeError, match="kaiser_window expects floating point dtypes"):
        torch.kaiser_window(8, dtype=torch.long, device="neuron")
