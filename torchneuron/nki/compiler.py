"""nki.compiler: directives to AWS's compiler (allocation, scheduling). torchneuron has no such
passes: the directives are accepted, and an allocator given as buffer= allocates in its memory."""
from ._tensor import SPACES


def skip_middle_end_transformations(fn):
    """Decorator: the kernel as it is."""
    return fn


def enable_stack_allocator(fn=None, **_unused):
    """Decorator: the kernel as it is."""
    return fn if fn is not None else (lambda f: f)


force_auto_alloc = enable_stack_allocator


def no_reorder(*_args, **_unused):
    """A loop directive (sequential_range(..., directives=no_reorder())); loops run in order anyway."""
    return None


class _Allocator:
    """What sbuf.mod_alloc / psum.alloc return: a buffer= that allocates in that memory. The
    placement it asks for is not modelled; each allocation gets its own memory."""

    def __init__(self, space, **placement):
        self._nki_space = SPACES[space]
        self.placement = placement


class _Memory:
    def __init__(self, space):
        self.space = space

    def mod_alloc(self, *_args, **placement):
        return _Allocator(self.space, **placement)

    alloc = auto_alloc = mod_alloc


sbuf, psum = _Memory("sbuf"), _Memory("psum")

__all__ = ["skip_middle_end_transformations", "enable_stack_allocator", "force_auto_alloc", "no_reorder", "sbuf", "psum"]
