"""nki.isa (nisa): the NeuronCore's instructions. The current surface takes the destination
first (`nisa.tensor_copy(dst, src)`); the legacy one returns a new tile (`nisa.tensor_copy(src)`).
Both are accepted: a call is current when it names dst= or starts with the destination."""
from __future__ import annotations

import abc
import math

from . import constants
from . import language as nl
from ._context import Expression, Op, current
from ._dtypes import to_dtype
from ._expr import ProgramTraceError
from ._isa_core import conform, copy_skipping_oob
from ._isa_matrix import check_operands, emit_matmul, transposed_view
from ._isa_vector import accumulate
from ._isa_vector import apply as apply_activation
from ._lockstep import rank_of
from ._ops import _axes, _matched, copy_into, elementwise, memset_tile, op_name, reduce_tile
from ._tensor import ArangeIndex, Mask, NKIError, Tile

# Engines and the other ISA enums, accepted and ignored: one software engine runs every instruction.
from .constants import dge_mode, dma_engine, engine, matmul_perf_mode, nc_version, oob_mode, reduce_cmd  # noqa: E402

tensor_engine, vector_engine, scalar_engine = engine.tensor, engine.vector, engine.scalar
gpsimd_engine, unknown_engine = engine.gpsimd, engine.unknown


def _bind(args, kwargs, names, fn):
    if len(args) > len(names):
        raise NKIError(f"nisa.{fn}: too many positional arguments ({len(args)})")
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        bound[key] = value
    return bound


def _call(fn, args, kwargs, names, current_style):
    """(bound arguments, whether the call is current style with a dst)."""
    # current style: dst named, or leading tiles as the current signature has them, or a positional
    # argument that would take the place of one also given by keyword (nisa.f(dst, data=...))
    new = "dst" in kwargs or current_style(args) or (
        bool(args) and isinstance(args[0], Tile) and any(n in kwargs for n in names[:len(args)]))
    return _bind(args, kwargs, (["dst"] + names) if new else names, fn), new


def _first_tile(args, n=1):
    return len(args) >= n and all(isinstance(a, Tile) for a in args[:n])


def _result(bound, new, shape, dtype, space=None):
    if new:
        return bound["dst"]
    return nl.ndarray(shape, to_dtype(bound.get("dtype") or dtype), space or nl.sbuf)


def _apply(expr: Expression, name: str, x: int) -> int:
    if name == "square":
        return expr.op("mul", x, x)
    if name == "identity":
        return x
    return expr.op(name, x)


def _scalar_operand(expr, sources, value, shape):
    """A scalar, or a [P, 1] tile broadcast along the free axes."""
    if isinstance(value, Tile):
        sources.append(_matched(value, shape))
        return expr.source(len(sources) - 1)
    return expr.integer(value) if not isinstance(value, float) else expr.literal(value)


def _emit_pointwise(dst, sources, expr, name, mask=None, dma=False):
    current().emit(Op("pointwise", dst, sources, expr.nodes, mask=mask, dma=dma, name=f"nisa.{name}"))


# Moving data --------------------------------------------------------------------------------------
def dma_copy(*args, **kwargs):
    """dst = src between any memories (HBM, SBUF)."""
    b = _bind(args, kwargs, ["dst", "src", "mask"], "dma_copy")
    if b.get("oob_mode") == oob_mode.skip:  # skipped where a dynamic index is out of range
        copy_skipping_oob(b["dst"], b["src"], b.get("mask"), "nisa.dma_copy")
        return b["dst"]
    copy_into(b["dst"], b["src"], b.get("mask"), name="nisa.dma_copy")
    return b["dst"]


