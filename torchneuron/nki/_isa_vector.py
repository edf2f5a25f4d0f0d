"""nki.isa instructions of the Vector, Scalar and GpSimd engines added with NKI 0.3: exponential,
tensor_scalar_cumulative, activate2, sequence_bounds and dropout, and the engines' accumulator
registers (one fp32 value per lane) that reduce_cmd drives. Built from the tile ops both executors
share, so compiled and interpreted kernels agree."""
from __future__ import annotations

from ._context import Expression, Op, current
from ._dtypes import DTYPES
from ._isa_core import _bind, _rows, _scratch
from ._isa_rng import STATE, _draw
from ._ops import _matched, copy_into, elementwise, memset_tile, op_name, reduce_tile
from ._tensor import PARTITION_MAX, SPACES, Buffer, NKIError, Tile
from .constants import reduce_cmd

_FLOAT32 = DTYPES["float32"]
_REDUCE = {"add": "add", "sub": "add", "maximum": "max", "minimum": "min", "mul": "mul"}
_COMBINE = {"add": "add", "max": "maximum", "min": "minimum", "mul": "mul"}
_IDENTITY = {"add": 0.0, "sub": 0.0, "mul": 1.0, "maximum": float("-inf"), "minimum": float("inf")}


# Accumulator registers -----------------------------------------------------------------------------
def _registers(engine: str, partitions: int) -> Tile:
    """This program's accumulator registers of `engine` ("vector" or "scalar"), [partitions, 1]. They
    start undefined (NaN), as the hardware leaves them: a kernel resets them (reset_reduce)."""
    ctx = current()
    owner = getattr(ctx, "pid", None)  # programs taking turns (interpreted grids, lockstep traces): their own
    registers = ctx.__dict__.setdefault("_accumulators", {})
    if (engine, owner) not in registers:
        buffer = Buffer(ctx.name(f"{engine}_accumulators"), SPACES["sbuf"], _FLOAT32, (PARTITION_MAX, 1))
        ctx.allocate_unchecked(buffer)  # registers, not SBUF capacity
        registers[(engine, owner)] = buffer
    return Tile(registers[(engine, owner)], 0, [partitions, 1], [1, 1])


def _command(value):
    if value is None:
        return reduce_cmd.idle
    if isinstance(value, reduce_cmd):
        return value
    try:
        return reduce_cmd(value) if isinstance(value, int) else reduce_cmd[str(value).rsplit(".", 1)[-1]]
    except (KeyError, ValueError):
        raise NKIError(f"NKI: {value!r} is not a nisa.reduce_cmd") from None


def accumulate(engine, command, reduce_op, data, expr, sources, reduce_res=None, init=None, negate=False, name=""):
    """Drives the accumulator registers with `command` over the values expr gives for data (reduced
    along its free axes by reduce_op: add, max, min), then copies them into reduce_res if given. A
    reduce_res with the idle command (the default of most instructions) reads a fresh reduction, as
    reset_reduce would: idle leaves the registers undefined on hardware."""
    command = _command(command)
    if command is reduce_cmd.idle and reduce_res is not None:
        command = reduce_cmd.reset_reduce
    if command is reduce_cmd.idle:
        return
    reduce = {"add": "add", "maximum": "max", "minimum": "min"}.get(op_name(reduce_op) if reduce_op else "add")
    if reduce is None:
        raise NKIError(f"{name}: reduce_op must be add, maximum or minimum, got {reduce_op!r}")
    registers = _registers(engine, data.sizes[0])
    axes = tuple(range(1, len(data.shape)))
    if command is reduce_cmd.reset:
        memset_tile(registers, {"add": 0.0, "max": float("-inf"), "min": float("inf")}[reduce])
    elif command is reduce_cmd.reset_reduce:
        reduce_tile(reduce, data, axes, out=registers, expression=expr, sources=sources, name=name)
    else:
        if command is reduce_cmd.load_reduce:
            _set(registers, 0.0 if init is None else init)
        partial = _scratch((data.sizes[0], 1))
        reduce_tile(reduce, data, axes, out=partial, expression=expr, sources=sources, name=name)
        elementwise(_COMBINE[reduce], registers, partial, out=registers)
    if reduce_res is not None:
        if negate:
            elementwise("neg", registers, out=reduce_res)
        else:
            copy_into(reduce_res, registers, name=name)


def _set(target: Tile, value) -> None:
    if isinstance(value, Tile):
        copy_into(target, value)
    else:
        memset_tile(target, float(value))


def _scalar(expr, sources, value, shape):
    """A float, or a [P, 1] tile broadcast along the free axes, as an expression node."""
    if isinstance(value, Tile):
        sources.append(_matched(value, shape))
        return expr.source(len(sources) - 1)
    return expr.literal(float(value))


