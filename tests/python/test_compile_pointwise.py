"""torch.compile(backend="neuron"): pointwise ops fused into kernels match eager mode and CPU
PyTorch: float and eager rounding in half precision, addcmul and addcdiv whole, integer powers,
operands read through aliases, expands and 0-dim constants, layouts and broadcasts, NaN and
signed zeros."""

import pytest
import torch

import torchneuron

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def pointwise_chain_b(x, y):
    a = torch.sin(x) * 2 + y
    return torch.where(a > 0, a, a * 0.1) - x.exp()


def pointwise_chain(x, y):
    b = pointwise_chain_b(x, y)
    return b.sum(), torch.sigmoid(b) * 3, (b > 1).logical_not()


@pytest.mark.parametrize("emulate_precision_casts", [False, True], ids=["float_inside", "eager_rounding"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_fused_kernel_matches_eager(dtype, emulate_precision_casts, monkeypatch, no_fallback):
    """A kernel matches CPU PyTorch; in bfloat16 it computes in float and rounds what it stores,
    so it matches CPU's float32 chain rounded once (the sum: within its own accumulation order).
    Emulating eager's casts, it matches CPU PyTorch's bfloat16 chain op by op."""
    import torchneuron.compiler

    monkeypatch.setattr(torchneuron.compiler, "emulate_precision_casts", emulate_precision_casts)
    x = torch.randn(64, 32, device="neuron").to(dtype)
    y = torch.randn(32, device="neuron").to(dtype)  # broadcast into the kernel
    if dtype == torch.float32:
        expected = pointwise_chain(x.cpu(), y.cpu())
    elif emulate_precision_casts:  # CPU PyTorch's bfloat16 chain, rounded op by op
        expected = pointwise_chain(x.cpu(), y.cpu())
    else:
        expected = [e.to(dtype) if e.is_floating_point() else e for e in pointwise_chain(x.cpu().float(), y.cpu().float())]
    got = torch.compile(pointwise_chain, backend="neuron")(x, y)
    # b > 1 may flip where b is within its rounding of 1: CPU's sin and exp round differently at
    # each instruction-set level, and a bfloat16 b rounds before the comparison.
    b = pointwise_chain_b(x.cpu().double(), y.cpu().double())
    decided = (b - 1).abs() > (2 ** -7 if dtype == torch.bfloat16 else 1e-5)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        if e.dtype == torch.bool:
            assert decided.float().mean() > 0.9
            g, e = g.cpu()[decided], e.cpu()[decided]
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
