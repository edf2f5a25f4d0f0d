"""NKI's float8_e4m3 (IEEE-style: exponent 15 holds the infinities and NaNs, largest finite 240;
not torch's float8_e4m3fn) in device memory, held as its bytes: DMAs encode (to nearest, ties to
even, infinity from 248 on) and decode, and an on-chip float32 word seen as four float8_e4m3 bytes
reaches device memory bit for bit. Checked against a NumPy reference built from the bit layout."""
import numpy as np
import pytest

from torchneuron import nki
from torchneuron.nki import isa as nisa
from torchneuron.nki import language as nl

from nki_modes import RUNS, run


def e4m3_value(code: int) -> float:
    """The value of a float8_e4m3 byte, from its sign / exponent / mantissa fields."""
    sign, exponent, mantissa = code >> 7, (code >> 3) & 15, code & 7
    if exponent == 15:
        value = np.inf if mantissa == 0 else np.nan
    elif exponent == 0:
        value = mantissa / 8 * 2.0 ** -6
    else:
        value = (1 + mantissa / 8) * 2.0 ** (exponent - 7)
    return -value if sign else value


VALUES = np.array([e4m3_value(c) for c in range(256)])


def e4m3_code(x: float):
    """The byte x rounds to (None for NaN, whose byte only has to be a NaN's)."""
    if np.isnan(x):
        return None
    sign = 128 if np.signbit(x) else 0
    a = abs(float(x))
    if a >= 248.0:
        return sign | 0x78
    finite = VALUES[:0x78]  # the non-negative finite bytes, in increasing value
    distance = np.abs(finite - a)
    nearest = np.flatnonzero(distance == distance.min())
    code = nearest[0] if len(nearest) == 1 else next(c for c in nearest if c % 2 == 0)  # ties: even mantissa
    return sign | int(code)


def _inputs():
    rng = np.random.default_rng(21)
    x = (rng.standard_normal((128, 32)) * 2.0 ** rng.integers(-12, 9, (128, 32))).astype(np.float32)
    finite = VALUES[:0x78]
    midpoints = (finite[:-1] + finite[1:]) / 2  # every tie, subnormal and normal
    special = [0.0, -0.0, -1e-5, 2.0 ** -9, 2.0 ** -10, 1.5 * 2.0 ** -10, 240.0, 244.0, 247.9, 248.0, 250.0, 1e6,
               np.inf, -np.inf, np.nan, -np.nan, 448.0, -3.75]
    flat = x.reshape(-1)
    flat[:len(midpoints)] = midpoints
    flat[len(midpoints):2 * len(midpoints)] = -midpoints
    flat[2 * len(midpoints):2 * len(midpoints) + len(special)] = special
    return x


@nki.jit
def k_round_trip(x):
    codes = nl.ndarray(x.shape, nl.float8_e4m3, buffer=nl.shared_hbm)
    back = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    q = nl.ndarray(x.shape, nl.float8_e4m3, buffer=nl.sbuf)
    nisa.tensor_copy(dst=q, src=nl.load(x))
    nisa.dma_copy(dst=codes, src=q)  # encoded on the way to device memory
    b = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=b, src=codes)  # and decoded on the way back
    nl.store(back, b)
    return codes, back


@pytest.mark.parametrize("mode", RUNS)
def test_float8_e4m3_bytes_and_values(mode):
    x = _inputs()
    codes, back = run(k_round_trip, mode, x)
    codes, back = np.asarray(codes), np.asarray(back)
    assert codes.dtype == np.uint8  # its bytes (torch has no IEEE-style e4m3)
    for value, code, decoded in zip(x.reshape(-1), codes.reshape(-1), back.reshape(-1)):
        expected = e4m3_code(value)
        if expected is None:
            assert (code >> 3) & 15 == 15 and code & 7, (value, code)
            assert np.isnan(decoded)
        else:
            assert code == expected, (value, hex(code), hex(expected))
            assert decoded == VALUES[expected] and np.signbit(decoded) == np.signbit(VALUES[expected]), (value, decoded)


@nki.jit
def k_word_bytes(x):
    out = nl.ndarray((x.shape[0], 4), nl.float8_e4m3, buffer=nl.shared_hbm)
    t = nl.load(x)
    nisa.dma_copy(dst=out, src=t.ap([[4, x.shape[0]], [1, 4]], dtype=nl.float8_e4m3))
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_float32_words_as_float8_e4m3_bytes(mode):
    """Every byte of a word reaches device memory, those that are NaNs or infinities as float8_e4m3 too."""
    words = np.array([0x3F7F78FF, 0xC2F8797F, 0x00000001, 0x7F7FFFFF, 0x80000000, 0x3C23D70A], np.uint32)
    rng = np.random.default_rng(22)
    words = np.concatenate([words, rng.integers(0, 2 ** 32, 122, dtype=np.uint64).astype(np.uint32)])
    words = words[(words & 0x7F800000) != 0x7F800000]  # finite words (a NaN word's payload is not kept)
    x = words.view(np.float32).reshape(-1, 1)
    got = np.asarray(run(k_word_bytes, mode, x))
    np.testing.assert_array_equal(got, x.view(np.uint8).reshape(-1, 4))


@nki.jit
def k_fill(x):
    out = nl.ndarray(x.shape, nl.float8_e4m3, buffer=nl.shared_hbm)
    nisa.memset(dst=out, value=1.0)
    return out


def test_filling_float8_e4m3_bytes_with_a_nonzero_value_is_refused():
    with pytest.raises(nki.NKIError, match="float8_e4m3 bytes"):
        run(k_fill, "interpreted", np.zeros((4, 4), np.float32))
