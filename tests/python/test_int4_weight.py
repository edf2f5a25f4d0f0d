"""int4 weight-only ops on neuron against CPU PyTorch's: _convert_weight_to_int4pack_for_cpu gives
CPU's bytes (whose layout follows ATen's instruction-set level), _weight_int4pack_mm_for_cpu CPU's
product, a weight packed on one side runs on the other, and CPU's errors for what CPU refuses
(CUDA's int4 layout and the float8 grouped GEMM included)."""

import pytest
import torch

import torchneuron

A = torch.ops.aten
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2),
       torch.float16: dict(rtol=1e-3, atol=1e-3)}


def weights(n, k, seed=0, low=0, high=16):
    return torch.randint(low, high, (n, k), dtype=torch.int32, generator=torch.Generator().manual_seed(seed))


# n: full 64-row blocks (avx512), 32-row blocks (avx2, default) and the partial blocks of 16 / 32 / 48 rows.
@pytest.mark.parametrize("n", [16, 32, 48, 64, 80, 96, 144])
@pytest.mark.parametrize("k", [2, 64, 256])
def test_pack_gives_cpu_bytes(n, k, no_fallback):
    q = weights(n, k, seed=n + k)
    assert torch.equal(A._convert_weight_to_int4pack_for_cpu(q.to("neuron"), 8).cpu(),
                       A._convert_weight_to_int4pack_for_cpu(q, 8))


def test_pack_of_out_of_range_values_and_strided_weights_is_cpus(no_fallback):
    q = weights(32, 12, low=-40, high=40)  # CPU keeps each value's low byte: the nibbles overlap
    assert torch.equal(A._convert_weight_to_int4pack_for_cpu(q.to("neuron"), 2).cpu(),
                       A._convert_weight_to_int4pack_for_cpu(q, 2))
    q = weights(64, 32).t()  # [32, 64], transposed
    assert torch.equal(A._convert_weight_to_int4pack_for_cpu(q.to("neuron"), 2).cpu(),
                       A._convert_weight_to_int4pack_for_cpu(q, 2))


