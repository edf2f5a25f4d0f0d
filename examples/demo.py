"""Trains a tiny character-level GPT on the corpus shipped in examples/data, once on the CPU and
once on `neuron` from the same initial weights and batches, then prints both final losses,
tokens per second, and which ATen operators fell back to the CPU on neuron."""

import copy
import os
import sys
import time
import warnings

import torch

import torchneuron

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_gpt import TinyGPT, train_step  # noqa: E402

STEPS = 150
BATCH = 16
CONTEXT = 32
CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "corpus.txt")


def load_corpus():
    """Returns the corpus as a tensor of character ids, and the vocabulary size."""
    with open(CORPUS, encoding="utf-8") as f:
        text = f.read()
    vocab = sorted(set(text))
    index = {ch: i for i, ch in enumerate(vocab)}
    return torch.tensor([index[ch] for ch in text]), len(vocab)


def make_batches(data, steps, generator):
    """Random windows of CONTEXT + 1 characters, the same for both runs."""
    starts = torch.randint(0, len(data) - CONTEXT - 1, (steps, BATCH), generator=generator)
    return [torch.stack([data[s : s + CONTEXT + 1] for s in row.tolist()]) for row in starts]


def train(device, model, batches):
    """Runs AdamW over `batches` on `device`; returns the losses and the wall time."""
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    losses = []
    start = time.perf_counter()
    for step, batch in enumerate(batches):
        loss = train_step(model, optimizer, batch.to(device))
        if (step + 1) % 10 == 0 or step + 1 == len(batches):
            losses.append((step + 1, loss.item()))  # .item() synchronizes the device
            filled = (step + 1) * 30 // len(batches)
            print(f"\r  {device:<6} [{'#' * filled:<30}] step {step + 1:>3}/{len(batches)} "
                  f"loss {losses[-1][1]:.4f}", end="", flush=True)
    if device == "neuron":
        torch.neuron.synchronize()
    print()
    return losses, time.perf_counter() - start


def main():
    """Runs the demo."""
    warnings.simplefilter("ignore")  # the fallback report below lists every fallback
    data, vocab = load_corpus()
    generator = torch.Generator().manual_seed(0)
    batches = make_batches(data, STEPS, generator)
    torch.manual_seed(0)
    # Dropout draws from different generators on each device, so it is off for a like-for-like run.
    cpu_model = TinyGPT(vocab, CONTEXT, width=64, heads=4, layers=2, dropout=0.0)
    neuron_model = copy.deepcopy(cpu_model)
    print(f"torchneuron demo: tiny GPT ({sum(p.numel() for p in cpu_model.parameters())} parameters), "
          f"{len(data)} characters, {STEPS} AdamW steps of {BATCH}x{CONTEXT} tokens, "
          f"{torch.neuron.get_device_name()}")

    cpu_losses, cpu_time = train("cpu", cpu_model, batches)
    torchneuron.reset_fallback_report()
    neuron_losses, neuron_time = train("neuron", neuron_model, batches)
    report = torchneuron.fallback_report()

    tokens = STEPS * BATCH * CONTEXT
    diff = max(abs(a - b) for (_, a), (_, b) in zip(cpu_losses, neuron_losses))
    print(f"\nfinal loss:  neuron {neuron_losses[-1][1]:.4f}   cpu {cpu_losses[-1][1]:.4f}   "
          f"(first logged {neuron_losses[0][1]:.4f}; largest difference at a logged step {diff:.1e})")
    print(f"throughput:  neuron {tokens / neuron_time:,.0f} tokens/s   cpu {tokens / cpu_time:,.0f} tokens/s   "
          f"(neuron/cpu {cpu_time / neuron_time:.2f}x)")
    print(f"memory:      {torch.neuron.max_memory_allocated() / 2**20:.1f} MiB peak allocated on neuron:0")
    if report:
        print(f"CPU fallbacks on neuron: {len(report)} ops, {sum(report.values())} calls")
        for name, calls in sorted(report.items(), key=lambda item: -item[1]):
            print(f"  {calls:>6}  {name}")
    else:
        print(f"CPU fallbacks on neuron: none ({len(torchneuron.native_ops())} native ATen ops registered)")
    if not neuron_losses[-1][1] < neuron_losses[0][1]:
        raise SystemExit("the loss on neuron did not go down")


if __name__ == "__main__":
    main()
