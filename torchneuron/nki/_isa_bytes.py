"""Bytes seen as another dtype. Device memory: a DMA from tensor.ap(pattern, dtype=other) (a bf16
tensor read as int32 or float32 words, AWS's kernels pack indices and pairs so) reads the bytes and
builds each element's value from them with ordinary arithmetic, so both executors agree. Integer
values are exact up to 2 ** 24 (engines compute in float32); float values are exact, NaN payloads
are not kept. On chip: float32 words seen as bfloat16 halves or float8_e4m3 bytes. And NKI's
float8_e4m3 in device memory, held as its bytes, which DMAs encode and decode."""
from __future__ import annotations

from ._context import Op, current
from ._expr import KernelTraceError
from ._isa_mx import Format, _Builder
from ._ops import _matched, holds_fp8_bytes
from ._tensor import Buffer, NKIError, Tile, extensions

# name: (mantissa bits, exponent bias, exponent bits) of the float formats a word can be read as
_FLOATS = {"float32": (23, 127, 8), "bfloat16": (7, 127, 8), "float16": (10, 15, 5)}
_INTS = {"uint8": (1, False), "int8": (1, True), "uint16": (2, False), "int16": (2, True), "uint32": (4, False),
         "int32": (4, True)}


def _field(b: _Builder, value, low_bits: int, width: int):
    """floor(value / 2 ** low_bits) mod 2 ** width for a non-negative integer value."""
    shifted = b.f("floor", b.f("div", value, b.lit(2 ** low_bits))) if low_bits else value
    return b.f("sub", shifted, b.f("mul", b.f("floor", b.f("div", shifted, b.lit(2 ** width))), b.lit(2 ** width)))


def _float(b: _Builder, sign, exponent, mantissa, mbits: int, bias: int, ebits: int):
    """The value of sign / biased exponent / mantissa fields (integers) of an IEEE format."""
    normal = b.f("mul", b.f("add", mantissa, b.lit(2 ** mbits)), b.f("exp2", b.f("sub", exponent, b.lit(bias + mbits))))
    subnormal = b.f("mul", mantissa, b.lit(2.0 ** (1 - bias - mbits)))
    value = b.f("where", b.f("eq", exponent, b.lit(0)), subnormal, normal)
    special = b.f("where", b.f("eq", mantissa, b.lit(0)), b.lit(float("inf")), b.lit(float("nan")))
    value = b.f("where", b.f("eq", exponent, b.lit(2 ** ebits - 1)), special, value)
    return b.f("mul", value, b.f("sub", b.lit(1), b.f("mul", sign, b.lit(2))))


def _decode(b: _Builder, name: str, nbytes: int):
    """The value of a little-endian element of dtype `name` from its bytes (sources 0 .. nbytes-1)."""
    byte = [b.source(j) for j in range(nbytes)]
    if name in _INTS:  # the low bytes (exact below 2 ** 24), then the top byte, signed if the dtype is
        value = b.lit(0)
        for j in range(nbytes - 1):
            value = b.f("add", value, b.f("mul", byte[j], b.lit(256.0 ** j)))
        top = byte[-1]
        if _INTS[name][1]:
            top = b.f("sub", top, b.f("mul", b.f("ge", top, b.lit(128)), b.lit(256)))
        return b.f("add", b.f("mul", top, b.lit(256.0 ** (nbytes - 1))), value)
    mbits, bias, ebits = _FLOATS[name]
    high = b.f("add", byte[-2], b.f("mul", byte[-1], b.lit(256)))  # the top 16 bits: sign, exponent, mantissa top
    sign = b.f("floor", b.f("div", high, b.lit(32768)))
    top_mbits = 15 - ebits
    exponent = _field(b, high, top_mbits, ebits)
    mantissa = _field(b, high, 0, top_mbits)
    if nbytes == 4:  # the low 16 bits complete the mantissa
        low = b.f("add", byte[0], b.f("mul", byte[1], b.lit(256)))
        mantissa = b.f("add", b.f("mul", mantissa, b.lit(65536)), low)
    return _float(b, sign, exponent, mantissa, mbits, bias, ebits)