def dma_transpose(*args, **kwargs):
    """dst = src with its dims permuted by axes on the way (default: first and last swapped, [P, F] -> [F, P])."""
    b, new = _call("dma_transpose", args, kwargs, ["src", "axes", "mask", "dtype"], lambda a: _first_tile(a, 2))
    src = b["src"]
    rank = len(src.shape)
    axes = b.get("axes")
    if axes is None:  # the first and last dims swap: [P, F] -> [F, P], [A, B, C, D] -> [D, B, C, A]
        axes = (rank - 1,) + tuple(range(1, rank - 1)) + (0,) if rank > 1 else (0,)
    axes = tuple(int(a) for a in axes)
    if sorted(axes) != list(range(rank)):
        raise NKIError(f"nisa.dma_transpose: axes {axes} are not a permutation of the {rank} dims of {src.shape}")
    view = Tile(src._buffer, src.offset, [src.sizes[a] for a in axes], [src.strides[a] for a in axes],
                src.checks if rank == 2 else ())
    dst = _result(b, new, view.shape, src.dtype)
    copy_into(dst, view, b.get("mask"), name="nisa.dma_transpose")
    return dst


def tensor_copy(*args, **kwargs):
    """dst = src on chip (rounded to dst's dtype)."""
    b, new = _call("tensor_copy", args, kwargs, ["src", "mask", "dtype", "engine"], lambda a: _first_tile(a, 2))
    dst = _result(b, new, b["src"].shape, b["src"].dtype)
    copy_into(dst, b["src"], b.get("mask"), name="nisa.tensor_copy")
    return dst


def memset(*args, **kwargs):
    """Fills dst with a value (legacy: a new tile of `shape`)."""
    b, new = _call("memset", args, kwargs, ["value", "dtype", "mask", "engine"], lambda a: _first_tile(a))
    if not new:
        b = _bind(args, kwargs, ["shape", "value", "dtype", "mask", "engine"], "memset")
        dst = nl.ndarray(tuple(b["shape"]), b.get("dtype") or nl.float32, nl.sbuf)
    else:
        dst = b["dst"]
    memset_tile(dst, b["value"], b.get("mask"))
    return dst


# Matrix engine ------------------------------------------------------------------------------------
def nc_matmul(*args, **kwargs):
    """dst [M, N] (PSUM, fp32) = stationary [K, M]^T @ moving [K, N]; accumulate=True adds to dst,
    False overwrites it, None (the default) adds where dst holds an open accumulation group."""
    b, new = _call("nc_matmul", args, kwargs, ["stationary", "moving", "is_stationary_onezero", "is_moving_onezero",
                                               "is_transpose", "tile_position", "tile_size", "accumulate", "mask"],
                   lambda a: _first_tile(a, 3))
    stationary, moving = b["stationary"], b["moving"]
    check_operands(stationary, moving)
    dst = _result(b, new, (stationary.shape[1], moving.shape[1]), nl.float32, nl.psum)
    return emit_matmul(dst, stationary, moving, b.get("accumulate"))


def nc_transpose(*args, **kwargs):
    """dst [F, P] = data [P, F] (both at most 128)."""
    b, new = _call("nc_transpose", args, kwargs, ["data", "mask", "dtype", "engine"], lambda a: _first_tile(a, 2))
    view = transposed_view(b["data"])
    dst = _result(b, new, view.shape, b["data"].dtype)
    copy_into(dst, view, b.get("mask"), name="nisa.nc_transpose")
    return dst


# Scalar / vector engines --------------------------------------------------------------------------
def _activation_expr(op, data, bias, scale, shape, relu_param=0.0):
    expr, sources = Expression(), [data]
    x = expr.source(0)
    if isinstance(scale, Tile) or scale != 1.0:
        x = expr.op("mul", x, _scalar_operand(expr, sources, scale if isinstance(scale, Tile) else float(scale), shape))
    if bias is not None:
        x = expr.op("add", x, _scalar_operand(expr, sources, bias if isinstance(bias, Tile) else float(bias), shape))
    apply_activation(expr, sources, op_name(op), x, relu_param, shape)
    return expr, sources


