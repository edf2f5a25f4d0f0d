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
