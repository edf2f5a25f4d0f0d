"""NKI names public kernels use: the float8 / MX dtypes, the activation functions, NKIObject
configs, nki.dtype, the ISA enums and nki.isa.constants, nki.compiler directives, nl.par_dim
blocks, Python control flow on loop indices, DMA across unit dims; compiled and interpreted."""
import dataclasses
import importlib
import math

import numpy as np
import pytest
import torch

import torchneuron  # noqa: F401
from torchneuron import nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_modes import RUNS, run  # noqa: E402  (compiled and interpreted)



def test_dtype_names_and_str():
    for name in ("float8_e4m3fn", "float8_e4m3", "float8_e5m2", "float8_e8m0fnu", "float8_e4m3fn_x4",
                 "float8_e5m2_x4", "float4_e2m1fn_x4", "bfloat16", "bool"):
        d = getattr(nl, name)
        assert isinstance(d, nki.dtype) and isinstance(d, nl.dtype)
        assert str(d) == (name if name != "bool" else "bool")
    assert nl.float8_e4m3fn is not nl.float8_e4m3
    assert nl.float8_e4m3fn == torch.float8_e4m3fn and nl.float8_e5m2 == torch.float8_e5m2
    assert f"{nl.bfloat16}" == "bfloat16" and nl.bool is nl.bool_


def test_packed_mx_tensor_in_device_memory_is_refused_by_name():
    @nki.jit
    def kernel(x):  # on chip it is a tile of nisa.quantize_mx / nc_matmul_mx (test_nki_isa_mx.py)
        nl.ndarray((128, 4), nl.float4_e2m1fn_x4, buffer=nl.shared_hbm)
        return x
    with pytest.raises(nki.NKIError, match="float4_e2m1fn_x4"):
        kernel(np.zeros((2, 2), np.float32))


@nki.jit
def k_activations(x):
    out = nl.ndarray((7,) + tuple(x.shape), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    fns = [nl.gelu_apprx_sigmoid, nl.gelu_apprx_sigmoid_dx, nl.gelu_dx, nl.silu_dx, nl.erf_dx, nl.softplus, nl.mish]
    for k, fn in enumerate(fns):
        if k % 2:  # the ISA form takes the same functions as op=
            y = nl.ndarray(t.shape, nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=y, op=fn, data=t)
        else:
            y = fn(t)
        nl.store(out[k], y)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_activation_functions(mode):
    x = torch.linspace(-6, 6, 64 * 16).reshape(64, 16)
    s = torch.sigmoid(1.702 * x)
    sp = torch.nn.functional.softplus(x)
    pdf = torch.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    ref = torch.stack([x * s, s + 1.702 * x * s * (1 - s), 0.5 * (1 + torch.erf(x / math.sqrt(2))) + x * pdf,
                       torch.sigmoid(x) * (1 + x * (1 - torch.sigmoid(x))), 2 / math.sqrt(math.pi) * torch.exp(-x * x),
                       sp, x * torch.tanh(sp)])
    got = run(k_activations, mode, x.numpy())
    np.testing.assert_allclose(got, ref.numpy(), rtol=1e-5, atol=1e-5)


class Config(nl.NKIObject):
    rows: int
    scale: float = 2.0
    bias: float = 0.0


@dataclasses.dataclass(frozen=True)
class Frozen(nl.NKIObject):
    skip: bool = False


@dataclasses.dataclass
class Unannotated(nl.NKIObject):
    index = None
    offset = 0


class Explicit(nl.NKIObject):
    def __init__(self, value):
        self.value = value


@nki.jit
def k_config(x, cfg):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x[0:cfg.rows, :])
    nl.store(out[0:cfg.rows, :], nl.add(nl.multiply(t, cfg.scale), cfg.bias))
    return out


def test_nkiobject_configs():
    assert Config(rows=3) == Config(3, 2.0, 0.0) and Config(rows=3, bias=1.0).bias == 1.0
    assert Frozen().skip is False and Explicit(5).value == 5
    u = Unannotated(index=3)
    assert (u.index, u.offset) == (3, 0) and Unannotated().index is None
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_allclose(k_config(x, Config(rows=2, bias=1.0)), x * 2 + 1)
    np.testing.assert_allclose(k_config(x, Config(rows=2, scale=3.0)), x * 3)  # a new config traces anew


