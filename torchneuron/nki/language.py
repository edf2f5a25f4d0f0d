"""nki.language (nl): tiles, memory, ranges and the elementwise, reduction and matrix functions
of the Neuron Kernel Interface, as torchneuron runs them."""
from __future__ import annotations

import builtins
import math
from types import SimpleNamespace

from ._context import Expression, Op, current
from ._expr import Index, is_symbolic
from ._dtypes import DTYPES, promote, to_dtype
from ._tensor import (PARTITION_MAX, SPACES, ArangeIndex, Buffer, DynSlice, NKIError, ParDim, Tile, bytes_per_partition,
                      check_on_chip_shape, partition_dim, to_space)

# dtypes and memory spaces -------------------------------------------------------------------------
float32, bfloat16, float16, float64 = (DTYPES[n] for n in ("float32", "bfloat16", "float16", "float64"))
int8, uint8, int16, uint16 = (DTYPES[n] for n in ("int8", "uint8", "int16", "uint16"))
int32, uint32, int64, bool_ = (DTYPES[n] for n in ("int32", "uint32", "int64", "bool"))
tfloat32, float8_e4m3, float8_e5m2 = (DTYPES[n] for n in ("tfloat32", "float8_e4m3", "float8_e5m2"))
float8_e4m3fn, float8_e8m0fnu = DTYPES["float8_e4m3fn"], DTYPES["float8_e8m0fnu"]
float8_e4m3fn_x4, float8_e5m2_x4, float4_e2m1fn_x4 = (DTYPES[n] for n in ("float8_e4m3fn_x4", "float8_e5m2_x4",
                                                                           "float4_e2m1fn_x4"))
bool = bool_  # noqa: A001 - NKI spells it nl.bool
hbm, shared_hbm, private_hbm, sbuf, psum = (SPACES[n] for n in ("hbm", "shared_hbm", "private_hbm", "sbuf", "psum"))

tile_size = SimpleNamespace(pmax=128, psum_fmax=512, gemm_stationary_fmax=128, gemm_moving_fmax=512,
                            bn_stats_fmax=512, psum_max=512, total_available_sbuf_size=28 * 1024 * 1024)


def par_dim(size):
    """Marks a shape's partition dimension (legacy): (n, nl.par_dim(128), f) is n tiles of [128, f]."""
    return ParDim(size)


# Creating tiles -------------------------------------------------------------------------------------
def ndarray(shape, dtype=float32, buffer=None, name="", address=None, **_unused):
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
        from ._isa_mx import packed_in_device_memory
        return packed_in_device_memory(ctx, buf)
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


def full(shape, fill_value, dtype=float32, buffer=None, name="", **_unused):
    """A new tensor filled with `fill_value`."""
    tile = ndarray(shape, dtype, buffer, name)
    memset_tile(tile, fill_value)
    return tile


def zeros(shape, dtype=float32, buffer=None, name="", **_unused):
    """A new tensor of zeros."""
    return full(shape, 0.0, dtype, buffer, name)


def ones(shape, dtype=float32, buffer=None, name="", **_unused):
    """A new tensor of ones."""
    return full(shape, 1.0, dtype, buffer, name)


def empty_like(a, dtype=None, buffer=None, name="", **_unused):
    """A new uninitialised (NaN) tensor shaped like `a`."""
    return ndarray(a.shape, dtype or a.dtype, buffer or a.buffer, name)


def zeros_like(a, dtype=None, buffer=None, name="", **_unused):
    """A new zero tensor shaped like `a`."""
    return zeros(a.shape, dtype or a.dtype, buffer or (a.buffer if a.buffer.on_chip else sbuf), name)


def ones_like(a, dtype=None, buffer=None, name="", **_unused):
    """A new tensor of ones shaped like `a`."""
    return ones(a.shape, dtype or a.dtype, buffer or (a.buffer if a.buffer.on_chip else sbuf), name)


def full_like(a, fill_value, dtype=None, buffer=None, name="", **_unused):
    """A new tensor shaped like `a` filled with `fill_value`."""
    return full(a.shape, fill_value, dtype or a.dtype, buffer or (a.buffer if a.buffer.on_chip else sbuf), name)


# Indices, programs and ranges -------------------------------------------------------------------
def arange(*args):
    """Legacy index: nl.arange(n) (use [:, None] / [None, :] to place it on an axis)."""
    start, stop = (0, args[0]) if len(args) == 1 else args[:2]
    if not isinstance(start, int) or not isinstance(stop, int):
        raise NKIError("nl.arange takes constant bounds")
    return ArangeIndex(stop - start, 0, 1, start)


class _MGrid:
    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        indices = [ArangeIndex(k.stop - (k.start or 0), axis, len(key), k.start or 0) for axis, k in enumerate(key)]
        return _Grid(indices)