def activation(*args, **kwargs):
    """dst = op(data * scale + bias), scale and bias scalars or [P, 1] tiles (relu_param: nl.prelu's
    slope); reduce_res / reduce_cmd reduce the results by reduce_op (add by default) in the Scalar
    Engine's accumulators."""
    b, new = _call("activation", args, kwargs, ["op", "data", "bias", "scale", "reduce_op", "reduce_res",
                                                "reduce_cmd", "mask", "dtype"], lambda a: bool(a) and isinstance(a[0], Tile))
    data = b["data"]
    dst = _result(b, new, data.shape, data.dtype)
    expr, sources = _activation_expr(b["op"], data, b.get("bias"), b.get("scale", 1.0), data.shape,
                                     b.get("relu_param", 0.0))
    _emit_pointwise(dst, sources, expr, "activation", b.get("mask"))
    accumulate("scalar", b.get("reduce_cmd"), b.get("reduce_op") or nl.add, data, expr, sources, b.get("reduce_res"),
               name="nisa.activation")
    return dst


def _reduce_into(res, op, data, sources, expr, name):
    reduce_op = {"add": "add", "maximum": "max", "minimum": "min"}.get(op_name(op))
    if reduce_op is None:
        raise NKIError(f"nisa.{name}: reduce_op must be add, max or min")
    axes = tuple(range(1, len(data.shape)))
    reduce_tile(reduce_op, data, axes, out=res, expression=expr, sources=sources, name=f"nisa.{name}")


def activation_reduce(*args, **kwargs):
    """activation, with reduce_res = reduce_op of the result along the free axes."""
    b, new = _call("activation_reduce", args, kwargs, ["op", "data", "reduce_op", "reduce_res", "bias", "scale",
                                                       "mask", "dtype"], lambda a: bool(a) and isinstance(a[0], Tile))
    data = b["data"]
    dst = _result(b, new, data.shape, data.dtype)
    expr, sources = _activation_expr(b["op"], data, b.get("bias"), b.get("scale", 1.0), data.shape)
    _emit_pointwise(dst, sources, expr, "activation_reduce", b.get("mask"))
    _reduce_into(b["reduce_res"], b.get("reduce_op") or nl.add, data, sources, expr, "activation_reduce")
    return dst


def tensor_reduce(*args, **kwargs):
    """dst = op over `axis` (free axes only) of data; negate multiplies the result by -1."""
    b, new = _call("tensor_reduce", args, kwargs, ["op", "data", "axis", "negate", "keepdims", "mask", "dtype"],
                   lambda a: bool(a) and isinstance(a[0], Tile))
    data = b["data"]
    reduce_op = {"add": "add", "maximum": "max", "minimum": "min"}.get(op_name(b["op"]))
    if reduce_op is None:
        raise NKIError("nisa.tensor_reduce: op must be an add, max or min")
    axes = _axes(b["axis"], len(data.shape))
    if 0 in axes:
        raise NKIError("nisa.tensor_reduce: cannot reduce along the partition axis (axis 0); transpose the tile first "
                       "(nisa.nc_transpose) or reduce along the free axes")
    scale = -1.0 if b.get("negate") else 1.0
    if new:
        return reduce_tile(reduce_op, data, axes, mask=b.get("mask"), scale=scale, out=b["dst"], name="nisa.tensor_reduce")
    return reduce_tile(reduce_op, data, axes, to_dtype(b.get("dtype") or data.dtype), bool(b.get("keepdims")),
                       b.get("mask"), scale=scale, name="nisa.tensor_reduce")


def tensor_tensor(*args, **kwargs):
    """dst = op(data1, data2) elementwise."""
    b, new = _call("tensor_tensor", args, kwargs, ["data1", "data2", "op", "mask", "dtype", "engine"],
                   lambda a: _first_tile(a, 3))
    name = op_name(b["op"])
    d1, d2 = b["data1"], b["data2"]
    if new:
        dst, d1, d2 = conform(b["dst"], d1, d2)
        elementwise(name, d1, d2, mask=b.get("mask"), out=dst)
        return b["dst"]
    return elementwise(name, d1, d2, dtype=b.get("dtype"), mask=b.get("mask"))


def _scalar_chain(expr, sources, x, shape, op, operand, reverse):
    name = op_name(op)
    if name in nl._UNARY_OPS:  # a one-operand op (nl.abs) as an ALU op: it applies to the data, the operand unused
        return _apply(expr, name, x)
    y = _scalar_operand(expr, sources, operand, shape)
    return expr.op(name, y, x) if reverse else expr.op(name, x, y)


