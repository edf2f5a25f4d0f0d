"""Copies host<->neuron and neuron<->neuron (layouts, sizes, every dtype pair, devices, pinned), views, fills, resize_, item()."""

import math
import warnings

import pytest
import torch

DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.bool,
]

_BITS = {
    torch.float64: torch.int64,
    torch.float32: torch.int32,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
}

FLOAT_VALUES = [
    0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 0.1, 1 / 3, 100.75, -7.9, 127.0, 127.9, -128.0, 255.0,
    65504.0, 70000.0, 1e-8, -3e-7, math.pi, 1e300, -1e300, 40000.0, 3e9, -3e9,
    float("nan"), float("inf"), float("-inf"),
]
INT_VALUES = [
    0, 1, -1, 2, 127, -128, 255, 256, -129, 32767, -32768, 65535, 2**31 - 1, -(2**31),
    2**24 + 1, 2**40 + 1, 2**53 + 1, -(2**62),
]


def bitwise_equal(actual, expected):
    """torch.equal on the bit patterns, NaN equal to NaN (any payload); -0.0 differs from 0.0."""
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return False
    if actual.dtype in _BITS:
        nan_a, nan_e = actual.isnan(), expected.isnan()
        if not torch.equal(nan_a, nan_e):
            return False
        bits = _BITS[actual.dtype]
        return torch.equal(actual[~nan_a].view(bits), expected[~nan_e].view(bits))
    return torch.equal(actual, expected)


def assert_same(actual, expected):
    assert actual.device.type == "cpu"
    assert bitwise_equal(actual, expected), f"\nactual:   {actual}\nexpected: {expected}"


def sample_values(src, dst):
    """Values of dtype `src` whose conversion to `dst` C++ defines (float->int: finite, in range)."""
    if src == torch.bool:
        return torch.tensor([True, False, True, True, False])
    if src.is_floating_point:
        values = torch.tensor(FLOAT_VALUES, dtype=torch.float64).to(src)
        if dst.is_floating_point or dst == torch.bool:
            return values
        info = torch.iinfo(dst)
        finite = values.double()
        keep = finite.isfinite() & (finite.trunc() >= info.min) & (finite.trunc() <= info.max)
        return values[keep]
    info = torch.iinfo(src)
    return torch.tensor([v for v in INT_VALUES if info.min <= v <= info.max], dtype=src)


# ---- layouts and sizes --------------------------------------------------------------------


def _layouts():
    g = torch.Generator().manual_seed(0)
    base = torch.randn(6, 10, generator=g)
    return {
        "contiguous": base,
        "transposed": base.t(),
        "sliced_step": base[1::2, ::3],
        "expanded": torch.arange(5.0).expand(4, 5),
        "broadcast_stride0": torch.tensor([1.5]).expand(3, 7),
        "zero_dim": torch.tensor(3.25),
        "empty": torch.empty(0, 5),
        "small": torch.tensor([7.0]),
        "large": torch.randn(2 * 1024 * 1024, generator=g),
        "large_transposed": torch.randn(1024, 2048, generator=g).t(),
        "int64_sliced": torch.arange(100, dtype=torch.int64).reshape(10, 10)[::3, 1::2],
        "float16_transposed": torch.randn(33, 17, generator=g).half().t(),
    }


LAYOUTS = _layouts()


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_host_device_roundtrip(name):
    x = LAYOUTS[name]
    y = x.to("neuron")
    assert y.device == torch.device("neuron:0")
    assert y.shape == x.shape and y.dtype == x.dtype
    assert_same(y.cpu(), x.contiguous())
    # The host copy is independent: changing the source afterwards does not reach the device.
    if x.numel() > 0 and x.is_contiguous():
        x_copy = x.clone()
        y2 = x_copy.to("neuron")
        x_copy.fill_(-1)
        assert_same(y2.cpu(), x.contiguous())


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_device_to_device_copy(name):
    x = LAYOUTS[name]
    dev = x.to("neuron")
    # A strided view of a device tensor, copied on the device into a fresh contiguous tensor.
    source = dev.t() if dev.dim() == 2 else dev
    expected = x.t() if x.dim() == 2 else x
    cloned = source.clone()
    contiguous = source.contiguous()
    into = torch.empty(source.shape, dtype=source.dtype, device="neuron")
    into.copy_(source)
    for result in (cloned, contiguous, into):
        assert result.device.type == "neuron"
        assert_same(result.cpu(), expected.contiguous())


