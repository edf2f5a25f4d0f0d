"""Tensors of more dims than the kernels index (16): copies, fills and random fills see them with
size-1 dims dropped and mergeable dims merged; what still needs more dims raises as before.
PyTorch's test_reductions makes 65-dim tensors (test_dim_ndim_limit)."""

import pytest
import torch

DEV = "neuron"


def _shape(ndim, big):
    """ndim dims, all 1 but `big` {position: size}."""
    shape = [1] * ndim
    for pos, size in big.items():
        shape[pos] = size
    return shape


@pytest.mark.parametrize("ndim", [17, 40, 65])
def test_round_trip_and_device_copies(ndim):
    x = torch.randn(_shape(ndim, {0: 2, 5: 3, ndim - 1: 4}))
    d = x.to(DEV)
    assert d.shape == x.shape and torch.equal(d.cpu(), x)
    # A permuted (non-contiguous) source, copied on the device and back into a permuted host view.
    perm = list(range(ndim))[::-1]
    assert torch.equal(d.permute(perm).contiguous().cpu(), x.permute(perm).contiguous())
    host = torch.empty(x.permute(perm).shape).permute(perm)
    host.copy_(d)
    assert torch.equal(host, x)
    # A broadcast (stride-0) source, and a dtype conversion.
    row = torch.randn(_shape(ndim, {ndim - 1: 4}))
    out = torch.empty(_shape(ndim, {0: 2, ndim - 1: 4}), device=DEV)
    out.copy_(row.to(DEV))
    assert torch.equal(out.cpu(), row.expand(out.shape))
    assert torch.equal(d.to(torch.float64).cpu(), x.to(torch.float64))


def test_fill_of_a_strided_many_dim_view():
    base = torch.zeros(_shape(20, {3: 4, 19: 6}))
    d = base.to(DEV)
    d[..., ::2].fill_(3.5)
    base[..., ::2].fill_(3.5)
    assert torch.equal(d.cpu(), base)


def test_uniform_and_normal_fill_as_on_fewer_dims():
    torch.manual_seed(0)
    a = torch.empty(_shape(30, {2: 3, 29: 5}), device=DEV).uniform_(2.0, 3.0)
    torch.manual_seed(0)
    b = torch.empty(15, device=DEV).uniform_(2.0, 3.0)
    assert torch.equal(a.cpu().flatten(), b.cpu())
    assert bool(((a >= 2) & (a < 3)).all())
    n = torch.empty(_shape(30, {2: 3, 29: 5}), device=DEV).normal_()
    assert bool(n.isfinite().all()) and n.cpu().std() > 0


def test_reduction_of_many_dims_matches_cpu():
    x = torch.randn(_shape(20, {1: 3, 10: 4, 19: 2}))
    torch.testing.assert_close(x.to(DEV).sum(10).cpu(), x.sum(10))
    assert torch.equal(x.to(DEV).argmax(1).cpu(), x.argmax(1))


@pytest.mark.parametrize("op", [lambda t: t.sum(0), lambda t: t.amax(0), lambda t: t.argmax(0),
                                lambda t: t.mean(0), lambda t: t.all(0)])
def test_over_64_dims_raises_cpus_error(op):
    x = torch.ones([1] * 65)
    with pytest.raises(RuntimeError, match="only tensors with up to 64 dims are supported"):
        op(x)
    with pytest.raises(RuntimeError, match="only tensors with up to 64 dims are supported"):
        op(x.to(DEV))
    assert x.to(DEV).argmax().item() == x.argmax().item()  # no dim: flattened, as on CPU
