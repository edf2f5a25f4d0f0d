"""NKI primitives (torchneuron.nki.language / isa) against CPU PyTorch, compiled and interpreted."""
import numpy as np
import pytest
import torch

from torchneuron import nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl



def dev(t):
    return t.to("neuron")


def unary_kernel(fn):
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(out, fn(nl.load(a)))
        return out
    return kernel


UNARY = [
    (nl.exp, torch.exp), (nl.log, torch.log), (nl.sqrt, torch.sqrt), (nl.rsqrt, torch.rsqrt),
    (nl.square, torch.square), (nl.reciprocal, torch.reciprocal), (nl.tanh, torch.tanh),
    (nl.sigmoid, torch.sigmoid), (nl.relu, torch.relu), (nl.gelu, torch.nn.functional.gelu),
    (nl.silu, torch.nn.functional.silu), (nl.abs, torch.abs), (nl.negative, torch.neg),
    (nl.sign, torch.sign), (nl.sin, torch.sin), (nl.cos, torch.cos), (nl.erf, torch.erf),
]


@pytest.mark.parametrize("fn,ref", UNARY, ids=[f.__name__ for f, _ in UNARY])
def test_unary(nki_mode, fn, ref):
    a = torch.rand(128, 48) * 3 + 0.1
    if fn in (nl.negative, nl.sign, nl.sin, nl.cos, nl.tanh, nl.relu, nl.abs, nl.gelu, nl.silu, nl.erf, nl.square):
        a = a - 1.5
    out = unary_kernel(fn)(dev(a)).cpu()
    torch.testing.assert_close(out, ref(a), rtol=2e-5, atol=2e-6)


BINARY = [
    (nl.add, torch.add), (nl.subtract, torch.sub), (nl.multiply, torch.mul), (nl.divide, torch.div),
    (nl.maximum, torch.maximum), (nl.minimum, torch.minimum), (nl.power, torch.pow),
    (nl.equal, torch.eq), (nl.not_equal, torch.ne), (nl.less, torch.lt), (nl.less_equal, torch.le),
    (nl.greater, torch.gt), (nl.greater_equal, torch.ge),
]


@pytest.mark.parametrize("fn,ref", BINARY, ids=[f.__name__ for f, _ in BINARY])
def test_binary_with_broadcast(nki_mode, fn, ref):
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(out, fn(nl.load(a), nl.load(b), dtype=nl.float32))
        return out
    a = torch.rand(100, 64) + 0.5
    b = torch.rand(100, 1) + 0.5
    b[::3] = a[::3, :1]  # some equal elements for the comparisons
    torch.testing.assert_close(kernel(dev(a), dev(b)).cpu(), ref(a, b).float(), rtol=2e-5, atol=1e-6)


def test_where_and_scalars(nki_mode):
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.store(out, nl.where(nl.greater(t, 0.0), t * 2.0, 1.0 - t))
        return out
    a = torch.randn(64, 32)
    torch.testing.assert_close(kernel(dev(a)).cpu(), torch.where(a > 0, a * 2, 1 - a))


