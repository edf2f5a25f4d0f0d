"""Profiles one training step of the tiny GPT on neuron: a torch.profiler chrome trace (open it in
Perfetto: host ops above, the neuron hardware queue below, arrows from each op to what it ran),
the key_averages table, and a memory snapshot of the step; then draws both as pictures.

    python examples/profile_tiny_gpt.py [--out DIR]      (default build/profile)

Writes DIR/trace.json, DIR/snapshot.pickle, DIR/step_trace.png and DIR/step_memory.png."""

import argparse
import json
import os
import pickle
import sys

import torch
from torch.profiler import ProfilerActivity, profile

import torchneuron  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_gpt import TinyGPT, train_step  # noqa: E402


def profile_step(out):
    torch.manual_seed(0)
    model = TinyGPT(vocab=96, context=64).to("neuron")
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    tokens = torch.randint(0, 96, (16, 65), device="neuron")
    for _ in range(2):  # warm up: caches, lazy state
        train_step(model, optimizer, tokens)
    torch.neuron.synchronize()
    torch.neuron.memory._record_memory_history(max_entries=100000)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], profile_memory=True) as prof:
        train_step(model, optimizer, tokens).item()
    torch.neuron.memory._dump_snapshot(os.path.join(out, "snapshot.pickle"))
    torch.neuron.memory._record_memory_history(enabled=None)
    prof.export_chrome_trace(os.path.join(out, "trace.json"))
    print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=12))


def draw_trace(out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(os.path.join(out, "trace.json")) as f:
        events = json.load(f)["traceEvents"]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    device = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    starts = {e["id"]: e for e in events if e.get("ph") == "s" and e.get("cat") == "ac2g"}
    t0 = min(e["ts"] for e in ops + device)
    # Host ops nest: draw each at its depth (top-level ops at the top).
    ops.sort(key=lambda e: (e["ts"], -e["dur"]))
    depth_of, open_ends = [], []
    for e in ops:
        while open_ends and open_ends[-1] <= e["ts"]:
            open_ends.pop()
        depth_of.append(len(open_ends))
        open_ends.append(e["ts"] + e["dur"])
    fig, ax = plt.subplots(figsize=(14, 5))
    for e, depth in zip(ops, depth_of):
        if depth < 4:
            ax.barh(6 - depth * 0.6, e["dur"] / 1e3, left=(e["ts"] - t0) / 1e3, height=0.5, color="#4c72b0",
                    edgecolor="white", linewidth=0.3)
    colors = {"kernel": "#dd8452", "gpu_memcpy": "#55a868", "gpu_memset": "#8172b3"}
    for e in device:
        ax.barh(1, e["dur"] / 1e3, left=(e["ts"] - t0) / 1e3, height=0.8, color=colors[e["cat"]],
                edgecolor="white", linewidth=0.3)
        start = starts.get(e["args"].get("correlation"))
        if start is not None:
            ax.plot([(start["ts"] - t0) / 1e3, (e["ts"] - t0) / 1e3], [3.6, 1.4], color="grey", linewidth=0.3,
                    alpha=0.6)
    ax.set_yticks([1, 6 - 0.9])
    ax.set_yticklabels(["neuron:0\nhw queue", "host ops\n(nested)"])
    ax.set_xlabel("milliseconds")
    ax.set_title("One tiny-GPT training step: host ops (blue), device kernels (orange), copies (green), "
                 "fills (purple); lines link each launch to its command")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "step_trace.png"), dpi=110)


def draw_memory(out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(os.path.join(out, "snapshot.pickle"), "rb") as f:
        snapshot = pickle.load(f)
    trace = snapshot["device_traces"][0]
    t0 = trace[0]["time_us"]
    live, reserved, times, allocated, reserved_series = 0, 0, [], [], []
    for e in trace:
        live += {"alloc": e["size"], "free_completed": -e["size"]}.get(e["action"], 0)
        reserved += {"segment_alloc": e["size"], "segment_free": -e["size"]}.get(e["action"], 0)
        times.append((e["time_us"] - t0) / 1e3)
        allocated.append(live / 2**20)
        reserved_series.append(reserved / 2**20)
    fig, ax = plt.subplots(figsize=(10, 3.5))
    ax.step(times, allocated, where="post", label="allocated during the step (MiB)")
    ax.set_xlabel("milliseconds")
    ax.set_ylabel("MiB")
    ax.set_title("Device memory over one tiny-GPT training step (relative to its start)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "step_memory.png"), dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join("build", "profile"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    profile_step(args.out)
    draw_trace(args.out)
    draw_memory(args.out)
    print(f"wrote {args.out}/trace.json, snapshot.pickle, step_trace.png, step_memory.png")


if __name__ == "__main__":
    main()
