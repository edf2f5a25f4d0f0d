"""Collective benchmarks: all-reduce, all-gather and reduce-scatter on 2 ranks of one machine,
4 KiB to 64 MiB, the `neuron` backend on device tensors against Gloo on CPU tensors of the same
size in the same run (one group, "cpu:gloo,neuron:neuron"), printed as bus bandwidth, latency and
ratios; then the DDP tiny-GPT training step on 1 and 2 ranks.

Run directly: it starts itself under torchrun (--standalone), once per configuration."""

import os
import subprocess
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]
OPS = ("all_reduce", "all_gather", "reduce_scatter")


def launch(nproc, mode, omp_threads=1):
    """Runs this file under torchrun on `nproc` ranks; returns rank 0's printed lines."""
    env = {**os.environ, "TORCHNEURON_NUM_DEVICES": str(max(2, nproc)), "PYTHONWARNINGS": "ignore",
           "OMP_NUM_THREADS": str(omp_threads)}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
               __file__, mode]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"{mode} on {nproc} ranks failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return [line[len("RESULT "):] for line in done.stdout.splitlines() if line.startswith("RESULT ")]


def bus_factor(op, world):
    """Bytes each rank moves per byte of the collective's full buffer (NCCL's bus bandwidth)."""
    return 2 * (world - 1) / world if op == "all_reduce" else (world - 1) / world


def timed(run, synchronize, calls):
    """Seconds per call, best of 3 rounds of `calls` calls after a warm-up (a fixed count, not
    one sized by the clock: every rank must make the same collectives)."""
    from bench_kernels import best_of_calls

    run()
    synchronize()
    return best_of_calls(run, synchronize, calls, repeats=3)


def collectives_worker():
    import torch
    import torch.distributed as dist

    rank = int(os.environ["LOCAL_RANK"])
    torch.neuron.set_device(rank)
    dist.init_process_group("cpu:gloo,neuron:neuron")
    world = dist.get_world_size()
    for size in SIZES:
        numel = size // 4
        for op in OPS:
            seconds = {}
            for device in ("cpu", "neuron"):
                full = torch.ones(numel, device=device)
                part = torch.ones(numel // world, device=device)
                if op == "all_reduce":
                    run = lambda: dist.all_reduce(full)  # noqa: E731
                elif op == "all_gather":
                    run = lambda: dist.all_gather_into_tensor(full, part)  # noqa: E731
                else:
                    run = lambda: dist.reduce_scatter_tensor(part, full)  # noqa: E731
                sync = torch.neuron.synchronize if device == "neuron" else (lambda: None)
                seconds[device] = timed(run, sync, calls=max(4, min(100, (256 << 20) // size // 8)))
                agreed = torch.tensor([seconds[device]])
                dist.broadcast(agreed, 0)
                seconds[device] = agreed.item()
            if rank == 0:
                print(f"RESULT {op} {size} {seconds['cpu']} {seconds['neuron']} {world}", flush=True)
    dist.destroy_process_group()


def ddp_worker():
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    sys.path.insert(0, os.path.join(HERE, "..", "examples"))
    from tiny_gpt import TinyGPT, train_step

    rank = int(os.environ["LOCAL_RANK"])
    torch.neuron.set_device(rank)
    dist.init_process_group("neuron")
    torch.manual_seed(0)
    model = DDP(TinyGPT(vocab=256, context=64, width=128, heads=4, layers=4, dropout=0.0).to("neuron"))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, 256, (8, 65), device="neuron")
    switches = involuntary_switches()
    seconds = timed(lambda: train_step(model, optimizer, tokens), torch.neuron.synchronize, calls=10)
    # The warm-up and 3 rounds of 10 steps: involuntary context switches per step, summed over ranks.
    per_step = torch.tensor([(involuntary_switches() - switches) / 31.0], device="neuron")
    dist.all_reduce(per_step)
    from torchneuron import _C

    if rank == 0:
        print(f"RESULT ddp {dist.get_world_size()} {seconds} {_C._compute_threads()} {per_step.item()}", flush=True)
    dist.destroy_process_group()


def involuntary_switches():
    """Times the kernel took a core from this process's threads (all of them) to run another: a
    sign that more threads want the cores than there are."""
    total = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/status") as f:
                total += sum(int(line.split()[1]) for line in f if line.startswith("nonvoluntary_ctxt_switches"))
        except OSError:
            pass  # a thread that ended meanwhile
    return total


def main():
    warnings.simplefilter("ignore")
    print("collectives, 2 ranks on one machine: neuron (device tensors) vs Gloo (CPU tensors), same run")
    print(f"{'collective':<15}{'size':>9}{'Gloo GB/s':>11}{'neuron GB/s':>13}{'Gloo us':>10}{'neuron us':>11}{'ratio':>8}")
    for line in launch(2, "collectives"):
        op, size, cpu_s, neuron_s, world = line.split()
        size, cpu_s, neuron_s = int(size), float(cpu_s), float(neuron_s)
        factor = bus_factor(op, int(world))
        label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
        print(f"{op:<15}{label:>9}{size * factor / cpu_s / 1e9:>11.2f}{size * factor / neuron_s / 1e9:>13.2f}"
              f"{cpu_s * 1e6:>10.0f}{neuron_s * 1e6:>11.0f}{cpu_s / neuron_s:>7.2f}x")
    steps = {}
    for nproc in (1, 2):
        _, world, seconds, _, _ = launch(nproc, "ddp")[0].split()
        steps[int(world)] = float(seconds)
    print(f"DDP tiny-GPT step (8 x 64 tokens per rank): 1 rank {steps[1] * 1e3:.1f} ms, 2 ranks "
          f"{steps[2] * 1e3:.1f} ms ({steps[2] / steps[1]:.2f}x the 1-rank time on 2 shared cores)")
    # Ranks sharing the machine: each rank's compute engines follow OMP_NUM_THREADS (torchrun sets
    # 1); with as many engines per rank as the machine has cores, the ranks oversubscribe it.
    cores = len(os.sched_getaffinity(0))
    print(f"2 DDP ranks on {cores} cores: {'OMP_NUM_THREADS':>16}{'engines/rank':>14}{'step ms':>9}"
          f"{'involuntary switches/step':>27}")
    for omp in (1, cores):
        _, _, seconds, engines, switches = launch(2, "ddp", omp_threads=omp)[0].split()
        print(f"{'':<29}{omp:>16}{engines:>14}{float(seconds) * 1e3:>9.1f}{float(switches):>27.1f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "collectives":
        collectives_worker()
    elif len(sys.argv) > 1 and sys.argv[1] == "ddp":
        ddp_worker()
    else:
        main()
