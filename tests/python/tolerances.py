"""Per-dtype tolerances for comparing the device with CPU PyTorch: torch.testing.assert_close's
defaults, so that a float64 result is held to float64 precision and never to float32's."""

import torch

# dtype -> (rtol, atol), the defaults torch.testing.assert_close picks.
DEFAULT = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1.3e-6, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float16: (1e-3, 1e-5),
}
DEFAULT[torch.complex64] = DEFAULT[torch.float32]
DEFAULT[torch.complex128] = DEFAULT[torch.float64]


def tolerances(dtype, rtol=None, atol=None):
    """(rtol, atol) for `dtype`. A caller that loosens an op states its reason and gives the
    float32 values (rtol, atol): float64 is loosened by the same factor over its own defaults (an
    accumulation-order error scales with the dtype's epsilon); bfloat16 and float16, which compute
    in float32 and round once, take the larger of their defaults and the float32 values."""
    base_rtol, base_atol = DEFAULT[dtype]
    f32_rtol, f32_atol = DEFAULT[torch.float32]
    rtol = f32_rtol if rtol is None else rtol
    atol = f32_atol if atol is None else atol
    if dtype in (torch.float32, torch.complex64):
        return rtol, atol
    if dtype in (torch.float64, torch.complex128):
        return base_rtol * rtol / f32_rtol, base_atol * atol / f32_atol
    return max(base_rtol, rtol), max(base_atol, atol)


def rounding_step(expected):
    """One rounding step of `expected`'s dtype at its largest finite magnitude (eps * max|x|): the
    absolute error of a half-type result that CPU PyTorch computes in several rounded steps (a
    running sum, a softmax's normalizer, the terms of a backward), which is a step of the largest
    term rather than of each element."""
    finite = expected[expected.isfinite()].float()
    return torch.finfo(expected.dtype).eps * (finite.abs().max().item() if finite.numel() else 0.0)


def assert_close(actual, expected, rtol=None, atol=None, **kwargs):
    """torch.testing.assert_close at `expected.dtype`'s tolerances (see tolerances())."""
    rtol, atol = tolerances(expected.dtype, rtol, atol)
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, **kwargs)


def assert_close_to_scale(actual, expected, rtol=2e-2, **kwargs):
    """For a bfloat16 / float16 result: every element within `rtol` of the reference's largest
    finite magnitude (so a tolerance never exceeds the values it checks: an all-zero result
    fails), and the result itself not trivially small."""
    actual, expected = actual.cpu().float(), expected.cpu().float()
    finite = expected[expected.isfinite()]
    scale = finite.abs().max().item() if finite.numel() else 0.0
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=rtol * scale, **kwargs)
    if scale > 0:
        largest = actual[actual.isfinite()].abs().max().item()
        assert largest >= scale / 2, f"result's largest magnitude {largest} is far below the reference's {scale}"
