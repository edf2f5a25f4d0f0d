"""PSUM accumulation groups: nisa.nc_matmul into one PSUM tile adds up (accumulate=None, the
default), starts a new group on new or read-out memory, and accumulate=True / False force either;
compiled and interpreted alike, against NumPy."""
import numpy as np
import pytest

import torchneuron  # noqa: F401
from torchneuron import nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_modes import RUNS, run  # noqa: E402  (compiled and interpreted)



def operands(k, m, n, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((k, m)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    return a, b, a.astype(np.float64).T @ b.astype(np.float64)


@nki.jit
def k_tiled_default(lhsT, rhs):
    """K split in 128-row tiles summed into a new (uninitialised) PSUM tile per column block."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    for n in nl.affine_range(N // 128):
        acc = nl.ndarray((M, 128), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(K // 128):
            a = nl.ndarray((128, M), nl.float32, buffer=nl.sbuf)
            b = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=a, src=lhsT[k * 128:(k + 1) * 128, :])
            nisa.dma_copy(dst=b, src=rhs[k * 128:(k + 1) * 128, n * 128:(n + 1) * 128])
            nisa.nc_matmul(acc, a, b)
        res = nl.ndarray((M, 128), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out[:, n * 128:(n + 1) * 128], src=res)
    return out


@nki.jit
def k_tiled_reused(lhsT, rhs):
    """One PSUM tile for every column block: reading it out ends the group, the next block starts anew."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((M, 64), nl.float32, buffer=nl.psum)
    for n in nl.sequential_range(N // 64):
        for k in nl.affine_range(K // 128):
            a = nl.load(lhsT[k * 128:(k + 1) * 128, :])
            b = nl.load(rhs[k * 128:(k + 1) * 128, n * 64:(n + 1) * 64])
            nisa.nc_matmul(dst=acc, stationary=a, moving=b)
        nl.store(out[:, n * 64:(n + 1) * 64], nl.copy(acc))
    return out


@nki.jit
def k_tiled_explicit(lhsT, rhs):
    """The explicit form: the first product overwrites (accumulate=False), the rest add (True)."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
    for k in nl.static_range(K // 128):
        a = nl.load(lhsT[k * 128:(k + 1) * 128, :])
        b = nl.load(rhs[k * 128:(k + 1) * 128, :])
        nisa.nc_matmul(acc, a, b, accumulate=k > 0)
    nl.store(out, nl.copy(acc))
    return out


@nki.jit
def k_zeroed_accumulate(lhsT, rhs):
    """A memset PSUM tile and accumulate=True in an affine loop; a second group on column slices."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
    nisa.memset(acc, 0.0)
    for k in nl.affine_range(K // 128):
        a = nl.load(lhsT[k * 128:(k + 1) * 128, :])
        b = nl.load(rhs[k * 128:(k + 1) * 128, :])
        nisa.nc_matmul(acc, a, b, accumulate=True)
    nl.store(out, nl.copy(acc))
    return out


@nki.jit
def k_slices(lhsT, rhs):
    """Groups on two column slices of one new PSUM tile: each slice's first product overwrites."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
    half = N // 2
    for j in nl.static_range(2):
        for k in nl.affine_range(K // 128):
            a = nl.load(lhsT[k * 128:(k + 1) * 128, :])
            b = nl.load(rhs[k * 128:(k + 1) * 128, j * half:(j + 1) * half])
            nisa.nc_matmul(acc[:, j * half:(j + 1) * half], a, b)
    nl.store(out, nl.copy(acc))
    return out


@nki.jit
def k_memset_bias(lhsT, rhs, bias):
    """A PSUM tile initialised by a memset is a group matmuls add to (here: bias + the product)."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
    nisa.memset(acc, bias)
    for k in nl.affine_range(K // 128):
        nisa.nc_matmul(acc, nl.load(lhsT[k * 128:(k + 1) * 128, :]), nl.load(rhs[k * 128:(k + 1) * 128, :]))
    nl.store(out, nl.copy(acc))
    return out


@nki.jit
def k_overwrite(lhsT, rhs):
    """accumulate=False: only the last product is left."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // 128):
        nisa.nc_matmul(acc, nl.load(lhsT[k * 128:(k + 1) * 128, :]), nl.load(rhs[k * 128:(k + 1) * 128, :]),
                       accumulate=False)
    nl.store(out, nl.copy(acc))
    return out


@nki.jit
def k_legacy_plus_equals(lhsT, rhs):
    """The legacy form: nc_matmul returns a PSUM tile, `acc += ...` adds it into a zeroed PSUM tile."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((M, N), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // 128):
        acc += nisa.nc_matmul(nl.load(lhsT[k * 128:(k + 1) * 128, :]), nl.load(rhs[k * 128:(k + 1) * 128, :]))
    nl.store(out, nl.copy(acc))
    return out


@nki.jit
def k_legacy_slice_plus_equals(lhsT, rhs):
    """`acc[...] += nl.matmul(x, y, transpose_x=True)` into a zeroed PSUM tile."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((M, N), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // 128):
        acc[...] += nl.matmul(nl.load(lhsT[k * 128:(k + 1) * 128, :]), nl.load(rhs[k * 128:(k + 1) * 128, :]),
                              transpose_x=True)
    nl.store(out, nl.copy(acc))
    return out


@pytest.mark.parametrize("mode", RUNS)
@pytest.mark.parametrize("kernel", [k_tiled_default, k_tiled_reused, k_tiled_explicit, k_zeroed_accumulate, k_slices,
                                    k_legacy_plus_equals, k_legacy_slice_plus_equals])
def test_k_tiles_sum(kernel, mode):
    a, b, ref = operands(384, 64, 256)
    got = run(kernel, mode, a, b)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("mode", RUNS)
def test_memset_then_default_adds(mode):
    a, b, ref = operands(256, 32, 64, seed=1)
    np.testing.assert_allclose(run(k_memset_bias, mode, a, b, 2.5), ref + 2.5, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("mode", RUNS)
def test_accumulate_false_overwrites(mode):
    a, b, _ = operands(256, 32, 64, seed=2)
    last = a[128:].astype(np.float64).T @ b[128:].astype(np.float64)
    np.testing.assert_allclose(run(k_overwrite, mode, a, b), last, rtol=1e-4, atol=1e-3)


def test_symbolic_accumulate_is_refused():
    @nki.jit
    def bad(lhsT, rhs):
        out = nl.ndarray((32, 64), nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((32, 64), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(2):
            nisa.nc_matmul(acc, nl.load(lhsT[k * 128:(k + 1) * 128, :]), nl.load(rhs[k * 128:(k + 1) * 128, :]),
                           accumulate=acc)
        nl.store(out, nl.copy(acc))
        return out

    a, b, _ = operands(256, 32, 64)
    with pytest.raises(nki.NKIError, match="accumulate"):
        bad(a, b)
