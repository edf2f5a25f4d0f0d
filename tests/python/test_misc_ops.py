"""Assorted native operators against CPU PyTorch: eye, linspace, roll, constant, reflection and
replication padding with gradients, tril / triu, addmv / dot, cumprod, index_add / index_copy /
index_fill, masked_scatter, one_hot (scatter with a value), and integer / Bernoulli sampling
on the device RNG, Tensor.unfold's backward, and cummax / cummin / logcumsumexp."""

import pytest
import torch
import torch.nn.functional as F

from test_nn_ops import assert_same, sample


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_eye_and_linspace(dtype, no_fallback):
    assert_same(torch.eye(4, 6, dtype=dtype, device="neuron"), torch.eye(4, 6, dtype=dtype))
    for start, end, steps in [(0, 1, 5), (-3, 7, 11), (2.5, -1.5, 7), (0, 10, 1), (0, 10, 0)]:
        if dtype == torch.int64 and isinstance(start, float):
            continue
        assert_same(torch.linspace(start, end, steps, dtype=dtype, device="neuron"), torch.linspace(start, end, steps, dtype=dtype))


@pytest.mark.parametrize("shifts,dims", [(2, None), ((1, -2), (0, 2)), (-7, 1), (0, 0)])
def test_roll(shifts, dims, no_fallback):
    x = sample((3, 4, 5))
    assert_same(torch.roll(x.to("neuron"), shifts, dims), torch.roll(x, shifts, dims))


@pytest.mark.parametrize("mode,pad,shape", [
    ("reflect", (2, 1), (2, 3, 5)), ("reflect", (1, 2, 2, 0), (2, 3, 4, 5)), ("reflect", (1, 1, 1, 1, 1, 1), (1, 2, 3, 4, 3)),
    ("replicate", (3, 1), (2, 3, 5)), ("replicate", (2, 3, 1, 4), (2, 3, 4, 5)), ("replicate", (1, 0, 2, 1, 0, 2), (1, 2, 3, 4, 3)),
])
def test_padding_with_gradients(mode, pad, shape, no_fallback):
    x = sample(shape)
    results = []
    for device in ("cpu", "neuron"):
        leaf = x.to(device).detach().requires_grad_()
        out = F.pad(leaf, pad, mode=mode)
        out.backward(sample(out.shape, seed=5).to(device))
        results.append((out.detach(), leaf.grad))
    assert_same(results[1][0], results[0][0])
    assert_same(results[1][1], results[0][1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool], ids=str)
@pytest.mark.parametrize("pad,shape", [
    ((1, 2), (3, 40)), ((2, 2, 1, 1), (2, 3, 20, 33)), ((-1, 3, 0, -2), (2, 3, 6, 9)), ((1, 1, 2, 0, 1, 3), (2, 4, 5, 6)),
    ((0, 0, 1, 1, 1, 1, 1, 1), (2, 3, 4, 5)), ((-3, -3), (2, 6)), ((2, 1), (0, 4)),
])
def test_constant_padding(dtype, pad, shape, no_fallback):
    x = sample(shape).to(dtype) if dtype != torch.bool else sample(shape) > 0
    value = True if dtype == torch.bool else 3
    assert_same(F.pad(x.to("neuron"), pad, value=value), F.pad(x, pad, value=value))
    if dtype == torch.float32:
        if x.size(-2) + sum(pad[:2]) >= 0:  # the transposed input's last dim is long enough for the crop
            assert_same(F.pad(x.to("neuron").transpose(-1, -2), pad, value=-0.5), F.pad(x.transpose(-1, -2), pad, value=-0.5))
        results = []
        for device in ("cpu", "neuron"):
            leaf = x.detach().to(device).requires_grad_()
            out = F.pad(leaf, pad)
            out.backward(sample(out.shape, seed=2).to(device))
            results.append(leaf.grad)
        assert_same(results[1], results[0])


def test_constant_padding_errors():
    x = torch.ones(2, 3, device="neuron")
    with pytest.raises(RuntimeError, match="Length of pad must be even"):
        torch.constant_pad_nd(x, (1, 2, 3))
    with pytest.raises(RuntimeError, match="resulted in a negative output size"):
        F.pad(x, (-2, -2))
    with pytest.raises(RuntimeError, match="Length of pad should be no more than twice"):
        torch.constant_pad_nd(x, (1, 1, 1, 1, 1, 1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool], ids=str)
