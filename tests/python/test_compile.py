"""torch.compile(backend="neuron"): fused kernels match eager, the three training models of the
eager tests track eager when compiled, constant folding, graph breaks, dynamic sizes without recompiling, no_grad
inference, modules with buffers, the artifact cache (in memory, on disk, across processes and
concurrent builders), the graph cache of AOTAutograd results, and the eager fallback with one
warning when the system compiler fails."""

import copy
import math
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torchneuron
from conftest import REPO_ROOT, _clean_env

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from tiny_gpt import TinyGPT, train_step  # noqa: E402
from test_training import cnn_batches, mlp_step as classifier_step, small_cnn  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_compiler(tmp_path, monkeypatch):
    """Each test compiles into its own cache directory with fresh Dynamo state and counters."""
    monkeypatch.setenv("TORCHNEURON_CACHE_DIR", str(tmp_path / "cache"))
    torch._dynamo.reset()
    torchneuron.reset_compile_stats()
    yield
    torch._dynamo.reset()


def pointwise_chain(x, y):
    a = torch.sin(x) * 2 + y
    b = torch.where(a > 0, a, a * 0.1) - x.exp()
    return b.sum(), torch.sigmoid(b) * 3, (b > 1).logical_not()


@pytest.mark.parametrize("emulate_precision_casts", [False, True], ids=["float_inside", "eager_rounding"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_fused_kernel_matches_eager(dtype, emulate_precision_casts, monkeypatch, no_fallback):
    """A kernel matches CPU PyTorch; in bfloat16 it computes in float and rounds what it stores,
    so it matches CPU's float32 chain rounded once (the sum: within its own accumulation order).
    Emulating eager's casts, it matches eager mode's bfloat16 chain op by op."""
    import torchneuron.compiler

    monkeypatch.setattr(torchneuron.compiler, "emulate_precision_casts", emulate_precision_casts)
    x = torch.randn(64, 32, device="neuron").to(dtype)
    y = torch.randn(32, device="neuron").to(dtype)  # broadcast into the kernel
    if dtype == torch.float32:
        expected = pointwise_chain(x.cpu(), y.cpu())
    elif emulate_precision_casts:
        expected = pointwise_chain(x, y)
    else:
        expected = [e.to(dtype) if e.is_floating_point() else e for e in pointwise_chain(x.cpu().float(), y.cpu().float())]
    got = torch.compile(pointwise_chain, backend="neuron")(x, y)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        tolerance = dict(atol=0.0, rtol=2 ** -8) if e.dim() == 0 and dtype == torch.bfloat16 else dict(atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(g.cpu(), e.cpu(), **tolerance)
    stats = torchneuron.compile_stats()
    assert stats["graphs_compiled"] == 1 and stats["graphs_eager"] == 0
    assert stats["kernels_generated"] == 1  # every op, the sum too, in one loop nest
    assert stats["ops_lowered"] >= 9 and stats["ops_eager"] == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_addcmul_and_addcdiv_fuse_whole_with_eagers_formula(dtype, no_fallback):
    """addcmul and addcdiv are not decomposed: each is one fused op with eager mode's formula.
    It matches CPU PyTorch (bit for bit in bfloat16 and int64; float32 within its default
    tolerance, as CPU's vector kernel orders the operations its own way) and eager mode bit for
    bit. torch.addcdiv with a value, which Dynamo itself splits into div, mul and add, is
    rounded once at the end: within one bfloat16 ulp of CPU."""
    def f(a, b, c):
        if dtype == torch.int64:
            return (torch.addcmul(a, b, c, value=3),)
        return a.addcdiv(b, c, value=-0.3), torch.addcmul(a, b, c, value=2.5), torch.addcdiv(a, b, c)

    torch.manual_seed(0)
    if dtype == torch.int64:
        a, b, c = (torch.randint(-50, 50, (64, 33), device="neuron") for _ in range(3))
    else:
        a, b, c = (torch.randn(64, 33, device="neuron").to(dtype) for _ in range(3))
    exact = dict(atol=0, rtol=0)
    got = torch.compile(f, backend="neuron")(a, b, c)
    for g, e, eager in zip(got, f(a.cpu(), b.cpu(), c.cpu()), f(a, b, c)):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g.cpu(), e, **({} if dtype == torch.float32 else exact))
        torch.testing.assert_close(g.cpu(), eager.cpu(), **exact)
    stats = torchneuron.compile_stats()
    assert stats["kernels_generated"] == 1 and stats["ops_eager"] == 0 and stats["ops_lowered"] == len(got)
    if dtype != torch.int64:
        split = lambda a, b, c: torch.addcdiv(a, b, c, value=3.14)
        got = torch.compile(split, backend="neuron")(a, b, c)
        torch.testing.assert_close(got.cpu(), split(a.cpu(), b.cpu(), c.cpu()), atol=1e-5, rtol=2 ** -8)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8], ids=str)
def test_integer_powers_match_cpu_exactly(dtype):
    """Integer pow in a fused kernel, against CPU PyTorch bit for bit: negative exponents (1 for
    a base of 1, -1 or 1 for -1, 0 otherwise, base 0 included), powers that wrap around, powers
    past 2^53 (exact, not through double), and a number as the base."""
    low = 0 if dtype == torch.uint8 else -3
    base = torch.arange(low, 4).repeat_interleave(9 - low)
    exponent = torch.arange(low, 9).repeat(4 - low)
    if dtype == torch.uint8:
        exponent = exponent * 3  # 3 ** 24 and beyond wrap around
    base, exponent = base.to(dtype), exponent.to(dtype)
    big_base = torch.tensor([3, 7, 5, -3], dtype=torch.int64)[: 3 if dtype == torch.uint8 else 4].to(dtype)
    big_exponent = torch.tensor([39, 20, 27, 33], dtype=torch.int64)[: len(big_base)].to(dtype)

    def f(b, e, bb, be):
        return (b + 0) ** e, bb.pow(be + 0), 2 ** (e.abs() + 0)

    got = torch.compile(f, backend="neuron")(*(t.to("neuron") for t in (base, exponent, big_base, big_exponent)))
    for g, e in zip(got, f(base, exponent, big_base, big_exponent)):
        assert g.dtype == e.dtype
        assert torch.equal(g.cpu(), e)
    assert torchneuron.compile_stats()["kernels_generated"] >= 1


def test_linspace_and_logspace_from_device_scalars():
    """torch.linspace / logspace with 0-dim device tensors as the ends, made on the CPU or on the
    device, compile (their decompositions mixed devices, which fake tensors refuse) and match
    CPU PyTorch."""
    start, end = torch.tensor(-1.5), torch.tensor(2.25)

    def f(a, b):
        return (torch.linspace(a, b, 7, device="cpu"), torch.logspace(a, b, 5, device="cpu"),
                torch.linspace(a, b, 6, device=a.device) * 2)

    got = torch.compile(f, backend="neuron")(start.to("neuron"), end.to("neuron"))
    assert [g.device.type for g in got] == ["cpu", "cpu", "neuron"]
    for g, e in zip(got, f(start, end)):
        torch.testing.assert_close(g.cpu(), e)


def test_relu_backward_fuses_into_one_kernel(no_fallback):
    """The forward's mask reads relu through aten.alias nodes, and threshold_backward decomposes
    into le, scalar_tensor(0) and where: pointwise ops read through the aliases and take the
    0-dim constant as a literal, so neither eager call splits its graph's kernel."""
    x = torch.randn(4, 8, 6, device="neuron", requires_grad=True)
    grad = torch.randn(4, 8, 6, device="neuron")
    reference = x.detach().cpu().requires_grad_()
    f = lambda t: torch.relu(t * 2) * 3
    torch.compile(f, backend="neuron")(x).backward(grad)
    f(reference).backward(grad.cpu())
    torch.testing.assert_close(x.grad.cpu(), reference.grad)
    stats = torchneuron.compile_stats()
    assert stats["graphs_compiled"] == 2 and stats["kernels_generated"] == 2  # one per graph


@pytest.mark.parametrize("channels_last", [False, True], ids=["contiguous", "channels_last"])
def test_clone_fuses_into_its_consumer(channels_last, no_fallback):
    """Dropout with p=0 decomposes to a clone: it is a kernel op, not an eager copy, and keeps
    the traced layout when it is an output."""
    def f(x, y):
        kept = torch.nn.functional.dropout(x, 0.0, training=True)
        return kept + y, x.clone(memory_format=torch.contiguous_format)

    x = torch.randn(2, 3, 4, 5, device="neuron")
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randn(5, device="neuron")
    with torch.no_grad():
        got = torch.compile(f, backend="neuron")(x, y)
    for g, e in zip(got, f(x.cpu(), y.cpu())):  # CPU PyTorch: values and layouts
        torch.testing.assert_close(g.cpu(), e)
        assert g.stride() == e.stride()
    stats = torchneuron.compile_stats()
    assert stats["ops_eager"] == 0 and stats["kernels_generated"] == 1