def tensor_scalar(*args, **kwargs):
    """dst = (data op0 operand0) op1 operand1; operands scalars or [P, 1] tiles."""
    b, new = _call("tensor_scalar", args, kwargs, ["data", "op0", "operand0", "reverse0", "op1", "operand1", "reverse1",
                                                   "mask", "dtype", "engine"],
                   lambda a: _first_tile(a, 2))
    data = b["data"]
    dst = _result(b, new, data.shape, data.dtype)
    if list(data.shape) != list(dst.shape):  # a [P] tile into a [P, 1] destination
        data = data.expanded(dst.shape)
    expr, sources = Expression(), [data]
    x = _scalar_chain(expr, sources, expr.source(0), data.shape, b["op0"], b["operand0"], b.get("reverse0", False))
    if b.get("op1") is not None:
        _scalar_chain(expr, sources, x, data.shape, b["op1"], b["operand1"], b.get("reverse1", False))
    _emit_pointwise(dst, sources, expr, "tensor_scalar", b.get("mask"))
    return dst


def tensor_scalar_reduce(*args, **kwargs):
    """dst = data op0 operand0 (a scalar or [P, 1] tile), and reduce_res = reduce_op of dst along the free axes."""
    b, new = _call("tensor_scalar_reduce", args, kwargs, ["data", "op0", "operand0", "reduce_op", "reduce_res",
                                                          "reverse0", "reduce_cmd", "reduce_init", "reduce_res_negate",
                                                          "mask", "dtype"], lambda a: _first_tile(a, 2))
    data = b["data"]
    dst = _result(b, new, data.shape, data.dtype)
    expr, sources = Expression(), [data]
    _scalar_chain(expr, sources, expr.source(0), data.shape, b["op0"], b["operand0"], b.get("reverse0", False))
    _emit_pointwise(dst, sources, expr, "tensor_scalar_reduce", b.get("mask"))
    accumulate("vector", b.get("reduce_cmd", reduce_cmd.reset_reduce), b.get("reduce_op") or nl.add, data, expr,
               sources, b.get("reduce_res"), b.get("reduce_init"), bool(b.get("reduce_res_negate")),
               name="nisa.tensor_scalar_reduce")
    return dst


def scalar_tensor_tensor(*args, **kwargs):
    """dst = (data op0 operand0) op1 operand1: operand0 a scalar or [P, 1] tile, operand1 a tile."""
    b, new = _call("scalar_tensor_tensor", args, kwargs, ["data", "op0", "operand0", "op1", "operand1", "reverse0",
                                                          "reverse1", "mask", "dtype"], lambda a: _first_tile(a, 2))
    data, operand1 = b["data"], b["operand1"]
    dst = _result(b, new, data.shape, data.dtype)
    expr, sources = Expression(), [data]
    x = _scalar_chain(expr, sources, expr.source(0), data.shape, b["op0"], b["operand0"], b.get("reverse0", False))
    sources.append(operand1.expanded(data.shape))
    y = expr.source(len(sources) - 1)
    name = op_name(b["op1"])
    expr.op(name, y, x) if b.get("reverse1") else expr.op(name, x, y)
    _emit_pointwise(dst, sources, expr, "scalar_tensor_tensor", b.get("mask"))
    return dst


