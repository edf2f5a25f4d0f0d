"""Advanced indexing on neuron against CPU PyTorch: integer and boolean indices, broadcasting,
adjacent and separated indexed dims, negative and CPU-resident indices, assignment, index_put
with accumulation (duplicates), autograd, and out-of-range errors raised at the next sync."""

import pytest
import torch

from test_reductions import assert_same


def source(shape=(5, 6, 7)):
    return torch.arange(torch.Size(shape).numel(), dtype=torch.float32).reshape(shape)


def long(*values):
    return torch.tensor(values)


CASES = {
    "first dim": lambda x, i: x[i(long(0, 4, 2, 4))],
    "negative": lambda x, i: x[i(long(-1, 0, -5))],
    "middle dim": lambda x, i: x[:, i(long(5, 0, 3))],
    "two adjacent": lambda x, i: x[:, i(long(1, 2)), i(long(6, 0))],
    "two separated": lambda x, i: x[i(long(1, 2)), :, i(long(6, 0))],
    "broadcast": lambda x, i: x[i(long(0, 1)).view(2, 1), i(long(2, 3, 4))],
    "bool mask": lambda x, i: x[i(x[:, :, 0] > 10)],
    "bool last dims": lambda x, i: x[:, i((x[0] > 3) & (x[0] < 20))],
    "scalar index": lambda x, i: x[i(long(3)).squeeze(), i(long(1, 2))],
    "int32": lambda x, i: x[i(long(1, 3).int())],
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("index_device", ["neuron", "cpu"])
def test_index_matches_cpu(case, index_device, no_fallback):
    x = source()
    ref = CASES[case](x, lambda t: t)
    got = CASES[case](x.to("neuron"), lambda t: t.to(index_device))
    assert_same(got, ref)


@pytest.mark.parametrize("case", ["first dim", "two adjacent", "two separated", "broadcast", "bool mask"])
def test_setitem_matches_cpu(case, no_fallback):
    expected, actual = source(), source().to("neuron")
    shape = CASES[case](expected, lambda t: t).shape
    values = torch.randn(shape)
    # Assignment through the same index expressions.
    index_of = {
        "first dim": lambda i: (i(long(0, 4, 2)),),
        "two adjacent": lambda i: (slice(None), i(long(1, 2)), i(long(6, 0))),
        "two separated": lambda i: (i(long(1, 2)), slice(None), i(long(6, 0))),
        "broadcast": lambda i: (i(long(0, 1)).view(2, 1), i(long(2, 3, 4))),
        "bool mask": lambda i: (i(source()[:, :, 0] > 10),),
    }[case]
    expected[index_of(lambda t: t)] = values[: expected[index_of(lambda t: t)].shape[0]] if case == "first dim" else values
    actual[index_of(lambda t: t.to("neuron"))] = (values[:3] if case == "first dim" else values).to("neuron")
    assert_same(actual, expected)
    actual[index_of(lambda t: t.to("neuron"))] = 7.0  # a broadcast Python scalar
    expected[index_of(lambda t: t)] = 7.0
    assert_same(actual, expected)


def test_index_put_accumulates_duplicates(no_fallback):
    indices = (long(0, 2, 0, 0), long(1, 1, 1, 3))
    values = torch.tensor([1.0, 2.0, 3.0, 4.0])
    expected = torch.zeros(3, 4).index_put_(indices, values, accumulate=True)
    actual = torch.zeros(3, 4, device="neuron").index_put_(tuple(t.to("neuron") for t in indices), values.to("neuron"), accumulate=True)
    assert_same(actual, expected)
    expected = torch.zeros(3, 4).index_put_(indices, values)  # duplicates: the last write wins
    actual = torch.zeros(3, 4, device="neuron").index_put_(tuple(t.to("neuron") for t in indices), values.to("neuron"))
    assert_same(actual, expected)


def test_index_backward_accumulates(no_fallback):
    x = torch.randn(6, 5)
    idx = long(0, 3, 3, 5)
    grads = []
    for device in ("cpu", "neuron"):
        leaf = x.to(device).detach().requires_grad_()
        (leaf[idx.to(device), 1:] * 2).sum().backward()
        grads.append(leaf.grad)
    assert_same(grads[1], grads[0])


def test_index_into_non_contiguous_tensor(no_fallback):
    x = source((6, 7)).t()
    idx = long(1, 4)
    assert_same(x.to("neuron")[idx], x[idx])
    target, expected = source((6, 7)).to("neuron").t(), source((6, 7)).t().clone()
    target[idx] = 0.0
    expected[idx] = 0.0
    assert_same(target, expected)


def test_index_errors():
    x = source().to("neuron")
    with pytest.raises(IndexError, match=r"^index 9 is out of bounds for dimension 0 with size 5$"):
        x[long(0, 9).to("neuron")]  # read at the call, as on CPU
    with pytest.raises(IndexError, match="must be long, int, byte or bool"):
        x[torch.tensor([0.5], device="neuron")]
    with pytest.raises(IndexError, match="shape of the mask"):
        x[torch.ones(4, dtype=torch.bool, device="neuron")]
    with pytest.raises(RuntimeError, match="shape mismatch"):
        x[long(0, 1).to("neuron")] = torch.ones(3, device="neuron")