def test_pointwise_reads_through_expand(no_fallback):
    """A pointwise op on an expanded tensor reads the expand's source and broadcasts it in the
    kernel (an expanded operand has stride 0 where its shape says dense); the mean's backward
    expands its gradient like this."""
    def f(x, row, scalar):
        pooled = x.mean((2, 3), keepdim=True)
        return (pooled.expand_as(x) * x + row.expand(x.shape) - scalar.expand(x.shape)).relu()

    x = torch.randn(2, 3, 4, 5, device="neuron", requires_grad=True)
    row, scalar = torch.randn(5, device="neuron"), torch.tensor(0.25, device="neuron")
    reference = x.detach().cpu().requires_grad_()
    got, expected = torch.compile(f, backend="neuron")(x, row, scalar), f(reference, row.cpu(), scalar.cpu())
    torch.testing.assert_close(got.cpu(), expected)
    got.square().sum().backward()
    expected.square().sum().backward()
    torch.testing.assert_close(x.grad.cpu(), reference.grad)


def test_constants_are_folded_but_outputs_stay_fresh(no_fallback):
    def f(x):
        positions = torch.arange(x.shape[-1], device=x.device)
        scale = torch.full((x.shape[-1],), 0.5, device=x.device).exp().sum()  # constant, not fusible
        return x * scale + positions, torch.ones(3, device=x.device), torch.full((2, 3), 2.0, device=x.device).t()

    compiled = torch.compile(f, backend="neuron")
    for seed in range(2):
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(seed)).to("neuron")
        got, ones, twos = compiled(x)
        expected, _, _ = f(x.cpu())  # CPU PyTorch as the reference
        torch.testing.assert_close(got.cpu(), expected)
        assert torch.equal(ones.cpu(), torch.ones(3)) and torch.equal(twos.cpu(), torch.full((3, 2), 2.0))
        ones.zero_()  # a caller's change to an output (or to a view it is) must not reach the next call
        twos.zero_()
    stats = torchneuron.compile_stats()
    assert stats["graphs_compiled"] == 1 and stats["constants_folded"] >= 1


def test_non_contiguous_inputs_and_outputs(no_fallback):
    def f(x):
        return (x * 2).permute(1, 0) + 1  # eager keeps the permuted layout

    x = torch.randn(6, 5, device="neuron").t()
    got = torch.compile(f, backend="neuron")(x)
    torch.testing.assert_close(got.cpu(), f(x).cpu())
    assert got.stride() == f(x).stride()


@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "transposed", "sliced"])
def test_fused_kernel_layouts_and_broadcasts(layout, no_fallback):
    """The launcher merges dims every operand steps through as one and orders them by the
    output's strides; each layout and broadcast must still read and write the right elements."""
    def f(x, bias, row, scalar):
        return torch.relu(x * scalar + bias) - row, x.sigmoid()

    x = torch.randn(3, 5, 7, 9, device="neuron")
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    elif layout == "transposed":
        x = x.transpose(1, 3)
    elif layout == "sliced":
        x = torch.randn(3, 5, 7, 20, device="neuron")[..., 2:11]
    bias = torch.randn(x.shape[1], 1, 1, device="neuron")  # per channel
    row = torch.randn(x.shape[-1], device="neuron")        # along the innermost dim
    scalar = torch.tensor(1.5, device="neuron")
    got = torch.compile(f, backend="neuron")(x, bias, row, scalar)
    for g, e in zip(got, f(x.cpu(), bias.cpu(), row.cpu(), scalar.cpu())):  # CPU PyTorch: values and layouts
        torch.testing.assert_close(g.cpu(), e)
        assert g.stride() == e.stride()


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
    # bf16: CPU rounds each op's result too, and the row sums of ~1-sized terms cancel.
    tolerance = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=1e-1, rtol=2e-2)
    with torch.no_grad():
        x = torch.randn(6, 37, 40, dtype=dtype)
        for got, expected in zip(compiled(x.to("neuron")), reference(x)):
            assert got.shape == expected.shape and got.dtype == expected.dtype
            torch.testing.assert_close(got.cpu(), expected, **tolerance)
    stats = torchneuron.compile_stats()
    assert stats["ops_eager"] == 0
    assert stats["kernels_generated"] == 2  # the rows (norm, softmax, sum, amin) and the loss
    x = torch.randn(6, 37, 40, dtype=dtype, requires_grad=True)
    x_neuron = x.detach().to("neuron").requires_grad_()
    got, expected = compiled(x_neuron), reference(x)
    loss = lambda outs: (outs[0] * outs[0]).sum() + outs[1] + outs[2].sum() + outs[3].sum()
    loss(got).backward()
    loss(expected).backward()
    torch.testing.assert_close(x_neuron.grad.cpu(), x.grad, **tolerance)
    torch.testing.assert_close(model.weight.grad.cpu(), reference.weight.grad, atol=5e-2 if dtype != torch.float32 else 1e-4,
                               rtol=2e-2 if dtype != torch.float32 else 1e-4)


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


def test_fused_relu_and_abs_keep_nan_and_signed_zeros_as_eager_does(no_fallback):
    def f(x):
        return torch.relu(x * 1.0), torch.abs(x + 0.0), torch.relu(x) * 2.0

    x = torch.tensor([float("nan"), -0.0, 0.0, -1.0, 2.0, float("inf"), float("-inf")] * 3)
    got = torch.compile(f, backend="neuron")(x.to("neuron"))
    eager = f(x.to("neuron"))
    for g, e, c in zip(got, eager, f(x)):
        for result in (g.cpu(), e.cpu()):
            assert torch.equal(result.isnan(), c.isnan())
            assert torch.equal(result.nan_to_num(), c.nan_to_num()) and torch.equal(result.signbit(), c.signbit())
    assert torchneuron.compile_stats()["kernels_generated"] > 0


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
def test_linear_bias_and_activation_run_as_the_matmul_epilogue(dtype, no_fallback):
    """addmm splits into mm + bias add; the add (moved past the view a 3-D input needs) and the
    GELU after it run on each block of the product's rows in the mm's own device job. Forward
    and backward match CPU PyTorch, for 3-D and 2-D inputs."""
    torch.manual_seed(0)
    reference = nn.Sequential(nn.Linear(48, 160), nn.GELU(), nn.Linear(160, 48)).to(dtype)
    model = copy.deepcopy(reference).to("neuron")
    compiled = torch.compile(model, backend="neuron")
    tolerance = dict(atol=2e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=3e-2, rtol=2e-2)
    for shape in [(6, 50, 48), (300, 48)]:
        with torch.no_grad():
            x = torch.randn(*shape, dtype=dtype)
            torch.testing.assert_close(compiled(x.to("neuron")).cpu(), reference(x), **tolerance)
    stats = torchneuron.compile_stats()
    assert stats["mm_epilogues"] == stats["kernels_generated"] == 2 * stats["graphs_compiled"]
    x = torch.randn(6, 50, 48, dtype=dtype, requires_grad=True)
    x_neuron = x.detach().to("neuron").requires_grad_()
    before = torchneuron.compile_stats()["mm_epilogues"]
    (compiled(x_neuron) ** 2).sum().backward()
    (reference(x) ** 2).sum().backward()
    # Forward: bias add and GELU, bias add. Backward: the GELU backward, which AOTAutograd puts
    # after the weight-gradient mm, moves up to the input-gradient mm it reads.
    assert torchneuron.compile_stats()["mm_epilogues"] - before == 3
    # bf16: the product is rounded before the bias add, so sums of rounded terms differ by a
    # few units of the gradient's largest element.
    for got, expected in [(x_neuron.grad, x.grad)] + [(p.grad, r.grad) for p, r in zip(model.parameters(),
                                                                                         reference.parameters())]:
        scale = float(expected.abs().max())
        atol, rtol = (1e-4, 1e-4) if dtype == torch.float32 else (1e-2 * scale, 2e-2)
        torch.testing.assert_close(got.cpu(), expected, atol=atol, rtol=rtol)


def test_attention_written_out_runs_its_softmax_as_the_batched_product_epilogue(no_fallback):
    """Scores from a batched product, scaled, masked and put through a softmax written out: the
    whole row kernel runs on each block of the bmm's rows in its device job. Forward and
    backward match CPU PyTorch."""
    def attention(q, k, v, mask):
        s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1]) + mask
        p = torch.exp(s - s.amax(-1, keepdim=True))
        return (p / p.sum(-1, keepdim=True)) @ v

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 48, 16, requires_grad=True) for _ in range(3))
    mask = torch.triu(torch.full((48, 48), float("-inf")), 1)
    on_device = [t.detach().to("neuron").requires_grad_() for t in (q, k, v)]
    compiled = torch.compile(attention, backend="neuron")
    with torch.no_grad():
        torch.testing.assert_close(compiled(*on_device, mask.to("neuron")).cpu(), attention(q, k, v, mask),
                                   atol=1e-5, rtol=1e-5)
    stats = torchneuron.compile_stats()
    assert stats["mm_epilogues"] == 1 and stats["kernels_generated"] == 1
    compiled(*on_device, mask.to("neuron")).pow(2).sum().backward()
    attention(q, k, v, mask).pow(2).sum().backward()
    for got, expected in zip(on_device, (q, k, v)):
        torch.testing.assert_close(got.grad.cpu(), expected.grad, atol=1e-5, rtol=1e-5)


