"""OCP MX microscaling: packed tiles (float8_e4m3fn_x4, float8_e5m2_x4, float4_e2m1fn_x4) loaded
from and stored to device-memory bytes, nisa.quantize_mx (scales and values, bit for bit) and
nisa.nc_matmul_mx, compiled and interpreted, against references written here in NumPy and CPU
PyTorch (torch's float8 casts round to nearest even)."""
import numpy as np
import pytest
import torch

import torchneuron  # noqa: F401
from torchneuron import nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_modes import RUNS, run  # noqa: E402  (compiled and interpreted)
# name: (torch dtype of one value, largest exponent, largest value)
FP8 = {"float8_e4m3fn_x4": (torch.float8_e4m3fn, 8, 448.0), "float8_e5m2_x4": (torch.float8_e5m2, 15, 57344.0)}
FP4_VALUES = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)



def quadrant_row(g):
    """The partition of the scale tile holding group g's scales (groups of 8 partitions)."""
    return g // 4 * 32 + g % 4


def ref_quantize(x, name):
    """(FP8 bytes [P, F], scales [P / 8, F / 4]) of x [P, F]: per group of 8 partitions x 4 values,
    the float32 exponent of the largest magnitude less the format's largest exponent."""
    fp8, emax, largest = FP8[name]
    p, f = x.shape
    amax = np.abs(x.astype(np.float64)).reshape(p // 8, 8, f // 4, 4).max(axis=(1, 3))
    _, e = np.frexp(amax)
    biased = np.where(amax >= 2.0 ** -126, e - 1 + 127, 0)
    scales = np.maximum(biased - emax, 0)
    factor = np.repeat(np.repeat(2.0 ** (127 - scales), 8, axis=0), 4, axis=1)
    scaled = np.clip(x.astype(np.float64) * factor, -largest, largest)
    q = torch.from_numpy(scaled).float().to(fp8)
    return q.view(torch.uint8).numpy(), scales.astype(np.uint8)


def decode_fp8(codes, name):
    return torch.from_numpy(codes.astype(np.uint8)).view(FP8[name][0]).float().numpy().astype(np.float64)


def dequantize(values, scales):
    """values [K, 4 F] times 2 ** (scale - 127) per group [K / 8, F]."""
    return values * np.repeat(np.repeat(2.0 ** (scales.astype(np.float64) - 127), 8, axis=0), 4, axis=1)


def load_scales(scale_hbm, rows):
    """Scales [rows / 8, F] from device memory into the quadrant layout of a [rows, F] SBUF tile."""
    groups, f = scale_hbm.shape
    tile = nl.ndarray((rows, f), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=tile, value=0)
    for g in range(groups):
        nisa.dma_copy(dst=tile[quadrant_row(g):quadrant_row(g) + 1, :], src=scale_hbm[g:g + 1, :])
    return tile


@nki.jit
def k_quantize(x, mx_dtype):
    p, f = x.shape
    src = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x)
    data = nl.ndarray((p, f // 4), dtype=mx_dtype, buffer=nl.sbuf)
    scale = nl.ndarray((p, f // 4), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=scale, value=0)
    nisa.quantize_mx(dst=data, src=src, dst_scale=scale)
    out = nl.ndarray((p, f // 4), dtype=nl.int32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out.ap(pattern=[[f // 4, p], [1, f // 4]], dtype=mx_dtype), src=data)
    out_scale = nl.ndarray((p, f // 4), dtype=nl.uint8, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out_scale, src=scale)
    return out, out_scale


@pytest.mark.parametrize("mode", RUNS)
@pytest.mark.parametrize("name", sorted(FP8))
@pytest.mark.parametrize("p", [32, 128])
def test_quantize_mx_bit_exact(mode, name, p):
    rng = np.random.default_rng(p)
    x = rng.standard_normal((p, 64)) * np.exp2(rng.integers(-20, 20, size=(p, 1)))
    x[:8, :4] = 0.0  # an all-zero group: scale 0, values 0
    x[8:16, 4:8] = np.array([448.0, -449.0, 1e-3, 57344.0])  # saturation in e4m3
    x = torch.from_numpy(x).bfloat16()
    data, scale = run(k_quantize, mode, x.to("neuron"), getattr(nl, name))
    data, scale = np.asarray(torch.as_tensor(data).cpu()), np.asarray(torch.as_tensor(scale).cpu())
    want_bytes, want_scales = ref_quantize(x.float().numpy(), name)
    np.testing.assert_array_equal(data.view(np.uint8).reshape(p, 64), want_bytes)
    rows = [quadrant_row(g) for g in range(p // 8)]
    np.testing.assert_array_equal(scale[rows], want_scales)
    others = np.setdiff1d(np.arange(p), rows)
    assert (scale[others] == 0).all()  # the other partitions are left as they were


@nki.jit
def k_roundtrip(codes, mx_dtype):
    """Device-memory bytes -> packed SBUF tile (decoded) -> bytes again."""
    k, f = codes.shape
    n = f * 4 // mx_dtype.itemsize
    tile = nl.ndarray((k, n), dtype=mx_dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=codes.ap(pattern=[[n, k], [1, n]], dtype=mx_dtype))
    copy = nl.ndarray((k, n), dtype=mx_dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=copy, src=tile)
    out = nl.ndarray(codes.shape, dtype=codes.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out.ap(pattern=[[n, k], [1, n]], dtype=mx_dtype), src=copy)
    return out


@pytest.mark.parametrize("mode", RUNS)
@pytest.mark.parametrize("name", ["float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4"])
def test_packed_bytes_round_trip(mode, name):
    codes = np.arange(256, dtype=np.uint8).reshape(8, 32)
    if name == "float8_e4m3fn_x4":  # the NaN codes come back as 0x7f
        codes[(codes & 0x7F) == 0x7F] = 0x7E
    if name == "float8_e5m2_x4":
        codes[(codes & 0x7F) > 0x7C] = 0x7B
    got = run(k_roundtrip, mode, codes.view(np.int32), getattr(nl, name))
    np.testing.assert_array_equal(np.asarray(torch.as_tensor(got).cpu()).view(np.uint8), codes)


@nki.jit
def k_matmul_mx(st, st_scale, mv, mv_scale, mx_dtype, out_dtype, twice):
    """dst = st^T @ mv in MX (K = 128 partitions x 4), optionally the product added twice."""
    k = st.shape[0]
    m = st_scale.shape[1]
    n = mv_scale.shape[1]
    a = nl.ndarray((k, m), dtype=mx_dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=st.ap(pattern=[[m, k], [1, m]], dtype=mx_dtype))
    b = nl.ndarray((k, n), dtype=mx_dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=b, src=mv.ap(pattern=[[n, k], [1, n]], dtype=mx_dtype))
    sa, sb = load_scales(st_scale, k), load_scales(mv_scale, k)
    acc = nl.ndarray((m, n), dtype=out_dtype, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=acc, stationary=a, moving=b, stationary_scale=sa, moving_scale=sb)
    if twice:
        nisa.nc_matmul_mx(acc, a, b, sa, sb)  # accumulates into the open group
    res = nl.ndarray((m, n), dtype=out_dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    out = nl.ndarray((m, n), dtype=out_dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=res)
    return out


def mx_product(a, b):
    """stationary values [K, 4 M] and moving [K, 4 N] contracted over K and each element's 4 values."""
    k = a.shape[0]
    return np.einsum("kiq,kjq->ij", a.reshape(k, -1, 4), b.reshape(k, -1, 4))


def random_mx(rng, k, f, name):
    """(device bytes, scales [k / 8, f], dequantized values [k, 4 f]) of random MX data."""
    scales = rng.integers(120, 134, size=(k // 8, f)).astype(np.uint8)
    if name == "float4_e2m1fn_x4":
        nibbles = rng.integers(0, 16, size=(k, 4 * f)).astype(np.uint8)
        values = FP4_VALUES[nibbles].astype(np.float64)
        raw = (nibbles[:, 0::2] | (nibbles[:, 1::2] << 4)).astype(np.uint8)  # [k, 2 f] bytes
        return raw, scales, dequantize(values, scales)
    codes = rng.integers(0, 256, size=(k, 4 * f)).astype(np.uint8)
    codes[(codes & 0x7F) >= 0x7C] &= 0x3F  # finite values only
    return codes.view(np.int32), scales, dequantize(decode_fp8(codes, name), scales)


@pytest.mark.parametrize("mode", RUNS)
@pytest.mark.parametrize("name", ["float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4"])
def test_nc_matmul_mx_matches_dequantized_product(mode, name):
    rng = np.random.default_rng(7)
    st, st_scale, a = random_mx(rng, 128, 32, name)
    mv, mv_scale, b = random_mx(rng, 128, 64, name)
    got = run(k_matmul_mx, mode, st, st_scale, mv, mv_scale, getattr(nl, name), nl.float32, False)
    want = mx_product(a, b)
    got = np.asarray(torch.as_tensor(got).cpu())
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("mode", RUNS)
def test_nc_matmul_mx_accumulates_and_rounds_once(mode):
    rng = np.random.default_rng(3)
    st, st_scale, a = random_mx(rng, 64, 16, "float8_e4m3fn_x4")
    mv, mv_scale, b = random_mx(rng, 64, 32, "float8_e4m3fn_x4")
    got = run(k_matmul_mx, mode, st, st_scale, mv, mv_scale, nl.float8_e4m3fn_x4, nl.bfloat16, True)
    want = torch.from_numpy(2 * mx_product(a, b)).float().bfloat16().float().numpy()
    got = torch.as_tensor(got).cpu().float().numpy()
    np.testing.assert_allclose(got, want, rtol=2 ** -7, atol=0)


@nki.jit
def k_bad_packed_add(codes):
    k, f = codes.shape
    t = nl.ndarray((k, f), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=codes.ap(pattern=[[f, k], [1, f]], dtype=nl.float8_e4m3fn_x4))
    u = nl.ndarray((k, f), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=u, data1=t, data2=t, op=nl.add)
    return codes


@nki.jit
def k_reinterpret_float(x):
    """An on-chip tile's bytes seen as another dtype: refused (device memory only)."""
    s = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=x)
    t = nl.ndarray((x.shape[0], x.shape[1] // 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t, src=s.ap(pattern=[[x.shape[1] // 2, x.shape[0]], [1, x.shape[1] // 2]], dtype=nl.float32))
    return x


@pytest.mark.parametrize("mode", RUNS)
def test_packed_misuse_is_refused(mode):
    with pytest.raises(nki.NKIError, match="packed MX tiles"):
        run(k_bad_packed_add, mode, np.zeros((8, 4), np.int32))
    with pytest.raises(nki.NKIError, match="on chip, float32 words"):
        run(k_reinterpret_float, mode, np.zeros((8, 4), np.float16))


@nki.jit
def k_matmul_mx_words(st_words, st_scale, mv_words, mv_scale):
    """AWS's MXFP4 projection layout: FP4 weights arrive as uint16 words and stay so on chip;
    FP8 (e5m2) activations arrive as int32 words, DMAed into a packed tile; operands, scales and
    dst are 3-D views with a unit dim (or an .ap() pattern); the scales come from compact [K / 8, ...]
    arrays."""
    k, t, m = st_words.shape
    n = mv_words.shape[2]
    a = nl.ndarray((k, t, m), dtype=st_words.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=st_words)
    b = nl.ndarray((k, t, n), dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)
    nisa.dma_copy(dst=b, src=mv_words[:, 0:t, :])
    sa = nl.ndarray((k, t, m), dtype=nl.uint8, buffer=nl.sbuf)
    sb = nl.ndarray((k, t, n), dtype=nl.uint8, buffer=nl.sbuf)
    for q in range(k // 32):
        nisa.dma_copy(dst=sa[q * 32:q * 32 + 4, :, :], src=st_scale[q * 4:q * 4 + 4, :, :])
        nisa.dma_copy(dst=sb[q * 32:q * 32 + 4, :, :], src=mv_scale[q * 4:q * 4 + 4, :, :])
    acc = nl.ndarray((m, t, n), dtype=nl.float32, buffer=nl.psum)
    for i in range(t):
        moving = b.ap([[t * n, k], [1, n]], offset=i * n)  # .ap() on a packed tile counts its elements
        nisa.nc_matmul_mx(dst=acc[:, i, :], stationary=a[:, i:i + 1, :], moving=moving,
                          stationary_scale=sa[:, i:i + 1, :], moving_scale=sb[:, i:i + 1, :])
    res = nl.ndarray((m, t, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    out = nl.ndarray((m, t, n), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=res)
    return out


@pytest.mark.parametrize("mode", RUNS)
@pytest.mark.parametrize("records", [False, True])
def test_nc_matmul_mx_on_words_and_3d_views(mode, records):
    rng = np.random.default_rng(11)
    k, t, m, n = 64, 3, 16, 8
    fp4 = [random_mx(rng, k, m, "float4_e2m1fn_x4") for _ in range(t)]
    fp8 = [random_mx(rng, k, n, "float8_e5m2_x4") for _ in range(t)]
    st_words = np.stack([raw.view(np.uint16) for raw, _, _ in fp4], axis=1)  # [k, t, m]
    mv_words = np.stack([raw for raw, _, _ in fp8], axis=1)
    st_scale = np.stack([s for _, s, _ in fp4], axis=1)
    mv_scale = np.stack([s for _, s, _ in fp8], axis=1)
    if records:  # NumPy arrays as neuron_dtypes packs them: words in a record dtype named after the format
        st_words = st_words.view(nl.float4_e2m1fn_x4.dtype)
        mv_words = mv_words.view(nl.float8_e5m2_x4.dtype)
    got = run(k_matmul_mx_words, mode, st_words, st_scale, mv_words, mv_scale)
    want = np.stack([mx_product(fp4[i][2], fp8[i][2]) for i in range(t)], axis=1)
    got = np.asarray(torch.as_tensor(got).cpu())
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@nki.jit
def k_quantize_slices(x):
    """quantize_mx on 4-D / 3-D slices (AWS's RMSNorm-MX layout): src [P, 1, T, 4] of a [P, 2, T, 4]
    tile, dst and scales [P, 1, T] of [P, 2, T] tiles, one slice per step of the second dim."""
    p, h, t, q = x.shape
    src = nl.ndarray((p, h, t, q), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x)
    data = nl.ndarray((p, h, t), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    scale = nl.ndarray((p, h, t), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=scale, value=0)
    for i in nl.sequential_range(h):
        nisa.quantize_mx(src=src[0:p, i:i + 1, 0:t, 0:q], dst=data[0:p, i:i + 1, 0:t],
                         dst_scale=scale[0:p, i:i + 1, 0:t])
    out = nl.ndarray((p, h * t), dtype=nl.float8_e4m3fn_x4, buffer=nl.shared_hbm)  # int32 words
    nisa.dma_copy(dst=out, src=data.reshape((p, h * t)))  # a packed tile reshapes by its elements
    out_scale = nl.ndarray((p, h, t), dtype=nl.uint8, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out_scale, src=scale)
    return out, out_scale


@pytest.mark.parametrize("mode", RUNS)
def test_quantize_mx_on_slices(mode):
    rng = np.random.default_rng(5)
    x = torch.from_numpy(rng.standard_normal((32, 2, 8, 4)) * 8).bfloat16()
    data, scale = run(k_quantize_slices, mode, x.to("neuron"))
    data, scale = np.asarray(torch.as_tensor(data).cpu()).reshape(32, 2, 8), np.asarray(torch.as_tensor(scale).cpu())
    rows = [quadrant_row(g) for g in range(4)]
    for i in range(2):
        want_bytes, want_scales = ref_quantize(x[:, i].reshape(32, 32).float().numpy(), "float8_e4m3fn_x4")
        np.testing.assert_array_equal(data[:, i].view(np.uint8).reshape(32, 32), want_bytes)
        np.testing.assert_array_equal(scale[rows, i], want_scales)
