"""torch.compile(backend="neuron")'s caches: the artifact cache (in memory, on disk, across
processes and concurrent builders) and the graph cache of AOTAutograd results (forward and
backward, a dynamic graph at other sizes, keys and refusals, a rejected graph, buffer updates)."""

import copy
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

import torchneuron
from conftest import REPO_ROOT, _clean_env, kill_group, start_in_new_group

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from tiny_gpt import TinyGPT, train_step  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def start_python(code, env, *args):
    return start_in_new_group([sys.executable, "-c", code, *args], cwd=REPO_ROOT, env=_clean_env(env),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(process, timeout=120):
    """The process's output; past `timeout` its whole process group is killed and the test fails."""
    try:
        return process.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        kill_group(process)
        pytest.fail(f"a subprocess ran past {timeout} s:\n{process.communicate()[0][-4000:]}")


def test_artifact_cache_in_memory_on_disk_and_across_processes(tmp_path):
    x = torch.randn(8, device="neuron")
    f = lambda t: torch.exp(t) * 2 - 1
    torch.compile(f, backend="neuron")(x)
    assert torchneuron.compile_stats()["artifacts_built"] == 1
    torch._dynamo.reset()
    torch.compile(f, backend="neuron")(x)
    assert torchneuron.compile_stats()["memory_cache_hits"] == 1
    script = textwrap.dedent("""
        import torch, torchneuron
        x = torch.randn(8, device="neuron")
        torch.compile(lambda t: torch.exp(t) * 2 - 1, backend="neuron")(x)
        s = torchneuron.compile_stats()
        print("built", s["artifacts_built"], "disk", s["disk_cache_hits"])
    """)
    later = start_python(script, {"TORCHNEURON_CACHE_DIR": os.environ["TORCHNEURON_CACHE_DIR"]})
    assert "built 0 disk 1" in finish(later)
    # Two processes building the same new artifact at once: one builds, the other waits and reuses.
    env = {"TORCHNEURON_CACHE_DIR": str(tmp_path / "shared")}
    racers = [start_python(script.replace("* 2 - 1", "* 3 - 1"), env) for _ in range(2)]
    outputs = [finish(r) for r in racers]
    assert all(r.returncode == 0 for r in racers), outputs
    assert sorted(o.strip().splitlines()[-1] for o in outputs) == ["built 0 disk 1", "built 1 disk 0"]


def gpt_training(compiled_forward, model, batches):
    """Losses and final gradients of a few AdamW steps."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = [train_step(compiled_forward, optimizer, batch).item() for batch in batches]
    return losses, [p.grad.cpu() for p in model.parameters()]


def test_graph_cache_reloads_forward_and_backward(tmp_path):
    """A second compile of the same graph (new Dynamo state, then a new process) reloads
    AOTAutograd's result from the graph cache instead of tracing again, and trains the same."""
    torch.manual_seed(0)
    gpt = TinyGPT(vocab=40, context=16, width=32, heads=4, layers=1, dropout=0.0)
    batches = [torch.randint(0, 40, (4, 17)) for _ in range(3)]
    cpu_model = copy.deepcopy(gpt)
    cpu_losses, cpu_grads = gpt_training(cpu_model, cpu_model, batches)
    runs = []
    for _ in range(2):
        torch._dynamo.reset()
        model = copy.deepcopy(gpt).to("neuron")
        runs.append(gpt_training(torch.compile(model, backend="neuron"), model, [b.to("neuron") for b in batches]))
    stats = torchneuron.compile_stats()
    assert stats["graph_cache_saves"] == 1 and stats["graph_cache_hits"] == 1
    assert stats["graphs_compiled"] == 4 and stats["graphs_eager"] == 0  # a hit still compiles both graphs
    (first_losses, first_grads), (hit_losses, hit_grads) = runs
    assert hit_losses == first_losses
    for a, b in zip(first_grads, hit_grads):
        assert torch.equal(a, b)
    assert max(abs(a - b) for a, b in zip(cpu_losses, hit_losses)) < 1e-4
    for a, b in zip(cpu_grads, hit_grads):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    script = textwrap.dedent(f"""
        import sys, torch, torchneuron
        sys.path.insert(0, {os.path.join(REPO_ROOT, "examples")!r})
        from tiny_gpt import TinyGPT, train_step
        torch.manual_seed(0)
        model = TinyGPT(vocab=40, context=16, width=32, heads=4, layers=1, dropout=0.0).to("neuron")
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        torch.manual_seed(1)
        tokens = torch.randint(0, 40, (4, 17)).to("neuron")
        loss = train_step(torch.compile(model, backend="neuron"), optimizer, tokens).item()
        s = torchneuron.compile_stats()
        print("hits", s["graph_cache_hits"], "saves", s["graph_cache_saves"], "built", s["artifacts_built"], "loss", loss)
    """)
    process = start_python(script, {"TORCHNEURON_CACHE_DIR": os.environ["TORCHNEURON_CACHE_DIR"]})
    output = finish(process)
    torch.manual_seed(0)
    model = TinyGPT(vocab=40, context=16, width=32, heads=4, layers=1, dropout=0.0)
    torch.manual_seed(1)
    tokens = torch.randint(0, 40, (4, 17))
    expected = train_step(model, torch.optim.AdamW(model.parameters(), lr=3e-3), tokens).item()  # on the CPU
    last = output.strip().splitlines()[-1].split()
    assert last[:6] == ["hits", "1", "saves", "0", "built", "0"], output
    assert abs(float(last[-1]) - expected) < 1e-4


def test_graph_cache_serves_a_dynamic_graph_at_other_sizes_in_a_new_process(tmp_path):
    """dynamic=True: the entry saved at one batch size is reloaded by a new process at another,
    forward and backward, and matches CPU PyTorch there."""
    script = textwrap.dedent("""
        import sys, torch, torchneuron
        from torch import nn
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
        x = torch.randn(int(sys.argv[1]), 16)
        expected = model(x)
        expected.square().sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        device_model = model.to("neuron")
        device_model.zero_grad()
        got = torch.compile(device_model, backend="neuron", dynamic=True)(x.to("neuron"))
        got.square().sum().backward()
        error = max([(got.detach().cpu() - expected.detach()).abs().max().item()]
                    + [(p.grad.cpu() - g).abs().max().item() for p, g in zip(device_model.parameters(), grads)])
        s = torchneuron.compile_stats()
        print("hits", s["graph_cache_hits"], "saves", s["graph_cache_saves"], "error", error)
    """)
    outputs = []
    for rows in (5, 9):
        process = start_python(script, {"TORCHNEURON_CACHE_DIR": str(tmp_path / "cache")}, str(rows))
        outputs.append(finish(process).strip().splitlines()[-1].split())
    assert outputs[0][:4] == ["hits", "0", "saves", "1"], outputs
    assert outputs[1][:4] == ["hits", "1", "saves", "0"], outputs
    assert all(float(out[-1]) < 1e-4 for out in outputs), outputs


def test_graph_cache_keys_and_refusals(tmp_path, caplog):
    """Grad mode, shapes and layouts are part of the key; one entry serves a dynamic graph at
    every size; graphs calling functions outside torch are not cached; an unreadable entry is a
    miss that is then overwritten."""
    from torchneuron.compiler import autograd_cache

    def f(x, w):
        return torch.tanh(x @ w) * 2

    x, w = torch.randn(6, 4, device="neuron"), torch.randn(4, 5, device="neuron", requires_grad=True)

    def compile_and_check(x, w, function=f, **options):
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(function, backend="neuron", **options)(x, w).detach().cpu(),
                                   function(x.cpu(), w.detach().cpu()))

    compile_and_check(x, w)
    with torch.no_grad():
        compile_and_check(x, w)
    compile_and_check(x.t().contiguous().t(), w)
    assert torchneuron.compile_stats()["graph_cache_saves"] == 3
    assert torchneuron.compile_stats()["graph_cache_hits"] == 0
    compile_and_check(x, w)
    assert torchneuron.compile_stats()["graph_cache_hits"] == 1
    compile_and_check(torch.randn(7, 4, device="neuron"), w, dynamic=True)
    assert torchneuron.compile_stats()["graph_cache_saves"] == 4
    compile_and_check(torch.randn(11, 4, device="neuron"), w, dynamic=True)
    assert torchneuron.compile_stats()["graph_cache_hits"] == 2

    @torch.compiler.allow_in_graph
    def outside_torch(t):
        return t + 1

    with caplog.at_level("DEBUG", logger="torchneuron.compiler.autograd_cache"):
        compile_and_check(x, w, function=lambda x, w: outside_torch(x) @ w)
    assert torchneuron.compile_stats()["graph_cache_saves"] == 4
    assert "not caching a graph of" in caplog.text and "outside_torch" in caplog.text
    entries = list((tmp_path / "cache").rglob("*.pkl"))
    assert len(entries) == 4
    for entry in entries:
        entry.write_bytes(b"not a pickle")
    autograd_cache._entries.clear()
    compile_and_check(x, w)
    stats = torchneuron.compile_stats()
    assert stats["graph_cache_hits"] == 2 and stats["graph_cache_saves"] == 5