class _Grid(tuple):
    @property
    def p(self):
        return self[0]

    @property
    def x(self):
        return self[-1]

    @property
    def y(self):
        return self[1]


mgrid = _MGrid()


def ds(start, size, step=1):
    """A dynamic slice: `size` elements from `start` (a constant or an expression of loop variables)."""
    return DynSlice(start, size, step)


def program_id(axis=0):
    """This program's index along `axis` of the launch grid."""
    return current().program_id(axis)


def num_programs(axes=None):
    """The grid's size along `axes` (all of it when None)."""
    ctx = current()
    if isinstance(axes, (tuple, list)):
        return math.prod(ctx.num_programs(a) for a in axes)
    return ctx.num_programs(axes)


def program_ndim():
    """How many dimensions the launch grid has."""
    return len(current().grid)


def _range(start, stop, step):
    if stop is None:
        start, stop = 0, start
    ctx = current()
    unrolled = ctx.unrolled is True or (
        ctx.unrolled and not is_symbolic(start) and not is_symbolic(stop) and len(builtins.range(start, stop, step)) <= ctx.unrolled)
    if ctx.interpreting or unrolled:
        for value in builtins.range(int(start), int(stop), step):
            ctx.enter_scope()
            try:
                yield value
            finally:
                ctx.exit_scope()
        return
    if not is_symbolic(start) and not is_symbolic(stop) and stop - start <= 0:
        return
    extent = (stop - start + step - 1) // step if step != 1 else stop - start
    var = ctx.loop(extent)
    try:
        yield start + var * step
    finally:
        ctx.end_loop()


def affine_range(start, stop=None, step=1, **_unused):
    """A loop whose iterations are independent (compiled as one loop, not unrolled)."""
    return _range(start, stop, step)


def sequential_range(start, stop=None, step=1, **_unused):
    """A loop whose iterations depend on each other (compiled as one loop, run in order)."""
    return _range(start, stop, step)


range = sequential_range  # nl.range: a loop run in order (NKI 0.3's name)


def dynamic_range(start, stop=None, step=1, **_unused):
    """A loop whose bounds may be read at run time (a register); run as sequential_range."""
    register = next((b for b in (start, stop) if hasattr(b, "register_range")), None)
    if register is not None:  # nisa.register_alloc(): the bound is read when the loop starts
        return register.register_range(start, stop, step)
    if isinstance(stop, Tile) or isinstance(start, Tile):
        raise NKIError("nl.dynamic_range: a bound held in a tile must be loaded into a register first "
                       "(nisa.register_alloc / nisa.register_load)")
    return _range(start, stop, step)


class nc:
    """nl.nc(n): n NeuronCores, for nl.spmd_dim(size, nl.nc(n)) in a launch grid."""

    def __init__(self, count):
        self.count = count


def spmd_dim(size, *cores):
    """A launch-grid dimension of `size` programs on each of nl.nc(n) cores: size * n programs
    (program n * i + c runs on core c); torchneuron runs them all on its compute pool."""
    count = builtins.int(size)
    for c in cores:
        count *= c.count if isinstance(c, nc) else builtins.int(c)
    return count


def static_range(start, stop=None, step=1):
    """A loop unrolled at trace time: its variable is a Python int."""
    return builtins.range(start, stop, step) if stop is not None else builtins.range(start)


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
        dtype = bool_ if op_name in _COMPARISONS else promote(*[t.dtype for t in tiles])
    if out is None:
        out = ndarray(shape, dtype, sbuf)
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


def _unary(op_name):
    def function(x, dtype=None, mask=None, **_unused):
        return elementwise(op_name, x, dtype=dtype, mask=mask)
    function.__name__ = op_name
    function.__doc__ = f"Elementwise {op_name} of a tile."
    function._nki_op = op_name
    return function


def _binary(op_name, nki_name):
    def function(x, y, dtype=None, mask=None, **_unused):
        return elementwise(op_name, x, y, dtype=dtype, mask=mask)
    function.__name__ = nki_name
    function.__doc__ = f"Elementwise {nki_name} of two tiles (or a tile and a scalar), broadcast."
    function._nki_op = op_name
    return function


