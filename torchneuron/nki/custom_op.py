"""torchneuron.nki_op: a Python function that calls NKI kernels as a torch.library custom op, so it
is one node in eager, torch.compile and autograd code. Its fake implementation is the function
itself: kernels called with fake tensors trace (once per shapes) and return outputs of the traced
shapes without running."""
from __future__ import annotations

import torch


def nki_op(name: str, *, mutates_args=(), device_types=None, schema=None):
    """Decorator: registers `fn` (typed like a torch.library.custom_op) as the custom op `name`
    ("lib::op") with a fake implementation from the kernels' traces; returns the op, on which
    register_autograd(backward, setup_context=...) gives it a backward."""
    def wrap(fn):
        op = torch.library.custom_op(name, fn, mutates_args=mutates_args, device_types=device_types, schema=schema)
        op.register_fake(fn)
        return op
    return wrap
