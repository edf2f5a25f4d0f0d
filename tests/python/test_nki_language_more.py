"""nki.language functions added for the documented API: bitwise operations, prod, prelu, rms_norm,
rand / random_seed / dropout, gather_flattened, fori_loop and while_loop, and the tile_size
constants; each a small kernel of our own checked against NumPy, compiled and interpreted."""
import numpy as np
import pytest

import torchneuron  # noqa: F401
from torchneuron import nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_modes import RUNS, run  # noqa: E402  (compiled and interpreted)


@nki.jit
def k_bitwise(a, b, s):
    """Each bitwise op of two int32 tiles (shifts by a tile of counts), stacked."""
    out = nl.ndarray((7,) + a.shape, nl.int32, buffer=nl.shared_hbm)
    x, y, n = nl.load(a), nl.load(b), nl.load(s)
    results = [nl.bitwise_and(x, y), nl.bitwise_or(x, y), nl.bitwise_xor(x, y), nl.invert(x),
               nl.left_shift(x, n), nl.right_shift(x, n), nl.bitwise_and(x, 0xFF)]
    for k, r in enumerate(results):
        nl.store(out[k], r)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_bitwise_ops(mode):
    rng = np.random.default_rng(0)
    a = rng.integers(-2 ** 20, 2 ** 20, (16, 32)).astype(np.int32)
    b = rng.integers(-2 ** 20, 2 ** 20, (16, 32)).astype(np.int32)
    s = rng.integers(0, 12, (16, 32)).astype(np.int32)
    got = np.asarray(run(k_bitwise, mode, a, b, s))
    expected = np.stack([a & b, a | b, a ^ b, ~a, a << s, a >> s, a & 0xFF])
    np.testing.assert_array_equal(got, expected)


@nki.jit
def k_unsigned_shift(a):
    out = nl.ndarray((2,) + a.shape, nl.int32, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, nl.uint8, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nl.store(out[0], nl.right_shift(x, 3, dtype=nl.int32))
    nl.store(out[1], nl.invert(x, dtype=nl.int32))
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_bitwise_unsigned_width(mode):
    a = np.arange(0, 256, 2, dtype=np.uint8).reshape(4, 32)
    got = np.asarray(run(k_unsigned_shift, mode, a))
    np.testing.assert_array_equal(got[0], a >> 3)
    np.testing.assert_array_equal(got[1], (~a).astype(np.int32))  # within 8 bits: 255 - a


@nki.jit
def k_bitwise_float(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.bitwise_and(nl.load(a), 1))
    return out


def test_bitwise_refuses_float_tiles():
    with pytest.raises(Exception, match="integer"):
        nki.simulate_kernel(k_bitwise_float, np.ones((4, 4), np.float32))


@nki.jit
def k_prod(x):
    out = nl.ndarray((x.shape[0], 2), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out[:, 0:1], nl.prod(t, axis=(1, 2), keepdims=True).reshape((x.shape[0], 1)))
    whole = nl.prod(t, axis=2)  # [P, A]
    nl.store(out[:, 1:2], nl.prod(whole, axis=1, keepdims=True))
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_prod(mode):
    x = np.random.default_rng(1).uniform(0.5, 1.5, (8, 3, 5)).astype(np.float32)
    x[0, 1, 2] = -2.0
    got = np.asarray(run(k_prod, mode, x))
    expected = x.astype(np.float64).prod(axis=(1, 2))
    np.testing.assert_allclose(got[:, 0], expected, rtol=1e-5)
    np.testing.assert_allclose(got[:, 1], expected, rtol=1e-5)


@nki.jit
def k_prelu_rmsnorm(x, w, alpha):
    out = nl.ndarray((3,) + x.shape, nl.float32, buffer=nl.shared_hbm)
    t, a = nl.load(x), nl.load(alpha)
    nl.store(out[0], nl.prelu(t, 0.25))
    nl.store(out[1], nl.prelu(t, a))  # a [P, 1] slope per partition
    nl.store(out[2], nl.rms_norm(t, nl.load(w), axis=1, n=x.shape[1], epsilon=1e-3))
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_prelu_and_rms_norm(mode):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 24)).astype(np.float32)
    w = rng.standard_normal((16, 24)).astype(np.float32)
    alpha = rng.uniform(0, 1, (16, 1)).astype(np.float32)
    got = np.asarray(run(k_prelu_rmsnorm, mode, x, w, alpha))
    np.testing.assert_allclose(got[0], np.where(x > 0, x, 0.25 * x), rtol=1e-6)
    np.testing.assert_allclose(got[1], np.where(x > 0, x, alpha * x), rtol=1e-6)
    rms = np.sqrt((x.astype(np.float64) ** 2).mean(axis=1, keepdims=True) + 1e-3)
    np.testing.assert_allclose(got[2], x / rms * w, rtol=1e-5, atol=1e-6)


