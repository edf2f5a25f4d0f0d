"""torch.compile(backend="neuron"): sums, means, maxima and minima fused with the pointwise ops
around them, as row kernels (over the innermost dims) and column kernels (the innermost dim
kept): values and gradients against CPU PyTorch, operand layouts, NaN and infinities, accuracy,
dynamic sizes compiled once."""

import copy
import warnings

import pytest
import torch
from torch import nn

import torchneuron
from tolerances import assert_close_to_scale

pytestmark = pytest.mark.usefixtures("fresh_compiler")


class NormAndSoftmax(nn.Module):
    """An RMS norm and a softmax written out by hand, as many models do, and a mean loss."""

    def __init__(self, width):
        super().__init__()
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, width))

    def forward(self, x):
        z = self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
        p = torch.exp(z - z.amax(-1, keepdim=True))
        p = p / p.sum(-1, keepdim=True)
        return p, ((z - 1) ** 2).mean(), z.sum(-1), z.amin(-1)


@pytest.mark.parametrize("native", [True, False], ids=["native", "python_loop"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_reductions_fuse_with_their_pointwise_neighbours(dtype, native, monkeypatch, no_fallback):
    """Row reductions (keepdim or not) and a small full reduction fuse with the pointwise ops
    before and after them; forward and backward match CPU PyTorch, on both executors.
    bfloat16 rounds as eager mode does, so that amax's and amin's gradients split between the
    same ties as CPU's (test_bfloat16_backward_recomputes_the_forwards_values covers the
    default)."""
    import torchneuron.compiler
    from torchneuron.compiler import program

    monkeypatch.setattr(program, "native_executor", native)
    monkeypatch.setattr(torchneuron.compiler, "emulate_precision_casts", dtype == torch.bfloat16)
    torch.manual_seed(0)
    reference = NormAndSoftmax(40).to(dtype)  # rows of 40: five 8-lane blocks, no remainder; 37 below has one
    model = copy.deepcopy(reference).to("neuron")
    compiled = torch.compile(model, backend="neuron")
    # bf16: CPU rounds each op's result too (so that ties fall alike), and the row sums of
    # ~1-sized terms cancel: within 2e-2 of each output's largest magnitude.
    def check(got, expected, float32_tolerance=dict(atol=1e-5, rtol=1e-5)):
        if dtype == torch.float32:
            torch.testing.assert_close(got.cpu(), expected, **float32_tolerance)
        else:
            assert_close_to_scale(got, expected)

    with torch.no_grad():
        x = torch.randn(6, 37, 40, dtype=dtype)
        for got, expected in zip(compiled(x.to("neuron")), reference(x)):
            assert got.shape == expected.shape and got.dtype == expected.dtype
            check(got, expected)
    stats = torchneuron.compile_stats()
    assert stats["ops_eager"] == 0
    assert stats["kernels_generated"] == 2  # the rows (norm, softmax, sum, amin) and the loss
    x = torch.randn(6, 37, 40, dtype=dtype, requires_grad=True)
    x_neuron = x.detach().to("neuron").requires_grad_()
    got, expected = compiled(x_neuron), reference(x)
    loss = lambda outs: (outs[0] * outs[0]).sum() + outs[1] + outs[2].sum() + outs[3].sum()
    loss(got).backward()
    loss(expected).backward()
    check(x_neuron.grad, x.grad)
    check(model.weight.grad, reference.weight.grad, dict(atol=1e-4, rtol=1e-4))


def test_bfloat16_backward_recomputes_the_forwards_values(no_fallback):
    """bfloat16 kernels keep intermediates in float, but round a value the forward saves for
    the backward where they compute it: the backward recomputes the normed rows from the saved
    scale, and amax's gradient, which compares them with the saved maximum, must find that
    maximum in each row (without the rounding it found none: 0/0, NaN). Each row's maximum and
    minimum are planted well clear of the others, so that the gradient matches a float64
    reference."""
    torch.manual_seed(0)
    model = NormAndSoftmax(40)
    x = torch.randn(6, 37, 40) * 0.5
    top = torch.randint(0, 40, (6, 37, 1))
    x.scatter_(-1, top, 4.0).scatter_(-1, (top + 1) % 40, -4.0)
    reference_x = x.double().requires_grad_()
    reference_loss = lambda outs: (outs[0] * outs[0]).sum() + outs[1] + outs[2].sum() + outs[3].sum()
    reference_loss(copy.deepcopy(model).double()(reference_x)).backward()

    device_model = copy.deepcopy(model).to("neuron", torch.bfloat16)
    x_neuron = x.to("neuron", torch.bfloat16).requires_grad_()
    outs = torch.compile(device_model, backend="neuron")(x_neuron)
    reference_loss(outs).backward()
    grad = x_neuron.grad.cpu().double()
    assert torch.isfinite(grad).all()
    torch.testing.assert_close(grad, reference_x.grad, atol=0.05, rtol=0.03)


def test_reduction_kernel_inputs_in_any_layout(no_fallback):
    """A reduction kernel reads transposed and broadcast operands through their strides (the
    strided path). A sum over a middle dim of a contiguous input fuses (a column kernel); batch
    norm's statistics (the innermost dims and an outer one), and any of it on a channels-last
    input, stay eager."""
    def f(x, y, b):
        rows = (torch.tanh(x) * y.t() + b).sum(-1, keepdim=True)  # y.t() is a transposed view
        return rows * 2, (b * x).amax(-1), (x * y.t()).sum(0)

    x, y, b = torch.randn(12, 20), torch.randn(20, 12), torch.randn(12, 1)
    got = torch.compile(f, backend="neuron")(x.to("neuron"), y.to("neuron"), b.to("neuron"))
    for g, e in zip(got, f(x, y, b)):
        torch.testing.assert_close(g.cpu(), e, atol=1e-5, rtol=1e-5)
    assert torchneuron.compile_stats()["ops_eager"] == 2  # the two transposes

    def g(x):
        return (x * x).sum(1), (x + 1).sum([0, 2, 3])

    x = torch.randn(2, 8, 5, 5)
    for memory_format in (torch.contiguous_format, torch.channels_last):
        torch._dynamo.reset()
        torchneuron.reset_compile_stats()
        got = torch.compile(g, backend="neuron")(x.to(memory_format=memory_format).to("neuron"))
        for a, e in zip(got, g(x)):
            torch.testing.assert_close(a.cpu(), e, atol=1e-5, rtol=1e-5)
        assert torchneuron.compile_stats()["ops_eager"] == (1 if memory_format == torch.contiguous_format else 2)


def test_column_reductions_fuse_with_their_producers(no_fallback):
    """Sums, means and maxima over the outermost dims (bias and norm-weight gradients) run as
    column kernels: one pass accumulating blocks of kept elements. Values, NaN propagation and
    a linear layer's bias gradients match CPU PyTorch."""
    def f(g, x, w):
        h = torch.nn.functional.gelu(g) * w
        return h.sum(0), (h * x).sum([0, 1]), x.amax(0), (x * 3).mean(0, keepdim=True) + 1, (h - 1).amin([0, 1], keepdim=True)

    g, x, w = torch.randn(5, 60, 200), torch.randn(5, 60, 200), torch.randn(200)
    x[3, 5, 7] = float("nan")
    got = torch.compile(f, backend="neuron")(g.to("neuron"), x.to("neuron"), w.to("neuron"))
    for a, e in zip(got, f(g, x, w)):
        assert a.shape == e.shape
        torch.testing.assert_close(a.cpu(), e, atol=1e-4, rtol=1e-5, equal_nan=True)
    stats = torchneuron.compile_stats()
    assert stats["ops_eager"] == 0 and stats["ops_lowered"] == 11  # every op in a kernel

    torch.manual_seed(0)
    reference = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
    model = copy.deepcopy(reference).to("neuron")
    x = torch.randn(512, 64)
    (torch.compile(model, backend="neuron")(x.to("neuron")) ** 2).sum().backward()
    (reference(x) ** 2).sum().backward()
    for got, expected in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(got.grad.cpu(), expected.grad, atol=2e-4, rtol=1e-4)


def test_fused_max_and_min_propagate_nan_and_keep_infinities(no_fallback):
    def f(x):
        return (x * 2).amax(-1), (x * 2).amin(-1, keepdim=True), torch.exp(x - x.amax(-1, keepdim=True)).sum(-1)

    x = torch.randn(6, 40)
    x[1, 7] = float("nan")
    x[2] = float("-inf")
    x[3, 39] = float("inf")
    x[4] = float("inf")
    got = torch.compile(f, backend="neuron")(x.to("neuron"))
    for g, e in zip(got, f(x)):
        torch.testing.assert_close(g.cpu(), e, equal_nan=True)
    assert torchneuron.compile_stats()["ops_eager"] == 0


def test_reduction_kernel_overwrites_a_dying_input_after_reading_it(no_fallback):
    """y dies in the kernel that subtracts its row maximum, whose output then takes y's buffer:
    the kernel reads every element of a row (for the maximum) before it stores any. The sum
    without keepdim broadcasts along rows, not columns, so it is read by a later kernel."""
    def f(x):
        y = torch.exp(x)
        s = y.sum(-1)                 # [n]: broadcast against [n, n] it indexes columns
        d = y - s
        return d - d.amax(-1, keepdim=True), s

    x = torch.randn(24, 24)
    got = torch.compile(f, backend="neuron")(x.to("neuron"))
    for g, e in zip(got, f(x)):
        torch.testing.assert_close(g.cpu(), e, atol=1e-4, rtol=1e-5)
    assert torchneuron.compile_stats()["kernels_generated"] == 2


def test_reductions_with_dynamic_sizes_compile_once(no_fallback):
    model = NormAndSoftmax(16).to("neuron")
    compiled = torch.compile(model, backend="neuron", dynamic=True)
    for batch, seq in [(2, 5), (3, 9), (5, 12)]:
        x = torch.randn(batch, seq, 16, device="neuron")
        with torch.no_grad():
            for g, e in zip(compiled(x), model(x)):
                torch.testing.assert_close(g.cpu(), e.cpu(), atol=1e-5, rtol=1e-5)
    assert torchneuron.compile_stats()["graphs_compiled"] == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_reductions_over_middle_dims_run_as_column_kernels(dtype, no_fallback):
    """Means over a sequence's middle dim (pooling), sums over an outer and a middle dim, and a
    maximum over a middle dim run as column kernels whose blocks of kept elements are cut into
    runs along the innermost dim: with operands broadcast along the innermost kept dim and along
    the outer one, NaN propagation, bfloat16, and dynamic sizes compiled once."""
    def f(x, w, r):
        h = torch.tanh(x) * w
        return h.mean(1), (h * r).sum([0, 2]), (x - r).amax(1, keepdim=True), x.sum(1) + 1

    compiled = torch.compile(f, backend="neuron", dynamic=True)
    for shape in [(6, 50, 70, 64), (3, 9, 5, 130), (2, 3, 4, 5)]:
        x, w, r = torch.randn(*shape), torch.randn(shape[-1]), torch.randn(shape[0], 1, shape[2], 1)
        x[0, 1, 2, 3] = float("nan")
        got = compiled(*(t.to(dtype).to("neuron") for t in (x, w, r)))
        expected = f(*(t.to(dtype).float() for t in (x, w, r)))
        for a, e in zip(got, expected):
            assert a.dtype == dtype and a.shape == e.shape
            if dtype == torch.float32:
                torch.testing.assert_close(a.cpu(), e, equal_nan=True, atol=1e-4, rtol=1e-4)
            else:  # against float32 on the bfloat16 inputs: within 2e-2 of the output's largest value
                assert_close_to_scale(a, e, equal_nan=True)
    stats = torchneuron.compile_stats()
    assert stats["graphs_compiled"] == 1 and stats["ops_eager"] == 0, stats


@pytest.mark.parametrize("native", [True, False], ids=["native", "python_loop"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_column_kernels_broadcast_operands_and_dynamic_sizes(dtype, native, monkeypatch, no_fallback):
    """Column kernels read an operand broadcast along the kept dims (a per-row scale) and one
    broadcast along the folded dims (a weight); bfloat16 accumulates in float32 and matches CPU
    float32 within bfloat16 rounding; dynamic sizes (kept widths not a multiple of the 64-column
    block) compile once."""
    from torchneuron.compiler import program

    monkeypatch.setattr(program, "native_executor", native)

    def f(x, r, w):
        h = x * r * w
        return h.sum(0), (h + 1).mean([0, 1]), x.amax(0)

    compiled = torch.compile(f, backend="neuron", dynamic=True)
    for shape in [(5, 60, 200), (9, 20, 300), (3, 7, 65)]:
        x, r, w = torch.randn(*shape), torch.randn(shape[0], shape[1], 1), torch.randn(shape[2])
        got = compiled(*(t.to(dtype).to("neuron") for t in (x, r, w)))
        expected = f(*(t.to(dtype).float() for t in (x, r, w)))
        for a, e in zip(got, expected):
            assert a.dtype == dtype
            if dtype == torch.float32:
                torch.testing.assert_close(a.cpu(), e, atol=1e-4, rtol=1e-4)
            else:  # against float32 on the bfloat16 inputs: within 2e-2 of the output's largest value
                assert_close_to_scale(a, e)
    stats = torchneuron.compile_stats()
    assert stats["graphs_compiled"] == 1 and stats["ops_eager"] == 0, stats


def test_column_kernel_sums_are_as_accurate_as_eager(no_fallback):
    """Bias-gradient-like sums over many rows: float partials over blocks of rows folded into a
    double total, as eager's double accumulators. Summed in float alone, these columns were
    2.7e-6 (relative to the largest) off the float64 result; now 7e-8."""
    g = torch.Generator().manual_seed(0)
    grad, x = torch.randn(4096, 256, generator=g), torch.randn(4096, 256, generator=g)
    f = lambda grad, x: ((grad * x).sum(0), (grad * torch.sigmoid(x)).mean(0), grad.sum(0))
    got = torch.compile(f, backend="neuron")(grad.to("neuron"), x.to("neuron"))
    for out, ref in zip(got, f(grad.double(), x.double())):
        error = ((out.cpu().double() - ref).abs().max() / ref.abs().max()).item()
        assert error < 5e-7, error


def test_column_kernel_computes_a_broadcast_mask_inside_its_pass(no_fallback):
    """A kept-shaped value that no reduction feeds but a per-element value reads (the zero mask
    of a norm, as in normalize's backward) is computed in the pass over the folded dim; it
    was once computed only after it, and the kernel did not compile."""
    def f(x, norm):
        total = (x * x / norm).sum(1, keepdim=True)
        scaled = torch.where(norm == 0, 0.0, x / norm)
        return total, scaled, (x * scaled).sum(1)

    x, norm = torch.randn(2, 3, 4, 5), torch.rand(2, 1, 4, 5) + 0.5
    norm[0, 0, 1, :2] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a kernel the system compiler rejects would warn and run eagerly
        got = torch.compile(f, backend="neuron")(x.to("neuron"), norm.to("neuron"))
    for a, e in zip(got, f(x, norm)):
        torch.testing.assert_close(a.cpu(), e)
    stats = torchneuron.compile_stats()
    assert stats["graphs_eager"] == 0 and stats["kernels_generated"] >= 1, stats
