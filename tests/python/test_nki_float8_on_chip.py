"""On-chip float8 (and tfloat32) tiles hold values of their format: an engine writing one rounds
to nearest (ties to even) as torch's .to(float8) does (float8_e4m3fn, float8_e5m2), NKI's
IEEE-style float8_e4m3 to its own values (infinity from 248 on) and tfloat32 to 10 mantissa bits,
compiled and interpreted alike."""
import numpy as np
import pytest
import torch

from torchneuron import nki
from torchneuron.nki import isa as nisa
from torchneuron.nki import language as nl

from nki_modes import RUNS, run
from test_nki_float8_e4m3 import VALUES, e4m3_code


def _kernel(nki_dtype):
    @nki.jit
    def through_float8(x):
        """x * 1 written into an SBUF tile of nki_dtype, read back as float32: the tile's values."""
        q = nl.ndarray(x.shape, nki_dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=q, data=nl.load(x), op0=nl.multiply, operand0=1.0)
        back = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=back, src=q)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(out, back)
        return out
    return through_float8


def _inputs():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(32, 64, generator=g) * torch.logspace(-10, 6, 64)  # subnormals to past the largest
    x[0, :8] = torch.tensor([float("inf"), -float("inf"), float("nan"), -0.0, 464.0, 465.0, 240.0, 248.0])
    x[1, :6] = torch.tensor([57344.0, 61440.0, 61441.0, 2.0 ** -9, 3 * 2.0 ** -10, -2.5 * 2.0 ** -10])
    return x


@pytest.mark.parametrize("mode", RUNS)
@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2"])
def test_float8_tile_rounds_as_torch(mode, name):
    x = _inputs()
    got = torch.as_tensor(np.asarray(run(_kernel(getattr(nl, name)), mode, x.numpy())))
    want = x.to(getattr(torch, name)).float()
    torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("mode", RUNS)
def test_float8_e4m3_tile_rounds_to_its_values(mode):
    x = _inputs().numpy()
    got = np.asarray(run(_kernel(nl.float8_e4m3), mode, x))
    codes = [e4m3_code(v) for v in x.reshape(-1)]
    want = np.array([np.nan if c is None else VALUES[c] for c in codes]).reshape(x.shape)
    np.testing.assert_array_equal(got, want)


def tf32_reference(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to tfloat32 (10 mantissa bits), to nearest even, on the bits."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x0FFF + ((bits >> 13) & 1)) & ~np.uint64(0x1FFF)
    out = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), np.nan, out)


@pytest.mark.parametrize("mode", RUNS)
def test_tfloat32_tile_rounds_to_ten_mantissa_bits(mode):
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((16, 64)) * 2.0 ** rng.integers(-120, 120, (16, 64))).astype(np.float32)
    x[0, :6] = [1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 3.4e38, np.inf, np.nan, -0.0]  # ties to even, overflow
    got = np.asarray(run(_kernel(nl.tfloat32), mode, x))
    np.testing.assert_array_equal(got, tf32_reference(x))
