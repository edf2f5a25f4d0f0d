"""Low-precision matrix products run natively on neuron, against CPU PyTorch's same ops:
_scaled_mm (float8 e4m3fn / e5m2, tensor-wise and row-wise scales, bias, out_dtype, a scaled
float8 result), _int_mm (exact) and _weight_int8pack_mm; CPU's errors for what CPU refuses."""

import pytest
import torch

F8 = (torch.float8_e4m3fn, torch.float8_e5m2)


def operands(m, k, n, a_dtype, b_dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    a = (torch.randn(m, k, generator=gen) * 2).to(a_dtype)
    b = (torch.randn(n, k, generator=gen) * 2).to(b_dtype).t()  # column-major, as scaled GEMMs take it
    return a, b, gen


def on_neuron(*tensors):
    return [t.to("neuron") if isinstance(t, torch.Tensor) else t for t in tensors]


@pytest.mark.parametrize("a_dtype", F8)
@pytest.mark.parametrize("b_dtype", F8)
@pytest.mark.parametrize("scaling", ["tensorwise", "rowwise"])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_scaled_mm_matches_cpu(a_dtype, b_dtype, scaling, out_dtype, no_fallback):
    a, b, gen = operands(32, 64, 48, a_dtype, b_dtype)
    if scaling == "tensorwise":
        sa, sb = torch.rand((), generator=gen) + 0.5, torch.rand((), generator=gen) + 0.5
    else:
        sa, sb = torch.rand(32, 1, generator=gen) + 0.5, torch.rand(1, 48, generator=gen) + 0.5
    bias = torch.randn(48, generator=gen).to(out_dtype) if out_dtype != torch.float32 else None
    expected = torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=out_dtype)
    got = torch._scaled_mm(*on_neuron(a, b, sa, sb), bias=None if bias is None else bias.to("neuron"),
                           out_dtype=out_dtype, use_fast_accum=True)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    # The float32 sums differ from CPU's only in order: well inside one output rounding.
    torch.testing.assert_close(got.cpu().float(), expected.float(), rtol={torch.float32: 1e-5}.get(out_dtype, 1e-2),
                               atol=1e-3)


def test_scaled_mm_float8_result_divides_by_its_scale_and_out_variant(no_fallback):
    a, b, _ = operands(16, 32, 16, torch.float8_e4m3fn, torch.float8_e4m3fn, seed=1)
    one, half, four = torch.tensor(1.0), torch.tensor(0.5), torch.tensor(4.0)
    expected = torch._scaled_mm(a, b, one, half, scale_result=four, out_dtype=torch.float8_e4m3fn)
    got = torch._scaled_mm(*on_neuron(a, b, one, half), scale_result=four.to("neuron"), out_dtype=torch.float8_e4m3fn)
    assert got.dtype == torch.float8_e4m3fn
    assert (got.cpu().float() != expected.float()).float().mean() < 0.02  # a rounding tie at most, rarely
    out = torch.empty(16, 16, dtype=torch.bfloat16, device="neuron")
    torch._scaled_mm(*on_neuron(a, b, one, half), out_dtype=torch.bfloat16, out=out)
    torch.testing.assert_close(out.cpu(), torch._scaled_mm(a, b, one, half, out_dtype=torch.bfloat16))


def test_scaled_mm_refuses_what_cpu_refuses():
    a, b, _ = operands(16, 32, 16, torch.float8_e4m3fn, torch.float8_e4m3fn)
    one = torch.tensor(1.0)
    cases = [((a.float(), b, one, one), ValueError, "Invalid scaling configuration"),
             ((a, b, one.double(), one), ValueError, "Invalid scaling configuration"),
             ((a, b, torch.ones(16, 2), torch.ones(1, 16)), ValueError, "Invalid scaling configuration"),
             ((a, b[:16], one, one), RuntimeError, "cannot be multiplied"),
             ((a[0], b, one, one), RuntimeError, "must be a matrix")]
    for args, error, message in cases:
        with pytest.raises(error, match=message):
            torch._scaled_mm(*args, out_dtype=torch.float32)  # CPU raises it ...
        with pytest.raises(error, match=message):
            torch._scaled_mm(*on_neuron(*args), out_dtype=torch.float32)  # ... and so does neuron


