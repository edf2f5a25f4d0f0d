"""nisa.local_gather against a NumPy reference written from the NKI documentation: each GpSimd
core (16 partitions) lists its index entries partitions first, and every partition of the core
gathers num_elem_per_idx contiguous elements at each of the first num_valid_indices of them."""
import numpy as np
import pytest

from torchneuron import nki
from torchneuron.nki import isa as nisa
from torchneuron.nki import language as nl

from nki_modes import RUNS, run


def reference(src, index, n, valid=None):
    p = src.shape[0]
    flat = src.reshape(p, -1)
    rows = min(16, p)
    valid = rows * index.shape[1] if valid is None else valid
    out = np.zeros((p, valid * n), src.dtype)
    for start in range(0, p, rows):
        entries = index[start:start + rows].reshape(-1, order="F")[:valid]  # partitions first
        for k, at in enumerate(entries):
            out[start:start + rows, k * n:(k + 1) * n] = flat[start:start + rows, at:at + n]
    return out


def _gather(src, index, n, valid, index_dtype):
    out = nl.ndarray((src.shape[0], valid, n), src.dtype, buffer=nl.shared_hbm)
    s = nl.load(src)
    i = nl.ndarray(index.shape, index_dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=i, src=nl.load(index))
    d = nl.ndarray((src.shape[0], valid, n), src.dtype, buffer=nl.sbuf)
    nisa.memset(dst=d, value=-1.0)
    nisa.local_gather(dst=d.ap([[valid * n, src.shape[0]], [1, valid * n]]), src_buffer=s, index=i,
                      num_elem_per_idx=n, num_valid_indices=valid)
    nl.store(out, d)
    return out


@nki.jit
def k_gather(src, index, n: int, valid: int):
    return _gather(src, index, n, valid, nl.uint16)


@nki.jit
def k_gather_int32(src, index, n: int, valid: int):
    return _gather(src, index, n, valid, nl.int32)


@nki.jit
def k_legacy(src, index):
    out = nl.ndarray((src.shape[0], min(16, src.shape[0]) * index.shape[1], 1), src.dtype, buffer=nl.shared_hbm)
    got = nisa.local_gather(nl.load(src), nl.load(index))
    nl.store(out, got)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_local_gather_several_elements_and_a_partial_index_list(mode):
    rng = np.random.default_rng(11)
    src = rng.standard_normal((128, 20, 3)).astype(np.float32)
    n, valid = 2, 50  # 50 of each core's 64 entries, 2 elements at each
    index = rng.integers(0, 60 - n + 1, (128, 4)).astype(np.int32)
    got = run(k_gather, mode, src, index, n, valid)
    np.testing.assert_array_equal(got.reshape(128, -1), reference(src, index, n, valid))


@pytest.mark.parametrize("mode", RUNS)
def test_local_gather_as_moe_routing_uses_it(mode):
    """Only the first core's partitions hold indices (one token per column), the rest are 0."""
    rng = np.random.default_rng(12)
    src = rng.standard_normal((128, 8)).astype(np.float32)
    index = np.zeros((128, 16), np.int32)
    index[:16, :5] = rng.integers(0, 8, (16, 5))
    got = run(k_gather_int32, mode, src, index, 1, 256)
    np.testing.assert_array_equal(got.reshape(128, -1), reference(src, index, 1, 256))
    assert (got.reshape(128, -1)[16:] == src[16:, :1]).all()  # index 0 in the other cores


@pytest.mark.parametrize("mode", RUNS)
def test_local_gather_legacy_call_and_fewer_than_16_partitions(mode):
    rng = np.random.default_rng(13)
    src = rng.standard_normal((8, 30)).astype(np.float32)
    index = rng.integers(0, 30, (8, 3)).astype(np.int32)
    got = run(k_legacy, mode, src, index)
    assert got.shape == (8, 24, 1)  # a core of 8 partitions has 24 entries
    np.testing.assert_array_equal(got.reshape(8, -1), reference(src, index, 1))


@nki.jit
def k_bad(src, index, dst_elements: int):
    out = nl.ndarray((src.shape[0], dst_elements), src.dtype, buffer=nl.shared_hbm)
    d = nl.ndarray((src.shape[0], dst_elements), src.dtype, buffer=nl.sbuf)
    nisa.local_gather(dst=d, src_buffer=nl.load(src), index=nl.load(index), num_valid_indices=32)
    nl.store(out, d)
    return out


def test_local_gather_checks_its_shapes():
    src = np.zeros((32, 8), np.float32)
    with pytest.raises(nki.NKIError, match="needs 32 partitions"):
        run(k_bad, "interpreted", src, np.zeros((32, 2), np.int32), 31)
    with pytest.raises(nki.NKIError, match="share their partitions"):
        run(k_bad, "interpreted", src, np.zeros((16, 2), np.int32), 32)
    with pytest.raises(nki.NKIError, match="num_valid_indices 32 must be 1..16"):
        run(k_bad, "interpreted", src, np.zeros((32, 1), np.int32), 32)