def copy_bytes(dst: Tile, src: Tile, mask, name: str) -> None:
    """dst = src where src is device memory read as another dtype (.ap(dtype=))."""
    if hasattr(dst._buffer, "raw"):
        raise NKIError(f"NKI {name}: writing through .ap(dtype={dst.dtype.name}) on '{dst.name}' is supported for "
                       "packed MX dtypes only")
    dtype_name = src.dtype.name
    nbytes = src.dtype.itemsize
    if dtype_name not in _INTS and dtype_name not in _FLOATS:
        raise NKIError(f"NKI {name}: reading device memory as {dtype_name} is not supported")
    raw = src._buffer.raw
    views = [_matched(Tile(raw, src.offset * nbytes + j, src.sizes, [st * nbytes for st in src.strides], src.checks),
                      dst.shape) for j in range(nbytes)]
    b = _Builder()
    _decode(b, dtype_name, nbytes)
    current().emit(Op("pointwise", dst, views, b.nodes, mask=mask, dma=True, name=name))


def _word_fields(b: _Builder, v):
    """(sign, biased exponent, 23-bit mantissa) of the float32 value v, as integers."""
    a = b.f("abs", v)
    sign = b.f("logical_or", b.f("lt", v, b.lit(0)), b.f("lt", b.f("div", b.lit(1), v), b.lit(0)))
    e = b.f("maximum", b.floor_log2(b.f("maximum", a, b.lit(2.0 ** -149))), b.lit(-126))
    subnormal = b.f("lt", a, b.lit(2.0 ** -126))
    exponent = b.f("where", subnormal, b.lit(0), b.f("add", e, b.lit(127)))
    mantissa = b.f("sub", b.f("div", a, b.f("exp2", b.f("sub", e, b.lit(23)))),
                   b.f("where", subnormal, b.lit(0), b.lit(2 ** 23)))
    infinite = b.f("eq", a, b.lit(float("inf")))
    nan = b.f("ne", v, v)
    special = b.f("logical_or", infinite, nan)
    exponent = b.f("where", special, b.lit(255), exponent)
    mantissa = b.f("where", nan, b.lit(2 ** 22), b.f("where", infinite, b.lit(0), mantissa))
    return sign, exponent, mantissa


def split_words(tile: Tile, wanted, pattern, offset) -> Tile:
    """An on-chip float32 tile's words seen as bfloat16 halves, or as float8_e4m3 bytes
    (tile.ap(pattern, dtype=...)): the parts are made when the view is taken (a copy, so later
    writes to the tile do not show). The bytes are held as their codes (DMAs to device memory copy
    them as they are), so every bit of a word survives."""
    parts = {"bfloat16": 2, "float8_e4m3": 4}.get(wanted.name)
    if tile.dtype.name != "float32" or parts is None or getattr(tile, "_pitch", None) is not None:
        raise NKIError(f"NKI: .ap(dtype={wanted.name}) on the on-chip '{tile.name}' ({tile.dtype.name}): on chip, "
                       "float32 words seen as bfloat16 halves or float8_e4m3 bytes are supported")
    if not isinstance(tile.offset, int) or not isinstance(offset, int):  # traced again with loops unrolled
        raise KernelTraceError(f".ap(dtype={wanted.name}) on '{tile.name}' needs a constant offset")
    first = tile.offset
    last = first + sum((s - 1) * st for s, st in zip(tile.sizes, tile.strides) if st > 0)
    words = last - first + 1
    ctx = current()
    split = Buffer(ctx.name(f"{tile.name}_{wanted.name}_{ctx.names}"), tile._buffer.space, wanted, (parts * words,))
    if parts == 4:
        split.codes = True  # holds bytes, not values (_ops.holds_fp8_bytes)
    ctx.allocate_unchecked(split)
    source = Tile(tile._buffer, first, [1, words], [0, 1])
    for part in range(parts):  # little-endian: the low part first
        b = _Builder()
        sign, exponent, mantissa = _word_fields(b, b.source(0))
        if parts == 4:
            _word_byte(b, sign, exponent, mantissa, part)
        else:
            _word_half(b, sign, exponent, mantissa, part)
        current().emit(Op("pointwise", Tile(split, part, [1, words], [0, parts]), [source], b.nodes,
                          name=f".ap(dtype={wanted.name})"))
    sizes = [int(s) for _, s in pattern]
    strides = [int(st) for st, _ in pattern]
    view = Tile(split, parts * (tile.offset - first) + offset, sizes, strides)
    top = view.offset + sum((s - 1) * st for s, st in zip(sizes, strides) if st > 0)
    if view.offset < 0 or top >= split.elements:
        raise NKIError(f"NKI: out-of-bounds access pattern on '{tile.name}' as {wanted.name}: elements "
                       f"{view.offset}..{top} of {split.elements}")
    return view


