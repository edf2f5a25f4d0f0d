"""Symbolic integers of a traced kernel: program ids and loop variables, and the affine (or
floor-divided) expressions kernels build from them, with their C++ text and value range."""
from __future__ import annotations

import itertools
import re


class KernelTraceError(TypeError):
    """A kernel did something that cannot be compiled (Python control flow on a loop variable)."""


class ProgramTraceError(KernelTraceError):
    """Python control flow on a program id, or a barrier / exchange between a grid's programs: the
    kernel is traced again with each program's id an integer (its programs in lockstep)."""


def _error(index, message):
    """The trace error for Python control flow on `index`: ProgramTraceError when it involves a program
    id. It names the variables involved (`variables`), so the loops that made them can be unrolled."""
    names = set(index.terms) if index.terms is not None else set(re.findall(r"\b([pi]\d+)\b", index.text or ""))
    error = (ProgramTraceError if any(n.startswith("p") for n in names) else KernelTraceError)(message)
    error.variables = names
    return error


# Variable name -> (creation order, its highest value as affine terms and constant), in the trace
# being built. A loop's extent may depend on outer variables (range(j, n)): bounds substitute the
# innermost variable's highest value first, so j + step over step < n - j is at most n - 1.
_ranges = {}
_order = itertools.count()


def _extreme(terms, const, upper: bool) -> int:
    terms = dict(terms)
    while terms:
        name = max(terms, key=lambda n: _ranges.get(n, (-1,))[0])
        c = terms.pop(name)
        if c == 0 or (c > 0) != upper:
            continue  # this end of the variable's range is 0
        _, top_terms, top_const = _ranges.get(name, (0, {}, 0))
        for n, tc in top_terms.items():
            terms[n] = terms.get(n, 0) + c * tc
        const += c * top_const
    return const


def _affine(terms, const) -> "Index":
    """An affine Index with its exact range."""
    terms = {n: c for n, c in terms.items() if c != 0}
    return Index(terms, const, None, _extreme(terms, const, False), _extreme(terms, const, True))


class LinearOps:
    """Negation and subtraction from __add__ and __mul__ (Index and nl.arange indices)."""

    def __neg__(self):
        return self * -1

    def __sub__(self, other):
        return self + (-other)

    def __rsub__(self, other):
        return (-self) + other


class Index(LinearOps):
    """An integer expression over loop variables and program ids: terms {name: coefficient} plus
    a constant when affine; otherwise C++ text. lo and hi bound its value (inclusive)."""

    __slots__ = ("terms", "const", "text", "lo", "hi")

    def __init__(self, terms=None, const=0, text=None, lo=0, hi=0):
        self.terms = terms  # None: not affine
        self.const = const
        self.text = text
        self.lo, self.hi = lo, hi

    @staticmethod
    def variable(name: str, highest) -> "Index":
        """A loop variable or program id running from 0 to `highest` (an int or affine Index)."""
        if isinstance(highest, Index) and highest.terms is not None:
            _ranges[name] = (next(_order), dict(highest.terms), highest.const)
            return Index({name: 1}, 0, None, 0, max(0, highest.hi))
        top = highest.hi if isinstance(highest, Index) else highest
        _ranges[name] = (next(_order), {}, max(0, top))
        return Index({name: 1}, 0, None, 0, max(0, top))

    def cpp(self) -> str:
        if self.terms is None:
            return self.text
        parts = [(f"{name}" if c == 1 else f"{name} * {c}") for name, c in self.terms.items() if c != 0]
        if self.const or not parts:
            parts.append(str(self.const))
        return "(" + " + ".join(parts) + ")"

    def __repr__(self):
        return f"Index({self.cpp()} in [{self.lo}, {self.hi}])"

    # Arithmetic -----------------------------------------------------------------------------
    def __add__(self, other):
        if isinstance(other, Index):
            if self.terms is not None and other.terms is not None:
                terms = dict(self.terms)
                for name, c in other.terms.items():
                    terms[name] = terms.get(name, 0) + c
                return _affine(terms, self.const + other.const)
            return Index(None, 0, f"({cpp(self)} + {cpp(other)})", self.lo + other.lo, self.hi + other.hi)
        if isinstance(other, int):
            if self.terms is not None:
                return _affine(self.terms, self.const + other)
            return Index(None, 0, f"({self.text} + {other})", self.lo + other, self.hi + other)
        return NotImplemented

    __radd__ = __add__

    def __mul__(self, other):
        if isinstance(other, int):
            lo, hi = sorted((self.lo * other, self.hi * other))
            if self.terms is not None:
                return _affine({n: c * other for n, c in self.terms.items()}, self.const * other)
            return Index(None, 0, f"({self.text} * {other})", lo, hi)
        if isinstance(other, Index):
            raise KernelTraceError("a product of two loop variables is not an affine index; use static_range "
                                   "for one of the loops")
        return NotImplemented

    __rmul__ = __mul__

    def __floordiv__(self, other):
        if isinstance(other, int) and other > 0:
            if self.lo < 0:
                raise KernelTraceError(f"floor division of an index that may be negative: {self!r}")
            return Index(None, 0, f"({self.cpp()} / {other})", self.lo // other, self.hi // other)
        raise KernelTraceError("a loop variable can only be divided by a positive integer constant")

    def __mod__(self, other):
        if isinstance(other, int) and other > 0:
            if self.lo < 0:
                raise KernelTraceError(f"modulo of an index that may be negative: {self!r}")
            if self.hi < other:
                return self
            return Index(None, 0, f"({self.cpp()} % {other})", 0, other - 1)
        raise KernelTraceError("a loop variable can only be taken modulo a positive integer constant")

    def __bool__(self):
        raise _error(self,
            "a kernel's Python control flow depends on a loop variable or program id, which is symbolic when "
            "the kernel is compiled; use nl.static_range for that loop, a mask=, nisa.affine_select or nl.where "
            "(or run with TORCHNEURON_NKI_INTERPRET=1)")

    def __index__(self):
        raise _error(self, "a loop variable or program id was used where Python needs a concrete integer "
                               "(range(), a list index); use nl.static_range or nl.ds(start, size)")

    def __int__(self):
        return self.__index__()

    def __float__(self):
        return float(self.__index__())

    def __truediv__(self, other):  # a Python value computed from the index: its loop is unrolled
        raise _error(self, "a loop variable or program id divided with / (a Python float) needs a concrete "
                           "integer; use // or nl.static_range")

    def __rtruediv__(self, other):
        return self.__truediv__(other)

    def __hash__(self):
        return hash((self.cpp(), self.lo, self.hi))

    def _compare(self, other):
        if isinstance(other, (int, Index)):
            self.__bool__()
        return NotImplemented  # an arange on the other side makes a mask

    __lt__ = __le__ = __gt__ = __ge__ = _compare

    def __eq__(self, other):
        raise _error(self, "comparing a loop variable or program id is Python control flow, which is "
                               "symbolic when the kernel is compiled; use a mask= or nl.static_range")


def cpp(x) -> str:
    """C++ text of an int or Index."""
    return x.cpp() if isinstance(x, Index) else str(int(x))


def bounds(x) -> tuple[int, int]:
    """(lowest, highest) value of an int or Index."""
    return (x.lo, x.hi) if isinstance(x, Index) else (int(x), int(x))


def is_symbolic(x) -> bool:
    return isinstance(x, Index)
