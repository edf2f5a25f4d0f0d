"""nki.isa's microscaling (OCP MX) instructions: nisa.quantize_mx and nisa.nc_matmul_mx, and the
packed tiles they use (float8_e4m3fn_x4, float8_e5m2_x4, float4_e2m1fn_x4: four values per
element).

On chip a packed tile holds its values unpacked, four floats per element (each exactly a value of
its format), so its element strides count four floats; in device memory it is the bytes AWS's
formats define (FP8: four bytes per element, first value in the lowest byte; FP4: two bytes, two
values per byte, low nibble first). A scale is the biased exponent of an E8M0 number (2 ** (s -
127)), one per group of 8 partitions x 4 values, the group of partitions [8 g, 8 g + 8) kept in
partition 32 (g // 4) + g % 4 of the scale tile (the SBUF quadrant layout). Every step is an
ordinary pointwise, reduce or matmul op, so compiled and interpreted kernels agree."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ._context import Expression, Op, check_matmul_sizes, current
from ._dtypes import DTYPES, to_dtype
from ._tensor import SPACES, Buffer, NKIError, Tile, extensions


@dataclass(frozen=True)
class Format:
    """An MX element format: mantissa bits, exponent bias, largest finite value, its exponent."""
    mantissa: int
    bias: int
    largest: float
    emax: int
    bits: int  # per value: 8 or 4

    @property
    def emin(self) -> int:
        return 1 - self.bias


FORMATS = {
    "float8_e4m3fn_x4": Format(3, 7, 448.0, 8, 8),
    "float8_e5m2_x4": Format(2, 15, 57344.0, 15, 8),
    "float4_e2m1fn_x4": Format(1, 1, 6.0, 2, 4),
}
MX_OPS = ("nisa.quantize_mx", "nisa.nc_matmul_mx", "nisa.dma_copy (MX)")


def is_packed(t) -> bool:
    return isinstance(t, Tile) and t.dtype.packed != 1


def _format(t: Tile, where: str) -> Format:
    fmt = FORMATS.get(t.dtype.name)
    if fmt is None:
        raise NKIError(f"NKI {where}: '{t.name}' is {t.dtype.name}; expected one of {sorted(FORMATS)}")
    return fmt


# Expressions ---------------------------------------------------------------------------------------
class _Builder(Expression):
    """Expression nodes with the arithmetic the MX formats need."""

    def lit(self, value):
        return self.literal(float(value))

    def f(self, name, *args):
        return self.op(name, *args)

    def floor_log2(self, a):
        """floor(log2(a)) for a > 0, exact at powers of two whatever log2's rounding."""
        e = self.f("floor", self.f("log2", a))
        e = self.f("sub", e, self.f("gt", self.f("exp2", e), a))
        return self.f("add", e, self.f("le", self.f("exp2", self.f("add", e, self.lit(1))), a))

    def round_to(self, v, fmt: Format):
        """v rounded to the nearest value of fmt (ties to even), saturating at its largest value."""
        a = self.f("minimum", self.f("abs", v), self.lit(fmt.largest))
        e = self.f("maximum", self.floor_log2(self.f("maximum", a, self.lit(2.0 ** -100))), self.lit(fmt.emin))
        quantum = self.f("exp2", self.f("sub", e, self.lit(fmt.mantissa)))
        rounded = self.f("mul", self.f("round", self.f("div", a, quantum)), quantum)
        return self.f("mul", rounded, self.f("sign", v))

    def decode(self, code, fmt: Format):
        """The value of fmt whose bits are `code` (an integer 0 .. 2 ** bits - 1)."""
        sign_weight = 2 ** (fmt.bits - 1)
        s = self.f("floor", self.f("div", code, self.lit(sign_weight)))
        r = self.f("sub", code, self.f("mul", s, self.lit(sign_weight)))
        e = self.f("floor", self.f("div", r, self.lit(2 ** fmt.mantissa)))
        mant = self.f("sub", r, self.f("mul", e, self.lit(2 ** fmt.mantissa)))
        normal = self.f("mul", self.f("add", mant, self.lit(2 ** fmt.mantissa)),
                        self.f("exp2", self.f("sub", e, self.lit(fmt.bias + fmt.mantissa))))
        sub = self.f("mul", mant, self.lit(2.0 ** (fmt.emin - fmt.mantissa)))
        value = self.f("where", self.f("eq", e, self.lit(0)), sub, normal)
        sign = self.f("sub", self.lit(1), self.f("mul", s, self.lit(2)))
        value = self.f("mul", value, sign)
        if fmt.bits == 8 and fmt.mantissa == 3:  # e4m3fn: only S.1111.111 is NaN
            value = self.f("where", self.f("eq", r, self.lit(127)), self.lit(math.nan), value)
        elif fmt.bits == 8:  # e5m2: exponent 31 is infinity or NaN
            special = self.f("mul", self.f("where", self.f("eq", mant, self.lit(0)), self.lit(math.inf),
                                           self.lit(math.nan)), sign)
            value = self.f("where", self.f("eq", e, self.lit(31)), special, value)
        return value

    def encode(self, v, fmt: Format):
        """The bits (an integer) of v, a value of fmt."""
        a = self.f("abs", v)
        e = self.f("maximum", self.floor_log2(self.f("maximum", a, self.lit(2.0 ** -100))), self.lit(fmt.emin))
        subnormal = self.f("lt", a, self.lit(2.0 ** fmt.emin))
        field = self.f("where", subnormal, self.lit(0), self.f("add", e, self.lit(fmt.bias)))
        implicit = self.f("where", subnormal, self.lit(0), self.lit(2 ** fmt.mantissa))
        mant = self.f("sub", self.f("div", a, self.f("exp2", self.f("sub", e, self.lit(fmt.mantissa)))), implicit)
        negative = self.f("logical_or", self.f("lt", v, self.lit(0)),  # the sign bit, also of -0
                          self.f("lt", self.f("div", self.lit(1), v), self.lit(0)))
        sign = self.f("mul", negative, self.lit(2 ** (fmt.bits - 1)))
        code = self.f("add", self.f("add", sign, self.f("mul", field, self.lit(2 ** fmt.mantissa))), mant)
        if fmt.bits == 8:
            top = 124 if fmt.mantissa == 2 else 127  # e5m2 infinity; e4m3fn has none (saturated before)
            code = self.f("where", self.f("eq", a, self.lit(math.inf)), self.f("add", sign, self.lit(top)), code)
            code = self.f("where", self.f("ne", v, v), self.lit(127), code)
        return code

    def scale_of(self, amax, fmt: Format):
        """The E8M0 scale (biased exponent) of a group whose largest magnitude is amax: the float32
        exponent field of amax less the format's largest exponent, at least 0."""
        e = self.floor_log2(self.f("maximum", amax, self.lit(2.0 ** -140)))
        biased = self.f("maximum", self.f("add", e, self.lit(127)), self.lit(0))
        return self.f("maximum", self.f("sub", biased, self.lit(fmt.emax)), self.lit(0))


