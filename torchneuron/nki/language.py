"""nki.language (nl): tiles, memory, ranges and the elementwise, reduction and matrix functions
of the Neuron Kernel Interface, as torchneuron runs them."""
from __future__ import annotations

import builtins
import math
import sys
from types import SimpleNamespace

import numpy as np
import torch

from ._config import NKIObject  # noqa: F401  (nl.NKIObject)
from ._context import Expression, Op, current, torch_dtype
from ._expr import Index, is_symbolic
from ._dtypes import DTYPES, promote, to_dtype
from ._isa_core import shared_constant  # noqa: F401  (nl.shared_constant)
from ._isa_registers import VirtualRegister
from ._isa_matrix import check_operands, emit_matmul, transposed_view
from ._ops import _axes, _matched, broadcast_to, copy_into, elementwise, memset_tile, ndarray, op_name, reduce_tile  # noqa: F401
from ._tensor import (PARTITION_MAX, SBUF_BYTES_PER_PARTITION, SPACES, ArangeIndex, Buffer, DynSlice, NKIError, ParDim, Tile, bytes_per_partition,
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

# The modelled NeuronCore's sizes: 8 PSUM banks of 2 KiB, 224 KiB of SBUF per partition (_tensor.py);
# placed tiles (address=) need their dtype's alignment, so 4 bytes always suffices.
tile_size = SimpleNamespace(pmax=128, psum_fmax=512, psum_bank_fmax=512, psum_bank_fmax_bytes=2048, psum_num_banks=8,
                            sbuf_size_bytes=PARTITION_MAX * SBUF_BYTES_PER_PARTITION,
                            sbuf_fmax=SBUF_BYTES_PER_PARTITION // 4, sbuf_fmax_bytes=SBUF_BYTES_PER_PARTITION,
                            gemm_stationary_fmax=128, gemm_moving_fmax=512, bn_stats_fmax=512, psum_max=512,
                            psum_min_align=4, sbuf_min_align=4, total_available_sbuf_size=SBUF_BYTES_PER_PARTITION)


def par_dim(size):
    """Marks a shape's partition dimension (legacy): (n, nl.par_dim(128), f) is n tiles of [128, f]."""
    return ParDim(size)


# Creating tiles -------------------------------------------------------------------------------------
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


def empty_like(x, dtype=None, buffer=None, name="", **_unused):
    """A new uninitialised (NaN) tensor shaped like `x`."""
    return ndarray(x.shape, dtype or x.dtype, buffer or x.buffer, name)


def zeros_like(x, dtype=None, buffer=None, name="", **_unused):
    """A new zero tensor shaped like `x`."""
    return zeros(x.shape, dtype or x.dtype, buffer or (x.buffer if x.buffer.on_chip else sbuf), name)


def ones_like(x, dtype=None, buffer=None, name="", **_unused):
    """A new tensor of ones shaped like `x`."""
    return ones(x.shape, dtype or x.dtype, buffer or (x.buffer if x.buffer.on_chip else sbuf), name)


def full_like(x, fill_value, dtype=None, buffer=None, name="", **_unused):
    """A new tensor shaped like `x` filled with `fill_value`."""
    return full(x.shape, fill_value, dtype or x.dtype, buffer or (x.buffer if x.buffer.on_chip else sbuf), name)


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
    fixed = not is_symbolic(start) and not is_symbolic(stop)
    unrolled = ctx.unrolled is True or (ctx.unrolled and fixed and len(builtins.range(start, stop, step)) <= ctx.unrolled)
    site = None
    if not ctx.interpreting and not unrolled:  # the kernel's `for` line: a loop whose index Python code needed
        caller = sys._getframe(1)               # in an earlier trace is unrolled, the others stay loops
        site = (caller.f_code.co_filename, caller.f_lineno)
        unrolled = fixed and site in ctx.unroll_sites
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
    ctx.loop_sites[next(iter(var.terms))] = site
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


# Compiled loops -----------------------------------------------------------------------------------
def fori_loop(lower, upper, body_fun, step=1, unroll=None, **_unused):
    """body_fun(i) for i in range(lower, upper, step): bounds Python ints or registers (read when the
    loop starts), i a register holding the iteration's value (a loop in the compiled kernel)."""
    if isinstance(step, builtins.bool) or not isinstance(step, builtins.int) or step <= 0:
        raise NKIError(f"nl.fori_loop: the step must be a positive Python int, got {step!r}")
    loop = static_range(lower, upper, step) if unroll else dynamic_range(lower, upper, step)
    for i in loop:
        register = VirtualRegister("i")
        expr = Expression()
        expr.integer(i)
        current().emit(Op("pointwise", register.tile, [], expr.nodes, name="nl.fori_loop"))
        body_fun(register)


def while_loop(init, body_fun, **_unused):
    """r = init; while r != 0: r = body_fun(r) (a register, copied for the body; the body returns the
    next condition's register). A loop in the compiled kernel, its condition tested each time."""
    if not isinstance(init, VirtualRegister):
        raise NKIError(f"nl.while_loop: init must be a register (nisa.register_alloc), got {init!r}")
    ctx = current()
    condition = VirtualRegister("while")
    copy_into(condition.tile, init.tile, name="nl.while_loop")

    def iteration():
        value = VirtualRegister("r")
        copy_into(value.tile, condition.tile, name="nl.while_loop")
        result = body_fun(value)
        if not isinstance(result, VirtualRegister):
            raise NKIError(f"nl.while_loop: the body must return the next condition's register, got {result!r}")
        copy_into(condition.tile, result.tile, name="nl.while_loop")

    if ctx.interpreting:
        while builtins.int(condition._buffer.storage[0]) != 0:
            ctx.enter_scope()
            try:
                iteration()
            finally:
                ctx.exit_scope()
        return
    # the C++ loop tests its extent before each iteration
    ctx.dynamic_loop(f"(s{condition._buffer.id}[0] != 0 ? std::numeric_limits<int64_t>::max() : int64_t(0))")
    try:
        iteration()
    finally:
        ctx.end_loop()


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


_UNARY_OPS = {"square", "identity"}  # the op names of one-operand functions (nisa takes them as ALU ops too)


def _unary(op_name):
    _UNARY_OPS.add(op_name)

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
logical_xor = _binary("logical_xor", "logical_xor")
abs_max, abs_min = _binary("abs_max", "abs_max"), _binary("abs_min", "abs_min")


def where(condition, x, y, dtype=None, mask=None, **_unused):
    """x where condition is non-zero, else y, broadcast."""
    return elementwise("where", condition, x, y, dtype=dtype or promote(*[t.dtype for t in (x, y) if isinstance(t, Tile)] or [float32]),
                       mask=mask)


def copy(x, dtype=None, mask=None, **_unused):
    """A copy of a tile (rounded to `dtype`)."""
    return elementwise("identity", x, dtype=dtype, mask=mask)


copy._nki_op = "identity"
bypass = _unary("identity")  # the no-op stage of an ISA call (op0=nl.bypass), or a copy as a function
bypass.__name__ = "bypass"


def expand_dims(x, axis):
    """A view of x with a size-1 dim inserted at `axis`."""
    axis = axis + len(x.sizes) + 1 if axis < 0 else axis
    if not 0 <= axis <= len(x.sizes):
        raise NKIError(f"nl.expand_dims: axis {axis} is out of range for a tile of rank {len(x.sizes)}")
    return Tile(x._buffer, x.offset, x.sizes[:axis] + [1] + x.sizes[axis:], x.strides[:axis] + [0] + x.strides[axis:])


def is_hbm(buffer):
    """Whether `buffer` (a memory space, or a tensor's) is device memory (HBM)."""
    return not to_space(getattr(buffer, "buffer", buffer)).on_chip


def is_on_chip(buffer):
    """Whether `buffer` (a memory space, or a tensor's) is SBUF or PSUM."""
    return to_space(getattr(buffer, "buffer", buffer)).on_chip


def is_sbuf(buffer):
    """Whether `buffer` (a memory space, or a tensor's) is SBUF."""
    return to_space(getattr(buffer, "buffer", buffer)).name == "sbuf"


def is_psum(buffer):
    """Whether `buffer` (a memory space, or a tensor's) is PSUM."""
    return to_space(getattr(buffer, "buffer", buffer)).name == "psum"


class no_reorder:
    """`with nl.no_reorder():` keeps its instructions in program order; one software engine runs
    every instruction in order anyway. Also a loop directive (directives=nl.no_reorder())."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


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


def all(x, axis, dtype=None, **_unused):  # noqa: A001 - NKI's name
    """1 where every element along the free axes is non-zero, else 0."""
    expression = Expression()
    expression.op("ne", expression.source(0), expression.literal(0.0))
    return reduce_tile("min", x, axis, dtype or x.dtype, False, None, expression=expression, sources=[x], name="nl.all")


def var(x, axis, dtype=None, keepdims=True, **_unused):
    """The (population) variance along free axes, shaped as keepdims=True (as NKI documents)."""
    centred = subtract(x, mean(x, axis, dtype=float32, keepdims=True), dtype=float32)
    return mean(multiply(centred, centred, dtype=float32), axis, dtype=dtype or x.dtype, keepdims=True)


def softmax(x, axis, dtype=None, mask=None, **_unused):
    """exp(x - max) / sum(exp(x - max)) along a free axis."""
    top = max(x, axis, keepdims=True)
    e = exp(subtract(x, top))
    return divide(e, sum(e, axis, keepdims=True), dtype=dtype or x.dtype)


# Matrices -----------------------------------------------------------------------------------------
def matmul(x, y, transpose_x=False, mask=None, **_unused):
    """x @ y into a new fp32 PSUM tile (x is [K, M], the stationary operand, when transpose_x)."""
    if transpose_x:
        stationary = x
    else:  # as nisa.nc_transpose(x)
        view = transposed_view(x)
        stationary = ndarray(view.shape, x.dtype, sbuf)
        copy_into(stationary, view, None, name="nisa.nc_transpose")
    if not stationary.buffer.name == "sbuf":
        stationary = copy(stationary)
    moving = y
    out = ndarray((stationary.shape[1], moving.shape[1]), float32, psum)
    check_operands(stationary, moving)
    return emit_matmul(out, stationary, moving, None)


def device_print(print_prefix, tensor, **_unused):
    """Prints a tile when the kernel runs (in the compiled program too)."""
    current().emit(Op("print", None, [tensor], [], label=str(print_prefix), name="nl.device_print", dma=True))


# Ops as arguments of ISA calls (op=nl.exp, np.add, ...) --------------------------------------------
_IMPORTED = {"annotations", "sys", "ParDim", "PARTITION_MAX", "SBUF_BYTES_PER_PARTITION", "VirtualRegister", "bytes_per_partition",
             "check_on_chip_shape", "partition_dim", "math", "builtins", "SimpleNamespace", "Expression", "Op", "current", "Index", "is_symbolic",
             "DTYPES", "SPACES", "ArangeIndex", "Buffer", "DynSlice", "NKIError", "Tile", "promote", "to_dtype", "to_space",
             "op_name", "elementwise", "memset_tile", "copy_into", "reduce_tile", "np", "torch", "torch_dtype",
             "check_operands", "emit_matmul", "transposed_view", "NKIObject", "shared_constant"}
__all__ = [n for n in dir() if not n.startswith("_") and n not in _IMPORTED and n != "range"]  # keep Python's range


def shared_identity_matrix(n, dtype=float32, dst=None, buffer=None, **_unused):
    """An [n, n] identity matrix: written into dst when given, else a new tile (in SBUF unless
    buffer= says otherwise)."""
    out = dst if dst is not None else ndarray((n, n), dtype, buffer or sbuf, name="identity")
    if list(out.shape) != [n, n]:
        raise NKIError(f"nl.shared_identity_matrix: dst has shape {tuple(out.shape)}, not ({n}, {n})")
    expr = Expression()
    expr.op("eq", expr.index(0), expr.index(1))
    current().emit(Op("pointwise", out, [], expr.nodes, dma=not out.buffer.on_chip, name="nl.shared_identity_matrix"))
    return out


def static_cast(array, dtype):
    """A NumPy array cast to an NKI dtype on the host (bfloat16 as float32 values rounded to it)."""
    target = torch_dtype(to_dtype(dtype))
    values = torch.from_numpy(np.ascontiguousarray(array)).to(target)
    return values.float().numpy() if target == torch.bfloat16 else values.numpy()


from ._dtypes import dtype  # noqa: E402  (the NKI dtype class: nl.dtype, nki.dtype)
from ._language_more import (bitwise_and, bitwise_or, bitwise_xor, dropout, gather_flattened,  # noqa: E402,F401
                             invert, left_shift, prelu, prod, rand, random_seed, right_shift, rms_norm)
NkiTensor = Tile  # the tensor type: nl.ndarray's results, views of them and kernel arguments
__all__ += ["NkiTensor", "bitwise_and", "bitwise_or", "bitwise_xor", "dropout", "gather_flattened", "invert",
            "left_shift", "prelu", "prod", "rand", "random_seed", "right_shift", "rms_norm"]
from .typing import tensor  # noqa: E402
