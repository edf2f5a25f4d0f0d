"""The kernel library's instruction-set levels: which one runs, how a lower one is forced, and
that every level computes what the highest one computes."""

import json
import os
import warnings

import pytest
import torch

import torchneuron
from torchneuron import _cpu_dispatch

LEVELS = _cpu_dispatch.LEVELS
HIGHEST = _cpu_dispatch.highest_supported()
SUPPORTED = LEVELS[: LEVELS.index(HIGHEST) + 1]


def test_runs_the_level_asked_for_or_the_cpus_highest():
    requested = os.environ.get("TORCHNEURON_CPU_CAPABILITY", "")
    expected = requested if requested in SUPPORTED else HIGHEST
    assert torchneuron.cpu_capability() == expected


@pytest.mark.skipif("ATEN_CPU_CAPABILITY" in os.environ, reason="ATen's level is forced")
def test_highest_level_agrees_with_atens_detection():
    aten = torch.backends.cpu.get_cpu_capability().lower()
    assert HIGHEST == {"avx512": "avx512", "avx2": "avx2"}.get(aten, "default")


@pytest.mark.parametrize("level", SUPPORTED)
def test_forced_level_is_the_one_that_runs(level, run_python):
    result = run_python("import torchneuron; print(torchneuron.cpu_capability())",
                        env={"TORCHNEURON_CPU_CAPABILITY": level})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == level


def test_unknown_level_is_refused_by_name(run_python):
    result = run_python("import torchneuron", env={"TORCHNEURON_CPU_CAPABILITY": "sse9"})
    assert result.returncode != 0
    assert "TORCHNEURON_CPU_CAPABILITY='sse9' is not a level" in result.stderr
    assert "default, avx2, avx512" in result.stderr


def test_a_package_without_the_cpus_level_runs_the_best_level_it_has():
    with pytest.warns(UserWarning, match="built without the avx512 kernel library; running at avx2"):
        assert _cpu_dispatch._built_level_for("avx512", ["default", "avx2"]) == "avx2"
    with pytest.warns(UserWarning, match="running at default"):
        assert _cpu_dispatch._built_level_for("avx2", ["default", "avx512"]) == "default"
    with pytest.raises(ImportError, match="supports up to default; built: avx2"):
        _cpu_dispatch._built_level_for("default", ["avx2"])


@pytest.mark.parametrize("highest", LEVELS)
def test_a_level_above_the_cpus_warns_and_one_at_or_below_does_not(highest):
    """The pure decision, for every CPU level, so it is tested on an AVX-512 host too."""
    for requested in LEVELS:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _cpu_dispatch.check_request(requested, highest)
        above = LEVELS.index(requested) > LEVELS.index(highest)
        messages = [str(w.message) for w in caught]
        assert messages == ([f"TORCHNEURON_CPU_CAPABILITY={requested} is above what this CPU supports; "
                             f"running at {highest}."] if above else []), (requested, highest)
    _cpu_dispatch.check_request("", highest)  # unset: nothing to check
    with pytest.raises(ValueError, match="'sse9' is not a level"):
        _cpu_dispatch.check_request("sse9", highest)


