"""The indices kernels write into tiles besides ints and slices: nl.ds dynamic slices, legacy
nl.arange / nl.mgrid affine indices, and the masks their comparisons make."""
from __future__ import annotations

from ._errors import NKIError
from ._expr import Index, LinearOps, bounds, cpp, is_symbolic


class DynSlice:
    """nl.ds(start, size): a slice of `size` elements from `start` (which may be a loop variable)."""

    def __init__(self, start, size, step=1):
        if not isinstance(size, int) or size <= 0:
            raise NKIError(f"nl.ds: the size must be a positive constant, got {size!r}")
        self.start, self.size, self.step = start, size, step


class ArangeIndex(LinearOps):
    """Legacy advanced indexing: start + sum(coeffs[axis] * nl.arange(sizes[axis])) over result
    axes of a tile of rank `ndim` (nl.arange(n)[:, None] is axis 0 of 2, [None, :] axis 1)."""

    def __init__(self, size: int, axis: int, ndim: int, start=0, coeff=1):
        self.coeffs, self.sizes, self.ndim, self.start = {axis: coeff}, {axis: size}, ndim, start

    @classmethod
    def _make(cls, coeffs, sizes, ndim, start):
        made = cls.__new__(cls)
        made.coeffs, made.sizes, made.ndim, made.start = dict(coeffs), dict(sizes), ndim, start
        return made

    @property
    def size(self):
        (size,) = self.sizes.values()
        return size

    def __getitem__(self, key):  # nl.arange(n)[:, None] / [None, :]
        key = key if isinstance(key, tuple) else (key,)
        axis = [k for k, item in enumerate(key) if isinstance(item, slice)]
        if len(axis) != 1 or len(self.sizes) != 1 or any(item is not None and not isinstance(item, slice) for item in key):
            raise NKIError("nl.arange(n)[...]: index with one ':' and Nones, such as [:, None]")
        (coeff,) = self.coeffs.values()
        return ArangeIndex(self.size, axis[0], len(key), self.start, coeff)

    def __add__(self, other):
        if isinstance(other, (int, Index)) and not isinstance(other, bool):
            return self._make(self.coeffs, self.sizes, self.ndim, self.start + other)
        if isinstance(other, ArangeIndex):
            if other.ndim != self.ndim:
                raise NKIError("NKI: adding nl.arange indices of different ranks")
            coeffs, sizes = dict(self.coeffs), dict(self.sizes)
            for axis, c in other.coeffs.items():
                coeffs[axis] = coeffs.get(axis, 0) + c
                sizes[axis] = other.sizes[axis]
            return self._make(coeffs, sizes, self.ndim, self.start + other.start)
        return NotImplemented

    __radd__ = __add__

    def __mul__(self, other):
        if isinstance(other, int):
            return self._make({a: c * other for a, c in self.coeffs.items()}, self.sizes, self.ndim, self.start * other)
        return NotImplemented

    __rmul__ = __mul__

    def _compare(self, other, op):
        return Mask([(self - other, op)])

    def __lt__(self, other): return self._compare(other, "lt")
    def __le__(self, other): return self._compare(other, "le")
    def __gt__(self, other): return self._compare(other, "gt")
    def __ge__(self, other): return self._compare(other, "ge")


class Mask:
    """A conjunction of predicates `affine OP 0` over an op's tile indices (comparisons of aranges).
    As mask= it bounds each axis; nisa.affine_select evaluates it per element."""

    def __init__(self, predicates):
        self.predicates = list(predicates)

    def __and__(self, other):
        if not isinstance(other, Mask):
            return NotImplemented
        return Mask(self.predicates + other.predicates)

    @property
    def bounds(self):
        """{axis: (lower, upper)} with lower <= t < upper, from single-axis predicates."""
        result = {}
        for affine, op in self.predicates:
            if len([c for c in affine.coeffs.values() if c]) != 1:
                raise NKIError("NKI: a mask= bounds each axis on its own (start + nl.arange(n) < bound); use "
                               "nisa.affine_select for a predicate over several axes")
            (axis, c), = [(a, c) for a, c in affine.coeffs.items() if c]
            k = affine.start
            if c not in (1, -1):
                raise NKIError("NKI: a mask= compares start + nl.arange(n) (coefficient 1) with a bound")
            lo = hi = None
            if c == 1:  # t + k OP 0
                hi = {"lt": -k, "le": -k + 1}.get(op)
                lo = {"gt": -k + 1, "ge": -k}.get(op)
            else:  # -t + k OP 0
                lo = {"lt": k + 1, "le": k}.get(op)
                hi = {"gt": k, "ge": k + 1}.get(op)
            old_lo, old_hi = result.get(axis, (None, None))
            result[axis] = (_combine(old_lo, lo, _pick_max), _combine(old_hi, hi, _pick_min))
        return result


def _pick_max(a, b):
    return a if a >= b else b


def _pick_min(a, b):
    return a if a <= b else b


def _combine(a, b, pick):
    if a is None:
        return b
    if b is None:
        return a
    if not is_symbolic(a) and not is_symbolic(b):
        return pick(a, b)
    name = "std::max<int64_t>" if pick is _pick_max else "std::min<int64_t>"
    (alo, ahi), (blo, bhi) = bounds(a), bounds(b)
    return Index(None, 0, f"{name}({cpp(a)}, {cpp(b)})", pick(alo, blo), pick(ahi, bhi))