@pytest.mark.parametrize("op", ["sum", "max", "min", "mean"])
def test_reductions_keepdims_and_axes(nki_mode, op):
    fn = getattr(nl, op)

    @nki.jit
    def kernel(a):
        p, f, g = a.shape
        inner = nl.ndarray((p, f), nl.float32, buffer=nl.shared_hbm)
        both = nl.ndarray((p, 1, 1), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.store(inner, fn(t, axis=2))
        nl.store(both, fn(t, axis=(1, 2), keepdims=True))
        return inner, both
    a = torch.randn(96, 8, 20)
    ref = {"sum": torch.sum, "mean": torch.mean, "max": torch.amax, "min": torch.amin}[op]
    inner, both = kernel(dev(a))
    torch.testing.assert_close(inner.cpu(), ref(a, dim=2), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(both.cpu(), ref(a, dim=(1, 2), keepdim=True), rtol=1e-5, atol=1e-5)


def test_softmax_and_middle_axis_reduction(nki_mode):
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        mid = nl.ndarray((a.shape[0], 1, a.shape[2]), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.store(out, nl.softmax(t, axis=2))
        nl.store(mid, nl.sum(t, axis=1, keepdims=True))
        return out, mid
    a = torch.randn(32, 6, 40)
    out, mid = kernel(dev(a))
    torch.testing.assert_close(out.cpu(), a.softmax(2), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(mid.cpu(), a.sum(1, keepdim=True), rtol=1e-5, atol=1e-5)


def test_nc_matmul_accumulates_in_psum(nki_mode):
    @nki.jit
    def zeroed(lhs_t, rhs):
        out = nl.ndarray((lhs_t.shape[1], rhs.shape[1]), nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((lhs_t.shape[1], rhs.shape[1]), nl.float32, buffer=nl.psum)
        for kk in nl.affine_range(lhs_t.shape[0] // 128):
            nisa.nc_matmul(acc, nl.load(lhs_t[nl.ds(kk * 128, 128), :]), nl.load(rhs[nl.ds(kk * 128, 128), :]),
                           accumulate=True)
        nl.store(out, acc)
        return out
    a = torch.randn(256, 96)
    b = torch.randn(256, 200)
    torch.testing.assert_close(zeroed(dev(a), dev(b)).cpu(), a.t() @ b, rtol=1e-4, atol=1e-4)


def test_nc_matmul_overwrites_without_accumulate_and_legacy_returns(nki_mode):
    @nki.jit
    def kernel(a_t, b):
        out = nl.ndarray((a_t.shape[1], b.shape[1]), nl.float32, buffer=nl.shared_hbm)
        acc = nl.full((a_t.shape[1], b.shape[1]), 5.0, nl.float32, buffer=nl.psum)
        nisa.nc_matmul(acc, nl.load(a_t), nl.load(b), accumulate=False)  # overwrites the 5s (the default adds)
        legacy = nisa.nc_matmul(nl.load(a_t), nl.load(b))  # legacy: returns a PSUM tile
        nl.store(out, nl.add(acc, legacy))
        return out
    a = torch.randn(64, 32)
    b = torch.randn(64, 48)
    torch.testing.assert_close(kernel(dev(a), dev(b)).cpu(), 2 * (a.t() @ b), rtol=1e-4, atol=1e-4)


def test_nl_matmul_and_transposes(nki_mode):
    @nki.jit
    def kernel(x, y):
        prod = nl.ndarray((x.shape[0], y.shape[1]), nl.float32, buffer=nl.shared_hbm)
        xt = nl.ndarray((x.shape[1], x.shape[0]), nl.float32, buffer=nl.shared_hbm)
        xt2 = nl.ndarray((x.shape[1], x.shape[0]), nl.float32, buffer=nl.shared_hbm)
        xt3 = nl.ndarray((x.shape[1], x.shape[0]), nl.float32, buffer=nl.shared_hbm)
        tile = nl.load(x)
        nl.store(prod, nl.matmul(tile, nl.load(y)))
        nl.store(xt, nisa.nc_transpose(tile))
        nl.store(xt2, nl.transpose(tile))
        nl.store(xt3, nl.load_transpose2d(x))
        return prod, xt, xt2, xt3
    x = torch.randn(100, 60)
    y = torch.randn(60, 80)
    prod, *transposed = kernel(dev(x), dev(y))
    torch.testing.assert_close(prod.cpu(), x @ y, rtol=1e-4, atol=1e-4)
    for t in transposed:
        torch.testing.assert_close(t.cpu(), x.t())


def test_activation_scale_bias_and_reduce(nki_mode):
    @nki.jit
    def kernel(x, bias):
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        total = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
        res = nl.ndarray(x.shape, nl.float32)
        acc = nl.ndarray((x.shape[0], 1), nl.float32)
        nisa.activation(res, nl.exp, nl.load(x), bias=nl.load(bias), scale=0.5, reduce_op=nl.add, reduce_res=acc)
        nl.store(out, res)
        nl.store(total, acc)
        legacy = nisa.activation_reduce(nl.tanh, nl.load(x), nl.add, acc, scale=2.0)
        nl.store(out, nl.add(res, legacy))
        return out, total
    x = torch.randn(64, 30)
    bias = torch.randn(64, 1)
    out, total = kernel(dev(x), dev(bias))
    expected = torch.exp(x * 0.5 + bias)
    torch.testing.assert_close(total.cpu(), expected.sum(1, keepdim=True), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.cpu(), expected + torch.tanh(2 * x), rtol=1e-5, atol=1e-5)


def test_tensor_scalar_tensor_tensor_and_scalar_tensor_tensor(nki_mode):
    @nki.jit
    def kernel(x, y, col):
        a = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        b = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        c = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        tx, ty, tc = nl.load(x), nl.load(y), nl.load(col)
        nl.store(a, nisa.tensor_scalar(tx, np.subtract, 3.0, reverse0=True, op1=np.multiply, operand1=tc))
        r = nl.ndarray(x.shape, nl.float32)
        nisa.tensor_tensor(r, tx, ty, nl.maximum)
        nl.store(b, r)
        nl.store(c, nisa.scalar_tensor_tensor(data=tx, op0=nl.multiply, operand0=tc, op1=nl.subtract, operand1=ty))
        return a, b, c
    x, y, col = torch.randn(50, 20), torch.randn(50, 20), torch.randn(50, 1)
    a, b, c = kernel(dev(x), dev(y), dev(col))
    torch.testing.assert_close(a.cpu(), (3.0 - x) * col)
    torch.testing.assert_close(b.cpu(), torch.maximum(x, y))
    torch.testing.assert_close(c.cpu(), x * col - y)


def test_tensor_reduce_negate_and_dst(nki_mode):
    @nki.jit
    def kernel(x):
        out = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((x.shape[0], 1), nl.float32)
        nisa.tensor_reduce(t, np.max, nl.load(x), axis=1, negate=True, keepdims=True)
        nl.store(out, t)
        return out
    x = torch.randn(30, 70)
    torch.testing.assert_close(kernel(dev(x)).cpu(), -x.amax(1, keepdim=True))


def test_tensor_tensor_scan(nki_mode):
    @nki.jit
    def scan(a, b):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.tensor_tensor_scan(nl.load(a), nl.load(b), 0.0, np.multiply, np.add))
        return out
    a, b = torch.rand(16, 40), torch.randn(16, 40)
    expected = torch.empty_like(a)
    state = torch.zeros(16)
    for i in range(40):
        state = state * a[:, i] + b[:, i]
        expected[:, i] = state
    torch.testing.assert_close(scan(dev(a), dev(b)).cpu(), expected, rtol=1e-5, atol=1e-5)


def test_iota_affine_select_and_memset(nki_mode):
    @nki.jit
    def kernel(x):
        idx = nl.ndarray((64, 48), nl.int32, buffer=nl.shared_hbm)
        sel = nl.ndarray((64, 48), nl.float32, buffer=nl.shared_hbm)
        filled = nl.ndarray((64, 48), nl.float32, buffer=nl.shared_hbm)
        ip, jf = nl.mgrid[0:64, 0:48]
        nl.store(idx, nisa.iota(ip * 48 + jf + 7, dtype=nl.int32))
        nl.store(sel, nisa.affine_select(ip >= jf, nl.load(x), -5.0))
        nl.store(filled, nisa.memset((64, 48), 2.5, nl.float32))
        return idx, sel, filled
    x = torch.randn(64, 48)
    idx, sel, filled = kernel(dev(x))
    assert torch.equal(idx.cpu(), torch.arange(64 * 48, dtype=torch.int32).reshape(64, 48) + 7)
    torch.testing.assert_close(sel.cpu(), torch.where(torch.ones(64, 48).tril().bool(), x, torch.tensor(-5.0)))
    assert torch.equal(filled.cpu(), torch.full((64, 48), 2.5))


def test_bn_stats_aggr_and_reciprocal(nki_mode):
    @nki.jit
    def kernel(x):
        out = nl.ndarray((x.shape[0], 2), nl.float32, buffer=nl.shared_hbm)
        inv = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        stats = nl.ndarray((x.shape[0], 12), nl.float32)
        half = x.shape[1] // 2
        nisa.bn_stats(stats[:, 0:6], t[:, 0:half])
        nisa.bn_stats(stats[:, 6:12], t[:, half:x.shape[1]])
        nl.store(out, nisa.bn_aggr(stats))
        nl.store(inv, nisa.reciprocal(t))
        return out, inv
    x = torch.randn(40, 64) * 2 + 1
    out, inv = kernel(dev(x))
    torch.testing.assert_close(out.cpu()[:, 0], x.mean(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.cpu()[:, 1], x.var(1, unbiased=False), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(inv.cpu(), 1 / x)


def test_max8_find_index8(nki_mode):
    @nki.jit
    def kernel(x):
        vals = nl.ndarray((x.shape[0], 8), nl.float32, buffer=nl.shared_hbm)
        idx = nl.ndarray((x.shape[0], 8), nl.int32, buffer=nl.shared_hbm)
        t = nl.load(x)
        top = nisa.max8(t)
        nl.store(vals, top)
        nl.store(idx, nisa.find_index8(t, top))
        return vals, idx
    x = torch.randn(100, 37)
    vals, idx = kernel(dev(x))
    ref = x.topk(8, dim=1)
    torch.testing.assert_close(vals.cpu(), ref.values)
    assert torch.equal(idx.cpu().long(), ref.indices)


def test_rounding_on_write_and_integer_tiles(nki_mode):
    @nki.jit
    def kernel(x, ints):
        halves = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        out_bf16 = nl.ndarray(x.shape, nl.bfloat16, buffer=nl.shared_hbm)
        doubled = nl.ndarray(ints.shape, nl.int32, buffer=nl.shared_hbm)
        rounded = nl.multiply(nl.load(x), 3.0, dtype=nl.bfloat16)  # rounded to bf16 on chip
        nl.store(halves, rounded)
        nl.store(out_bf16, nl.multiply(nl.load(x), 3.0))
        nl.store(doubled, nl.multiply(nl.load(ints), 2, dtype=nl.int32))
        return halves, out_bf16, doubled
    x = torch.randn(32, 16)
    ints = torch.randint(-1000, 1000, (32, 16), dtype=torch.int32)
    halves, out_bf16, doubled = kernel(dev(x), dev(ints))
    assert torch.equal(halves.cpu(), (x * 3).bfloat16().float())
    assert out_bf16.dtype == torch.bfloat16 and torch.equal(out_bf16.cpu(), (x * 3).bfloat16())
    assert torch.equal(doubled.cpu(), ints * 2)


def test_grid_program_ids_2d(nki_mode):
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        i, j = nl.program_id(0), nl.program_id(1)
        rows, cols = a.shape[0] // nl.num_programs(0), a.shape[1] // nl.num_programs(1)
        ta = nl.load(a[nl.ds(i * rows, rows), nl.ds(j * cols, cols)])
        tb = nl.load(b[nl.ds(i * rows, rows), nl.ds(j * cols, cols)])
        nl.store(out[nl.ds(i * rows, rows), nl.ds(j * cols, cols)], nl.add(nl.add(ta, tb), i * 10 + j))
        return out
    a, b = torch.randn(256, 96), torch.randn(256, 96)
    out = kernel[2, 3](dev(a), dev(b)).cpu()
    offsets = torch.tensor([[0, 1, 2], [10, 11, 12]], dtype=torch.float32).repeat_interleave(128, 0).repeat_interleave(32, 1)
    torch.testing.assert_close(out, a + b + offsets)


def test_sequential_static_ranges_views_and_ap(nki_mode):
    @nki.jit
    def kernel(x):
        rows, cols = x.shape
        out = nl.ndarray((rows, cols), nl.float32, buffer=nl.shared_hbm)
        prefix = nl.zeros((rows, 1), nl.float32)
        for c in nl.sequential_range(cols):
            col = nl.load(x[:, nl.ds(c, 1)])
            nisa.tensor_tensor(prefix, prefix, col, nl.add)
            nl.store(out[:, nl.ds(c, 1)], prefix)
        doubled = nl.ndarray((rows, cols), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        for k in nl.static_range(2):
            assert isinstance(k, int)
        flat = t.reshape((rows, cols // 2, 2))
        swapped = flat.ap([[cols, rows], [2, cols // 2], [1, 2]])  # the same elements through an access pattern
        nl.store(doubled.reshape((rows, cols // 2, 2)), nl.multiply(swapped, 2.0))
        return out, doubled
    x = torch.randn(20, 12)
    out, doubled = kernel(dev(x))
    torch.testing.assert_close(out.cpu(), x.cumsum(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(doubled.cpu(), x * 2)


def test_tail_masks_with_arange_indexing(nki_mode):
    @nki.jit
    def kernel(x):
        rows, cols = x.shape
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range((rows + 127) // 128):
            ip = nl.arange(128)[:, None]
            jf = nl.arange(cols)[None, :]
            t = nl.load(x[i * 128 + ip, jf], mask=(i * 128 + ip < rows))
            nl.store(out[i * 128 + ip, jf], nl.sigmoid(t), mask=(i * 128 + ip < rows))
        return out
    x = torch.randn(300, 24)
    torch.testing.assert_close(kernel(dev(x)).cpu(), torch.sigmoid(x))


def test_unwritten_memory_reads_as_nan(nki_mode):
    @nki.jit
    def kernel(x):
        out = nl.ndarray((x.shape[0], 2 * x.shape[1]), nl.float32, buffer=nl.shared_hbm)
        fresh = nl.ndarray(x.shape, nl.float32)  # never written
        nl.store(out[:, 0:x.shape[1]], nl.add(nl.load(x), fresh))
        return out  # its right half is never stored either
    out = kernel(dev(torch.randn(8, 4))).cpu()
    assert torch.isnan(out).all()


def test_device_print(nki_mode, capfd):
    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.device_print("tile of x", t)
        nl.store(out, t)
        return out
    kernel(dev(torch.tensor([[1.5, -2.0], [3.0, 4.25]])))
    torch.neuron.synchronize()
    printed = capfd.readouterr().out
    assert "tile of x" in printed and "4.25" in printed and "-2" in printed


def test_numpy_in_numpy_out(nki_mode):
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.multiply(nl.load(a), nl.load(b)))
        return out
    a = np.random.rand(64, 10).astype(np.float32)
    b = np.random.rand(64, 10).astype(np.float32)
    out = kernel(a, b)
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, a * b, rtol=1e-6)


def test_kernel_writing_into_an_argument(nki_mode):
    @nki.jit
    def kernel(src, dst):
        nl.store(dst, nl.exp(nl.load(src)))
    src = torch.randn(16, 8)
    dst = torch.zeros(16, 8, device="neuron")
    assert kernel(dev(src), dst) is None
    torch.testing.assert_close(dst.cpu(), src.exp())
