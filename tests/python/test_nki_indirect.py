"""Indirect DMA through .ap(vector_offset=idx, indirect_dim=0): a gather from and a scatter to the
rows idx names at run time; .ap(scalar_offset=) with a loop variable or a register; NKIObject
configs leaving Optional fields out. Compiled and interpreted, against NumPy."""
from typing import Optional

import numpy as np
import pytest

import torchneuron  # noqa: F401
from torchneuron import nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_modes import RUNS, run  # noqa: E402  (compiled and interpreted)



@nki.jit
def k_gather_scatter(table, rows):
    """out[rows[p]] = 2 * table[rows[p]] for the P indices; other rows 0."""
    n, h = table.shape
    p = rows.shape[0]
    idx = nl.ndarray((p, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=rows)
    got = nl.ndarray((p, h), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=got, src=table.ap(pattern=[[h, p], [1, h]], offset=0, vector_offset=idx, indirect_dim=0))
    doubled = nl.ndarray((p, h), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=doubled, data=got, op0=nl.multiply, operand0=2.0)
    out = nl.ndarray((n, h), nl.float32, buffer=nl.shared_hbm)
    zeros = nl.ndarray((n, h), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=zeros, value=0.0)
    nisa.dma_copy(dst=out, src=zeros)
    nisa.dma_copy(dst=out.ap(pattern=[[h, p], [1, h // 2]], offset=h // 2, vector_offset=idx, indirect_dim=0),
                  src=doubled[:, h // 2:])
    gathered = nl.ndarray((p, h), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=gathered, src=got)
    return out, gathered


@pytest.mark.parametrize("mode", RUNS)
def test_gather_and_scatter_by_row_indices(mode):
    rng = np.random.default_rng(0)
    table = rng.standard_normal((100, 8)).astype(np.float32)
    rows = rng.permutation(100)[:64].astype(np.int32).reshape(64, 1)
    out, got = run(k_gather_scatter, mode, table, rows)
    np.testing.assert_array_equal(got, table[rows[:, 0]])
    want = np.zeros_like(table)
    want[rows[:, 0], 4:] = 2 * table[rows[:, 0], 4:]
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("mode", RUNS)
def test_an_index_out_of_range_faults(mode):
    table = np.zeros((10, 8), np.float32)
    rows = np.array([[3], [10]], np.int32)
    with pytest.raises(Exception, match="out of range|fault|index"):
        out, _ = run(k_gather_scatter, mode, table, rows)
        np.asarray(out)


@nki.jit
def k_rows_by_loop_variable(x):
    """Row i of x read with .ap(scalar_offset=i) inside a loop (i symbolic when compiled)."""
    n, h = x.shape
    out = nl.ndarray((n, h), nl.float32, buffer=nl.shared_hbm)
    for i in nl.sequential_range(n):
        t = nl.ndarray((1, h), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x.ap(pattern=[[h, 1], [1, h]], offset=0, scalar_offset=i, indirect_dim=0))
        nisa.dma_copy(dst=out[nl.ds(n - 1 - i, 1), :], src=t)
    reg = nisa.register_alloc(2)
    t = nl.ndarray((1, h), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.ap(pattern=[[h, 1], [1, h]], offset=0, scalar_offset=reg, indirect_dim=0))
    nisa.dma_copy(dst=out[0:1, :], src=t)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_scalar_offset_takes_a_loop_variable_or_register(mode):
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    want = x[::-1].copy()
    want[0] = x[2]
    np.testing.assert_array_equal(run(k_rows_by_loop_variable, mode, x), want)


class Config(nl.NKIObject):
    size: int
    limit: Optional[float]
    other: "float | None"


def test_nkiobject_optional_fields_default_to_none():
    c = Config(size=3)
    assert c.size == 3 and c.limit is None and c.other is None
    # a field without a value left out is None too (AWS's moe_cte DimensionSizes leaves out fields its
    # derive_all_dims() sets; mlp_tkg's @dataclass constants leave one out)
    assert Config(limit=1.0).size is None


@nki.jit
def k_one_partition_row(x):
    """t[0, :] of a [128, F] tile (F > 128) is partition 0's F elements, to and from device memory."""
    f = x.shape[1]
    t = nl.ndarray((128, f), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[0, :], src=x[...])
    u = nl.ndarray((128, f), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=u[0:1, :], data=t[0:1, :], op0=nl.add, operand0=1.0)
    out = nl.ndarray((1, f), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[0, :], src=u[0, :])
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_an_int_index_on_the_partition_dim_keeps_one_partition(mode):
    x = np.arange(300, dtype=np.float32).reshape(1, 300)
    np.testing.assert_array_equal(run(k_one_partition_row, mode, x), x + 1)


@nki.jit
def k_column_into_p1(x):
    """tensor_scalar of a column t[:, j] (a [P] tile) into a [P, 1] destination, on a grid of 2."""
    out = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    a = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=a, data=t[:, 1], op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out, src=a)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_tensor_scalar_of_a_column_into_p_by_1(mode):
    x = np.arange(512, dtype=np.float32).reshape(128, 4)
    np.testing.assert_array_equal(run(k_column_into_p1, mode, x)[:, 0], 2 * x[:, 1])


@nki.jit
def k_gather_unit_dims(table, rows):
    """An indirect DMA between shapes that differ in unit dims ([P, 1, F] from [P, F] rows)."""
    n, h = table.shape
    p = rows.shape[0]
    idx = nl.ndarray((p, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=rows)
    got = nl.ndarray((p, 1, h), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=got, src=table.ap(pattern=[[h, p], [1, h]], offset=0, vector_offset=idx, indirect_dim=0))
    out = nl.ndarray((p, h), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=got.reshape((p, h)))
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_indirect_dma_across_unit_dims(mode):
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    rows = np.array([[7], [2], [9]], np.int32)
    np.testing.assert_array_equal(run(k_gather_unit_dims, mode, table, rows), table[[7, 2, 9]])
