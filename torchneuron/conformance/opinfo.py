"""The entries a conformance run goes through: PyTorch's OpInfo database (op_db), each OpInfo
keyed by name and variant, the names a run selects, the dtypes it runs them in and the CI
subset."""

import importlib
import sys
import types


DTYPES = ("float32", "bfloat16", "int64", "float64", "float16", "complex64", "uint16", "uint32",
          "uint64", "bool", "float8_e4m3fn", "float8_e5m2")
# Dtypes whose samples are integers: an op with floating outputs is compared (and arbitrated) as floats.
INTEGRAL_DTYPES = ("int64", "uint16", "uint32", "uint64")
# Dtypes run even where an OpInfo does not list them; a sample CPU refuses is skipped.
UNDECLARED_PROBED = ("uint16", "uint32", "uint64")
MAX_SAMPLES = 8
# Random ops: CPU and device generators differ, so values cannot be compared.
NONDETERMINISTIC = {
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "normal", "uniform",
    "multinomial", "rand_like", "randint_like", "randn_like", "empty", "empty_like",
    "empty_strided", "new_empty", "new_empty_strided", "empty_permuted", "nn.functional.dropout",
    "nn.functional.dropout2d", "nn.functional.dropout3d", "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout", "nn.functional.rrelu", "randint", "randn", "rand",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d", "svd_lowrank",
    "pca_lowrank",
}


CI_OPS = (
    # pointwise unary
    "abs", "neg", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "floor",
    "ceil", "sign", "reciprocal", "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu",
    # pointwise binary / ternary
    "add", "sub", "mul", "div.no_rounding_mode", "pow", "maximum", "minimum", "eq", "lt", "ge",
    "where", "clamp", "atan2", "remainder", "lerp",
    # reductions
    "sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "max.reduction_with_dim", "var",
    "std", "logsumexp", "cumsum", "all", "any",
    # matmul family
    "mm", "bmm", "matmul", "addmm", "mv", "dot", "nn.functional.linear", "einsum",
    # indexing
    "index_select", "gather", "scatter", "index_add", "masked_fill", "take", "__getitem__",
    "index_put", "nn.functional.embedding",
    # shape
    "reshape", "view", "permute", "transpose", "cat", "stack", "squeeze", "unsqueeze", "flatten",
    "expand", "narrow", "split", "t", "flip", "roll", "tril", "triu", "contiguous", "clone",
    # softmax / norm
    "softmax", "log_softmax", "nn.functional.layer_norm", "nn.functional.normalize",
    "nn.functional.cross_entropy",
    # factory-like
    "zeros_like", "ones_like", "full_like", "arange", "new_zeros", "new_full", "fill",
)


_OP_CACHE = {}


def _import_op_db():
    """Imports OpInfo's op_db, stubbing `expecttest` (a test-only dependency) when it is missing."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        stub = types.ModuleType("expecttest")
        stub.TestCase = type("TestCase", (), {})
        sys.modules["expecttest"] = stub
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def op_key(op):
    """Returns the entry name of an OpInfo: `name` or `name.variant_test_name`."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def all_ops(extra=None):
    """Returns {entry name: OpInfo} for op_db plus the ops from an optional `module:attr` spec."""
    if extra in _OP_CACHE:
        return _OP_CACHE[extra]
    ops = {}
    for op in _import_op_db():
        ops.setdefault(op_key(op), op)
    if extra:
        mod, _, attr = extra.partition(":")
        for op in getattr(importlib.import_module(mod), attr or "OPS"):
            ops[op_key(op)] = op
    _OP_CACHE[extra] = ops
    return ops


def select_ops(ops, names=None, limit=None):
    """Returns the entry names to run: those matching `names` (exact or base name), first `limit`."""
    keys = list(ops)
    if names:
        wanted = []
        for name in names:
            hits = [k for k in keys if k == name] or [k for k in keys if ops[k].name == name]
            if not hits:
                raise SystemExit(f"conformance: unknown OpInfo name {name!r}")
            wanted.extend(h for h in hits if h not in wanted)
        keys = wanted
    return keys[:limit] if limit else keys
