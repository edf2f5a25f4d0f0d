"""torch.compile benchmarks: one training step of the tiny GPT and of a ResNet-style CNN, run
as CPU eager, neuron eager, neuron compiled (backend="neuron") and CPU compiled (Inductor), in
one run, printed as ratios; plus the neuron compiler's cold compile (new process, empty cache)
and warm compile (new process, cache filled) times for the tiny GPT."""

import copy
import os
import subprocess
import sys
import tempfile
import time
import warnings

import torch
import torch.nn.functional as F
from torch import nn

import torchneuron

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, HERE)
from bench_kernels import seconds_per_call  # noqa: E402
from tiny_gpt import TinyGPT, train_step  # noqa: E402

warnings.simplefilter("ignore")


class Block(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(y)))


def resnet():
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                         Block(16), Block(16), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))


def cnn_step(model, optimizer, batch):
    x, y = batch
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


def gpt_case():
    torch.manual_seed(0)
    model = TinyGPT(vocab=96, context=64, width=64, heads=4, layers=2, dropout=0.0)
    batch = (torch.randint(0, 96, (16, 65)),)
    return model, batch, lambda m, opt, b: train_step(m, opt, b[0])


def cnn_case():
    torch.manual_seed(0)
    return resnet(), (torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))), cnn_step


def step_seconds(case, device, backend):
    model, batch, step = case()
    model = copy.deepcopy(model).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    forward = torch.compile(model, backend=backend) if backend else model
    batch = [t.to(device) for t in batch]
    run = lambda: step(forward, optimizer, batch)
    for _ in range(2):  # compile and warm up
        run()
    return seconds_per_call(run, device, repeats=3, min_time=0.5)


COMPILE_SCRIPT = """
import sys, time
start = time.perf_counter()
import torch, torchneuron
sys.path.insert(0, {examples!r})
from tiny_gpt import TinyGPT, train_step
torch.manual_seed(0)
model = TinyGPT(vocab=96, context=64, width=64, heads=4, layers=2, dropout=0.0).to("neuron")
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
tokens = torch.randint(0, 96, (16, 65)).to("neuron")
ready = time.perf_counter()
train_step(torch.compile(model, backend="neuron"), opt, tokens).item()
print(time.perf_counter() - ready, torchneuron.compile_stats()["artifacts_built"])
"""


def compile_seconds(cache):
    """Seconds to the first compiled step in a new process, and artifacts it had to build."""
    code = COMPILE_SCRIPT.format(examples=os.path.join(HERE, "..", "examples"))
    env = dict(os.environ, TORCHNEURON_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    seconds, built = out.stdout.split()[-2:]
    return float(seconds), int(built)


def main():
    torch.set_num_threads(os.cpu_count() or 1)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads\n")
    print(f"{'training step':24s} {'cpu ms':>8s} {'inductor':>9s} {'neuron':>8s} {'compiled':>9s}"
          f" {'compiled/eager':>15s} {'compiled/inductor':>18s}")
    for name, case in [("tiny GPT (16x64 tokens)", gpt_case), ("ResNet-style CNN (8x32x32)", cnn_case)]:
        torch._dynamo.reset()
        cpu = step_seconds(case, "cpu", None)
        inductor = step_seconds(case, "cpu", "inductor")
        eager = step_seconds(case, "neuron", None)
        compiled = step_seconds(case, "neuron", "neuron")
        print(f"{name:24s} {cpu * 1e3:8.2f} {inductor * 1e3:9.2f} {eager * 1e3:8.2f} {compiled * 1e3:9.2f}"
              f" {eager / compiled:14.2f}x {inductor / compiled:17.2f}x")
    with tempfile.TemporaryDirectory() as cache:
        cold, built = compile_seconds(cache)
        warm, rebuilt = compile_seconds(cache)
    print(f"\ntiny GPT compile, new process: cold {cold:.2f} s ({built} artifacts built), "
          f"warm {warm:.2f} s ({rebuilt} built, cache hits)")
    report = torchneuron.fallback_report()
    print(f"fallback calls during the benchmark: {sum(report.values())} ({', '.join(report) or 'none'})")


if __name__ == "__main__":
    main()