class ScaledEmbeddingMLP(nn.Module):
    """Token and position embeddings, added and scaled (a kernel that no product computes), then
    Linear-Tanh-Linear."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(100, 64)
        self.position = nn.Parameter(torch.randn(32, 64))
        self.hidden = nn.Linear(64, 48)
        self.out = nn.Linear(48, 16)

    def forward(self, tokens):
        x = (self.embedding(tokens) + self.position) * 0.5
        return self.out(torch.tanh(self.hidden(x)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_kernel_writing_a_matmul_operand_runs_as_its_prologue(dtype, no_fallback):
    """The embedding add and scale run on each block of rows of the first Linear's input right
    before its mm reads them, in the mm's device job, next to that mm's bias-and-tanh epilogue.
    float32 splits the product by rows (block by block); bfloat16 runs the prologue over all
    rows first. Forward and backward match CPU PyTorch."""
    torch.manual_seed(0)
    reference = ScaledEmbeddingMLP().to(dtype)
    model = copy.deepcopy(reference).to("neuron")
    tokens = torch.randint(0, 100, (8, 32))
    got = torch.compile(model, backend="neuron")(tokens.to("neuron"))
    expected = reference(tokens)
    tolerance = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(got.detach().cpu(), expected.detach(), **tolerance)
    (got.float() ** 2).sum().backward()
    (expected.float() ** 2).sum().backward()
    stats = torchneuron.compile_stats()
    assert stats["mm_prologues"] == stats["prologue_launches"] == 1
    assert stats["epilogue_launches"] == stats["mm_epilogues"] >= 3
    for p, r in zip(model.parameters(), reference.parameters()):
        scale = float(r.grad.abs().max())
        atol, rtol = (1e-4, 1e-4) if dtype == torch.float32 else (2e-2 * scale, 2e-2)
        torch.testing.assert_close(p.grad.cpu(), r.grad, atol=atol, rtol=rtol)


def test_row_kernels_and_batched_products_take_prologues(no_fallback):
    """Prologues from row kernels, whose rows are the operand's (an RMS norm) or whose reduced
    output is the operand (a mean over the last dim), and into a bmm (scaled queries times
    keys): all run fused, and match CPU PyTorch."""
    def f(x, w, weight, z, pooled_weight, q, k):
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
        pooled = torch.relu(z).mean(-1)
        return normed @ weight, pooled @ pooled_weight, (q * 0.25) @ k.transpose(-2, -1)

    torch.manual_seed(0)
    args = [torch.randn(512, 64), torch.randn(64), torch.randn(64, 96), torch.randn(24, 32, 16), torch.randn(32, 8),
            torch.randn(2, 3, 40, 16), torch.randn(2, 3, 40, 16)]
    with torch.no_grad():
        got = torch.compile(f, backend="neuron")(*[a.to("neuron") for a in args])
    for g, e in zip(got, f(*args)):
        torch.testing.assert_close(g.cpu(), e, atol=1e-4, rtol=1e-5)
    stats = torchneuron.compile_stats()
    assert stats["mm_prologues"] == stats["prologue_launches"] == 3


def test_prologue_whose_kernel_writes_the_other_operand_too_runs_apart(no_fallback):
    """y @ y.T with y from a kernel: the product reads all of y for every block of rows, so the
    run time launches the kernel on its own first; the result matches CPU PyTorch."""
    def f(x):
        y = torch.tanh(x) * 2
        return y @ y.t()

    x = torch.randn(300, 64)
    torch.testing.assert_close(torch.compile(f, backend="neuron")(x.to("neuron")).cpu(), f(x), atol=1e-4, rtol=1e-5)
    stats = torchneuron.compile_stats()
    assert stats["mm_prologues"] == 1 and stats["prologue_launches"] == 0


def run_training(model, batches, step, compiled, steps):
    model = copy.deepcopy(model).to("neuron")
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    forward = torch.compile(model, backend="neuron") if compiled else model
    return [step(forward, optimizer, [t.to("neuron") for t in batch]).item() for batch in batches[:steps]]


def test_compiled_training_tracks_eager():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    mlp = nn.Sequential(nn.Linear(10, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 3))
    rule = torch.randn(10, 3, generator=g)  # learnable labels
    inputs = [torch.randn(16, 10, generator=g) for _ in range(20)]
    mlp_batches = [(x, (x @ rule).argmax(dim=1)) for x in inputs]
    gpt = TinyGPT(vocab=40, context=16, width=32, heads=4, layers=2, dropout=0.0)
    gpt_batches = [(torch.randint(0, 40, (8, 17), generator=g),) for _ in range(20)]
    gpt_step = lambda m, opt, batch: train_step(m, opt, batch[0])
    cases = [(mlp, mlp_batches, classifier_step, True), (small_cnn(dropout=0.0), cnn_batches(20), classifier_step, False),
             (gpt, gpt_batches, gpt_step, False)]  # random tokens: nothing to learn in 20 steps
    for model, batches, step, learns_in_20_steps in cases:
        eager = run_training(model, batches, step, compiled=False, steps=20)
        compiled = run_training(model, batches, step, compiled=True, steps=20)
        assert max(abs(a - b) for a, b in zip(eager, compiled)) < 1e-4
        if learns_in_20_steps:
            assert sum(compiled[-5:]) < sum(compiled[:5])
    stats = torchneuron.compile_stats()
    assert stats["graphs_eager"] == 0 and stats["graphs_compiled"] >= 6  # forward and backward each
    assert stats["graphs_native"] == stats["graphs_compiled"]


def test_native_executor_matches_python_step_loop(monkeypatch):
    """Both executors launch the same kernels in the same order: losses, parameters and batch-norm
    buffers agree bitwise after three training steps."""
    from torchneuron.compiler import program

    torch.manual_seed(0)
    gpt = TinyGPT(vocab=40, context=16, width=32, heads=4, layers=2, dropout=0.0)
    g = torch.Generator().manual_seed(1)
    gpt_batches = [(torch.randint(0, 40, (8, 17), generator=g),) for _ in range(3)]
    gpt_step = lambda m, opt, batch: train_step(m, opt, batch[0])
    for model, batches, step in [(small_cnn(dropout=0.0), cnn_batches(3), classifier_step), (gpt, gpt_batches, gpt_step)]:
        results = []
        for native in (True, False):
            monkeypatch.setattr(program, "native_executor", native)
            torch._dynamo.reset()
            torchneuron.reset_compile_stats()
            trained = copy.deepcopy(model).to("neuron")
            optimizer = torch.optim.AdamW(trained.parameters(), lr=3e-3)
            forward = torch.compile(trained, backend="neuron")
            losses = [step(forward, optimizer, [t.to("neuron") for t in batch]).item() for batch in batches]
            stats = torchneuron.compile_stats()
            assert stats["graphs_native"] == (stats["graphs_compiled"] if native else 0) and stats["graphs_compiled"] >= 2
            results.append((losses, {k: v.cpu() for k, v in trained.state_dict().items()}))
        (native_losses, native_state), (python_losses, python_state) = results
        assert native_losses == python_losses
        for name, value in native_state.items():
            assert torch.equal(value, python_state[name]), name


def test_backward_program_frees_saved_tensors_as_it_goes(no_fallback):
    """Dynamo wraps backward programs in torch._dynamo.disable; they must still take AOTAutograd's
    boxed inputs (no warning), so that each saved activation is freed after its last use rather
    than when the backward ends."""
    def f(x, weights):
        for w in weights:
            x = torch.tanh(x @ w)
        return x.sum()

    x = torch.randn(512, 512, device="neuron")  # 1 MiB per activation and per weight gradient
    weights = [torch.randn(512, 512, device="neuron", requires_grad=True) for _ in range(8)]
    compiled = torch.compile(f, backend="neuron")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            loss = compiled(x, weights)
            torch.neuron.synchronize()
            before = torch.neuron.memory_allocated()
            torch.neuron.reset_peak_memory_stats()
            loss.backward()
            torch.neuron.synchronize()
            peak_mib = (torch.neuron.max_memory_allocated() - before) / 2**20
            for w in weights:
                w.grad = None
    assert not [w for w in caught if "boxed" in str(w.message)]
    # 8 MiB of weight gradients plus 16 MiB of saved activations if none were freed early.
    assert peak_mib < 8 + 8


def test_native_executor_keeps_error_types(no_fallback):
    """An op failing inside a natively run graph raises the same exception type as in eager mode
    (here torch.OutOfMemoryError), naming the graph node when the executor called it; the
    device stays usable."""
    def f(x):
        return x + torch.ones(1 << 40, device=x.device).sum()

    x = torch.randn(4, device="neuron")
    compiled = torch.compile(f, backend="neuron")
    with pytest.raises(torch.OutOfMemoryError):
        compiled(x)  # the first call runs under an AOTAutograd dispatch mode, in Python
    with pytest.raises(torch.OutOfMemoryError, match="raised by node"):
        compiled(x)
    assert torchneuron.compile_stats()["graphs_native"] == 1
    torch.testing.assert_close((x * 2).cpu(), x.cpu() * 2)


def test_native_executor_computes_symbolic_sizes(no_fallback):
    """Dynamic shapes put Python integer arithmetic on sizes into the graphs; the native executor
    computes it, so that one compiled graph serves every size."""
    def f(x):
        return (torch.tanh(x).reshape(x.shape[0] * x.shape[1], -1) * 2).sum(0) + x.shape[1] // 2 - x.shape[0] % 3

    compiled = torch.compile(f, backend="neuron", dynamic=True)
    for batch, seq in [(2, 5), (3, 7), (7, 4)]:
        x = torch.randn(batch, seq, 6, device="neuron", requires_grad=True)
        reference = x.detach().cpu().requires_grad_()
        got = compiled(x)
        expected = f(reference)
        torch.testing.assert_close(got.cpu(), expected)
        got.sum().backward()
        expected.sum().backward()
        torch.testing.assert_close(x.grad.cpu(), reference.grad)
    stats = torchneuron.compile_stats()
    assert stats["graphs_compiled"] == 2 and stats["graphs_native"] == 2  # forward and backward, once


def test_graph_break_and_no_grad_inference(no_fallback):
    def f(x):
        y = torch.relu(x) + 1
        print("graph break")  # Dynamo splits the function here
        return y * y

    x = torch.randn(4, 4, device="neuron")
    with torch.no_grad():
        got = torch.compile(f, backend="neuron")(x)
    torch.testing.assert_close(got.cpu(), ((torch.relu(x) + 1) ** 2).cpu())
    assert torchneuron.compile_stats()["graphs_compiled"] == 2


def test_generator_state_calls_break_the_graph_and_run_eagerly(no_fallback):
    """torch.neuron's seed and state calls stay out of graphs, as torch.cuda's do: AOTAutograd
    would drop them, so the numbers drawn after them would differ from eager."""
    from torch.testing._utils import wrapper_set_seed

    def f(x):
        state = torch.neuron.get_rng_state()
        torch.neuron.manual_seed(7)
        drawn = x * torch.rand(x.shape, device=x.device)
        torch.neuron.set_rng_state(state)
        return drawn, x.sum()

    x = torch.randn(8, device="neuron")
    # OpInfo's seeded wrapper reads and restores generator states under no_dispatch(). (First:
    # once Dynamo has broken a graph inside these functions it skips them from then on.)
    item = torch.compile(lambda t: wrapper_set_seed(torch.Tensor.item, t), backend="neuron")
    assert item(x[3]) == x.cpu()[3].item()
    torch.neuron.manual_seed(1)
    expected = f(x)
    state_after = torch.neuron.get_rng_state()
    torch.neuron.manual_seed(1)
    got = torch.compile(f, backend="neuron")(x)
    torch.testing.assert_close(got[0].cpu(), expected[0].cpu(), rtol=0, atol=0)
    torch.testing.assert_close(got[1].cpu(), x.cpu().sum())
    assert torch.equal(torch.neuron.get_rng_state(), state_after)


def test_dynamic_sizes_compile_once(no_fallback):
    def f(x, y):
        return torch.tanh(x) * y + x

    compiled = torch.compile(f, backend="neuron", dynamic=True)
    for batch, seq in [(2, 5), (3, 7), (8, 11)]:
        x = torch.randn(batch, seq, 4, device="neuron")
        y = torch.randn(seq, 4, device="neuron")
        torch.testing.assert_close(compiled(x, y).cpu(), f(x, y).cpu())
    assert torchneuron.compile_stats()["graphs_compiled"] == 1


def test_batch_norm_buffers_update(monkeypatch):
    """Training batch norms update their running statistics in place (native_batch_norm, as
    eager mode does) instead of functionalization's clones and write-back copies, and the
    buffers track eager mode's."""
    from torchneuron.compiler import lowering

    rewrites = []
    rewrite = lowering.update_batch_norm_stats_in_place
    monkeypatch.setattr(lowering, "update_batch_norm_stats_in_place", lambda gm: rewrites.append(rewrite(gm)) or rewrites[-1])
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Linear(5, 5), nn.BatchNorm1d(5))
    eager, compiled = copy.deepcopy(model).to("neuron"), copy.deepcopy(model).to("neuron")
    run = torch.compile(compiled, backend="neuron")
    for _ in range(3):
        x = torch.randn(8, 6, device="neuron", requires_grad=True)
        got, expected = run(x), eager(x)
        torch.testing.assert_close(got.cpu(), expected.cpu())
        got.sum().backward()
    for index in (1, 4):
        torch.testing.assert_close(compiled[index].running_mean.cpu(), eager[index].running_mean.cpu())
        torch.testing.assert_close(compiled[index].running_var.cpu(), eager[index].running_var.cpu())
        assert compiled[index].num_batches_tracked.item() == 3
    assert rewrites[0] == 2  # the forward graph's two batch norms


