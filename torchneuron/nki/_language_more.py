"""nki.language functions built on the shared tile ops: bitwise operations on integer tiles, the
product reduction, prelu, rms_norm, random tiles and dropout (nisa.rand2's generator), and
gather_flattened. language.py re-exports them."""
from __future__ import annotations

from ._context import Expression
from ._dtypes import DTYPES, promote, to_dtype
from ._isa_core import nc_n_gather
from ._isa_rng import rand2, set_rng_seed
from ._isa_vector import dropout as isa_dropout
from ._ops import _axes, elementwise, ndarray, reduce_tile
from ._tensor import SPACES, NKIError, Tile

_SBUF = SPACES["sbuf"]
_UNSIGNED_BITS = {"uint8": 8, "uint16": 16, "uint32": 32}


# Bitwise operations: on the 32-bit two's-complement pattern of integer values (the compiler's
# bits_* ops); unsigned results narrower than 32 bits keep their own width.
def _integer_operands(name, operands):
    for x in operands:
        if isinstance(x, Tile) and x.dtype.is_float:
            raise NKIError(f"nl.{name}: bitwise operations take integer tiles, got '{x.name}' of {x.dtype.name}")
        if isinstance(x, float) and not x.is_integer():
            raise NKIError(f"nl.{name}: bitwise operations take integers, got {x!r}")
    tiles = [x for x in operands if isinstance(x, Tile)]
    if not tiles:
        raise NKIError(f"nl.{name} needs at least one tile operand")
    return promote(*[t.dtype for t in tiles])


def _bitwise(nki_name, op):
    def function(x, y, dtype=None, mask=None, **_unused):
        result = to_dtype(dtype) if dtype is not None else _integer_operands(nki_name, (x, y))
        if dtype is not None:
            _integer_operands(nki_name, (x, y))
        bits = _UNSIGNED_BITS.get(result.name)
        name = op
        if op == "bits_shr" and isinstance(x, Tile) and x.dtype.name in _UNSIGNED_BITS:
            name = "bits_shr_logical"  # unsigned data shifts in zeros
        if op == "bits_shl" and bits is not None and bits < 32:
            out = elementwise(name, x, y, dtype=DTYPES["int32"], mask=mask)
            return elementwise("bits_and", out, (1 << bits) - 1, dtype=result, mask=mask)
        return elementwise(name, x, y, dtype=result, mask=mask)
    function.__name__ = nki_name
    function.__doc__ = f"Elementwise {nki_name} of integer tiles (or a tile and an integer), broadcast."
    function._nki_op = op
    return function


bitwise_and = _bitwise("bitwise_and", "bits_and")
bitwise_or = _bitwise("bitwise_or", "bits_or")
bitwise_xor = _bitwise("bitwise_xor", "bits_xor")
left_shift = _bitwise("left_shift", "bits_shl")
right_shift = _bitwise("right_shift", "bits_shr")


def invert(x, dtype=None, mask=None, **_unused):
    """Elementwise bitwise NOT of an integer tile (unsigned tiles within their own width)."""
    result = to_dtype(dtype) if dtype is not None else _integer_operands("invert", (x,))
    bits = _UNSIGNED_BITS.get(x.dtype.name)
    if bits is not None:
        return elementwise("bits_xor", x, (1 << bits) - 1, dtype=result, mask=mask)
    return elementwise("bits_not", x, dtype=result, mask=mask)


invert._nki_op = "bits_not"


# Reductions and normalization ----------------------------------------------------------------------
def prod(x, axis, dtype=None, keepdims=False, mask=None, **_unused):
    """The product of a tile along free axes."""
    return reduce_tile("mul", x, axis, dtype, keepdims, mask, name="nl.prod")


prod._nki_op = "mul"


def prelu(x, alpha=0.0, dtype=None, mask=None, **_unused):
    """x where x > 0, else alpha * x (alpha a scalar or a [P, 1] tile). As an ISA op
    (nisa.activate2(op=nl.prelu, relu_param=...)) alpha is the instruction's relu_param."""
    return elementwise("prelu", x, alpha, dtype=dtype, mask=mask)


prelu._nki_op = "prelu"


def rms_norm(x, w, axis, n, epsilon=1e-06, dtype=None, compute_dtype=None, **_unused):
    """x / sqrt(sum(x * x along axis) / n + epsilon) * w."""
    axes = _axes(axis, len(x.shape))
    if 0 in axes:
        raise NKIError("nl.rms_norm: the axis must be a free axis (not 0, the partition axis)")
    work = to_dtype(compute_dtype) if compute_dtype is not None else DTYPES["float32"]
    squares = Expression()
    squares.op("mul", squares.source(0), squares.source(0))
    mean = reduce_tile("add", x, axes, work, True, scale=1.0 / float(n), expression=squares, sources=[x],
                       name="nl.rms_norm")
    inverse = elementwise("rsqrt", elementwise("add", mean, float(epsilon), dtype=work), dtype=work)
    return elementwise("mul", elementwise("mul", x, inverse, dtype=work), w, dtype=to_dtype(dtype or x.dtype))


# Random numbers ------------------------------------------------------------------------------------
def rand(shape, dtype=DTYPES["float32"], buffer=None, name="", **_unused):
    """A new on-chip tensor of values uniform in [0, 1) (nisa.rand2's generator)."""
    tile = ndarray(tuple(shape), to_dtype(dtype), buffer or _SBUF, name)
    if not tile.buffer.on_chip:
        raise NKIError("nl.rand: random tensors are made on chip (SBUF or PSUM); store them to device memory")
    return rand2(tile, 0.0, 1.0)


def random_seed(seed, **_unused):
    """Seeds the generator of nl.rand / nisa.rand2 from a [1, 1] tile: the same seed, the same numbers."""
    set_rng_seed(seed)


def dropout(x, rate, dtype=None, mask=None, **_unused):
    """x with each element replaced by 0 with probability `rate` (a scalar or a [P, 1] tile), as
    nisa.dropout: the kept elements are not rescaled."""
    out = ndarray(x.shape, to_dtype(dtype or x.dtype), _SBUF)
    return isa_dropout(out, x, rate)


# Indexing ------------------------------------------------------------------------------------------
def gather_flattened(data, indices, axis=0, dtype=None, **_unused):
    """out[p, ...] = data[p, flat index indices[p, ...]]: each partition gathers from its own
    elements, the free dims of data flattened (an index outside them gives 0)."""
    if axis not in (0, 1) and not (len(data.shape) == 2 and axis == -1):
        raise NKIError(f"nl.gather_flattened: axis {axis}: each partition gathers from its own free elements "
                       "(axis 0 or 1)")
    out = ndarray(indices.shape, to_dtype(dtype or data.dtype), _SBUF)
    return nc_n_gather(out, data, indices)