def _word_half(b: _Builder, sign, exponent, mantissa, half: int):
    """Half `half` of a float32 word (fields from _word_fields) read as a bfloat16."""
    top = b.f("floor", b.f("div", mantissa, b.lit(65536)))
    if half:  # the high half: sign, the exponent and the mantissa's top 7 bits
        return _float(b, sign, exponent, top, 7, 127, 8)
    low = b.f("sub", mantissa, b.f("mul", top, b.lit(65536)))  # the mantissa's low 16 bits, read as a bfloat16
    return _float(b, b.f("floor", b.f("div", low, b.lit(32768))), _field(b, low, 7, 8), _field(b, low, 0, 7), 7, 127, 8)


def _word_byte(b: _Builder, sign, exponent, mantissa, k: int):
    """Byte k (0 the lowest) of a float32 word, from its fields, as an integer."""
    if k == 3:  # the sign and the exponent's top 7 bits
        return b.f("add", b.f("mul", sign, b.lit(128)), b.f("floor", b.f("div", exponent, b.lit(2))))
    if k == 2:  # the exponent's low bit and the mantissa's top 7 bits
        return b.f("add", b.f("mul", _field(b, exponent, 0, 1), b.lit(128)), _field(b, mantissa, 16, 7))
    return _field(b, mantissa, 8 * k, 8)


# NKI's float8_e4m3 (1 sign, 4 exponent, 3 mantissa bits, bias 7) is IEEE-style: exponent 15 holds
# the infinities and NaNs, so its largest finite value is 240 (float8_e4m3fn's is 448).
E4M3 = Format(3, 7, 240.0, 7, 8)


def _encode_e4m3(b: _Builder, v):
    """The byte of float v rounded to float8_e4m3: to nearest, ties to even; from 248 (halfway to
    the next power of two) on, infinity; NaN as 0x7F."""
    a = b.f("abs", v)
    magnitude = b.f("where", b.f("ge", a, b.lit(248.0)), b.lit(0x78),  # round_to saturates at 240
                    b.encode(b.round_to(a, E4M3), E4M3))
    negative = b.f("logical_or", b.f("lt", v, b.lit(0)), b.f("lt", b.f("div", b.lit(1), v), b.lit(0)))  # -0 too
    code = b.f("add", b.f("mul", negative, b.lit(128)), magnitude)
    return b.f("where", b.f("ne", v, v), b.lit(0x7F), code)


def _decode_e4m3(b: _Builder, code):
    """The value of the float8_e4m3 byte `code`."""
    return _float(b, b.f("floor", b.f("div", code, b.lit(128))), _field(b, code, 3, 4), _field(b, code, 0, 3), 3, 7, 4)


def copy_fp8(dst: Tile, src: Tile, mask, name: str) -> None:
    """dst = src where either holds float8_e4m3 bytes (_ops.holds_fp8_bytes): values are encoded
    into bytes, bytes decoded into values, and bytes copied as they are."""
    to_bytes, from_bytes = holds_fp8_bytes(dst), holds_fp8_bytes(src)
    b = _Builder()
    x = b.source(0)
    if to_bytes and not from_bytes:
        _encode_e4m3(b, x)
    elif from_bytes and not to_bytes:
        _decode_e4m3(b, x)
    dma = not dst.buffer.on_chip or not src.buffer.on_chip
    current().emit(Op("pointwise", dst, [_matched(src, dst.shape)], b.nodes, mask=mask, dma=dma, name=name))


extensions.provide(split_words=split_words, copy_bytes=copy_bytes, copy_fp8=copy_fp8)
