"""The compiled program that runs a neuron-compiled graph: constants folded with fresh outputs,
backward programs that free saved tensors as they go, and the native executor's error types,
symbolic sizes, numbers for tensor arguments and reused buffers in the layout their values need."""

import warnings

import pytest
import torch

import torchneuron

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def test_constants_are_folded_but_outputs_stay_fresh(no_fallback):
    def f(x):
        positions = torch.arange(x.shape[-1], device=x.device)
        scale = torch.full((x.shape[-1],), 0.5, device=x.device).exp().sum()  # constant, not fusible
        return x * scale + positions, torch.ones(3, device=x.device), torch.full((2, 3), 2.0, device=x.device).t()

    compiled = torch.compile(f, backend="neuron")
    for seed in range(2):
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(seed)).to("neuron")
        got, ones, twos = compiled(x)
        expected, _, _ = f(x.cpu())  # CPU PyTorch as the reference
        torch.testing.assert_close(got.cpu(), expected)
        assert torch.equal(ones.cpu(), torch.ones(3)) and torch.equal(twos.cpu(), torch.full((3, 2), 2.0))
        ones.zero_()  # a caller's change to an output (or to a view it is) must not reach the next call
        twos.zero_()
    stats = torchneuron.compile_stats()
    assert stats["graphs_compiled"] == 1 and stats["constants_folded"] >= 1


def test_backward_program_frees_saved_tensors_as_it_goes(no_fallback):
    """Dynamo wraps backward programs in torch._dynamo.disable; they must still take AOTAutograd's
    boxed inputs (no warning), so that each saved activation is freed after its last use rather
    than when the backward ends."""
    def f(x, weights):
        for w in weights:
            x = torch.tanh(x @ w)
        return x.sum()

    x = torch.randn(512, 512, device="neuron")  # 1 MiB per activation and per weight gradient
    weights = [torch.randn(512, 512, device="neuron", requires_grad=True) for _ in range(8)]
    compiled = torch.compile(f, backend="neuron")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            loss = compiled(x, weights)
            torch.neuron.synchronize()
            before = torch.neuron.memory_allocated()
            torch.neuron.reset_peak_memory_stats()
            loss.backward()
            torch.neuron.synchronize()
            peak_mib = (torch.neuron.max_memory_allocated() - before) / 2**20
            for w in weights:
                w.grad = None
    assert not [w for w in caught if "boxed" in str(w.message)]
    # 8 MiB of weight gradients plus 16 MiB of saved activations if none were freed early.
    assert peak_mib < 8 + 8


def test_native_executor_keeps_error_types(no_fallback):
    """An op failing inside a natively run graph raises the same exception type as in eager mode
    (here torch.OutOfMemoryError), naming the graph node when the executor called it; the
    device stays usable."""
    def f(x):
        return x + torch.ones(1 << 40, device=x.device).sum()

    x = torch.randn(4, device="neuron")
    compiled = torch.compile(f, backend="neuron")
    with pytest.raises(torch.OutOfMemoryError):
        compiled(x)  # the first call runs under an AOTAutograd dispatch mode, in Python
    with pytest.raises(torch.OutOfMemoryError, match="raised by node"):
        compiled(x)
    assert torchneuron.compile_stats()["graphs_native"] == 1
    torch.testing.assert_close((x * 2).cpu(), x.cpu() * 2)


def test_native_executor_computes_symbolic_sizes(no_fallback):
    """Dynamic shapes put Python integer arithmetic on sizes into the graphs; the native executor
    computes it, so that one compiled graph serves every size."""
    def f(x):
        return (torch.tanh(x).reshape(x.shape[0] * x.shape[1], -1) * 2).sum(0) + x.shape[1] // 2 - x.shape[0] % 3

    compiled = torch.compile(f, backend="neuron", dynamic=True)
    for batch, seq in [(2, 5), (3, 7), (7, 4)]:
        x = torch.randn(batch, seq, 6, device="neuron", requires_grad=True)
        reference = x.detach().cpu().requires_grad_()
        got = compiled(x)
        expected = f(reference)
        torch.testing.assert_close(got.cpu(), expected)
        got.sum().backward()
        expected.sum().backward()
        torch.testing.assert_close(x.grad.cpu(), reference.grad)
    stats = torchneuron.compile_stats()
    assert stats["graphs_compiled"] == 2 and stats["graphs_native"] == 2  # forward and backward, once


@pytest.mark.parametrize("native", [True, False], ids=["native", "python_loop"])
def test_reused_buffer_has_the_layout_its_value_needs(native, monkeypatch, no_fallback):
    """A kernel output planned into a dying input's buffer (same sizes and dtype) whose eager
    layout differs gets a fresh buffer: `z` is row-major where `y` was permuted, and the view
    after it relies on that (found by the sweep's compiled backward of afmoe and aimv2)."""
    from torchneuron.compiler import program

    monkeypatch.setattr(program, "native_executor", native)

    def f(x, w1, w2):
        y = x.permute(0, 2, 1) * 2
        m = torch.mm(w1, w2)
        z = (y * m).contiguous()
        return (z.view(4, 128) + 1,)

    torch._dynamo.reset()
    x, w1, w2 = torch.randn(4, 8, 16), torch.randn(16, 4), torch.randn(4, 8)
    got = torch.compile(f, backend="neuron")(x.to("neuron"), w1.to("neuron"), w2.to("neuron"))
    for a, e in zip(got, f(x, w1, w2)):
        torch.testing.assert_close(a.cpu(), e, atol=1e-5, rtol=1e-5)
    assert torchneuron.compile_stats()["kernels_generated"] >= 2


def test_number_passed_for_a_tensor_argument_of_an_eager_call(no_fallback):
    """floor_divide(x, 2) reaches the graph as aten.div.Tensor_mode(x, 2): a Python number where
    the schema takes a Tensor. The native executor passes it as a wrapped number (as Python's
    argument parser does), so the graph compiles instead of running eagerly, and integer and
    float inputs keep their result dtypes."""
    def f(x):
        return torch.floor_divide(x, 2) + 1

    for x in (torch.randn(8, 8) * 10, torch.randint(-20, 20, (8, 8))):
        torch._dynamo.reset()
        torchneuron.reset_compile_stats()
        got = torch.compile(f, backend="neuron")(x.to("neuron"))
        expected = f(x)
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got.cpu(), expected)
        stats = torchneuron.compile_stats()
        assert stats["graphs_eager"] == 0 and stats["graphs_native"] == 1, stats