def _stage(expr, sources, x, op, operand, reverse, shape):
    """x op operand (operand op x when reversed); None or nl.bypass leave x as it is."""
    if op is None:
        return x
    name = op_name(op)
    if name == "identity":
        return x
    y = _scalar(expr, sources, operand, shape)
    return expr.op(name, y, x) if reverse else expr.op(name, x, y)


# Instructions ---------------------------------------------------------------------------------------
def exponential(*args, **kwargs):
    """dst = exp(src - max_value) (a float or a [P, 1] tile); reduce_cmd / reduce_res sum the results
    in the Vector Engine's accumulators (reduce_init: the value load_reduce starts from)."""
    b = _bind(args, kwargs, ["dst", "src", "max_value", "reduce_res", "reduce_cmd", "reduce_init"], "exponential")
    dst, src = b["dst"], b["src"]
    expr, sources = Expression(), [src]
    expr.op("exp", expr.op("sub", expr.source(0), _scalar(expr, sources, b.get("max_value", 0.0), src.shape)))
    current().emit(Op("pointwise", _matched(dst, src.shape) if dst.shape != src.shape else dst, sources, expr.nodes,
                      name="nisa.exponential"))
    accumulate("vector", b.get("reduce_cmd"), None, src, expr, sources, b.get("reduce_res"), b.get("reduce_init"),
               name="nisa.exponential")
    return dst


def tensor_scalar_cumulative(*args, **kwargs):
    """dst[:, i] = reg = op1(op0(src[:, i], imm0), reg) along the free elements of each partition;
    reg starts at op1's identity (reset_reduce, the default), at imm1 (load_reduce) or at the Vector
    Engine's accumulator (reduce), and is left there."""
    b = _bind(args, kwargs, ["dst", "src", "op0", "op1", "imm0", "imm1", "reduce_cmd", "reverse0"],
              "tensor_scalar_cumulative")
    src, dst = _rows(b["src"]), _rows(b["dst"])
    if src.shape != dst.shape:
        raise NKIError(f"nisa.tensor_scalar_cumulative: dst {b['dst'].shape} and src {b['src'].shape} differ")
    op1 = op_name(b["op1"])
    if op1 not in _IDENTITY:
        raise NKIError(f"nisa.tensor_scalar_cumulative: op1 must be add, subtract, multiply, maximum or minimum, "
                       f"got {op1}")
    command = _command(b.get("reduce_cmd", reduce_cmd.reset_reduce))
    p, f = src.shape
    registers = _registers("vector", p)
    values = _scratch((p, f))  # op0's results, then the scan over them
    expr, sources = Expression(), [src]
    _stage(expr, sources, expr.source(0), b["op0"], b["imm0"], b.get("reverse0", False), src.shape)
    current().emit(Op("pointwise", values, sources, expr.nodes, name="nisa.tensor_scalar_cumulative"))
    expr, sources, initial = Expression(), [values, values], _IDENTITY[op1]
    carry = expr.carry()
    start = {reduce_cmd.load_reduce: b.get("imm1"), reduce_cmd.reduce: registers}.get(command)
    if isinstance(start, Tile):  # each partition's value before its first element
        sources.append(_matched(start, src.shape))
        carry = expr.op("where", expr.op("eq", expr.index(1), expr.literal(0.0)), expr.source(2), carry)
    elif start is not None:
        initial = float(start)
    expr.op(op1, expr.source(0), carry)
    scratch = _scratch((p, f))
    current().emit(Op("scan", scratch, sources, expr.nodes, initial=initial, name="nisa.tensor_scalar_cumulative"))
    copy_into(dst, scratch, name="nisa.tensor_scalar_cumulative")
    copy_into(registers, scratch[:, f - 1:f], name="nisa.tensor_scalar_cumulative")
    return b["dst"]


def activate2(*args, **kwargs):
    """dst = op((data op0 imm0) op1 imm1) (nl.bypass skips a stage; reverse0/1 swap its operands;
    relu_param is nl.prelu's slope); reduce_cmd / reduce_res reduce the results by reduce_op in the
    Scalar Engine's accumulators."""
    b = _bind(args, kwargs, ["dst", "op", "data", "imm0", "imm1", "op0", "op1", "relu_param", "reverse0", "reverse1",
                             "reduce_op", "reduce_res", "reduce_cmd"], "activate2")
    dst, data = b["dst"], b["data"]
    expr, sources = Expression(), [data]
    x = _stage(expr, sources, expr.source(0), b.get("op0"), b.get("imm0"), b.get("reverse0", False), data.shape)
    x = _stage(expr, sources, x, b.get("op1"), b.get("imm1"), b.get("reverse1", False), data.shape)
    apply(expr, sources, op_name(b["op"]), x, b.get("relu_param", 0.0), data.shape)
    current().emit(Op("pointwise", _matched(dst, data.shape) if dst.shape != data.shape else dst, sources, expr.nodes,
                      name="nisa.activate2"))
    accumulate("scalar", b.get("reduce_cmd"), b.get("reduce_op"), data, expr, sources, b.get("reduce_res"),
               name="nisa.activate2")
    return dst