@nki.jit
def k_random(seed, x):
    out = nl.ndarray((4,) + x.shape, nl.float32, buffer=nl.shared_hbm)
    s = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=seed)
    nl.random_seed(s)
    nl.store(out[0], nl.rand(x.shape, dtype=nl.float32))
    nl.random_seed(s)
    nl.store(out[1], nl.rand(x.shape, dtype=nl.float32))  # the same numbers again
    t = nl.load(x)
    nl.store(out[2], nl.dropout(t, 0.25))
    nl.store(out[3], nl.dropout(t, 1.0))
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_rand_random_seed_dropout(mode):
    x = np.random.default_rng(3).uniform(1, 2, (128, 64)).astype(np.float32)
    got = np.asarray(run(k_random, mode, np.array([[7]], np.int32), x))
    assert got[0].min() >= 0 and got[0].max() < 1 and abs(got[0].mean() - 0.5) < 0.02
    np.testing.assert_array_equal(got[0], got[1])
    kept = got[2] != 0
    np.testing.assert_array_equal(got[2][kept], x[kept])  # kept elements are not rescaled
    assert abs(kept.mean() - 0.75) < 0.02
    assert (got[3] == 0).all()
    if mode == "interpreted":  # the same draws compiled
        np.testing.assert_array_equal(got, np.asarray(run(k_random, "compiled", np.array([[7]], np.int32), x)))


@nki.jit
def k_gather(data, idx):
    out = nl.ndarray(idx.shape, data.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.gather_flattened(nl.load(data), nl.load(idx)))
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_gather_flattened(mode):
    rng = np.random.default_rng(4)
    data = rng.standard_normal((8, 40)).astype(np.float32)
    idx = rng.integers(0, 40, (8, 12)).astype(np.int32)
    got = np.asarray(run(k_gather, mode, data, idx))
    np.testing.assert_array_equal(got, np.take_along_axis(data, idx, axis=1))


@nki.jit
def k_fori(data, upper):
    """out[0, i] = 2 * data[0, i] for i < upper (a register bound), the rest 0."""
    out = nl.ndarray(data.shape, data.dtype, buffer=nl.shared_hbm)
    zeros = nl.zeros(data.shape, data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=out, src=zeros)
    bound = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=bound, src=upper)
    reg = nisa.register_alloc()
    nisa.register_load(reg, bound)
    temp = nl.ndarray((1, 1), data.dtype, buffer=nl.sbuf)

    def body(i):
        nisa.dma_copy(dst=temp, src=data.ap([[1, 1], [1, 1]], scalar_offset=i, indirect_dim=1))
        nisa.tensor_scalar(dst=temp, data=temp, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out.ap([[1, 1], [1, 1]], scalar_offset=i, indirect_dim=1), src=temp)

    nl.fori_loop(0, reg, body)
    return out


@nki.jit
def k_fori_static(data):
    """out[0, i] = data[0, i] + i for every i (int bounds, step 2 then 1 for the odd ones)."""
    out = nl.ndarray(data.shape, data.dtype, buffer=nl.shared_hbm)
    temp = nl.ndarray((1, 1), data.dtype, buffer=nl.sbuf)
    value = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)

    def body(i):
        nisa.register_store(value, i)
        nisa.dma_copy(dst=temp, src=data.ap([[1, 1], [1, 1]], scalar_offset=i, indirect_dim=1))
        nisa.tensor_tensor(dst=temp, data1=temp, data2=value, op=nl.add)
        nisa.dma_copy(dst=out.ap([[1, 1], [1, 1]], scalar_offset=i, indirect_dim=1), src=temp)

    nl.fori_loop(0, data.shape[1], body, step=2)
    nl.fori_loop(1, data.shape[1], body, step=2)
    return out


