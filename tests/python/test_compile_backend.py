"""torch.compile(backend="neuron") as a Dynamo backend: graph breaks and no_grad inference,
generator state calls kept out of graphs, dynamic sizes without recompiling, the eager fallback
with one warning when the system compiler fails, torch.compile's modes and options, the
backend's registration, and the conformance tool's compile mode."""

import pytest
import torch

import torchneuron

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def test_graph_break_and_no_grad_inference(no_fallback):
    def f(x):
        y = torch.relu(x) + 1
        print("graph break")  # Dynamo splits the function here
        return y * y

    x = torch.randn(4, 4, device="neuron")
    with torch.no_grad():
        got = torch.compile(f, backend="neuron")(x)
    torch.testing.assert_close(got.cpu(), ((torch.relu(x) + 1) ** 2).cpu())
    assert torchneuron.compile_stats()["graphs_compiled"] == 2


def test_generator_state_calls_break_the_graph_and_run_eagerly(no_fallback):
    """torch.neuron's seed and state calls stay out of graphs, as torch.cuda's do: AOTAutograd
    would drop them, so the numbers drawn after them would differ from eager."""
    from torch.testing._utils import wrapper_set_seed

    def f(x):
        state = torch.neuron.get_rng_state()
        torch.neuron.manual_seed(7)
        drawn = x * torch.rand(x.shape, device=x.device)
        torch.neuron.set_rng_state(state)
        return drawn, x.sum()

    x = torch.randn(8, device="neuron")
    # OpInfo's seeded wrapper reads and restores generator states under no_dispatch(). (First:
    # once Dynamo has broken a graph inside these functions it skips them from then on.)
    item = torch.compile(lambda t: wrapper_set_seed(torch.Tensor.item, t), backend="neuron")
    assert item(x[3]) == x.cpu()[3].item()
    torch.neuron.manual_seed(1)
    expected = f(x)
    state_after = torch.neuron.get_rng_state()
    torch.neuron.manual_seed(1)
    got = torch.compile(f, backend="neuron")(x)
    torch.testing.assert_close(got[0].cpu(), expected[0].cpu(), rtol=0, atol=0)
    torch.testing.assert_close(got[1].cpu(), x.cpu().sum())
    assert torch.equal(torch.neuron.get_rng_state(), state_after)


def test_dynamic_sizes_compile_once(no_fallback):
    def f(x, y):
        return torch.tanh(x) * y + x

    compiled = torch.compile(f, backend="neuron", dynamic=True)
    for batch, seq in [(2, 5), (3, 7), (8, 11)]:
        x, y = torch.randn(batch, seq, 4), torch.randn(seq, 4)
        torch.testing.assert_close(compiled(x.to("neuron"), y.to("neuron")).cpu(), f(x, y))  # CPU PyTorch
    assert torchneuron.compile_stats()["graphs_compiled"] == 1


def test_compiler_failure_falls_back_to_eager_with_a_warning(monkeypatch, no_fallback):
    monkeypatch.setenv("CXX", "/bin/false")
    x = torch.randn(8, device="neuron")
    with pytest.warns(UserWarning, match="running a graph of .* eagerly: RuntimeError: neuron compiler: the system compiler failed"):
        got = torch.compile(lambda t: torch.cos(t) + 1, backend="neuron")(x)
    torch.testing.assert_close(got.cpu(), (torch.cos(x) + 1).cpu())
    assert torchneuron.compile_stats()["graphs_eager"] == 1


def test_modes_compile_and_unknown_modes_and_options_are_refused(no_fallback):
    x = torch.randn(8, device="neuron")
    for mode in ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        torch._dynamo.reset()
        got = torch.compile(lambda t: torch.sin(t) * 2, backend="neuron", mode=mode)(x)
        torch.testing.assert_close(got.cpu(), (torch.sin(x) * 2).cpu())
    torch._dynamo.reset()
    with pytest.raises(Exception, match="unknown mode 'fastest'; the modes are default, reduce-overhead"):
        torch.compile(lambda t: t + 1, backend="neuron", mode="fastest")(x)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="takes no options, got triton.cudagraphs"):
        torch.compile(lambda t: t + 2, backend="neuron", options={"triton.cudagraphs": True})(x)


def test_backend_is_registered_by_name_and_entry_point():
    from importlib.metadata import entry_points

    assert "neuron" in torch._dynamo.list_backends(exclude_tags=())
    names = [ep.name for ep in entry_points(group="torch_dynamo_backends")]
    assert "neuron" in names


def test_conformance_compile_mode_runs_samples_through_the_compiler():
    from torchneuron import conformance

    ops = conformance.all_ops(None)
    for name, dtype in [("add", "float32"), ("nn.functional.gelu", "bfloat16"), ("roll", "float32")]:
        entry = conformance.run_entry(ops[name], dtype, grad=True, compile_mode=True)
        assert entry["status"] == "pass", entry
    assert torchneuron.compile_stats()["graphs_compiled"] > 10  # one graph (or two) per sample