def tensor_tensor_scan(*args, **kwargs):
    """dst[:, i] = op1(op0(dst[:, i - 1], data0[:, i]), data1[:, i]), dst[:, -1] = initial (a scalar or a
    [P, 1] tile)."""
    b, new = _call("tensor_tensor_scan", args, kwargs, ["data0", "data1", "initial", "op0", "op1", "reverse0",
                                                        "reverse1", "mask", "dtype"], lambda a: _first_tile(a, 3))
    data0, data1 = b["data0"], b["data1"]
    if len(data0.shape) != 2 or data0.shape != data1.shape:
        raise NKIError(f"nisa.tensor_tensor_scan takes two 2-D tiles of one shape, got {data0.shape} and {data1.shape}")
    initial = b.get("initial", 0.0)
    dst = _result(b, new, data0.shape, data0.dtype)
    expr = Expression()
    carry, a, c = expr.carry(), expr.source(0), expr.source(1)
    sources = [data0, data1]
    if isinstance(initial, Tile):  # a [P, 1] tile: each partition's value before its first element
        sources.append(initial.expanded(data0.shape))
        at_start = expr.op("eq", expr.index(1), expr.literal(0.0))
        carry = expr.op("where", at_start, expr.source(2), carry)
        initial = 0.0
    first = expr.op(op_name(b["op0"]), *((a, carry) if b.get("reverse0") else (carry, a)))
    expr.op(op_name(b["op1"]), *((c, first) if b.get("reverse1") else (first, c)))
    current().emit(Op("scan", dst, sources, expr.nodes, initial=float(initial), name="nisa.tensor_tensor_scan"))
    return dst


def reciprocal(*args, **kwargs):
    """dst = 1 / data."""
    b, new = _call("reciprocal", args, kwargs, ["data", "mask", "dtype"], lambda a: _first_tile(a, 2))
    if new:
        return elementwise("reciprocal", b["data"], mask=b.get("mask"), out=b["dst"])
    return elementwise("reciprocal", b["data"], dtype=b.get("dtype"), mask=b.get("mask"))


def _affine_value(expr, affine):
    value = expr.integer(affine.start)
    for axis, coeff in affine.coeffs.items():
        if coeff:
            value = expr.op("add", value, expr.op("mul", expr.index(axis), expr.literal(coeff)))
    return value


def _iota_pattern(b, new):
    """iota(dst, pattern=[[step, num], ...], offset, channel_multiplier): each element gets
    offset + partition * channel_multiplier + sum(step * i) over the pattern's (free) dims."""
    if not new:
        raise NKIError("nisa.iota(pattern=...) writes into dst=")
    dst, pattern = b["dst"], [list(p) for p in b["pattern"]]
    expr = Expression()
    _pattern_value(expr, dst, pattern, b.get("channel_multiplier", 0), b.get("offset"))
    _emit_pointwise(dst, [], expr, "iota", b.get("mask"))
    return dst


def iota(*args, **kwargs):
    """dst = an affine expression of the tile's indices (nl.arange / nl.mgrid terms), or of an
    access pattern (pattern=)."""
    b, new = _call("iota", args, kwargs, ["expr", "offset", "mask", "dtype"], lambda a: _first_tile(a))
    if new and isinstance(b.get("expr"), (list, tuple)):  # current NKI: iota(dst, pattern, offset, ...)
        b["pattern"] = b.pop("expr")
    if b.get("pattern") is not None:
        return _iota_pattern(b, new)
    affine = b["expr"]
    if not isinstance(affine, ArangeIndex):
        raise NKIError("nisa.iota takes an expression of nl.arange / nl.mgrid indices")
    shape = [1] * affine.ndim
    for axis, size in affine.sizes.items():
        shape[axis] = size
    dst = _result(b, new, tuple(shape), nl.int32)
    expr = Expression()
    value = _affine_value(expr, affine)
    if b.get("offset") is not None:
        expr.op("add", value, expr.integer(b["offset"]))
    _emit_pointwise(dst, [], expr, "iota", b.get("mask"))
    return dst


def _predicate(expr, mask: Mask):
    result = None
    for affine, op in mask.predicates:
        test = expr.op(op, _affine_value(expr, affine), expr.literal(0.0))
        result = test if result is None else expr.op("logical_and", result, test)
    return result


