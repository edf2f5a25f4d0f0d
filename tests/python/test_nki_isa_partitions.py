"""nisa.nc_stream_shuffle: partitions copied within each 32-partition quadrant as the mask says
(255 leaves a partition as it was), also in place and as a broadcast of one partition; compiled
and interpreted, against NumPy."""
import numpy as np
import pytest

import torchneuron  # noqa: F401
from torchneuron import nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_modes import RUNS, run  # noqa: E402  (compiled and interpreted)



def ref_shuffle(src, dst, mask):
    out = dst.copy()
    for q in range(max(1, dst.shape[0] // 32)):
        for i, j in enumerate(mask[:dst.shape[0]]):
            if j != 255:
                out[q * 32 + i] = src[q * 32 + j]
    return out


@nki.jit
def k_shuffle(x, mask, in_place):
    p, f = x.shape
    src = nl.ndarray((p, f), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x)
    dst = src
    if not in_place:
        dst = nl.ndarray((p, f), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=dst, value=-1.0)
    nisa.nc_stream_shuffle(dst=dst, src=src, shuffle_mask=mask)
    out = nl.ndarray((p, f), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=dst)
    return out


@pytest.mark.parametrize("mode", RUNS)
@pytest.mark.parametrize("p", [32, 128])
@pytest.mark.parametrize("in_place", [False, True])
def test_shuffle_within_quadrants(mode, p, in_place):
    rng = np.random.default_rng(p)
    x = rng.standard_normal((p, 16)).astype(np.float32)
    mask = list(rng.permutation(32))
    mask[3] = mask[7] = 255
    mask[10:14] = [20, 21, 22, 23]  # a run, copied as one
    got = run(k_shuffle, mode, x, mask, in_place)
    want = ref_shuffle(x, x if in_place else np.full_like(x, -1.0), mask)
    np.testing.assert_array_equal(got, want)


@nki.jit
def k_broadcast(x):
    """Partition 0 of a [1, F] tile into every partition of a [96, F] tile (AWS's broadcast idiom)."""
    row = nl.ndarray((1, x.shape[1]), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=row, src=x)
    dst = nl.ndarray((96, x.shape[1]), nl.float32, buffer=nl.sbuf)
    for q in range(3):
        nisa.nc_stream_shuffle(src=row[0:1, :], dst=dst[q * 32:(q + 1) * 32, :], shuffle_mask=[0] * 32)
    out = nl.ndarray((96, x.shape[1]), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=dst)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_broadcast_one_partition(mode):
    x = np.arange(8, dtype=np.float32).reshape(1, 8)
    np.testing.assert_array_equal(run(k_broadcast, mode, x), np.repeat(x, 96, axis=0))


@nki.jit
def k_bad_mask(x):
    t = nl.ndarray((32, 4), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.nc_stream_shuffle(dst=t, src=t, shuffle_mask=[40] * 32)
    return x


@pytest.mark.parametrize("mode", RUNS)
def test_bad_mask_is_refused(mode):
    with pytest.raises(nki.NKIError, match="shuffle_mask"):
        run(k_bad_mask, mode, np.zeros((32, 4), np.float32))
