"""NKI benchmarks: flash attention, RMSNorm and a tiled matmul written in NKI, run compiled on
`neuron`, against our native C++ kernel for the same op on `neuron` and CPU PyTorch, in the same
run; then each NKI kernel compiled against TORCHNEURON_NKI_INTERPRET=1 (the interpreter).
Ratios above 1 mean the NKI kernel is faster. Goals: flash attention >= 0.5x native, compiled
>= 50x the interpreter.

With TORCHNEURON_NKI_LIBRARY_SRC set to the src/ folder of a clone of AWS's nki-library (not part of this
repository), three of its kernels run unmodified too, each checked against its reference first:
RMSNorm (rmsnorm_tkg), attention context encoding (attention_cte) and the MLP (mlp_cte).
`--library-only` runs just those rows."""

import contextlib
import importlib
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


LIBRARY_ENV = "TORCHNEURON_NKI_LIBRARY_SRC"


def close_to(got, ref, rtol):
    """(whether |got - ref| <= 1e-5 + rtol * max|ref| everywhere (the library tests' tolerance), the max error)."""
    got, ref = got.detach().cpu().double(), ref.detach().cpu().double().reshape(got.shape)
    err = (got - ref).abs().max().item()
    return err <= 1e-5 + rtol * ref.abs().max().item(), err


def library(module):
    """A module of the library's core/ (nkilib_src.nkilib.core.<module>)."""
    return importlib.import_module("nkilib_src.nkilib.core." + module)