def test_graph_cache_hit_of_a_rejected_graph_runs_it_eagerly(monkeypatch):
    """A graph reloaded from the graph cache that the compiler then rejects runs eagerly after
    the warning, as on a miss."""
    from torchneuron.compiler import lowering

    f = lambda t: torch.sin(t) * 3 + 1
    x = torch.randn(5, device="neuron")
    torch.compile(f, backend="neuron")(x)
    torch._dynamo.reset()

    def reject(gm, **options):
        raise RuntimeError("lowering rejected this graph")

    monkeypatch.setattr(lowering, "lower", reject)
    with pytest.warns(UserWarning, match="eagerly: RuntimeError: lowering rejected this graph"):
        got = torch.compile(f, backend="neuron")(x)
    torch.testing.assert_close(got.cpu(), f(x.cpu()))
    stats = torchneuron.compile_stats()
    assert stats["graph_cache_hits"] == 1 and stats["graphs_eager"] == 1


def test_graph_cache_keeps_batch_norm_buffer_updates():
    """Input mutations (running statistics) are replayed by AOTAutograd's wrappers on a hit."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5), nn.BatchNorm1d(5), nn.ReLU())
    inputs = [torch.randn(8, 6) for _ in range(2)]
    reference = copy.deepcopy(model)  # on the CPU
    for x in inputs:
        reference(x).sum().backward()
    compiled = []
    for _ in range(2):
        torch._dynamo.reset()
        compiled.append(copy.deepcopy(model).to("neuron"))
        run = torch.compile(compiled[-1], backend="neuron")
        for x in inputs:
            run(x.to("neuron").requires_grad_()).sum().backward()
    assert torchneuron.compile_stats()["graph_cache_hits"] == 1
    for got in compiled:
        torch.testing.assert_close(got[1].running_mean.cpu(), reference[1].running_mean)
        torch.testing.assert_close(got[1].running_var.cpu(), reference[1].running_var)
        torch.testing.assert_close(got[0].weight.grad.cpu(), reference[0].weight.grad)
        assert got[1].num_batches_tracked.item() == 2
