"""Adaptive eager benchmarks: plain eager vs adaptive eager vs torch.compile(backend="neuron"),
taking turns in one run and printed as ratios to plain eager: a chain of 20 pointwise ops on a
small and a large tensor, the tiny GPT and tiny Llama training steps, an AdamW step over many
small parameters (foreach off), and a Python loop that the compiler graph-breaks on. Ends with
the region cache's hit rate and how the adaptive runs' regions ended."""

import os
import sys
import warnings

import torch

import torchneuron
from torchneuron import _C

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_compile import gpt_case, interleaved_step_seconds, llama_case, step_runner  # noqa: E402

warnings.simplefilter("ignore")


def chain20(x, y):
    for _ in range(4):
        x = x * 1.01 + y
        x = torch.relu(x) - 0.5
        x = x.sigmoid()
    return x


def graph_breaking_loop(x):
    """Data-dependent Python control flow: Dynamo breaks the graph at every .item()."""
    for _ in range(4):
        x = (x * 0.9 + 0.1).tanh()
        if x[0].item() > 0:
            x = x * 2 - 1
        else:
            x = x.abs() + 0.5
    return x


def switched(fn, on):
    """`fn` run with adaptive eager switched on or off around it, through _C directly; both
    modes pay the same two calls, so the ratio shows the mode's own cost."""
    def run():
        _C._set_adaptive_eager(on)
        try:
            return fn()
        finally:
            _C._set_adaptive_eager(False)
    return run


def three_ways(plain, compiled):
    return {"eager": switched(plain, False), "adaptive": switched(plain, True), "compiled": compiled}


def pointwise_cases():
    for label, numel in (("20 pointwise ops, 4K elements", 4096), ("20 pointwise ops, 4M elements", 4 << 20)):
        x = torch.randn(numel, device="neuron")
        y = torch.randn(numel, device="neuron")
        compiled = torch.compile(chain20, backend="neuron")
        yield label, three_ways(lambda x=x, y=y: chain20(x, y), lambda x=x, y=y, c=compiled: c(x, y))


def training_cases():
    for label, case in (("tiny GPT training step", gpt_case), ("tiny Llama training step", llama_case)):
        yield label, three_ways(step_runner(case, "neuron", None), step_runner(case, "neuron", "neuron"))


def optimizer_case():
    def make(compiled):
        params = [torch.nn.Parameter(torch.randn(64, device="neuron")) for _ in range(200)]
        for p in params:
            p.grad = torch.randn_like(p)
        optimizer = torch.optim.AdamW(params, lr=1e-3, foreach=False)
        step = torch.compile(optimizer.step, backend="neuron") if compiled else optimizer.step
        for _ in range(3):
            step()
        return step
    return "AdamW, 200 params of 64, foreach off", three_ways(make(False), make(True))


def loop_case():
    x = torch.randn(4096, device="neuron")
    compiled = torch.compile(graph_breaking_loop, backend="neuron")
    return "Python loop with graph breaks", three_ways(lambda: graph_breaking_loop(x), lambda: compiled(x))


def main():
    print(f"torchneuron {torchneuron.cpu_capability()}, settings {torchneuron.adaptive_eager_settings()}")
    print(f"{'case':<40}{'eager ms':>10}{'adaptive':>10}{'compiled':>10}")
    cases = list(pointwise_cases()) + list(training_cases()) + [optimizer_case(), loop_case()]
    torchneuron.reset_adaptive_eager_stats()
    for label, runs in cases:
        for run in runs.values():  # warm up: compile, and make the adaptive regions hot
            for _ in range(3):
                run()
        torch.neuron.synchronize()
        seconds, ratio = interleaved_step_seconds(runs)
        print(f"{label:<40}{seconds['eager'] * 1e3:>10.3f}{ratio('eager', 'adaptive'):>9.2f}x"
              f"{ratio('eager', 'compiled'):>9.2f}x", flush=True)
    stats = torchneuron.adaptive_eager_stats()
    print(f"adaptive eager: {stats['ops_recorded']} ops recorded, {stats['regions_fused']} regions fused "
          f"and {stats['regions_op_by_op']} run op by op, plan cache hit rate {stats['plan_hit_rate']:.3f}, "
          f"{stats['values_elided']} values never written")
    ends = {k[len('flush_'):]: v for k, v in stats.items() if k.startswith("flush_") and v}
    print(f"regions ended by: {ends}")
    print("ratios: plain eager time / time (above 1 is faster than plain eager)")


if __name__ == "__main__":
    main()
