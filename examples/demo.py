"""Trains a small MLP on the neuron device next to the same model on the CPU, then reports
which ATen operators ran natively on neuron and which fell back to the CPU."""

import copy
import time
import warnings

import torch
from torch import nn

import torchneuron

STEPS = 60


def make_data(generator):
    """A two-class spiral: 512 points, 2 features."""
    n = 256
    t = torch.linspace(0.0, 3.0 * torch.pi, n)
    a = torch.stack([t * torch.cos(t), t * torch.sin(t)], dim=1) / 10
    b = -a
    x = torch.cat([a, b]) + 0.05 * torch.randn(2 * n, 2, generator=generator)
    y = torch.cat([torch.zeros(n, dtype=torch.long), torch.ones(n, dtype=torch.long)])
    return x, y


def train(device, model, x, y):
    """Runs STEPS of Adam on `device`; returns the losses and the wall time."""
    model = model.to(device)
    x, y = x.to(device), y.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    start = time.perf_counter()
    for step in range(STEPS):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        bar = "#" * ((step + 1) * 30 // STEPS)
        print(f"\r  {device:<6} [{bar:<30}] step {step + 1:>2}/{STEPS} loss {losses[-1]:.4f}", end="")
    print()
    return losses, time.perf_counter() - start


def main():
    """Runs the demo."""
    warnings.simplefilter("ignore")  # the fallback report below lists every fallback
    generator = torch.Generator().manual_seed(0)
    x, y = make_data(generator)
    torch.manual_seed(0)
    reference = nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2))
    neuron_model = copy.deepcopy(reference)

    print(f"torchneuron demo: MLP on a spiral, {STEPS} Adam steps, "
          f"{torch.neuron.device_count()} neuron devices ({torch.neuron.get_device_name()})")
    cpu_losses, cpu_time = train("cpu", reference, x, y)
    torchneuron.reset_fallback_report()
    neuron_losses, neuron_time = train("neuron", neuron_model, x, y)
    torch.neuron.synchronize()

    diff = max(abs(a - b) for a, b in zip(cpu_losses, neuron_losses))
    print(f"\nfinal loss: neuron {neuron_losses[-1]:.5f}  cpu {cpu_losses[-1]:.5f}  "
          f"(largest per-step difference {diff:.2e})")
    print(f"time: neuron {neuron_time:.2f} s  cpu {cpu_time:.2f} s")
    print(f"device memory: {torch.neuron.max_memory_allocated() / 2**20:.2f} MiB peak allocated")

    report = torchneuron.fallback_report()
    native = torchneuron.native_ops()
    print(f"\nnative neuron kernels registered ({len(native)}): {', '.join(n[6:] for n in native)}")
    print(f"\nCPU fallbacks during the neuron run: {len(report)} ops, {sum(report.values())} calls")
    for name, calls in sorted(report.items(), key=lambda item: -item[1]):
        print(f"  {calls:>6}  {name}")
    if diff > 1e-4:
        raise SystemExit(f"neuron and CPU losses differ by {diff:.2e} (> 1e-4)")


if __name__ == "__main__":
    main()