def test_isa_enums_and_constants_modules():
    nki.install()
    constants = importlib.import_module("nki.isa.constants")
    from nki.isa import dge_mode, dma_engine, engine, matmul_perf_mode, nc_version, oob_mode, reduce_cmd  # noqa: F401
    assert constants.oob_mode.skip is nisa.oob_mode.skip and nisa.constants.dge_mode.hwdge is dge_mode.hwdge
    assert {m.name for m in nc_version} >= {"gen2", "gen3", "gen4"} and matmul_perf_mode.double_row
    assert nisa.get_nc_version() in (nc_version.gen2, nc_version.gen3)
    assert reduce_cmd.reset_reduce and engine.scalar and dma_engine.sync
    compiler = importlib.import_module("nki.compiler")
    assert compiler.skip_middle_end_transformations(len) is len


def test_tensor_compares_with_none():
    @nki.jit
    def kernel(x, y=None):
        assert x != None and not (x == None)  # noqa: E711 - as kernels test optional tensors
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out, nl.add(t, nl.load(y)) if y != None else t)  # noqa: E711
        return out
    x = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(kernel(x), x)
    np.testing.assert_allclose(kernel(x, x), 2 * x)


@nki.jit
def k_loop_control_flow(x):
    """Python control flow and list indices on affine_range / sequential_range indices."""
    n = x.shape[0] // 32
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    tiles = []
    for i in nl.affine_range(n):
        tiles.append(nl.load(x[i * 32:(i + 1) * 32, :]))
    for i in nl.sequential_range(n):
        t = tiles[i]
        if i % 2 == 0:
            t = nl.multiply(t, -1.0)
        elif i == n - 1:
            t = nl.add(t, 100.0)
        nl.store(out[i * 32:(i + 1) * 32, :], t)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_python_control_flow_on_loop_indices(mode):
    x = np.random.default_rng(0).standard_normal((128, 8)).astype(np.float32)
    ref = x.copy()
    ref[0:32] *= -1
    ref[64:96] *= -1
    ref[96:128] += 100
    np.testing.assert_allclose(run(k_loop_control_flow, mode, x), ref)


@nki.jit
def k_blocks_and_unit_dims(x):
    """nl.par_dim blocks, nki.compiler allocators, and DMA between shapes that differ in unit dims."""
    blocks, rows, cols = x.shape[0] // 128, 128, x.shape[1]
    out = nl.ndarray((x.shape[0], 1, cols), x.dtype, buffer=nl.shared_hbm)
    staged = nl.ndarray((blocks, nl.par_dim(rows), cols), nl.float32, buffer=nki.compiler.sbuf.mod_alloc(base_addr=0))
    for b in nl.affine_range(blocks):
        nisa.dma_copy(dst=staged[b], src=x[b * 128:(b + 1) * 128, :])
    for b in nl.affine_range(blocks):
        sq = nl.square(staged[b])
        nisa.dma_copy(dst=out[b * 128:(b + 1) * 128, :, :], src=sq)  # [128, cols] into [128, 1, cols]
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_par_dim_blocks_and_unit_dim_dma(mode):
    x = np.random.default_rng(1).standard_normal((256, 600)).astype(np.float32)  # 2 x 600 fp32 > one 128-row shape
    np.testing.assert_allclose(run(k_blocks_and_unit_dims, mode, x), (x * x)[:, None, :], rtol=1e-6)


def test_identity_matrix_and_static_cast():
    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        eye = nl.shared_identity_matrix(x.shape[0], dtype=nl.float32)
        prod = nl.ndarray(x.shape, nl.float32, buffer=nl.psum)
        nisa.nc_matmul(prod, eye, nl.load(x))
        nl.store(out, nl.copy(prod))
        return out
    x = np.arange(32 * 5, dtype=np.float32).reshape(32, 5)
    np.testing.assert_allclose(kernel(x), x)
    np.testing.assert_allclose(nki.simulate_kernel(kernel, x), x)
    assert nl.static_cast(np.array([1.7, -2.2]), nl.int32).tolist() == [1, -2]


