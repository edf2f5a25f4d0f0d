"""End-to-end training on neuron against the same model trained on CPU, each with no CPU
fallback: an MLP classifier, a small CNN (convolution, batch norm, pooling, upsampling,
dropout), the tiny GPT of examples/ (embeddings, causal attention, layer norm, GELU, AdamW,
gradient clipping), and a Fourier neural operator (complex weights and products)."""

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

# Float32 runs of 50 steps agree to this absolute loss difference: kernels round differently
# from CPU PyTorch's (sums accumulate in double, BLAS instead of MKL), and AdamW amplifies it.
LOSS_TOLERANCE = 1e-3


def run_model(model, batches, step):
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    return [step(model, optimizer, batch).item() for batch in batches]


def run(model, device, batches, step):
    return run_model(copy.deepcopy(model).to(device), [[t.to(device) for t in batch] for batch in batches], step)


def assert_trains_like_cpu(model, batches, step):
    """Trains a copy of `model` on CPU and one on neuron: no fallback, the losses within
    LOSS_TOLERANCE of CPU's at every step, and the neuron loss falling."""
    cpu = run(model, "cpu", batches, step)
    torchneuron.reset_fallback_report()
    neuron = run(model, "neuron", batches, step)
    assert torchneuron.fallback_report() == {}
    assert max(abs(a - b) for a, b in zip(cpu, neuron)) < LOSS_TOLERANCE
    assert neuron[-1] < neuron[0]


def mlp_step(model, optimizer, batch):
    x, y = batch
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


def test_mlp_classifier_tracks_cpu_without_fallback():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 3))
    g = torch.Generator().manual_seed(1)
    rule = torch.randn(10, 3, generator=g)  # learnable labels: the argmax of a fixed projection
    inputs = [torch.randn(16, 10, generator=g) for _ in range(50)]
    batches = [(x, (x @ rule).argmax(dim=1)) for x in inputs]
    assert_trains_like_cpu(model, batches, mlp_step)


def test_tiny_gpt_tracks_cpu_without_fallback():
    torch.manual_seed(0)
    model = TinyGPT(vocab=40, context=16, width=32, heads=4, layers=2, dropout=0.0)
    g = torch.Generator().manual_seed(2)
    batches = [(torch.randint(0, 40, (8, 17), generator=g),) for _ in range(50)]
    assert_trains_like_cpu(model, batches, lambda m, opt, batch: train_step(m, opt, batch[0]))


def test_tiny_gpt_with_dropout_trains_on_device_rng():
    torch.manual_seed(0)
    model = TinyGPT(vocab=40, context=16, width=32, heads=4, layers=1, dropout=0.1).to("neuron")
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    tokens = torch.randint(0, 40, (8, 17), device="neuron")
    losses = [train_step(model, optimizer, tokens).item() for _ in range(30)]
    assert losses[-1] < losses[0] - 0.5


def small_cnn(dropout):
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AvgPool2d(2),
        nn.Upsample(scale_factor=2, mode="bilinear"), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Dropout(dropout), nn.Linear(8, 3))


def cnn_batches(count):
    g = torch.Generator().manual_seed(3)
    images = [torch.randn(8, 1, 8, 8, generator=g) for _ in range(count)]
    # Learnable labels: which image quadrant is brightest (of three).
    return [(x, torch.stack([x[:, 0, :4, :4].sum((1, 2)), x[:, 0, :4, 4:].sum((1, 2)), x[:, 0, 4:, :].sum((1, 2)) / 2], 1).argmax(1))
            for x in images]


