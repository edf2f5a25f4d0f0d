"""torch._scaled_grouped_mm on neuron (the float8 MoE product). CPU PyTorch 2.13 has no kernel
for it, so the reference is computed group by group: the float8 values widened to float32, a CPU
float32 matmul, times the row-wise scales. Argument errors are checked against the meta function's
(PyTorch's own statement of the op's rules, which mirrors CUDA's)."""

import re

import pytest
import torch

import torchneuron  # noqa: F401

F8 = torch.float8_e4m3fn


def f8(*shape, gen):
    return (torch.randn(*shape, generator=gen) * 40).clamp(-448, 448).to(F8)


def scales(*shape, gen):
    return torch.rand(*shape, generator=gen) * 0.02 + 1e-3


def make(form, gen, strided=False, big=False):
    """Operands in the layouts the op takes (mat_a row-major, mat_b column-major) and offs."""
    pad = 16 if strided else 0

    def rows(n, k):  # [n, k] row-major, a slice of a wider buffer when strided
        return f8(n, k + pad, gen=gen)[:, :k]

    def batch(g, n, k):  # [g, n, k] row-major, every other matrix of a longer batch when strided
        t = f8(g * (2 if strided else 1), n, k + pad, gen=gen)[:, :, :k]
        return t[::2] if strided else t

    if form == "2d_3d":
        t, k, n, g = (300, 128, 96, 4) if big else (40, 32, 24, 3)
        offs = [60, 60, 200, 290] if big else [8, 8, 37]  # an empty group; rows past the last end
        return rows(t, k), batch(g, n, k).transpose(-2, -1), scales(t, gen=gen), scales(g, n, gen=gen), offs
    if form == "3d_2d":
        g, m, k, t = 3, 12, 32, 40
        return batch(g, m, k), rows(t, k).t(), scales(g, m, gen=gen), scales(t, gen=gen), [16, 16, 33]
    if form == "2d_2d":
        m, kt, n, g = 12, 64, 24, 3
        return rows(m, kt), rows(n, kt).t(), scales(g * m, gen=gen), scales(g * n, gen=gen), [16, 16, 40]
    g, m, k, n = 3, 12, 32, 24
    return batch(g, m, k), batch(g, n, k).transpose(-2, -1), scales(g, m, gen=gen), scales(g, n, gen=gen), None


def reference(form, a, b, sa, sb, offs):
    """float32 on CPU, one group at a time: (A_g @ B_g) * scale_a[:, None] * scale_b[None, :]."""
    a, b = a.float(), b.float()

    def prod(x, y, s1, s2):
        return (x @ y) * s1[:, None] * s2[None, :]

    if form == "3d_3d":
        return torch.stack([prod(a[g], b[g], sa[g], sb[g]) for g in range(a.shape[0])])
    starts = [0] + offs[:-1]
    if form == "2d_3d":
        out = torch.zeros(a.shape[0], b.shape[2])
        for g, (s, e) in enumerate(zip(starts, offs)):
            out[s:e] = prod(a[s:e], b[g], sa[s:e], sb[g])
        return out
    if form == "3d_2d":
        out = torch.zeros(a.shape[1], b.shape[1])
        for g, (s, e) in enumerate(zip(starts, offs)):
            out[:, s:e] = prod(a[g], b[:, s:e], sa[g], sb[s:e])
        return out
    m, n = a.shape[0], b.shape[1]
    return torch.stack([prod(a[:, s:e], b[s:e], sa[g * m:(g + 1) * m], sb[g * n:(g + 1) * n])
                        for g, (s, e) in enumerate(zip(starts, offs))])


def run(a, b, sa, sb, offs, device, **kw):
    o = None if offs is None else torch.tensor(offs, dtype=torch.int32, device=device)
    return torch._scaled_grouped_mm(a.to(device), b.to(device), sa.to(device), sb.to(device), o, **kw)


@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("form", ["2d_3d", "3d_2d", "2d_2d", "3d_3d"])
def test_matches_a_group_by_group_float32_reference(form, strided, no_fallback):
    gen = torch.Generator().manual_seed(1)
    a, b, sa, sb, offs = make(form, gen, strided)
    assert a.stride(-1) == 1 and b.stride(-2) == 1
    expected = reference(form, a, b, sa, sb, offs)
    got = run(a, b, sa, sb, offs, "neuron", out_dtype=torch.bfloat16)
    meta = run(a, b, sa, sb, offs, "meta")
    assert got.dtype == torch.bfloat16 == meta.dtype and got.shape == meta.shape == expected.shape
    # float8 products are exact in float32; the result is rounded once to bfloat16 (2^-9 relative).
    torch.testing.assert_close(got.cpu().float(), expected, rtol=2 ** -8, atol=1e-6)
    if form == "2d_3d":  # rows no group covers, and the empty group's (none), stay zero
        assert torch.equal(got[offs[-1]:].cpu(), torch.zeros_like(got[offs[-1]:].cpu()))
    if form == "2d_2d":  # an empty contraction gives zeros
        assert torch.equal(got[1].cpu(), torch.zeros_like(got[1].cpu()))