# m: up to 16 rows decode straight from the nibbles, more go through dequantized slices of 256
# (avx2, default) or 512 (avx512) weight rows.
@pytest.mark.parametrize("m", [7, 40])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n,k,group", [(64, 256, 32), (48, 128, 64), (96, 256, 128), (32, 512, 256), (592, 64, 32)])
def test_matmul_matches_cpu(m, dtype, n, k, group, no_fallback):
    gen = torch.Generator().manual_seed(n * k + group)
    x = torch.randn(m, k, generator=gen).to(dtype)
    scales_zeros = (torch.rand(k // group, n, 2, generator=gen) * 0.2 - 0.05).to(dtype)
    packed = A._convert_weight_to_int4pack_for_cpu(weights(n, k, seed=group), 2)
    expected = A._weight_int4pack_mm_for_cpu(x, packed, group, scales_zeros)
    got = A._weight_int4pack_mm_for_cpu(x.to("neuron"), packed.to("neuron"), group, scales_zeros.to("neuron"))
    assert got.dtype == dtype and got.shape == (m, n)
    torch.testing.assert_close(got.cpu(), expected, **TOL[dtype])


def test_dequantization_formula_against_float64(no_fallback):
    """Independent of CPU's kernel: w = (q - 8) * scale + zero per group, x @ w.T."""
    n, k, group = 32, 128, 32
    gen = torch.Generator().manual_seed(3)
    q = weights(n, k, seed=3)
    x = torch.randn(5, k, generator=gen)
    sz = torch.rand(k // group, n, 2, generator=gen) - 0.5
    scale = sz[..., 0].repeat_interleave(group, 0).t().double()
    zero = sz[..., 1].repeat_interleave(group, 0).t().double()
    expected = x.double() @ ((q.double() - 8) * scale + zero).t()
    packed = A._convert_weight_to_int4pack_for_cpu(q.to("neuron"), 2)
    got = A._weight_int4pack_mm_for_cpu(x.to("neuron"), packed, group, sz.to("neuron"))
    torch.testing.assert_close(got.cpu().double(), expected, rtol=1e-5, atol=1e-5)


def test_packed_weights_move_between_cpu_and_neuron(no_fallback):
    n, k, group = 80, 128, 64
    gen = torch.Generator().manual_seed(5)
    q = weights(n, k, seed=5)
    x = torch.randn(3, k, generator=gen).bfloat16()
    sz = (torch.rand(k // group, n, 2, generator=gen) * 0.1).bfloat16()
    reference = A._weight_int4pack_mm_for_cpu(x, A._convert_weight_to_int4pack_for_cpu(q, 2), group, sz)
    packed_on_cpu = A._convert_weight_to_int4pack_for_cpu(q, 2).to("neuron")
    on_neuron = A._weight_int4pack_mm_for_cpu(x.to("neuron"), packed_on_cpu, group, sz.to("neuron"))
    torch.testing.assert_close(on_neuron.cpu(), reference, **TOL[torch.bfloat16])
    packed_on_neuron = A._convert_weight_to_int4pack_for_cpu(q.to("neuron"), 2).cpu()
    torch.testing.assert_close(A._weight_int4pack_mm_for_cpu(x, packed_on_neuron, group, sz), reference, rtol=0, atol=0)


def test_empty_shapes_match_cpu(no_fallback):
    packed = A._convert_weight_to_int4pack_for_cpu(weights(32, 64), 2)
    sz = torch.rand(2, 32, 2)
    got = A._weight_int4pack_mm_for_cpu(torch.randn(0, 64, device="neuron"), packed.to("neuron"), 32, sz.to("neuron"))
    assert got.shape == (0, 32) and got.device.type == "neuron"
    empty_weight = torch.zeros(0, 4, dtype=torch.int32, device="neuron")
    assert A._convert_weight_to_int4pack_for_cpu(empty_weight, 2).shape == (0, 2)


def _error(fn, device):
    try:
        fn(device)
    except (RuntimeError, IndexError) as e:
        return type(e), str(e).splitlines()[0]
    return None


def test_refuses_what_cpu_refuses_with_cpus_message():
    q = weights(32, 64)
    p = A._convert_weight_to_int4pack_for_cpu(q, 2)
    x, sz = torch.randn(4, 64), torch.rand(2, 32, 2)
    cases = [
        lambda d: A._convert_weight_to_int4pack_for_cpu(q.to(torch.uint8).to(d), 2),
        lambda d: A._convert_weight_to_int4pack_for_cpu(q.flatten().to(d), 2),
        lambda d: A._convert_weight_to_int4pack_for_cpu(q[:8].to(d), 2),
        lambda d: A._convert_weight_to_int4pack_for_cpu(q[:, :63].to(d), 2),
        lambda d: A._weight_int4pack_mm_for_cpu(x.double().to(d), p.to(d), 32, sz.double().to(d)),
        lambda d: A._weight_int4pack_mm_for_cpu(x[None].to(d), p.to(d), 32, sz.to(d)),
        lambda d: A._weight_int4pack_mm_for_cpu(torch.randn(64, 4).to(d).t(), p.to(d), 32, sz.to(d)),
        lambda d: A._weight_int4pack_mm_for_cpu(x.to(d), p.to(torch.int32).to(d), 32, sz.to(d)),
        lambda d: A._weight_int4pack_mm_for_cpu(torch.randn(4, 128).to(d), p.to(d), 32, torch.rand(4, 32, 2).to(d)),
        lambda d: A._weight_int4pack_mm_for_cpu(x.to(d), p.to(d), 48, sz.to(d)),
        lambda d: A._weight_int4pack_mm_for_cpu(x.to(d), p.to(d), 128, sz.to(d)),
        lambda d: A._weight_int4pack_mm_for_cpu(x.to(d), p.to(d), 32, torch.rand(2, 16, 2).to(d)),
        lambda d: A._weight_int4pack_mm_for_cpu(x.to(d), p.to(d), 32, sz.bfloat16().to(d)),
        lambda d: A._weight_int4pack_mm_for_cpu(x.to(d), torch.zeros(40, 32, dtype=torch.uint8, device=d), 32,
                                                torch.rand(2, 40, 2).to(d)),
    ]
    for i, case in enumerate(cases):
        expected = _error(case, "cpu")
        assert expected is not None, i
        assert _error(case, "neuron") == expected, i


def test_short_scales_are_refused_where_cpu_would_read_past_them():
    p = A._convert_weight_to_int4pack_for_cpu(weights(32, 64), 2).to("neuron")
    with pytest.raises(RuntimeError, match="qScaleAndZeros has 1 groups, K / qGroupSize = 2"):
        A._weight_int4pack_mm_for_cpu(torch.randn(4, 64, device="neuron"), p, 32, torch.rand(1, 32, 2, device="neuron"))


@pytest.mark.parametrize("op", ["_convert_weight_to_int4pack", "_weight_int4pack_mm"])
def test_cuda_only_ops_are_refused_as_cpu_refuses_them(op):
    """CPU PyTorch 2.13 has no kernel for CUDA's tinygemm layout: neuron raises CPU's
    NotImplementedError. (_scaled_grouped_mm, also CUDA-only, is native: test_scaled_grouped_mm.)"""
    args = {
        "_convert_weight_to_int4pack": lambda d: (torch.zeros(32, 32, dtype=torch.uint8, device=d), 2),
        "_weight_int4pack_mm": lambda d: (torch.randn(4, 64, device=d).bfloat16(),
                                          torch.zeros(4, 1, 32, 1, dtype=torch.int32, device=d), 32,
                                          torch.rand(2, 32, 2, device=d).bfloat16()),
    }[op]
    with pytest.raises(NotImplementedError, match=f"Could not run 'aten::{op}' with arguments from the 'CPU'"):
        getattr(A, op)(*args("cpu"))
    mode = torchneuron.fallback_mode()
    torchneuron.set_fallback_mode("silent")
    try:
        with pytest.raises(NotImplementedError, match=f"Could not run 'aten::{op}' with arguments from the 'CPU'"):
            getattr(A, op)(*args("neuron"))
    finally:
        torchneuron.set_fallback_mode(mode)


def test_compiled_graph_runs_the_int4_product_inside_its_program(no_fallback, fresh_compiler):
    q = weights(64, 128, seed=6)
    packed = A._convert_weight_to_int4pack_for_cpu(q, 2)
    gen = torch.Generator().manual_seed(6)
    sz, x = torch.rand(4, 64, 2, generator=gen) * 0.1, torch.randn(5, 128, generator=gen)

    def f(x, packed, sz):
        return torch.relu(A._weight_int4pack_mm_for_cpu(x * 2, packed, 32, sz)) + 1

    got = torch.compile(f, backend="neuron")(x.to("neuron"), packed.to("neuron"), sz.to("neuron"))
    assert torchneuron.compile_stats()["graphs_compiled"] == 1
    torch.testing.assert_close(got.cpu(), f(x, packed, sz), rtol=1e-5, atol=1e-5)
