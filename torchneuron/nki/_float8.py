"""The rounding an on-chip float8 (or tfloat32) tile applies when an engine writes it (both
executors emit it as one more pointwise op, so compiled and interpreted kernels agree)."""
from __future__ import annotations

import math

# float8 tiles on chip hold values of their format: each write is rounded to nearest (ties to even)
# as the DMA to device memory rounds (float8_e4m3fn saturates at 448, infinities too, as torch's cast;
# float8_e5m2 and NKI's IEEE-style float8_e4m3 give infinity from half an ulp past their largest
# value, 57344 and 240). (mantissa bits, exponent bias, largest finite value, what overflows to)
# tfloat32 keeps float32's exponent and 10 mantissa bits.
FLOAT8_FORMATS = {"float8_e4m3fn": (3, 7, 448.0, 448.0), "float8_e5m2": (2, 15, 57344.0, math.inf),
                  "float8_e4m3": (3, 7, 240.0, math.inf),
                  "tfloat32": (10, 127, (2 - 2.0 ** -10) * 2.0 ** 127, math.inf)}


def float8_rounding(e, name: str) -> list:
    """The nodes of expression `e` (an empty _context.Expression) after it rounds source 0 to the
    float8 format `name`."""
    mantissa, bias, largest, overflow = FLOAT8_FORMATS[name]
    v = e.source(0)
    a = e.op("abs", v)
    tiny = e.op("maximum", a, e.literal(2.0 ** (1 - bias)))  # subnormals share the smallest exponent
    lg = e.op("floor", e.op("log2", tiny))  # floor(log2 a), made exact at powers of two
    lg = e.op("sub", lg, e.op("gt", e.op("exp2", lg), tiny))
    lg = e.op("add", lg, e.op("le", e.op("exp2", e.op("add", lg, e.literal(1.0))), tiny))
    quantum = e.op("exp2", e.op("sub", lg, e.literal(float(mantissa))))
    r = e.op("mul", e.op("round", e.op("div", a, quantum)), quantum)
    too_big = e.op("logical_or", e.op("gt", r, e.literal(largest)), e.op("eq", a, e.literal(math.inf)))
    r = e.op("where", too_big, e.literal(overflow), r)
    negative = e.op("logical_or", e.op("lt", v, e.literal(0.0)),  # the sign bit, also of -0
                    e.op("lt", e.op("div", e.literal(1.0), v), e.literal(0.0)))
    e.op("where", negative, e.op("neg", r), r)
    return e.nodes
