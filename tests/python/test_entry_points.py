"""Ops that take a code or event address as an integer (torch.ops.torchneuron.launch_*,
torch.neuron.Event timing) raise on a wrong one instead of calling or reading through it."""

import ctypes

import pytest
import torch

from torchneuron import _C


def libc_function_address():
    """A real function, but not one of a compiled artifact."""
    return ctypes.cast(ctypes.CDLL(None).abs, ctypes.c_void_p).value


@pytest.mark.parametrize("entry", [0, 12345, "libc"])
def test_launch_ops_reject_what_is_not_an_artifact_kernel(entry):
    entry = libc_function_address() if entry == "libc" else entry
    out = torch.empty(4, device="neuron")
    x = torch.ones(4, device="neuron")
    with pytest.raises(RuntimeError, match="is not the entry point of a loaded"):
        torch.ops.torchneuron.launch_fused(entry, [out], [x], [4])
    with pytest.raises(RuntimeError, match="is not the entry point of a loaded"):
        torch.ops.torchneuron.launch_fused_reduction(entry, [out], [x], [4], [0])
    with pytest.raises(RuntimeError, match="is not the entry point of a loaded"):
        torch.ops.torchneuron.launch_tile_program(entry, [out, x], 1, "bogus")
    torch.neuron.synchronize()  # nothing was queued that could fault


def test_compiled_and_nki_kernels_still_launch():
    @torch.compile(backend="neuron")
    def f(a):
        return (a * 3).exp() - a

    a = torch.randn(100)
    torch.testing.assert_close(f(a.to("neuron")).cpu(), (a * 3).exp() - a)
    torch._dynamo.reset()


def test_event_timing_rejects_handles_of_no_live_event():
    with pytest.raises(ValueError, match="names no live neuron event"):
        _C._event_elapsed_ms(12345, 67890)
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    start.record()
    torch.ones(1000, device="neuron").sum()
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0
    handle = end.event_id
    del end
    with pytest.raises(ValueError, match="names no live neuron event"):
        _C._event_elapsed_ms(start.event_id, handle)
