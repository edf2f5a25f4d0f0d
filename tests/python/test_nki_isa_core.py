"""Instructions and helpers that the core kernels of AWS's nki-library use: neuron_dtypes, the
cross-partition instructions (nc_stream_shuffle, tensor_partition_reduce), gathers, nonzero_with_count,
predicated copies and range selects, dma_compute, registers; each a small kernel of our own checked
against NumPy, compiled and interpreted."""
import sys

import numpy as np
import pytest
import torch

import torchneuron  # noqa: F401
from torchneuron import nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_modes import RUNS, run  # noqa: E402  (compiled and interpreted)



def test_neuron_dtypes_module():
    nki.install()
    import neuron_dtypes as dt
    assert sys.modules["neuron_dtypes"] is dt
    x = np.array([1.0 + 2 ** -9, -2.7, 3.5], np.float32)
    b = dt.static_cast(x, dt.bfloat16).astype(np.float32)
    assert b[0] == 1.0 and b[1] == np.float32(torch.tensor(-2.7).bfloat16().item())  # round to nearest even
    assert dt.static_cast(x, nl.int32).tolist() == [1, -2, 3] and dt.static_cast(x, nl.int32).dtype == np.int32
    assert dt.static_cast(x, np.float32) is not x and dt.static_cast(x, "float16").dtype == np.float16
    assert dt.sizeinbytes(nl.bfloat16) == 2 and dt.sizeinbytes(np.float32) == 4 and dt.sizeinbytes(nl.float8_e4m3fn_x4) == 4
    assert dt.is_float_type(nl.bfloat16) and not dt.is_float_type(np.int32)
    assert dt.finfo(nl.bfloat16).max == torch.finfo(torch.bfloat16).max and dt.finfo(np.float32).bits == 32
    with pytest.raises(TypeError):
        dt.finfo(np.int32)


# Instructions of _isa_core.py -----------------------------------------------------------------------
@nki.jit
def k_predicated(x, pred):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x)
    p = nl.ndarray(pred.shape, nl.uint8, buffer=nl.sbuf)
    nisa.dma_copy(dst=p, src=pred)
    d = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=d, value=-1.0)
    nisa.tensor_copy_predicated(dst=d, src=a, predicate=p)
    e = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=e, src=d)
    nisa.tensor_copy_predicated(dst=e, src=7.0, predicate=p, reverse_pred=True)
    nl.store(out, e)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_tensor_copy_predicated(mode):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 24)).astype(np.float32)
    pred = (rng.random((16, 24)) > 0.5).astype(np.uint8)
    got = run(k_predicated, mode, x, pred)
    np.testing.assert_array_equal(got, np.where(pred != 0, x, 7.0))


@nki.jit
def k_range_select(x, lo, hi, start):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    best = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
    a, b0, b1 = nl.load(x), nl.load(lo), nl.load(hi)
    d = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    r = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.range_select(dst=d, on_true_tile=a, comp_op0=nl.greater_equal, comp_op1=nl.less, bound0=b0, bound1=b1,
                      reduce_res=r, reduce_op=nl.maximum, range_start=start, on_false_value=-100.0)
    nl.store(out, d)
    nl.store(best, r)
    return out, best


@pytest.mark.parametrize("mode", RUNS)
def test_range_select(mode):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 32)).astype(np.float32)
    lo = rng.integers(0, 40, (8, 1)).astype(np.float32)
    hi = lo + rng.integers(0, 20, (8, 1)).astype(np.float32)
    got, best = run(k_range_select, mode, x, lo, hi, 10)
    pos = np.arange(32)[None, :] + 10
    expected = np.where((pos >= lo) & (pos < hi), x, -100.0)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(best[:, 0], expected.max(axis=1))


@nki.jit
def k_select_reduce(x, pred, fill):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    best = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
    a, f = nl.load(x), nl.load(fill)
    p = nl.ndarray(pred.shape, nl.uint8, buffer=nl.sbuf)
    nisa.dma_copy(dst=p, src=pred)
    d = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    r = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(dst=d, predicate=p, on_true=a, on_false=f, reduce_res=r, reverse_pred=True)
    nl.store(out, d)
    nl.store(best, r)
    return out, best


