"""torch.compile(backend="neuron", mode="reduce-overhead"): compiled programs replayed through
graphs give what the default mode gives (and CPU PyTorch), recapture for new shapes, write
mutated inputs back, and fall back to plain compiled execution with a warning where capture is
impossible."""

import copy
import warnings

import pytest
import torch

from torchneuron.compiler.graphed_program import GraphedProgram

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def chain(x, y):
    for _ in range(5):
        x = torch.tanh(x * 1.1 + y) - 0.25
    return x


def test_reduce_overhead_matches_default_mode_and_cpu(no_fallback, monkeypatch):
    plain_runs = []
    run_plain = GraphedProgram._run_plain
    monkeypatch.setattr(GraphedProgram, "_run_plain", lambda self, inputs: plain_runs.append(1) or run_plain(self, inputs))
    default = torch.compile(chain, backend="neuron")
    graphed = torch.compile(chain, backend="neuron", mode="reduce-overhead")
    for shape in ((64,), (64,), (64,), (3, 5), (3, 5), (3, 5)):  # warm-up, capture, replay; then a new shape
        x, y = torch.randn(*shape), torch.randn(*shape)
        got = graphed(x.to("neuron"), y.to("neuron"))
        assert torch.equal(got.cpu(), default(x.to("neuron"), y.to("neuron")).cpu())
        torch.testing.assert_close(got.cpu(), chain(x, y))
    assert len(plain_runs) == 2  # one warm-up per shape; every other call was a capture or a replay


def test_outputs_survive_the_next_replay(no_fallback):
    graphed = torch.compile(lambda x: x * 2 + 1, backend="neuron", mode="reduce-overhead")
    outs = [graphed(torch.full((4,), float(i), device="neuron")) for i in range(4)]
    for i, out in enumerate(outs):
        assert torch.equal(out.cpu(), torch.full((4,), 2.0 * i + 1))


def test_input_mutation_reaches_the_callers_tensor(no_fallback):
    def f(x, y):
        x.add_(y)
        return x.sum()

    graphed = torch.compile(f, backend="neuron", mode="reduce-overhead")
    for i in range(4):
        x = torch.full((8,), float(i), device="neuron")  # new memory each call: copied into the graph's
        total = graphed(x, torch.ones(8, device="neuron"))
        assert torch.equal(x.cpu(), torch.full((8,), i + 1.0))
        assert total.item() == 8 * (i + 1.0)


def test_training_step_matches_default_mode(no_fallback):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 1)).to("neuron")
    models = {mode: copy.deepcopy(model) for mode in ("default", "reduce-overhead")}
    compiled = {mode: torch.compile(m, backend="neuron", mode=mode) for mode, m in models.items()}
    opts = {mode: torch.optim.SGD(m.parameters(), lr=0.05) for mode, m in models.items()}
    for step in range(5):
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(step)).to("neuron")
        for mode in models:
            opts[mode].zero_grad()
            compiled[mode](x).square().mean().backward()
            opts[mode].step()
        for p, q in zip(models["default"].parameters(), models["reduce-overhead"].parameters()):
            assert torch.equal(p.detach().cpu(), q.detach().cpu())


def test_a_cpu_input_falls_back_with_a_warning():
    def f(x, scale):
        return x * scale

    graphed = torch.compile(f, backend="neuron", mode="reduce-overhead")
    x = torch.randn(16, device="neuron")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = [graphed(x, torch.tensor(float(i))) for i in range(3)]
    assert any("without graph capture" in str(w.message) for w in caught)
    for i, out in enumerate(outs):
        assert torch.equal(out.cpu(), x.cpu() * i)
