"""Sparse COO tensors on neuron: construction, metadata, sparse embedding gradients and their use
(accumulation, optimizer steps, to_dense), each against CPU PyTorch. Other sparse ops run as the
counted CPU fallback."""

import warnings

import pytest
import torch

DEV = "neuron"


@pytest.fixture(autouse=True)
def _quiet_fallback():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*fell back to the CPU.*")
        yield


def _assert_sparse_equal(actual, expected):
    assert actual.is_sparse and actual.device.type == DEV
    a, e = actual.coalesce(), expected.coalesce()
    assert a.shape == e.shape and a.sparse_dim() == e.sparse_dim() and a.dense_dim() == e.dense_dim()
    assert torch.equal(a.indices().cpu(), e.indices())
    torch.testing.assert_close(a.values().cpu(), e.values())


def test_construct_and_read_back():
    i = torch.tensor([[0, 1, 1, 3], [2, 0, 0, 1]])
    v = torch.tensor([1.0, 2.0, 3.0, 4.0])
    cpu = torch.sparse_coo_tensor(i, v, (4, 3))
    dev = torch.sparse_coo_tensor(i.to(DEV), v.to(DEV), (4, 3))
    assert dev.is_sparse and dev._nnz() == 4 and not dev.is_coalesced()
    assert dev._indices().device.type == DEV and dev._values().device.type == DEV
    _assert_sparse_equal(dev, cpu)
    assert torch.equal(dev.to_dense().cpu(), cpu.to_dense())
    assert torch.equal(cpu.to(DEV).to_dense().cpu(), cpu.to_dense())  # a CPU sparse tensor moved over
    _assert_sparse_equal(dev.cpu().to(DEV), cpu)
    assert dev.coalesce().is_coalesced() and dev.coalesce()._nnz() == 3


def test_in_place_sparse_ops_write_back():
    i = torch.tensor([[0, 2], [1, 1]])
    cpu = torch.sparse_coo_tensor(i, torch.tensor([1.5, -2.0]), (3, 2))
    dev = cpu.to(DEV)
    dev.mul_(3)
    cpu.mul_(3)
    _assert_sparse_equal(dev, cpu)
    dev.add_(dev)
    cpu.add_(cpu)
    _assert_sparse_equal(dev, cpu)
    dev.zero_()
    assert dev._nnz() == 0 and dev.shape == (3, 2)


@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_sparse_gradient_matches_cpu(padding_idx):
    torch.manual_seed(0)
    cpu = torch.nn.Embedding(10, 4, sparse=True, padding_idx=padding_idx)
    dev = torch.nn.Embedding(10, 4, sparse=True, padding_idx=padding_idx).to(DEV)
    dev.weight.data.copy_(cpu.weight.data)
    idx = torch.tensor([[0, 2, 4, 4], [1, 2, 9, 0]])
    for e, ix in ((cpu, idx), (dev, idx.to(DEV))):
        e(ix).sum().backward()
        e(ix[:, :2]).pow(2).sum().backward()  # accumulates into the sparse gradient
    _assert_sparse_equal(dev.weight.grad, cpu.weight.grad)
    for e in (cpu, dev):
        torch.optim.SGD(e.parameters(), lr=0.1).step()  # dense weight, sparse gradient
    torch.testing.assert_close(dev.weight.detach().cpu(), cpu.weight.detach())


@pytest.mark.parametrize("mode", ["sum", "mean"])  # max takes no sparse gradient
def test_embedding_bag_sparse_gradient_matches_cpu(mode):
    torch.manual_seed(1)
    cpu = torch.nn.EmbeddingBag(10, 3, mode=mode, sparse=True)
    dev = torch.nn.EmbeddingBag(10, 3, mode=mode, sparse=True).to(DEV)
    dev.weight.data.copy_(cpu.weight.data)
    idx, offsets = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 3, 5])
    weights = torch.rand(8) if mode == "sum" else None
    out_cpu = cpu(idx, offsets, per_sample_weights=weights)
    out_dev = dev(idx.to(DEV), offsets.to(DEV), per_sample_weights=None if weights is None else weights.to(DEV))
    torch.testing.assert_close(out_dev.cpu(), out_cpu)
    out_cpu.square().sum().backward()
    out_dev.square().sum().backward()
    _assert_sparse_equal(dev.weight.grad, cpu.weight.grad)