def affine_select(*args, **kwargs):
    """dst = on_true_tile where the affine predicate of the indices holds, else on_false_value."""
    b, new = _call("affine_select", args, kwargs, ["pred", "on_true_tile", "on_false_value", "mask", "dtype"],
                   lambda a: _first_tile(a))
    if b.get("pattern") is not None:
        return _affine_select_pattern(b, new)
    on_true, pred = b["on_true_tile"], b["pred"]
    if not isinstance(pred, Mask):
        raise NKIError("nisa.affine_select: pred must compare nl.arange / nl.mgrid expressions (i_p >= i_f)")
    dst = _result(b, new, on_true.shape, on_true.dtype)
    expr, sources = Expression(), [on_true.expanded(dst.shape)]
    test = _predicate(expr, pred)
    expr.op("where", test, expr.source(0), expr.literal(float(b["on_false_value"])))
    _emit_pointwise(dst, sources, expr, "affine_select", b.get("mask"))
    return dst


def _pattern_value(expr, dst, pattern, channel_multiplier, offset):
    """offset + partition * channel_multiplier + sum(step * i) over the free dims of an access
    pattern [[step, num], ...], laid out row-major over dst's free elements."""
    if math.prod(n for _, n in pattern) != math.prod(dst.shape[1:]):
        raise NKIError(f"nisa: pattern {pattern} does not cover the free elements of dst {dst.shape}")
    flat, step = None, 1
    for d in range(len(dst.shape) - 1, 0, -1):
        term = expr.op("mul", expr.index(d), expr.literal(step))
        flat = term if flat is None else expr.op("add", flat, term)
        step *= dst.shape[d]
    value = expr.op("mul", expr.index(0), expr.literal(channel_multiplier))
    inner, total = 1, math.prod(dst.shape[1:])
    for s, n in reversed(pattern):
        if flat is not None and s and n > 1:
            digit = expr.op("floor", expr.op("div", flat, expr.literal(inner))) if inner > 1 else flat
            if inner * n < total:
                digit = expr.op("sub", digit, expr.op("mul", expr.op("floor", expr.op("div", digit, expr.literal(n))),
                                                      expr.literal(n)))
            value = expr.op("add", value, expr.op("mul", digit, expr.literal(s)))
        inner *= n
    if offset is not None:
        value = expr.op("add", value, expr.integer(offset))
    return value


def _affine_select_pattern(b, new):
    """dst = on_true_tile where cmp_op(offset + partition * channel_multiplier + pattern, 0), else on_false_value."""
    if not new:
        raise NKIError("nisa.affine_select(pattern=...) writes into dst=")
    dst, on_true = b["dst"], b["on_true_tile"]
    expr, sources = Expression(), [on_true.expanded(dst.shape)]
    value = _pattern_value(expr, dst, [list(p) for p in b["pattern"]], b.get("channel_multiplier", 0), b.get("offset"))
    test = expr.op(op_name(b.get("cmp_op") or nl.greater_equal), value, expr.literal(0.0))
    expr.op("where", test, expr.source(0), expr.literal(float(b["on_false_value"])))
    _emit_pointwise(dst, sources, expr, "affine_select", b.get("mask"))
    return dst


def select(*args, **kwargs):
    """dst = on_true where pred (a tile) is non-zero, else on_false."""
    b, new = _call("select", args, kwargs, ["pred", "on_true", "on_false", "mask", "dtype"], lambda a: _first_tile(a, 4))
    if new:
        return elementwise("where", b["pred"], b["on_true"], b["on_false"], mask=b.get("mask"), out=b["dst"])
    return nl.where(b["pred"], b["on_true"], b["on_false"], dtype=b.get("dtype"), mask=b.get("mask"))


