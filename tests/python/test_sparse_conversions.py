"""Dense to sparse COO and back on neuron (to_sparse, to_dense) and the shape ops that
sentence-transformers' sparse encoders use on sparse tensors (unsqueeze, stack, cat, permute,
narrow_copy): native, no CPU fallback, each against CPU PyTorch."""

import pytest
import torch

import torchneuron

DEV = "neuron"


@pytest.fixture(autouse=True)
def _no_fallback():
    torchneuron.set_fallback_mode("error")
    torchneuron.reset_fallback_report()
    yield
    assert torchneuron.fallback_report() == {}
    torchneuron.set_fallback_mode("warn")


def _dense():
    torch.manual_seed(0)
    x = torch.randn(5, 4, 3)
    x[x.abs() < 0.8] = 0  # about half zeros, and whole zero rows along the dense dims below
    x[1] = 0
    x[3, 2] = 0
    return x


def _assert_same_sparse(actual, expected):
    assert actual.is_sparse and actual.device.type == DEV
    assert actual.is_coalesced() == expected.is_coalesced()
    assert (actual.sparse_dim(), actual.dense_dim(), actual.shape) == (expected.sparse_dim(), expected.dense_dim(),
                                                                       expected.shape)
    assert torch.equal(actual._indices().cpu(), expected._indices())
    assert torch.equal(actual._values().cpu(), expected._values())


@pytest.mark.parametrize("kwargs", [{}, {"dense_dim": 1}, {"dense_dim": 2}, {"sparse_dim": 1}, {"sparse_dim": 2}])
def test_to_sparse_equals_cpu(kwargs):
    x = _dense()
    if "sparse_dim" in kwargs:
        got, want = x.to(DEV).to_sparse(kwargs["sparse_dim"]), x.to_sparse(kwargs["sparse_dim"])
    else:
        got, want = x.to(DEV).to_sparse(**kwargs), x.to_sparse(**kwargs)
    _assert_same_sparse(got, want)
    assert torch.equal(got.to_dense().cpu(), x)


@pytest.mark.parametrize("x", [torch.tensor(2.5), torch.zeros(3, 2), torch.tensor([[True, False], [False, True]]),
                               torch.arange(6, dtype=torch.int32).reshape(2, 3)])
def test_to_sparse_edge_cases(x):
    got = x.to(DEV).to_sparse()
    _assert_same_sparse(got, x.to_sparse())
    assert torch.equal(got.to_dense().cpu(), x)


@pytest.mark.parametrize("call", [lambda t: t.to_sparse(4), lambda t: t.to_sparse(0),
                                  lambda t: t.to_sparse(dense_dim=3), lambda t: t.to_sparse(dense_dim=4)])
def test_to_sparse_refuses_bad_dims_with_cpus_message(call):
    x = _dense()
    with pytest.raises(RuntimeError) as cpu:
        call(x)
    with pytest.raises(RuntimeError) as dev:
        call(x.to(DEV))
    assert str(dev.value) == str(cpu.value)


def test_to_sparse_csr_layout_converts_on_the_device():
    # CSC and the blocked layouts go through the counted fallback (test_sparse_csr.py)
    x = torch.eye(4) * torch.arange(1.0, 5.0)
    dev, cpu = x.to(DEV).to_sparse(layout=torch.sparse_csr), x.to_sparse(layout=torch.sparse_csr)
    assert dev.layout == torch.sparse_csr and dev.device.type == DEV
    assert torch.equal(dev.crow_indices().cpu(), cpu.crow_indices())
    assert torch.equal(dev.col_indices().cpu(), cpu.col_indices())
    assert torch.equal(dev.to_dense().cpu(), x)


def test_to_dense_sums_duplicates():
    i = torch.tensor([[0, 2, 0, 1], [1, 0, 1, 1]])
    v = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [-1.0, 0.5]])
    cpu = torch.sparse_coo_tensor(i, v, (3, 2, 2))  # (0, 1) twice: uncoalesced
    dev = torch.sparse_coo_tensor(i.to(DEV), v.to(DEV), (3, 2, 2))
    assert torch.equal(dev.to_dense().cpu(), cpu.to_dense())
    for sparse in (cpu, dev):  # CPU takes no dtype here; neither does neuron
        with pytest.raises(RuntimeError, match="dtype argument is not supported by sparse_to_dense"):
            sparse.to_dense(dtype=torch.float64)
    empty = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0), (2, 3))
    assert torch.equal(empty.to(DEV).to_dense().cpu(), torch.zeros(2, 3))


def test_shape_ops_on_sparse_tensors_equal_cpu():
    a, b = _dense()[0], _dense()[2]
    sa, sb = a.to_sparse(), b.to_sparse()
    na, nb = a.to(DEV).to_sparse(), b.to(DEV).to_sparse()
    _assert_same_sparse(torch.stack([na, nb]), torch.stack([sa, sb]))
    _assert_same_sparse(torch.cat([na, nb], dim=1), torch.cat([sa, sb], dim=1))
    _assert_same_sparse(na.unsqueeze(1), sa.unsqueeze(1))
    _assert_same_sparse(na.permute(1, 0), sa.permute(1, 0))
    _assert_same_sparse(na.narrow_copy(0, 1, 2), sa.narrow_copy(0, 1, 2))