@nki.jit
def k_while(data, count):
    """acc = data summed count times (count from device memory), by a while loop on a register."""
    out = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
    val = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=val, src=data)
    acc = nl.zeros((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    remaining = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=remaining, src=count)
    one = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=one, value=1)
    reg = nisa.register_alloc()
    nisa.register_load(reg, remaining)

    def body(r):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=val, op=nl.add)
        nisa.tensor_tensor(dst=remaining, data1=remaining, data2=one, op=nl.subtract)
        nisa.register_load(r, remaining)
        return r

    nl.while_loop(reg, body)
    nisa.dma_copy(dst=out, src=acc)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_fori_loop_and_while_loop(mode):
    data = np.arange(1, 11, dtype=np.float32).reshape(1, 10)
    for upper in (0, 4, 10):
        expected = np.where(np.arange(10) < upper, 2 * data, 0)
        np.testing.assert_array_equal(np.asarray(run(k_fori, mode, data, np.array([[upper]], np.int32))), expected)
    np.testing.assert_array_equal(np.asarray(run(k_fori_static, mode, data)), data + np.arange(10))
    for count in (0, 1, 5):
        got = np.asarray(run(k_while, mode, np.array([[1.5]], np.float32), np.array([[count]], np.int32)))
        assert got[0, 0] == 1.5 * count


def test_tile_size_constants():
    ts = nl.tile_size
    assert (ts.pmax, ts.psum_bank_fmax, ts.psum_bank_fmax_bytes, ts.psum_num_banks) == (128, 512, 2048, 8)
    assert ts.psum_bank_fmax_bytes * ts.psum_num_banks == 16 * 1024  # the PSUM of a partition
    assert ts.sbuf_fmax_bytes == ts.total_available_sbuf_size == 224 * 1024  # per partition (gen3)
    assert ts.sbuf_size_bytes == 128 * ts.sbuf_fmax_bytes and ts.sbuf_fmax == ts.sbuf_fmax_bytes // 4