def start_python(code, env, *args):
    return subprocess.Popen([sys.executable, "-c", code, *args], cwd=REPO_ROOT, env=_clean_env(env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_artifact_cache_in_memory_on_disk_and_across_processes(tmp_path):
    x = torch.randn(8, device="neuron")
    f = lambda t: torch.exp(t) * 2 - 1
    torch.compile(f, backend="neuron")(x)
    assert torchneuron.compile_stats()["artifacts_built"] == 1
    torch._dynamo.reset()
    torch.compile(f, backend="neuron")(x)
    assert torchneuron.compile_stats()["memory_cache_hits"] == 1
    script = textwrap.dedent("""
        import torch, torchneuron
        x = torch.randn(8, device="neuron")
        torch.compile(lambda t: torch.exp(t) * 2 - 1, backend="neuron")(x)
        s = torchneuron.compile_stats()
        print("built", s["artifacts_built"], "disk", s["disk_cache_hits"])
    """)
    later = start_python(script, {"TORCHNEURON_CACHE_DIR": os.environ["TORCHNEURON_CACHE_DIR"]})
    assert "built 0 disk 1" in later.communicate(timeout=120)[0]
    # Two processes building the same new artifact at once: one builds, the other waits and reuses.
    env = {"TORCHNEURON_CACHE_DIR": str(tmp_path / "shared")}
    racers = [start_python(script.replace("* 2 - 1", "* 3 - 1"), env) for _ in range(2)]
    outputs = [r.communicate(timeout=120)[0] for r in racers]
    assert all(r.returncode == 0 for r in racers), outputs
    assert sorted(o.strip().splitlines()[-1] for o in outputs) == ["built 0 disk 1", "built 1 disk 0"]


def test_compiler_failure_falls_back_to_eager_with_a_warning(monkeypatch, no_fallback):
    monkeypatch.setenv("CXX", "/bin/false")
    x = torch.randn(8, device="neuron")
    with pytest.warns(UserWarning, match="running a graph of .* eagerly: RuntimeError: neuron compiler: the system compiler failed"):
        got = torch.compile(lambda t: torch.cos(t) + 1, backend="neuron")(x)
    torch.testing.assert_close(got.cpu(), (torch.cos(x) + 1).cpu())
    assert torchneuron.compile_stats()["graphs_eager"] == 1


def test_modes_compile_and_unknown_modes_and_options_are_refused(no_fallback):
    x = torch.randn(8, device="neuron")
    for mode in ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        torch._dynamo.reset()
        got = torch.compile(lambda t: torch.sin(t) * 2, backend="neuron", mode=mode)(x)
        torch.testing.assert_close(got.cpu(), (torch.sin(x) * 2).cpu())
    torch._dynamo.reset()
    with pytest.raises(Exception, match="unknown mode 'fastest'; the modes are default, reduce-overhead"):
        torch.compile(lambda t: t + 1, backend="neuron", mode="fastest")(x)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="takes no options, got triton.cudagraphs"):
        torch.compile(lambda t: t + 2, backend="neuron", options={"triton.cudagraphs": True})(x)


def test_backend_is_registered_by_name_and_entry_point():
    from importlib.metadata import entry_points

    assert "neuron" in torch._dynamo.list_backends(exclude_tags=())
    names = [ep.name for ep in entry_points(group="torch_dynamo_backends")]
    assert "neuron" in names


def test_conformance_compile_mode_runs_samples_through_the_compiler():
    from torchneuron import conformance

    ops = conformance.all_ops(None)
    for name, dtype in [("add", "float32"), ("nn.functional.gelu", "bfloat16"), ("roll", "float32")]:
        entry = conformance.run_entry(ops[name], dtype, grad=True, compile_mode=True)
        assert entry["status"] == "pass", entry
    assert torchneuron.compile_stats()["graphs_compiled"] > 10  # one graph (or two) per sample


@pytest.mark.parametrize("native", [True, False], ids=["native", "python_loop"])
def test_reused_buffer_has_the_layout_its_value_needs(native, monkeypatch, no_fallback):
    """A kernel output planned into a dying input's buffer (same sizes and dtype) whose eager
    layout differs gets a fresh buffer: `z` is row-major where `y` was permuted, and the view
    after it relies on that (found by the sweep's compiled backward of afmoe and aimv2)."""
    from torchneuron.compiler import program

    monkeypatch.setattr(program, "native_executor", native)

    def f(x, w1, w2):
        y = x.permute(0, 2, 1) * 2
        m = torch.mm(w1, w2)
        z = (y * m).contiguous()
        return (z.view(4, 128) + 1,)

    torch._dynamo.reset()
    x, w1, w2 = torch.randn(4, 8, 16), torch.randn(16, 4), torch.randn(4, 8)
    got = torch.compile(f, backend="neuron")(x.to("neuron"), w1.to("neuron"), w2.to("neuron"))
    for a, e in zip(got, f(x, w1, w2)):
        torch.testing.assert_close(a.cpu(), e, atol=1e-5, rtol=1e-5)
    assert torchneuron.compile_stats()["kernels_generated"] >= 2


def test_kernel_reading_a_product_moves_up_to_it_only_when_its_inputs_allow():
    """The hoisting pass on a backward-shaped step list: mm (input gradient), mm (weight
    gradient), a view of the first product and a view of a saved input, then the kernel reading
    both. The kernel and the product's view move up to the first mm, the other view before it,
    and the moved kernel's outputs lose their planned buffers. A kernel input computed by a real
    op between the two keeps the order."""
    from torchneuron.compiler.program import _hoist_product_readers

    def op(name, reads, writes, overload=""):
        return ("op", (name, overload, [], writes, False, name), reads, writes)

    kernel = ("kernel", (0, [12, 13], [(20, torch.float32, None, 4, 12, 0)], [8, 8], []), [12, 13], [20])
    steps = [op("aten::mm", [1, 2], [10]), op("aten::mm", [3, 4], [11]), op("aten::view", [10], [12]),
             op("aten::view", [5], [13]), kernel, op("aten::sum", [20], [21])]
    moved = _hoist_product_readers(list(steps), set())
    assert [s[3] for s in moved] == [[13], [10], [12], [20], [11], [21]]
    assert moved[3][1][2] == [(20, torch.float32, None, -1, -1, 0)]
    # The saved input comes from an op after the first mm: nothing moves.
    steps[3] = op("aten::gelu", [5], [13])
    assert _hoist_product_readers(list(steps), set()) == steps


def test_number_passed_for_a_tensor_argument_of_an_eager_call(no_fallback):
    """floor_divide(x, 2) reaches the graph as aten.div.Tensor_mode(x, 2): a Python number where
    the schema takes a Tensor. The native executor passes it as a wrapped number (as Python's
    argument parser does), so the graph compiles instead of running eagerly, and integer and
    float inputs keep their result dtypes."""
    def f(x):
        return torch.floor_divide(x, 2) + 1

    for x in (torch.randn(8, 8) * 10, torch.randint(-20, 20, (8, 8))):
        torch._dynamo.reset()
        torchneuron.reset_compile_stats()
        got = torch.compile(f, backend="neuron")(x.to("neuron"))
        expected = f(x)
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got.cpu(), expected)
        stats = torchneuron.compile_stats()
        assert stats["graphs_eager"] == 0 and stats["graphs_native"] == 1, stats


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
    tolerance = dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else dict(atol=0.25, rtol=0.02)
    for shape in [(6, 50, 70, 64), (3, 9, 5, 130), (2, 3, 4, 5)]:
        x, w, r = torch.randn(*shape), torch.randn(shape[-1]), torch.randn(shape[0], 1, shape[2], 1)
        x[0, 1, 2, 3] = float("nan")
        got = compiled(*(t.to(dtype).to("neuron") for t in (x, w, r)))
        expected = f(*(t.to(dtype).float() for t in (x, w, r)))
        for a, e in zip(got, expected):
            assert a.dtype == dtype and a.shape == e.shape
            torch.testing.assert_close(a.cpu().float(), e, equal_nan=True, **tolerance)
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
    tolerance = dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else dict(atol=0.25, rtol=0.02)
    for shape in [(5, 60, 200), (9, 20, 300), (3, 7, 65)]:
        x, r, w = torch.randn(*shape), torch.randn(shape[0], shape[1], 1), torch.randn(shape[2])
        got = compiled(*(t.to(dtype).to("neuron") for t in (x, r, w)))
        expected = f(*(t.to(dtype).float() for t in (x, r, w)))
        for a, e in zip(got, expected):
            assert a.dtype == dtype
            torch.testing.assert_close(a.cpu().float(), e, **tolerance)
    stats = torchneuron.compile_stats()
    assert stats["graphs_compiled"] == 1 and stats["ops_eager"] == 0, stats


