"""Native selection and statistics against CPU PyTorch: argmax / argmin, max / min with
indices, sort (stable and not, ties and NaN), topk, prod, var / std (with corrections) and
their autograd."""

import pytest
import torch

from test_reductions import assert_same, sample


def ties(shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 4, shape, generator=g).float()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32], ids=str)
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_argmin_and_max_min_dim(dtype, dim, keepdim, no_fallback):
    x = sample((4, 7, 5), dtype)
    for fn in (torch.argmax, torch.argmin):
        assert_same(fn(x.to("neuron"), dim=dim, keepdim=keepdim), fn(x, dim=dim, keepdim=keepdim))
    if dim is not None:
        for fn in (torch.max, torch.min):
            values, indices = fn(x.to("neuron"), dim=dim, keepdim=keepdim)
            cpu_values, cpu_indices = fn(x, dim=dim, keepdim=keepdim)
            assert_same(values, cpu_values)
            assert_same(indices, cpu_indices)


def test_argmax_first_of_ties_and_nan(no_fallback):
    x = ties((6, 9))
    x[2, 4] = float("nan")
    for fn in (torch.argmax, torch.argmin):
        assert_same(fn(x.to("neuron"), dim=1), fn(x, dim=1))
    assert_same(torch.max(x.to("neuron"), dim=1).values, torch.max(x, dim=1).values)


@pytest.mark.parametrize("stable", [False, True])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dim", [0, -1])
def test_sort_matches_cpu_including_ties_and_nan(stable, descending, dim, no_fallback):
    x = ties((40, 50))
    x[3, 7] = float("nan")
    values, indices = torch.sort(x.to("neuron"), dim=dim, descending=descending, stable=stable)
    cpu_values, cpu_indices = torch.sort(x, dim=dim, descending=descending, stable=stable)
    assert_same(values, cpu_values)
    assert_same(indices, cpu_indices)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
@pytest.mark.parametrize("k,dim,largest", [(1, -1, True), (3, 1, False), (5, 0, True), (200, -1, True)])
def test_topk_matches_cpu(dtype, k, dim, largest, no_fallback):
    x = sample((6, 7, 300), dtype)
    k = min(k, x.size(dim))
    values, indices = torch.topk(x.to("neuron"), k, dim=dim, largest=largest)
    cpu_values, cpu_indices = torch.topk(x, k, dim=dim, largest=largest)
    assert_same(values, cpu_values)
    assert_same(indices, cpu_indices)