def test_small_cnn_tracks_cpu_without_fallback():
    # Dropout with p=0 still runs its kernel; p>0 draws different masks on each device.
    torch.manual_seed(0)
    model = small_cnn(dropout=0.0)
    batches = cnn_batches(20)
    cpu_model = copy.deepcopy(model)
    cpu = run_model(cpu_model, batches, mlp_step)
    torchneuron.reset_fallback_report()
    neuron_model = copy.deepcopy(model).to("neuron")
    neuron = run_model(neuron_model, [[t.to("neuron") for t in b] for b in batches], mlp_step)
    assert torchneuron.fallback_report() == {}
    assert max(abs(a - b) for a, b in zip(cpu, neuron)) < LOSS_TOLERANCE
    # Batch norm's running statistics follow CPU; eval mode (running statistics) matches the
    # same weights on CPU.
    torch.testing.assert_close(neuron_model[1].running_var.cpu(), cpu_model[1].running_var, atol=1e-4, rtol=1e-4)
    same_weights = copy.deepcopy(neuron_model).cpu().eval()
    probe = batches[0][0]
    torch.testing.assert_close(neuron_model.eval()(probe.to("neuron")).cpu(), same_weights(probe), atol=1e-5, rtol=1e-5)


def test_small_cnn_with_dropout_trains_without_fallback():
    torch.manual_seed(0)
    batches = [[t.to("neuron") for t in b] for b in cnn_batches(10)]
    torchneuron.reset_fallback_report()
    model = small_cnn(dropout=0.25).to("neuron")
    losses = run_model(model, batches * 6, mlp_step)
    assert torchneuron.fallback_report() == {}
    assert sum(losses[-10:]) < sum(losses[:10])


class SpectralConv2d(nn.Module):
    """A Fourier layer: the lowest modes of the 2-D real FFT times complex weights, back."""

    def __init__(self, channels, modes):
        super().__init__()
        self.modes = modes
        scale = 1 / channels**2
        self.low = nn.Parameter(scale * torch.rand(channels, channels, modes, modes, dtype=torch.cfloat))
        self.high = nn.Parameter(scale * torch.rand(channels, channels, modes, modes, dtype=torch.cfloat))

    def forward(self, x):
        b, c, h, w = x.shape
        m = self.modes
        x_ft = torch.fft.rfft2(x)
        out_ft = torch.zeros(b, c, h, w // 2 + 1, dtype=torch.cfloat, device=x.device)
        out_ft[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, :m, :m], self.low)
        out_ft[:, :, -m:, :m] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, -m:, :m], self.high)
        return torch.fft.irfft2(out_ft, s=(h, w))


class FourierNeuralOperator(nn.Module):
    def __init__(self, channels=12, modes=5):
        super().__init__()
        self.lift, self.proj = nn.Conv2d(3, channels, 1), nn.Conv2d(channels, 1, 1)
        self.spectral = nn.ModuleList([SpectralConv2d(channels, modes) for _ in range(2)])
        self.pointwise = nn.ModuleList([nn.Conv2d(channels, channels, 1) for _ in range(2)])

    def forward(self, x):
        x = self.lift(x)
        for spectral, pointwise in zip(self.spectral, self.pointwise):
            x = F.gelu(spectral(x) + pointwise(x))
        return self.proj(x)


def regression_step(model, optimizer, batch):
    x, y = batch
    loss = (model(x) - y).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


def test_fourier_neural_operator_tracks_cpu_without_fallback():
    # Complex einsums (cgemm), their conjugated backward products, complex slices and the FFTs.
    torch.manual_seed(0)
    model = FourierNeuralOperator()
    g = torch.Generator().manual_seed(2)
    inputs = [torch.randn(4, 3, 24, 24, generator=g) for _ in range(8)]
    batches = [(x, F.avg_pool2d(x.sum(1, keepdim=True), 3, 1, 1)) for x in inputs]  # a learnable target
    assert_trains_like_cpu(model, batches, regression_step)


@pytest.mark.parametrize("blocking", [False, True])
def test_embedding_index_error_names_the_op(blocking):
    torchneuron._C._set_launch_blocking(blocking)
    try:
        embedding = nn.Embedding(5, 3).to("neuron")
        bad = torch.tensor([[0, 9]], device="neuron")
        if blocking:
            with pytest.raises(torch.AcceleratorError, match=r"aten::index_select.*index 9 is out of range"):
                embedding(bad)
        else:
            out = embedding(bad)
            with pytest.raises(torch.AcceleratorError, match=r"aten::index_select.*index 9 is out of range"):
                out.sum().item()
    finally:
        torchneuron._C._set_launch_blocking(False)
