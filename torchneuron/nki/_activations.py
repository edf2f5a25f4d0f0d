"""NKI activation functions the engines have that the compiler has no pointwise op for, built
from its pointwise ops: the compiled code and the interpreter compute them alike."""

import math


def _sigmoid_scaled(e, x, k):
    return e.op("sigmoid", e.op("mul", x, e.literal(k)))


def _softplus(e, x):  # max(x, 0) + log1p(exp(-|x|)), without overflow
    return e.op("add", e.op("maximum", x, e.literal(0.0)), e.op("log1p", e.op("exp", e.op("neg", e.op("abs", x)))))


def _gelu_sigmoid_dx(e, x):  # s + 1.702 x s (1 - s), s = sigmoid(1.702 x)
    s = _sigmoid_scaled(e, x, 1.702)
    return e.op("add", s, e.op("mul", e.op("mul", e.op("mul", x, e.literal(1.702)), s),
                                e.op("sub", e.literal(1.0), s)))


def _gelu_dx(e, x):  # Phi(x) + x phi(x)
    phi = e.op("mul", e.op("exp", e.op("mul", e.op("mul", x, x), e.literal(-0.5))), e.literal(1 / math.sqrt(2 * math.pi)))
    cdf = e.op("mul", e.op("add", e.op("erf", e.op("mul", x, e.literal(1 / math.sqrt(2)))), e.literal(1.0)), e.literal(0.5))
    return e.op("add", cdf, e.op("mul", x, phi))


def _silu_dx(e, x):  # s (1 + x (1 - s))
    s = e.op("sigmoid", x)
    return e.op("mul", s, e.op("add", e.literal(1.0), e.op("mul", x, e.op("sub", e.literal(1.0), s))))


# Activation functions the engines have, built from the compiler's pointwise ops (so the compiled
# code and the interpreter compute them alike).
COMPOSITES = {
    "gelu_apprx_sigmoid": lambda e, x: e.op("mul", x, _sigmoid_scaled(e, x, 1.702)),
    "gelu_apprx_sigmoid_dx": _gelu_sigmoid_dx,
    "gelu_dx": _gelu_dx,
    "silu_dx": _silu_dx,
    "erf_dx": lambda e, x: e.op("mul", e.op("exp", e.op("neg", e.op("mul", x, x))), e.literal(2 / math.sqrt(math.pi))),
    "softplus": _softplus,
    "mish": lambda e, x: e.op("mul", x, e.op("tanh", _softplus(e, x))),
    # the signed input of larger (smaller) magnitude; the other one on ties
    "abs_max": lambda e, x, y: e.op("where", e.op("gt", e.op("abs", x), e.op("abs", y)), x, y),
    "abs_min": lambda e, x, y: e.op("where", e.op("lt", e.op("abs", x), e.op("abs", y)), x, y),
    "prelu": lambda e, x, a: e.op("where", e.op("gt", x, e.literal(0.0)), x, e.op("mul", x, a)),
    "logical_xor": lambda e, x, y: e.op("ne", e.op("ne", x, e.literal(0.0)), e.op("ne", y, e.literal(0.0))),
}
