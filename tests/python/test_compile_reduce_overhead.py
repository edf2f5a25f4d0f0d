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


def _count_captures(monkeypatch):
    from torchneuron.compiler import graphed_program

    counts = {"captures": 0, "replays": 0}
    init, run = graphed_program._Capture.__init__, graphed_program._Capture.run

    def counting_init(self, *args):
        counts["captures"] += 1
        init(self, *args)

    def counting_run(self, inputs):
        counts["replays"] += 1
        return run(self, inputs)

    monkeypatch.setattr(graphed_program._Capture, "__init__", counting_init)
    monkeypatch.setattr(graphed_program._Capture, "run", counting_run)
    return counts


def test_a_held_output_is_never_overwritten_by_the_next_replay(no_fallback, monkeypatch):
    counts = _count_captures(monkeypatch)
    x = torch.zeros(6, device="neuron")  # read in place: every call can replay the same graph
    graphed = torch.compile(lambda t: t * 3 - 1, backend="neuron", mode="reduce-overhead")
    held = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(12):
            x.fill_(float(i))
            out = graphed(x)
            held.append(out if i % 2 else out[1:4])  # a view holds the graph's memory too
    assert sum("still alive" in str(w.message) for w in caught) == 1
    for i, out in enumerate(held):
        want = torch.full((6,), 3.0 * i - 1)
        assert torch.equal(out.cpu(), want if i % 2 else want[1:4])
    assert counts["captures"] == 8  # each held output moved the next call to a new capture, up to the limit


def test_released_outputs_alias_the_graphs_memory(no_fallback, monkeypatch):
    counts = _count_captures(monkeypatch)
    x = torch.randn(32, device="neuron")
    graphed = torch.compile(lambda t: (t * t).sum(0, keepdim=True) + t, backend="neuron", mode="reduce-overhead")
    ptrs = []
    for _ in range(6):
        out = graphed(x)
        torch.testing.assert_close(out.cpu(), (x * x).sum(0, keepdim=True).cpu() + x.cpu())
        ptrs.append(out.data_ptr())
        del out
    assert counts == {"captures": 1, "replays": 5}
    assert len(set(ptrs[1:])) == 1  # no copy out: the replays return the graph's output memory


def test_an_output_held_in_a_loop_alternates_between_two_captures(no_fallback, monkeypatch):
    counts = _count_captures(monkeypatch)
    x = torch.zeros(5, device="neuron")
    graphed = torch.compile(lambda t: t.exp() + 1, backend="neuron", mode="reduce-overhead")
    out = None
    for i in range(10):
        x.fill_(i / 10)
        new = graphed(x)  # `out`, the previous call's output, is alive during this call
        if out is not None:
            assert torch.equal(out.cpu(), torch.full((5,), (i - 1) / 10).exp() + 1)
        out = new
    assert counts["captures"] == 2 and counts["replays"] == 9


def test_two_forwards_before_their_backwards_match_default_mode(no_fallback, monkeypatch):
    """Gradient accumulation: the first forward's saved activations are alive (its backward has
    not run) when the second forward runs, so a replay must not overwrite them."""
    counts = _count_captures(monkeypatch)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2)).to("neuron")
    models = {mode: copy.deepcopy(model) for mode in ("default", "reduce-overhead")}
    compiled = {mode: torch.compile(m, backend="neuron", mode=mode) for mode, m in models.items()}
    opts = {mode: torch.optim.SGD(m.parameters(), lr=0.1) for mode, m in models.items()}
    xs = [torch.randn(4, 8, generator=torch.Generator().manual_seed(i)).to("neuron") for i in range(2)]
    for _ in range(5):
        for mode in models:
            opts[mode].zero_grad()
            losses = [compiled[mode](x).square().mean() for x in xs]
            for loss in losses:
                loss.backward()
            opts[mode].step()
        for p, q in zip(models["default"].parameters(), models["reduce-overhead"].parameters()):
            assert torch.equal(p.detach().cpu(), q.detach().cpu())
    assert counts["replays"] > counts["captures"]


def test_a_kept_gradient_survives_the_next_backward(no_fallback):
    """param.grad may be the backward graph's output memory; a user who keeps it past
    zero_grad(set_to_none=True) still sees their step's gradient."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3).to("neuron")
    reference = copy.deepcopy(model)
    graphed = torch.compile(model, backend="neuron", mode="reduce-overhead")
    kept, expected = [], []
    for step in range(5):
        x = torch.randn(2, 4, generator=torch.Generator().manual_seed(step)).to("neuron")
        model.zero_grad(set_to_none=True)
        graphed(x).sum().backward()
        kept.append(model.weight.grad)
        reference.zero_grad(set_to_none=True)
        reference(x).sum().backward()
        expected.append(reference.weight.grad.cpu())
    for got, want in zip(kept, expected):
        assert torch.equal(got.cpu(), want)


def test_training_reads_saved_activations_in_place(no_fallback, monkeypatch):
    """Steady state: the forward and the backward each replay one capture, and the backward's
    inputs that are the forward's outputs are read where the forward left them, not copied."""
    from torchneuron.compiler import graphed_program

    counts = _count_captures(monkeypatch)
    copies = []
    run = graphed_program._Capture.run
    monkeypatch.setattr(graphed_program._Capture, "run", lambda self, inputs: copies.append(
        sum(p is None and isinstance(x, torch.Tensor) for x, p in zip(inputs, self.stable_ptrs))) or run(self, inputs))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.Linear(32, 8), torch.nn.GELU(),
                                torch.nn.Linear(8, 1)).to("neuron")
    graphed = torch.compile(model, backend="neuron", mode="reduce-overhead")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 8, device="neuron")
    for _ in range(6):
        opt.zero_grad()
        graphed(x).square().mean().backward()
        opt.step()
    assert counts["captures"] == 2  # one forward, one backward
    assert max(copies[-2:]) <= 1  # at most the incoming gradient is copied in
