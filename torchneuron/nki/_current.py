"""The executor running a kernel on this thread: what language functions, tiles and instructions
emit into (set by the kernel launcher with `activate`)."""
from __future__ import annotations

import threading

from ._errors import NKIError

_state = threading.local()


def current():
    """The executor running the kernel on this thread."""
    ctx = getattr(_state, "ctx", None)
    if ctx is None:
        raise NKIError("NKI language functions run inside a kernel: decorate it with @nki.jit and call it")
    return ctx


class activate:
    """`with activate(executor):` makes it the executor running on this thread (the previous one after)."""

    def __init__(self, ctx):
        self.ctx = ctx

    def __enter__(self):
        self.saved = getattr(_state, "ctx", None)
        _state.ctx = self.ctx
        return self.ctx

    def __exit__(self, *exc):
        _state.ctx = self.saved