@pytest.mark.parametrize("self_dtype", [torch.int8, torch.uint8])
def test_int_mm_is_exact(self_dtype, no_fallback):
    gen = torch.Generator().manual_seed(0)
    low, high = (-128, 128) if self_dtype == torch.int8 else (0, 256)
    x = torch.randint(low, high, (33, 4096), generator=gen, dtype=torch.int32).to(self_dtype)
    w = torch.randint(-128, 128, (4096, 24), generator=gen, dtype=torch.int8)
    expected = torch._int_mm(x, w)
    got = torch._int_mm(x.to("neuron"), w.to("neuron"))
    assert got.dtype == torch.int32 and torch.equal(got.cpu(), expected)
    out = torch.empty(33, 24, dtype=torch.int32, device="neuron")
    torch._int_mm(x.to("neuron"), w.to("neuron"), out=out)
    assert torch.equal(out.cpu(), expected)
    with pytest.raises(RuntimeError, match="needs to match"):
        torch._int_mm(x.to("neuron"), w[:100].to("neuron"))
    with pytest.raises(RuntimeError, match="Expected self dtype to be int8 or uint8"):
        torch._int_mm(x.float().to("neuron"), w.to("neuron"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_weight_int8pack_mm_matches_cpu(dtype, no_fallback):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8, 64, generator=gen).to(dtype)
    w = torch.randint(-128, 128, (32, 64), generator=gen, dtype=torch.int8)
    scales = (torch.rand(32, generator=gen) * 0.01).to(dtype)
    expected = torch._weight_int8pack_mm(x, w, scales)
    got = torch._weight_int8pack_mm(x.to("neuron"), w.to("neuron"), scales.to("neuron"))
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-5 if dtype == torch.float32 else 1e-2, atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("form", ["2d_3d", "3d_2d", "2d_2d", "3d_3d"])
def test_grouped_mm_matches_cpu(dtype, form, no_fallback):
    """The MoE layouts (tokens grouped by expert, as TorchTitan's grouped experts use them),
    with an empty group, against CPU PyTorch."""
    gen = torch.Generator().manual_seed(0)
    offs = torch.tensor([16, 16, 48], dtype=torch.int32)  # group 1 is empty
    shapes = {"2d_3d": ((48, 32), (3, 32, 16)), "3d_2d": ((3, 16, 32), (32, 48)), "2d_2d": ((16, 48), (48, 32)),
              "3d_3d": ((3, 16, 32), (3, 32, 16))}[form]
    a, b = (torch.randn(*s, generator=gen).to(dtype) for s in shapes)
    args = (a, b) if form == "3d_3d" else (a, b, offs)
    expected = torch._grouped_mm(*args)
    got = torch._grouped_mm(*[t.to("neuron") for t in args])
    assert got.shape == expected.shape and got.dtype == expected.dtype
    if form == "2d_2d":
        assert torch.equal(got[1].cpu(), torch.zeros_like(expected[1]))  # the empty group's product
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-5 if dtype == torch.float32 else 1e-2, atol=1e-4)


def test_grouped_mm_bad_offsets_raise_at_the_next_sync():
    a, b = torch.randn(8, 4, device="neuron"), torch.randn(2, 4, 3, device="neuron")
    torch._grouped_mm(a, b, torch.tensor([6, 3], dtype=torch.int32, device="neuron"))
    with pytest.raises(Exception, match="offs must be non-decreasing"):
        torch.neuron.synchronize()
    with pytest.raises(RuntimeError, match="offs is required"):
        torch._grouped_mm(a, b)