exp, log, sqrt, rsqrt, square = (_unary(n) for n in ("exp", "log", "sqrt", "rsqrt", "square"))
reciprocal, tanh, sigmoid, relu, abs = (_unary(n) for n in ("reciprocal", "tanh", "sigmoid", "relu", "abs"))
gelu, silu, sign, sin, cos, erf = (_unary(n) for n in ("gelu", "silu", "sign", "sin", "cos", "erf"))
floor, ceil, logical_not = _unary("floor"), _unary("ceil"), _unary("logical_not")
negative = _unary("neg")
negative.__name__ = "negative"
gelu_apprx_tanh = _unary("gelu_tanh")
gelu_apprx_tanh.__name__ = "gelu_apprx_tanh"
gelu_apprx_sigmoid, gelu_apprx_sigmoid_dx = _unary("gelu_apprx_sigmoid"), _unary("gelu_apprx_sigmoid_dx")
gelu_dx, silu_dx, erf_dx = _unary("gelu_dx"), _unary("silu_dx"), _unary("erf_dx")
softplus, mish, tan, trunc = _unary("softplus"), _unary("mish"), _unary("tan"), _unary("trunc")
arctan = _unary("atan")
arctan.__name__ = "arctan"
add, subtract, multiply = _binary("add", "add"), _binary("sub", "subtract"), _binary("mul", "multiply")
divide, maximum, minimum = _binary("div", "divide"), _binary("maximum", "maximum"), _binary("minimum", "minimum")
power = _binary("pow", "power")
equal, not_equal = _binary("eq", "equal"), _binary("ne", "not_equal")
less, less_equal = _binary("lt", "less"), _binary("le", "less_equal")
greater, greater_equal = _binary("gt", "greater"), _binary("ge", "greater_equal")
logical_and, logical_or = _binary("logical_and", "logical_and"), _binary("logical_or", "logical_or")


def where(condition, x, y, dtype=None, mask=None, **_unused):
    """x where condition is non-zero, else y, broadcast."""
    return elementwise("where", condition, x, y, dtype=dtype or promote(*[t.dtype for t in (x, y) if isinstance(t, Tile)] or [float32]),
                       mask=mask)


def copy(x, dtype=None, mask=None, **_unused):
    """A copy of a tile (rounded to `dtype`)."""
    return elementwise("identity", x, dtype=dtype, mask=mask)


copy._nki_op = "identity"


def memset_tile(tile, value, mask=None):
    expr = Expression()
    expr.literal(float(value))
    current().emit(Op("pointwise", tile, [], expr.nodes, mask=mask, dma=not tile.buffer.on_chip, name="memset"))


def copy_into(dst: Tile, value, mask=None, name="tensor_copy"):
    """dst[...] = value: a copy (a DMA when either side is in HBM) or a fill with a scalar."""
    if isinstance(value, Tile) and (hasattr(dst, "row_stride") or hasattr(value, "row_stride")):
        from ._isa_indirect import copy_indirect  # an indirect DMA (.ap(vector_offset=)): a copy per partition
        copy_indirect(dst, value, mask, name)
    elif isinstance(value, Tile) and (dst.dtype.packed != 1 or value.dtype.packed != 1):
        from ._isa_mx import copy_packed
        copy_packed(dst, value, name)
    elif isinstance(value, Tile) and (hasattr(value._buffer, "raw") or hasattr(dst._buffer, "raw")):
        from ._isa_bytes import copy_bytes  # device-memory bytes seen as another dtype (.ap(dtype=))
        copy_bytes(dst, value, mask, name)
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


def broadcast_to(x, shape, **_unused):
    """A new tile with `x` repeated along its size-1 dims to `shape`."""
    out = ndarray(tuple(shape), x.dtype, sbuf)
    copy_into(out, x)
    return out


# Memory -----------------------------------------------------------------------------------------
def load(src, mask=None, dtype=None, **_unused):
    """Copies an HBM tensor (view) into a new SBUF tile."""
    out = ndarray(src.shape, dtype or src.dtype, sbuf)
    copy_into(out, src, mask, name="nl.load")
    return out


def store(dst, value, mask=None, **_unused):
    """Copies a tile into an HBM tensor (view)."""
    copy_into(dst, value, mask, name="nl.store")


def load_transpose2d(src, mask=None, dtype=None, **_unused):
    """Loads a 2-D HBM view [P, F] transposed into a new SBUF tile [F, P]."""
    if len(src.shape) != 2:
        raise NKIError(f"nl.load_transpose2d takes a 2-D view, got shape {src.shape}")
    transposed = Tile(src._buffer, src.offset, src.sizes[::-1], src.strides[::-1], src.checks)
    return load(transposed, mask=mask, dtype=dtype)


def transpose(x, dtype=None, mask=None, **_unused):
    """The 2-D tile x [P, F] transposed to [F, P] (both at most 128)."""
    if len(x.shape) != 2:
        raise NKIError(f"nl.transpose takes a 2-D tile, got shape {x.shape}")
    if x.shape[1] > 128:
        raise NKIError(f"nl.transpose: the free size {x.shape[1]} becomes the partition dim and exceeds 128")
    view = Tile(x._buffer, x.offset, x.sizes[::-1], x.strides[::-1], x.checks)
    out = ndarray(view.shape, dtype or x.dtype, sbuf)
    copy_into(out, view, mask, name="nl.transpose")
    return out


