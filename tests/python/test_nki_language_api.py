"""nl names of the NKI reference beyond the basic ones: abs_max / abs_min / logical_xor, the
reductions all and var, expand_dims, broadcast_to with a dtype, the memory-space predicates,
no_reorder, bypass, shared_identity_matrix into a dst, and nki.simulate; against NumPy."""
import numpy as np
import pytest
import torch

from torchneuron import nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_modes import RUNS, run


@nki.jit
def k_elementwise(x, y):
    a, b = nl.load(x), nl.load(y)
    outs = [nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm) for _ in range(3)]
    nl.store(outs[0], nl.abs_max(a, b))
    nl.store(outs[1], nl.abs_min(a, b))
    nl.store(outs[2], nl.logical_xor(a, b, dtype=nl.float32))
    return outs


@pytest.mark.parametrize("mode", RUNS)
def test_abs_max_abs_min_logical_xor(mode):
    rng = np.random.default_rng(1)
    x = rng.integers(-4, 5, (8, 16)).astype(np.float32)
    y = rng.integers(-4, 5, (8, 16)).astype(np.float32)
    got = [np.asarray(g) for g in run(k_elementwise, mode, x, y)]
    np.testing.assert_array_equal(got[0], np.where(np.abs(x) > np.abs(y), x, y))  # the signed value
    np.testing.assert_array_equal(got[1], np.where(np.abs(x) < np.abs(y), x, y))
    np.testing.assert_array_equal(got[2], ((x != 0) != (y != 0)).astype(np.float32))


@nki.jit
def k_reductions(x):
    t = nl.load(x)
    every = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
    variance = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
    nl.store(every, nl.expand_dims(nl.all(t, axis=1), 1))
    nl.store(variance, nl.var(t, axis=1))  # keepdims shape, as documented
    return every, variance


@pytest.mark.parametrize("mode", RUNS)
def test_all_and_var(mode):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 32)).astype(np.float32) + 3
    x[::3, 5] = 0.0
    every, variance = run(k_reductions, mode, x)
    np.testing.assert_array_equal(np.asarray(every)[:, 0], np.all(x != 0, axis=1).astype(np.float32))
    np.testing.assert_allclose(np.asarray(variance)[:, 0], x.var(axis=1), rtol=1e-5)


@nki.jit
def k_views(x):
    """broadcast_to rounding to bfloat16, the identity into a dst, bypass as a tensor_scalar stage."""
    row = nl.load(x[0:1, :])
    wide = nl.broadcast_to(row, (8, x.shape[1]), dtype=nl.bfloat16)
    eye = nl.ndarray((8, 8), nl.float32, buffer=nl.sbuf)
    nl.shared_identity_matrix(8, dtype=nl.float32, dst=eye)
    assert nl.is_sbuf(eye) and nl.is_on_chip(eye.buffer) and not nl.is_psum(eye) and nl.is_hbm(x)
    with nl.no_reorder():
        plus = nl.ndarray((8, 8), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=plus, data=eye, op0=nl.bypass, operand0=0.0, op1=nl.add, operand1=2.0)
    out_wide = nl.ndarray((8, x.shape[1]), nl.float32, buffer=nl.shared_hbm)
    out_eye = nl.ndarray((8, 8), nl.float32, buffer=nl.shared_hbm)
    nl.store(out_wide, wide)
    nl.store(out_eye, plus)
    return out_wide, out_eye


@pytest.mark.parametrize("mode", RUNS)
def test_broadcast_identity_bypass(mode):
    x = (np.arange(16, dtype=np.float32) / 3 + 1).reshape(1, 16)
    wide, eye = run(k_views, mode, x)
    np.testing.assert_array_equal(np.asarray(wide), np.repeat(torch.from_numpy(x).bfloat16().float().numpy(), 8, 0))
    np.testing.assert_array_equal(np.asarray(eye), np.eye(8, dtype=np.float32) + 2)


def test_simulate_runs_the_interpreter():
    x = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    y = np.ones_like(x)
    got = nki.simulate(k_elementwise)(x, y)
    np.testing.assert_array_equal(np.asarray(got[0]), np.where(np.abs(x) > 1, x, 1))