def gpt_training(compiled_forward, model, batches):
    """Losses and final gradients of a few AdamW steps."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = [train_step(compiled_forward, optimizer, batch).item() for batch in batches]
    return losses, [p.grad.cpu() for p in model.parameters()]


def test_graph_cache_reloads_forward_and_backward(tmp_path):
    """A second compile of the same graph (new Dynamo state, then a new process) reloads
    AOTAutograd's result from the graph cache instead of tracing again, and trains the same."""
    torch.manual_seed(0)
    gpt = TinyGPT(vocab=40, context=16, width=32, heads=4, layers=1, dropout=0.0)
    batches = [torch.randint(0, 40, (4, 17)) for _ in range(3)]
    cpu_model = copy.deepcopy(gpt)
    cpu_losses, cpu_grads = gpt_training(cpu_model, cpu_model, batches)
    runs = []
    for _ in range(2):
        torch._dynamo.reset()
        model = copy.deepcopy(gpt).to("neuron")
        runs.append(gpt_training(torch.compile(model, backend="neuron"), model, [b.to("neuron") for b in batches]))
    stats = torchneuron.compile_stats()
    assert stats["graph_cache_saves"] == 1 and stats["graph_cache_hits"] == 1
    assert stats["graphs_compiled"] == 4 and stats["graphs_eager"] == 0  # a hit still compiles both graphs
    (first_losses, first_grads), (hit_losses, hit_grads) = runs
    assert hit_losses == first_losses
    for a, b in zip(first_grads, hit_grads):
        assert torch.equal(a, b)
    assert max(abs(a - b) for a, b in zip(cpu_losses, hit_losses)) < 1e-4
    for a, b in zip(cpu_grads, hit_grads):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    script = textwrap.dedent(f"""
        import sys, torch, torchneuron
        sys.path.insert(0, {os.path.join(REPO_ROOT, "examples")!r})
        from tiny_gpt import TinyGPT, train_step
        torch.manual_seed(0)
        model = TinyGPT(vocab=40, context=16, width=32, heads=4, layers=1, dropout=0.0).to("neuron")
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        torch.manual_seed(1)
        tokens = torch.randint(0, 40, (4, 17)).to("neuron")
        loss = train_step(torch.compile(model, backend="neuron"), optimizer, tokens).item()
        s = torchneuron.compile_stats()
        print("hits", s["graph_cache_hits"], "saves", s["graph_cache_saves"], "built", s["artifacts_built"], "loss", loss)
    """)
    process = start_python(script, {"TORCHNEURON_CACHE_DIR": os.environ["TORCHNEURON_CACHE_DIR"]})
    output = process.communicate(timeout=120)[0]
    torch.manual_seed(0)
    model = TinyGPT(vocab=40, context=16, width=32, heads=4, layers=1, dropout=0.0)
    torch.manual_seed(1)
    tokens = torch.randint(0, 40, (4, 17))
    expected = train_step(model, torch.optim.AdamW(model.parameters(), lr=3e-3), tokens).item()  # on the CPU
    last = output.strip().splitlines()[-1].split()
    assert last[:6] == ["hits", "1", "saves", "0", "built", "0"], output
    assert abs(float(last[-1]) - expected) < 1e-4


def test_graph_cache_serves_a_dynamic_graph_at_other_sizes_in_a_new_process(tmp_path):
    """dynamic=True: the entry saved at one batch size is reloaded by a new process at another,
    forward and backward, and matches CPU PyTorch there."""
    script = textwrap.dedent("""
        import sys, torch, torchneuron
        from torch import nn
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
        x = torch.randn(int(sys.argv[1]), 16)
        expected = model(x)
        expected.square().sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        device_model = model.to("neuron")
        device_model.zero_grad()
        got = torch.compile(device_model, backend="neuron", dynamic=True)(x.to("neuron"))
        got.square().sum().backward()
        error = max([(got.detach().cpu() - expected.detach()).abs().max().item()]
                    + [(p.grad.cpu() - g).abs().max().item() for p, g in zip(device_model.parameters(), grads)])
        s = torchneuron.compile_stats()
        print("hits", s["graph_cache_hits"], "saves", s["graph_cache_saves"], "error", error)
    """)
    outputs = []
    for rows in (5, 9):
        process = start_python(script, {"TORCHNEURON_CACHE_DIR": str(tmp_path / "cache")}, str(rows))
        outputs.append(process.communicate(timeout=120)[0].strip().splitlines()[-1].split())
    assert outputs[0][:4] == ["hits", "0", "saves", "1"], outputs
    assert outputs[1][:4] == ["hits", "1", "saves", "0"], outputs
    assert all(float(out[-1]) < 1e-4 for out in outputs), outputs


