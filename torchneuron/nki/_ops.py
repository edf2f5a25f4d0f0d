"""The tile operations both language surfaces (nl, nisa) and the instruction modules are built
from: allocating tiles, copies and fills, broadcast elementwise expressions and reductions, each
emitted as one op into the running executor. Tile's operators (a + b, t[i] = x) call these."""
from __future__ import annotations

import builtins
import math

from ._context import Expression, Op, current
from ._dtypes import DTYPES, promote, to_dtype
from ._expr import Index
from ._tensor import (PARTITION_MAX, SPACES, Buffer, NKIError, ParDim, Tile, bytes_per_partition, check_on_chip_shape,
                      extensions, partition_dim, to_space)

_FLOAT32, _SBUF = DTYPES["float32"], SPACES["sbuf"]


def ndarray(shape, dtype=_FLOAT32, buffer=None, name="", address=None, **_unused):
    """A new tensor of `shape` in `buffer` (SBUF by default); its memory starts as NaN. With
    address= (a byte offset per partition, or (partition, byte offset)) the kernel places it:
    capacity checks that range instead of pooling it (each tile still has its own memory)."""
    shape = tuple(s if isinstance(s, ParDim) else int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    ctx = current()
    if address is not None and to_space(buffer).on_chip:
        return _placed(ctx, shape, to_space(buffer), to_dtype(dtype), address, name)
    buf = Buffer(ctx.name(name), to_space(buffer), to_dtype(dtype), shape)
    packed = buf.dtype.packed  # MX *_x4 tiles hold their values unpacked on chip (nisa.quantize_mx)
    if packed != 1 and not buf.space.on_chip:
        return extensions.packed_in_device_memory(ctx, buf)
    buf.elements *= packed
    ctx.allocate(buf)
    strides, step = [], packed
    for s in reversed(shape):
        strides.append(step)
        step *= s
    return Tile(buf, 0, shape, list(reversed(strides)))


def _placed(ctx, shape, space, dtype, address, name):
    """A tile placed at `address` (bytes per partition, or (partition, bytes)) in the memory that
    placed tiles of its dtype share: tiles placed at one address alias."""
    start_p, start_byte = (address if isinstance(address, (tuple, list)) else (0, address))
    start_p, start_byte = int(start_p), int(start_byte)
    check_on_chip_shape(shape, space, dtype, name or "placed tile")
    memory = ctx.placed_memory(space.name, dtype)
    row = memory.shape[1]
    pd = partition_dim(shape)
    nbytes = bytes_per_partition(shape, dtype)
    if start_byte % dtype.itemsize or start_byte < 0 or start_byte + nbytes > row * dtype.itemsize or \
            start_p < 0 or start_p + shape[pd] > PARTITION_MAX:
        raise NKIError(f"NKI: tile {list(shape)} of {dtype.name} placed at address={address!r} does not fit "
                       f"{space.name} ({row * dtype.itemsize} bytes per partition, {PARTITION_MAX} partitions)")
    strides, step = [0] * len(shape), 1
    for d in reversed(builtins.range(len(shape))):
        if d == pd:
            continue
        strides[d] = step
        step *= shape[d]
    strides[pd] = row
    tile = Tile(memory, start_p * row + start_byte // dtype.itemsize, list(shape), strides)
    if pd == 0:
        tile._pitch = (math.prod(shape[1:]), row)  # .ap() patterns count partitions as rows of the free size
    ctx.placed_tile(tile)
    return tile

# Elementwise -------------------------------------------------------------------------------------
def _broadcast_shape(shapes):
    rank = builtins.max(len(s) for s in shapes)
    out = []
    for d in builtins.range(rank):
        sizes = {s[d - rank + len(s)] for s in shapes if d - rank + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise NKIError(f"NKI: tiles of shapes {[tuple(s) for s in shapes]} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return out


def _operand(expr: Expression, sources: list, value, shape):
    if isinstance(value, Tile):
        sources.append(_matched(value, shape))
        return expr.source(len(sources) - 1)
    if isinstance(value, Index):
        return expr.integer(value)
    if isinstance(value, (int, float, builtins.bool)):
        return expr.literal(float(value))
    raise NKIError(f"NKI: cannot use {value!r} as an operand")


_COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not"}


def elementwise(op_name, *operands, dtype=None, mask=None, out=None):
    """A new SBUF tile (or `out`) holding op(operands) broadcast (the engines compute in fp32)."""
    tiles = [x for x in operands if isinstance(x, Tile)]
    if not tiles and out is None:
        raise NKIError(f"NKI: {op_name} needs at least one tile operand")
    if out is not None:  # the destination's shape; operands broadcast to it (or differ in unit dims)
        shape = list(out.shape)
    else:  # on-chip tiles of lower rank align on the partition dim ([P] with [P, F] is per partition)
        rank = builtins.max(len(t.shape) for t in tiles)
        shape = _broadcast_shape([tuple(t.shape) + (1,) * (rank - len(t.shape)) if t.buffer.on_chip else t.shape
                                  for t in tiles])
    if dtype is None:
        dtype = DTYPES["bool"] if op_name in _COMPARISONS else promote(*[t.dtype for t in tiles])
    if out is None:
        out = ndarray(shape, dtype, _SBUF)
    expr, sources = Expression(), []
    args = [_operand(expr, sources, x, shape) for x in operands]
    if op_name == "square":
        expr.op("mul", args[0], args[0])
    elif op_name == "rsqrt":
        expr.op("rsqrt", *args)
    else:
        expr.op(op_name, *args)
    current().emit(Op("pointwise", out, sources, expr.nodes, mask=mask, name=f"nl.{op_name}"))
    return out

def holds_fp8_bytes(t: Tile) -> bool:
    """Whether t holds float8_e4m3 as its bytes: in device memory, or a float32 word's bytes on chip."""
    return t.dtype.name == "float8_e4m3" and (not t.buffer.on_chip or getattr(t._buffer, "codes", False))


def memset_tile(tile, value, mask=None):
    if holds_fp8_bytes(tile) and float(value) != 0.0:
        raise NKIError(f"NKI: filling the float8_e4m3 bytes of '{tile.name}' with {value!r} is not supported (0 is)")
    expr = Expression()
    expr.literal(float(value))
    current().emit(Op("pointwise", tile, [], expr.nodes, mask=mask, dma=not tile.buffer.on_chip, name="memset"))


def copy_into(dst: Tile, value, mask=None, name="tensor_copy"):
    """dst[...] = value: a copy (a DMA when either side is in HBM) or a fill with a scalar."""
    if isinstance(value, Tile) and (hasattr(dst, "row_stride") or hasattr(value, "row_stride")):
        extensions.copy_indirect(dst, value, mask, name)  # an indirect DMA (.ap(vector_offset=)): a copy per partition
    elif isinstance(value, Tile) and (dst.dtype.packed != 1 or value.dtype.packed != 1):
        extensions.copy_packed(dst, value, name)
    elif isinstance(value, Tile) and (hasattr(value._buffer, "raw") or hasattr(dst._buffer, "raw")):
        extensions.copy_bytes(dst, value, mask, name)  # device-memory bytes seen as another dtype (.ap(dtype=))
    elif isinstance(value, Tile) and (holds_fp8_bytes(dst) or holds_fp8_bytes(value)):
        extensions.copy_fp8(dst, value, mask, name)  # float8_e4m3 bytes encoded or decoded on the way
    elif isinstance(value, Tile):
        expr = Expression()
        expr.source(0)
        dma = not dst.buffer.on_chip or not value.buffer.on_chip
        if value.buffer.on_chip and not dst.buffer.on_chip and value.sizes[:1] == [1] and dst.sizes and \
                dst.sizes[0] > PARTITION_MAX and value.sizes[1:] == dst.sizes:  # one partition's row to device memory
            dst = Tile(dst._buffer, dst.offset, [1] + dst.sizes, [0] + dst.strides, dst.checks)
        current().emit(Op("pointwise", dst, [_matched(value, dst.shape)], expr.nodes, mask=mask, dma=dma, name=name))
    elif isinstance(value, (int, float, builtins.bool)):
        memset_tile(dst, value, mask)
    else:
        raise NKIError(f"NKI: cannot assign {value!r} to a tile")


def _matched(value: Tile, shape) -> Tile:
    """`value` seen with `shape`: broadcast, or (a DMA between shapes that differ only in unit
    dims, [128, 1, 64] to [128, 64]) the same elements with the unit dims dropped or added."""
    shape = list(shape)
    if hasattr(value, "row_stride"):
        raise NKIError(f"NKI: an indirect access to '{value.name}' (.ap(vector_offset=)) is read and written by "
                       "nisa.dma_copy / dma_compute only")
    if not value.checks and list(value.shape) != shape and math.prod(value.shape) == math.prod(shape) and \
            [s for s in value.shape if s != 1] == [s for s in shape if s != 1]:
        kept = [(size, stride) for size, stride in zip(value.sizes, value.strides) if size != 1]
        sizes, strides = [], []
        for s in shape:
            if s == 1:
                sizes.append(1)
                strides.append(0)
            else:
                size, stride = kept.pop(0)
                sizes.append(size)
                strides.append(stride)
        return Tile(value._buffer, value.offset, sizes, strides)
    return value.expanded(shape)


def broadcast_to(x, shape, dtype=None, **_unused):
    """A new tile with `x` repeated along its size-1 dims to `shape` (rounded to `dtype`)."""
    out = ndarray(tuple(shape), dtype or x.dtype, _SBUF)
    copy_into(out, x)
    return out

def _axes(axis, rank):
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    return tuple(sorted(a + rank if a < 0 else a for a in axes))


def reduce_tile(reduce_op, x, axis, dtype=None, keepdims=False, mask=None, scale=1.0, expression=None, name="",
                out=None, accumulate=False, sources=None):
    rank = len(x.shape)
    dims = _axes(axis, rank)
    kept_shape = [1 if d in dims else s for d, s in enumerate(x.shape)]
    if out is None:
        out_tile = ndarray(kept_shape, dtype or x.dtype, _SBUF)
        result = out_tile if keepdims else Tile(out_tile._buffer, 0, [s for d, s in enumerate(x.shape) if d not in dims],
                                                [st for d, st in enumerate(out_tile.strides) if d not in dims])
    else:
        result = out
        out_tile = Tile(out._buffer, out.offset, kept_shape, _kept_strides(out, dims, rank))
    if expression is None:
        expression = Expression()
        expression.source(0)
        sources = [x]
    current().emit(Op("reduce", out_tile, sources, expression.nodes, mask=mask, reduce_op=reduce_op, reduce_dims=dims,
                      scale=scale, accumulate=accumulate, name=name or f"nl.{reduce_op}"))
    return result


def _kept_strides(out, dims, rank):
    """Strides of a reduce destination `out` (kept dims only, or keepdims) seen at full rank."""
    if len(out.sizes) == rank:
        return list(out.strides)
    strides, k = [], 0
    for d in builtins.range(rank):
        if d in dims:
            strides.append(0)
        else:
            strides.append(out.strides[k])
            k += 1
    return strides

def op_name(op) -> str:
    """The compiler's name for an op passed as an argument: an nl function or a NumPy ufunc."""
    name = getattr(op, "_nki_op", None)
    if name is not None:
        return name
    ufunc = getattr(op, "__name__", None)
    mapped = {"add": "add", "subtract": "sub", "multiply": "mul", "divide": "div", "true_divide": "div",
              "maximum": "maximum", "minimum": "minimum", "power": "pow", "exp": "exp", "log": "log", "sqrt": "sqrt",
              "tanh": "tanh", "abs": "abs", "absolute": "abs", "negative": "neg", "equal": "eq", "not_equal": "ne",
              "less": "lt", "less_equal": "le", "greater": "gt", "greater_equal": "ge", "square": "square",
              "reciprocal": "reciprocal", "sign": "sign", "sin": "sin", "cos": "cos", "max": "maximum",
              "min": "minimum", "sum": "add", "logical_and": "logical_and", "logical_or": "logical_or"}
    if ufunc in mapped:
        return mapped[ufunc]
    raise NKIError(f"NKI: {op!r} is not an op the engines have")


extensions.provide(copy_into=copy_into, elementwise=elementwise, broadcast_to=broadcast_to)