def test_copy_into_strided_device_destination():
    g = torch.Generator().manual_seed(1)
    src = torch.randn(8, 6, generator=g)
    dst_cpu = torch.zeros(6, 16)
    dst_dev = dst_cpu.to("neuron")
    dst_cpu[:, ::2].copy_(src.t())
    dst_dev[:, ::2].copy_(src.t())  # host -> strided device view
    assert_same(dst_dev.cpu(), dst_cpu)
    dst_cpu[:, 1::2].copy_(src.t() * 0 + 4)
    dst_dev[:, 1::2].copy_((src.t() * 0 + 4).to("neuron"))  # device -> strided device view
    assert_same(dst_dev.cpu(), dst_cpu)


def test_copy_device_to_strided_host_destination():
    g = torch.Generator().manual_seed(2)
    src = torch.randn(5, 7, generator=g)
    dev = src.to("neuron")
    host = torch.zeros(7, 10)
    host[:, ::2].copy_(dev.t())
    expected = torch.zeros(7, 10)
    expected[:, ::2] = src.t()
    assert_same(host, expected)
    converted = torch.zeros(5, 7, dtype=torch.float64)
    converted.copy_(dev)
    assert_same(converted, src.double())


def test_copy_broadcasts_on_device():
    row = torch.arange(4.0).to("neuron")
    dst = torch.zeros(3, 4, device="neuron")
    dst.copy_(row)
    assert_same(dst.cpu(), torch.arange(4.0).expand(3, 4).contiguous())
    host_row = torch.arange(4, dtype=torch.int32)
    dst.copy_(host_row)
    assert_same(dst.cpu(), torch.arange(4.0).expand(3, 4).contiguous())


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bfloat16, torch.int64], ids=str)
@pytest.mark.parametrize("shape, perm", [((256, 1024), (1, 0)), ((8, 64, 33, 17), (0, 2, 1, 3)),
                                         ((4, 1, 300, 500), (0, 3, 2, 1)), ((3, 5, 7), (2, 0, 1)),
                                         ((37, 53), (1, 0))],
                         ids=["transpose", "heads", "reverse", "small", "ragged"])
def test_permuted_copies_match_cpu(shape, perm, dtype):
    # Transposing copies run in tiles (8 x 8 vector transposes for 32-bit types, with scalar
    # edges), and large copies are split across the compute engines.
    x = (torch.randn(shape, generator=torch.Generator().manual_seed(0)) * 100).to(dtype)
    dev = x.to("neuron").permute(perm)
    assert_same(dev.contiguous().cpu(), x.permute(perm).contiguous())
    assert_same(dev.float().cpu(), x.permute(perm).float())  # converting while transposing
    dst = torch.empty(x.permute(perm).shape, dtype=dtype, device="neuron").t() if len(shape) == 2 else None
    if dst is not None:  # strided destination, contiguous source
        dst.copy_(x.permute(perm).t().contiguous().to("neuron"))
        assert_same(dst.cpu(), x.permute(perm).t().contiguous())


def test_overlapping_device_copy():
    x = torch.arange(10.0)
    dev = x.to("neuron")
    dev[1:].copy_(dev[:-1])
    x[1:] = x[:-1].clone()
    assert_same(dev.cpu(), x)


# ---- dtypes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dst", DTYPES, ids=str)
@pytest.mark.parametrize("src", DTYPES, ids=str)
def test_dtype_conversion_matches_cpu(src, dst):
    x = sample_values(src, dst)
    expected = x.to(dst)
    dev = x.to("neuron")
    assert_same(dev.cpu(), x)
    # Converted on the device by .to(dtype).
    converted = dev.to(dst)
    assert converted.device.type == "neuron" and converted.dtype == dst
    assert_same(converted.cpu(), expected)
    # Converted on the device by copy_ into a tensor of another dtype, contiguous and strided.
    into = torch.empty(x.shape, dtype=dst, device="neuron")
    into.copy_(dev)
    assert_same(into.cpu(), expected)
    strided = torch.zeros(2 * x.numel(), dtype=dst, device="neuron")[::2]
    strided.copy_(dev)
    assert_same(strided.cpu(), expected)
    # Converted during the host -> device copy, and during the device -> host copy.
    host_converted = torch.empty(x.shape, dtype=dst, device="neuron")
    host_converted.copy_(x)
    assert_same(host_converted.cpu(), expected)
    landing = torch.empty(x.shape, dtype=dst)
    landing.copy_(dev)
    assert_same(landing, expected)