@nki.jit
def k_draws_in_loop(x):
    """rand2 inside a loop, in each program of a grid: each iteration draws new numbers."""
    out = nl.ndarray((2, 3, 8, 16), nl.float32, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    for i in nl.affine_range(3):
        t = nl.ndarray((8, 16), nl.float32, buffer=nl.sbuf)
        nisa.rand2(dst=t, min=0.0, max=1.0)
        nl.store(out[pid, i], t)
    return out


def test_draws_in_a_loop_of_a_grid():
    x = np.zeros((1, 1), np.float32)
    compiled, interpreted = np.asarray(k_draws_in_loop[2](x)), np.asarray(nki.simulate_kernel(k_draws_in_loop[2], x))
    np.testing.assert_array_equal(compiled, interpreted)
    assert not np.array_equal(compiled[0, 0], compiled[0, 1])  # the first draw seeds once, not every iteration
    np.testing.assert_array_equal(compiled[0], compiled[1])  # each program starts from seed 0


@nki.jit
def k_views(x, rows, idx):
    """NkiTensor's view methods, each copied out (x [4, 6, 8] in device memory)."""
    out = nl.ndarray((8, 4, 48), nl.float32, buffer=nl.shared_hbm)
    zeros = nl.zeros((4, 48), nl.float32, buffer=nl.sbuf)
    for k in range(8):
        nisa.dma_copy(dst=out[k], src=zeros)
    t = nl.ndarray((4, 48), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.reshape((4, 48)))
    a = nl.ndarray((4, 8, 6), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x.permute((0, 2, 1)))  # device memory permuted
    nisa.dma_copy(dst=out[0], src=a.flatten_dims(1, 2))
    c = nl.ndarray((4, 6, 3), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=c, src=t.reshape_dim(1, (6, -1)).slice(2, 1, 7, 2))  # strided: not flattened in place
    nisa.dma_copy(dst=out[1, :, 0:18], src=c.flatten_dims(1, 2))
    nisa.dma_copy(dst=out[2, :, 0:8], src=t.reshape_dim(1, (6, 8)).select(1, 2))
    b = nl.ndarray((4, 3, 8), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=b, src=t[:, 0:8].expand_dim(1).broadcast(1, 3))
    nisa.dma_copy(dst=out[3, :, 0:24], src=b.flatten_dims(1, 2))
    nisa.dma_copy(dst=out[4, :, 0:8], src=b[:, 1:2, :].squeeze_dim(1))
    r = nl.ndarray((4, 12, 4), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=t.rearrange(("b", ("h", "w")), ("b", "w", "h"), {"h": 4}))
    nisa.dma_copy(dst=out[5], src=r.reshape((4, 48)))
    picked = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
    offsets = nl.ndarray((4, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=offsets, src=idx)
    nisa.dma_copy(dst=picked, src=rows.vector_select(0, offsets))
    nisa.dma_copy(dst=out[6, :, 0:8], src=picked)
    assert t.size == 192 and t.get_pattern() == [[48, 4], [1, 48]] and not t.is_indirect()
    assert isinstance(t, nl.NkiTensor)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_nki_tensor_views(mode):
    x = np.arange(4 * 6 * 8, dtype=np.float32).reshape(4, 6, 8)
    rows = np.arange(10 * 8, dtype=np.float32).reshape(10, 8) + 1000
    idx = np.array([[7], [0], [3], [3]], np.int32)
    got = np.asarray(run(k_views, mode, x, rows, idx))
    t = x.reshape(4, 48)
    np.testing.assert_array_equal(got[0], x.transpose(0, 2, 1).reshape(4, 48))
    np.testing.assert_array_equal(got[1, :, :18], t.reshape(4, 6, 8)[:, :, 1:7:2].reshape(4, 18))
    np.testing.assert_array_equal(got[2, :, :8], t.reshape(4, 6, 8)[:, 2])
    np.testing.assert_array_equal(got[3, :, :24], np.repeat(t[:, None, 0:8], 3, axis=1).reshape(4, 24))
    np.testing.assert_array_equal(got[4, :, :8], t[:, 0:8])
    np.testing.assert_array_equal(got[5], t.reshape(4, 4, 12).transpose(0, 2, 1).reshape(4, 48))
    np.testing.assert_array_equal(got[6, :, :8], rows[idx[:, 0]])


def test_view_rules():
    @nki.jit
    def bad(x):
        t = nl.load(x)
        t.reshape_dim(1, (2, 4)).permute((0, 2, 1)).flatten_dims(1, 2)  # not contiguous
        return x
    with pytest.raises(Exception, match="not contiguous"):
        nki.simulate_kernel(bad, np.zeros((4, 8), np.float32))

    @nki.jit
    def on_partitions(x):
        nl.load(x).permute((1, 0))
        return x
    with pytest.raises(Exception, match="partition dim"):
        nki.simulate_kernel(on_partitions, np.zeros((4, 8), np.float32))


@nki.jit
def k_one_loop_unrolled(x):
    """The first loop indexes a Python list with its variable (so it is unrolled); the second loop,
    as long, only indexes tiles (so it stays a loop in the compiled code)."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    scales = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    for i in nl.affine_range(8):
        t = nl.load(x[i:i + 1, :])
        nl.store(out[i:i + 1, :], nl.multiply(t, scales[i]))
    for j in nl.affine_range(8):
        t = nl.load(out[j:j + 1, :])
        nl.store(out[j:j + 1, :], nl.add(t, 1.0))
    return out


def test_only_the_loops_python_needs_are_unrolled():
    x = np.random.default_rng(9).standard_normal((8, 16)).astype(np.float32)
    expected = x * np.arange(1, 9, dtype=np.float32)[:, None] + 1
    np.testing.assert_allclose(np.asarray(k_one_loop_unrolled(x)), expected, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(nki.simulate_kernel(k_one_loop_unrolled, x)), expected, rtol=1e-6)
    (compiled,) = k_one_loop_unrolled._cache.values()
    loops = [line for line in compiled.source.splitlines() if line.strip().startswith("for (int64_t i")]
    assert len(loops) == 1 and "< (8)" in loops[0]  # the second loop; the first is unrolled


@nki.jit
def k_reinterpret(x):
    """x int32 [4, 8] in device memory read as uint8 [4, 32] and int16 [4, 16] (.view(dtype) and
    .reinterpret_cast(dtype))."""
    out = nl.ndarray((2, 4, 32), nl.int32, buffer=nl.shared_hbm)
    zeros = nl.zeros((4, 32), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=out[1], src=zeros)
    as_bytes = nl.ndarray((4, 32), nl.uint8, buffer=nl.sbuf)
    nisa.dma_copy(dst=as_bytes, src=x.view(nl.uint8))
    as_halves = nl.ndarray((4, 16), nl.int16, buffer=nl.sbuf)
    nisa.dma_copy(dst=as_halves, src=x.reinterpret_cast(nl.int16))
    nisa.dma_copy(dst=out[0], src=as_bytes)
    nisa.dma_copy(dst=out[1, :, 0:16], src=as_halves)
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_reinterpret_cast(mode):
    x = np.random.default_rng(10).integers(-2 ** 31, 2 ** 31 - 1, (4, 8)).astype(np.int32)
    got = np.asarray(run(k_reinterpret, mode, x))
    np.testing.assert_array_equal(got[0], x.view(np.uint8))
    np.testing.assert_array_equal(got[1, :, :16], x.view(np.int16))


@nki.jit
def k_true_division(x):
    """A Python float from a loop index (i / 2): that loop is traced unrolled."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0]):
        nl.store(out[i:i + 1, :], nl.multiply(nl.load(x[i:i + 1, :]), i / 2))
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_python_float_from_a_loop_index(mode):
    x = np.ones((4, 8), np.float32)
    np.testing.assert_array_equal(np.asarray(run(k_true_division, mode, x)), x * (np.arange(4) / 2)[:, None])


@nki.jit
def k_power_of_index(x):
    """After one loop is unrolled for a list index, another computes j ** 2 in Python (a TypeError
    on a symbolic index): the kernel is traced with its short loops unrolled."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    offsets = [0.0, 10.0, 20.0, 30.0]
    for i in nl.affine_range(4):
        nl.store(out[i:i + 1, :], nl.add(nl.load(x[i:i + 1, :]), offsets[i]))
    for j in nl.affine_range(4):
        nl.store(out[j:j + 1, :], nl.multiply(nl.load(out[j:j + 1, :]), float(j ** 2)))
    return out


@pytest.mark.parametrize("mode", RUNS)
def test_other_python_errors_on_an_index_fall_back_to_unrolling(mode):
    x = np.ones((4, 8), np.float32)
    expected = (x + np.array([0, 10, 20, 30], np.float32)[:, None]) * (np.arange(4) ** 2)[:, None]
    np.testing.assert_array_equal(np.asarray(run(k_power_of_index, mode, x)), expected)


@nki.jit
def k_many_instructions(x):
    """600 instructions at the top level (a Python loop): the generated C++ is cut into functions."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    for k in range(300):
        t = nl.add(t, float(k % 7))
        t = nl.multiply(t, 0.5)
    nl.store(out, t)
    return out


def test_long_programs_compile_as_several_functions():
    x = np.random.default_rng(11).standard_normal((8, 16)).astype(np.float32)
    expected = x.astype(np.float64)
    for k in range(300):
        expected = (expected + k % 7) * 0.5
    np.testing.assert_allclose(np.asarray(k_many_instructions(x)), expected, rtol=1e-5)
    (compiled,) = k_many_instructions._cache.values()
    assert compiled.source.count("static __attribute__((noinline)) void") >= 2
    np.testing.assert_allclose(np.asarray(nki.simulate_kernel(k_many_instructions, x)), expected, rtol=1e-5)
