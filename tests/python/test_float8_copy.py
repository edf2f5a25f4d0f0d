"""Conversions to and from float8 e4m3fn / e5m2 on the device, bit for bit as CPU PyTorch converts:
ties to even, e4m3fn saturating at +-448 (infinities too), e5m2 overflowing to infinity, NaN
signs and payloads, subnormals; from and to every other dtype through float32; strided and
broadcast operands; and no host round trip (the conversions used to go through the CPU)."""

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import torchneuron  # noqa: F401

FLOAT8 = [torch.float8_e4m3fn, torch.float8_e5m2]


def float_sweep():
    """Every 4099th float32 bit pattern (both signs, NaNs, infinities, subnormals), plus the
    boundaries of both formats."""
    bits = torch.arange(0, 1 << 32, 4099, dtype=torch.int64)
    sweep = (bits - (1 << 31)).to(torch.int32).view(torch.float32)
    edges = torch.tensor([0.0, float("inf"), float("nan"), 448, 463.99, 464, 464.01, 479.99, 480, 57344, 61439,
                          61440, 65535, 65536, 2.0 ** -6, 2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -11, 2.0 ** -14,
                          2.0 ** -16, 2.0 ** -17, 3 * 2.0 ** -18, 1e-45])
    return torch.cat([sweep, edges, -edges])


@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
def test_float32_to_float8_is_cpus_bit_for_bit(dtype, no_fallback):
    x = float_sweep()
    expected = x.to(dtype).view(torch.uint8)
    got = x.to("neuron").to(dtype).cpu().view(torch.uint8)
    assert torch.equal(got, expected)


@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
def test_every_float8_value_widens_as_on_cpu(dtype, no_fallback):
    values = torch.arange(256, dtype=torch.uint8).view(dtype)
    for target in (torch.float32, torch.float64):
        expected, got = values.to(target), values.to("neuron").to(target).cpu()
        raw = torch.int32 if target == torch.float32 else torch.int64
        assert torch.equal(got.view(raw), expected.view(raw)), target  # NaN payloads too
    finite = values[values.float().isfinite()]
    for target in (torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.bool):
        assert torch.equal(finite.to("neuron").to(target).cpu(), finite.to(target)), target


@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
def test_other_dtypes_and_the_other_format_convert_through_float32(dtype, no_fallback):
    x = float_sweep()
    x = x[x.isfinite()][:200000].double().clamp(-70000, 70000)
    for source in (torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int8, torch.bool):
        s = x.to(source)
        assert torch.equal(s.to("neuron").to(dtype).cpu().view(torch.uint8), s.to(dtype).view(torch.uint8)), source
    other = torch.arange(256, dtype=torch.uint8).view(FLOAT8[1 - FLOAT8.index(dtype)])
    assert torch.equal(other.to("neuron").to(dtype).cpu().view(torch.uint8), other.to(dtype).view(torch.uint8))


def test_strided_and_broadcast_operands(no_fallback):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 48, generator=g) * 100
    d = x.to("neuron")
    assert torch.equal(d.t().to(torch.float8_e4m3fn).cpu().view(torch.uint8),
                       x.t().to(torch.float8_e4m3fn).view(torch.uint8))
    out = torch.empty(48, 64, dtype=torch.float8_e5m2, device="neuron").t()  # a transposed destination
    out.copy_(d)
    assert torch.equal(out.cpu().view(torch.uint8), x.to(torch.float8_e5m2).view(torch.uint8))
    row = torch.empty(4, 48, dtype=torch.float8_e4m3fn, device="neuron")
    row.copy_(d[0])  # broadcast over the rows
    assert torch.equal(row.cpu().view(torch.uint8), x[0].expand(4, 48).to(torch.float8_e4m3fn).view(torch.uint8))
    f8 = x.to(torch.float8_e4m3fn)
    wide = torch.empty(48, 64, device="neuron").t()
    wide.copy_(f8.to("neuron"))
    assert torch.equal(wide.cpu(), f8.float())


def test_conversions_stay_on_the_device():
    d = torch.randn(256, 256, device="neuron")
    d.to(torch.float8_e4m3fn)
    torch.neuron.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        d.to(torch.float8_e4m3fn).to(torch.bfloat16)
        d.t().to(torch.float8_e5m2).float()
        torch.neuron.synchronize()
    names = [e.name for e in prof.events()]
    assert not [n for n in names if "host" in n], names
    assert any("to float8" in n for n in names) and any("from float8" in n for n in names)
