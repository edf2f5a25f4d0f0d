"""Low-precision matrix products: torch._scaled_mm (float8 e4m3fn, tensor-wise and row-wise
scales, bfloat16 out) and torch._int_mm (int8) on neuron, against our float32 and bfloat16 GEMMs on
neuron and against CPU PyTorch's same op, in one run, at 1024^3 and at a decode-like 16 x 4096 x
4096; printed as time and ratios (above 1: the low-precision product is faster than what it is
compared with)."""

import os
import sys
import warnings

import torch

import torchneuron

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_kernels import seconds_per_call  # noqa: E402

warnings.simplefilter("ignore")


def operands(m, k, n, seed=0):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=gen)
    b = torch.randn(k, n, generator=gen)
    return a, b


def run(m, k, n):
    """Times and prints every case at one shape; returns the operands of the last products."""
    print(f"torchneuron {torchneuron.cpu_capability()}, {m}x{k}x{n}")
    a, b = operands(m, k, n)
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t().contiguous().t()
    one = torch.tensor(1.0)
    rows, cols = torch.rand(m, 1) + 0.5, torch.rand(1, n) + 0.5
    ai, bi = torch.randint(-128, 128, (m, k), dtype=torch.int8), torch.randint(-128, 128, (k, n), dtype=torch.int8)
    dev = lambda *ts: [t.to("neuron") for t in ts]  # noqa: E731
    na, nb, na8, nb8, none, nrows, ncols, nai, nbi = dev(a, b, a8, b8, one, rows, cols, ai, bi)
    nab, nbb = na.bfloat16(), nb.bfloat16()
    cases = {
        "fp32 GEMM (neuron)": (lambda: na @ nb, "neuron"),
        "bf16 GEMM (neuron)": (lambda: nab @ nbb, "neuron"),
        "_scaled_mm tensor-wise (neuron)": (lambda: torch._scaled_mm(na8, nb8, none, none, out_dtype=torch.bfloat16),
                                            "neuron"),
        "_scaled_mm row-wise (neuron)": (lambda: torch._scaled_mm(na8, nb8, nrows, ncols, out_dtype=torch.bfloat16),
                                         "neuron"),
        "_scaled_mm tensor-wise (CPU)": (lambda: torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16), "cpu"),
        "_scaled_mm row-wise (CPU)": (lambda: torch._scaled_mm(a8, b8, rows, cols, out_dtype=torch.bfloat16), "cpu"),
        "_int_mm (neuron)": (lambda: torch._int_mm(nai, nbi), "neuron"),
        "_int_mm (CPU)": (lambda: torch._int_mm(ai, bi), "cpu"),
    }
    seconds = {name: seconds_per_call(fn, device, repeats=3) for name, (fn, device) in cases.items()}
    print(f"{'case':<36}{'ms':>10}{'vs fp32 GEMM':>14}{'vs bf16 GEMM':>14}{'vs CPU same op':>16}")
    for name, s in seconds.items():
        cpu_twin = name.replace("(neuron)", "(CPU)")
        vs_cpu = f"{seconds[cpu_twin] / s:>15.2f}x" if cpu_twin != name and cpu_twin in seconds else f"{'':>16}"
        print(f"{name:<36}{s * 1e3:>10.2f}{seconds['fp32 GEMM (neuron)'] / s:>13.2f}x"
              f"{seconds['bf16 GEMM (neuron)'] / s:>13.2f}x{vs_cpu}", flush=True)
    return na8, nb8, nrows, ncols, nai, nbi


def main():
    run(16, 4096, 4096)
    na8, nb8, nrows, ncols, nai, nbi = run(1024, 1024, 1024)
    torchneuron.reset_fallback_report()
    torch._scaled_mm(na8, nb8, nrows, ncols, out_dtype=torch.bfloat16)
    torch._int_mm(nai, nbi)
    torch.neuron.synchronize()
    print(f"fallback report of the neuron products: {torchneuron.fallback_report() or 'empty'}")


if __name__ == "__main__":
    main()