def test_many_rows_and_use_fast_accum(no_fallback):
    gen = torch.Generator().manual_seed(2)
    a, b, sa, sb, offs = make("2d_3d", gen, big=True)
    expected = reference("2d_3d", a, b, sa, sb, offs)
    for fast in (False, True):
        got = run(a, b, sa, sb, offs, "neuron", use_fast_accum=fast)
        torch.testing.assert_close(got.cpu().float(), expected, rtol=2 ** -8, atol=1e-6)


def test_bad_offsets_raise_at_the_next_sync():
    gen = torch.Generator().manual_seed(3)
    a, b, sa, sb, _ = make("2d_3d", gen)
    for offs, bad in (([20, 8, 40], "offs[1] = 8"), ([8, 16, 41], "offs[2] = 41"), ([-1, 8, 40], "offs[0] = -1")):
        run(a, b, sa, sb, offs, "neuron")
        with pytest.raises(Exception, match="offs must be non-decreasing and at most 40, got " + re.escape(bad)):
            torch.neuron.synchronize()
    torch.testing.assert_close(run(a, b, sa, sb, [8, 8, 37], "neuron").cpu().float(),
                               reference("2d_3d", a, b, sa, sb, [8, 8, 37]), rtol=2 ** -8, atol=1e-6)


def _message(device, a, b, sa, sb, offs=None, **kw):
    try:
        torch._scaled_grouped_mm(*(t(device) if callable(t) else t.to(device) for t in (a, b, sa, sb)),
                                 None if offs is None else offs.to(device), **kw)
    except RuntimeError as e:
        return str(e).split("\n")[0]
    return None


def test_argument_errors_are_the_meta_functions():
    gen = torch.Generator().manual_seed(4)
    a, b, sa, sb, offs = make("2d_3d", gen)
    o = torch.tensor(offs, dtype=torch.int32)
    a3, b3, sa3, sb3, _ = make("3d_3d", gen)
    cases = [
        (a.float(), b, sa, sb, o),                       # not float8
        (a.to(torch.float8_e5m2), b, sa, sb, o),         # e5m2
        (a[None, None], b, sa, sb, o),                   # 4D
        (a[:, :16], b, sa, sb, o),                       # contraction mismatch
        (a.t().contiguous().t(), b, sa, sb, o),          # mat_a column-major
        (a, b.contiguous(), sa, sb, o),                  # mat_b row-major
        (f8(40, 40, gen=gen)[:, :24], b[:, :24], sa, sb, o),  # row stride 40: not 16-byte aligned
        (a, b, sa.double(), sb, o),                      # scale dtype
        (a, b, sa[:-1], sb, o),                          # scale_a length
        (a, b, lambda d: torch.rand(80, device=d)[::2], sb, o),  # scale_a not contiguous
        (a, b, sa, sb.t().contiguous().t(), o),          # scale_b not contiguous in its last dim
        (a, b, sa, sb[:2], o),                           # scale_b batch
        (a, b, sa, sb[:, :-1], o),                       # scale_b columns
        (a, b, sa, sb, None),                            # offs missing
        (a, b, sa, sb, o.long()),                        # offs dtype
        (a, b, sa, sb, o[None]),                         # offs 2D
        (a, b, sa, sb, o[:2]),                           # offs count
        (a3, b3, sa3, sb3, torch.tensor([1, 2, 3], dtype=torch.int32)),  # offs for 3D x 3D
        (a3, b3[:2], sa3, sb3[:2], None),                # batch mismatch
    ]
    for i, case in enumerate(cases):
        expected = _message("meta", *case)
        assert expected is not None, i
        assert _message("neuron", *case) == expected, i
    for kw in ({"out_dtype": torch.float32}, {"bias": torch.zeros(24)}, {"scale_result": torch.ones(())}):
        expected = _message("meta", a, b, sa, sb, o, **kw)
        assert expected is not None
        kw = {k: (v.to("neuron") if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
        assert _message("neuron", a, b, sa, sb, o, **kw) == expected


def test_mx_block_scales_are_refused_with_a_clear_message():
    gen = torch.Generator().manual_seed(5)
    a, b, _, _, offs = make("2d_3d", gen)
    e8 = torch.ones(40, 1).to(torch.float8_e8m0fnu)
    with pytest.raises(NotImplementedError, match="MXFP8 block scales"):
        run(a, b, e8, torch.ones(3, 128).to(torch.float8_e8m0fnu), offs, "neuron")


def test_compiled_graph_matches_eager(no_fallback, fresh_compiler):
    """Inside a torch.compile(backend="neuron") program (the op runs as an eager call there),
    with device ops around it, the result is eager's, bit for bit."""
    gen = torch.Generator().manual_seed(6)
    a, b, sa, sb, offs = make("2d_3d", gen)
    args = [t.to("neuron") for t in (a, b, sa, sb)] + [torch.tensor(offs, dtype=torch.int32, device="neuron")]

    def f(a, b, sa, sb, offs):
        return torch._scaled_grouped_mm(a, b, sa * 2, sb, offs, out_dtype=torch.bfloat16).float().relu()

    got = torch.compile(f, backend="neuron")(*args)
    assert torch.equal(got.cpu(), f(*args).cpu())
    expected = reference("2d_3d", a, b, sa * 2, sb, offs).relu()
    torch.testing.assert_close(got.cpu(), expected, rtol=2 ** -8, atol=1e-6)