def test_topk_backward_and_errors(no_fallback):
    x = sample((5, 8), torch.float32)
    grads = []
    for device in ("cpu", "neuron"):
        leaf = x.to(device).detach().requires_grad_()
        torch.topk(leaf, 3).values.sum().backward()
        grads.append(leaf.grad)
    assert_same(grads[1], grads[0])
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        torch.topk(x.to("neuron"), 9)
    with pytest.raises(IndexError, match="out of range"):
        torch.argmax(x.to("neuron"), dim=2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_prod(dtype, no_fallback):
    x = sample((3, 4, 5), dtype) / (3 if dtype.is_floating_point else 1)
    assert_same(torch.prod(x.to("neuron")), torch.prod(x), rtol=1e-5)
    assert_same(torch.prod(x.to("neuron"), 1, keepdim=True), torch.prod(x, 1, keepdim=True), rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("dim,correction", [(None, 1), (1, 0), ((0, 2), 1), (-1, 2.5)])
def test_var_std_and_their_means(dtype, dim, correction, no_fallback):
    x = sample((4, 6, 5), dtype) * 3 + 2
    for fn in (torch.var, torch.std):
        assert_same(fn(x.to("neuron"), dim=dim, correction=correction), fn(x, dim=dim, correction=correction))
    for fn in (torch.var_mean, torch.std_mean):
        got, ref = fn(x.to("neuron"), dim=dim, correction=correction, keepdim=True), fn(x, dim=dim, correction=correction, keepdim=True)
        assert_same(got[0], ref[0])
        assert_same(got[1], ref[1])


def test_var_backward_and_single_element(no_fallback):
    x = sample((4, 6), torch.float32)
    grads = []
    for device in ("cpu", "neuron"):
        leaf = x.to(device).detach().requires_grad_()
        torch.std(leaf, dim=0).sum().backward()
        grads.append(leaf.grad)
    assert_same(grads[1], grads[0])
    one = torch.ones(1, 3)
    assert_same(torch.var(one.to("neuron"), dim=0), torch.var(one, dim=0))  # 0 / 0: NaN


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_unique_with_inverse_and_counts(dtype, no_fallback):
    x = ties((7, 9)).to(dtype)
    got = torch.unique(x.to("neuron"), return_inverse=True, return_counts=True)
    ref = torch.unique(x, return_inverse=True, return_counts=True)
    for g, r in zip(got, ref):
        assert_same(g, r)


def with_nans(shape, seed=0):
    x = ties(shape, seed)
    g = torch.Generator().manual_seed(seed + 1)
    x[torch.rand(shape, generator=g) < 0.2] = float("nan")
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
@pytest.mark.parametrize("dim, keepdim", [(1, False), (0, True), (-1, True)])
def test_kthvalue_median_nanmedian_match_cpu(dtype, dim, keepdim, no_fallback):
    # Among tied values CPU PyTorch's index is unspecified: indices are checked to point at
    # elements equal to the value (NaN at NaN), values against CPU.
    x = (with_nans((5, 7, 3)) if dtype.is_floating_point else ties((5, 7, 3))).to(dtype)
    xd = x.to("neuron")
    n = x.shape[dim]
    calls = [lambda t: torch.median(t, dim, keepdim), lambda t: torch.nanmedian(t, dim, keepdim)]
    calls += [lambda t, k=k: torch.kthvalue(t, k, dim, keepdim) for k in (1, (n + 1) // 2, n)]
    for call in calls:
        cpu, dev = call(x), call(xd)
        assert_same(dev.values, cpu.values)
        picked = xd.gather(dim, dev.indices if keepdim else dev.indices.unsqueeze(dim))
        assert_same(picked if keepdim else picked.squeeze(dim), cpu.values)
    assert_same(torch.median(xd), torch.median(x))
    assert_same(torch.nanmedian(xd), torch.nanmedian(x))


def test_median_of_nan_line_points_at_its_first_nan(no_fallback):
    x = torch.tensor([[3.0, float("nan"), 1.0, 2.0, float("nan")], [float("nan")] * 5])
    cpu, dev = torch.median(x, 1), torch.median(x.to("neuron"), 1)
    assert_same(dev.values, cpu.values)
    assert torch.equal(dev.indices.cpu(), cpu.indices)
    cpu, dev = torch.nanmedian(x, 1), torch.nanmedian(x.to("neuron"), 1)  # an all-NaN line: any NaN's index
    assert_same(dev.values, cpu.values)
    assert dev.indices[0].item() == cpu.indices[0].item() and 0 <= dev.indices[1].item() < 5
    with pytest.raises(RuntimeError, match="selected number k out of range"):
        torch.kthvalue(x.to("neuron"), 6, 1)
    with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
        torch.median(torch.empty(0, 3, device="neuron"), 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_and_bucketize_match_cpu(dtype, side, no_fallback):
    g = torch.Generator().manual_seed(0)
    boundaries = torch.randint(-20, 20, (30,), generator=g).sort().values.to(dtype)
    values = torch.randint(-25, 25, (4, 9), generator=g).to(dtype)
    rows = torch.randint(-20, 20, (4, 6), generator=g).sort(dim=1).values.to(dtype)
    right = side == "right"
    for args, kwargs in [((boundaries, values), dict(side=side)), ((rows, values), dict(right=right)),
                         ((boundaries, values), dict(side=side, out_int32=True))]:
        expected = torch.searchsorted(*args, **kwargs)
        assert torch.equal(torch.searchsorted(*[a.to("neuron") for a in args], **kwargs).cpu(), expected)
    shuffled = boundaries[torch.randperm(30, generator=g)]
    sorter = shuffled.argsort(stable=True)
    expected = torch.searchsorted(shuffled, values, side=side, sorter=sorter)
    assert torch.equal(torch.searchsorted(shuffled.to("neuron"), values.to("neuron"), side=side,
                                          sorter=sorter.to("neuron")).cpu(), expected)
    assert torch.equal(torch.bucketize(values.to("neuron"), boundaries.to("neuron"), right=right).cpu(),
                       torch.bucketize(values, boundaries, right=right))
    assert torch.equal(torch.searchsorted(boundaries.to("neuron"), 3).cpu(), torch.searchsorted(boundaries, 3))


def test_searchsorted_handles_nan_mixed_dtypes_and_rejects_bad_input_like_cpu(no_fallback):
    boundaries, values = torch.tensor([1.0, 2.0, 2.0, 3.0]), torch.tensor([2.0, float("nan"), -float("inf"), 2.5])
    for right in (False, True):
        assert torch.equal(torch.searchsorted(boundaries.to("neuron"), values.double().to("neuron"), right=right).cpu(),
                           torch.searchsorted(boundaries, values.double(), right=right))
    b = boundaries.to("neuron")
    with pytest.raises(RuntimeError, match="side can only be 'left' or 'right'"):
        torch.searchsorted(b, b, side="middle")
    with pytest.raises(RuntimeError, match="first N-1 dimensions of boundaries tensor and input value tensor must match"):
        torch.searchsorted(torch.ones(2, 3, device="neuron"), torch.ones(3, 2, device="neuron"))
    with pytest.raises(RuntimeError, match="boundaries tensor must be 1 dimension"):
        torch.bucketize(b, torch.ones(2, 2, device="neuron"))
    with pytest.raises(RuntimeError, match="sorter index out of range"):
        torch.searchsorted(b, b, sorter=torch.tensor([0, 1, 2, 9], device="neuron")).cpu()