@pytest.mark.parametrize("dst", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8], ids=str)
def test_float_to_int_undefined_values_match_cpu(dst):
    # NaN, inf and out-of-range values have no defined C++ conversion; CPU PyTorch still gives a
    # fixed answer on this host, and a device that claims CPU parity should give the same.
    x = torch.tensor([float("nan"), float("inf"), float("-inf"), 3e9, -3e9, 1e300, 300.0, -1.0],
                     dtype=torch.float64)
    for src in (torch.float64, torch.float32):
        values = x.to(src)
        assert_same(values.to("neuron").to(dst).cpu(), values.to(dst))


def test_large_dtype_conversion_on_device():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3 * 1024 * 1024, generator=g) * 1000
    dev = x.to("neuron")
    for dst in (torch.bfloat16, torch.float16, torch.int32, torch.float64, torch.bool):
        assert_same(dev.to(dst).cpu(), x.to(dst))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
def test_complex_roundtrip(dtype):
    g = torch.Generator().manual_seed(4)
    x = torch.randn(5, 3, dtype=dtype, generator=g)
    dev = x.to("neuron")
    assert dev.dtype == dtype
    assert torch.equal(dev.cpu(), x)
    assert torch.equal(dev.t().contiguous().cpu(), x.t().contiguous())
    assert torch.equal(x.conj().to("neuron").cpu(), x.conj().resolve_conj())
    assert torch.equal(dev.to(torch.complex128 if dtype == torch.complex64 else torch.complex64).cpu(),
                       x.to(torch.complex128 if dtype == torch.complex64 else torch.complex64))



STORED_ONLY = [torch.uint16, torch.uint32, torch.uint64, torch.float8_e4m3fn, torch.float8_e5m2, torch.complex32]


