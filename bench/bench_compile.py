"""torch.compile benchmarks: one training step of the tiny GPT, of a Llama-style model (RMS norms
written out, SwiGLU MLPs) and of a ResNet-style CNN, run as CPU eager, neuron eager, neuron
compiled (backend="neuron") and CPU compiled (Inductor), taking turns over several rounds of one
run and printed as ratios; plus the neuron compiler's cold compile (new process, empty cache) and
warm compile (new process, artifact and graph caches filled) times for the tiny GPT."""

import copy
import os
import statistics
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


class RMSNorm(nn.Module):
    """Written out, as most Llama-style models do: the compiler fuses its reduction."""

    def __init__(self, width, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class LlamaBlock(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = RMSNorm(width), RMSNorm(width)
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.out = nn.Linear(width, width, bias=False)
        self.gate = nn.Linear(width, 2 * width, bias=False)
        self.up = nn.Linear(width, 2 * width, bias=False)
        self.down = nn.Linear(2 * width, width, bias=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(y.transpose(1, 2).reshape(b, t, c))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class TinyLlama(nn.Module):
    def __init__(self, vocab=96, width=64, heads=4, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.Sequential(*[LlamaBlock(width, heads) for _ in range(layers)])
        self.norm = RMSNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, tokens):
        return self.head(self.norm(self.blocks(self.embed(tokens))))


def llama_step(model, optimizer, batch):
    tokens = batch[0]
    logits = model(tokens[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


def llama_case():
    torch.manual_seed(0)
    return TinyLlama(), (torch.randint(0, 96, (16, 65)),), llama_step


def gpt_case():
    torch.manual_seed(0)
    model = TinyGPT(vocab=96, context=64, width=64, heads=4, layers=2, dropout=0.0)
    batch = (torch.randint(0, 96, (16, 65)),)
    return model, batch, lambda m, opt, b: train_step(m, opt, b[0])


def cnn_case():
    torch.manual_seed(0)
    return resnet(), (torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))), cnn_step


def step_runner(case, device, backend, compile_optimizer=False):
    """A training step of `case` on `device`, compiled with `backend` (None: eager), warmed up;
    `compile_optimizer`: its optimizer step too."""
    model, batch, step = case()
    model = copy.deepcopy(model).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if compile_optimizer:
        optimizer.step = torch.compile(optimizer.step, backend=backend)
    forward = torch.compile(model, backend=backend) if backend else model
    batch = [t.to(device) for t in batch]
    run = lambda: step(forward, optimizer, batch)
    for _ in range(2):  # compile and warm up
        run()
    torch.neuron.synchronize()
    return run


ROUNDS = 7


def interleaved_step_seconds(runs, rounds=ROUNDS, min_time=0.25):
    """Median seconds per step of each run, and the median per-round ratio of every pair.

    The runs take turns within each round, so a slow spell of a shared machine hits all of
    them rather than whichever happened to be measured then."""
    calls = {}
    for name, run in runs.items():
        calls[name] = max(1, round(min_time / seconds_per_call(run, "neuron", repeats=1, min_time=min_time)))
    per_round = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            for _ in range(calls[name]):
                run()
            torch.neuron.synchronize()
            per_round[name].append((time.perf_counter() - start) / calls[name])
    seconds = {name: statistics.median(times) for name, times in per_round.items()}
    ratio = lambda a, b: statistics.median(x / y for x, y in zip(per_round[a], per_round[b]))
    return seconds, ratio


def optimizer_runs(capturable):
    """AdamW steps over the tiny GPT's parameters (fixed gradients), eager and compiled."""
    runs = {}
    for name in ("eager", "compiled"):
        model, _, _ = gpt_case()
        model = model.to("neuron")
        for p in model.parameters():
            p.grad = torch.randn_like(p)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=capturable)
        step = torch.compile(optimizer.step, backend="neuron") if name == "compiled" else optimizer.step
        for _ in range(3):
            step()
        runs[name] = step
    torch.neuron.synchronize()
    return runs


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
stats = torchneuron.compile_stats()
print(time.perf_counter() - ready, stats["artifacts_built"], stats["graph_cache_hits"])
"""


def compile_seconds(cache):
    """Seconds to the first compiled step in a new process, artifacts it had to build, and
    graphs whose AOTAutograd result it reloaded from the graph cache."""
    code = COMPILE_SCRIPT.format(examples=os.path.join(HERE, "..", "examples"))
    env = dict(os.environ, TORCHNEURON_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    seconds, built, reloaded = out.stdout.split()[-3:]
    return float(seconds), int(built), int(reloaded)


def main():
    torch.set_num_threads(os.cpu_count() or 1)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads\n")
    print(f"{'training step':24s} {'cpu ms':>8s} {'inductor':>9s} {'neuron':>8s} {'compiled':>9s}"
          f" {'compiled/eager':>15s} {'compiled/inductor':>18s}")
    for name, case in [("tiny GPT (16x64 tokens)", gpt_case), ("tiny Llama (16x64 tokens)", llama_case),
                       ("ResNet-style CNN (8x32x32)", cnn_case)]:
        torch._dynamo.reset()
        runs = {"cpu": step_runner(case, "cpu", None), "inductor": step_runner(case, "cpu", "inductor"),
                "eager": step_runner(case, "neuron", None), "compiled": step_runner(case, "neuron", "neuron")}
        seconds, ratio = interleaved_step_seconds(runs)
        ms = {key: value * 1e3 for key, value in seconds.items()}
        print(f"{name:24s} {ms['cpu']:8.2f} {ms['inductor']:9.2f} {ms['eager']:8.2f} {ms['compiled']:9.2f}"
              f" {ratio('eager', 'compiled'):14.2f}x {ratio('inductor', 'compiled'):17.2f}x")
    print(f"(medians over {ROUNDS} rounds in which the four runs take turns; ratios are per-round medians)")
    torch._dynamo.reset()
    runs = {"eager": step_runner(gpt_case, "neuron", None), "compiled": step_runner(gpt_case, "neuron", "neuron"),
            "with_optimizer": step_runner(gpt_case, "neuron", "neuron", compile_optimizer=True)}
    seconds, ratio = interleaved_step_seconds(runs)
    print(f"tiny GPT with its AdamW step compiled too: {seconds['with_optimizer'] * 1e3:.2f} ms, "
          f"{ratio('eager', 'with_optimizer'):.2f}x eager, {ratio('compiled', 'with_optimizer'):.2f}x the model alone compiled")
    print(f"\n{'AdamW step, tiny GPT':34s} {'eager ms':>9s} {'compiled ms':>12s} {'compiled/eager':>15s}")
    for capturable in (False, True):
        torch._dynamo.reset()
        seconds, ratio = interleaved_step_seconds(optimizer_runs(capturable))
        label = "capturable (step counts on device)" if capturable else "default (step counts on the CPU)"
        print(f"{label:34s} {seconds['eager'] * 1e3:9.3f} {seconds['compiled'] * 1e3:12.3f}"
              f" {ratio('eager', 'compiled'):14.2f}x")
    with tempfile.TemporaryDirectory() as cache:
        cold, built, _ = compile_seconds(cache)
        warm, rebuilt, reloaded = compile_seconds(cache)
    print(f"\ntiny GPT compile, new process: cold {cold:.2f} s ({built} artifacts built), "
          f"warm {warm:.2f} s ({rebuilt} built, {reloaded} reloaded from the graph cache)")
    report = torchneuron.fallback_report()
    print(f"fallback calls during the benchmark: {sum(report.values())} ({', '.join(report) or 'none'})")


if __name__ == "__main__":
    main()
