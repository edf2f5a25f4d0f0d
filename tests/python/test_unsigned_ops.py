"""uint16 / uint32 / uint64 on neuron with no CPU fallback: conversions, float functions of them,
wrap-around arithmetic, comparisons, sums and products, sorts and extremes in unsigned order,
and gathers. References: CPU PyTorch where it has the op, else the int64 values reduced mod 2^n
(values past the signed range are in every sample, so a signed reading would show)."""

import pytest
import torch

UNSIGNED = [torch.uint16, torch.uint32, torch.uint64]
BITS = {torch.uint16: 16, torch.uint32: 32, torch.uint64: 64}


def values(dtype, shape=(4, 6), seed=0):
    """Small values with the type's top values (above the signed twin's maximum) mixed in."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 200, shape, generator=g, dtype=torch.int64)
    top = (1 << BITS[dtype]) - 1 if dtype != torch.uint64 else -1  # uint64's maximum as int64 bits
    x.view(-1)[::5] = top
    x.view(-1)[1::7] = top - 3
    return x.to(dtype) if dtype != torch.uint64 else x.view(torch.uint64)


def as_int64(x):
    """The values as int64 (uint64 as its bits)."""
    return x.view(torch.int64) if x.dtype == torch.uint64 else x.to(torch.int64)


def order64(x):
    """int64 values in the unsigned values' order (uint64 with its top bit flipped)."""
    return x.view(torch.int64) ^ torch.iinfo(torch.int64).min if x.dtype == torch.uint64 else x.to(torch.int64)


def wrap(x64, dtype):
    """int64 values reduced mod 2^n, as `dtype`."""
    if dtype == torch.uint64:
        return x64.view(torch.uint64)
    return (x64 & ((1 << BITS[dtype]) - 1)).to(dtype)


def same(device, expected):
    actual = device.cpu()
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert torch.equal(as_int64(actual) if actual.dtype in UNSIGNED else actual,
                       as_int64(expected) if expected.dtype in UNSIGNED else expected)


@pytest.mark.parametrize("dtype", UNSIGNED, ids=str)
def test_conversions(dtype, no_fallback):
    x = values(dtype)
    d = x.to("neuron")
    for other in (torch.float32, torch.float64, torch.int64, torch.int32, torch.bool, torch.uint8, torch.bfloat16):
        same(d.to(other), x.to(other))
        back = torch.tensor([0, 1, 7, 250], dtype=other) if other != torch.bool else torch.tensor([True, False])
        same(back.to("neuron").to(dtype), back.to(dtype))
    for other in UNSIGNED:
        same(d.to(other), x.to(other))
    same(torch.full((3,), 9, dtype=dtype, device="neuron"), torch.full((3,), 9, dtype=dtype))


@pytest.mark.parametrize("dtype", UNSIGNED, ids=str)
@pytest.mark.parametrize("op", [torch.sin, torch.exp, torch.sqrt, torch.log1p, torch.sigmoid, torch.isnan, torch.signbit, torch.ceil],
                         ids=lambda f: f.__name__)
def test_unary(op, dtype, no_fallback):
    x = values(dtype)
    expected = op(x)
    if expected.is_floating_point():
        torch.testing.assert_close(op(x.to("neuron")).cpu(), expected)
    else:
        same(op(x.to("neuron")), expected)


@pytest.mark.parametrize("dtype", UNSIGNED, ids=str)
def test_wrap_around_arithmetic(dtype, no_fallback):
    a, b = values(dtype, seed=1), values(dtype, seed=2)
    da, db = a.to("neuron"), b.to("neuron")
    for op in (torch.mul, torch.eq, torch.ne, torch.bitwise_and, torch.bitwise_or, torch.bitwise_xor):
        same(op(da, db), op(a, b))
    same(da * 3, a * 3)
    for op in (torch.add, torch.sub):  # CPU has no unsigned add or sub: the same error
        with pytest.raises(NotImplementedError, match="add_stub"):
            op(a, b)
        with pytest.raises(NotImplementedError, match="add_stub"):
            op(da, db)
    mask = torch.eq(a, values(dtype, seed=3))
    same(torch.where(mask.to("neuron"), da, db), wrap(torch.where(mask, as_int64(a), as_int64(b)), dtype))
    torch.testing.assert_close(torch.atan2(da, db).cpu(), torch.atan2(a, b))