def _emit(kind, dst, sources, builder, **extra):
    current().emit(Op(kind, dst, list(sources), builder.nodes, name=extra.pop("name", "nisa.quantize_mx"), **extra))


def _scratch(shape, space="sbuf", name="mx"):
    """An internal on-chip float32 buffer (not counted against the kernel's capacity)."""
    ctx = current()
    buf = Buffer(ctx.name(f"{name}{ctx.names}"), SPACES[space], DTYPES["float32"], tuple(shape))
    ctx.allocate_unchecked(buf)
    strides, step = [], 1
    for s in reversed(shape):
        strides.append(step)
        step *= s
    return Tile(buf, 0, list(shape), list(reversed(strides)))


# Views ---------------------------------------------------------------------------------------------
def _values(t: Tile) -> Tile:
    """A packed on-chip tile [P, F] as its values [P, F, 4]."""
    return Tile(t._buffer, t.offset, t.sizes + [4], t.strides + [1])


def _grouped(t: Tile, groups: int):
    """A [P, F, 4] view (P = 8 * groups) as [groups, 8, F, 4]."""
    p, f, q = t.sizes
    sp, sf, sq = t.strides
    return Tile(t._buffer, t.offset, [groups, 8, f, q], [8 * sp, sp, sf, sq])


def _scale_rows(scale: Tile, groups: int, columns: int) -> Tile:
    """The scale tile's [groups, columns] entries as [quadrants, rows, columns] in the quadrant
    layout: group g in partition 32 (g // 4) + g % 4."""
    rows = min(groups, 4)
    if groups > 4 and groups % 4:
        raise NKIError(f"NKI: MX data of {8 * groups} partitions: use a multiple of 32 partitions")
    need = 32 * (groups // rows - 1) + rows
    if scale.sizes[0] < need or scale.sizes[-1] < columns:
        raise NKIError(f"NKI: the MX scale tile '{scale.name}' {list(scale.sizes)} is too small for {groups} groups of "
                       f"{columns} columns (needs {need} partitions: scales of partitions 32q..32q+31 sit in "
                       "partitions 32q..32q+3)")
    sp, sf = scale.strides[0], scale.strides[-1]
    return Tile(scale._buffer, scale.offset, [groups // rows, rows, columns], [32 * sp, sp, sf])


def _scale_value(b: _Builder, node, scale: Tile):
    """2 ** (s - 127) for a scale s read from `scale` (uint8 holds s; float8_e8m0fnu holds the value)."""
    if scale.dtype.name == "float8_e8m0fnu":
        return node
    return b.f("exp2", b.f("sub", node, b.lit(127)))


def _two_dims(t: Tile) -> Tile:
    """A [P, f1, f2, ...] view as [P, F] when its free dims lie evenly spaced (unit dims dropped),
    as AWS's kernels pass quantize_mx slices of 3-D and 4-D tiles."""
    if len(t.sizes) <= 2 or t.checks:
        return t
    dims = [(s, st) for s, st in zip(t.sizes[1:], t.strides[1:]) if s != 1] or [(1, 1)]
    size, stride = dims[-1]
    for s, st in reversed(dims[:-1]):
        if st != stride * size:
            return t  # not one run of evenly spaced elements: left for the shape check to name
        size *= s
    return Tile(t._buffer, t.offset, [t.sizes[0], size], [t.strides[0], stride])


# DMA between device memory bytes and packed tiles --------------------------------------------------
def reinterpret(tile: Tile, dtype_, pattern, offset) -> Tile:
    """tensor.ap(pattern, offset, dtype=another dtype) on device memory: the tensor's bytes seen as
    elements of that dtype (packed MX elements, or any other: a view DMAs read, see _isa_bytes)."""
    dt = to_dtype(dtype_)
    if tile.buffer.on_chip:
        raise NKIError(f"NKI: .ap(dtype={dt.name}) reinterprets device memory only; '{tile.name}' is "
                       f"{tile.dtype.name} in {tile.buffer.name}")
    source = tile._buffer
    nbytes = source.elements * source.dtype.itemsize
    ctx = current()
    raw = Buffer(source.name + "_bytes", source.space, DTYPES["uint8"], (nbytes,))
    raw.argument = source.argument
    if ctx.interpreting:  # the same memory, as bytes
        raw.storage = source.storage.view(torch.uint8)
    else:
        raw.id = ctx.program.add_buffer(raw.name, "hbm", "uint8", nbytes, source.argument)
    packed = Buffer(source.name + "_" + dt.name, source.space, dt, (nbytes // dt.itemsize,))
    packed.raw, packed.argument, packed.storage = raw, source.argument, source.storage
    if source.dtype.itemsize == dt.itemsize:  # element for element (the start may be a loop or program index)
        start = tile.offset
    else:
        base = tile.offset * source.dtype.itemsize
        if not isinstance(base, int) or base % dt.itemsize:
            raise NKIError(f"NKI: .ap(dtype={dt.name}) on '{tile.name}' must start at a whole {dt.itemsize}-byte "
                           "element")
        start = base // dt.itemsize
    sizes = [int(s) for _, s in pattern]
    strides = [int(st) for st, _ in pattern]
    view = Tile(packed, start + int(offset), sizes, strides)
    top = view.offset + sum((s - 1) * st for s, st in zip(sizes, strides) if st > 0)
    if isinstance(top, int) and (view.offset < 0 or top >= packed.elements):
        raise NKIError(f"NKI: out-of-bounds access pattern on '{tile.name}' as {dt.name}: elements "
                       f"{view.offset}..{top} of {packed.elements}")
    return view


def packed_in_device_memory(ctx, buf: Buffer) -> Tile:
    """nl.ndarray(shape, float8_*_x4, buffer=nl.shared_hbm): int32 words (returned to PyTorch as an
    int32 tensor of `shape`) seen as packed elements, which DMAs from packed tiles encode."""
    if buf.dtype.itemsize != 4:
        raise NKIError(f"NKI: '{buf.name}': device-memory tensors of {buf.dtype.name} are not supported (FP8 x4 "
                       "ones are, as int32 words); pass FP4 data in and out as bytes, read with .ap(dtype=...)")
    words = Buffer(buf.name, buf.space, DTYPES["int32"], buf.shape)
    ctx.allocate(words)
    strides, step = [], 1
    for s in reversed(buf.shape):
        strides.append(step)
        step *= s
    tile = Tile(words, 0, list(buf.shape), list(reversed(strides)))
    return reinterpret(tile, buf.dtype, [[st, s] for st, s in zip(tile.strides, tile.sizes)], 0)


def copy_packed(dst: Tile, src: Tile, name: str) -> None:
    """dst = src where either is packed: device-memory bytes into a packed SBUF tile (decoded), or
    one packed on-chip tile into another of its dtype."""
    if dst.dtype is not src.dtype and not src.checks and not dst.checks:
        # device-memory words of the packed element's size (int32 for FP8 x4) hold its bytes
        plain, packed = (src, dst) if is_packed(dst) else (dst, src)
        if (not plain.buffer.on_chip and packed.buffer.on_chip and not is_packed(plain)
                and plain.dtype.itemsize == packed.dtype.itemsize):
            same = reinterpret(plain, packed.dtype, [[st, n] for st, n in zip(plain.strides, plain.sizes)], 0)
            src, dst = (same, dst) if plain is src else (src, same)
    if dst.dtype is src.dtype and src.buffer.on_chip and not dst.buffer.on_chip:
        _store_packed(dst, src)
        return
    if dst.dtype is not src.dtype or not dst.buffer.on_chip:
        raise NKIError(f"NKI {name}: copying {src.dtype.name} '{src.name}' ({src.buffer.name}) to {dst.dtype.name} "
                       f"'{dst.name}' ({dst.buffer.name}) is not supported: packed MX tiles are loaded from device "
                       "memory (.ap(dtype=...)), made by nisa.quantize_mx and read by nisa.nc_matmul_mx")
    if list(dst.sizes) != list(src.sizes):
        raise NKIError(f"NKI {name}: shapes differ, {list(src.sizes)} to {list(dst.sizes)}")
    fmt = _format(dst, name)
    values = _values(dst)
    if src.buffer.on_chip:
        b = _Builder()
        b.source(0)
        _emit("pointwise", values, [_values(src)], b, name="nisa.dma_copy (MX)")
        return
    raw = src._buffer.raw
    per_element = src.dtype.itemsize  # bytes
    byte_strides = [st * per_element for st in src.strides]
    first = src.offset * per_element
    if fmt.bits == 8:  # one value per byte
        view = Tile(raw, first, src.sizes + [4], byte_strides + [1], src.checks)
        b = _Builder()
        b.decode(b.source(0), fmt)
        _emit("pointwise", values, [view], b, dma=True, name="nisa.dma_copy (MX)")
        return
    for nibble in (0, 1):  # two values per byte, the low nibble first
        view = Tile(raw, first, src.sizes + [2], byte_strides + [1], src.checks)
        target = Tile(values._buffer, values.offset + nibble, src.sizes + [2], values.strides[:-1] + [2])
        b = _Builder()
        byte = b.source(0)
        high = b.f("floor", b.f("div", byte, b.lit(16)))
        code = high if nibble else b.f("sub", byte, b.f("mul", high, b.lit(16)))
        b.decode(code, fmt)
        _emit("pointwise", target, [view], b, dma=True, name="nisa.dma_copy (MX)")


def _store_packed(dst: Tile, src: Tile) -> None:
    """A packed SBUF tile written to device memory as its format's bytes (dst from .ap(dtype=))."""
    raw = getattr(dst._buffer, "raw", None)
    if raw is None:
        raise NKIError(f"NKI: storing {src.dtype.name} '{src.name}' needs a device-memory view made with "
                       ".ap(pattern, dtype=...) over a byte-compatible tensor")
    if list(dst.sizes) != list(src.sizes):
        raise NKIError(f"NKI nisa.dma_copy: shapes differ, {list(src.sizes)} to {list(dst.sizes)}")
    fmt = _format(src, "nisa.dma_copy")
    values = _values(src)
    per_element = dst.dtype.itemsize
    byte_strides = [st * per_element for st in dst.strides]
    if fmt.bits == 8:
        b = _Builder()
        b.encode(b.source(0), fmt)
        _emit("pointwise", Tile(raw, dst.offset * per_element, dst.sizes + [4], byte_strides + [1]), [values], b,
              dma=True, name="nisa.dma_copy (MX)")
        return
    lo = Tile(values._buffer, values.offset, src.sizes + [2], values.strides[:-1] + [2])
    hi = Tile(values._buffer, values.offset + 1, src.sizes + [2], values.strides[:-1] + [2])
    b = _Builder()
    low = b.encode(b.source(0), fmt)
    b.f("add", low, b.f("mul", b.encode(b.source(1), fmt), b.lit(16)))
    _emit("pointwise", Tile(raw, dst.offset * per_element, dst.sizes + [2], byte_strides + [1]), [lo, hi], b,
          dma=True, name="nisa.dma_copy (MX)")


# The instructions ----------------------------------------------------------------------------------
def quantize_mx(dst, src, dst_scale, name=None, **_unused):
    """dst (a packed FP8 tile [P, F / 4]) and dst_scale = src (bfloat16 / float16 [P, F]) quantized
    in groups of 8 partitions x 4 values: each group's scale is the float32 exponent of its largest
    magnitude less the format's largest exponent; values are divided by it, saturated and rounded
    to nearest even."""
    where = "nisa.quantize_mx"
    for t, role in ((dst, "dst"), (src, "src"), (dst_scale, "dst_scale")):
        if not isinstance(t, Tile) or t.buffer.name != "sbuf":
            raise NKIError(f"NKI {where}: {role} must be an SBUF tile, got {t!r}")
    fmt = _format(dst, where)
    if fmt.bits != 8:
        raise NKIError(f"NKI {where}: dst must be float8_e4m3fn_x4 or float8_e5m2_x4, got {dst.dtype.name}")
    if src.dtype.name not in ("bfloat16", "float16", "float32"):
        raise NKIError(f"NKI {where}: src must be bfloat16 or float16, got {src.dtype.name}")
    if dst_scale.dtype.name not in ("uint8", "float8_e8m0fnu"):
        raise NKIError(f"NKI {where}: dst_scale must be uint8 or float8_e8m0fnu, got {dst_scale.dtype.name}")
    src, dst, dst_scale = _two_dims(src), _two_dims(dst), _two_dims(dst_scale)
    if len(src.sizes) != 2:
        src = src.reshape(src.sizes[0], math.prod(src.sizes[1:]))
    p, f = src.sizes
    if p % 8 or f % 4 or list(dst.sizes) != [p, f // 4]:
        raise NKIError(f"NKI {where}: src [P, F] needs P a multiple of 8 (32 above 32 partitions), F of 4, and dst "
                       f"[P, F / 4]; got src {list(src.sizes)}, dst {list(dst.sizes)}")
    groups, columns = p // 8, f // 4
    sp, sf = src.strides
    grouped_src = Tile(src._buffer, src.offset, [groups, 8, columns, 4], [8 * sp, sp, 4 * sf, sf], src.checks)
    scale = _scratch((groups, columns), name="mx_scale")
    b = _Builder()
    b.f("abs", b.source(0))
    current().emit(Op("reduce", Tile(scale._buffer, 0, [groups, 1, columns, 1], [columns, 0, 1, 0]), [grouped_src],
                      b.nodes, reduce_op="max", reduce_dims=(1, 3), name=where))
    b = _Builder()
    b.scale_of(b.source(0), fmt)
    _emit("pointwise", scale, [scale], b, name=where)
    b = _Builder()
    if dst_scale.dtype.name == "uint8":
        b.source(0)
    else:  # float8_e8m0fnu holds the scale's value
        b.f("exp2", b.f("sub", b.source(0), b.lit(127)))
    rows = _scale_rows(dst_scale, groups, columns)
    _emit("pointwise", rows, [Tile(scale._buffer, 0, rows.sizes, [rows.sizes[1] * columns, columns, 1])], b,
          name=where)
    b = _Builder()
    x = b.source(0)
    factor = b.f("exp2", b.f("sub", b.lit(127), b.source(1)))
    b.round_to(b.f("mul", x, factor), fmt)
    target = _grouped(_values(dst), groups)
    _emit("pointwise", target, [grouped_src, Tile(scale._buffer, 0, target.sizes, [columns, 0, 1, 0])], b, name=where)
    return dst


def _fp4_words(words: Tile, where: str) -> Tile:
    """The [K, F, 4] values of a [K, F] tile of 16-bit words each holding four FP4 codes, low
    nibble first: how float4_e2m1fn_x4 arrays reach a kernel (neuron_dtypes gives them as uint16)."""
    k, f = words.sizes
    out = _scratch((k, f, 4), name="mx_words")
    for nibble in range(4):
        b = _Builder()
        w = b.source(0)
        w = b.f("add", w, b.f("mul", b.f("lt", w, b.lit(0)), b.lit(65536)))  # int16 words
        above = b.f("floor", b.f("div", w, b.lit(16 ** nibble)))
        code = b.f("sub", above, b.f("mul", b.f("floor", b.f("div", above, b.lit(16))), b.lit(16)))
        b.decode(code, FORMATS["float4_e2m1fn_x4"])
        _emit("pointwise", Tile(out._buffer, nibble, [k, f], [4 * f, 4]), [words], b, name=where)
    return out


def _dequantized(data: Tile, scale: Tile, where: str, role: str) -> Tile:
    """[4, K, F] float32 values of a packed [K, F] tile times their group scales."""
    if data.dtype.name in ("uint16", "int16") and data.buffer.on_chip:
        values = _fp4_words(data, where)
    else:
        _format(data, where)
        values = _values(data)
    if data.buffer.name != "sbuf" or scale.buffer.name != "sbuf":
        raise NKIError(f"NKI {where}: the {role} and its scale must be in SBUF")
    k, f = data.sizes
    if k % 8:
        raise NKIError(f"NKI {where}: the {role}'s partition size {k} is not a multiple of 8 (MX groups)")
    groups = k // 8
    out = _scratch((4, k, f), name=f"mx_{role}")
    rows = _scale_rows(scale, groups, f)
    quads, per = rows.sizes[0], rows.sizes[1]
    sp, sf = values.strides[0], values.strides[1]
    src = Tile(values._buffer, values.offset, [quads, per, 8, f, 4], [8 * per * sp, 8 * sp, sp, sf, 1], data.checks)
    scl = Tile(scale._buffer, rows.offset, [quads, per, 8, f, 4], [rows.strides[0], rows.strides[1], 0, rows.strides[2], 0])
    dst = Tile(out._buffer, 0, [quads, per, 8, f, 4], [8 * per * f, 8 * f, f, 1, k * f])
    b = _Builder()
    b.f("mul", b.source(0), _scale_value(b, b.source(1), scale))
    _emit("pointwise", dst, [src, scl], b, name=where)
    return out


def nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position=None, tile_size=None,
                 accumulate=None, name=None, **_unused):
    """dst [M, N] (PSUM) = dequantized stationary [K, M x4]^T @ dequantized moving [K, N x4], the
    contraction over K partitions and the 4 values of each element, accumulated in float32; the
    result adds to dst as nisa.nc_matmul's does (accumulate None follows PSUM accumulation groups)."""
    where = "nisa.nc_matmul_mx"
    if not isinstance(dst, Tile) or dst.buffer.name != "psum":
        raise NKIError(f"NKI {where}: dst must be a PSUM tile, got {dst!r}")
    stationary, moving = _two_dims(stationary), _two_dims(moving)
    stationary_scale, moving_scale, dst = _two_dims(stationary_scale), _two_dims(moving_scale), _two_dims(dst)
    if len(stationary.sizes) != 2 or len(moving.sizes) != 2 or len(dst.sizes) != 2:
        raise NKIError(f"NKI {where}: stationary {list(stationary.sizes)}, moving {list(moving.sizes)} and dst "
                       f"{list(dst.sizes)} must each be [partitions, one run of elements]")
    k, m = stationary.sizes
    n = moving.sizes[1]
    if moving.sizes[0] != k or list(dst.sizes) != [m, n]:
        raise NKIError(f"NKI {where}: stationary {list(stationary.sizes)}, moving {list(moving.sizes)} and dst "
                       f"{list(dst.sizes)} do not make [K, M]^T @ [K, N] -> [M, N]")
    check_matmul_sizes(k, m, n, where)
    st = _dequantized(stationary, stationary_scale, where, "stationary")
    mv = _dequantized(moving, moving_scale, where, "moving")
    product = _scratch((m, n), space="psum", name="mx_product")
    ctx = current()
    for q in range(4):
        a = Tile(st._buffer, q * k * m, [k, m], [m, 1])
        c = Tile(mv._buffer, q * k * n, [k, n], [n, 1])
        ctx.emit(Op("matmul", product, [a, c], accumulate=q > 0, name=where))
    flags = ctx._flag_view(dst)
    b = _Builder()
    if accumulate is False or (accumulate is None and flags is None):
        b.source(0)
        sources = [product]
    elif accumulate is True:
        b.f("add", b.source(1), b.source(0))
        sources = [product, dst]
    else:  # add where dst holds an open accumulation group
        b.f("add", b.f("where", b.source(2), b.source(1), b.lit(0)), b.source(0))
        sources = [product, dst, flags]
    ctx.emit(Op("pointwise", dst, sources, b.nodes, name=where))
    return dst


extensions.provide(reinterpret=reinterpret, packed_in_device_memory=packed_in_device_memory, copy_packed=copy_packed)
