"""Random numbers in kernels (nisa.rng, rand2, set_rng_seed, rand_get_state / rand_set_state):
deterministic per seed, the same numbers compiled and interpreted, in range, and a saved state
replays its sequence. Statistical checks are loose (mean and spread of 8192 draws)."""
import numpy as np
import pytest

import torchneuron  # noqa: F401
from torchneuron import nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl


@nki.jit
def k_draws(seed, lo, hi):
    """Two rand2 draws after seeding, one with per-partition bounds, and one rng draw."""
    out = nl.ndarray((3, 128, 64), nl.float32, buffer=nl.shared_hbm)
    s = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=seed)
    nisa.set_rng_seed(src_seeds=s)
    t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.rand2(dst=t, min=-1.0, max=1.0)
    nisa.dma_copy(dst=out[0], src=t)
    bounds_lo = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    bounds_hi = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=bounds_lo, src=lo)
    nisa.dma_copy(dst=bounds_hi, src=hi)
    u = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.rand2(u, bounds_lo, bounds_hi)
    nisa.dma_copy(dst=out[1], src=u)
    r = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.rng(dst=r)
    nisa.dma_copy(dst=out[2], src=r)
    return out


def draws(mode, seed):
    lo = np.arange(128, dtype=np.float32).reshape(128, 1)
    args = (np.array([[seed]], np.int32), lo, lo + 0.5)
    return nki.simulate_kernel(k_draws, *args) if mode == "interpreted" else k_draws(*args)


def test_same_seed_same_numbers_compiled_and_interpreted():
    compiled, interpreted = draws("compiled", 5), draws("interpreted", 5)
    np.testing.assert_array_equal(compiled, interpreted)
    np.testing.assert_array_equal(compiled, draws("compiled", 5))
    assert not np.array_equal(compiled[0], draws("compiled", 6)[0])


@pytest.mark.parametrize("mode", ["compiled", "interpreted"])
def test_ranges_and_spread(mode):
    out = draws(mode, 123)
    a = out[0]
    assert a.min() >= -1.0 and a.max() < 1.0
    assert abs(a.mean()) < 0.05 and abs(a.std() - 1 / np.sqrt(3)) < 0.03
    assert abs(np.corrcoef(a[:, :-1].ravel(), a[:, 1:].ravel())[0, 1]) < 0.05  # neighbours in a partition
    assert abs(np.corrcoef(a[:-1].ravel(), a[1:].ravel())[0, 1]) < 0.05  # neighbouring partitions
    lo = np.arange(128, dtype=np.float32).reshape(128, 1)
    assert (out[1] >= lo).all() and (out[1] < lo + 0.5).all()  # per-partition bounds
    r = out[2]
    assert (r == np.floor(r)).all() and r.min() >= 0 and r.max() < 2 ** 24 and len(np.unique(r)) > 8000
    assert not np.array_equal(out[0], (out[1] - lo) * 4 - 1)  # the second draw is not the first again


@nki.jit
def k_replay():
    """Save the state, draw twice, restore it, draw again: the third draw repeats the first."""
    out = nl.ndarray((3, 128, 16), nl.float32, buffer=nl.shared_hbm)
    saved = nl.ndarray((128, 6), nl.uint32, buffer=nl.sbuf)
    nisa.rand_get_state(dst=saved)
    for i in range(3):
        if i == 2:
            nisa.rand_set_state(src_seeds=saved)
        t = nl.ndarray((128, 16), nl.float32, buffer=nl.sbuf)
        nisa.rand2(dst=t, min=0.0, max=1.0)
        nisa.dma_copy(dst=out[i], src=t)
    return out


@pytest.mark.parametrize("mode", ["compiled", "interpreted"])
def test_a_saved_state_replays_its_sequence(mode):
    out = nki.simulate_kernel(k_replay) if mode == "interpreted" else k_replay()
    out = out.cpu().numpy() if hasattr(out, "cpu") else out  # no inputs: neuron tensors come back
    np.testing.assert_array_equal(out[2], out[0])
    assert not np.array_equal(out[1], out[0])


@nki.jit
def k_bad_state():
    t = nl.ndarray((128, 2), nl.uint32, buffer=nl.sbuf)
    nisa.rand_get_state(dst=t)
    return nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)


def test_a_state_tile_too_small_is_refused():
    with pytest.raises(nki.NKIError, match="n >= 3"):
        k_bad_state()
