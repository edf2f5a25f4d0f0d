"""Native reductions against CPU PyTorch: dims, keepdim, dtype promotion, strided inputs,
large (multi-threaded) inputs, NaN and infinity propagation, empty inputs and errors."""

import pytest
import torch

import torchneuron
from tolerances import assert_close


def sample(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-5, 20, shape, generator=g).to(dtype)


def assert_same(device_result, cpu_result, atol=None, rtol=None):
    """Per-dtype tolerances; a call that loosens them (an accumulation order other than CPU's over
    many elements) gives float32's values, which tolerances() scales for the other dtypes."""
    actual = device_result.cpu()
    assert actual.dtype == cpu_result.dtype and actual.shape == cpu_result.shape
    if cpu_result.is_floating_point():
        assert_close(actual, cpu_result, rtol=rtol, atol=atol, equal_nan=True)
    else:
        assert torch.equal(actual, cpu_result)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32, torch.bool], ids=str)
@pytest.mark.parametrize("dim", [None, 0, 1, -1, (0, 2), (2, 0)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_amax_amin(dtype, dim, keepdim, no_fallback):
    x = sample((4, 5, 6), dtype) if dtype != torch.bool else sample((4, 5, 6), torch.int64) > 3
    d = x.to("neuron")
    kwargs = {} if dim is None else {"dim": dim, "keepdim": keepdim}
    assert_same(d.sum(**kwargs), x.sum(**kwargs))
    if dtype != torch.bool:
        dims = dim if dim is not None else ()
        assert_same(d.amax(dim=dims, keepdim=keepdim), x.amax(dim=dims, keepdim=keepdim))
        assert_same(d.amin(dim=dims, keepdim=keepdim), x.amin(dim=dims, keepdim=keepdim))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_mean_and_dtype_argument(dtype, no_fallback):
    x = sample((3, 7, 5), dtype)
    d = x.to("neuron")
    assert_same(d.mean(), x.mean())
    assert_same(d.mean(dim=(0, 2), keepdim=True), x.mean(dim=(0, 2), keepdim=True))
    assert_same(d.sum(dim=1, dtype=torch.float64), x.sum(dim=1, dtype=torch.float64))
    assert_same(d.max(), x.max())
    assert_same(d.min(), x.min())


def test_strided_and_large_inputs(no_fallback):
    x = sample((257, 1031), torch.float32, 1)
    d = x.to("neuron")
    assert_same(d.t().sum(dim=0), x.t().sum(dim=0), atol=1e-4)
    assert_same(d[:, ::3].sum(dim=1), x[:, ::3].sum(dim=1), atol=1e-4)
    assert_same(d.sum(), x.sum(), atol=1e-2, rtol=1e-5)  # one output, split across engines
    assert_same(d.amax(), x.amax())
    out = torch.empty(1031, device="neuron")
    torch.sum(d, dim=0, out=out)
    assert_same(out, x.sum(dim=0), atol=1e-4)


def test_leading_dim_reductions_of_stacked_matrices(no_fallback):
    """Kept dims merge into one when they are one run in both input and output (the column
    path); sliced inputs, transposed inputs and transposed outputs keep them apart."""
    full = sample((16, 64, 65), torch.float32, 2)
    d_full = full.to("neuron")
    for x, d in [(full, d_full), (full[..., :64], d_full[..., :64]), (full.transpose(1, 2), d_full.transpose(1, 2))]:
        assert_same(d.sum(0), x.sum(0))
        assert_same(d.amax(0), x.amax(0))
        assert_same(d.mean(0, keepdim=True), x.mean(0, keepdim=True))
    out = torch.empty(65, 64, device="neuron").t()
    torch.sum(d_full, 0, out=out)
    assert_same(out, full.sum(0))
    y = sample((3, 4, 5, 6), torch.float32, 3)
    assert_same(y.to("neuron").sum((0, 1)), y.sum((0, 1)))
    assert_same(y.to("neuron").sum((0, 2)), y.sum((0, 2)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_planes_short_rows_and_long_columns(dtype, no_fallback):
    """A mean over an image's H and W (global average pooling: both dims fold as one run), rows
    shorter than the kernel's wide lane step with a NaN in some, and column sums over more rows
    than one float run (the column path adds float runs into a double total)."""
    planes = sample((6, 32, 7, 7), dtype, 4)
    d = planes.to("neuron")
    assert_same(d.mean((-1, -2), keepdim=True), planes.mean((-1, -2), keepdim=True))
    assert_same(d.sum((2, 3)), planes.sum((2, 3)))
    assert_same(d.amax((2, 3)), planes.amax((2, 3)))
    for width in (5, 16, 49, 63, 64, 79, 200):
        rows = sample((40, width), dtype, width)
        rows[3, width // 2] = float("nan")
        d = rows.to("neuron")
        assert_same(d.sum(1), rows.sum(1), atol=1e-4)
        assert_same(d.amax(1), rows.amax(1))
        assert_same(d.amin(1), rows.amin(1))
    columns = sample((1000, 70), dtype, 5) + 3  # sums of 1000: float runs of 16 rows, joined in double
    d = columns.to("neuron")
    assert_same(d.sum(0), columns.sum(0), atol=1e-3, rtol=1e-5)
    assert_same(d.mean(0), columns.mean(0), rtol=1e-5)
    assert_same(torch.linalg.vector_norm(d, dim=0), torch.linalg.vector_norm(columns, dim=0), rtol=1e-5)


def test_a_sum_over_tokens_stays_as_close_to_float64_as_cpu(no_fallback):
    """The gradient of a broadcast over the tokens of [B, T, C] (a diffusion model's adaLN shift)
    sums T rows per column: neuron's float32 result is no farther from the float64 sum than CPU
    PyTorch's cascade sum (it was twice as far with runs of 256 rows in float)."""
    for seed, shape in enumerate([(2, 16384, 64), (4, 4096, 144), (8192, 96)]):
        x = sample(shape, torch.float32, 20 + seed)
        exact = x.double().sum(-2)
        cpu_error = (x.sum(-2).double() - exact).abs().max().item()
        neuron_error = (x.to("neuron").sum(-2).cpu().double() - exact).abs().max().item()
        assert neuron_error <= cpu_error, (shape, neuron_error, cpu_error)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_reductions_over_a_middle_dim(dtype, no_fallback):
    """Kept dims on both sides of the reduced ones (a sum over the T of [B, T, C]): column blocks
    for each index of the leading kept dims, into contiguous and strided outputs."""
    for shape in [(4, 300, 70), (3, 9, 3), (2, 5, 6, 130)]:
        x = sample(shape, dtype, 6)
        d = x.to("neuron")
        assert_same(d.sum(1), x.sum(1), atol=1e-4)
        assert_same(d.amax(1), x.amax(1))
        assert_same(d.sum((1, 2)), x.sum((1, 2)), atol=1e-4)
        if dtype.is_floating_point:
            assert_same(d.mean(1, keepdim=True), x.mean(1, keepdim=True))
    x = sample((4, 300, 70), dtype, 7)
    out = torch.empty(70, 4, dtype=x.sum(1).dtype, device="neuron").t()
    torch.sum(x.to("neuron"), 1, out=out)
    assert_same(out, x.sum(1), atol=1e-4)


def test_nan_and_infinity_propagate(no_fallback):
    x = torch.tensor([[1.0, float("nan"), 3.0], [-float("inf"), -float("inf"), -float("inf")]])
    d = x.to("neuron")
    assert_same(d.amax(dim=1), x.amax(dim=1))
    assert_same(d.amin(dim=1), x.amin(dim=1))
    assert_same(d.sum(dim=1), x.sum(dim=1))


def test_empty_inputs_and_errors():
    e = torch.empty(0, 3, device="neuron")
    assert_same(e.sum(dim=0), torch.empty(0, 3).sum(dim=0))
    assert_same(e.sum(), torch.empty(0, 3).sum())
    with pytest.raises(RuntimeError, match="Expected reduction dim"):
        e.max()
    with pytest.raises(IndexError, match="non-zero size"):  # as CPU
        e.amax(dim=0)
    with pytest.raises(RuntimeError, match=r"mean\(\): could not infer output dtype"):
        torch.ones(3, dtype=torch.int64, device="neuron").mean()
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.ones(3, device="neuron").sum(dim=2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("ord", [2, 1, 0, float("inf"), float("-inf"), 3, 0.5])
@pytest.mark.parametrize("dim", [None, 1, (0, 2)])
def test_vector_norm(dtype, ord, dim, no_fallback):
    x = sample((4, 37, 5), dtype)
    x[0, 0, 0] = 0
    d = x.to("neuron")
    assert_same(torch.linalg.vector_norm(d, ord, dim=dim), torch.linalg.vector_norm(x, ord, dim=dim), atol=1e-4, rtol=1e-5)
    assert_same(torch.linalg.vector_norm(d.transpose(0, 2), ord, dim=dim, keepdim=True),
                torch.linalg.vector_norm(x.transpose(0, 2), ord, dim=dim, keepdim=True), atol=1e-4, rtol=1e-5)
    assert_same(d.norm(), x.norm(), atol=1e-4, rtol=1e-5)


def test_vector_norm_dtype_nan_and_empty(no_fallback):
    x = torch.tensor([[1.0, float("nan"), -3.0], [2.0, -2.0, 0.5]])
    d = x.to("neuron")
    for ord in [2, 1, float("inf"), float("-inf")]:
        assert_same(torch.linalg.vector_norm(d, ord, dim=1), torch.linalg.vector_norm(x, ord, dim=1))
    assert_same(torch.linalg.vector_norm(d, dtype=torch.float64), torch.linalg.vector_norm(x, dtype=torch.float64))
    e = torch.empty(0, 3)
    assert_same(torch.linalg.vector_norm(e.to("neuron")), torch.linalg.vector_norm(e))
    assert_same(torch.linalg.vector_norm(e.to("neuron"), float("inf"), dim=1), torch.linalg.vector_norm(e, float("inf"), dim=1))
    with pytest.raises(RuntimeError, match="cannot compute the inf norm on an empty tensor"):
        torch.linalg.vector_norm(e.to("neuron"), float("inf"))
    with pytest.raises(RuntimeError, match="on the dimension 0"):
        torch.linalg.vector_norm(e.to("neuron"), float("inf"), dim=0)
    with pytest.raises(RuntimeError, match="floating point"):
        torch.linalg.vector_norm(torch.ones(3, dtype=torch.int64, device="neuron"))


def test_legacy_norm_and_trace(no_fallback):
    # torch.norm's overloads (reached by pairwise_distance and triplet_margin_loss) and trace.
    x, y = sample((6, 5), torch.float32, 1), sample((6, 5), torch.float32, 2)
    cases = [lambda a, b: torch.norm(a, p=3, dim=1), lambda a, b: torch.norm(a, dim=(0, 1), keepdim=True),
             lambda a, b: torch.norm(a, p=1, dim=0, dtype=torch.float64),
             lambda a, b: torch.nn.functional.pairwise_distance(a, b),
             lambda a, b: torch.nn.functional.triplet_margin_loss(a, b, a.flip(0)),
             lambda a, b: torch.trace(a[:5]), lambda a, b: torch.trace((a[:5] * 10).long())]
    for op in cases:
        assert_same(op(x.to("neuron"), y.to("neuron")), op(x, y), atol=1e-5, rtol=1e-5)
    with pytest.raises(RuntimeError, match="trace: expected a matrix"):
        torch.trace(x.to("neuron")[0])
