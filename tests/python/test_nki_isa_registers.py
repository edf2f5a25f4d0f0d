"""Virtual registers (nisa.register_alloc / move / load / store) and nl.dynamic_range loops bounded
by them: the trip count is read at run time, so one compiled kernel serves every count; compiled
and interpreted alike, against NumPy."""
import numpy as np
import pytest
import torch

import torchneuron  # noqa: F401
from torchneuron import nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_modes import RUNS, run  # noqa: E402  (compiled and interpreted)



@nki.jit
def k_scaled_rows(x, count):
    """Rows [0, 32 * count) of x times 2, count read from device memory into a register; the row
    offset advances in an SBUF counter used as a run-time index."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    zeros = nl.ndarray((32, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=zeros, value=0.0)
    for r in nl.affine_range(x.shape[0] // 32):
        nisa.dma_copy(dst=out[nl.ds(r * 32, 32), :], src=zeros)
    count_sb = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=count_sb, src=count)
    reg = nisa.register_alloc()
    nisa.register_load(reg, count_sb)
    row = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=row, value=0)
    for _ in nl.dynamic_range(reg):
        t = nl.ndarray((32, x.shape[1]), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x.ap(pattern=[[x.shape[1], 32], [1, x.shape[1]]], scalar_offset=row, indirect_dim=0))
        y = nl.ndarray((32, x.shape[1]), x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out.ap(pattern=[[x.shape[1], 32], [1, x.shape[1]]], scalar_offset=row, indirect_dim=0),
                      src=y)
        nisa.tensor_scalar(dst=row, data=row, op0=nl.add, operand0=32)
    return out


@pytest.mark.parametrize("mode", RUNS)
@pytest.mark.parametrize("count", [0, 1, 3, 4])
def test_register_bounded_loop_reads_its_count_at_run_time(mode, count):
    x = np.random.default_rng(count).standard_normal((128, 64)).astype(np.float32)
    got = run(k_scaled_rows, mode, x, np.array([[count]], dtype=np.int32))
    want = np.zeros_like(x)
    want[:32 * count] = 2 * x[:32 * count]
    np.testing.assert_array_equal(got, want)


def test_one_compiled_kernel_serves_every_count():
    x = torch.randn(128, 64, device="neuron")
    before = k_scaled_rows.traces
    for count in (2, 4, 1):
        got = k_scaled_rows(x, torch.tensor([[count]], dtype=torch.int32, device="neuron")).cpu()
        want = torch.zeros(128, 64)
        want[:32 * count] = 2 * x.cpu()[:32 * count]
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert k_scaled_rows.traces - before <= 1


@nki.jit
def k_register_moves(x):
    """Bounds from register_move (a constant and a copy), register_alloc(int), a start register, and
    register_store of a register into SBUF and device memory."""
    out = nl.ndarray((1, 4), nl.int32, buffer=nl.shared_hbm)
    acc = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    five = nisa.register_alloc()
    nisa.register_move(five, 5)
    copy = nisa.register_alloc()
    nisa.register_move(copy, five)
    two = nisa.register_alloc(2)
    one = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=one, src=x)
    for _ in nl.dynamic_range(two, copy):  # 2..4: three iterations
        nisa.tensor_tensor(dst=acc, data1=acc, data2=one, op=nl.add)
    for _ in nl.dynamic_range(0, five, 2):  # 0, 2, 4: three more
        nisa.tensor_tensor(dst=acc, data1=acc, data2=one, op=nl.add)
    stored = nl.ndarray((1, 4), nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=stored, value=-1)
    nisa.register_store(stored[0:1, 0:1], copy)
    nisa.tensor_copy(dst=stored[0:1, 1:2], src=acc)
    from_reg = nisa.register_alloc(stored[0:1, 1:2])  # initialised from a tensor
    nisa.register_store(stored[0:1, 2:3], from_reg)
    nisa.dma_copy(dst=out, src=stored)
    nisa.register_store(out[0:1, 3:4], two)  # straight to device memory
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_register_move_alloc_store(mode):
    got = run(k_register_moves, mode, np.array([[1.0]], dtype=np.float32))
    np.testing.assert_array_equal(got, np.array([[5, 6, 6, 2]], dtype=np.int32))


@nki.jit
def k_bound_snapshot(x):
    """The loop's bound is read when the loop starts: changing the register inside does not move it."""
    out = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    one = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=one, src=x)
    reg = nisa.register_alloc(3)
    for _ in nl.dynamic_range(reg):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=one, op=nl.add)
        nisa.register_move(reg, 100)
    nisa.dma_copy(dst=out, src=acc)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_dynamic_range_bound_is_read_once(mode):
    got = run(k_bound_snapshot, mode, np.array([[1.0]], dtype=np.float32))
    assert got[0, 0] == 3.0


@nki.jit
def k_bad_move(x):
    reg = nisa.register_alloc()
    nisa.register_move(reg, 1.5)
    return x


@nki.jit
def k_wide_load(x):
    t = nl.ndarray((1, 2), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.register_load(nisa.register_alloc(), t)
    return x


@nki.jit
def k_indexed_by_register_loop(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for i in nl.dynamic_range(nisa.register_alloc(2)):
        nisa.dma_copy(dst=out[nl.ds(i, 1), :], src=x[nl.ds(i, 1), :])
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_register_misuse_is_refused(mode):
    with pytest.raises(nki.NKIError, match="Python int or a register"):
        run(k_bad_move, mode, np.zeros((1, 1), np.float32))
    with pytest.raises(nki.NKIError, match="one element"):
        run(k_wide_load, mode, np.zeros((1, 2), np.int32))


def test_a_register_loop_variable_cannot_index_compiled():
    """Its range is unknown when the kernel is traced, so the bounds check refuses it (the
    interpreter, which knows the values, runs it)."""
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    with pytest.raises(nki.NKIError, match="out-of-bounds"):
        k_indexed_by_register_loop(x)
    got = nki.simulate_kernel(k_indexed_by_register_loop, x)
    np.testing.assert_array_equal(got[:2], x[:2])