def test_tril_triu(dtype, no_fallback):
    x = sample((3, 7, 9)).to(dtype) if dtype != torch.bool else sample((3, 7, 9)) > 0
    d = x.to("neuron")
    for diagonal in (0, 1, -2, 8, -9):
        assert_same(d.tril(diagonal), x.tril(diagonal))
        assert_same(d.triu(diagonal), x.triu(diagonal))
        assert_same(d.transpose(1, 2).tril(diagonal), x.transpose(1, 2).tril(diagonal))
    inplace = d.clone()
    inplace.triu_(1)
    assert_same(inplace, x.triu(1))
    transposed = d.clone().transpose(1, 2)
    transposed.tril_(-1)
    assert_same(transposed, x.transpose(1, 2).tril(-1))
    out = torch.empty(3, 7, 9, dtype=dtype, device="neuron")
    torch.tril(d, 2, out=out)
    assert_same(out, x.tril(2))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        torch.ones(4, device="neuron").tril()


def test_padding_errors():
    with pytest.raises(RuntimeError, match="Padding size should be less than the corresponding input dimension"):
        F.pad(torch.ones(1, 2, 3, device="neuron"), (3, 3), mode="reflect")


def test_addmv_and_dot(no_fallback):
    mat, vec, bias = sample((5, 4)), sample((4,), seed=1), sample((5,), seed=2)
    assert_same(torch.addmv(bias.to("neuron"), mat.to("neuron"), vec.to("neuron"), beta=0.5, alpha=2.0),
                torch.addmv(bias, mat, vec, beta=0.5, alpha=2.0))
    assert_same(mat.to("neuron") @ vec.to("neuron"), mat @ vec)
    assert_same(torch.dot(vec.to("neuron"), vec.to("neuron")), torch.dot(vec, vec))
    with pytest.raises(RuntimeError, match="1D tensors expected"):
        torch.dot(mat.to("neuron"), vec.to("neuron"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_cumprod(dtype, no_fallback):
    x = (sample((3, 6)) / 2 + 1).to(dtype) if dtype.is_floating_point else torch.randint(-3, 4, (3, 6))
    assert_same(torch.cumprod(x.to("neuron"), 1), torch.cumprod(x, 1))
    if dtype.is_floating_point:
        leaf = x.to("neuron").requires_grad_()
        torch.cumprod(leaf, 0).sum().backward()
        ref = x.clone().requires_grad_()
        torch.cumprod(ref, 0).sum().backward()
        assert_same(leaf.grad, ref.grad, tol=1e-4)


def test_index_add_copy_fill(no_fallback):
    x, src = sample((5, 4)), sample((5, 3), seed=1)
    idx = torch.tensor([0, 3, 3])
    d = lambda t: t.to("neuron")
    assert_same(d(x).index_add(1, d(idx), d(src), alpha=2), x.index_add(1, idx, src, alpha=2))
    assert_same(d(x).index_copy(1, d(torch.tensor([2, 0, 1])), d(src)), x.index_copy(1, torch.tensor([2, 0, 1]), src))
    assert_same(d(x).index_fill(0, d(idx), -1.5), x.index_fill(0, idx, -1.5))
    assert_same(d(x).index_fill(1, d(idx), torch.tensor(3.0)), x.index_fill(1, idx, torch.tensor(3.0)))


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_index_add_copy_fill_along_every_dim(dim, no_fallback):
    """index_add / index_copy / index_fill write blocks of the result in place along any dim
    (no copy of the dim moved first), on contiguous and transposed results."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(6, 70, 9, generator=g)
    size = x.size(dim)
    idx = torch.tensor([size - 1, 0, 2, 2])
    shape = list(x.shape)
    shape[dim] = 4
    src = torch.randn(shape, generator=g)
    d = lambda t: t.to("neuron")
    assert_same(d(x).index_add(dim, d(idx), d(src), alpha=0.5), x.index_add(dim, idx, src, alpha=0.5))
    unique = torch.tensor([size - 1, 0, 2, 1])
    assert_same(d(x).index_copy(dim, d(unique), d(src)), x.index_copy(dim, unique, src))
    assert_same(d(x).index_fill(dim, d(idx), -2.5), x.index_fill(dim, idx, -2.5))
    assert_same(d(x).index_fill(dim, d(idx), torch.tensor(4)), x.index_fill(dim, idx, torch.tensor(4)))
    transposed = d(x).transpose(0, 2)
    tdim = {0: 2, 1: 1, 2: 0, -1: 0}[dim]
    expected = x.transpose(0, 2).index_fill(tdim, idx, 7.0)
    assert_same(transposed.index_fill_(tdim, d(idx), 7.0), expected)
    ints = torch.arange(6 * 70 * 9).view(6, 70, 9)
    assert_same(d(ints).index_fill(dim, d(idx), 1.9), ints.index_fill(dim, idx, 1.9))


def test_index_fill_counts_negative_indices_from_the_end(no_fallback):
    x = sample((3, 5))
    idx = torch.tensor([-1, 0, -5])
    assert_same(x.to("neuron").index_fill(1, idx.to("neuron"), 2.0), x.index_fill(1, idx, 2.0))
    with pytest.raises(torch.AcceleratorError, match="index -6 is out of bounds"):
        x.to("neuron").index_fill(1, torch.tensor([-6], device="neuron"), 2.0).cpu()
    with pytest.raises(torch.AcceleratorError, match="index -1 is out of bounds"):  # index_add does not wrap, as on CPU
        x.to("neuron").index_add(1, torch.tensor([-1], device="neuron"), torch.ones(3, 1, device="neuron")).cpu()


def test_large_fills(no_fallback):
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.bool):
        full = torch.full((300, 1000), 3, dtype=dtype, device="neuron")
        assert torch.equal(full.cpu(), torch.full((300, 1000), 3, dtype=dtype))
        assert torch.equal(full.zero_().cpu(), torch.zeros(300, 1000, dtype=dtype))
    strided = torch.zeros(400, 600, device="neuron")[:, ::3].fill_(2.0)
    assert torch.equal(strided.cpu(), torch.full((400, 200), 2.0))


def test_masked_scatter_and_one_hot(no_fallback):
    x = sample((3, 4))
    mask = x > 0
    src = sample((12,), seed=3)
    assert_same(x.to("neuron").masked_scatter(mask.to("neuron"), src.to("neuron")), x.masked_scatter(mask, src))
    labels = torch.tensor([0, 3, 1, 3])
    assert_same(F.one_hot(labels.to("neuron"), 5), F.one_hot(labels, 5))


def test_integer_and_bernoulli_sampling(no_fallback):
    torch.manual_seed(7)
    draws = torch.randint(-4, 6, (20000,), device="neuron")
    assert draws.dtype == torch.int64 and draws.min().item() == -4 and draws.max().item() == 5
    counts = torch.bincount((draws + 4).cpu(), minlength=10).float()
    assert (counts - 2000).abs().max() < 200  # uniform over 10 values
    torch.manual_seed(7)
    assert torch.equal(torch.randint(-4, 6, (20000,), device="neuron").cpu(), draws.cpu())  # seeded
    p = torch.rand(2000, device="neuron")
    flips = torch.bernoulli(p)
    assert set(flips.unique().cpu().tolist()) <= {0.0, 1.0}
    assert abs(flips.mean().item() - p.mean().item()) < 0.05
    assert abs(torch.empty(20000, device="neuron").bernoulli_(0.25).mean().item() - 0.25) < 0.02
    with pytest.raises(RuntimeError, match="'from' to be less than 'to'"):
        torch.empty(3, device="neuron").random_(5, 5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape, dim, size, step", [
    ((3, 10), 1, 4, 1),  # overlapping windows: positions sum several gradients
    ((3, 10), 1, 4, 3),  # the last position no window reaches
    ((2, 9, 3), 1, 2, 4),  # gaps between windows
    ((8, 2, 3), 0, 8, 1),  # one window
    ((4, 5), -1, 5, 2),
])
def test_tensor_unfold_backward_matches_cpu(dtype, shape, dim, size, step, no_fallback):
    x = sample(shape, dtype)
    grads = []
    for device in ("cpu", "neuron"):
        leaf = x.detach().to(device).requires_grad_()
        windows = leaf.unfold(dim, size, step)
        windows.backward(sample(windows.shape, dtype, seed=3).to(device))
        grads.append(leaf.grad)
    assert_same(grads[1], grads[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cummax_cummin_logcumsumexp_match_cpu(dtype, dim, no_fallback):
    # Ties: the later index takes over; a NaN takes over from anything (CPU's rules).
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-3, 4, (5, 6, 4), generator=g).to(dtype)
    if dtype.is_floating_point:
        x[1, 2, :] = float("nan")
        x[3, :, 1] = float("-inf")
    for fn in (torch.cummax, torch.cummin):
        cpu, dev = fn(x, dim), fn(x.to("neuron"), dim)
        assert_same(dev.values, cpu.values)
        assert torch.equal(dev.indices.cpu(), cpu.indices)
    if dtype.is_floating_point:
        assert_same(torch.logcumsumexp(x.to("neuron"), dim), torch.logcumsumexp(x, dim))
        leaves = [x.float().detach().to(d).requires_grad_() for d in ("cpu", "neuron")]
        for leaf in leaves:
            (torch.cummax(leaf, dim).values.nan_to_num().sum() + torch.logcumsumexp(leaf.nan_to_num(), dim).sum()).backward()
        assert_same(leaves[1].grad, leaves[0].grad, tol=1e-4)
