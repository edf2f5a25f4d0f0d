"""torch.compile(backend="neuron") of models in training: the three training models of the eager
tests track eager when compiled, and train bitwise the same on the native executor and the
Python step loop; batch norms update their running statistics in place; the gradient of an
unpacked tensor runs as one stack."""

import copy
import os
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torchneuron

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from tiny_gpt import TinyGPT, train_step  # noqa: E402
from test_training import cnn_batches, mlp_step as classifier_step, small_cnn  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def run_training(model, batches, step, compiled, steps, device="neuron"):
    model = copy.deepcopy(model).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    forward = torch.compile(model, backend="neuron") if compiled else model
    return [step(forward, optimizer, [t.to(device) for t in batch]).item() for batch in batches[:steps]]


def test_compiled_training_tracks_eager():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    mlp = nn.Sequential(nn.Linear(10, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 3))
    rule = torch.randn(10, 3, generator=g)  # learnable labels
    inputs = [torch.randn(16, 10, generator=g) for _ in range(20)]
    mlp_batches = [(x, (x @ rule).argmax(dim=1)) for x in inputs]
    gpt = TinyGPT(vocab=40, context=16, width=32, heads=4, layers=2, dropout=0.0)
    gpt_batches = [(torch.randint(0, 40, (8, 17), generator=g),) for _ in range(20)]
    gpt_step = lambda m, opt, batch: train_step(m, opt, batch[0])
    cases = [(mlp, mlp_batches, classifier_step, True), (small_cnn(dropout=0.0), cnn_batches(20), classifier_step, False),
             (gpt, gpt_batches, gpt_step, False)]  # random tokens: nothing to learn in 20 steps
    for model, batches, step, learns_in_20_steps in cases:
        eager = run_training(model, batches, step, compiled=False, steps=20, device="cpu")  # CPU PyTorch
        compiled = run_training(model, batches, step, compiled=True, steps=20)
        assert max(abs(a - b) for a, b in zip(eager, compiled)) < 1e-4
        if learns_in_20_steps:
            assert sum(compiled[-5:]) < sum(compiled[:5])
    stats = torchneuron.compile_stats()
    assert stats["graphs_eager"] == 0 and stats["graphs_compiled"] >= 6  # forward and backward each
    assert stats["graphs_native"] == stats["graphs_compiled"]


def test_native_executor_matches_python_step_loop(monkeypatch):
    """Both executors launch the same kernels in the same order: losses, parameters and batch-norm
    buffers agree bitwise after three training steps."""
    from torchneuron.compiler import program

    torch.manual_seed(0)
    gpt = TinyGPT(vocab=40, context=16, width=32, heads=4, layers=2, dropout=0.0)
    g = torch.Generator().manual_seed(1)
    gpt_batches = [(torch.randint(0, 40, (8, 17), generator=g),) for _ in range(3)]
    gpt_step = lambda m, opt, batch: train_step(m, opt, batch[0])
    for model, batches, step in [(small_cnn(dropout=0.0), cnn_batches(3), classifier_step), (gpt, gpt_batches, gpt_step)]:
        results = []
        for native in (True, False):
            monkeypatch.setattr(program, "native_executor", native)
            torch._dynamo.reset()
            torchneuron.reset_compile_stats()
            trained = copy.deepcopy(model).to("neuron")
            optimizer = torch.optim.AdamW(trained.parameters(), lr=3e-3)
            forward = torch.compile(trained, backend="neuron")
            losses = [step(forward, optimizer, [t.to("neuron") for t in batch]).item() for batch in batches]
            stats = torchneuron.compile_stats()
            assert stats["graphs_native"] == (stats["graphs_compiled"] if native else 0) and stats["graphs_compiled"] >= 2
            results.append((losses, {k: v.cpu() for k, v in trained.state_dict().items()}))
        (native_losses, native_state), (python_losses, python_state) = results
        assert native_losses == python_losses
        for name, value in native_state.items():
            assert torch.equal(value, python_state[name]), name


def test_batch_norm_buffers_update(monkeypatch):
    """Training batch norms update their running statistics in place (native_batch_norm, as
    eager mode does) instead of functionalization's clones and write-back copies, and the
    buffers track eager mode's."""
    from torchneuron.compiler import lowering

    rewrites = []
    rewrite = lowering.update_batch_norm_stats_in_place
    monkeypatch.setattr(lowering, "update_batch_norm_stats_in_place", lambda gm: rewrites.append(rewrite(gm)) or rewrites[-1])
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Linear(5, 5), nn.BatchNorm1d(5))
    eager, compiled = copy.deepcopy(model), copy.deepcopy(model).to("neuron")  # eager: CPU PyTorch
    run = torch.compile(compiled, backend="neuron")
    for _ in range(3):
        x = torch.randn(8, 6, requires_grad=True)
        got, expected = run(x.detach().to("neuron").requires_grad_()), eager(x)
        torch.testing.assert_close(got.cpu(), expected)
        got.sum().backward()
    for index in (1, 4):
        torch.testing.assert_close(compiled[index].running_mean.cpu(), eager[index].running_mean)
        torch.testing.assert_close(compiled[index].running_var.cpu(), eager[index].running_var)
        assert compiled[index].num_batches_tracked.item() == 3
    assert rewrites[0] == 2  # the forward graph's two batch norms


@pytest.mark.parametrize("packed", ["attention", "gated"])
def test_unpacked_tensor_gradient_runs_as_one_stack(packed, monkeypatch, no_fallback):
    """q, k, v = qkv.unbind(0): the decomposed gradient (a zero-filled where per slice, summed,
    then copied to the layout the weight-gradient mm reads) becomes one cat into that layout."""
    import torchneuron.compiler.lowering as lowering

    rewritten = []
    original = lowering.stack_select_backward_sums
    monkeypatch.setattr(lowering, "stack_select_backward_sums", lambda gm: rewritten.append(original(gm)))

    class Packed(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(32, 96)

        def forward(self, x):
            b, t, c = x.shape
            if packed == "attention":
                q, k, v = self.qkv(x).view(b, t, 3, 4, c // 4).permute(2, 0, 3, 1, 4)
                return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, c)
            q, k, v = self.qkv(x).view(b, t, 3, c).permute(2, 0, 1, 3)
            return q * torch.sigmoid(k) + v

    torch.manual_seed(0)
    model = Packed()
    x = torch.randn(2, 8, 32)
    reference = model(x)
    reference.square().sum().backward()
    device_model = copy.deepcopy(model).to("neuron")
    for p in device_model.parameters():
        p.grad = None
    out = torch.compile(device_model, backend="neuron")(x.to("neuron"))
    out.square().sum().backward()
    torch.testing.assert_close(out.cpu(), reference, rtol=1e-4, atol=1e-5)
    for p, ref in zip(device_model.parameters(), model.parameters()):
        torch.testing.assert_close(p.grad.cpu(), ref.grad, rtol=1e-4, atol=1e-5)
    assert rewritten == [0, 1]  # nothing in the forward graph, the one sum in the backward
