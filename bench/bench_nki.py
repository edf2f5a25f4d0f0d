"""NKI benchmarks: flash attention, RMSNorm and a tiled matmul written in NKI, run compiled on
`neuron`, against our native C++ kernel for the same op on `neuron` and CPU PyTorch, in the same
run; then each NKI kernel compiled against TORCHNEURON_NKI_INTERPRET=1 (the interpreter).
Ratios above 1 mean the NKI kernel is faster. Goals: flash attention >= 0.5x native, compiled
>= 50x the interpreter."""

import math
import os
import sys
import time

import torch
import torch.nn.functional as F

import torchneuron  # noqa: F401
from torchneuron import nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl
from torchneuron.nki.library.attention import flash_attention_fwd
from torchneuron.nki.library.rmsnorm import rms_norm_fwd, row_tiles

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_kernels import best_of_calls  # noqa: E402


@nki.jit
def tiled_matmul(lhs_t, rhs):
    """result = lhs_t^T @ rhs in 128 x 512 PSUM tiles, accumulating over K in steps of 128; one
    program per 128 rows of the result (launch on a grid of M / 128)."""
    k_size, m_size = lhs_t.shape
    n_size = rhs.shape[1]
    result = nl.ndarray((m_size, n_size), lhs_t.dtype, buffer=nl.shared_hbm)
    m = nl.program_id(0)
    for n in nl.affine_range(n_size // 512):
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(k_size // 128):
            a = nl.load(lhs_t[nl.ds(k * 128, 128), nl.ds(m * 128, 128)])
            b = nl.load(rhs[nl.ds(k * 128, 128), nl.ds(n * 512, 512)])
            nisa.nc_matmul(acc, a, b, accumulate=True)
        nl.store(result[nl.ds(m * 128, 128), nl.ds(n * 512, 512)], nl.copy(acc, dtype=result.dtype))
    return result


def seconds(fn, device, calls=3, repeats=3):
    sync = torch.neuron.synchronize if device == "neuron" else (lambda: None)
    fn()
    sync()
    return best_of_calls(fn, sync, calls, repeats)


def attention_case(dtype, dim, seq=1024, heads=8):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, heads, seq, dim, generator=g).to(dtype) for _ in range(3))
    dq, dk, dv = (t.to("neuron") for t in (q, k, v))
    scale = 1.0 / math.sqrt(dim)
    return (f"flash attention causal {str(dtype)[6:]} [1,{heads},{seq},{dim}]",
            lambda: flash_attention_fwd[1, heads](dq, dk, dv, scale, True),
            lambda: F.scaled_dot_product_attention(dq, dk, dv, is_causal=True),
            lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))


def rms_case(rows=4096, hidden=1024):
    g = torch.Generator().manual_seed(1)
    x, w = torch.randn(rows, hidden, generator=g), torch.randn(hidden, generator=g)
    dx, dw = x.to("neuron"), w.to("neuron")
    return (f"RMSNorm fp32 [{rows},{hidden}]", lambda: rms_norm_fwd[row_tiles(rows)](dx, dw, 1e-6),
            lambda: F.rms_norm(dx, (hidden,), dw, 1e-6), lambda: F.rms_norm(x, (hidden,), w, 1e-6))


def matmul_case(size=1024):
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(size, size, generator=g), torch.randn(size, size, generator=g)
    da, db = a.to("neuron"), b.to("neuron")
    return (f"tiled matmul fp32 {size}^3", lambda: tiled_matmul[size // 128](da, db), lambda: da.t() @ db,
            lambda: a.t() @ b)


def interpreted(fn):
    os.environ["TORCHNEURON_NKI_INTERPRET"] = "1"
    try:
        start = time.perf_counter()
        fn()
        torch.neuron.synchronize()
        return time.perf_counter() - start
    finally:
        os.environ["TORCHNEURON_NKI_INTERPRET"] = "0"


def main():
    os.environ["TORCHNEURON_NKI_INTERPRET"] = "0"
    cases = [attention_case(torch.float32, 64), attention_case(torch.float32, 128), attention_case(torch.bfloat16, 128),
             rms_case(), matmul_case()]
    print(f"{'case':44s} {'NKI ms':>8s} {'native ms':>10s} {'CPU ms':>8s} {'NKI/native':>11s} {'NKI/CPU':>8s}")
    for name, nki_fn, native_fn, cpu_fn in cases:
        t_nki, t_native, t_cpu = seconds(nki_fn, "neuron"), seconds(native_fn, "neuron"), seconds(cpu_fn, "cpu")
        print(f"{name:44s} {t_nki * 1e3:8.2f} {t_native * 1e3:10.2f} {t_cpu * 1e3:8.2f} "
              f"{t_native / t_nki:10.2f}x {t_cpu / t_nki:7.2f}x", flush=True)
    print()
    print(f"{'compiled vs interpreter':44s} {'compiled ms':>11s} {'interp ms':>10s} {'speedup':>8s}")
    small = [attention_case(torch.float32, 64, seq=512, heads=2), rms_case(rows=1024, hidden=1024), matmul_case(512)]
    for name, nki_fn, _, _ in small:
        t_compiled = seconds(nki_fn, "neuron")
        t_interp = interpreted(nki_fn)
        print(f"{name:44s} {t_compiled * 1e3:11.2f} {t_interp * 1e3:10.1f} {t_interp / t_compiled:7.0f}x", flush=True)


if __name__ == "__main__":
    main()
