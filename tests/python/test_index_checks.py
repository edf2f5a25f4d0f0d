"""Index values out of range: indexing and take / put raise CPU PyTorch's exception type and message
at the call, never a deferred fault; embedding and embedding_bag check device-resident indices on
the device and raise at the next synchronization, as on CUDA."""

import pytest
import torch
import torch.nn.functional as F


def cpu_and_neuron_errors(call, *tensors):
    """Runs call on CPU tensors and on their neuron copies; returns both exceptions (None if none)."""
    errors = []
    for device in ("cpu", "neuron"):
        try:
            call(*[t.to(device) for t in tensors])
            errors.append(None)
        except Exception as error:  # noqa: BLE001 - compared below
            errors.append(error)
    return errors


CASES = {
    "getitem": (lambda x, i: x[i], torch.zeros(5), torch.tensor([1, 1, 10])),
    "getitem_negative": (lambda x, i: x[i], torch.zeros(5), torch.tensor([-6])),
    "getitem_second_dim": (lambda x, i: x[:, i], torch.zeros(3, 4), torch.tensor([[0, 4]])),
    "setitem": (lambda x, i: x.__setitem__(i, 0.0), torch.zeros(5), torch.tensor([11, 1])),
    "index_put_accumulate": (lambda x, i: x.index_put_((i,), torch.ones(2, device=x.device), accumulate=True), torch.zeros(5),
                             torch.tensor([0, 5])),
    "index_int32": (lambda x, i: x[i], torch.zeros(5), torch.tensor([7], dtype=torch.int32)),
}


@pytest.mark.parametrize("name", CASES)
def test_indexing_raises_at_the_call_as_cpu(name):
    call, x, index = CASES[name]
    cpu, neuron = cpu_and_neuron_errors(call, x, index)
    assert type(cpu) is IndexError, cpu
    assert type(neuron) is IndexError and str(neuron) == str(cpu), (neuron, cpu)
    torch.neuron.synchronize()  # nothing left pending


def test_take_and_put_raise_index_error_at_the_call():
    a = torch.arange(20.0, device="neuron")
    for bad in (20, -21):
        with pytest.raises(IndexError, match=f"index {bad} is out of bounds for dimension 0 with size 20"):
            torch.take(a, torch.tensor([0, bad], device="neuron"))
        with pytest.raises(IndexError, match=f"index {bad} is out of bounds for dimension 0 with size 20"):
            a.put_(torch.tensor([bad], device="neuron"), torch.ones(1, device="neuron"))
        with pytest.raises(IndexError):  # CPU's type too (its message words it otherwise)
            torch.take(a.cpu(), torch.tensor([bad]))
    assert torch.equal(a.cpu(), torch.arange(20.0))  # put_ wrote nothing


@pytest.mark.parametrize("bad", [-1, 10])
def test_embedding_index_out_of_range_is_a_device_error_at_the_next_sync(bad):
    """An embedding's device-resident indices are checked by the lookup's kernel, not read at the
    call (that would wait for the device at every training step): the error names the index and
    comes at the next synchronization, as on CUDA; CPU raises IndexError at the call."""
    weight = torch.randn(10, 3)
    indices = torch.tensor([[0, bad], [2, 3]])
    with pytest.raises(IndexError, match="index out of range in self"):
        F.embedding(indices, weight)
    module = torch.nn.Embedding(10, 3).to("neuron")
    module(indices.to("neuron"))  # queued
    with pytest.raises(RuntimeError, match=f"index {bad} is out of range"):
        torch.neuron.synchronize()
    torch.neuron.synchronize()  # reported once; the device recovered
    assert torch.equal(module(torch.tensor([1], device="neuron")).cpu(), module.weight[1:2].detach().cpu())


@pytest.mark.parametrize("mode", ["sum", "mean", "max", "sum_weighted"])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_embedding_bag_index_out_of_range_is_a_device_error_at_the_next_sync(mode, index_dtype):
    # PyTorch's test_embedding_bag_out_of_bounds_idx expects CPU's error at the call (CUDA exempt);
    # here every one of its cases must raise at the sync instead.
    weight = torch.randn(10, 2, dtype=torch.float64)
    psw = torch.randn(1, 2, dtype=torch.float64) if mode == "sum_weighted" else None
    mode = mode.removesuffix("_weighted")
    for bad in ([[-1, 1]], [[11, 8]]):
        indices = torch.tensor(bad, dtype=index_dtype)
        with pytest.raises(RuntimeError, match="embedding_bag: Expected idx >= 0"):
            F.embedding_bag(indices, weight, mode=mode, padding_idx=0, per_sample_weights=psw)
        F.embedding_bag(indices.to("neuron"), weight.to("neuron"), mode=mode, padding_idx=0,
                        per_sample_weights=None if psw is None else psw.to("neuron"))
        with pytest.raises(torch.AcceleratorError, match=f"embedding_bag.*value {bad[0][0]} .*not in the valid range"):
            torch.neuron.synchronize()
    torch.neuron.synchronize()


def test_in_range_indices_give_cpu_results_and_the_next_call_is_clean():
    x = torch.randn(6, 4)
    index = torch.tensor([5, -6, 0, 3])
    with pytest.raises(IndexError):
        x.to("neuron")[torch.tensor([6], device="neuron")]
    # The failed call left no fault behind: the next op and sync see none.
    assert torch.equal(x.to("neuron")[index.to("neuron")].cpu(), x[index])
    rows = index.remainder(6)
    assert torch.equal(F.embedding(rows.to("neuron"), x.to("neuron")).cpu(), F.embedding(rows, x))
    torch.neuron.synchronize()


def test_index_computed_on_the_device_is_checked_after_its_producer():
    x = torch.randn(8, device="neuron")
    index = torch.arange(4, device="neuron") * 3  # 0, 3, 6, 9: written by a queued kernel
    with pytest.raises(IndexError, match="index 9 is out of bounds for dimension 0 with size 8"):
        x[index]


def test_a_captured_graph_keeps_the_device_check():
    # While a graph captures there are no index values to read: the kernel's check reports at replay.
    x = torch.randn(8, device="neuron")
    index = torch.tensor([1, 2], device="neuron")
    torch.neuron.synchronize()
    graph = torch.neuron.NeuronGraph()
    with torch.neuron.graph(graph):
        out = x[index]
    graph.replay()
    assert torch.equal(out.cpu(), x.cpu()[[1, 2]])
    index.fill_(9)
    graph.replay()
    with pytest.raises(torch.AcceleratorError, match="index 9 is out of bounds"):
        torch.neuron.synchronize()


def test_device_index_checks_variable_defers_the_error(run_python):
    code = (
        "import torch, torchneuron\n"
        "x = torch.zeros(5, device='neuron')\n"
        "y = x[torch.tensor([7], device='neuron')]\n"
        "print('RETURNED')\n"
        "try:\n"
        "    torch.neuron.synchronize()\n"
        "except torch.AcceleratorError as e:\n"
        "    print('DEFERRED', 'index 7 is out of bounds' in str(e))\n"
    )
    result = run_python(code, env={"TORCHNEURON_DEVICE_INDEX_CHECKS": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["RETURNED", "DEFERRED", "True"], result.stdout
