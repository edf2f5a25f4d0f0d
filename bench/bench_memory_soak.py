"""A long training run's memory: the tiny GPT trained with AdamW for 1,000 steps on neuron, with
torch.neuron.memory_allocated() and the process's resident set sampled every 10 steps. Both should
be flat after the first steps; the script prints the curve and the growth from step 10 to the end
(and draws build/memory_soak.png when matplotlib is installed). It checks nothing.

    python bench/bench_memory_soak.py [--steps 1000]
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from tiny_gpt import TinyGPT, train_step  # noqa: E402


def rss_bytes():
    """The process's resident set, from /proc (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--every", type=int, default=10)
    args = parser.parse_args()

    torch.manual_seed(0)
    vocab, context, batch = 256, 64, 8
    model = TinyGPT(vocab, context).to("neuron")
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    data = torch.randint(0, vocab, (64, batch, context + 1))
    rows = []
    for step in range(1, args.steps + 1):
        loss = train_step(model, optimizer, data[step % len(data)].to("neuron"))
        if step % args.every == 0 or step == 1:
            value = loss.item()  # a sync: every step so far has run
            rows.append((step, torch.neuron.memory_allocated(), rss_bytes(), value))
            print(f"step {step:5d}  allocated {rows[-1][1] / 2**20:8.2f} MiB  rss {rows[-1][2] / 2**20:8.1f} MiB  "
                  f"loss {value:.4f}", flush=True)

    base = next(r for r in rows if r[0] >= 10)
    last = rows[-1]
    print(f"\nfrom step {base[0]} to step {last[0]}: memory_allocated {base[1] / 2**20:.2f} -> {last[1] / 2**20:.2f} MiB "
          f"({(last[1] - base[1]) / 2**20:+.2f}), RSS {base[2] / 2**20:.1f} -> {last[2] / 2**20:.1f} MiB "
          f"({(last[2] - base[2]) / 2**20:+.1f})")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    steps = [r[0] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot(steps, [r[1] / 2**20 for r in rows], label="torch.neuron.memory_allocated()")
    ax.plot(steps, [r[2] / 2**20 for r in rows], label="process RSS")
    ax.set_xlabel("training step")
    ax.set_ylabel("MiB")
    ax.set_title(f"tiny GPT, AdamW, {args.steps} steps on neuron")
    ax.legend()
    fig.tight_layout()
    os.makedirs("build", exist_ok=True)
    fig.savefig("build/memory_soak.png", dpi=100)
    print("wrote build/memory_soak.png")


if __name__ == "__main__":
    main()