# Statistics and top-k ------------------------------------------------------------------------------
def bn_stats(*args, **kwargs):
    """Per-partition statistics of data [P, F] for bn_aggr, a [P, 6] tile: (count, mean, variance *
    count) of the even elements, then of the odd ones."""
    b, new = _call("bn_stats", args, kwargs, ["data", "mask", "dtype"], lambda a: _first_tile(a, 2))
    data = b["data"]
    if len(data.shape) != 2:
        raise NKIError(f"nisa.bn_stats takes a 2-D tile, got {data.shape}")
    dst = _result(b, new, (data.shape[0], 6), nl.float32)
    p, f = data.shape
    for half, first in ((0, 0), (3, 1)):
        count = len(range(first, f, 2))
        memset_tile(dst[:, half:half + 1], float(count))
        if count == 0:  # one element: no odd ones
            memset_tile(dst[:, half + 1:half + 3], 0.0)
            continue
        part = Tile(data._buffer, data.offset + first * data.strides[1], [p, count], [data.strides[0], 2 * data.strides[1]],
                    data.checks)
        mean = dst[:, half + 1:half + 2]
        reduce_tile("add", part, (1,), out=mean, scale=1.0 / count, name="nisa.bn_stats")
        expr, sources = Expression(), [part, mean.expanded(part.shape)]
        diff = expr.op("sub", expr.source(0), expr.source(1))
        expr.op("mul", diff, diff)
        reduce_tile("add", part, (1,), out=dst[:, half + 2:half + 3], expression=expr, sources=sources,
                    name="nisa.bn_stats")
    return dst


def bn_aggr(*args, **kwargs):
    """Mean and variance [P, 2] from (count, mean, variance * count) triples along the free axis
    [P, 3k] (bn_stats results side by side)."""
    b, new = _call("bn_aggr", args, kwargs, ["data", "mask", "dtype"], lambda a: _first_tile(a, 2))
    data = b["data"]
    if len(data.shape) != 2 or data.shape[1] % 3:
        raise NKIError(f"nisa.bn_aggr takes (count, mean, variance * count) triples [P, 3k], got {data.shape}")
    dst = _result(b, new, (data.shape[0], 2), nl.float32)
    counts, means, spreads = data[:, 0::3], data[:, 1::3], data[:, 2::3]
    total = nl.sum(counts, axis=1, keepdims=True, dtype=nl.float32)
    weighted = nl.ndarray((data.shape[0], 1), nl.float32)
    reduce_tile("add", counts, (1,), out=weighted, expression=_product(), sources=[counts, means])
    squares = nl.ndarray((data.shape[0], 1), nl.float32)  # sum of spread + count * mean^2: count * E[x^2]
    expr = Expression()
    m = expr.source(1)
    expr.op("add", expr.source(2), expr.op("mul", expr.source(0), expr.op("mul", m, m)))
    reduce_tile("add", counts, (1,), out=squares, expression=expr, sources=[counts, means, spreads])
    mean = nl.divide(weighted, total)
    copy_into(dst[:, 0:1], mean)
    copy_into(dst[:, 1:2], nl.subtract(nl.divide(squares, total), nl.multiply(mean, mean)))
    return dst


def _product():
    expr = Expression()
    expr.op("mul", expr.source(0), expr.source(1))
    return expr


def max8(*args, **kwargs):
    """dst [P, 8] = the 8 largest values of each partition of src [P, F], descending."""
    b, new = _call("max8", args, kwargs, ["src", "mask", "dtype"], lambda a: _first_tile(a, 2))
    src = b["src"]
    if len(src.shape) != 2 or src.shape[1] < 8:
        raise NKIError(f"nisa.max8 takes a 2-D tile with at least 8 elements per partition, got {src.shape}")
    dst = _result(b, new, (src.shape[0], 8), src.dtype)
    current().emit(Op("max8", dst, [src], mask=b.get("mask"), name="nisa.max8"))
    return dst


def nc_find_index8(*args, **kwargs):
    """dst [P, 8] = the index in data [P, F] of each of vals [P, 8] (first unused match)."""
    b, new = _call("nc_find_index8", args, kwargs, ["data", "vals", "mask", "dtype"], lambda a: _first_tile(a, 3))
    data, vals = b["data"], b["vals"]
    if len(data.shape) != 2 or tuple(vals.shape) != (data.shape[0], 8):
        raise NKIError(f"nisa.find_index8: data [P, F] and vals [P, 8], got {data.shape} and {vals.shape}")
    dst = _result(b, new, (data.shape[0], 8), nl.uint32)
    current().emit(Op("find_index8", dst, [data, vals], name="nisa.nc_find_index8"))
    return dst


find_index8 = nc_find_index8  # the legacy name


