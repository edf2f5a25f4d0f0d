"""The programs of a multi-core (LNC2) launch talking to each other: sendrecv between two programs,
core_barrier ordering their writes to shared memory, and a sendrecv with no peer refused; each a
small kernel of our own checked against NumPy, compiled and interpreted."""
import numpy as np
import pytest

import torchneuron  # noqa: F401
from torchneuron import nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_modes import RUNS, run  # noqa: E402  (compiled and interpreted)


@nki.jit
def k_exchange(x):
    """Two programs: each scales its half, swaps it with the other through sendrecv, adds."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    half = x.shape[0] // 2
    mine = nl.ndarray((half, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=x[pid * half:(pid + 1) * half, :])
    if pid == 0:  # Python control flow on a program id
        nisa.tensor_scalar(dst=mine, data=mine, op0=nl.multiply, operand0=2.0)
    other = nl.ndarray((half, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.sendrecv(src=mine, dst=other, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=0)
    total = nl.ndarray((half, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=total, data1=mine, data2=other, op=nl.add)
    nisa.dma_copy(dst=out[pid * half:(pid + 1) * half, :], src=total)
    return out


@nki.jit
def k_barrier_in_loop(x):
    """Each program writes its row of a shared scratch, a barrier, then reads the other's (per step)."""
    out = nl.ndarray((2, x.shape[1]), x.dtype, buffer=nl.shared_hbm)
    scratch = nl.ndarray((2, x.shape[1]), x.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    acc = nl.ndarray((1, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for step in nl.affine_range(3):
        row = nl.ndarray((1, x.shape[1]), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=row, src=x[pid:pid + 1, :])
        nisa.tensor_scalar(dst=row, data=row, op0=nl.add, operand0=step)
        nisa.dma_copy(dst=scratch[pid:pid + 1, :], src=row)
        nisa.core_barrier(scratch, (0, 1))
        theirs = nl.ndarray((1, x.shape[1]), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=theirs, src=scratch[1 - pid:2 - pid, :])
        nisa.tensor_tensor(dst=acc, data1=acc, data2=theirs, op=nl.add)
        nisa.core_barrier(scratch, (0, 1))
    nisa.dma_copy(dst=out[pid:pid + 1, :], src=acc)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_sendrecv_between_programs(mode):
    x = np.random.default_rng(0).standard_normal((8, 6)).astype(np.float32)
    expected = np.concatenate([2 * x[:4] + x[4:]] * 2)
    np.testing.assert_allclose(run(k_exchange[2], mode, x), expected, rtol=1e-6)


@pytest.mark.parametrize("mode", RUNS)
def test_core_barrier_orders_programs(mode):
    x = np.random.default_rng(1).standard_normal((2, 5)).astype(np.float32)
    expected = np.stack([3 * x[1] + 3, 3 * x[0] + 3])  # sum over steps 0..2 of the other row + step
    np.testing.assert_allclose(run(k_barrier_in_loop[2], mode, x), expected, rtol=1e-5)


def test_sendrecv_without_a_peer_is_refused():
    @nki.jit
    def lonely(x):
        t = nl.load(x)
        u = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
        if nl.program_id(0) == 0:
            nisa.sendrecv(src=t, dst=u, send_to_rank=1, recv_from_rank=1, pipe_id=0)
        return x
    with pytest.raises(nki.NKIError, match="does not send"):
        nki.simulate_kernel(lonely[2], np.zeros((2, 2), np.float32))