def test_graph_cache_keys_and_refusals(tmp_path, caplog):
    """Grad mode, shapes and layouts are part of the key; one entry serves a dynamic graph at
    every size; graphs calling functions outside torch are not cached; an unreadable entry is a
    miss that is then overwritten."""
    from torchneuron.compiler import autograd_cache

    def f(x, w):
        return torch.tanh(x @ w) * 2

    x, w = torch.randn(6, 4, device="neuron"), torch.randn(4, 5, device="neuron", requires_grad=True)

    def compile_and_check(x, w, function=f, **options):
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(function, backend="neuron", **options)(x, w).detach().cpu(),
                                   function(x.cpu(), w.detach().cpu()))

    compile_and_check(x, w)
    with torch.no_grad():
        compile_and_check(x, w)
    compile_and_check(x.t().contiguous().t(), w)
    assert torchneuron.compile_stats()["graph_cache_saves"] == 3
    assert torchneuron.compile_stats()["graph_cache_hits"] == 0
    compile_and_check(x, w)
    assert torchneuron.compile_stats()["graph_cache_hits"] == 1
    compile_and_check(torch.randn(7, 4, device="neuron"), w, dynamic=True)
    assert torchneuron.compile_stats()["graph_cache_saves"] == 4
    compile_and_check(torch.randn(11, 4, device="neuron"), w, dynamic=True)
    assert torchneuron.compile_stats()["graph_cache_hits"] == 2

    @torch.compiler.allow_in_graph
    def outside_torch(t):
        return t + 1

    with caplog.at_level("DEBUG", logger="torchneuron.compiler.autograd_cache"):
        compile_and_check(x, w, function=lambda x, w: outside_torch(x) @ w)
    assert torchneuron.compile_stats()["graph_cache_saves"] == 4
    assert "not caching a graph of" in caplog.text and "outside_torch" in caplog.text
    entries = list((tmp_path / "cache").rglob("*.pkl"))
    assert len(entries) == 4
    for entry in entries:
        entry.write_bytes(b"not a pickle")
    autograd_cache._entries.clear()
    compile_and_check(x, w)
    stats = torchneuron.compile_stats()
    assert stats["graph_cache_hits"] == 2 and stats["graph_cache_saves"] == 5


def test_graph_cache_hit_of_a_rejected_graph_runs_it_eagerly(monkeypatch):
    """A graph reloaded from the graph cache that the compiler then rejects runs eagerly after
    the warning, as on a miss."""
    from torchneuron.compiler import lowering

    f = lambda t: torch.sin(t) * 3 + 1
    x = torch.randn(5, device="neuron")
    torch.compile(f, backend="neuron")(x)
    torch._dynamo.reset()

    def reject(gm, **options):
        raise RuntimeError("lowering rejected this graph")

    monkeypatch.setattr(lowering, "lower", reject)
    with pytest.warns(UserWarning, match="eagerly: RuntimeError: lowering rejected this graph"):
        got = torch.compile(f, backend="neuron")(x)
    torch.testing.assert_close(got.cpu(), f(x.cpu()))
    stats = torchneuron.compile_stats()
    assert stats["graph_cache_hits"] == 1 and stats["graphs_eager"] == 1


def test_graph_cache_keeps_batch_norm_buffer_updates():
    """Input mutations (running statistics) are replayed by AOTAutograd's wrappers on a hit."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5), nn.BatchNorm1d(5), nn.ReLU())
    inputs = [torch.randn(8, 6) for _ in range(2)]
    reference = copy.deepcopy(model)  # on the CPU
    for x in inputs:
        reference(x).sum().backward()
    compiled = []
    for _ in range(2):
        torch._dynamo.reset()
        compiled.append(copy.deepcopy(model).to("neuron"))
        run = torch.compile(compiled[-1], backend="neuron")
        for x in inputs:
            run(x.to("neuron").requires_grad_()).sum().backward()
    assert torchneuron.compile_stats()["graph_cache_hits"] == 1
    for got in compiled:
        torch.testing.assert_close(got[1].running_mean.cpu(), reference[1].running_mean)
        torch.testing.assert_close(got[1].running_var.cpu(), reference[1].running_var)
        torch.testing.assert_close(got[0].weight.grad.cpu(), reference[0].weight.grad)
        assert got[1].num_batches_tracked.item() == 2


@pytest.mark.parametrize("packed", ["attention", "gated"])
def test_unpacked_tensor_gradient_runs_as_one_stack(packed, monkeypatch, no_fallback):
    """q, k, v = qkv.unbind(0): the decomposed gradient (a zero-filled where per slice, summed,
    then copied to the layout the weight-gradient mm reads) becomes one cat into that layout."""
    import torchneuron.compiler.lowering as lowering

    rewritten = []
    original = lowering.stack_select_backward_sums
    monkeypatch.setattr(lowering, "stack_select_backward_sums", lambda gm: rewritten.append(original(gm)))

    class Packed(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(32, 96)

        def forward(self, x):
            b, t, c = x.shape
            if packed == "attention":
                q, k, v = self.qkv(x).view(b, t, 3, 4, c // 4).permute(2, 0, 3, 1, 4)
                return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, c)
            q, k, v = self.qkv(x).view(b, t, 3, c).permute(2, 0, 1, 3)
            return q * torch.sigmoid(k) + v

    torch.manual_seed(0)
    model = Packed()
    x = torch.randn(2, 8, 32)
    reference = model(x)
    reference.square().sum().backward()
    device_model = copy.deepcopy(model).to("neuron")
    for p in device_model.parameters():
        p.grad = None
    out = torch.compile(device_model, backend="neuron")(x.to("neuron"))
    out.square().sum().backward()
    torch.testing.assert_close(out.cpu(), reference, rtol=1e-4, atol=1e-5)
    for p, ref in zip(device_model.parameters(), model.parameters()):
        torch.testing.assert_close(p.grad.cpu(), ref.grad, rtol=1e-4, atol=1e-5)
    assert rewritten == [0, 1]  # nothing in the forward graph, the one sum in the backward


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


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_pointwise_kernel_with_many_broadcast_operands(dtype, no_fallback):
    """Masks and scales over rows (innermost dim 1) are read once per run without a broadcast
    flag, so a kernel with more of them than the three flags the codegen unswitches still
    takes its vectorized path; an input expanded at run time (stride 0) still reads right.
    bfloat16 computes in float inside the kernel: the float32 result, rounded once."""
    def f(x, m1, m2, m3, scale, w):
        y = torch.where(m1, x, 0.0) + torch.where(m2, x * 2, 1.0) * scale
        return torch.where(m3, y, -y) * w + scale

    x = torch.randn(64, 96)
    m1, m2, m3 = (torch.rand(64, 1) > p for p in (0.3, 0.5, 0.7))
    scale, w = torch.randn(64, 1), torch.randn(96)
    compiled = torch.compile(f, backend="neuron")
    for row_scale in (scale, scale[:1].expand(64, 1)):
        args = (x.to(dtype), m1, m2, m3, row_scale.to(dtype), w.to(dtype))
        got = compiled(*(a.to("neuron") for a in args))
        expected = f(*(a.float() if a.is_floating_point() else a for a in args)).to(dtype)
        torch.testing.assert_close(got.cpu(), expected, atol=1e-5, rtol=1e-5)
    assert torchneuron.compile_stats()["graphs_eager"] == 0


def test_write_back_copies_group_only_where_the_order_of_copies_cannot_matter(no_fallback):
    """Device-to-device copy_ runs become one _foreach_copy_ after the run; not when another copy
    in the run reads or writes one of their tensors (moving them would change what it sees)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from torchneuron.compiler import lowering

    def independent(a, b, c, d, host, e):
        a.copy_(b)
        c.copy_(d)
        host.copy_(e)

    def dependent(a, b, c, d, host, e):
        a.copy_(b)
        c.copy_(d)
        host.copy_(a)  # reads what the first copy wrote

    for fn, grouped in ((independent, 2), (dependent, 0)):
        args = [torch.randn(4, device="neuron") for _ in range(4)] + [torch.zeros(4), torch.randn(4)]
        gm = make_fx(fn)(*[t.clone() for t in args])
        for node in gm.graph.nodes:  # read the written tensor itself, not copy_'s result: one run
            if node.target is torch.ops.aten.copy_.default and node.args[1].target is torch.ops.aten.copy_.default:
                node.replace_input_with(node.args[1], node.args[1].args[0])
        gm.recompile()
        expected = [t.cpu() for t in args]
        fn(*expected)
        assert lowering.group_write_back_copies(gm) == grouped
        got = [t.clone() for t in args]
        gm(*got)
        for x, y in zip(got, expected):
            torch.testing.assert_close(x.cpu(), y)