# Between the cores of a multi-core (LNC2) launch ------------------------------------------------------
def core_barrier(*args, **kwargs):
    """Waits until the programs `cores` (all of the grid's) have reached it, so the writes to `data`
    before it are seen after it (programs in lockstep); with one program there is none to wait for."""
    b = _bind(args, kwargs, ["data", "cores", "engine"], "core_barrier")
    cores, count = b.get("cores"), current().num_programs(None)
    if not isinstance(b.get("data"), Tile):
        raise NKIError(f"nisa.core_barrier: data must be the tensor the programs share, got {b.get('data')!r}")
    try:
        ids = sorted(int(c) for c in cores)
    except (TypeError, ValueError):
        raise NKIError(f"nisa.core_barrier: cores must be a tuple of program numbers, got {cores!r}") from None
    if len(set(ids)) != len(ids) or (count > 1 and ids != list(range(count))):
        raise NKIError(f"nisa.core_barrier: cores {tuple(cores)} must name every program of the grid once "
                       f"(0 .. {count - 1}): a barrier among some of them is not supported")
    _sync("core_barrier")


def sendrecv(*args, **kwargs):
    """Sends src to the program send_to_rank and receives into dst what recv_from_rank sends (the
    programs of a grid exchange tiles, each a barrier)."""
    b = _bind(args, kwargs, ["src", "dst", "send_to_rank", "recv_from_rank", "pipe_id"], "sendrecv")
    payload = (b["src"], b["dst"], rank_of(b["send_to_rank"]), rank_of(b["recv_from_rank"]))
    if tuple(payload[0].shape) != tuple(payload[1].shape) and \
            math.prod(payload[0].shape) != math.prod(payload[1].shape):
        raise NKIError(f"nisa.sendrecv: src {payload[0].shape} and dst {payload[1].shape} differ in size")
    if current().num_programs(None) == 1:
        raise NKIError("nisa.sendrecv: the kernel runs as one program (launch it on a grid, kernel[2](...), for its "
                       "programs to exchange tiles)")
    _sync("sendrecv", payload)


def _sync(kind, payload=None):
    ctx = current()
    if ctx.num_programs(None) == 1:
        return
    lockstep = getattr(ctx, "lockstep", None)
    if lockstep is None:  # a compiled trace with symbolic program ids: traced again in lockstep
        raise ProgramTraceError(f"nisa.{kind} between the programs of a grid")
    lockstep.sync(kind, payload)


class NkiInstruction(abc.ABC):
    """The handle of a traced instruction: what an ISA call returns (its destination tile), with
    .depends_on(*producers)."""

    def depends_on(self, *producers):
        """Runs after the producers (instructions run in program order)."""
        return self


NkiInstruction.register(Tile)


def get_nc_version():
    """The NeuronCore generation torchneuron models (its SBUF and PSUM sizes are gen2's and gen3's)."""
    return nc_version.gen3


from ._isa_registers import VirtualRegister, register_alloc, register_load, register_move, register_store  # noqa: E402,F401
from ._isa_mx import nc_matmul_mx, quantize_mx  # noqa: E402,F401
from ._isa_core import (dma_compute, local_gather, nc_match_replace8, nc_n_gather, nonzero_with_count, range_select,  # noqa: E402,F401
                        select_reduce, tensor_copy_predicated, tensor_partition_reduce)
from ._isa_partitions import nc_stream_shuffle  # noqa: E402,F401
from ._isa_rng import rand2, rand_get_state, rand_set_state, rng, set_rng_seed  # noqa: E402,F401
from ._isa_vector import activate2, dropout, exponential, sequence_bounds, tensor_scalar_cumulative, topk  # noqa: E402,F401

__all__ = [n for n in dir() if not n.startswith("_") and n not in
           ("annotations", "abc", "nl", "Expression", "Op", "current", "ArangeIndex", "Mask", "NKIError", "Tile", "to_dtype",
            "constants", "math", "ProgramTraceError", "check_operands", "emit_matmul", "transposed_view", "conform", "copy_skipping_oob", "rank_of", "copy_into", "accumulate", "apply_activation",
            "elementwise", "memset_tile", "op_name", "reduce_tile")]
