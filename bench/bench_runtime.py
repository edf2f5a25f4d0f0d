"""Runtime benchmarks: neuron vs CPU PyTorch, measured in the same run, printed as ratios.

Ratios are neuron time / CPU time for per-op costs (lower is better) and neuron / CPU
bandwidth for copies (higher is better).
"""

import time
import warnings

import torch

import torchneuron

warnings.simplefilter("ignore")


def best_of(fn, repeats=5):
    """Returns the best of `repeats` timings of fn() in seconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def per_op_seconds(make_op, device, iterations):
    """Seconds per call of an op, queue drained at the end (host overhead plus device time)."""
    op = make_op(device)

    def run():
        for _ in range(iterations):
            op()
        if device == "neuron":
            torch.neuron.synchronize()

    run()
    return best_of(run) / iterations


def enqueue_only_seconds(make_op, iterations):
    """Seconds per call spent on the Python thread for a neuron op (no synchronize)."""
    op = make_op("neuron")
    torch.neuron.synchronize()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(iterations):
            op()
        times.append(time.perf_counter() - start)
        torch.neuron.synchronize()
    return min(times) / iterations


def tiny_zero(device):
    x = torch.empty(16, device=device)
    return x.zero_


def tiny_add(device):
    x = torch.ones(16, device=device)
    return lambda: x.add_(1)


def tiny_fallback(device):
    x = torch.full((16,), 6, dtype=torch.int64, device=device)
    return lambda: x.gcd_(x)  # no neuron kernel: runs on the CPU, counted


def tiny_alloc(device):
    return lambda: torch.empty(1024, device=device)


def copy_bandwidth(nbytes):
    """GB/s of host->device, device->host and a CPU copy_ of the same size."""
    n = nbytes // 4
    host = torch.randn(n)
    host_dst = torch.empty(n)
    dev = torch.empty(n, device="neuron")

    def h2d():
        dev.copy_(host)
        torch.neuron.synchronize()

    def d2h():
        host_dst.copy_(dev)

    def cpu():
        host_dst.copy_(host)

    h2d()
    d2h()
    return {name: nbytes / best_of(fn) / 1e9 for name, fn in (("h2d", h2d), ("d2h", d2h), ("cpu", cpu))}


def main():
    """Prints the runtime benchmark table."""
    torch.set_num_threads(torch.get_num_threads())
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, "
          f"{torch.neuron.device_count()} neuron devices")
    rows = []
    for name, make_op, iterations in (
        ("tiny zero_ (native)", tiny_zero, 20000),
        ("tiny add_ (native)", tiny_add, 20000),
        ("tiny gcd_ (CPU fallback)", tiny_fallback, 2000),
        ("alloc+free 4 KiB", tiny_alloc, 20000),
    ):
        cpu = per_op_seconds(make_op, "cpu", iterations)
        neuron = per_op_seconds(make_op, "neuron", iterations)
        rows.append((name, cpu * 1e6, neuron * 1e6, neuron / cpu))
    enqueue = enqueue_only_seconds(tiny_zero, 20000)

    print(f"\n{'per-op cost':<28}{'cpu us':>10}{'neuron us':>12}{'neuron/cpu':>12}")
    for name, cpu_us, neuron_us, ratio in rows:
        print(f"{name:<28}{cpu_us:>10.2f}{neuron_us:>12.2f}{ratio:>11.2f}x")
    print(f"{'tiny zero_ enqueue only':<28}{'':>10}{enqueue * 1e6:>12.2f}")

    # The profiler's device track: its cost per op while recording; off, the queue checks one flag.
    from torch.profiler import ProfilerActivity, profile
    off = per_op_seconds(tiny_add, "neuron", 5000)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
        on = per_op_seconds(tiny_add, "neuron", 5000)
    print(f"\n{'profiler':<28}{'off us':>10}{'recording us':>14}{'on/off':>10}")
    print(f"{'tiny add_ (native)':<28}{off * 1e6:>10.2f}{on * 1e6:>14.2f}{on / off:>9.2f}x")

    print(f"\n{'copy bandwidth':<28}{'cpu GB/s':>10}{'neuron GB/s':>12}{'neuron/cpu':>12}")
    for size in (64 << 10, 64 << 20):
        bw = copy_bandwidth(size)
        for direction in ("h2d", "d2h"):
            label = f"{direction} {size >> 10} KiB" if size < (1 << 20) else f"{direction} {size >> 20} MiB"
            print(f"{label:<28}{bw['cpu']:>10.2f}{bw[direction]:>12.2f}{bw[direction] / bw['cpu']:>11.2f}x")
    report = torchneuron.fallback_report()
    print(f"\nfallback calls during the benchmark: {sum(report.values())} ({', '.join(sorted(report))})")


if __name__ == "__main__":
    main()
