"""Cost of checking index values at the call: index-heavy training steps on neuron with the
checks on the host (the default) and on the device only (TORCHNEURON_DEVICE_INDEX_CHECKS=1).

Each setting runs in its own process (the variable is read once), the two alternating, and the
median step time of each is printed with the ratio. Not in `make bench`.

    python bench/bench_index_checks.py [--rounds 3] [--steps 30]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F


def lm(device):
    """Token embedding, an MLP and a vocabulary head: one embedding lookup per step."""
    vocab, width, batch, length = 8000, 128, 16, 64
    emb = torch.nn.Embedding(vocab, width).to(device)
    body = torch.nn.Sequential(torch.nn.Linear(width, 256), torch.nn.GELU(), torch.nn.Linear(256, width)).to(device)
    head = torch.nn.Linear(width, vocab).to(device)
    opt = torch.optim.Adam([*emb.parameters(), *body.parameters(), *head.parameters()], lr=1e-3)

    def step():
        x = torch.randint(0, vocab, (batch, length)).to(device)
        y = torch.randint(0, vocab, (batch, length)).to(device)
        loss = F.cross_entropy(head(body(emb(x))).view(-1, vocab), y.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return step


def bags(device):
    """A DLRM-like step: four EmbeddingBags over 100k rows, concatenated into an MLP."""
    rows, width, batch, per_bag = 100_000, 32, 256, 20
    tables = torch.nn.ModuleList([torch.nn.EmbeddingBag(rows, width, mode="sum") for _ in range(4)]).to(device)
    mlp = torch.nn.Sequential(torch.nn.Linear(4 * width, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).to(device)
    opt = torch.optim.SGD([*tables.parameters(), *mlp.parameters()], lr=0.1)

    def step():
        xs = [torch.randint(0, rows, (batch, per_bag)).to(device) for _ in tables]
        target = torch.rand(batch, 1).to(device)
        h = torch.cat([table(x) for table, x in zip(tables, xs)], 1)
        loss = F.binary_cross_entropy_with_logits(mlp(h), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return step


def routed(device):
    """Indexing mid-model with indices computed on the device (top-k routing), six times a step."""
    batch, width = 512, 64
    layers = torch.nn.ModuleList([torch.nn.Linear(width, width) for _ in range(6)]).to(device)
    opt = torch.optim.SGD(layers.parameters(), lr=0.01)

    def step():
        h = torch.randn(batch, width).to(device)
        for layer in layers:
            h = torch.relu(layer(h))
            keep = h.norm(dim=1).topk(batch // 2).indices
            h = torch.cat([h[keep], h[keep]], 0)
        loss = h.square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return step


CASES = {"embedding LM": lm, "embedding bags": bags, "routed indexing": routed}


def child(steps):
    import torchneuron  # noqa: F401

    torch.manual_seed(0)
    for name, make in CASES.items():
        step = make("neuron")
        for _ in range(5):
            step().item()
        torch.neuron.synchronize()
        start = time.perf_counter()
        for _ in range(steps):
            step().item()  # a loss read per step, as a training loop logs it
        torch.neuron.synchronize()
        print(f"{name}\t{(time.perf_counter() - start) / steps * 1e3:.3f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.steps)
    times = {}
    for _ in range(args.rounds):
        for setting in ("host", "device"):
            env = dict(os.environ)
            env.pop("TORCHNEURON_DEVICE_INDEX_CHECKS", None)
            if setting == "device":
                env["TORCHNEURON_DEVICE_INDEX_CHECKS"] = "1"
            out = subprocess.run([sys.executable, __file__, "--child", "--steps", str(args.steps)], env=env,
                                 capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                name, ms = line.split("\t")
                times.setdefault((name, setting), []).append(float(ms))
    print(f"{'case':<18} {'host checks ms/step':>20} {'device checks ms/step':>22} {'ratio':>7}")
    for name in CASES:
        host = statistics.median(times[(name, "host")])
        device = statistics.median(times[(name, "device")])
        print(f"{name:<18} {host:>20.2f} {device:>22.2f} {host / device:>7.3f}")


if __name__ == "__main__":
    main()