@pytest.mark.parametrize("mode", RUNS)
def test_select_reduce(mode):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 20)).astype(np.float32)
    pred = (rng.random((8, 20)) > 0.5).astype(np.uint8)
    fill = rng.standard_normal((8, 1)).astype(np.float32)
    got, best = run(k_select_reduce, mode, x, pred, fill)
    expected = np.where(pred == 0, x, fill)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(best[:, 0], expected.max(axis=1))


@nki.jit
def k_partition_reduce(x):
    out = nl.ndarray((3, x.shape[1]), x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x)
    for k, op in enumerate((nl.add, nl.maximum, nl.minimum)):
        r = nl.ndarray((1, x.shape[1]), x.dtype, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(r, op, a)
        nl.store(out[k:k + 1, :], r)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_tensor_partition_reduce(mode):
    x = np.random.default_rng(5).standard_normal((100, 300)).astype(np.float32)  # free size past 128
    got = run(k_partition_reduce, mode, x)
    np.testing.assert_allclose(got, np.stack([x.sum(0), x.max(0), x.min(0)]), rtol=1e-5, atol=1e-5)


@nki.jit
def k_n_gather(x, idx):
    out = nl.ndarray(idx.shape, x.dtype, buffer=nl.shared_hbm)
    data = nl.ndarray((x.shape[0], 4, x.shape[1] // 4), x.dtype, buffer=nl.sbuf)  # free dims flattened
    nisa.dma_copy(dst=data, src=x.reshape((x.shape[0], 4, x.shape[1] // 4)))
    i = nl.ndarray(idx.shape, nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=i, src=idx)
    d = nl.ndarray(idx.shape, x.dtype, buffer=nl.sbuf)
    nisa.nc_n_gather(dst=d, data=data, indices=i)
    nl.store(out, d)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_nc_n_gather(mode):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((16, 64)).astype(np.float32)
    idx = rng.integers(0, 64, (16, 10)).astype(np.int32)
    np.testing.assert_array_equal(run(k_n_gather, mode, x, idx), np.take_along_axis(x, idx, axis=1))


@nki.jit
def k_nonzero(x):
    out = nl.ndarray((x.shape[0], x.shape[1] + 1), nl.int32, buffer=nl.shared_hbm)
    a = nl.load(x)
    d = nl.ndarray((x.shape[0], x.shape[1] + 1), nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=d, value=-7)
    nisa.nonzero_with_count(dst=d, src=a, index_offset=100, padding_val=-1)
    nl.store(out, d)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_nonzero_with_count(mode):
    rng = np.random.default_rng(7)
    x = (rng.random((40, 50)) > 0.6).astype(np.float32) * rng.standard_normal((40, 50)).astype(np.float32)
    x[16] = 0.0  # a partition with none
    got = run(k_nonzero, mode, x)
    for p in range(40):
        if p % 16:
            assert (got[p] == -7).all()  # only partitions 0, 16, 32, ... are written
            continue
        nz = np.flatnonzero(x[p])
        expected = np.concatenate([nz + 100, -np.ones(50 - len(nz)), [len(nz)]])
        np.testing.assert_array_equal(got[p], expected)


@nki.jit
def k_dma_compute(a, b, c):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nisa.dma_compute(out, (a, b, c), scales=(1.0, 1.0, 1.0), reduce_op=nl.add)  # device memory to device memory
    t = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
    nisa.dma_compute(dst=t, srcs=[out, a], scales=[1.0, -2.0], reduce_op=nl.add)
    out2 = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    nl.store(out2, t)
    return out, out2


@pytest.mark.parametrize("mode", RUNS)
def test_dma_compute(mode):
    rng = np.random.default_rng(8)
    a, b, c = (rng.standard_normal((8, 16)).astype(np.float32) for _ in range(3))
    s, t = run(k_dma_compute, mode, a, b, c)
    np.testing.assert_allclose(s, a + b + c, rtol=1e-6)
    np.testing.assert_allclose(t, a + b + c - 2 * a, rtol=1e-6, atol=1e-6)


def test_dtypes_survive_copies():
    import copy
    import pickle
    cfg = {"dtype": nl.bfloat16}
    assert copy.deepcopy(cfg)["dtype"] is nl.bfloat16 and pickle.loads(pickle.dumps(nl.int32)) is nl.int32
    assert copy.deepcopy(nl.bfloat16) in (nl.float32, nl.bfloat16)
    assert np.zeros(2, dtype=nl.int32).dtype == np.int32 and np.zeros(2, dtype=nl.float16).dtype == np.float16


@nki.jit
def k_broadcast_psum_source(x, w):
    """A PSUM column read through a stride-0 view (AWS's layernorm_tkg: the mean, broadcast)."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    a, ws = nl.load(x), nl.load(w)
    mean = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=mean, stationary=ws, moving=nl.load(x[:, 0:1]))
    wide = mean.ap([[1, x.shape[0]], [0, x.shape[1]]], 0)
    d = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=d, data1=a, data2=wide, op=nl.subtract)
    nl.store(out, d)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_broadcast_view_of_psum_as_a_source(mode):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((16, 8)).astype(np.float32)
    w = rng.standard_normal((16, 16)).astype(np.float32)
    expected = x - (w.T @ x[:, 0:1])
    np.testing.assert_allclose(run(k_broadcast_psum_source, mode, x, w), expected, rtol=1e-4, atol=1e-4)


@nki.jit
def k_free_shapes(x, m):
    """tensor_tensor over [P, 160] tiles and a [P, 8, 20] broadcast view of a [P, 20] tile (AWS's
    attention_tkg subtracts a row max so): operands agree in elements per partition."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    a, mx = nl.load(x), nl.load(m)
    wide = mx.ap([[m.shape[1], m.shape[0]], [0, 8], [1, m.shape[1]]], 0)
    d = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(d, a, wide, op=nl.subtract)
    nl.store(out, d)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_tensor_tensor_operands_of_other_free_shapes(mode):
    rng = np.random.default_rng(10)
    x = rng.standard_normal((16, 160)).astype(np.float32)
    m = rng.standard_normal((16, 20)).astype(np.float32)
    expected = (x.reshape(16, 8, 20) - m[:, None, :]).reshape(16, 160)
    np.testing.assert_allclose(run(k_free_shapes, mode, x, m), expected, rtol=1e-6)


@nki.jit
def k_scatter_rows_skip(x, where):
    """Row k of x goes to row where[k] of the output, or nowhere when where[k] is out of range
    (nisa.oob_mode.skip; AWS's indexed_flatten writes so)."""
    out = nl.ndarray((6, x.shape[1]), x.dtype, buffer=nl.shared_hbm)
    zero = nl.ndarray((6, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=zero, value=0.0)
    nisa.dma_copy(dst=out, src=zero)
    for k in nl.sequential_range(x.shape[0]):
        row = nl.ndarray((1, x.shape[1]), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=row, src=x[k:k + 1, :])
        index = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=index, src=where[0:1, k:k + 1])
        nisa.dma_copy(dst=out.ap(pattern=[[x.shape[1], 1], [1, x.shape[1]]], offset=0, scalar_offset=index,
                                 indirect_dim=0),
                      src=row, oob_mode=nisa.oob_mode.skip)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_dma_copy_oob_mode_skip(mode):
    x = np.arange(1, 17, dtype=np.float32).reshape(4, 4)
    where = np.array([[4, -3, 1, 9]], np.int32)
    expected = np.zeros((6, 4), np.float32)
    expected[4], expected[1] = x[0], x[2]
    np.testing.assert_array_equal(run(k_scatter_rows_skip, mode, x, where), expected)


@nki.jit
def k_sharded_scatter_skip(x, where):
    """Two programs: program k scatters row k of x to row where[k] of its own [4, F] partial (or
    skips it when out of range), then they exchange partials and keep the elementwise maximum."""
    pid = nl.program_id(0)
    partial = nl.ndarray((4, x.shape[1]), x.dtype, buffer=nl.private_hbm)
    fill = nl.ndarray((4, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=fill, value=-1)
    nisa.dma_copy(dst=partial, src=fill)
    index = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=index, src=where[0:1, pid:pid + 1])
    row = nl.ndarray((1, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=row, src=x[pid:pid + 1, :])
    nisa.dma_copy(dst=partial.ap(pattern=[[x.shape[1], 1], [1, x.shape[1]]], offset=0, scalar_offset=index,
                                 indirect_dim=0), src=row, oob_mode=nisa.oob_mode.skip)
    mine = nl.ndarray((4, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=partial)
    theirs = nl.ndarray((4, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=0)
    both = nl.ndarray((4, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=both, data1=mine, data2=theirs, op=nl.maximum)
    out = nl.ndarray((4, x.shape[1]), x.dtype, buffer=nl.shared_hbm)
    if pid == 0:
        nisa.dma_copy(dst=out, src=both)
    return out


@pytest.mark.parametrize("where", [[2, 0], [2, -1000000], [7, 1]])
@pytest.mark.parametrize("mode", RUNS)
def test_skipped_copies_of_two_programs_in_lockstep(mode, where):
    """The run-time test around a skipped copy holds only that copy: with the programs traced in
    lockstep (a branch on the program id, an exchange), the next program's instructions must not
    land inside it (the compiled trace once skipped them too, leaving the output unwritten)."""
    x = np.arange(12, dtype=np.int32).reshape(2, 6) + 5
    expected = np.full((4, 6), -1, np.int32)
    for k, w in enumerate(where):
        if 0 <= w < 4:
            expected[w] = np.maximum(expected[w], x[k])
    got = run(k_sharded_scatter_skip[2], mode, x, np.array([where], np.int32))
    np.testing.assert_array_equal(np.asarray(got.cpu() if isinstance(got, torch.Tensor) else got), expected)


@pytest.mark.parametrize("mode", RUNS)
def test_branch_on_program_id_of_a_one_program_grid(mode):
    """A kernel written for two programs (`if program_id == 0`) also runs as one, launched without a
    grid or with grid [1]: its id is 0."""
    x = np.arange(6, dtype=np.int32).reshape(1, 6)

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        if nl.program_id(0) == 0:
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=3)
        nl.store(out, t)
        return out
    for kernel in (k, k[1]):
        np.testing.assert_array_equal(np.asarray(run(kernel, mode, x)), 3 * x)


@nki.jit
def k_private_round_trip(x, branch):
    """Program k stores row k of x in a private_hbm scratch, reads it back and writes it to row k."""
    pid = nl.program_id(0)
    scratch = nl.ndarray((1, x.shape[1]), x.dtype, buffer=nl.private_hbm)
    row = nl.ndarray((1, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=row, src=x[pid:pid + 1, :])
    nisa.dma_copy(dst=scratch, src=row)
    back = nl.ndarray((1, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=back, src=scratch)
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    if branch and pid == 0:  # Python control flow on the id: the programs are traced in lockstep
        nisa.dma_copy(dst=out[0:1, :], src=back)
    else:
        nisa.dma_copy(dst=out[pid:pid + 1, :], src=back)
    return out


@pytest.mark.parametrize("branch, programs", [(False, 16), (True, 2)])
@pytest.mark.parametrize("mode", RUNS)
def test_private_hbm_is_each_programs_own(mode, branch, programs):
    """nl.private_hbm is visible only to its own program: one program's stores never reach another's
    (programs side by side, or traced in lockstep)."""
    x = np.arange(4 * programs, dtype=np.float32).reshape(programs, 4)
    np.testing.assert_array_equal(np.asarray(run(k_private_round_trip[programs], mode, x, branch)), x)


def test_dynamic_index_out_of_range_without_skip_is_an_error():
    @nki.jit
    def k(x, where):
        out = nl.ndarray((2, x.shape[1]), x.dtype, buffer=nl.shared_hbm)
        index = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=index, src=where[0:1, 0:1])
        nisa.dma_copy(dst=out.ap(pattern=[[x.shape[1], 1], [1, x.shape[1]]], offset=0, scalar_offset=index,
                                 indirect_dim=0), src=x[0:1, :])
        return out
    with pytest.raises(nki.NKIError, match="out of range"):
        nki.simulate_kernel(k, np.ones((2, 4), np.float32), np.array([[5]], np.int32))


def test_nkiobject_fields_left_out_are_none():
    from dataclasses import dataclass

    @dataclass
    class Constants(nl.NKIObject):  # AWS's mlp_tkg constants leave a field out of their constructor call
        a: int
        b: int
        c: int = 3

    class Dims(nl.NKIObject):  # AWS's moe_cte DimensionSizes: fields set later by a method
        T: int
        derived: int

        def derive(self):
            self.derived = self.T * 2

    k = Constants(a=1)
    assert (k.a, k.b, k.c) == (1, None, 3)
    d = Dims(T=4)
    assert d.derived is None
    d.derive()
    assert d.derived == 8


def test_sbuf_is_neuroncore_v3s():
    from torchneuron.nki._tensor import SBUF_BYTES_PER_PARTITION
    assert SBUF_BYTES_PER_PARTITION == 224 * 1024

    @nki.jit
    def fits(x):  # 208 KiB per partition: over NeuronCore-v2's 192 KiB, within v3's 224 KiB
        tiles = [nl.ndarray((128, 13312), nl.float32, buffer=nl.sbuf) for _ in range(4)]
        for t in tiles:
            nisa.memset(dst=t, value=1.0)
        out = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, tiles[3][0:1, 0:1])
        return out
    assert nki.simulate_kernel(fits, np.zeros((1, 1), np.float32))[0, 0] == 1.0


@nki.jit
def k_ap_of_a_view(x):
    """.ap() on a view of an on-chip tile counts its partitions as rows of the view's free size, as
    AWS's TensorView builds patterns (trivial strides over the view's shape): here t[:, 4:12] of a
    [P, 16] tile, its columns read in reverse pairs."""
    out = nl.ndarray((x.shape[0], 8), x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    view = t[:, 4:12]
    pairs = view.ap([[8, x.shape[0]], [2, 4], [1, 2]], 0)  # [P, 4, 2] over the view's own row-major layout
    d = nl.ndarray((x.shape[0], 4, 2), x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=d, src=pairs)
    nl.store(out, d.reshape((x.shape[0], 8)))
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_ap_of_a_sliced_view(mode):
    x = np.arange(6 * 16, dtype=np.float32).reshape(6, 16)
    np.testing.assert_array_equal(run(k_ap_of_a_view, mode, x), x[:, 4:12])


def test_neuron_dtypes_pack_mx_x4():
    nki.install()
    import neuron_dtypes as dt
    x = np.array([[0.5, -1.5, 3.0, 7.0, 0.25, 2.5, -6.0, 5.0]], np.float32)
    fp4 = dt.static_cast(x, dt.float4_e2m1fn_x4)
    # a record of uint16 words named after the format (AWS's references test 'x4' in str(dtype))
    assert fp4.shape == (1, 2) and "float4_e2m1fn_x4" in str(fp4.dtype) and fp4.dtype.itemsize == 2
    assert np.zeros((2, 2), dtype=nl.float4_e2m1fn_x4).dtype == fp4.dtype
    assert int(fp4.view(np.uint16)[0, 0]) == 0x1 | 0xB << 4 | 0x5 << 8 | 0x7 << 12  # first value lowest nibble
    # nearest e2m1 value, ties to the even code, saturating at 6
    np.testing.assert_array_equal(dt.static_cast(fp4, np.float32), [[0.5, -1.5, 3, 6, 0, 2, -6, 4]])
    fp8 = dt.static_cast(x, nl.float8_e4m3fn_x4)
    assert fp8.shape == (1, 2) and "float8_e4m3fn_x4" in str(fp8.dtype) and fp8.dtype.itemsize == 4
    assert nl.float8_e4m3fn_x4 == fp8.dtype  # the NumPy dtype names the nl dtype
    np.testing.assert_array_equal(dt.static_cast(fp8.T.copy().T, np.float32), x)  # survives views and copies
    assert int(fp8.view(np.uint32)[0, 0]) & 0xFF == torch.tensor(0.5).to(torch.float8_e4m3fn).view(torch.uint8).item()
    np.testing.assert_array_equal(dt.static_cast(fp8, np.float32), x)
    with pytest.raises(ValueError, match="multiple of 4"):
        dt.static_cast(x[:, :6], dt.float8_e5m2_x4)


@nki.jit
def k_placed_per_program(x):
    """Tiles placed with address= are each program's (core's) own SBUF: both programs place a tile
    at one address, write their half, then swap halves."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    half = x.shape[0] // 2
    mine = nl.ndarray((half, x.shape[1]), x.dtype, buffer=nl.sbuf, address=(0, 0))
    nisa.dma_copy(dst=mine, src=x[pid * half:(pid + 1) * half, :])
    nisa.core_barrier(out, (0, 1))
    theirs = nl.ndarray((half, x.shape[1]), x.dtype, buffer=nl.sbuf, address=(0, 4096))
    nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=0)
    nisa.dma_copy(dst=out[pid * half:(pid + 1) * half, :], src=theirs)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_placed_tiles_are_per_program(mode):
    x = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)
    np.testing.assert_array_equal(run(k_placed_per_program[2], mode, x), np.concatenate([x[4:], x[:4]]))


@nki.jit
def k_lazy_pattern(x, use_last):
    """A pattern past the tensor is built each step but used only behind a bounds test (AWS's
    output_projection_tkg builds its weight pattern before testing the index)."""
    out = nl.ndarray((4, x.shape[1]), x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    for k in range(5):
        row = t.ap([[x.shape[1], 1], [1, x.shape[1]]], k * x.shape[1])  # k = 4 reaches past t
        if k < 4 or use_last:
            nl.store(out[min(k, 3):min(k, 3) + 1, :], nl.copy(row))
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_access_pattern_past_the_tensor_is_refused_where_used(mode):
    x = np.arange(4 * 6, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(run(k_lazy_pattern, mode, x, False), x)
    with pytest.raises(nki.NKIError, match="out-of-bounds access pattern"):
        run(k_lazy_pattern, mode, x, True)


@nki.jit
def k_match_replace8(x, v):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    where = nl.ndarray(v.shape, nl.int32, buffer=nl.shared_hbm)
    data, vals = nl.load(x), nl.load(v)
    d = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    i = nl.ndarray(v.shape, nl.uint32, buffer=nl.sbuf)
    nisa.nc_match_replace8(dst=d, data=data, vals=vals, imm=-99.0, dst_idx=i)
    nl.store(out, d)
    nl.store(where, i)
    return out, where


@pytest.mark.parametrize("mode", RUNS)
def test_nc_match_replace8(mode):
    x = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8, 5], [7, 6, 5, 4, 3, 2, 1, 0, 9, 9, 9, 9]], np.float32)
    v = np.array([[3, 8, 8, 8, 8, 8, 8, 8], [9, 0, 7, 9, 2, 4, 6, 5]], np.float32)
    got, where = run(k_match_replace8, mode, x, v)
    # AWS's documented example: duplicates take positions from the highest slot down
    np.testing.assert_array_equal(where[0], [2, 10, 9, 8, 7, 6, 5, 4])
    np.testing.assert_array_equal(where[1], [9, 7, 0, 8, 5, 3, 1, 2])
    expected = x.copy()
    for p in range(2):
        expected[p, where[p]] = -99.0
    np.testing.assert_array_equal(got, expected)


@nki.jit
def k_shared_constant(x, path):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    from_file = nl.shared_constant(path)
    from_array = nl.shared_constant(np.full(x.shape, 2.0, np.float32))
    a, b = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf), nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=from_file)
    nisa.dma_copy(dst=b, src=from_array)
    nl.store(out, nl.add(nl.multiply(a, b), nl.load(x)))
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_shared_constant(mode, tmp_path):
    c = np.arange(12, dtype=np.float32).reshape(3, 4) * 1.5
    path = str(tmp_path / "c.npy")
    np.save(path, c)
    x = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(run(k_shared_constant, mode, x, path), 2 * c + 1)


@nki.jit
def k_abs_as_alu_op(x):
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    amax = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
    a = nl.load(x)
    d = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    m = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=d, data=a, op0=nl.abs, operand0=0.0, reduce_op=nl.maximum, reduce_res=m)
    nisa.tensor_scalar(dst=d, data=d, op0=np.abs, operand0=0.0, op1=nl.multiply, operand1=-2.0)
    nl.store(out, d)
    nl.store(amax, m)
    return out, amax


@pytest.mark.parametrize("mode", RUNS)
def test_a_one_operand_op_as_an_alu_op_applies_to_the_data(mode):
    """rmsnorm_quant's absolute maximum: tensor_scalar_reduce(op0=nl.abs, operand0=0.0, reduce_op=max)."""
    x = np.random.default_rng(30).standard_normal((32, 48)).astype(np.float32)
    out, amax = run(k_abs_as_alu_op, mode, x)
    np.testing.assert_array_equal(out, -2.0 * np.abs(x))
    np.testing.assert_array_equal(amax, np.abs(x).max(axis=1, keepdims=True))