@pytest.mark.parametrize("dtype", UNSIGNED, ids=str)
def test_sums_and_products(dtype, no_fallback):
    x = values(dtype)
    d = x.to("neuron")
    same(d.sum(), x.sum())
    same(d.sum(1), x.sum(1))
    same(d.prod(0), x.prod(0))
    same(torch.cumsum(d, 1), torch.cumsum(x, 1))
    same(torch.cumprod(d, 0), torch.cumprod(x, 0))
    m = values(dtype, (3, 5), seed=4)
    same(torch.mm(d[:3, :3], m[:3].to("neuron")), wrap(as_int64(x[:3, :3]) @ as_int64(m[:3]), dtype))
    bias = values(dtype, (5,), seed=6)
    same(torch.addmm(bias.to("neuron"), d[:3, :3], m[:3].to("neuron")),
         wrap(as_int64(bias) + as_int64(x[:3, :3]) @ as_int64(m[:3]), dtype))


@pytest.mark.parametrize("dtype", UNSIGNED, ids=str)
def test_unsigned_order(dtype, no_fallback):
    x = values(dtype)
    d = x.to("neuron")
    v, i = torch.sort(d, dim=1, stable=True)
    ev, ei = torch.sort(x, dim=1, stable=True)  # CPU sorts unsigned types
    same(v, ev)
    same(i, ei)
    v, i = torch.sort(d, dim=0, descending=True, stable=True)
    same(v, torch.sort(x, dim=0, descending=True, stable=True).values)
    same(i, torch.sort(x, dim=0, descending=True, stable=True).indices)
    # max / min in unsigned order: the top values, not the small ones a signed reading would pick
    same(d.amax(1), ev[:, -1])
    same(d.amin(1), ev[:, 0])
    same(torch.max(d, 1).values, ev[:, -1])
    same(torch.min(d, 1).values, ev[:, 0])
    flat = torch.sort(x.flatten()).values
    lo, hi = torch.aminmax(d)
    same(lo, flat[0])
    same(hi, flat[-1])
    tv, _ = torch.topk(d, 2, 1)
    same(tv, ev[:, [-1, -2]])
    u, inverse, counts = torch.unique(d, return_inverse=True, return_counts=True)
    eu, einverse, ecounts = torch.unique(x, return_inverse=True, return_counts=True)
    same(u, eu)
    same(inverse, einverse)
    same(counts, ecounts)
    probe = values(dtype, (7,), seed=7)
    same(torch.searchsorted(flat.to("neuron"), probe.to("neuron")), torch.searchsorted(order64(flat), order64(probe)))


@pytest.mark.parametrize("dtype", UNSIGNED, ids=str)
def test_gathers(dtype, no_fallback):
    x = values(dtype)
    d = x.to("neuron")
    idx = torch.tensor([3, 0, 3, 1])
    rows = wrap(as_int64(x).index_select(0, idx), dtype)  # CPU has no unsigned index_select
    same(d.index_select(0, idx.to("neuron")), rows)
    same(d[idx.to("neuron")], rows)
    same(torch.flip(d, (1,)), wrap(as_int64(x).flip(1), dtype))
    g = torch.tensor([[0, 5, 2], [1, 1, 0], [4, 3, 2], [5, 0, 1]])
    same(torch.gather(d, 1, g.to("neuron")), wrap(torch.gather(as_int64(x), 1, g), dtype))
    src = values(dtype, (4, 2), seed=5)
    expected = wrap(as_int64(x).index_reduce(1, torch.tensor([5, 0]), as_int64(src), "prod"), dtype)
    same(d.index_reduce(1, torch.tensor([5, 0], device="neuron"), src.to("neuron"), "prod"), expected)