def library_rmsnorm_case(batch=4, seq=128, hidden=2048):
    """rmsnorm_tkg (its output laid out [128, B*S, H/128]) against F.rms_norm on [B, S, H]."""
    kernel, ref = nki.jit(library("subkernels.rmsnorm_tkg").rmsnorm_tkg), library("subkernels.rmsnorm_torch")
    g = torch.Generator().manual_seed(3)
    x, gamma = torch.randn(batch, seq, hidden, generator=g).half(), torch.randn(1, hidden, generator=g).half()
    out = torch.zeros(128, batch * seq, hidden // 128, dtype=torch.float16)
    dx, dgamma, dout = x.to("neuron"), gamma.to("neuron"), out.to("neuron")
    kernel(dx, dgamma, dout)
    expected = ref.rmsnorm_tkg_torch_ref_lnc1(x.float(), gamma.float(), out.float())
    expected = next(iter(expected.values())) if isinstance(expected, dict) else expected
    return (f"nki-library rmsnorm_tkg fp16 [{batch},{seq},{hidden}]", lambda: kernel(dx, dgamma, dout),
            lambda: F.rms_norm(dx, (hidden,), dgamma.view(hidden), 1e-6),
            lambda: F.rms_norm(x, (hidden,), gamma.view(hidden), 1e-6), close_to(dout, expected, 2e-2))


def library_attention_case(heads=8, seq=1024, dim=128):
    """attention_cte (causal; q, k [B, d, S], v [B, S, d]) against F.scaled_dot_product_attention."""
    kernel, ref = library("attention.attention_cte").attention_cte, library("attention.attention_cte_torch")
    g = torch.Generator().manual_seed(4)
    q, k = (torch.randn(heads, dim, seq, generator=g).bfloat16() for _ in range(2))
    v = torch.randn(heads, seq, dim, generator=g).bfloat16()
    dq, dk, dv = q.to("neuron"), k.to("neuron"), v.to("neuron")
    scale = dim ** -0.5
    got = kernel(dq, dk, dv, scale=scale, tp_q=False)
    expected = ref.attention_cte_torch_ref(q, k, v, scale=scale, tp_q=False)
    expected = next(iter(expected.values())) if isinstance(expected, dict) else expected
    # the native and CPU sides take [1, heads, seq, dim], laid out before timing
    nq, nk = (t.transpose(1, 2).unsqueeze(0).contiguous() for t in (dq, dk))
    cq, ck = (t.transpose(1, 2).unsqueeze(0).contiguous() for t in (q, k))
    nv, cv = dv.unsqueeze(0), v.unsqueeze(0)
    return (f"nki-library attention_cte causal bf16 [1,{heads},{seq},{dim}]",
            lambda: kernel(dq, dk, dv, scale=scale, tp_q=False),
            lambda: F.scaled_dot_product_attention(nq, nk, nv, is_causal=True, scale=scale),
            lambda: F.scaled_dot_product_attention(cq, ck, cv, is_causal=True, scale=scale),
            close_to(got[0] if isinstance(got, (tuple, list)) else got, expected, 2e-2))


@contextlib.contextmanager
def neuroncore_v3_sbuf():
    """mlp_cte places its tiles up to NeuronCore-v3's SBUF size (224 KiB per partition, the generation
    nisa.get_nc_version() reports), which torchneuron's rules now model too: kept so older checkouts bench alike."""
    import torchneuron.nki._context as context
    saved, context.SBUF_BYTES_PER_PARTITION = context.SBUF_BYTES_PER_PARTITION, 224 * 1024
    try:
        yield
    finally:
        context.SBUF_BYTES_PER_PARTITION = saved


def library_mlp_case(seq=512, hidden=1024, inter=448):
    """mlp_cte (SiLU gate, no norm, no quantization) against the same products on neuron: down(silu(x
    gate) * (x up)), the formula of the library's own golden (norm_mlp_ref). The library's entry,
    core/mlp/mlp.py, does not import (an IndentationError upstream), so a kernel of ours builds its
    MLPParameters as mlp.py does and calls mlp_cte."""
    mlp_cte, params = library("mlp.mlp_cte.mlp_cte").mlp_cte, library("mlp.mlp_parameters")
    act = library("utils.common_types").ActFnType.SiLU

    @nki.jit
    def mlp(hidden_tensor, gate_w, up_w, down_w):
        p = params.MLPParameters(hidden_tensor=hidden_tensor, gate_proj_weights_tensor=gate_w, up_proj_weights_tensor=up_w,
                                 down_proj_weights_tensor=down_w, activation_fn=act)
        out = nl.ndarray((p.batch_size, p.sequence_len, p.hidden_size), dtype=p.output_dtype, buffer=nl.shared_hbm)
        mlp_cte(p, out, None)
        return out

    g = torch.Generator().manual_seed(5)
    x = torch.randn(1, seq, hidden, generator=g).bfloat16()
    gate, up = ((torch.randn(hidden, inter, generator=g) * hidden ** -0.5).bfloat16() for _ in range(2))
    down = (torch.randn(inter, hidden, generator=g) * inter ** -0.5).bfloat16()
    dx, dgate, dup, ddown = (t.to("neuron") for t in (x, gate, up, down))

    def run():
        with neuroncore_v3_sbuf():
            return mlp(dx, dgate, dup, ddown)
    got = run()
    expected = (F.silu(x.float() @ gate.float()) * (x.float() @ up.float())) @ down.float()
    return (f"nki-library mlp_cte SiLU bf16 [{seq},{hidden}]x{inter}", run,
            lambda: (F.silu(dx @ dgate) * (dx @ dup)) @ ddown, lambda: (F.silu(x @ gate) * (x @ up)) @ down,
            close_to(got, expected, 2e-2))


def library_cases():
    """The nki-library rows, each checked against its reference; none (and how to get the library)
    when TORCHNEURON_NKI_LIBRARY_SRC does not name its src/ folder."""
    src = os.environ.get(LIBRARY_ENV)
    if not src or not os.path.isdir(os.path.join(src, "nkilib_src")):
        print(f"nki-library rows skipped: git clone https://github.com/aws-neuron/nki-library and set "
              f"{LIBRARY_ENV}=<clone>/src (now {src!r})")
        return []
    nki.install()
    sys.path.insert(0, src)
    cases = []
    for make in (library_rmsnorm_case, library_attention_case, library_mlp_case):
        try:
            name, nki_fn, native_fn, cpu_fn, (ok, err) = make()
        except Exception as e:  # a kernel that does not run is reported, not timed
            print(f"{make.__name__}: does not run: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
            continue
        print(f"{name}: {'matches' if ok else 'DOES NOT MATCH'} its reference (max error {err:.3g})", flush=True)
        if ok:
            cases.append((name, nki_fn, native_fn, cpu_fn))
    return cases


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
    library_only = "--library-only" in sys.argv[1:]
    cases = [] if library_only else [attention_case(torch.float32, 64), attention_case(torch.float32, 128),
                                      attention_case(torch.bfloat16, 128), rms_case(), matmul_case()]
    cases += library_cases()
    print(f"{'case':56s} {'NKI ms':>8s} {'native ms':>10s} {'CPU ms':>8s} {'NKI/native':>11s} {'NKI/CPU':>8s}")
    for name, nki_fn, native_fn, cpu_fn in cases:
        t_nki, t_native, t_cpu = seconds(nki_fn, "neuron"), seconds(native_fn, "neuron"), seconds(cpu_fn, "cpu")
        print(f"{name:56s} {t_nki * 1e3:8.2f} {t_native * 1e3:10.2f} {t_cpu * 1e3:8.2f} "
              f"{t_native / t_nki:10.2f}x {t_cpu / t_nki:7.2f}x", flush=True)
    if library_only:
        return
    print()
    print(f"{'compiled vs interpreter':44s} {'compiled ms':>11s} {'interp ms':>10s} {'speedup':>8s}")
    small = [attention_case(torch.float32, 64, seq=512, heads=2), rms_case(rows=1024, hidden=1024), matmul_case(512)]
    for name, nki_fn, _, _ in small:
        t_compiled = seconds(nki_fn, "neuron")
        t_interp = interpreted(nki_fn)
        print(f"{name:44s} {t_compiled * 1e3:11.2f} {t_interp * 1e3:10.1f} {t_interp / t_compiled:7.0f}x", flush=True)


if __name__ == "__main__":
    main()
