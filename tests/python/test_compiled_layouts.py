"""Result layouts that later views rely on: eager constant_pad_nd lays its result out as CPU does,
and a compiled program gives an eager call's result the strides the traced graph promised (a
`view` after a permute of it works), whichever executor runs the graph."""

import pytest
import torch
import torch.nn.functional as F

from torchneuron.compiler import program


def _transposed(*shape):
    """A tensor of `shape` whose last two dims are swapped in memory (as attention's K^T is)."""
    gen = torch.Generator().manual_seed(0)
    return torch.randn(*shape[:-2], shape[-1], shape[-2], generator=gen).transpose(-1, -2)


@pytest.mark.parametrize("case", ["crop_transposed", "pad_transposed", "pad_channels_last", "crop_and_pad"])
def test_constant_pad_nd_matches_cpu_values_and_strides(case, no_fallback):
    x, pad = {
        "crop_transposed": (_transposed(2, 4, 64, 16), [0, 0, 0, -56]),
        "pad_transposed": (_transposed(2, 4, 64, 16), [1, 2, 0, 3]),
        "pad_channels_last": (torch.randn(2, 3, 5, 6).to(memory_format=torch.channels_last), [1, 1, 2, 0]),
        "crop_and_pad": (torch.randn(2, 3, 5, 6).to(memory_format=torch.channels_last), [-1, 2, 0, -2]),
    }[case]
    expected = F.pad(x, pad, value=0.5)  # CPU PyTorch, the reference
    got = F.pad(x.to("neuron"), pad, value=0.5)
    assert got.shape == expected.shape and got.stride() == expected.stride()
    assert torch.equal(got.cpu(), expected)


def test_view_of_a_permuted_crop_works_eager_and_compiled(fresh_compiler, no_fallback):
    """A Qwen3.5 attention backward computes this: crop a transposed product, permute, view."""
    def f(x):
        cropped = F.pad(x * 2, [0, 0, 0, -56])  # [2, 4, 8, 16] in x's transposed layout
        return cropped.permute(0, 2, 1, 3).view(2, 8, -1) + 1

    x = _transposed(2, 4, 64, 16)
    expected = f(x)
    assert torch.equal(f(x.to("neuron")).cpu(), expected)
    assert torch.equal(torch.compile(f, backend="neuron")(x.to("neuron")).cpu(), expected)


# An op whose traced (fake) result is laid out transposed while the device computes it row-major:
# what any eager kernel that does not follow CPU's layout rules does inside a compiled graph.
@torch.library.custom_op("layout_test::scaled_rowmajor", mutates_args=())
def scaled_rowmajor(x: torch.Tensor) -> torch.Tensor:
    return (x * 3).contiguous()


@scaled_rowmajor.register_fake
def _(x):
    return torch.empty(x.shape[:-2] + (x.shape[-1], x.shape[-2]), dtype=x.dtype, device=x.device).transpose(-1, -2)


@pytest.mark.parametrize("native", [True, False], ids=["native_executor", "step_loop"])
def test_compiled_program_restrides_an_eager_result_a_view_needs(native, fresh_compiler, monkeypatch):
    monkeypatch.setattr(program, "native_executor", native)

    def f(x):
        y = torch.ops.layout_test.scaled_rowmajor(x)
        return y.transpose(-1, -2).view(-1) - 1  # a view of the traced layout; needs those strides

    x = _transposed(3, 8, 5)
    expected = (x * 3).transpose(-1, -2).reshape(-1) - 1  # CPU PyTorch
    got = torch.compile(f, backend="neuron", fullgraph=True)(x.to("neuron"))
    assert torch.equal(got.cpu(), expected)