def test_foreach_ops_run_in_place_only_on_temporaries_nothing_reads_later(monkeypatch, no_fallback):
    """Without foreach kernels, a chain of out-of-place foreach ops runs in place on its
    temporaries; one that the graph returns, or that a later op still reads, keeps its own values."""
    import torchneuron.compiler

    monkeypatch.setattr(torchneuron.compiler, "foreach_kernels", False)
    def chain(xs, ys):
        roots = torch._foreach_sqrt(xs)
        kept = torch._foreach_add(roots, 1.0)  # returned: never overwritten
        scaled = torch._foreach_mul(kept, 3.0)
        shifted = torch._foreach_sub(scaled, ys)  # scaled is read again below
        return kept, torch._foreach_div(torch._foreach_neg(shifted), scaled)

    def twice(xs, ys):  # the same temporary at two indices: in place, it would be updated twice
        roots = torch._foreach_sqrt(xs)
        return torch._foreach_add([roots[0], roots[0]], 1.0)

    def viewed(xs, ys):  # a view of one temporary read beside another's update
        roots = torch._foreach_sqrt(xs)
        return torch._foreach_mul([roots[0], roots[1]], [roots[1][:1].sum() * ys[0], roots[0].view(-1)[:7]])

    xs = [torch.rand(5, 3) + 0.1, torch.rand(7) + 0.1]
    ys = [torch.randn(5, 3), torch.randn(7)]
    for fn in (chain, twice, viewed):
        torch._dynamo.reset()
        expected = fn(xs, ys)
        got = torch.compile(fn, backend="neuron")([x.to("neuron") for x in xs], [y.to("neuron") for y in ys])
        for g, e in zip(got, expected):
            for a, b in zip(g, e) if isinstance(g, (list, tuple)) else [(g, e)]:
                torch.testing.assert_close(a.cpu(), b)


@pytest.mark.parametrize("foreach_kernels", [True, False], ids=["foreach_kernel", "foreach_commands"])
@pytest.mark.parametrize("capturable", [False, True], ids=["cpu_steps", "capturable"])
def test_compiled_optimizer_step_tracks_eager_and_writes_back_in_one_command(capturable, foreach_kernels, monkeypatch,
                                                                            no_fallback):
    """torch.compile(optimizer.step) on AdamW: the parameters and state track CPU PyTorch's AdamW
    over several steps; the write-backs of the updated parameters and moments (three copy_ per
    parameter) run as one _foreach_copy_, the step counts (CPU tensors unless capturable) are
    copied on their own; the first moment's _foreach_lerp_, which Dynamo writes out, is one
    _foreach_lerp again; the bias corrections computed from CPU step counts run once on the
    stacked counts, not per parameter (two pows, not two per parameter). The update itself runs
    as one foreach kernel (with capturable steps, reading the bias corrections computed from them;
    with CPU ones, reading the stacked corrections whole, not unbound), which writes the state
    back itself, or, without foreach kernels, as foreach commands, in place on the temporaries
    nothing reads later."""
    import torchneuron.compiler
    from torchneuron.compiler import lowering

    monkeypatch.setattr(torchneuron.compiler, "foreach_kernels", foreach_kernels)
    counts = {}

    def counting(name):
        rewrite = getattr(lowering, name)
        monkeypatch.setattr(lowering, name,
                            lambda gm, **kw: counts.setdefault(name, []).append(rewrite(gm, **kw)) or counts[name][-1])

    for name in ("group_write_back_copies", "restore_foreach_lerp", "foreach_in_place_on_dying_lists"):
        counting(name)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5), nn.LayerNorm(5), nn.Linear(5, 3))
    reference, compiled = copy.deepcopy(model), copy.deepcopy(model).to("neuron")
    optimizers = [torch.optim.AdamW(reference.parameters(), lr=0.05),  # CPU: never capturable
                  torch.optim.AdamW(compiled.parameters(), lr=0.05, capturable=capturable)]
    step = torch.compile(optimizers[1].step, backend="neuron")
    for _ in range(4):
        grads = [torch.randn_like(p) for p in model.parameters()]
        for m in (reference, compiled):
            for p, g in zip(m.parameters(), grads):
                p.grad = g.to(p.device)
        optimizers[0].step()
        step()
    for p, q in zip(reference.parameters(), compiled.parameters()):
        torch.testing.assert_close(q.cpu(), p, rtol=1e-4, atol=1e-5)  # bias corrections in float, not double
        for key in ("exp_avg", "exp_avg_sq", "step"):
            torch.testing.assert_close(optimizers[1].state[q][key].cpu(), optimizers[0].state[p][key])
    parameters = len(list(model.parameters()))
    assert parameters * 3 + parameters * capturable in counts["group_write_back_copies"]
    assert 1 in counts["restore_foreach_lerp"]  # the first moment's update runs as _foreach_lerp again
    if foreach_kernels:  # every foreach op of the update in one kernel, which writes the state back itself
        stats = torchneuron.compile_stats()
        assert stats["kernels_generated"] == 1 and stats["ops_lowered"] >= 10, stats
        assert stats["foreach_in_place"] == 4, stats
    else:
        # In place on temporaries: the second moment's update, the denominator's three steps after
        # its square root, and the parameters' update after their weight decay.
        assert max(counts["foreach_in_place_on_dying_lists"]) >= 5
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step()
    pows = [e for e in prof.events() if e.name == "aten::pow" and (e.cpu_parent is None or e.cpu_parent.name != "aten::pow")]
    assert len(pows) == (0 if capturable else 2)
    if foreach_kernels:  # the kernel reads the stacked bias corrections whole: one unbind left, the step counts'
        unbinds = [e for e in prof.events() if e.name == "aten::unbind"]
        assert len(unbinds) == (0 if capturable else 1)


def _foreach_chain(xs, ys, zs, device_scale, cpu_scales, device_scalars):
    """Foreach ops of every operand kind a foreach kernel takes: whole lists, a scalar, alpha,
    one 0-dim tensor for every index (on the device, and on the CPU), a 0-dim tensor per index
    (on the CPU, copied by value, and on the device), lerp from both ends, and unary ops."""
    a = torch._foreach_add(xs, ys, alpha=0.5)
    b = torch._foreach_mul(a, device_scale)
    c = torch._foreach_div(b, cpu_scales)
    d = torch._foreach_addcmul(c, ys, zs, value=-0.25)
    e = torch._foreach_lerp(d, zs, 0.3)
    f = torch._foreach_lerp(e, xs, 0.8)
    g = torch._foreach_addcdiv(f, torch._foreach_exp(xs), torch._foreach_add(torch._foreach_abs(zs), 1.0), value=2.0)
    h = torch._foreach_sub(torch._foreach_sqrt(torch._foreach_abs(g)), device_scalars)
    return torch._foreach_maximum(torch._foreach_mul(h, torch.tensor(1.5)), torch._foreach_neg(ys)), b


def _foreach_inputs(dtype, device):
    g = torch.Generator().manual_seed(0)
    shapes = [(5, 3), (7,), (2, 4, 6), (1,), (300, 129)]
    lists = [[torch.randn(s, generator=g, dtype=dtype) for s in shapes] for _ in range(3)]
    scale = torch.tensor(1.25, dtype=dtype)
    cpu_scales = [torch.tensor(0.5 + i, dtype=dtype) for i in range(len(shapes))]
    scalars = [torch.tensor(0.1 * i, dtype=dtype) for i in range(len(shapes))]
    moved = [[t.to(device) for t in ts] for ts in lists]
    return (*moved, scale.to(device), cpu_scales, [s.to(device) for s in scalars])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_foreach_chain_runs_as_one_kernel_over_its_lists(dtype, no_fallback):
    """A chain of foreach ops over lists of different sizes lowers into one generated kernel run
    over every index in one device job; its results match CPU PyTorch's eager foreach ops, in
    their layouts."""
    compiled = torch.compile(_foreach_chain, backend="neuron")
    got = compiled(*_foreach_inputs(dtype, "neuron"))
    expected = _foreach_chain(*_foreach_inputs(dtype, "cpu"))
    for g, e in zip(got, expected):
        for a, b in zip(g, e):
            torch.testing.assert_close(a.cpu(), b)
            assert a.stride() == b.stride()
    stats = torchneuron.compile_stats()
    assert stats["kernels_generated"] == 1 and stats["ops_lowered"] >= 15 and stats["graphs_eager"] == 0, stats


def test_foreach_kernel_reads_strided_and_empty_tensors_and_keeps_their_layout(no_fallback):
    """Transposed, channels-last and sliced list elements take the kernel's strided path, and
    results keep eager mode's layout (a dense input's strides); an empty tensor is skipped."""
    def fn(xs, ys):
        return torch._foreach_add(torch._foreach_mul(xs, 2.0), ys)

    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(6, 4, generator=g).t(), torch.randn(2, 3, 5, 4, generator=g).to(memory_format=torch.channels_last),
          torch.randn(10, 8, generator=g)[::2, 1:], torch.randn(0, 3)]
    ys = [torch.randn(x.shape, generator=g) for x in xs]
    got = torch.compile(fn, backend="neuron")([x.to("neuron") for x in xs], [y.to("neuron") for y in ys])
    for a, b in zip(got, fn(xs, ys)):
        torch.testing.assert_close(a.cpu(), b)
        assert a.stride() == b.stride(), (a.stride(), b.stride())
    assert torchneuron.compile_stats()["kernels_generated"] == 1


