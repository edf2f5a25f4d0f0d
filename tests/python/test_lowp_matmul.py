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


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 13, 33), (37, 130, 65), (13, 1027, 20), (100, 70, 40), (5, 8192, 200),
                                   (3, 0, 5)])
@pytest.mark.parametrize("scaling", ["tensorwise", "rowwise"])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_scaled_mm_odd_shapes_layouts_and_bias(m, k, n, scaling, out_dtype, no_fallback):
    """Sizes off the kernels' tiles (rows, columns, k-pairs), few rows (B streamed panel by
    panel) and many (B packed whole), B in several column blocks (the float32 path), k = 0, both
    operand layouts, with and without a bias, e4m3 times e5m2 (seeds differ per case)."""
    seed = m * 1000 + k + n
    a, b, gen = operands(m, k, n, torch.float8_e4m3fn, torch.float8_e5m2, seed=seed)
    a_t, b_r = a.t().contiguous().t(), b.contiguous()  # a column-major, b row-major
    if scaling == "tensorwise":
        sa, sb = torch.rand((), generator=gen) + 0.5, torch.rand((), generator=gen) + 0.5
    else:
        sa, sb = torch.rand(m, 1, generator=gen) + 0.5, torch.rand(1, n, generator=gen) + 0.5
    bias = torch.randn(n, generator=gen).to(out_dtype)
    for x, y, bias_or_none in ((a, b, bias), (a_t, b_r, None)):
        expected = torch._scaled_mm(x, y, sa, sb, bias=bias_or_none, out_dtype=out_dtype)
        got = torch._scaled_mm(*on_neuron(x, y, sa, sb, bias_or_none), out_dtype=out_dtype)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        # Scales after the sum (ours) or before (CPU's), sums in another order: float32 roundings
        # apart (their absolute gap grows with k), then one output rounding.
        torch.testing.assert_close(got.cpu().float(), expected.float(),
                                   rtol={torch.float32: 1e-5}.get(out_dtype, 1e-2), atol=1e-3 * max(1, k / 1024))


def test_scaled_mm_extremes_infinities_and_nans(no_fallback):
    """Largest finite values of each format, e5m2 infinities and NaNs, a float16 result that
    overflows: as CPU gives them."""
    a = torch.full((4, 8), 448.0).to(torch.float8_e4m3fn)  # e4m3fn's largest
    b = torch.full((8, 6), 57344.0).to(torch.float8_e5m2)  # e5m2's largest
    a[1, 3], b[2, 4] = float("nan"), float("inf")
    a[2, 0] = -0.001953125  # e4m3fn's smallest subnormal, 2^-9
    one = torch.tensor(1.0)
    for out_dtype in (torch.float32, torch.bfloat16, torch.float16):
        expected = torch._scaled_mm(a, b, one, one, out_dtype=out_dtype)
        got = torch._scaled_mm(*on_neuron(a, b, one, one), out_dtype=out_dtype)
        torch.testing.assert_close(got.cpu(), expected, equal_nan=True)


def test_scaled_mm_non_contiguous_out(no_fallback):
    a, b, _ = operands(9, 40, 11, torch.float8_e5m2, torch.float8_e4m3fn, seed=3)
    scale = torch.tensor(0.75)
    out = torch.zeros(11, 9, dtype=torch.float32, device="neuron").t()
    torch._scaled_mm(*on_neuron(a, b, scale, scale), out_dtype=torch.float32, out=out)
    expected = torch._scaled_mm(a, b, scale, scale, out_dtype=torch.float32)
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("self_dtype", [torch.int8, torch.uint8])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (17, 5, 35), (13, 131, 49), (40, 1027, 3), (101, 67, 70), (17, 0, 3)])
def test_int_mm_odd_shapes_and_layouts_are_exact(self_dtype, m, k, n, no_fallback):
    """k not a multiple of the kernels' 2- or 4-element groups, edges of every tile, few rows
    and many, transposed operands and a non-contiguous out."""
    gen = torch.Generator().manual_seed(m + k + n)
    low, high = (-128, 128) if self_dtype == torch.int8 else (0, 256)
    x = torch.randint(low, high, (m, k), generator=gen, dtype=torch.int32).to(self_dtype)
    w = torch.randint(-128, 128, (k, n), generator=gen, dtype=torch.int8)
    expected = torch._int_mm(x, w)
    assert torch.equal(torch._int_mm(x.to("neuron"), w.to("neuron")).cpu(), expected)
    xt, wt = x.t().contiguous().t(), w.t().contiguous().t()
    out = torch.zeros(n, m, dtype=torch.int32, device="neuron").t()
    torch._int_mm(xt.to("neuron"), wt.to("neuron"), out=out)
    assert torch.equal(out.cpu(), expected)


@pytest.mark.parametrize("self_dtype", [torch.int8, torch.uint8])
@pytest.mark.parametrize("m", [1, 13, 48, 49])
def test_int_mm_few_rows_row_major_b_is_exact(self_dtype, m, no_fallback):
    """Up to 48 rows, a row-major B is read in blocks of 512 columns and chunks of 512 k, their
    int32 sums added: several blocks and chunks, partial last ones, k off the groups of 4, B a
    slice of a wider tensor (49 rows: B packed whole)."""
    gen = torch.Generator().manual_seed(m)
    low, high = (-128, 128) if self_dtype == torch.int8 else (0, 256)
    k, n = 1030, 1100
    x = torch.randint(low, high, (m, k), generator=gen, dtype=torch.int32).to(self_dtype)
    w = torch.randint(-128, 128, (k, n + 24), generator=gen, dtype=torch.int8)[:, 5:n + 5]
    assert w.stride() == (n + 24, 1)
    assert torch.equal(torch._int_mm(x.to("neuron"), w.to("neuron")).cpu(), torch._int_mm(x, w))
    wide = torch.randint(-128, 128, (k, n + 24), generator=gen, dtype=torch.int8)
    got = torch._int_mm(x.to("neuron"), wide.to("neuron")[:, 5:n + 5])
    assert torch.equal(got.cpu(), torch._int_mm(x, wide[:, 5:n + 5]))


@pytest.mark.parametrize("a_value,b_value",
                         [(-128, -128), (-128, 127), (127, -128), (255, -128), (255, 127), (0, -128)])
def test_int_mm_extremes_are_exact(a_value, b_value, no_fallback):
    """The largest products (and the signed-A offset's worst case) summed over k = 4099, and a
    mix of extremes, bitwise as CPU."""
    self_dtype = torch.uint8 if a_value > 127 else torch.int8
    x = torch.full((53, 4099), a_value, dtype=self_dtype)
    w = torch.full((4099, 19), b_value, dtype=torch.int8)
    gen = torch.Generator().manual_seed(0)
    pick = torch.rand(53, 4099, generator=gen) < 0.5
    x_mixed = torch.where(pick, x, torch.zeros_like(x) if self_dtype == torch.uint8 else -x.clamp(min=-127))
    for a in (x, x_mixed):
        assert torch.equal(torch._int_mm(a.to("neuron"), w.to("neuron")).cpu(), torch._int_mm(a, w))


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
