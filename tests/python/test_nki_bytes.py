"""Device memory read as another dtype through .ap(pattern, dtype=): bfloat16 pairs as int32 or
float32 words, float32 words as bfloat16 halves, bytes as small integers; and nisa.dma_compute
through an indirect (.ap(vector_offset=)) access. Compiled and interpreted, against NumPy views
of the same bytes."""
import numpy as np
import pytest
import torch

import torchneuron  # noqa: F401
from torchneuron import nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_modes import RUNS, run  # noqa: E402  (compiled and interpreted)



def host(x):
    return torch.as_tensor(x).cpu()


@nki.jit
def k_read_as(x, dtype, out_dtype):
    """x's bytes as [rows, n] elements of dtype, returned as out_dtype."""
    rows = x.shape[0]
    n = x.shape[1] * x.dtype.itemsize // dtype.itemsize
    t = nl.ndarray((rows, n), out_dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.ap(pattern=[[n, rows], [1, n]], offset=0, dtype=dtype))
    out = nl.ndarray((rows, n), out_dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_bf16_pairs_as_int32(mode):
    ints = np.array([[0, 1, -1, 7], [123456, -654321, 2 ** 24, -(2 ** 24)]], dtype=np.int32)  # exact to 2 ** 24
    x = torch.from_numpy(ints).view(torch.bfloat16).to("neuron")  # [2, 8] bf16 holding the words
    got = run(k_read_as, mode, x, nl.int32, nl.int32)
    np.testing.assert_array_equal(host(got).numpy(), ints)


@pytest.mark.parametrize("mode", RUNS)
def test_bf16_pairs_as_float32(mode):
    words = np.array([[1.0, -2.5, 3.1415927, 1e-40], [6.0e30, -0.0, 2.0 ** -126, 123.456]], dtype=np.float32)
    x = torch.from_numpy(words).view(torch.bfloat16).to("neuron")
    got = host(run(k_read_as, mode, x, nl.float32, nl.float32)).numpy()
    np.testing.assert_array_equal(got.view(np.int32), words.view(np.int32))  # bit for bit, -0 and subnormals too


@pytest.mark.parametrize("mode", RUNS)
def test_float32_words_as_bf16_halves(mode):
    words = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    got = host(run(k_read_as, mode, words, nl.bfloat16, nl.float32))
    want = torch.from_numpy(words).view(torch.bfloat16).float()
    torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("mode", RUNS)
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16"])
def test_int32_words_as_small_integers(mode, dtype):
    words = np.random.default_rng(1).integers(-2 ** 31, 2 ** 31 - 1, size=(2, 8)).astype(np.int32)
    got = host(run(k_read_as, mode, words, getattr(nl, dtype), nl.float32)).numpy()
    np.testing.assert_array_equal(got, words.view(dtype).astype(np.float32))


@nki.jit
def k_sum_rows(table, rows):
    """out[p] = table[rows[p, 0]] + table[rows[p, 1]]: a gather, then dma_compute adding a second gather."""
    n, h = table.shape
    p = rows.shape[0]
    idx = nl.ndarray((p, 2), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=rows)
    acc = nl.ndarray((p, h), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=table.ap(pattern=[[h, p], [1, h]], vector_offset=idx[:, 0:1], indirect_dim=0))
    nisa.dma_compute(dst=acc, srcs=[table.ap(pattern=[[h, p], [1, h]], vector_offset=idx[:, 1:2], indirect_dim=0), acc],
                     reduce_op=nl.add)
    out = nl.ndarray((p, h), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_dma_compute_through_an_indirect_access(mode):
    rng = np.random.default_rng(2)
    table = rng.standard_normal((50, 6)).astype(np.float32)
    rows = rng.integers(0, 50, size=(32, 2)).astype(np.int32)
    got = run(k_sum_rows, mode, table, rows)
    np.testing.assert_allclose(got, table[rows[:, 0]] + table[rows[:, 1]], rtol=1e-6)


@nki.jit
def k_write_through_view(x):
    t = nl.ndarray((2, 4), nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1)
    nisa.dma_copy(dst=x.ap(pattern=[[4, 2], [1, 4]], dtype=nl.int32), src=t)
    return x


@nki.jit
def k_on_chip_view(x):
    t = nl.ndarray((2, 8), nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    u = nl.ndarray((2, 4), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=u, src=t.ap(pattern=[[4, 2], [1, 4]], dtype=nl.float32))
    return x


@nki.jit
def k_indirect_in_an_engine_op(table, rows):
    idx = nl.ndarray((4, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=rows)
    acc = nl.ndarray((4, 6), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    nisa.tensor_tensor(dst=acc, data1=table.ap(pattern=[[6, 4], [1, 6]], vector_offset=idx, indirect_dim=0),
                       data2=acc, op=nl.add)
    return table


def test_unsupported_reinterpretations_are_refused():
    x = torch.zeros(2, 8, dtype=torch.bfloat16, device="neuron")
    with pytest.raises(nki.NKIError, match="writing through"):
        k_write_through_view(x)
    with pytest.raises(nki.NKIError, match="on chip, float32 words"):
        k_on_chip_view(x)
    with pytest.raises(nki.NKIError, match="indirect access|SBUF or PSUM only"):
        k_indirect_in_an_engine_op(np.zeros((8, 6), np.float32), np.zeros((4, 1), np.int32))


@nki.jit
def k_words_as_halves(x):
    """x (bf16 [P, 2F]) read as float32 words, then on chip the words seen as bf16 halves again."""
    p, f2 = x.shape
    words = nl.ndarray((p, f2 // 2), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=words, src=x.ap(pattern=[[f2 // 2, p], [1, f2 // 2]], dtype=nl.float32))
    out = nl.ndarray((p, f2), nl.bfloat16, buffer=nl.shared_hbm)
    for i in nl.range(2):  # the view's offset follows a loop index (traced unrolled)
        halves = words.ap(pattern=[[f2, p], [1, f2 // 2]], offset=i * (f2 // 2), dtype=nl.bfloat16)
        t = nl.ndarray((p, f2 // 2), nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_copy(dst=t, src=halves)
        nisa.dma_copy(dst=out[:, nl.ds(i * (f2 // 2), f2 // 2)], src=t)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_on_chip_float32_words_as_bf16_halves(mode):
    x = torch.randn(8, 32).bfloat16()
    x[0, :4] = torch.tensor([0.0, -0.0, 1e-39, -3e38]).bfloat16()  # zeros, a subnormal, a large value
    got = host(run(k_words_as_halves, mode, x.to("neuron")))
    assert torch.equal(got.view(torch.int16), x.view(torch.int16))  # the same bits


@nki.jit
def k_packed_output(x):
    """A float8_e4m3fn_x4 tensor in device memory: int32 words, written by a DMA from a packed tile."""
    p, f = x.shape
    src = nl.ndarray((p, f), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x)
    data = nl.ndarray((p, f // 4), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    scale = nl.ndarray((p, f // 4), nl.uint8, buffer=nl.sbuf)
    nisa.quantize_mx(dst=data, src=src, dst_scale=scale)
    out = nl.ndarray((p, f // 4), nl.float8_e4m3fn_x4, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=data)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_packed_tensor_in_device_memory_is_int32_words(mode):
    x = (torch.arange(32 * 16, dtype=torch.float32).reshape(32, 16) % 7 - 3).bfloat16()  # exact in e4m3 after scaling
    got = host(run(k_packed_output, mode, x.to("neuron")))
    assert got.dtype == torch.int32 and tuple(got.shape) == (32, 4)
    values = got.contiguous().view(torch.float8_e4m3fn).float().reshape(32, 16)
    # every group's largest magnitude is 3 (exponent 1): scale 2 ** (1 - 8), values x * 2 ** 7
    torch.testing.assert_close(values, x.float() * 128, rtol=0, atol=0)
