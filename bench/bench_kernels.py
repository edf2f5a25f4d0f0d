"""Kernel-family benchmarks: neuron vs CPU PyTorch on the same inputs in one run, printed as
throughput ratios (neuron / CPU; above 1 means neuron is faster), plus a tiny-GPT step."""

import argparse
import copy
import itertools
import json
import os
import sys
import time
import warnings

import torch
import torch.nn.functional as F

import torchneuron

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from tiny_gpt import TinyGPT, train_step  # noqa: E402

warnings.simplefilter("ignore")


def seconds_per_call(fn, device, repeats=5, min_time=0.2):
    """Best-of-`repeats` seconds per call, each repeat running at least `min_time` seconds."""
    sync = torch.neuron.synchronize if device == "neuron" else (lambda: None)
    fn()
    sync()
    calls = 1
    while True:  # size a repeat
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        if time.perf_counter() - start >= min_time / 4 or calls >= 1 << 16:
            break
        calls *= 2
    return best_of_calls(fn, sync, calls, repeats)


def best_of_calls(fn, sync, calls, repeats):
    """Seconds per call: the best of `repeats` rounds of `calls` calls, each round synchronized."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def case_inputs(device):
    g = torch.Generator().manual_seed(0)
    big = torch.randn(4 << 20, generator=g)
    small = torch.randn(64, generator=g)
    mat = torch.randn(1024, 1024, generator=g)
    rows = torch.randn(2048, 1024, generator=g)
    q = torch.randn(8, 8, 256, 64, generator=g)
    qkv = torch.randn(16, 64, 3, 4, 16, generator=g)  # the tiny GPT's heads: [batch, seq, q/k/v, head, dim]
    hidden = torch.randn(16, 64, 256, generator=g)
    heads = torch.randn(64, 64, 16, generator=g)  # the tiny GPT's 16 x 4 heads of 64 x 16
    logits = torch.randn(8, 1024, 96, generator=g)  # its logits; taken in turn, as new data each step
    image = torch.randn(16, 16, 32, 32, generator=g)
    weight = torch.randn(32, 16, 3, 3, generator=g)
    conv_grad = torch.randn(16, 32, 32, 32, generator=g)
    tokens = torch.randint(0, 50000, (8192,), generator=g)
    grad = torch.randn(8192, 128, generator=g)
    sample_grid = torch.rand(16, 32, 32, 2, generator=g) * 2.2 - 1.1
    video, weight3d = torch.randn(4, 16, 8, 16, 16, generator=g), torch.randn(16, 16, 3, 3, 3, generator=g)
    signals = torch.randn(64, 4096, generator=g)  # e.g. a batch of audio frames for a spectral loss
    systems = torch.randn(32, 64, 64, generator=g) + 8 * torch.eye(64)  # well-conditioned
    spd = systems @ systems.mT
    table, bag_offsets = torch.randn(50000, 64, generator=g), torch.arange(0, 8192, 16)  # bags of 16 tokens
    rows_index = torch.randint(0, 64, (1024, 256), generator=g)  # rows of 256 scattered into 64
    features = torch.randn(32, 512, 7, 7, generator=g)  # a ResNet's last feature maps
    sequence = torch.randn(64, 128, 256, generator=g)
    gather_index = torch.randint(0, 1024, (256, 512), generator=g)
    weight1d, depthwise = torch.randn(128, 128, 3, generator=g), torch.randn(16, 1, 3, 3, generator=g)
    ctc_log_probs = torch.randn(200, 16, 32, generator=g).log_softmax(2)  # 200 frames, 16 utterances, 32 symbols
    ctc_targets = torch.randint(1, 32, (16, 40), generator=g)
    unit_lower = torch.randn(32, 64, 64, generator=g).tril(-1) * 0.1  # chunks of gated delta-rule attention
    chunk_values = torch.randn(32, 64, 128, generator=g)
    rope_pairs = torch.randn(16, 64, 4, 32, 2, generator=g)  # queries as (real, imaginary) pairs
    rope_freqs = torch.polar(torch.ones(1, 64, 1, 32), torch.rand(1, 64, 1, 32, generator=g) * 6.28)
    ln_x, ln_w, ln_b = torch.randn(16, 64, 64, generator=g), torch.randn(64, generator=g), torch.randn(64, generator=g)
    _, ln_mean, ln_rstd = torch.ops.aten.native_layer_norm(ln_x, [64], ln_w, ln_b, 1e-5)
    inputs = dict(big=big, small=small, mat=mat, rows=rows, q=q, qkv=qkv, hidden=hidden, heads=heads, logits=logits,
                  image=image, weight=weight, conv_grad=conv_grad, tokens=tokens, grad=grad, table=table, bag_offsets=bag_offsets, video=video, weight3d=weight3d,
                  sample_grid=sample_grid, signals=signals, spectra=torch.fft.rfft(signals), hann=torch.hann_window(400), systems=systems, spd=spd,
                  rows_index=rows_index, unit_lower=unit_lower, chunk_values=chunk_values,
                  ctc_log_probs=ctc_log_probs, ctc_targets=ctc_targets,
                  mat_bf16=mat.bfloat16(), features=features, sequence=sequence, gather_index=gather_index,
                  weight1d=weight1d, depthwise=depthwise, rope_pairs=rope_pairs, rope_freqs=rope_freqs,
                  ln_x=ln_x, ln_w=ln_w, ln_b=ln_b, ln_mean=ln_mean, ln_rstd=ln_rstd)
    return {k: v.to(device) for k, v in inputs.items()}


_turn = itertools.count()

CASES = [
    ("pointwise large (4M, x*2+1)", lambda t: t["big"].mul(2).add_(1)),
    ("pointwise small (64, x*2+1)", lambda t: t["small"].mul(2).add_(1)),
    ("reduction (4M sum)", lambda t: t["big"].sum()),
    ("reduction (2048x1024 rows)", lambda t: t["rows"].sum(dim=1)),
    ("GEMM f32 1024^3", lambda t: t["mat"] @ t["mat"]),
    ("GEMM bf16 1024^3", lambda t: t["mat_bf16"] @ t["mat_bf16"]),
    ("GEMM f32 1024x64 @ 64x256 (tiny GPT MLP)", lambda t: t["ln_x"].view(1024, 64) @ t["hidden"][0]),
    ("GEMM f32 64x1024 @ 1024x256 (its weight grad)",
     lambda t: t["ln_x"].view(1024, 64).t() @ t["hidden"].view(1024, 256)),
    ("solve_triangular (32 x 64x64 unit lower, 128 columns)", lambda t: torch.linalg.solve_triangular(
        t["unit_lower"], t["chunk_values"], upper=False, unitriangular=True)),
    ("bmm f32 64 x (64x16 @ 16x64) (heads)", lambda t: torch.bmm(t["heads"], t["heads"].transpose(1, 2))),
    ("bmm f32 64 x (128x256 @ 256x128)", lambda t: torch.bmm(t["sequence"], t["sequence"].transpose(1, 2))),
    ("transpose copy (256x1024)", lambda t: t["rows"][:256].t().contiguous()),
    ("topk 10 (256 rows of 1024)", lambda t: t["rows"][:256].topk(10, -1)),
    ("complex multiply, rotary embedding (16x64x4x32)",
     lambda t: torch.view_as_real(torch.view_as_complex(t["rope_pairs"]) * t["rope_freqs"])),
    ("softmax (2048x1024)", lambda t: torch.softmax(t["rows"], dim=1)),
    # Fresh rows each call: with the same rows every call, branches on the data are learned.
    ("log-softmax (1024x96, 8 inputs in turn)", lambda t: torch.log_softmax(t["logits"][next(_turn) % 8], -1)),
    ("log-softmax backward (2048x1024)",
     lambda t: torch.ops.aten._log_softmax_backward_data(t["rows"], t["rows"], 1, torch.float32)),
    ("layer norm (2048x1024)", lambda t: F.layer_norm(t["rows"], (1024,))),
    ("layer norm backward (16x64x64)", lambda t: torch.ops.aten.native_layer_norm_backward(
        t["ln_x"], t["ln_x"], [64], t["ln_mean"], t["ln_rstd"], t["ln_w"], t["ln_b"], [True, True, True])),
    ("attention (8x8x256x64 causal)", lambda t: F.scaled_dot_product_attention(t["q"], t["q"], t["q"], is_causal=True)),
    ("attention (16x4x64x16 causal)", lambda t: F.scaled_dot_product_attention(
        *t["qkv"].permute(2, 0, 3, 1, 4), is_causal=True)),
    ("GELU (16x64x256)", lambda t: F.gelu(t["hidden"])),
    ("GELU backward (16x64x256)", lambda t: torch.ops.aten.gelu_backward(t["hidden"], t["hidden"])),
    ("log (16x64x256)", lambda t: torch.log(t["hidden"].abs())),
    ("softplus / mish (16x64x256)", lambda t: (F.softplus(t["hidden"]), F.mish(t["hidden"]))),
    ("x % 3 (16x64x256)", lambda t: t["hidden"] % 3),
    ("lgamma / digamma (16x64x256)", lambda t: (torch.lgamma(t["hidden"]), torch.digamma(t["hidden"]))),
    ("gamma samples (16x64x256, alpha = 2|x|)", lambda t: torch._standard_gamma(t["hidden"].abs() * 2)),
    ("poisson samples (16x64x256, rate = 15|x|)", lambda t: torch.poisson(t["hidden"].abs() * 15)),
    ("erfinv (16x64x256)", lambda t: torch.erfinv(t["hidden"].tanh())),
    ("scatter_reduce amax (1024x256 rows into 64)",
     lambda t: t["hidden"][0].scatter_reduce(0, t["rows_index"], t["hidden"].view(1024, 256), "amax")),
    ("conv2d (16x16x32x32, 3x3)", lambda t: F.conv2d(t["image"], t["weight"], padding=1)),
    ("conv2d backward (same)", lambda t: torch.ops.aten.convolution_backward(
        t["conv_grad"], t["image"], t["weight"], None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False])),
    ("conv3d (4x16x8x16x16, 3x3x3)", lambda t: F.conv3d(t["video"], t["weight3d"], padding=1)),
    ("grid_sample bilinear (16x16x32x32, 32x32 grid)", lambda t: F.grid_sample(t["image"], t["sample_grid"], align_corners=False)),
    ("bicubic upsampling (16x16x32x32 to 56x56)",
     lambda t: F.interpolate(t["image"], size=(56, 56), mode="bicubic", align_corners=False)),
    ("trilinear upsampling (4x16x8x16x16, x2)", lambda t: F.interpolate(t["video"], scale_factor=2, mode="trilinear")),
    ("max_pool2d 3x3 stride 2 (16x16x32x32)", lambda t: F.max_pool2d(t["image"], 3, 2, 1)),
    ("max_pool3d 2x2x2 (4x16x8x16x16)", lambda t: F.max_pool3d(t["video"], 2)),
    ("avg_pool2d 3x3 stride 2 (16x16x32x32)", lambda t: F.avg_pool2d(t["image"], 3, 2, 1)),
    ("global average pool (32x512x7x7)", lambda t: F.adaptive_avg_pool2d(t["features"], 1)),
    ("sum over a middle dim (64x128x256, dim 1)", lambda t: t["sequence"].sum(1)),
    ("gather along the last dim (256x512 of 256x1024)", lambda t: t["rows"][:256].gather(1, t["gather_index"])),
    ("gather by an index expanded over the last dim (64x32 rows of 64x128x256)",
     lambda t: t["sequence"].gather(1, (t["gather_index"][:64, :32, None] % 128).expand(64, 32, 256))),
    ("index_fill along dim 1 (256x1024, 512 columns)", lambda t: t["rows"][:256].clone().index_fill_(1, t["gather_index"][0], 1.0)),
    ("reflection pad 2 (16x16x32x32)", lambda t: F.pad(t["image"], (2, 2, 2, 2), mode="reflect")),
    ("tril (16 x 256x256)", lambda t: t["rows"].view(32, 256, 256)[:16].tril()),
    ("conv1d (32x128x50, kernel 3)", lambda t: F.conv1d(t["sequence"][:32, :, :50], t["weight1d"], padding=1)),
    ("depthwise conv2d 3x3 (16x16x32x32)", lambda t: F.conv2d(t["image"], t["depthwise"], padding=1, groups=16)),
    ("depthwise conv2d 3x3 stride 2 (16x16x32x32)",
     lambda t: F.conv2d(t["image"], t["depthwise"], stride=2, padding=1, groups=16)),
    ("depthwise conv2d backward (same, stride 1)", lambda t: torch.ops.aten.convolution_backward(
        t["image"], t["image"], t["depthwise"], None, [1, 1], [1, 1], [1, 1], False, [0, 0], 16, [True, True, False])),
    ("smooth L1 loss (16x64x256)", lambda t: F.smooth_l1_loss(t["hidden"], t["hidden"].flip(0))),
    ("cumsum over rows (2048x1024, dim 0)", lambda t: t["rows"].cumsum(0)),
    ("batch norm, training (16x16x32x32)", lambda t: F.batch_norm(t["image"], None, None, training=True)),
    ("group norm (16x16x32x32, 4 groups)", lambda t: F.group_norm(t["image"], 4)),
    ("embedding_bag sum (512 bags of 16 rows of 64)",
     lambda t: F.embedding_bag(t["tokens"], t["table"], t["bag_offsets"])),
    ("CTC loss and its backward (200 frames, 16 x 40 labels, 32 symbols)", lambda t: torch.ops.aten._ctc_loss_backward(
        torch.ones(16, device=t["ctc_targets"].device), t["ctc_log_probs"], t["ctc_targets"], [200] * 16, [40] * 16,
        *torch.ops.aten._ctc_loss(t["ctc_log_probs"], t["ctc_targets"], [200] * 16, [40] * 16), 0)),
    ("linalg.solve (32 x 64x64, 8 right-hand sides)", lambda t: torch.linalg.solve(t["systems"], t["chunk_values"][:, :, :8])),
    ("linalg.inv / cholesky (32 x 64x64)", lambda t: (torch.linalg.inv(t["systems"]), torch.linalg.cholesky(t["spd"]))),
    ("rfft (64 x 4096)", lambda t: torch.fft.rfft(t["signals"])),
    ("irfft (64 x 2049 to 4096)", lambda t: torch.fft.irfft(t["spectra"])),
    ("fft of 64 x 1000 (factors 2 and 5)", lambda t: torch.fft.fft(t["signals"][:, :1000])),
    ("stft (64 signals of 4096, n_fft 512, hop 160)", lambda t: torch.stft(
        t["signals"], 512, hop_length=160, win_length=400, window=t["hann"], return_complex=True)),
    ("embedding backward (8192x128)", lambda t: torch.ops.aten.embedding_dense_backward(t["grad"], t["tokens"], 50000, -1, False)),
]


def adamw_case(device, fused=False):
    torch.manual_seed(0)
    params = [torch.randn(256, 256, device=device, requires_grad=True) for _ in range(8)]
    for p in params:
        p.grad = torch.randn_like(p)
    optimizer = torch.optim.AdamW(params, lr=1e-3, fused=fused)
    return optimizer.step


def gpt_case(device, model, batch):
    model = copy.deepcopy(model).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = batch.to(device)
    return lambda: train_step(model, optimizer, tokens)


def main():
    """Prints the kernel-family table; --json PATH also writes its rows."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", help="write [name, cpu seconds, neuron seconds] rows here")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, kernel library level "
          f"{torchneuron.cpu_capability()}, ATen level {torch.backends.cpu.get_cpu_capability()}")
    held = [f"{name}={os.environ[name]}" for name in ("OPENBLAS_CORETYPE", "MKL_ENABLE_INSTRUCTIONS")
            if name in os.environ]
    if held:
        print("BLAS libraries held to: " + ", ".join(held))
    cpu_inputs, neuron_inputs = case_inputs("cpu"), case_inputs("neuron")
    rows = []
    for name, fn in CASES:
        cpu = seconds_per_call(lambda: fn(cpu_inputs), "cpu")
        neuron = seconds_per_call(lambda: fn(neuron_inputs), "neuron")
        rows.append((name, cpu, neuron))
    rows.append(("AdamW step (8 x 256x256)", seconds_per_call(adamw_case("cpu"), "cpu"),
                 seconds_per_call(adamw_case("neuron"), "neuron")))
    rows.append(("AdamW step, fused (8 x 256x256)", seconds_per_call(adamw_case("cpu", True), "cpu"),
                 seconds_per_call(adamw_case("neuron", True), "neuron")))
    torch.manual_seed(0)
    model = TinyGPT(vocab=65, context=64, width=128, heads=4, layers=2, dropout=0.0)
    batch = torch.randint(0, 65, (16, 65))
    rows.append(("tiny-GPT train step", seconds_per_call(gpt_case("cpu", model, batch), "cpu", repeats=3),
                 seconds_per_call(gpt_case("neuron", model, batch), "neuron", repeats=3)))
    print(f"\n{'kernel family':<48}{'cpu ms':>10}{'neuron ms':>11}{'neuron/cpu':>12}")
    for name, cpu, neuron in rows:
        print(f"{name:<48}{cpu * 1e3:>10.3f}{neuron * 1e3:>11.3f}{cpu / neuron:>11.2f}x")
    report = torchneuron.fallback_report()
    print(f"\nfallback calls during the benchmark: {sum(report.values())} ({', '.join(sorted(report)) or 'none'})")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"level": torchneuron.cpu_capability(), "aten_level": torch.backends.cpu.get_cpu_capability(),
                       "rows": rows}, out)


if __name__ == "__main__":
    main()
