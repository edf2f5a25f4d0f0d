"""Low-precision matrix products: torch._scaled_mm (float8 e4m3fn, tensor-wise and row-wise
scales, bfloat16 out) and torch._int_mm (int8) on neuron, against our float32 and bfloat16 GEMMs on
neuron and against CPU PyTorch's same op, in one run, at 1024^3 and at a decode-like 16 x 4096 x
4096; then a training step of an MLP (TorchAO's float8 training, tensor-wise and row-wise recipes,
against the same step in bfloat16 and in float32); printed as time and ratios (above 1: the
low-precision one is faster than what it is compared with)."""

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


def mlp(width=1024, hidden=4096, layers=2):
    torch.manual_seed(0)
    blocks = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(width, hidden, bias=False), torch.nn.GELU(), torch.nn.Linear(hidden, width, bias=False)]
    return torch.nn.Sequential(*blocks)


def training_steps(tokens=1024, width=1024):
    """A forward, backward and SGD step of the MLP on `tokens` rows, per recipe."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    x = torch.randn(tokens, width).to("neuron")
    steps = {}
    for name in ("float32", "bfloat16", "float8 tensor-wise", "float8 row-wise"):
        model = mlp(width).to("neuron")
        if name != "float32":
            model = model.bfloat16()
        if name.startswith("float8"):
            recipe = "tensorwise" if "tensor" in name else "rowwise"
            convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name(recipe))
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        inp = x.to(next(model.parameters()).dtype)

        def step(model=model, opt=opt, inp=inp):
            loss = model(inp).float().square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        steps[name] = step
    print(f"training step: MLP of 2 x ({width} -> 4096 -> {width}), {tokens} tokens, SGD")
    seconds = {name: seconds_per_call(fn, "neuron", repeats=3) for name, fn in steps.items()}
    print(f"{'step':<36}{'ms':>10}{'vs float32':>14}{'vs bfloat16':>14}")
    for name, s in seconds.items():
        print(f"{name:<36}{s * 1e3:>10.2f}{seconds['float32'] / s:>13.2f}x{seconds['bfloat16'] / s:>13.2f}x", flush=True)


def main():
    run(16, 4096, 4096)
    na8, nb8, nrows, ncols, nai, nbi = run(1024, 1024, 1024)
    torchneuron.reset_fallback_report()
    torch._scaled_mm(na8, nb8, nrows, ncols, out_dtype=torch.bfloat16)
    torch._int_mm(nai, nbi)
    torch.neuron.synchronize()
    print(f"fallback report of the neuron products: {torchneuron.fallback_report() or 'empty'}")
    training_steps()


if __name__ == "__main__":
    main()