# Reductions ---------------------------------------------------------------------------------------
def _axes(axis, rank):
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    return tuple(sorted(a + rank if a < 0 else a for a in axes))


def reduce_tile(reduce_op, x, axis, dtype=None, keepdims=False, mask=None, scale=1.0, expression=None, name="",
                out=None, accumulate=False, sources=None):
    rank = len(x.shape)
    dims = _axes(axis, rank)
    kept_shape = [1 if d in dims else s for d, s in enumerate(x.shape)]
    if out is None:
        out_tile = ndarray(kept_shape, dtype or x.dtype, sbuf)
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


def sum(x, axis, dtype=None, keepdims=False, mask=None, **_unused):
    """The sum of a tile along free axes."""
    return reduce_tile("add", x, axis, dtype, keepdims, mask, name="nl.sum")


def max(x, axis, dtype=None, keepdims=False, mask=None, **_unused):
    """The maximum of a tile along free axes."""
    return reduce_tile("max", x, axis, dtype, keepdims, mask, name="nl.max")


def min(x, axis, dtype=None, keepdims=False, mask=None, **_unused):
    """The minimum of a tile along free axes."""
    return reduce_tile("min", x, axis, dtype, keepdims, mask, name="nl.min")


def mean(x, axis, dtype=None, keepdims=False, mask=None, **_unused):
    """The mean of a tile along free axes."""
    count = math.prod(x.shape[d] for d in _axes(axis, len(x.shape)))
    return reduce_tile("add", x, axis, dtype, keepdims, mask, scale=1.0 / count, name="nl.mean")


sum._nki_op, max._nki_op, min._nki_op = "add", "maximum", "minimum"


def softmax(x, axis, dtype=None, mask=None, **_unused):
    """exp(x - max) / sum(exp(x - max)) along a free axis."""
    top = max(x, axis, keepdims=True)
    e = exp(subtract(x, top))
    return divide(e, sum(e, axis, keepdims=True), dtype=dtype or x.dtype)


# Matrices -----------------------------------------------------------------------------------------
def matmul(x, y, transpose_x=False, mask=None, **_unused):
    """x @ y into a new fp32 PSUM tile (x is [K, M], the stationary operand, when transpose_x)."""
    from . import isa
    stationary = x if transpose_x else isa.nc_transpose(x)
    if not stationary.buffer.name == "sbuf":
        stationary = copy(stationary)
    moving = y
    out = ndarray((stationary.shape[1], moving.shape[1]), float32, psum)
    isa.nc_matmul(out, stationary, moving)
    return out


def device_print(prefix, x, **_unused):
    """Prints a tile when the kernel runs (in the compiled program too)."""
    current().emit(Op("print", None, [x], [], label=str(prefix), name="nl.device_print", dma=True))


# Ops as arguments of ISA calls (op=nl.exp, np.add, ...) --------------------------------------------
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


_IMPORTED = {"annotations", "ParDim", "PARTITION_MAX", "bytes_per_partition",
             "check_on_chip_shape", "partition_dim", "math", "builtins", "SimpleNamespace", "Expression", "Op", "current", "Index", "is_symbolic",
             "DTYPES", "SPACES", "ArangeIndex", "Buffer", "DynSlice", "NKIError", "Tile", "promote", "to_dtype", "to_space",
             "op_name", "elementwise", "memset_tile", "copy_into", "reduce_tile"}
__all__ = [n for n in dir() if not n.startswith("_") and n not in _IMPORTED and n != "range"]  # keep Python's range


def shared_identity_matrix(n, dtype=float32, buffer=None, **_unused):
    """An [n, n] identity matrix (in SBUF unless buffer= says otherwise)."""
    out = ndarray((n, n), dtype, buffer or sbuf, name="identity")
    expr = Expression()
    expr.op("eq", expr.index(0), expr.index(1))
    current().emit(Op("pointwise", out, [], expr.nodes, dma=not out.buffer.on_chip, name="nl.shared_identity_matrix"))
    return out


def static_cast(array, dtype):
    """A NumPy array cast to an NKI dtype on the host (bfloat16 as float32 values rounded to it)."""
    import numpy as np
    import torch
    from ._kernel import torch_dtype
    target = torch_dtype(to_dtype(dtype))
    values = torch.from_numpy(np.ascontiguousarray(array)).to(target)
    return values.float().numpy() if target == torch.bfloat16 else values.numpy()


from ._config import NKIObject  # noqa: E402,F401  (nl.NKIObject)
from ._dtypes import dtype  # noqa: E402  (the NKI dtype class: nl.dtype, nki.dtype)
from .typing import tensor  # noqa: E402
from ._isa_core import shared_constant  # noqa: E402,F401