def test_foreach_kernel_in_bfloat16_computes_in_float(no_fallback):
    """bfloat16 lists: the kernel keeps intermediates in float and rounds what it stores, as
    Inductor does: the float32 chain rounded once (within a bfloat16 rounding step of it, since
    CPU PyTorch's float32 addcmul may round differently), where eager mode rounds after each op."""
    def fn(xs, ys):
        return torch._foreach_addcmul(torch._foreach_mul(xs, 0.3), xs, ys, value=0.7)

    g = torch.Generator().manual_seed(2)
    xs = [torch.randn(33, 17, generator=g), torch.randn(100, generator=g)]
    ys = [torch.randn(x.shape, generator=g) for x in xs]
    got = torch.compile(fn, backend="neuron")([x.bfloat16().to("neuron") for x in xs], [y.bfloat16().to("neuron") for y in ys])
    for a, b in zip(got, fn([x.bfloat16().float() for x in xs], [y.bfloat16().float() for y in ys])):
        assert a.dtype == torch.bfloat16
        torch.testing.assert_close(a.cpu(), b.bfloat16())
    assert torchneuron.compile_stats()["kernels_generated"] == 1


def test_foreach_ops_a_kernel_cannot_take_keep_their_commands(no_fallback):
    """Lists of mixed dtypes, per-index Python scalars, integer lists, and 0-dim results stay
    foreach commands (no kernel), with the same results as CPU; and with the Python step loop
    instead of the native executor, the chain of a foreach kernel runs as commands too."""
    def mixed(xs, ys, counts, steps):
        return (torch._foreach_add(xs, ys), torch._foreach_mul(ys, [2.0, 3.0]), torch._foreach_add(counts, 1),
                torch._foreach_add(steps, 1.0))

    xs = [torch.randn(4), torch.randn(3).double()]
    ys = [torch.randn(4), torch.randn(3)]
    counts = [torch.arange(4), torch.arange(3)]
    steps = [torch.tensor(1.0), torch.tensor(2.0)]
    args = (xs, ys, counts, steps)
    got = torch.compile(mixed, backend="neuron")(*[[t.to("neuron") for t in ts] for ts in args])
    for g, e in zip(got, mixed(*args)):
        for a, b in zip(g, e):
            torch.testing.assert_close(a.cpu(), b)
    assert torchneuron.compile_stats()["kernels_generated"] == 0


def test_foreach_kernel_falls_back_to_commands_on_the_python_step_loop(monkeypatch, no_fallback):
    """Only the native executor runs foreach kernels; a program on the Python step loop runs the
    chain as foreach commands, with the same results."""
    from torchneuron.compiler import program

    monkeypatch.setattr(program, "native_executor", False)
    got = torch.compile(_foreach_chain, backend="neuron")(*_foreach_inputs(torch.float32, "neuron"))
    expected = _foreach_chain(*_foreach_inputs(torch.float32, "cpu"))
    for g, e in zip(got, expected):
        for a, b in zip(g, e):
            torch.testing.assert_close(a.cpu(), b)
    stats = torchneuron.compile_stats()
    assert stats["graphs_native"] == 0 and stats["kernels_generated"] == 0 and stats["graphs_eager"] == 0, stats


def test_foreach_kernel_reads_inputs_before_the_graph_writes_them_back(no_fallback):
    """A foreach op waits for its kernel until something else needs it, but not past a write
    to a tensor it reads: here the write-back of an input updated in place after the foreach
    op read it, and the in-place update of an element of its list."""
    def fn(xs, ys):
        doubled = torch._foreach_mul(xs, 2.0)
        xs[0].add_(1.0)
        shifted = torch._foreach_add(ys, doubled)
        ys[1].mul_(3.0)
        return torch._foreach_sub(shifted, xs), ys[1] + 1

    g = torch.Generator().manual_seed(3)
    xs = [torch.randn(4, 3, generator=g), torch.randn(5, generator=g)]
    ys = [torch.randn(4, 3, generator=g), torch.randn(5, generator=g)]
    got_xs, got_ys = [x.to("neuron") for x in xs], [y.to("neuron") for y in ys]
    got = torch.compile(fn, backend="neuron")(got_xs, got_ys)
    expected = fn(xs, ys)
    for a, b in zip(got[0], expected[0]):
        torch.testing.assert_close(a.cpu(), b)
    torch.testing.assert_close(got[1].cpu(), expected[1])
    for a, b in zip(got_xs + got_ys, xs + ys):
        torch.testing.assert_close(a.cpu(), b)
    assert torchneuron.compile_stats()["graphs_eager"] == 0


def test_foreach_kernel_writes_results_back_in_place_only_where_memory_allows(no_fallback):
    """A foreach kernel whose results the graph only copies back into its inputs writes them there
    itself; called with inputs whose memory meets another index's (overlapping views of one
    buffer), it writes new tensors and the copies run in turn, as eager mode's would."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from torchneuron.compiler import compile_graph

    def update(x0, x1, y0, y1):
        xs = [x0, x1]
        torch._foreach_copy_(xs, torch._foreach_addcmul(torch._foreach_mul(xs, 0.9), [y0, y1], [y0, y1], value=0.1))
        return [y0 + 1]  # a list of outputs, as AOTAutograd's graphs have

    g = torch.Generator().manual_seed(4)
    base = torch.randn(12, generator=g)
    ys = [torch.randn(6, generator=g), torch.randn(6, generator=g)]
    program = compile_graph(make_fx(update)(base[:6].to("neuron"), base[6:].to("neuron"), *[y.to("neuron") for y in ys]),
                            None)
    for views in ((slice(0, 6), slice(6, 12)), (slice(0, 6), slice(3, 9))):  # apart, then overlapping
        torchneuron.reset_compile_stats()
        expected_base = base.clone()
        update(*[expected_base[v] for v in views], *ys)
        got_base = base.to("neuron")
        program(*[got_base[v] for v in views], *[y.to("neuron") for y in ys])
        torch.testing.assert_close(got_base.cpu(), expected_base)
        assert torchneuron.compile_stats()["foreach_in_place"] == (1 if views[1].start == 6 else 0)


def test_foreach_kernel_takes_every_unary_op_and_scalar_form(no_fallback):
    """Every unary foreach op with a code template, and the binary ones' other forms (pow by a
    scalar and by a list, minimum, clamps, division by one 0-dim tensor, subtraction of a list
    with alpha), in one kernel: the same results as CPU PyTorch's foreach ops."""
    from torchneuron.compiler.lowering import _FOREACH_POINTWISE

    unary = sorted({op for target, op in _FOREACH_POINTWISE.items() if target.overloadpacket.__name__.endswith(op)
                    and target._overloadname == "default"})
    assert len(unary) >= 20

    def fn(xs, ys, scale):
        positive = torch._foreach_add(torch._foreach_abs(xs), 0.5)
        results = [getattr(torch, f"_foreach_{name}")(positive if name.startswith(("log", "sqrt", "rsqrt")) else xs)
                   for name in unary]
        results.append(torch._foreach_pow(positive, 1.7))
        results.append(torch._foreach_pow(positive, ys))
        results.append(torch._foreach_minimum(xs, ys))
        results.append(torch._foreach_clamp_max(torch._foreach_clamp_min(xs, -0.5), 0.7))
        results.append(torch._foreach_div(xs, scale))
        results.append(torch._foreach_sub(xs, ys, alpha=2.5))
        return results

    g = torch.Generator().manual_seed(5)
    xs = [torch.randn(s, generator=g, dtype=torch.float64) for s in ((3, 4), (17,), (2, 2, 5))]
    ys = [torch.randn(x.shape, generator=g, dtype=torch.float64) for x in xs]
    scale = torch.tensor(-1.5, dtype=torch.float64)
    got = torch.compile(fn, backend="neuron")([x.to("neuron") for x in xs], [y.to("neuron") for y in ys], scale.to("neuron"))
    for g_list, e_list in zip(got, fn(xs, ys, scale), strict=True):
        for a, b in zip(g_list, e_list, strict=True):
            torch.testing.assert_close(a.cpu(), b, equal_nan=True)
    stats = torchneuron.compile_stats()
    assert stats["kernels_generated"] == 1 and stats["graphs_eager"] == 0, stats


def test_foreach_kernel_reads_one_element_of_a_stacked_vector_as_one_value(no_fallback):
    """CPU values per index, stacked once (an optimizer's bias corrections), reach a foreach kernel
    whole; one element of them read as the value for every index stays that one value."""
    def fn(xs, steps):
        corrections = torch._foreach_pow(0.9, steps)
        return torch._foreach_mul(torch._foreach_div(xs, corrections), corrections[0])

    g = torch.Generator().manual_seed(6)
    xs = [torch.randn(4, 3, generator=g), torch.randn(5, generator=g), torch.randn(2, 2, generator=g)]
    steps = [torch.tensor(float(i + 1)) for i in range(3)]
    got = torch.compile(fn, backend="neuron")([x.to("neuron") for x in xs], [s.clone() for s in steps])
    for a, b in zip(got, fn(xs, steps), strict=True):
        torch.testing.assert_close(a.cpu(), b)
    assert torchneuron.compile_stats()["kernels_generated"] == 1