@pytest.mark.parametrize("dtype", STORED_ONLY, ids=str)
def test_dtypes_the_kernels_only_store_copy_as_bits(dtype):
    """Unsigned 16/32/64-bit, float8 and complex32 tensors move between host and device, copy
    and transpose on the device, fill, and convert (through the host) exactly as on the CPU."""
    as_bytes = lambda t: t.contiguous().view(torch.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # complex32 is experimental in PyTorch
        x = (torch.arange(-6, 18, dtype=torch.float32).reshape(4, 6) * 3.25).to(dtype)
        dev = x.to("neuron")
        assert dev.dtype == dtype and dev.device.type == "neuron"
        assert torch.equal(as_bytes(dev.cpu()), as_bytes(x))
        assert torch.equal(as_bytes(dev.t().contiguous().cpu()), as_bytes(x.t().contiguous()))
        assert torch.equal(as_bytes(dev[1:, ::2].clone().cpu()), as_bytes(x[1:, ::2]))
        assert torch.equal(dev.to(torch.float64).cpu(), x.to(torch.float64))
        assert torch.equal(as_bytes(torch.ones(3, 2, device="neuron").to(dtype).cpu()), as_bytes(torch.ones(3, 2).to(dtype)))
        for value in (0, 5):
            got = torch.full((2, 3), value, dtype=dtype, device="neuron")
            assert torch.equal(as_bytes(got.cpu()), as_bytes(torch.full((2, 3), value, dtype=dtype)))
    if dtype == torch.uint64:
        big = torch.tensor([1, 2**40, 2**63 + 5], dtype=torch.uint64)
        assert torch.equal(big.to("neuron").cpu(), big) and big.to("neuron")[2].item() == big[2].item()


def test_sub_byte_dtypes_are_refused_by_name():
    with pytest.raises(RuntimeError, match="dtype UInt4 -> UInt4 is not supported on neuron"):
        torch.zeros(3, dtype=torch.uint4).to("neuron")


def test_complex_to_real_keeps_the_real_part_with_torchs_warning():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(5, 3, dtype=torch.complex64, generator=g)
    dev = x.to("neuron")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns once per process
        expected = x.t().to(torch.float64)
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        got = dev.t().to(torch.float64)
    assert torch.equal(got.cpu(), expected)
    # torch.cat with an out= of a type the inputs cannot be cast to is refused, as on the CPU.
    with pytest.raises(TypeError, match="can't be cast to the desired output type Float"):
        torch.cat([dev, dev], out=torch.empty(10, 3, device="neuron"))

# ---- devices and pinned memory --------------------------------------------------------------


def test_cross_device_copy_orders_later_work():
    n = 2 * 1024 * 1024
    g = torch.Generator().manual_seed(5)
    x = torch.randn(n, generator=g)
    a = x.to("neuron:0")
    b = a.to("neuron:1")
    assert b.device == torch.device("neuron:1")
    # Work on neuron:1 queued after the copy sees its result ...
    c = torch.empty(n, device="neuron:1")
    c.copy_(b)
    c[::2].fill_(0.5)
    # ... and work on neuron:0 queued after it does not change what was copied.
    a.fill_(-1.0)
    expected = x.clone()
    expected[::2] = 0.5
    assert_same(c.cpu(), expected)
    assert_same(b.cpu(), x)
    assert_same(a.cpu(), torch.full((n,), -1.0))
    # And back again, into a destination with pending work on neuron:0.
    d = torch.zeros(n, device="neuron:0")
    d.fill_(2.0)
    d.copy_(b)
    assert_same(d.cpu(), x)


def test_cross_device_dtype_conversion():
    x = torch.arange(-5, 5, dtype=torch.int32)
    b = torch.empty(10, dtype=torch.float16, device="neuron:1")
    b.copy_(x.to("neuron:0"))
    assert_same(b.cpu(), x.half())


def test_pinned_non_blocking_copies():
    n = 512 * 1024
    g = torch.Generator().manual_seed(6)
    x = torch.randn(n, generator=g)
    assert not x.is_pinned()
    pinned = x.pin_memory()
    assert pinned.is_pinned()
    assert_same(pinned, x)
    dev = pinned.to("neuron", non_blocking=True)
    back = torch.empty(n).pin_memory()
    assert back.is_pinned()
    back.copy_(dev, non_blocking=True)
    torch.neuron.synchronize()
    assert_same(back, x)
    # A non-blocking copy from ordinary memory is still correct.
    dev2 = x.to("neuron", non_blocking=True)
    torch.neuron.synchronize()
    assert_same(dev2.cpu(), x)


def test_pin_memory_on_neuron_factory_rejected():
    with pytest.raises(RuntimeError, match="pin_memory"):
        torch.empty(4, device="neuron", pin_memory=True)


# ---- views, fills, resize_ ------------------------------------------------------------------


VIEW_OPS = {
    "view": lambda t: t.view(4, 6),
    "reshape": lambda t: t.reshape(2, 12),
    "transpose": lambda t: t.transpose(0, 1),
    "narrow": lambda t: t.narrow(1, 2, 3),
    "unfold": lambda t: t.unfold(1, 3, 2),
    "as_strided": lambda t: t.as_strided((3, 4), (5, 2), 1),
    "permute_flatten": lambda t: t.view(2, 3, 4).permute(2, 0, 1),
    "select_diagonal": lambda t: t.diagonal(),
    "expand_unsqueeze": lambda t: t[0].unsqueeze(0).expand(3, 6),
    "reshape_noncontiguous": lambda t: t.t().reshape(24),
}


@pytest.mark.parametrize("name", sorted(VIEW_OPS))
def test_views_on_device(name):
    x = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    dev = x.to("neuron")
    view_cpu = VIEW_OPS[name](x)
    view_dev = VIEW_OPS[name](dev)
    assert view_dev.device.type == "neuron"
    assert view_dev.shape == view_cpu.shape
    assert_same(view_dev.cpu(), view_cpu.contiguous())


def test_view_shares_storage_on_device():
    dev = torch.zeros(4, 6, device="neuron")
    view = dev.view(24)
    assert view.untyped_storage().data_ptr() == dev.untyped_storage().data_ptr()
    view[5:8].fill_(3.0)
    expected = torch.zeros(24)
    expected[5:8] = 3.0
    assert_same(dev.cpu(), expected.view(4, 6))


def test_view_as_real_and_complex():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(4, 3, dtype=torch.complex64, generator=g)
    dev = x.to("neuron")
    real = torch.view_as_real(dev)
    assert real.dtype == torch.float32 and real.shape == (4, 3, 2)
    assert_same(real.cpu(), torch.view_as_real(x))
    assert torch.equal(torch.view_as_complex(real).cpu(), x)
    real[..., 1].zero_()  # writes through to the complex tensor
    assert torch.equal(dev.cpu(), torch.complex(x.real, torch.zeros_like(x.real)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16, torch.bool, torch.uint8], ids=str)
def test_fill_and_zero_on_noncontiguous_view(dtype):
    base = (torch.arange(48).reshape(6, 8) % 5).to(dtype)
    dev = base.to("neuron")
    expected = base.clone()
    fill = True if dtype == torch.bool else 3
    dev[1::2, ::3].fill_(fill)
    expected[1::2, ::3].fill_(fill)
    dev.t()[2].zero_()
    expected.t()[2].zero_()
    dev[4:, 5:].fill_(torch.tensor(1, dtype=dtype))
    expected[4:, 5:].fill_(torch.tensor(1, dtype=dtype))
    assert_same(dev.cpu(), expected)


def test_fill_with_device_scalar_tensor():
    value = torch.tensor(2.75, device="neuron")
    dev = torch.zeros(3, 4, device="neuron")
    dev[:, 1].fill_(value)
    expected = torch.zeros(3, 4)
    expected[:, 1] = 2.75
    assert_same(dev.cpu(), expected)


def test_factories_on_device():
    assert_same(torch.zeros(3, 5, device="neuron").cpu(), torch.zeros(3, 5))
    assert_same(torch.ones(2, dtype=torch.int8, device="neuron").cpu(), torch.ones(2, dtype=torch.int8))
    assert_same(torch.full((4,), -2.5, device="neuron").cpu(), torch.full((4,), -2.5))
    assert_same(torch.zeros_like(torch.empty(2, 2, device="neuron")).cpu(), torch.zeros(2, 2))


def test_resize_keeps_old_data():
    x = torch.arange(6.0)
    dev = x.to("neuron")
    dev.resize_(2, 50000)  # grows past the old block: a new one, old bytes copied over
    assert dev.shape == (2, 50000)
    assert_same(dev.view(-1)[:6].cpu(), x)
    dev.view(-1)[6:].fill_(1.0)
    dev.resize_(4)
    assert_same(dev.cpu(), x[:4])
    empty = torch.empty(0, device="neuron")
    empty.resize_(3).fill_(9.0)
    assert_same(empty.cpu(), torch.full((3,), 9.0))


def test_storage_resize_keeps_old_data():
    dev = torch.arange(8, dtype=torch.int32).to("neuron")
    storage = dev.untyped_storage()
    storage.resize_(64)
    assert storage.nbytes() == 64
    head = torch.empty(0, dtype=torch.int32, device="neuron").set_(storage, 0, (8,), (1,))
    assert_same(head.cpu(), torch.arange(8, dtype=torch.int32))


ITEM_VALUES = {
    torch.float32: [1.5, -0.0, float("nan"), float("inf")],
    torch.float64: [math.pi, -1e300],
    torch.float16: [0.333, 65504.0],
    torch.bfloat16: [3.140625, -2.0],
    torch.int64: [2**62 + 3, -(2**63)],
    torch.int32: [-(2**31), 123456],
    torch.int16: [-32768, 77],
    torch.int8: [-128, 5],
    torch.uint8: [255, 0],
    torch.bool: [True, False],
    torch.complex64: [1.5 - 2j],
}


@pytest.mark.parametrize("dtype", list(ITEM_VALUES), ids=str)
def test_item(dtype):
    for value in ITEM_VALUES[dtype]:
        x = torch.tensor(value, dtype=dtype)
        got = x.to("neuron").item()
        want = x.item()
        assert type(got) is type(want)
        if isinstance(want, float) and math.isnan(want):
            assert math.isnan(got)
        else:
            assert got == want
            if isinstance(want, float):
                assert math.copysign(1.0, got) == math.copysign(1.0, want)
        # One element of a larger tensor, through a view.
        row = torch.tensor([value, value], dtype=dtype).to("neuron")
        assert row[1].item() == want or (isinstance(want, float) and math.isnan(want))


def test_item_rejects_many_elements():
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        torch.ones(2, device="neuron").item()


def test_lazy_conjugate_and_negative_sources_copy_on_device():
    # Found by the model sweep: a conj-bit source in a device-to-device copy recursed until the
    # stack overflowed (the conjugate fallback clones through _copy_from again).
    z = torch.tensor([1 + 2j, 3 - 1j, -0.5j])
    d = z.to("neuron")
    dst = torch.empty(3, dtype=torch.complex64, device="neuron")
    dst.copy_(d.conj())
    assert torch.equal(dst.cpu(), z.conj())
    assert torch.equal((d.conj() * 2).cpu(), z.conj() * 2)
    assert torch.equal(d.conj().resolve_conj().cpu(), z.conj())
    x = torch.tensor([1.0, -2.0, 3.0])
    neg = torch._neg_view(x.to("neuron"))
    assert torch.equal(neg.cpu(), -x)
    out = torch.empty(3, device="neuron")
    out.copy_(neg)
    assert torch.equal(out.cpu(), -x)
