"""nki.isa instructions of NKI 0.3's engines: exponential, tensor_scalar_cumulative, activate2 (with
nl.prelu), sequence_bounds, dropout, and the accumulator registers that reduce_cmd drives (also
through tensor_scalar_reduce and activation); each a small kernel of our own checked against NumPy,
compiled and interpreted."""
import numpy as np
import pytest

import torchneuron  # noqa: F401
from torchneuron import nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_modes import RUNS, run  # noqa: E402  (compiled and interpreted)

RC = nisa.reduce_cmd


def _sbuf(src, dtype=nl.float32):
    t = nl.ndarray(src.shape, dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src)
    return t


@nki.jit
def k_exponential(x, mx):
    """exp(x - mx) in two halves summed across calls (reset_reduce, then reduce), and a load_reduce."""
    p, f = x.shape
    out = nl.ndarray((p, f + 2), nl.float32, buffer=nl.shared_hbm)
    t, m = _sbuf(x), _sbuf(mx)
    e = nl.ndarray((p, f), nl.float32, buffer=nl.sbuf)
    res = nl.ndarray((p, 2), nl.float32, buffer=nl.sbuf)
    h = f // 2
    nisa.exponential(dst=e[:, 0:h], src=t[:, 0:h], max_value=m, reduce_cmd=RC.reset_reduce)
    nisa.exponential(dst=e[:, h:f], src=t[:, h:f], max_value=m, reduce_cmd=RC.reduce, reduce_res=res[:, 0:1])
    scratch = nl.ndarray((p, f), nl.float32, buffer=nl.sbuf)
    nisa.exponential(dst=scratch, src=t, max_value=1.0, reduce_cmd=RC.load_reduce, reduce_init=10.0,
                     reduce_res=res[:, 1:2])
    nisa.dma_copy(dst=out[:, 0:f], src=e)
    nisa.dma_copy(dst=out[:, f:f + 2], src=res)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_exponential_and_its_accumulator(mode):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 16)).astype(np.float32)
    mx = x.max(axis=1, keepdims=True)
    got = np.asarray(run(k_exponential, mode, x, mx))
    e = np.exp(x.astype(np.float64) - mx)
    np.testing.assert_allclose(got[:, :16], e, rtol=1e-5)
    np.testing.assert_allclose(got[:, 16], e.sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(got[:, 17], 10 + np.exp(x.astype(np.float64) - 1).sum(axis=1), rtol=1e-5)


@nki.jit
def k_cumulative(x, init):
    p, f = x.shape
    out = nl.ndarray((5, p, f), nl.float32, buffer=nl.shared_hbm)
    t, i0 = _sbuf(x), _sbuf(init)
    r = nl.ndarray((p, f), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_cumulative(dst=r, src=t, op0=nl.multiply, op1=nl.add, imm0=2.0)  # reset_reduce
    nisa.dma_copy(dst=out[0], src=r)
    nisa.tensor_scalar_cumulative(dst=r, src=t, op0=nl.add, op1=nl.add, imm0=0.0, reduce_cmd=RC.reduce)
    nisa.dma_copy(dst=out[1], src=r)  # goes on from the last sum
    nisa.tensor_scalar_cumulative(dst=r, src=t, op0=nl.add, op1=nl.maximum, imm0=1.0)
    nisa.dma_copy(dst=out[2], src=r)
    nisa.tensor_scalar_cumulative(dst=r, src=t, op0=nl.add, op1=nl.add, imm0=0.0, imm1=5.0,
                                  reduce_cmd=RC.load_reduce)
    nisa.dma_copy(dst=out[3], src=r)
    b = nl.ndarray((p, f), nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_scalar_cumulative(dst=b, src=t, op0=nl.multiply, op1=nl.multiply, imm0=1.0, imm1=i0,
                                  reduce_cmd=RC.load_reduce)
    nisa.dma_copy(dst=out[4], src=b)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_tensor_scalar_cumulative(mode):
    rng = np.random.default_rng(1)
    x = rng.uniform(0.5, 1.5, (16, 12)).astype(np.float32)
    init = rng.uniform(1, 2, (16, 1)).astype(np.float32)
    got = np.asarray(run(k_cumulative, mode, x, init))
    x64 = x.astype(np.float64)
    first = np.cumsum(2 * x64, axis=1)
    np.testing.assert_allclose(got[0], first, rtol=1e-5)
    np.testing.assert_allclose(got[1], first[:, -1:] + np.cumsum(x64, axis=1), rtol=1e-5)
    np.testing.assert_allclose(got[2], np.maximum.accumulate(x64 + 1, axis=1), rtol=1e-6)
    np.testing.assert_allclose(got[3], 5 + np.cumsum(x64, axis=1), rtol=1e-5)
    np.testing.assert_allclose(got[4], init * np.cumprod(x64, axis=1), rtol=1e-2)  # bfloat16 results


@nki.jit
def k_activate2(x, alpha):
    p, f = x.shape
    out = nl.ndarray((p, 3 * f + 2), nl.float32, buffer=nl.shared_hbm)
    t, a = _sbuf(x), _sbuf(alpha)
    r = nl.ndarray((p, 3 * f + 2), nl.float32, buffer=nl.sbuf)
    nisa.activate2(dst=r[:, 0:f], op=nl.tanh, data=t, imm0=2.0, imm1=0.5, op0=nl.multiply, op1=nl.add,
                   reduce_op=nl.add, reduce_res=r[:, 3 * f:3 * f + 1], reduce_cmd=RC.reset_reduce)
    nisa.activate2(dst=r[:, f:2 * f], op=nl.exp, data=t, imm0=1.0, imm1=0.0, op0=nl.subtract, op1=nl.bypass,
                   reverse0=True)  # exp(1 - x)
    nisa.activate2(dst=r[:, 2 * f:3 * f], op=nl.prelu, data=t, imm0=0.0, imm1=0.0, op0=nl.bypass, op1=nl.bypass,
                   relu_param=a, reduce_op=nl.maximum, reduce_res=r[:, 3 * f + 1:3 * f + 2],
                   reduce_cmd=RC.reset_reduce)
    nisa.dma_copy(dst=out, src=r)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_activate2(mode):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 10)).astype(np.float32)
    alpha = rng.uniform(0, 1, (16, 1)).astype(np.float32)
    got = np.asarray(run(k_activate2, mode, x, alpha))
    first = np.tanh(2 * x.astype(np.float64) + 0.5)
    prelu = np.where(x > 0, x, alpha * x)
    np.testing.assert_allclose(got[:, 0:10], first, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[:, 10:20], np.exp(1 - x.astype(np.float64)), rtol=1e-5)
    np.testing.assert_allclose(got[:, 20:30], prelu, rtol=1e-6)
    np.testing.assert_allclose(got[:, 30], first.sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[:, 31], prelu.max(axis=1), rtol=1e-6)


@nki.jit
def k_reduce_cmds(x):
    """tensor_scalar_reduce and activation chaining their accumulators across calls."""
    p, f = x.shape
    out = nl.ndarray((p, 4), nl.float32, buffer=nl.shared_hbm)
    t = _sbuf(x)
    d = nl.ndarray((p, f), nl.float32, buffer=nl.sbuf)
    res = nl.ndarray((p, 4), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=d, data=t, op0=nl.multiply, operand0=3.0, reduce_op=nl.add,
                              reduce_res=res[:, 0:1], reduce_cmd=RC.load_reduce, reduce_init=1.0,
                              reduce_res_negate=True)  # -(1 + sum(3 x))
    nisa.tensor_scalar_reduce(dst=d, data=t, op0=nl.add, operand0=0.0, reduce_op=nl.maximum,
                              reduce_res=res[:, 1:2])  # the default: reset_reduce
    nisa.activation(dst=d, op=nl.exp, data=t, reduce_op=nl.add, reduce_cmd=RC.reset_reduce)
    nisa.activation(dst=d, op=nl.exp, data=t, scale=2.0, reduce_op=nl.add, reduce_cmd=RC.reduce,
                    reduce_res=res[:, 2:3])  # sum(exp(x)) + sum(exp(2x))
    nisa.activation(dst=d, op=nl.relu, data=t, reduce_op=nl.add, reduce_res=res[:, 3:4])  # a plain reduce_res
    nisa.dma_copy(dst=out, src=res)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_reduce_commands(mode):
    x = np.random.default_rng(3).standard_normal((8, 20)).astype(np.float32)
    got = np.asarray(run(k_reduce_cmds, mode, x))
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(got[:, 0], -(1 + (3 * x64).sum(axis=1)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[:, 1], x.max(axis=1), rtol=1e-6)
    np.testing.assert_allclose(got[:, 2], np.exp(x64).sum(axis=1) + np.exp(2 * x64).sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(got[:, 3], np.maximum(x64, 0).sum(axis=1), rtol=1e-5, atol=1e-6)


def sequence_bounds_reference(ids):
    """The documented semantics, element by element: each run of equal ids, padding (0) as (n, -1)."""
    n = len(ids)
    start, end = np.zeros(n), np.zeros(n)
    for i in range(n):
        if ids[i] == 0:
            start[i], end[i] = n, -1
            continue
        j = i
        while j > 0 and ids[j - 1] == ids[i]:
            j -= 1
        k = i
        while k < n - 1 and ids[k + 1] == ids[i]:
            k += 1
        start[i], end[i] = j, k
    return np.stack([start, end])[None]


@nki.jit
def k_sequence_bounds(ids):
    out = nl.ndarray((1, 2, ids.shape[1]), nl.int32, buffer=nl.shared_hbm)
    t = _sbuf(ids, nl.int32)
    d = nl.ndarray((1, 2, ids.shape[1]), nl.int32, buffer=nl.sbuf)
    nisa.sequence_bounds(dst=d, segment_ids=t)
    nisa.dma_copy(dst=out, src=d)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_sequence_bounds(mode):
    ids = np.array([[1, 1, 1, 2, 2, 0, 0, 3, 3, 3, 3, 1, 1, 0, 5, 5]], np.int32)
    got = np.asarray(run(k_sequence_bounds, mode, ids))
    np.testing.assert_array_equal(got, sequence_bounds_reference(ids[0]))
    ids = np.random.default_rng(4).integers(0, 3, (1, 300)).astype(np.int32)
    np.testing.assert_array_equal(np.asarray(run(k_sequence_bounds, mode, ids)), sequence_bounds_reference(ids[0]))


@nki.jit
def k_dropout(x, prob):
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    t, p = _sbuf(x), _sbuf(prob)
    d = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.dropout(dst=d, data=t, prob=p)
    nisa.dma_copy(dst=out, src=d)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_dropout_per_partition_probability(mode):
    x = np.random.default_rng(5).uniform(1, 2, (128, 256)).astype(np.float32)
    prob = np.repeat(np.array([0.0, 1.0, 0.5, 0.1], np.float32), 32).reshape(128, 1)
    got = np.asarray(run(k_dropout, mode, x, prob))
    np.testing.assert_array_equal(got[:32], x[:32])
    assert (got[32:64] == 0).all()
    kept = got != 0
    np.testing.assert_array_equal(got[kept], x[kept])
    assert abs(kept[64:96].mean() - 0.5) < 0.03 and abs(kept[96:].mean() - 0.9) < 0.03


@nki.jit
def k_topk(x, n, k):
    p, f = x.shape
    out = nl.ndarray((2, p, k), nl.float32, buffer=nl.shared_hbm)
    t = _sbuf(x, nl.bfloat16)
    vals = nl.ndarray((p, k), nl.bfloat16, buffer=nl.sbuf)
    idx = nl.ndarray((p, k), nl.uint32, buffer=nl.sbuf)
    nisa.memset(dst=vals, value=-7.0)  # the columns topk leaves alone keep these
    nisa.memset(dst=idx, value=9999)
    nisa.topk(val_dst=vals, idx_dst=idx, src=t, n=n)
    nisa.dma_copy(dst=out[0], src=vals)
    nisa.dma_copy(dst=out[1], src=idx)
    return out


@pytest.mark.parametrize("mode", RUNS)
@pytest.mark.parametrize("n, k", [(42, 8), (64, 20), (16, 16)])
def test_topk_snake_groups(mode, n, k):
    rng = np.random.default_rng(6)
    p, f = 32, -(-n // 16)
    x = rng.standard_normal((p, f)).astype(np.float32)
    x[3, 0] = x[5, 0]  # a tie: the lower index first
    bf = torch_bf16(x)
    got = np.asarray(run(k_topk, mode, x, n, k))
    for g in range(p // 16):
        snake = bf[16 * g:16 * g + 16].T.reshape(-1)[:n]  # element e at partition e % 16, column e // 16
        order = sorted(range(n), key=lambda e: (-snake[e], e))[:k]
        slots = set()
        for j, e in enumerate(order):  # result j at partition j % 16, column j // 16
            slots.add((j % 16, j // 16))
            assert got[0, 16 * g + j % 16, j // 16] == snake[e] and got[1, 16 * g + j % 16, j // 16] == e
        for q in range(16):
            for c in range(k):
                if (q, c) not in slots:  # not written
                    assert got[0, 16 * g + q, c] == -7.0 and got[1, 16 * g + q, c] == 9999


def torch_bf16(x):
    import torch
    return torch.from_numpy(x).bfloat16().float().numpy()


@nki.jit
def k_barrier(x, cores):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    nisa.dma_copy(dst=out[pid:pid + 1, :], src=x[pid:pid + 1, :])
    nisa.core_barrier(out, cores)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_core_barrier_cores(mode):
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(run(k_barrier[2], mode, x, (1, 0)), x)
    np.testing.assert_array_equal(run(k_barrier, mode, x[:1], (0,)), x[:1])
    with pytest.raises(Exception, match="every program"):
        run(k_barrier[2], mode, x, (0,))


@nki.jit
def k_gather_add(table, rows, unique):
    """acc = table[rows[p]] added onto ones by dma_compute through an indirect access."""
    n, h = table.shape
    p = rows.shape[0]
    idx = nl.ndarray((p, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=rows)
    acc = nl.ones((p, h), nl.float32, buffer=nl.sbuf)
    nisa.dma_compute(dst=acc, srcs=[table.ap(pattern=[[h, p], [1, h]], vector_offset=idx, indirect_dim=0), acc],
                     reduce_op=nl.add, unique_indices=unique)
    out = nl.ndarray((p, h), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_dma_compute_unique_indices(mode):
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    rows = np.array([[3], [7], [0], [9]], np.int32)
    np.testing.assert_array_equal(np.asarray(run(k_gather_add, mode, table, rows, True)), table[rows[:, 0]] + 1)
    with pytest.raises(Exception, match="unique_indices"):
        run(k_gather_add, mode, table, rows, False)


@nki.jit
def k_bn_stats(x):
    p, f = x.shape
    out = nl.ndarray((p, 8), nl.float32, buffer=nl.shared_hbm)
    t = _sbuf(x)
    stats = nl.ndarray((p, 6), nl.float32, buffer=nl.sbuf)
    nisa.bn_stats(dst=stats, data=t)
    both = nl.ndarray((p, 2), nl.float32, buffer=nl.sbuf)
    nisa.bn_aggr(dst=both, data=stats)
    nisa.dma_copy(dst=out[:, 0:6], src=stats)
    nisa.dma_copy(dst=out[:, 6:8], src=both)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_bn_stats_even_and_odd_halves(mode):
    x = np.random.default_rng(7).standard_normal((8, 13)).astype(np.float32)
    got = np.asarray(run(k_bn_stats, mode, x))
    x64 = x.astype(np.float64)
    for col, part in ((0, x64[:, 0::2]), (3, x64[:, 1::2])):
        np.testing.assert_array_equal(got[:, col], part.shape[1])
        np.testing.assert_allclose(got[:, col + 1], part.mean(axis=1), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[:, col + 2], part.var(axis=1) * part.shape[1], rtol=1e-5)
    np.testing.assert_allclose(got[:, 6], x64.mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[:, 7], x64.var(axis=1), rtol=1e-5)


@nki.jit
def k_handles(x):
    """ISA calls' handles with depends_on: the copy into b waits for the write of a (traced first)."""
    a = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    first = nisa.dma_copy(dst=a, src=x)
    b = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    second = nisa.tensor_scalar(dst=b, data=a, op0=nl.multiply, operand0=3.0)
    assert isinstance(first, nisa.NkiInstruction) and second.depends_on(first) is second
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=b)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_instruction_handles(mode):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(np.asarray(run(k_handles, mode, x)), 3 * x)