def test_level_above_the_cpu_warns_and_runs_the_highest(run_python):
    """End to end on this CPU: asking for a level it lacks warns and runs its highest. An AVX-512
    CPU has no level above its own; there the request is its own level, which runs silently."""
    code = ("import warnings\nwarnings.simplefilter('always')\n"
            "import torchneuron\nprint(torchneuron.cpu_capability())")
    result = run_python(code, env={"TORCHNEURON_CPU_CAPABILITY": "avx512"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == HIGHEST
    assert ("above what this CPU supports" in result.stderr) == (HIGHEST != "avx512"), result.stderr


# Vectorized kernels of every family: math functions, reductions, softmax, norms, convolution,
# pooling, attention, FFT, copies, optimizers. Each result's bytes are hashed so that two levels
# are compared bit for bit.
_EVERY_FAMILY = r"""
import hashlib, json, torch, torch.nn.functional as F, torchneuron
g = torch.Generator().manual_seed(0)
def r(*shape): return torch.randn(*shape, generator=g).to("neuron")
x, w = r(64, 300), r(300)
img, kernel = r(2, 8, 17, 19), r(16, 8, 3, 3)
q, k, v = r(2, 4, 33, 16), r(2, 4, 33, 16), r(2, 4, 33, 16)
p, grad = r(1000), r(1000)
m1, m2 = torch.zeros(1000, device="neuron"), torch.zeros(1000, device="neuron")
torch._fused_adamw_([p], [grad], [m1], [m2], [], [torch.tensor(1.0, device="neuron")], lr=1e-3,
                    beta1=0.9, beta2=0.999, weight_decay=0.01, eps=1e-8, amsgrad=False, maximize=False)
results = {
    "exp_log_tanh": torch.stack([x.exp(), x.abs().log1p(), x.tanh(), x.sigmoid(), x.erf()]),
    "gelu_silu": torch.stack([F.gelu(x), F.silu(x), F.mish(x), F.softplus(x)]),
    "sum_mean_max": torch.stack([x.sum(1), x.mean(1), x.amax(1), x.var(1), x.norm(dim=1)]),
    "softmax": torch.stack([x.softmax(1), x.log_softmax(1), x.softmax(0)]),
    "norms": torch.stack([F.layer_norm(x, (300,), w, w), F.rms_norm(x, (300,), w)]),
    "conv": F.conv2d(img, kernel, padding=1),
    "depthwise": F.conv2d(img, kernel[:8, :1], groups=8, stride=2),
    "pool": F.max_pool2d(img, 3, 2) + F.avg_pool2d(img, 2),
    "attention": F.scaled_dot_product_attention(q, k, v, is_causal=True),
    "fft": torch.view_as_real(torch.fft.rfft(x, dim=1)),
    "transpose": x.t().contiguous(),
    "bf16": (x.bfloat16() @ x.t().bfloat16()).float(),
    "adamw": p,
}
print(json.dumps({name: hashlib.sha256(t.cpu().contiguous().numpy().tobytes()).hexdigest()
                  for name, t in results.items()}))
"""


@pytest.mark.skipif(len(SUPPORTED) < 2, reason="this CPU has one level only")
def test_every_level_computes_the_same_bits(run_python):
    hashes = {}
    for level in SUPPORTED:
        result = run_python(_EVERY_FAMILY, env={"TORCHNEURON_CPU_CAPABILITY": level}, timeout=120)
        assert result.returncode == 0, result.stderr
        hashes[level] = json.loads(result.stdout)
    differing = {name for name in hashes[HIGHEST] if len({h[name] for h in hashes.values()}) > 1}
    assert not differing, f"results differ between levels {SUPPORTED}: {sorted(differing)}"


def test_compiled_code_targets_the_level(run_python):
    # Against float64: CPU's float GELU is 2e-4 off in the tails. a.abs().sum(): a sum without
    # cancellation, so that its accumulation order cannot matter.
    code = ("import torch, torchneuron\n"
            "torch.manual_seed(0)\n"
            "f = torch.compile(lambda a: torch.nn.functional.gelu(a) * a.abs().sum(), backend='neuron')\n"
            "a = torch.randn(100, 37)\n"
            "expected = (torch.nn.functional.gelu(a.double()) * a.double().abs().sum()).float()\n"
            "torch.testing.assert_close(f(a.to('neuron')).cpu(), expected, rtol=1e-5, atol=1e-5)\n"
            "print(torchneuron._C._compiler.compile_flags())")
    result = run_python(code, env={"TORCHNEURON_CPU_CAPABILITY": "default",
                                   "TORCHNEURON_CACHE_DIR": os.path.join(os.environ.get("TMPDIR", "/tmp"), "tn-level-cache")},
                        timeout=300)
    assert result.returncode == 0, result.stderr
    assert "-march=x86-64 " in result.stdout and "-march=native" not in result.stdout
