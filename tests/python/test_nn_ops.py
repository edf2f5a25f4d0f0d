"""Native neural-network operators against CPU PyTorch: softmax / log_softmax and backward,
layer norm and backward, cross entropy (NLL) with weights and ignore_index, embedding and its
backward, index_select, cat, arange; device-side index errors raise at the next sync."""

import copy

import pytest
import torch
import torch.nn.functional as F

import torchneuron
from tolerances import assert_close, rounding_step


def sample(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def assert_same(device_result, cpu_result, tol=1e-5, terms=None):
    """Per-dtype tolerances. `tol` is float32's rtol and atol, loosened from assert_close's
    defaults to 1e-5 because these ops reduce (softmax, norms, losses) in another order than CPU;
    tolerances() scales it for float64. Half types: CPU rounds each step of the op (a running
    sum, a softmax's normalizer, backward terms) to the half type, so the absolute tolerance is a
    rounding step of the largest value (rounding_step) or of `terms`, the values the result is
    computed from where they are larger, and the relative one assert_close's."""
    actual = device_result.cpu()
    assert actual.dtype == cpu_result.dtype and actual.shape == cpu_result.shape
    if cpu_result.dtype in (torch.bfloat16, torch.float16):
        atol = rounding_step(cpu_result if terms is None else terms)
        assert_close(actual, cpu_result, atol=atol, equal_nan=True)
    elif cpu_result.is_floating_point():
        assert_close(actual, cpu_result, rtol=tol, atol=tol, equal_nan=True)
    else:
        assert torch.equal(actual, cpu_result)


def forward_backward(fn, *inputs):
    """Runs fn on CPU and neuron copies of the inputs; returns (cpu, neuron) outputs and grads."""
    results = []
    for device in ("cpu", "neuron"):
        leaves = [x.detach().to(device).requires_grad_(x.is_floating_point()) for x in inputs]
        out = fn(*leaves)
        out.backward(torch.ones_like(out) if out.dim() else None)
        results.append((out.detach(), [leaf.grad for leaf in leaves if leaf.requires_grad]))
    return results


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax_family(dtype, dim, no_fallback):
    x = sample((4, 6, 5), dtype)
    for fn in (lambda t: F.softmax(t, dim) * torch.arange(5, dtype=dtype, device=t.device),
               lambda t: F.log_softmax(t, dim) * 0.5):
        (cpu, cpu_grads), (dev, dev_grads) = forward_backward(fn, x)
        assert_same(dev, cpu)
        # The gradient is s * (g - sum(s * g)): in bfloat16 it is rounding noise of those terms
        # (of the forward output's size) where they cancel, as they do exactly when g is constant
        # along the softmax's dim (dims 0 and 1 here, whose true gradient is 0).
        assert_same(dev_grads[0], cpu_grads[0], terms=cpu)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("width", [96, 150, 256])
def test_softmax_rows_longer_than_the_lanes(dtype, width, no_fallback):
    """Rows of 64 lanes and a tail (whose exps vectorize on their own) and of whole lanes.
    Float types only: in bfloat16 a one-ulp difference in log_softmax's rounded output grows
    through the backward's exp by far more than any tolerance that still tests something."""
    x = sample((3, 7, width), dtype) * 4
    weights = torch.linspace(0, 4, width, dtype=dtype)
    for fn in (lambda t: F.softmax(t, -1) * weights.to(t.device), lambda t: F.log_softmax(t, -1) * 0.5):
        (cpu, cpu_grads), (dev, dev_grads) = forward_backward(fn, x)
        assert_same(dev, cpu)
        # The gradient is s * (g - sum(s * g)): in bfloat16 it is rounding noise of those terms
        # (of the forward output's size) where they cancel, as they do exactly when g is constant
        # along the softmax's dim (dims 0 and 1 here, whose true gradient is 0).
        assert_same(dev_grads[0], cpu_grads[0], terms=cpu)


@pytest.mark.parametrize("width", [5, 16, 70, 96, 150])
def test_softmax_rows_with_nan_and_infinities(width, no_fallback):
    """A NaN anywhere in a row (in the 64-lane part, the 16-lane steps or the last few) makes the
    row NaN; an infinity dominates it; an all -inf row is NaN, as on CPU."""
    x = sample((6, width)) * 4
    for row, col in enumerate([0, width - 1, min(70, width - 1), width // 2]):
        x[row, col] = float("nan")
    x[4, width // 3] = float("inf")
    x[5] = -float("inf")
    for fn in (lambda t: F.softmax(t, -1), lambda t: F.log_softmax(t, -1)):
        assert_same(fn(x.to("neuron")), fn(x))


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(affine, no_fallback):
    x = sample((3, 4, 8))
    w, b = sample((8,), seed=1), sample((8,), seed=2)
    if affine:
        fn = lambda t, wt, bt: F.layer_norm(t, (8,), wt, bt).square()
        (cpu, cpu_grads), (dev, dev_grads) = forward_backward(fn, x, w, b)
    else:
        fn = lambda t: F.layer_norm(t, (4, 8)).square()
        (cpu, cpu_grads), (dev, dev_grads) = forward_backward(fn, x)
    assert_same(dev, cpu, 1e-4)
    for d, c in zip(dev_grads, cpu_grads):
        assert_same(d, c, 1e-4)


@pytest.mark.parametrize("rows, cols, bias", [(1000, 64, True), (37, 3000, True), (300, 96, False)])
def test_layer_norm_weight_grads_over_many_rows(rows, cols, bias, no_fallback):
    """grad_weight and grad_bias sum over every row: blocks of rows, runs of 16 rows inside a
    block, a last run cut short, and blocks shorter than a run (wide rows)."""
    x, grad = sample((rows, cols)), sample((rows, cols), seed=3)
    w, b = sample((cols,), seed=1), sample((cols,), seed=2) if bias else None
    results = []
    for device in ("cpu", "neuron"):
        leaves = [t.detach().to(device).requires_grad_() for t in (x, w, b) if t is not None]
        out = F.layer_norm(leaves[0], (cols,), *leaves[1:])
        out.backward(grad.to(device))
        results.append([out.detach()] + [leaf.grad for leaf in leaves])
    for d, c in zip(results[1], results[0]):
        assert_same(d, c, 1e-4)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy(reduction, no_fallback):
    logits = sample((6, 5))
    target = torch.tensor([0, 4, 2, -100, 1, 3])
    weight = sample((5,), seed=3).abs()
    for kwargs in ({}, {"weight": weight}, {"label_smoothing": 0.1}):
        results = []
        for device in ("cpu", "neuron"):
            leaf = logits.detach().to(device).requires_grad_()
            extra = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
            loss = F.cross_entropy(leaf, target.to(device), reduction=reduction, **extra)
            loss.sum().backward()
            results.append((loss.detach(), leaf.grad))
        assert_same(results[1][0], results[0][0])
        assert_same(results[1][1], results[0][1])


def test_embedding_index_select_and_backward(no_fallback):
    weight = sample((10, 4))
    idx = torch.tensor([[1, 3, 3], [9, 0, 1]])
    fn = lambda w: F.embedding(idx.to(w.device), w, padding_idx=0).square()
    (cpu, cpu_grads), (dev, dev_grads) = forward_backward(fn, weight)
    assert_same(dev, cpu)
    assert_same(dev_grads[0], cpu_grads[0])
    x = sample((3, 5, 2))
    assert_same(x.to("neuron").index_select(1, torch.tensor([4, 0, 0]).to("neuron")),
                x.index_select(1, torch.tensor([4, 0, 0])))


def test_cat_and_arange(no_fallback):
    a, b = sample((2, 3)), sample((2, 5), seed=1)
    assert_same(torch.cat([a.to("neuron"), b.to("neuron")], dim=1), torch.cat([a, b], dim=1))
    assert_same(torch.cat([a.to("neuron").t(), b.to("neuron").t()]), torch.cat([a.t(), b.t()]))
    assert_same(torch.cat([a.to("neuron"), torch.empty(0, device="neuron")]), torch.cat([a, torch.empty(0)]))
    parts = [sample((), seed=i) for i in range(30)] + [sample((), dtype=torch.float64)]  # promoted to float64
    assert_same(torch.stack([p.to("neuron") for p in parts]), torch.stack(parts))
    c = sample((2, 4), dtype=torch.int32)  # converted while copied
    assert_same(torch.cat([a.to("neuron"), c.to("neuron"), torch.empty(2, 0, device="neuron")], 1),
                torch.cat([a, c, torch.empty(2, 0)], 1))
    for args, dtype in (((10,), torch.int64), ((1, 7, 2), torch.int64), ((0.5, 3.0, 0.25), torch.float32),
                        ((5, -3, -2), torch.int32)):
        assert_same(torch.arange(*args, dtype=dtype, device="neuron"), torch.arange(*args, dtype=dtype))


def test_out_of_range_index_raises_at_the_next_sync_naming_the_op():
    weight = torch.randn(5, 3, device="neuron")
    bad = torch.tensor([1, 7], device="neuron")
    torch.neuron.synchronize()
    result = torch.index_select(weight, 0, bad)  # returns: index_select's check is on the device
    with pytest.raises(torch.AcceleratorError, match=r"aten::index_select.*index 7 is out of range") as info:
        torch.neuron.synchronize()
    assert "test_nn_ops.py" in str(info.value)
    del result
    assert torch.equal(torch.ones(2, device="neuron").cpu(), torch.ones(2))  # the device recovered


def test_out_of_range_target_raises_under_launch_blocking_at_the_call():
    torchneuron._C._set_launch_blocking(True)
    try:
        logits = torch.randn(2, 3, device="neuron")
        with pytest.raises(torch.AcceleratorError, match="Target 5 is out of bounds"):
            F.cross_entropy(logits, torch.tensor([0, 5], device="neuron"))
    finally:
        torchneuron._C._set_launch_blocking(False)


def test_composed_ops_match_cpu(no_fallback):
    x = sample((4, 6))
    d = x.to("neuron")
    for diagonal in (-1, 0, 2):
        assert_same(torch.tril(d, diagonal), torch.tril(x, diagonal))
        assert_same(torch.triu(d, diagonal), torch.triu(x, diagonal))
    for ord in (2, 1, 3, float("inf"), -float("inf"), 0):
        assert_same(torch.linalg.vector_norm(d, ord), torch.linalg.vector_norm(x, ord), 1e-5)
        assert_same(torch.linalg.vector_norm(d, ord, dim=1, keepdim=True),
                    torch.linalg.vector_norm(x, ord, dim=1, keepdim=True), 1e-5)
    mask = x > 0
    assert_same(mask.to("neuron").all(), mask.all())
    assert_same(mask.to("neuron").any(dim=1), mask.any(dim=1))
    assert_same(d.all(dim=0, keepdim=True), x.all(dim=0, keepdim=True))
    assert_same(torch.empty(0, 3, device="neuron").all(), torch.empty(0, 3).all())
    for dims in ((0,), (1,), (0, 1), (-1,)):
        assert_same(torch.flip(d, dims), torch.flip(x, dims))
    inf = torch.tensor([1.0, -float("inf"), float("inf")])
    assert_same(torch.isneginf(inf.to("neuron")), torch.isneginf(inf))
    assert_same(torch.isposinf(inf.to("neuron")), torch.isposinf(inf))


def test_dropout_keeps_expected_fraction_and_scales(no_fallback):
    torch.manual_seed(0)
    x = torch.ones(100000, device="neuron", requires_grad=True)
    y = F.dropout(x, p=0.25, training=True)
    kept = (y != 0).float().mean().item()
    assert abs(kept - 0.75) < 0.01
    kept_values = torch.where(y != 0, y, 1 / 0.75).detach().cpu()
    assert torch.allclose(kept_values, torch.full((100000,), 1 / 0.75))
    y.sum().backward()
    assert torch.equal(x.grad.cpu() != 0, (y != 0).cpu())
    assert torch.equal(F.dropout(x, p=0.5, training=False).detach().cpu(), torch.ones(100000))


def test_masked_select_and_nonzero(no_fallback):
    x = sample((4, 5))
    d = x.to("neuron")
    assert_same(torch.masked_select(d, d > 0), torch.masked_select(x, x > 0))
    row_mask = torch.tensor([True, False, True, True, False])
    assert_same(torch.masked_select(d, row_mask.to("neuron")), torch.masked_select(x, row_mask))  # broadcast
    assert_same(torch.nonzero(d > 0.5), torch.nonzero(x > 0.5))
    assert_same(torch.nonzero(torch.zeros(3, device="neuron")), torch.nonzero(torch.zeros(3)))
    ints = torch.tensor([[0, 2], [3, 0]])
    assert_same(torch.nonzero(ints.to("neuron")), torch.nonzero(ints))


def test_printing_runs_natively(no_fallback):
    for t in (torch.randn(3), torch.tensor([[1, 0], [3, 4]]), torch.tensor([1e-8, 1e8]), torch.tensor([True, False])):
        assert repr(t.to("neuron")) == repr(t)[:-1] + ", device='neuron:0')"


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_scatter_and_gradients(dim, no_fallback):
    g = torch.Generator().manual_seed(4)
    x = sample((4, 5, 3))
    index = torch.randint(0, x.size(dim), (3, 4, 2), generator=g)
    assert_same(torch.gather(x.to("neuron"), dim, index.to("neuron")), torch.gather(x, dim, index))
    src = sample((3, 4, 2), seed=5)
    base = sample((4, 5, 3), seed=6)
    assert_same(base.to("neuron").scatter_add(dim, index.to("neuron"), src.to("neuron")), base.scatter_add(dim, index, src))
    # duplicate positions make scatter order-dependent: use a permutation for the replacing form
    perm = torch.stack([torch.randperm(x.size(dim), generator=g)[:2] for _ in range(3)]).view(3, 1, 2).expand(3, 4, 2)
    perm = perm.contiguous() if dim in (-1, 2) else None
    if perm is not None:
        assert_same(base.to("neuron").scatter(dim, perm.to("neuron"), src.to("neuron")), base.scatter(dim, perm, src))
    fn = lambda t: torch.gather(t, dim, index.to(t.device)).square()
    (cpu, cpu_grads), (dev, dev_grads) = forward_backward(fn, x)
    assert_same(dev_grads[0], cpu_grads[0])


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_gather_scatter_add_large_inputs_split_over_threads(dim, no_fallback):
    """Inputs large enough to split over the compute pool: gathers along every dim, and
    scatter-adds with many duplicate targets, which must sum in CPU PyTorch's (index) order."""
    g = torch.Generator().manual_seed(dim)
    data = torch.randn(24, 40, 300, generator=g)
    index_shape = [24, 40, 300]
    index_shape[dim] = 50
    index = torch.randint(0, data.size(dim), index_shape, generator=g)
    d = lambda t: t.to("neuron")
    assert torch.equal(torch.gather(d(data), dim, d(index)).cpu(), torch.gather(data, dim, index))
    src = torch.randn(index_shape, generator=g)
    base = torch.randn(24, 40, 300, generator=g)
    assert torch.equal(d(base).scatter_add(dim, d(index), d(src)).cpu(), base.scatter_add(dim, index, src))
    assert torch.equal(d(base).scatter_reduce(dim, d(index), d(src), "amax").cpu(), base.scatter_reduce(dim, index, src, "amax"))


@pytest.mark.parametrize("shape", [(4, 7, 5), (4, 7, 6), (4, 7, 3, 2)], ids=["narrower", "as_wide", "two_inner_dims"])
def test_gather_and_scatter_through_an_index_expanded_after_dim(shape, no_fallback):
    # x.gather(1, i.unsqueeze(-1).expand(...)) (top-k routing, ranking, graph messages): the
    # kernels read the [4, 7] entries without materializing the expansion.
    g = torch.Generator().manual_seed(2)
    data = torch.randn(4, 10, *([6] if len(shape) == 3 else [3, 2]), generator=g)
    rows = torch.randint(0, 10, (4, 7), generator=g)
    src = torch.randn(shape, generator=g)
    expand = lambda r: r.view(4, 7, *[1] * (len(shape) - 2)).expand(shape)
    index, device_index = expand(rows), expand(rows.to("neuron"))  # expanded on the device: stride 0
    assert device_index.stride()[2:] == (0,) * (len(shape) - 2)
    d = lambda t: t.to("neuron")
    assert torch.equal(torch.gather(d(data), 1, device_index).cpu(), torch.gather(data, 1, index))
    assert torch.equal(d(data).scatter_add(1, device_index, d(src)).cpu(), data.scatter_add(1, index, src))
    assert torch.equal(d(data).scatter_reduce(1, device_index, d(src), "amax").cpu(), data.scatter_reduce(1, index, src, "amax"))
    (_, cpu_grads), (_, grads) = forward_backward(lambda t: torch.gather(t, 1, index.to(t.device) if t.is_cpu else device_index).square(), data)
    assert_same(grads[0], cpu_grads[0])
    bad = rows.clone()
    bad[2, 5] = 10
    result = torch.gather(d(data), 1, expand(d(bad)))
    with pytest.raises(torch.AcceleratorError, match="index 10 is out of bounds for dimension 1 with size 10"):
        result.cpu()


def test_gather_reports_the_first_bad_index_in_index_order():
    index = torch.zeros(64, 4096, dtype=torch.long)
    index[40, 7] = 5000  # found first by whichever thread reaches it; reported in index order
    index[3, 4000] = -2
    x = torch.randn(64, 4096, device="neuron")
    result = torch.gather(x, 1, index.to("neuron"))
    with pytest.raises(torch.AcceleratorError, match=r"index -2 is out of bounds for dimension 1 with size 4096"):
        result.cpu()


def test_gather_index_out_of_range_is_a_device_error():
    x = torch.randn(2, 3, device="neuron")
    result = torch.gather(x, 1, torch.tensor([[0, 3]], device="neuron"))
    with pytest.raises(torch.AcceleratorError, match=r"aten::gather.*index 3 is out of bounds for dimension 1 with size 3"):
        result.cpu()


def test_gather_scatter_accept_int32_and_empty_indices(no_fallback):
    x = sample((3, 4))
    index = torch.tensor([[0, 3], [1, 1], [2, 0]], dtype=torch.int32)
    assert_same(torch.gather(x.to("neuron"), 1, index.to("neuron")), torch.gather(x, 1, index))
    empty = torch.empty(0, dtype=torch.uint8)
    assert_same(torch.gather(x[0].to("neuron"), 0, empty.to("neuron")), torch.gather(x[0], 0, empty))


def test_scatter_into_zero_dim_tensors(no_fallback):
    # Autograd's backward of a reduction over a 0-dim tensor (kthvalue, median) scatters into one.
    for index, src in [(torch.tensor(0), torch.tensor(7.0)), (torch.tensor([0]), torch.tensor([5.0, 6.0]))]:
        expected = torch.tensor(3.0).scatter(0, index, src)
        assert_same(torch.tensor(3.0, device="neuron").scatter(0, index.to("neuron"), src.to("neuron")), expected)
    assert_same(torch.tensor(3.0, device="neuron").gather(0, torch.tensor([0, 0], device="neuron")),
                torch.tensor(3.0).gather(0, torch.tensor([0, 0])))
    leaf = torch.tensor(2.0, device="neuron", requires_grad=True)
    torch.kthvalue(leaf, 1).values.backward()
    assert leaf.grad.item() == 1.0


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_legacy_scatter_reduce_matches_cpu(reduce, no_fallback):
    x, src = sample((4, 5)), sample((3, 5), seed=1)
    index = torch.tensor([[0, 1, 2, 3, 0], [1, 1, 1, 1, 1], [3, 2, 1, 0, 3]])
    assert_same(x.to("neuron").scatter(0, index.to("neuron"), src.to("neuron"), reduce=reduce),
                x.scatter(0, index, src, reduce=reduce))
    with pytest.raises(RuntimeError, match="reduce argument must be either add or multiply"):
        x.to("neuron").scatter(0, index.to("neuron"), src.to("neuron"), reduce="max")

def test_histc_matches_cpu_and_counts_integers(no_fallback):
    x = sample((1000,)) * 3
    for kwargs in (dict(bins=10, min=-2, max=2), dict(bins=7), dict(bins=1, min=0, max=0)):
        assert_same(torch.histc(x.to("neuron"), **kwargs), torch.histc(x, **kwargs))
    # CPU PyTorch has no integer histc; as on CUDA, neuron counts integers (MoE routers use it).
    experts = torch.tensor([0, 3, 3, 1, 3, 2], dtype=torch.int32)
    counts = torch.histc(experts.to("neuron"), bins=4, min=0, max=3).cpu()
    assert counts.dtype == torch.int32
    assert torch.equal(counts, torch.bincount(experts, minlength=4).to(torch.int32))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_matches_cpu_with_gradients(dim, no_fallback):
    x = sample((4, 5, 3))
    assert_same(x.to("neuron").cumsum(dim), x.cumsum(dim))
    assert_same(x.to("neuron").cumsum(dim, dtype=torch.float64), x.cumsum(dim, dtype=torch.float64))
    mask = torch.tensor([[1, 1, 0], [0, 1, 1]])
    assert_same(mask.to("neuron").cumsum(-1), mask.cumsum(-1))  # integers accumulate into int64
    assert_same((mask > 0).to("neuron").cumsum(0), (mask > 0).cumsum(0))
    (cpu, cpu_grads), (dev, dev_grads) = forward_backward(lambda t: t.cumsum(dim).square(), x)
    assert_same(dev_grads[0], cpu_grads[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32], ids=str)
def test_scans_over_leading_dims_of_wide_tensors(dtype, no_fallback):
    """Scans with more than one block of elements after their dim (blocks of scans advance a row
    at a time): cumsum and cumprod over dims 0 and 1, with a width that leaves a partial block."""
    x = sample((40, 3, 150)) if dtype.is_floating_point else torch.randint(-3, 4, (40, 3, 150))
    x = (x / 4 + 1).to(dtype) if dtype.is_floating_point else x.to(dtype)
    d = x.to("neuron")
    for dim in (0, 1):
        assert_same(d.cumsum(dim), x.cumsum(dim))
        assert_same(d.cumprod(dim)[:8], x.cumprod(dim)[:8])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layer, dim", [("conv1d", 2), ("conv1d", 0), ("linear", 0), ("linear", 1)])
def test_weight_norm_forward_backward(layer, dim, dtype, no_fallback):
    # wav2vec2's positional convolution normalizes a Conv1d weight over dim 2; dims 0 and the
    # last take the fused _weight_norm_interface, which runs natively.
    torch.manual_seed(0)
    module = torch.nn.Conv1d(6, 8, 5, padding=2, groups=2) if layer == "conv1d" else torch.nn.Linear(7, 5)
    module = torch.nn.utils.parametrizations.weight_norm(module.to(dtype), dim=dim)
    x = torch.randn(3, 6, 11) if layer == "conv1d" else torch.randn(4, 7)
    results = []
    for device in ("cpu", "neuron"):
        moved = copy.deepcopy(module).to(device)
        out = moved(x.to(device, dtype))
        (out.float() * torch.linspace(-1, 1, out.numel()).view(out.shape).to(device)).sum().backward()
        original = moved.parametrizations.weight
        results.append((out.detach(), original.original0.grad, original.original1.grad))
    for neuron_result, cpu_result in zip(results[1], results[0]):
        assert_same(neuron_result, cpu_result)
    weight, norms = torch._weight_norm_interface(module.parametrizations.weight.original1.detach().to("neuron"),
                                                 module.parametrizations.weight.original0.detach().to("neuron"), dim)
    expected_weight, expected_norms = torch._weight_norm_interface(module.parametrizations.weight.original1.detach(),
                                                                   module.parametrizations.weight.original0.detach(),
                                                                   dim)
    assert norms.dtype == expected_norms.dtype and norms.shape == expected_norms.shape
    assert_same(weight, expected_weight)
    assert_same(norms, expected_norms)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int8], ids=str)
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_matches_cpu(reduce, dtype, no_fallback):
    # Repeated indices (several values reduce into one position), positions no index writes,
    # include_self both ways, an index smaller than src, a NaN in src (amax / amin keep it).
    g = torch.Generator().manual_seed(1)
    if dtype.is_floating_point:
        self_, src = torch.randn(5, 6, generator=g).to(dtype), torch.randn(7, 6, generator=g).to(dtype)
        src[2, 3] = float("nan")
    else:
        self_, src = torch.randint(-5, 6, (5, 6), generator=g).to(dtype), torch.randint(-3, 4, (7, 6), generator=g).to(dtype)
    for dim, index in [(0, torch.randint(0, 4, (6, 6), generator=g)), (1, torch.randint(0, 6, (4, 5), generator=g))]:
        for include_self in (True, False):
            expected = self_.scatter_reduce(dim, index, src, reduce, include_self=include_self)
            result = self_.to("neuron").scatter_reduce(dim, index.to("neuron"), src.to("neuron"), reduce,
                                                      include_self=include_self)
            assert_same(result, expected)
            inplace = self_.to("neuron")
            inplace.scatter_reduce_(dim, index.to("neuron"), src.to("neuron"), reduce, include_self=include_self)
            assert_same(inplace, expected)


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin", "prod"])
def test_scatter_reduce_gradients(reduce, no_fallback):
    g = torch.Generator().manual_seed(2)
    self_, src = torch.randn(5, 4, generator=g), torch.randn(8, 4, generator=g)
    index = torch.randint(0, 5, (8, 4), generator=g)
    results = []
    for device in ("cpu", "neuron"):
        a, b = self_.detach().to(device).requires_grad_(), src.detach().to(device).requires_grad_()
        out = a.scatter_reduce(0, index.to(device), b, reduce, include_self=False)
        (out * torch.arange(20.0).view(5, 4).to(device)).sum().backward()
        results.append((out.detach(), a.grad, b.grad))
    for neuron_result, cpu_result in zip(results[1], results[0]):
        assert_same(neuron_result, cpu_result)


def test_scatter_reduce_rejects_an_unknown_reduction():
    x = torch.zeros(3, device="neuron")
    with pytest.raises(RuntimeError, match="reduce argument must be either sum, prod, mean, amax or amin"):
        x.scatter_reduce(0, torch.tensor([0, 1], device="neuron"), torch.ones(2, device="neuron"), "median")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
def test_index_reduce_matches_cpu(reduce, dtype, no_fallback):
    g = torch.Generator().manual_seed(3)
    if dtype.is_floating_point:
        self_, source = torch.randn(4, 5, generator=g).to(dtype), torch.randn(4, 7, generator=g).to(dtype)
    else:
        self_, source = torch.randint(-4, 5, (4, 5), generator=g).to(dtype), torch.randint(-3, 4, (4, 7), generator=g).to(dtype)
    index = torch.tensor([0, 4, 4, 2, 0, 4, 1])  # repeats; position 3 is never written
    for include_self in (True, False):
        expected = self_.index_reduce(1, index, source, reduce, include_self=include_self)
        result = self_.to("neuron").index_reduce(1, index.to("neuron"), source.to("neuron"), reduce,
                                                include_self=include_self)
        assert_same(result, expected)


BAG_CASES = [  # (mode, padding_idx, include_last_offset, per_sample_weights)
    ("sum", None, False, False), ("mean", None, False, False), ("max", None, False, False),
    ("sum", 2, False, True), ("mean", 4, True, False), ("max", 4, True, False), ("sum", None, True, True),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", BAG_CASES, ids=str)
def test_embedding_bag_forward_and_backward(dtype, case, no_fallback):
    # Bags of several sizes, an empty one and repeated rows (their gradients add up), against
    # CPU PyTorch's output and the gradients of the weight and of per-sample weights.
    mode, padding_idx, include_last_offset, weighted = case
    weight = sample((12, 5), dtype, seed=1)
    indices = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 11, 0, 4, 4, 7])
    offsets = torch.tensor([0, 2, 2, 5, 9] + ([13] if include_last_offset else []))
    scale = sample((13,), dtype, seed=2) if weighted else None

    def fn(w, *extra):
        device = w.device
        return F.embedding_bag(indices.to(device), w, offsets.to(device), mode=mode, padding_idx=padding_idx,
                               include_last_offset=include_last_offset, per_sample_weights=extra[0] if extra else None)

    inputs = (weight, scale) if weighted else (weight,)
    (cpu, cpu_grads), (dev, dev_grads) = forward_backward(lambda *t: fn(*t) * torch.arange(1, 6, dtype=dtype, device=t[0].device), *inputs)
    assert_same(dev, cpu)
    for dev_grad, cpu_grad in zip(dev_grads, cpu_grads):
        assert_same(dev_grad, cpu_grad)


def test_embedding_bag_module_2d_input_and_int32_indices(no_fallback):
    bag = torch.nn.EmbeddingBag(20, 6, mode="mean")
    tokens = torch.randint(0, 20, (4, 7), generator=torch.Generator().manual_seed(3)).int()
    device_bag = copy.deepcopy(bag).to("neuron")
    assert_same(device_bag(tokens.to("neuron")), bag(tokens))
    result = torch.embedding_bag(device_bag.weight, tokens.flatten().to("neuron"), torch.tensor([0, 5], device="neuron").int())
    expected = torch.embedding_bag(bag.weight, tokens.flatten(), torch.tensor([0, 5]).int())
    assert result[0].shape == expected[0].shape and result[1].dtype == torch.int32
    assert_same(result[0].detach(), expected[0].detach())


def test_embedding_bag_bad_input_errors():
    weight = torch.randn(10, 3, device="neuron")
    indices = torch.tensor([1, 2, 4, 5], device="neuron")
    torch.neuron.synchronize()
    for offsets, message in (([1, 2], r"offsets\[0\] has to be 0"), ([0, 9], r"can not be greater than input's length 4"),
                             ([0, 3, 1], "offsets must be non-decreasing")):
        F.embedding_bag(indices, weight, torch.tensor(offsets, device="neuron"))
        with pytest.raises(torch.AcceleratorError, match=message):
            torch.neuron.synchronize()
    F.embedding_bag(torch.tensor([11], device="neuron"), weight, torch.tensor([0], device="neuron"))
    with pytest.raises(torch.AcceleratorError, match=r"aten::_embedding_bag.*Index 0 of input takes value 11 which is not in the valid range \[0, 10\)"):
        torch.neuron.synchronize()
    with pytest.raises(RuntimeError, match="per_sample_weights only supported with mode='sum'"):  # below F's own check
        torch.ops.aten._embedding_bag(weight, indices, torch.tensor([0], device="neuron"), False, 1, False,
                                      torch.ones(4, device="neuron"))
    with pytest.raises(RuntimeError, match="expected per_sample_weights to be a 1D tensor of 4 elements"):
        torch.ops.aten._embedding_bag(weight, indices, torch.tensor([0], device="neuron"), False, 0, False,
                                      torch.ones(3, device="neuron"))


@pytest.mark.parametrize("norm_type", [2.0, 1.0])
def test_embedding_max_norm_renormalizes_the_rows_used(norm_type, no_fallback):
    torch.manual_seed(0)
    cpu = torch.nn.Embedding(10, 4, max_norm=0.5, norm_type=norm_type)
    dev = copy.deepcopy(cpu).to("neuron")
    before = cpu.weight.detach().clone()
    idx = torch.tensor([[1, 3, 3], [9, 0, 1]])  # repeated rows are scaled once
    assert_same(dev(idx.to("neuron")).detach(), cpu(idx).detach())
    assert_same(dev.weight.detach(), cpu.weight.detach())
    used = torch.tensor([0, 1, 3, 9])
    assert (dev.weight.detach().cpu()[used].norm(p=norm_type, dim=1) <= 0.5 + 1e-6).all()
    unused = torch.tensor([2, 4, 5, 6, 7, 8])
    assert torch.equal(dev.weight.detach().cpu()[unused], before[unused])


def test_bincount_matches_cpu(no_fallback):
    # MoE routers count tokens per expert with it; the output size depends on the data (one sync).
    g = torch.Generator().manual_seed(0)
    experts = torch.randint(0, 8, (500,), generator=g)
    weights = torch.rand(500, generator=g)
    for x, kwargs in [(experts, {}), (experts, dict(minlength=12)), (experts.int(), dict(weights=weights)),
                      (experts.to(torch.uint8), dict(weights=weights.double())),
                      (experts, dict(weights=torch.randint(0, 5, (500,), generator=g))),
                      (torch.tensor([], dtype=torch.long), dict(minlength=3))]:
        device_kwargs = {k: v.to("neuron") if torch.is_tensor(v) else v for k, v in kwargs.items()}
        assert_same(torch.bincount(x.to("neuron"), **device_kwargs), torch.bincount(x, **kwargs))
    with pytest.raises(RuntimeError, match="bincount only supports 1-d non-negative integral inputs"):
        torch.bincount(torch.tensor([-1, 2], device="neuron"))
    with pytest.raises(RuntimeError, match="weights should be 1-d and have the same length as input"):
        torch.bincount(experts.to("neuron"), weights=torch.ones(3, device="neuron"))
