"""Float8 tensors in device memory (float8_e4m3fn, float8_e5m2): stored and loaded by compiled and
interpreted kernels, both matching torch's .to(float8) (round to nearest even, its saturation rules)."""
import numpy as np
import pytest
import torch

from torchneuron import nki
import torchneuron.nki.language as nl

FLOAT8 = {"float8_e4m3fn": (torch.float8_e4m3fn, nl.float8_e4m3fn), "float8_e5m2": (torch.float8_e5m2, nl.float8_e5m2)}


def _values():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(16, 64, generator=g) * torch.logspace(-9, 6, 64)  # subnormals to far past the largest
    x[0, :4] = torch.tensor([float("inf"), -float("inf"), float("nan"), 0.0])
    return x


def _store_kernel(nki_dtype):
    @nki.jit
    def store(x):
        out = nl.ndarray(x.shape, nki_dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x))
        return out
    return store


@nki.jit
def load_scaled(x):
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(x), 2.0, dtype=nl.float32))  # a float8 result would round (and saturate)
    return out


@pytest.mark.parametrize("name", FLOAT8)
def test_float8_store_matches_torch(name, monkeypatch):
    torch_dtype, nki_dtype = FLOAT8[name]
    x = _values()
    expected = x.to(torch_dtype).float()
    kernel = _store_kernel(nki_dtype)
    compiled = kernel(x.to("neuron"))
    assert compiled.dtype == torch_dtype
    monkeypatch.setenv("TORCHNEURON_NKI_INTERPRET", "1")
    interpreted = kernel(x.to("neuron"))
    torch.testing.assert_close(compiled.cpu().float(), expected, equal_nan=True, rtol=0, atol=0)
    torch.testing.assert_close(interpreted.cpu().float(), expected, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("name", FLOAT8)
def test_float8_load_matches_torch(name, monkeypatch):
    torch_dtype, _ = FLOAT8[name]
    x = _values().to(torch_dtype)
    expected = x.float() * 2
    compiled = load_scaled(x.to("neuron")).cpu()
    monkeypatch.setenv("TORCHNEURON_NKI_INTERPRET", "1")
    interpreted = load_scaled(x.to("neuron")).cpu()
    np.testing.assert_array_equal(compiled.numpy(), expected.numpy())
    np.testing.assert_array_equal(interpreted.numpy(), expected.numpy())