@nki.jit
def k_scan_tile_initial(x, start):
    """A running sum per row that starts from a per-partition value ([P, 1] tile initial)."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    data = nl.load(x)
    ones = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.memset(ones, 1.0)
    acc = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor_scan(dst=acc, data0=ones, data1=data, initial=nl.load(start), op0=nl.multiply, op1=nl.add)
    nl.store(out, acc)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_scan_with_a_tile_initial(mode):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 40)).astype(np.float32)
    start = rng.standard_normal((16, 1)).astype(np.float32)
    np.testing.assert_allclose(run(k_scan_tile_initial, mode, x, start), start + np.cumsum(x, axis=1), rtol=1e-5,
                               atol=1e-5)
    assert nisa.nc_find_index8 is nisa.find_index8


@nki.jit
def k_patterns(x):
    """iota and affine_select over access patterns; an identity from affine_select; a reshaped output."""
    n = x.shape[0]
    out = nl.ndarray((n, 2 * 3), nl.float32, buffer=nl.shared_hbm)
    ids = nl.ndarray((n, 2 * 3), nl.uint32, buffer=nl.shared_hbm)
    ramp = nl.ndarray((n, 2 * 3), nl.uint32, buffer=nl.sbuf)
    nisa.iota(dst=ramp, pattern=[[1, 2], [10, 3]], offset=5, channel_multiplier=100)  # 5 + 100 p + i + 10 j
    nl.store(ids, ramp)
    rows = nl.ndarray((n, 1), nl.uint32, buffer=nl.sbuf)
    nisa.iota(rows, [[0, 1]], offset=7, channel_multiplier=3)  # current NKI's positional form: 7 + 3 p
    row_ids = nl.ndarray((n, 1), nl.uint32, buffer=nl.shared_hbm)
    nisa.dma_copy(row_ids, rows)
    eye = nl.ndarray((n, n), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=eye, value=1.0)
    nisa.affine_select(dst=eye, pattern=[[1, n]], channel_multiplier=-1, cmp_op=nl.equal, on_true_tile=eye,
                       on_false_value=0.0)
    prod = nl.ndarray((n, 6), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(prod, eye, nl.load(x))
    nl.store(out, nl.copy(prod))
    return out.reshape((n, 2, 3)), ids, row_ids


@pytest.mark.parametrize("mode", RUNS)
def test_access_pattern_iota_and_affine_select(mode):
    x = np.arange(4 * 6, dtype=np.float32).reshape(4, 6)
    got, ids, row_ids = run(k_patterns, mode, x)
    np.testing.assert_array_equal(np.asarray(row_ids).reshape(4), 7 + 3 * np.arange(4))
    np.testing.assert_allclose(got, x.reshape(4, 2, 3))
    p, i, j = np.meshgrid(np.arange(4), np.arange(2), np.arange(3), indexing="ij")
    np.testing.assert_array_equal(np.asarray(ids).reshape(4, 2, 3), 5 + 100 * p + i + 10 * j)


@nki.jit
def k_gather_by_scalar_offset(table, which):
    """Picks table[r, which[r]] per row with .ap(scalar_offset=, indirect_dim=1) (an index read at run time)."""
    rows, cols = table.shape
    out = nl.ndarray((rows, 1), table.dtype, buffer=nl.shared_hbm)
    idx = nl.ndarray((rows, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=which)
    picked = nl.ndarray((rows, 1), table.dtype, buffer=nl.sbuf)
    for r in range(rows):
        nisa.dma_copy(dst=picked[r:r + 1, :],
                      src=table.ap(pattern=[[cols, 1], [1, 1]], offset=r * cols,
                                   scalar_offset=idx.ap(pattern=[[1, 1], [1, 1]], offset=r), indirect_dim=1))
    nl.store(out, picked)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_ap_scalar_offset_gathers(mode):
    table = np.arange(6 * 10, dtype=np.float32).reshape(6, 10)
    which = np.array([[3], [0], [9], [5], [5], [1]], dtype=np.int32)
    np.testing.assert_array_equal(run(k_gather_by_scalar_offset, mode, table, which),
                                  np.take_along_axis(table, which, axis=1))


@nki.jit
def k_listed_tiles(lhsT, rhs):
    """Lists of tiles indexed by loop indices (as AWS's tiled matmul tutorial keeps its K tiles),
    and a [P] tile as an activation scale over [P, F]."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 32):
        a_tiles = []
        for k in nl.affine_range(K // 128):
            a_tiles.append(nl.load(lhsT[k * 128:(k + 1) * 128, m * 32:(m + 1) * 32]))
        acc = nl.ndarray((32, N), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(K // 128):
            nisa.nc_matmul(dst=acc, stationary=a_tiles[k], moving=nl.load(rhs[k * 128:(k + 1) * 128, :]))
        scale = nl.load(lhsT[0, m * 32:(m + 1) * 32].reshape((32,)))  # a [32] tile: one value per partition
        res = nl.ndarray((32, N), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=res, op=nl.copy, data=acc, scale=scale)
        nl.store(out[m * 32:(m + 1) * 32, :], res)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_tile_lists_indexed_by_loop_indices(mode):
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((256, 64)).astype(np.float32), rng.standard_normal((256, 48)).astype(np.float32)
    ref = (a.astype(np.float64).T @ b) * a[0][:, None]
    np.testing.assert_allclose(run(k_listed_tiles, mode, a, b), ref, rtol=1e-4, atol=1e-3)
    if mode == "compiled":
        assert k_listed_tiles.traces >= 1


@nki.jit
def k_placed_and_scalar_reduce(x):
    """PSUM tiles placed with address= (more than the pool holds if pooled), tiles dropped and made
    again in Python loops, and tensor_scalar_reduce."""
    n, f = x.shape
    out = nl.ndarray((n, f), nl.float32, buffer=nl.shared_hbm)
    sums = nl.ndarray((n, 1), nl.float32, buffer=nl.shared_hbm)
    banks = [nl.ndarray((n, 512), nl.float32, buffer=nl.psum, address=(0, (i % 8) * 2048)) for i in range(12)]
    for _ in range(20):  # 20 x 64 KiB per partition made and dropped: only one lives at a time
        scratch = nl.ndarray((n, 16384), nl.float32, buffer=nl.sbuf)
        nisa.memset(scratch, 0.0)
    t = nl.load(x)
    scaled = nl.ndarray((n, f), nl.float32, buffer=nl.sbuf)
    total = nl.ndarray((n, 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=scaled, data=t, op0=nl.multiply, operand0=3.0, reduce_op=nl.add, reduce_res=total)
    nl.store(out, scaled)
    nl.store(sums, total)
    assert len(banks) == 12
    return out, sums


@pytest.mark.parametrize("mode", RUNS)
def test_placed_tiles_liveness_and_tensor_scalar_reduce(mode):
    x = np.random.default_rng(5).standard_normal((16, 24)).astype(np.float32)
    out, sums = run(k_placed_and_scalar_reduce, mode, x)
    np.testing.assert_allclose(out, 3 * x, rtol=1e-6)
    np.testing.assert_allclose(sums, 3 * x.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-5)


@nki.jit
def k_rows_by_program(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    nl.store(out[nl.ds(i * 8, 8), :], nl.add(nl.load(x[nl.ds(i * 8, 8), :]), 1.0))
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_spmd_dim_over_cores_multiplies_the_grid(mode):
    x = np.arange(32 * 4, dtype=np.float32).reshape(32, 4)
    kernel = k_rows_by_program[nl.spmd_dim(2, nl.nc(2))]  # 2 programs on each of 2 cores: 4
    got = nki.simulate_kernel(kernel, x) if mode == "interpreted" else kernel(x)
    np.testing.assert_allclose(got, x + 1)


@nki.jit
def k_transpose_nd(x):
    """dma_transpose of a 4-D view: the default swaps the first and last dims; axes= permutes."""
    a, b, c, d = x.shape
    out1 = nl.ndarray((d, b, c, a), x.dtype, buffer=nl.shared_hbm)
    out2 = nl.ndarray((c, b, a, d), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((d, b, c, a), x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t, src=x)
    nl.store(out1, t)
    u = nl.ndarray((c, b, a, d), x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=u, src=x, axes=(2, 1, 0, 3))
    nl.store(out2, u)
    return out1, out2


@pytest.mark.parametrize("mode", RUNS)
def test_nd_dma_transpose(mode):
    x = np.arange(4 * 2 * 3 * 5, dtype=np.float32).reshape(4, 2, 3, 5)
    o1, o2 = run(k_transpose_nd, mode, x)
    np.testing.assert_array_equal(o1, x.transpose(3, 1, 2, 0))
    np.testing.assert_array_equal(o2, x.transpose(2, 1, 0, 3))


@nki.jit
def k_circular_buffer(x):
    """Tiles placed with address= at one place alias (a kernel's circular buffer): written through
    one, read through another."""
    n, f = x.shape
    out = nl.ndarray((n, f), nl.float32, buffer=nl.shared_hbm)
    ring = [nl.ndarray((n, f), nl.float32, buffer=nl.sbuf, address=(0, (i % 2) * 4 * f)) for i in range(4)]
    nisa.dma_copy(dst=ring[1], src=x)           # slot 1
    doubled = nl.multiply(ring[3], 2.0)         # slot 1 again
    acc = [nl.ndarray((n, f), nl.float32, buffer=nl.psum, address=(0, 0)) for _ in range(2)]
    nisa.nc_matmul(acc[0], nl.shared_identity_matrix(n), doubled)
    nisa.nc_matmul(acc[1], nl.shared_identity_matrix(n), doubled)  # the same PSUM: the group goes on (4x)
    quad = nl.copy(acc[0])  # read out: the group closes
    nisa.nc_matmul(acc[1], nl.shared_identity_matrix(n), doubled)  # a new group (2x)
    nl.store(out, nl.add(quad, nl.copy(acc[1].reshape((n, f)))))
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_placed_tiles_alias(mode):
    x = np.random.default_rng(6).standard_normal((32, 16)).astype(np.float32)
    np.testing.assert_allclose(run(k_circular_buffer, mode, x), 6 * x, rtol=1e-6)


@nki.jit
def k_placed_reshape(x):
    """A placed tile reshaped with its partition dim kept and free dims wider than 128 (AWS's mlp_cte
    views a PSUM bank as [pmax, psum_fmax, 1])."""
    n, f = x.shape
    out = nl.ndarray((n, f), nl.float32, buffer=nl.shared_hbm)
    placed = nl.ndarray((n, f), nl.float32, buffer=nl.sbuf, address=(0, 0))
    nisa.dma_copy(dst=placed, src=x)
    view = placed.reshape((n, f, 1))
    y = nl.ndarray((n, f, 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(y, view)
    z = nl.ndarray((n, f, 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(z, view.ap([[f, n], [1, f], [1, 1]]))  # a pattern on the view counts partitions as rows of f
    nl.store(out, nl.add(y, z).reshape((n, f)))
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_placed_tile_reshape_with_wide_free_dims(mode):
    x = np.random.default_rng(7).standard_normal((128, 512)).astype(np.float32)
    np.testing.assert_array_equal(run(k_placed_reshape, mode, x), 2 * x)


def test_destination_positional_with_sources_by_keyword():
    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        y = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        m = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(y, data=t, op0=nl.multiply, operand0=2.0, reduce_op=nl.maximum, reduce_res=m)
        nisa.tensor_scalar(y, data=y, op0=nl.add, operand0=m)
        nl.store(out, y)
        return out
    x = np.random.default_rng(7).standard_normal((8, 5)).astype(np.float32)
    np.testing.assert_allclose(kernel(x), 2 * x + (2 * x).max(axis=1, keepdims=True), rtol=1e-6)


@nki.jit
def k_row_softmax(x):
    """nl.max without keepdims gives a [P] tile; against [P, F] it is one value per partition."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    e = nl.exp(nl.subtract(t, nl.max(t, axis=1)))
    nl.store(out, nl.divide(e, nl.sum(e, axis=1)))
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_lower_rank_tiles_align_on_the_partition_dim(mode):
    x = np.random.default_rng(8).standard_normal((16, 16)).astype(np.float32)  # square: no accidental fit
    np.testing.assert_allclose(run(k_row_softmax, mode, x), torch.softmax(torch.from_numpy(x), 1).numpy(), rtol=1e-5,
                               atol=1e-6)


@nki.jit
def k_inner_rows(x, out):
    i = nl.program_id(0)
    nl.store(out[nl.ds(i * 8, 8), :], nl.add(nl.load(x[nl.ds(i * 8, 8), :]), float(nl.num_programs(0))))
    return out


@nki.jit
def k_calls_a_kernel(x):
    """A kernel that calls another kernel (as AWS's dispatchers do): it runs inline, on the caller's grid."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    return k_inner_rows(x, out)


@pytest.mark.parametrize("mode", RUNS)
def test_a_kernel_called_by_a_kernel_runs_on_its_grid(mode):
    x = np.arange(16 * 4, dtype=np.float32).reshape(16, 4)
    np.testing.assert_allclose(run(k_calls_a_kernel[2], mode, x), x + 2)