def apply(expr, sources, name, x, alpha, shape):
    """The activation function `name` of node x (nl.prelu with slope alpha)."""
    if name == "prelu":
        return expr.op("prelu", x, _scalar(expr, sources, alpha, shape))
    if name == "square":
        return expr.op("mul", x, x)
    return x if name == "identity" else expr.op(name, x)


def sequence_bounds(*args, **kwargs):
    """dst [1, 2, N]: for each element of segment_ids [1, N], the first (dst[0, 0]) and last (dst[0, 1])
    index of its run of equal ids; padding (id 0) gets N and -1."""
    b = _bind(args, kwargs, ["dst", "segment_ids"], "sequence_bounds")
    ids, dst = b["segment_ids"], b["dst"]
    if len(ids.shape) != 2 or ids.shape[0] != 1 or tuple(dst.shape) != (1, 2, ids.shape[1]):
        raise NKIError(f"nisa.sequence_bounds: segment_ids [1, N] and dst [1, 2, N], got {ids.shape} and {dst.shape}")
    n = ids.shape[1]
    before, after = _scratch((1, n)), _scratch((1, n))  # ids[j - 1] and ids[j + 1], -1 past the ends
    memset_tile(before, -1.0)
    memset_tile(after, -1.0)
    if n > 1:
        copy_into(before[:, 1:n], ids[:, 0:n - 1], name="nisa.sequence_bounds")
        copy_into(after[:, 0:n - 1], ids[:, 1:n], name="nisa.sequence_bounds")
    rows = [Tile(dst._buffer, dst.offset + k * dst.strides[1], [1, n], [dst.strides[0], dst.strides[2]])
            for k in (0, 1)]
    for row, neighbour, reduce, test, far, padding in ((rows[0], before, "max", "le", -1.0, float(n)),
                                                       (rows[1], after, "min", "ge", float(n), -1.0)):
        bound = _scratch((1, n))
        block = max(1, (1 << 22) // n)
        for i0 in range(0, n, block):  # bound[i] = the nearest run edge j at or before (after) i
            m = min(block, n - i0)
            ids_j = Tile(ids._buffer, ids.offset, [1, m, n], [ids.strides[0], 0, ids.strides[1]])
            neighbour_j = Tile(neighbour._buffer, neighbour.offset, [1, m, n], [neighbour.strides[0], 0, 1])
            expr = Expression()
            j, i = expr.index(2), expr.op("add", expr.index(1), expr.literal(float(i0)))
            edge = expr.op("logical_and", expr.op(test, j, i), expr.op("ne", expr.source(0), expr.source(1)))
            expr.op("where", edge, j, expr.literal(far))
            out = Tile(bound._buffer, bound.offset + i0, [1, m, 1], [n, 1, 0])
            reduce_tile(reduce, ids_j, (2,), out=out, expression=expr, sources=[ids_j, neighbour_j],
                        name="nisa.sequence_bounds")
        expr = Expression()
        expr.op("where", expr.op("eq", expr.source(0), expr.literal(0.0)), expr.literal(padding), expr.source(1))
        current().emit(Op("pointwise", row, [ids, bound], expr.nodes, name="nisa.sequence_bounds"))
    return dst


def dropout(*args, **kwargs):
    """dst = data, with each element replaced by 0 with probability prob (a float or a [P, 1] tile), drawn
    from nisa.rand2's generator; kept elements are not rescaled."""
    b = _bind(args, kwargs, ["dst", "data", "prob"], "dropout")
    dst, data, prob = b["dst"], b["data"], b["prob"]

    def finish(builder, uniform, _sources):
        extra = [_matched(data, dst.shape)]
        if isinstance(prob, Tile):
            extra.append(_matched(prob, dst.shape))
            threshold = builder.source(STATE + 1)
        else:
            threshold = builder.lit(float(prob))
        builder.f("where", builder.f("ge", uniform, threshold), builder.source(STATE), builder.lit(0.0))
        return extra
    return _draw(dst, "nisa.dropout", finish)


GROUP = 16  # a GpSimd core's partitions: topk solves one problem per group


def topk(*args, **kwargs):
    """The k = val_dst.shape[1] largest of n values per 16-partition group, read as a snake (element e
    at partition e % 16, column e // 16): result j (largest first, ties by index) goes to partition
    j % 16, column j // 16 of val_dst, its index e in the group's snake to idx_dst; the other columns
    are left as they are. Ranks are counted over all pairs (n * n work per group)."""
    b = _bind(args, kwargs, ["val_dst", "idx_dst", "src", "n", "sorted"], "topk")
    src, val_dst, idx_dst, n = b["src"], b["val_dst"], b["idx_dst"], int(b["n"])
    if len(src.shape) != 2 or len(val_dst.shape) != 2 or tuple(idx_dst.shape) != tuple(val_dst.shape):
        raise NKIError(f"nisa.topk: src [P, F], val_dst and idx_dst [P, k], got {src.shape}, {val_dst.shape} and "
                       f"{idx_dst.shape}")
    p, columns, k = src.shape[0], -(-n // GROUP), val_dst.shape[1]
    if p % GROUP or val_dst.shape[0] != p or not 8 <= n < 65536 or not 1 <= k <= n or src.shape[1] < columns:
        raise NKIError(f"nisa.topk: partitions {p} (a multiple of {GROUP}), 8 <= n = {n} < 65536, 1 <= k = {k} <= n "
                       f"and src's free size {src.shape[1]} >= ceil(n / 16) = {columns}")
    groups = p // GROUP

    def snake(t, outer):  # [groups, columns, 16] over the snake, then `outer` more dims broadcast
        s0, s1 = t.strides
        sizes, strides = [groups, columns, GROUP], [GROUP * s0, s1, s0]
        return Tile(t._buffer, t.offset, sizes + [columns, GROUP] if outer else sizes + [1, 1],
                    strides + ([0, 0] if outer else [0, 0]), t.checks)

    def element(expr, c, q):
        return expr.op("add", expr.op("mul", expr.index(c), expr.literal(float(GROUP))), expr.index(q))

    # rank[e] = how many elements of the group come before e: larger, or equal with a lower index
    rank = _scratch((p, columns))
    mine = snake(src, True)
    theirs = Tile(src._buffer, src.offset, [groups, columns, GROUP, columns, GROUP],
                  [GROUP * src.strides[0], 0, 0, src.strides[1], src.strides[0]], src.checks)
    expr = Expression()
    e, other = element(expr, 1, 2), element(expr, 3, 4)
    before = expr.op("logical_or", expr.op("gt", expr.source(1), expr.source(0)),
                     expr.op("logical_and", expr.op("eq", expr.source(1), expr.source(0)), expr.op("lt", other, e)))
    expr.op("logical_and", before, expr.op("lt", other, expr.literal(float(n))))
    out = Tile(rank._buffer, rank.offset, [groups, columns, GROUP, 1, 1],
               [GROUP * rank.strides[0], rank.strides[1], rank.strides[0], 0, 0])
    reduce_tile("add", mine, (3, 4), out=out, expression=expr, sources=[mine, theirs], name="nisa.topk")
    # result j = the element of rank j: its value and its index, written where j lands in the snake
    full, rest = divmod(k, GROUP)
    for first, count, width in ((0, full, GROUP), (full, 1 if rest else 0, rest)):
        if not count:
            continue
        ranks = Tile(rank._buffer, rank.offset, [groups, count, width, columns, GROUP],
                     [GROUP * rank.strides[0], 0, 0, rank.strides[1], rank.strides[0]])
        values = Tile(src._buffer, src.offset, [groups, count, width, columns, GROUP],
                      [GROUP * src.strides[0], 0, 0, src.strides[1], src.strides[0]], src.checks)
        for dst, want_index in ((val_dst, False), (idx_dst, True)):
            expr = Expression()
            j = expr.op("add", expr.op("mul", expr.op("add", expr.index(1), expr.literal(float(first))),
                                       expr.literal(float(GROUP))), expr.index(2))
            e = element(expr, 3, 4)
            hit = expr.op("logical_and", expr.op("eq", expr.source(0), j), expr.op("lt", e, expr.literal(float(n))))
            expr.op("where", hit, e if want_index else expr.source(1), expr.literal(0.0))
            target = Tile(dst._buffer, dst.offset + first * dst.strides[1], [groups, count, width, 1, 1],
                          [GROUP * dst.strides[0], dst.strides[1], dst.strides[0], 0, 0])
            reduce_tile("add", ranks, (3, 4), out=target, expression=expr, sources=[ranks, values], name="nisa.topk")
    return val_dst
