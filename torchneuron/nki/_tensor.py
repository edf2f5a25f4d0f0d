"""NKI tensors: memory spaces, buffers and the strided views kernels slice, with the
hardware's rules on shapes checked where a view is made or used."""
from __future__ import annotations

import itertools
import math

from ._current import current
from ._dtypes import dtype, to_dtype
from ._errors import NKIError
from ._expr import Index, bounds, is_symbolic
from ._indices import ArangeIndex, DynSlice, Mask  # noqa: F401  (re-exported: the index kinds tiles take)
from ._views import ViewMethods

PARTITION_MAX = 128
SBUF_BYTES_PER_PARTITION = 224 * 1024  # 28 MiB over 128 partitions: NeuronCore-v3 (get_nc_version: gen3)
PSUM_BYTES_PER_PARTITION = 16 * 1024  # 2 MiB over 128 partitions
PSUM_TILE_BYTES_PER_PARTITION = 2 * 1024  # one PSUM bank: 512 fp32


class _Extensions:
    """What tiles do that lives in the layers above this module: Tile's operators call the tile ops
    (_ops), and its special views and their copies come from the instruction modules (_isa_indirect,
    _isa_bytes, _isa_mx). Each of those modules provides its entries when imported, so imports
    point one way (down); importing torchneuron.nki imports them all before any kernel runs."""

    NAMES = ("copy_into", "elementwise", "broadcast_to",  # _ops
             "indirect_view", "copy_indirect",  # _isa_indirect: .ap(vector_offset=)
             "split_words", "copy_bytes", "copy_fp8",  # _isa_bytes: bytes seen as another dtype, float8_e4m3
             "reinterpret", "packed_in_device_memory", "copy_packed")  # _isa_mx: packed MX dtypes

    def provide(self, **functions) -> None:
        unknown = sorted(set(functions) - set(self.NAMES))
        if unknown:
            raise TypeError(f"torchneuron.nki: no tile extension point named {unknown}")
        self.__dict__.update(functions)

    def __getattr__(self, name):  # only reached for an entry not provided yet
        if name in self.NAMES:
            raise NKIError(f"torchneuron.nki: '{name}' is not loaded; import torchneuron.nki (not one of its modules "
                           "alone) before running kernels")
        raise AttributeError(name)


extensions = _Extensions()


class MemorySpace:
    """Where a tensor lives: nl.hbm / nl.shared_hbm / nl.private_hbm (device memory), nl.sbuf or
    nl.psum (on chip)."""

    def __init__(self, name: str):
        self.name = name

    @property
    def on_chip(self) -> bool:
        return self.name in ("sbuf", "psum")

    def __repr__(self):
        return f"nl.{self.name}"

    def __call__(self, *args, **kwargs):  # nl.sbuf.view(...) style allocations are not modelled
        raise NKIError(f"nl.{self.name} is a memory space; allocate with nl.ndarray(shape, dtype, buffer=nl.{self.name})")


SPACES = {n: MemorySpace(n) for n in ("hbm", "shared_hbm", "private_hbm", "sbuf", "psum")}


def to_space(value) -> MemorySpace:
    if value is None:
        return SPACES["sbuf"]
    if isinstance(value, MemorySpace):
        return value
    if isinstance(getattr(value, "_nki_space", None), MemorySpace):  # nki.compiler allocators
        return value._nki_space
    if isinstance(value, str) and value in SPACES:
        return SPACES[value]
    raise NKIError(f"NKI: unknown memory space {value!r}; use nl.sbuf, nl.psum, nl.hbm or nl.shared_hbm")


class Buffer:
    """One allocation: its name, memory space, dtype and shape; the executor's storage."""

    def __init__(self, name: str, space: MemorySpace, dtype_: dtype, shape: tuple):
        self.name, self.space, self.dtype, self.shape = name, space, dtype_, tuple(shape)
        self.id = -1  # set by the executor
        self.argument = -1  # HBM: the tensor's place among the kernel's tensors
        self.storage = None  # interpreter: a flat torch tensor
        self.elements = math.prod(self.shape)

    def __repr__(self):
        return f"{self.name} ({self.space.name} {self.dtype.name}{list(self.shape)})"


class ParDim(int):
    """nl.par_dim(n): marks the partition dimension of a shape; dims before it are blocks of tiles."""


def partition_dim(shape) -> int:
    marked = [d for d, s in enumerate(shape) if isinstance(s, ParDim)]
    return marked[0] if marked else 0


def bytes_per_partition(shape, dtype_: dtype) -> int:
    """What a tile of `shape` takes in each partition: every dim but the partition dim."""
    pd = partition_dim(shape)
    return math.prod(s for d, s in enumerate(shape) if d != pd) * dtype_.itemsize


def check_on_chip_shape(shape, space: MemorySpace, dtype_: dtype, name: str) -> None:
    """The partition and per-partition size rules of SBUF and PSUM tiles; a shape with
    nl.par_dim after leading dims is a block of tiles, each checked."""
    pd = partition_dim(shape)
    if pd:
        check_on_chip_shape(tuple(int(s) for s in shape[pd:]), space, dtype_, name)
        return
    if not shape:
        raise NKIError(f"NKI: on-chip tensor '{name}' needs a partition dimension (shape {tuple(shape)})")
    if shape[0] > PARTITION_MAX:
        raise NKIError(f"NKI: partition dimension {shape[0]} of '{name}' (shape {tuple(shape)}) exceeds the "
                       f"{PARTITION_MAX} partitions of {space.name}; tile the first dimension by nl.tile_size.pmax")
    per_partition = math.prod(shape[1:]) * dtype_.itemsize
    if space.name == "psum" and per_partition > PSUM_TILE_BYTES_PER_PARTITION:
        raise NKIError(f"NKI: PSUM tile '{name}' of shape {tuple(shape)} ({dtype_.name}) takes {per_partition} bytes per "
                       f"partition; a PSUM tile holds at most {PSUM_TILE_BYTES_PER_PARTITION} (2 KiB, 512 fp32)")


class Tile(ViewMethods):
    """A strided view of a Buffer: element offset + sum(t[d] * strides[d]) for t < sizes. This is
    the tensor a kernel sees (its arguments, nl.ndarray results and every op's result)."""

    def __init__(self, buffer: Buffer, offset, sizes, strides, checks=()):
        self._buffer, self.offset = buffer, offset
        self.sizes, self.strides = list(sizes), list(strides)
        # Deferred bounds checks of arange indexing: (dim, start, axis, coeff, size, limit); masks cut them.
        self.checks = list(checks)

    # What NKI code reads ---------------------------------------------------------------------
    @property
    def shape(self):
        return tuple(self.sizes)

    @property
    def dtype(self):
        return self._buffer.dtype

    @property
    def buffer(self):
        return self._buffer.space

    @property
    def ndim(self):
        return len(self.sizes)

    @property
    def name(self):
        return self._buffer.name

    def __repr__(self):
        return f"<NKI tile {self._buffer.name} {self._buffer.space.name} {self.dtype.name}{list(self.sizes)}>"

    def __len__(self):
        return self.sizes[0]

    # Views -------------------------------------------------------------------------------------
    def __getitem__(self, key):
        return index_tile(self, key)

    def __setitem__(self, key, value):
        target = index_tile(self, key)
        if isinstance(value, Tile) and value._same_view(target):
            return  # t[i] += x wrote in place already
        extensions.copy_into(target, value)

    def _same_view(self, other) -> bool:
        return (self._buffer is other._buffer and self.sizes == other.sizes and self.strides == other.strides
                and repr(self.offset) == repr(other.offset))

    def reshape(self, *shape):
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else tuple(shape)
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            shape = tuple(math.prod(self.sizes) // known if s == -1 else s for s in shape)
        if math.prod(shape) != math.prod(self.sizes):
            raise NKIError(f"NKI: cannot reshape {self.name} of shape {self.shape} to {shape}")
        packed = self.dtype.packed
        if packed != 1 and self.buffer.on_chip:  # 4 values an element on chip: reshape the elements
            proxy = Tile(self._buffer, 0, self.sizes, [st // packed for st in self.strides], self.checks)
            tile = proxy._reshaped(shape)
            return Tile(self._buffer, self.offset + tile.offset * packed, tile.sizes,
                        [st * packed for st in tile.strides], tile.checks)
        return self._reshaped(shape)

    def _reshaped(self, shape):
        if not self.is_contiguous():
            free = Tile(self._buffer, self.offset, self.sizes[1:], self.strides[1:])
            if not (self.buffer.on_chip and shape and self.sizes and shape[0] == self.sizes[0] and free.is_contiguous()):
                raise NKIError(f"NKI: reshape needs a contiguous view; {self.name}{list(self.sizes)} has strides "
                               f"{self.strides}")
            # the partition dim kept, each partition's elements contiguous: reshape them
            inner, step = [], 1  # contiguous strides of the free dims
            for s in reversed(shape[1:]):
                inner.insert(0, step)
                step *= s
            tile = Tile(self._buffer, self.offset, shape, [self.strides[0]] + inner)
            if getattr(self, "_pitch", None) is not None:  # a placed tile: .ap() patterns keep counting alike
                tile._pitch = self._pitch
            return tile
        strides, step = [], 1
        for s in reversed(shape):
            strides.append(step)
            step *= s
        tile = Tile(self._buffer, self.offset, shape, list(reversed(strides)))
        if tile.buffer.on_chip:
            check_on_chip_shape(shape, tile.buffer, self.dtype, self.name)
        return tile

    def view(self, *args):
        """tensor.view(shape) as reshape; tensor.view(dtype) its bytes as another dtype (reinterpret_cast)."""
        if len(args) == 1 and not isinstance(args[0], (tuple, list, int)):
            return self.reinterpret_cast(args[0])
        return self.reshape(*args)

    def ap(self, pattern, offset=0, scalar_offset=None, indirect_dim=0, dtype=None, vector_offset=None, **_unused):
        """An access pattern: [[stride, size], ...] (partition first) from element `offset` of this
        tensor; scalar_offset (a one-element tile read at run time) indexes dim indirect_dim of it."""
        if dtype is not None and to_dtype(dtype) is not self.dtype:
            wanted = to_dtype(dtype)
            differs = wanted.is_float or self.dtype.is_float or wanted.itemsize != self.dtype.itemsize
            if differs and not self.buffer.on_chip and scalar_offset is None and vector_offset is None:
                return extensions.reinterpret(self, wanted, pattern, offset)  # device-memory bytes as another dtype
            if differs and self.buffer.on_chip and scalar_offset is None and vector_offset is None:
                return extensions.split_words(self, wanted, pattern, offset)  # float32 words as bfloat16 halves
            if differs:
                raise NKIError(f"NKI: .ap(dtype={wanted.name}) on '{self.name}' ({self.dtype.name} in "
                               f"{self.buffer.name}): reinterpreting bytes as another dtype is supported for "
                               "device memory only (without scalar_offset / vector_offset)")
        packed = self.dtype.packed
        if packed != 1 and self.buffer.on_chip and vector_offset is None and not _unused.get("unpacked"):
            # a packed MX tile keeps 4 values an element on chip: the pattern counts elements
            proxy = Tile(self._buffer, 0, self.sizes, [st // packed for st in self.strides], self.checks)
            view = proxy.ap(pattern, offset, scalar_offset, indirect_dim, unpacked=True)
            view.offset = self.offset + view.offset * packed
            view.strides = [st * packed for st in view.strides]
            return view
        sizes = [int(size) for _, size in pattern]
        strides = [int(stride) for stride, _ in pattern]
        pitch = getattr(self, "_pitch", None)
        if pitch is None and self.buffer.on_chip and len(self.sizes) > 1 and self.sizes[0] > 1 and \
                Tile(self._buffer, 0, self.sizes[1:], self.strides[1:]).is_contiguous() and \
                self.strides[0] != math.prod(self.sizes[1:]):  # a view (t[:, 0:4], a view of a placed tile): alike
            pitch = (math.prod(self.sizes[1:]), self.strides[0])
        if pitch is not None:  # a placed tile: the pattern counts elements as if partitions were rows of `logical`
            logical, physical = pitch
            strides = [(st // logical) * physical + st % logical if st >= logical else st for st in strides]
            if not is_symbolic(offset):
                offset = (offset // logical) * physical + offset % logical
        if isinstance(getattr(scalar_offset, "tile", None), Tile):  # a register (nisa.register_alloc)
            scalar_offset = scalar_offset.tile
        if scalar_offset is not None and not isinstance(scalar_offset, Tile):  # a loop variable or an int
            if not isinstance(scalar_offset, int) and not is_symbolic(scalar_offset):
                raise NKIError("NKI: .ap(scalar_offset=) takes a one-element tile, a register or a loop variable")
            offset = offset + scalar_offset * self.strides[int(indirect_dim)]
            scalar_offset = None
        if scalar_offset is not None:
            dim = int(indirect_dim)
            where = f"dim {dim} of '{self.name}' (.ap scalar_offset)"
            # the run-time index keeps the whole pattern inside the tensor (and indexes dim `dim`)
            _, hi = bounds(self.offset + offset)
            top = hi + sum((s - 1) * st for s, st in zip(sizes, strides) if st > 0)
            room = (self._buffer.elements - 1 - top) // self.strides[dim] + 1 if self.strides[dim] > 0 else 1
            limit = max(1, min(self.sizes[dim], room))
            offset = offset + current().dynamic_index(scalar_offset, limit, where) * self.strides[dim]
        tile = Tile(self._buffer, self.offset + offset, sizes, strides)
        lo, hi = bounds(tile.offset)
        top = hi + sum((s - 1) * st for s, st in zip(sizes, strides) if st > 0)
        bottom = lo + sum((s - 1) * st for s, st in zip(sizes, strides) if st < 0)
        if vector_offset is not None:  # partition p at index vector_offset[p] of dim indirect_dim
            return extensions.indirect_view(self, tile, vector_offset, indirect_dim)
        if bottom < 0 or top >= self._buffer.elements:  # refused when an instruction uses it (kernels build
            # patterns they only use behind a bounds test)
            return out_of_bounds_view(tile, f"NKI: out-of-bounds access pattern on '{self.name}': elements "
                                            f"{bottom}..{top} of {self._buffer.elements}")
        return tile

    def is_contiguous(self) -> bool:
        step = 1
        for size, stride in zip(reversed(self.sizes), reversed(self.strides)):
            if size != 1 and stride != step:
                return False
            step *= size
        return True

    def broadcast_to(self, shape):
        return extensions.broadcast_to(self, shape)

    def expanded(self, shape) -> "Tile":
        """This view with size-1 (or missing leading) dims repeated to `shape` (stride 0)."""
        shape = list(shape)
        if len(self.sizes) > len(shape):
            raise NKIError(f"NKI: cannot broadcast {self.name}{list(self.sizes)} to {shape}")
        pad = len(shape) - len(self.sizes)
        sizes, strides = [1] * pad + self.sizes, [0] * pad + self.strides
        if pad and self.buffer.on_chip and self.sizes:
            # an on-chip tile of lower rank keeps its partition dim: [P] (or [P, F]) against [P, F, G]
            sizes, strides = self.sizes + [1] * pad, self.strides + [0] * pad
        for d, target in enumerate(shape):
            if sizes[d] != target:
                if sizes[d] != 1:
                    raise NKIError(f"NKI: cannot broadcast {self.name}{list(self.sizes)} to {shape}: dim {d} is "
                                   f"{sizes[d]}")
                sizes[d], strides[d] = target, 0
        return Tile(self._buffer, self.offset, sizes, strides, self.checks)

    # Arithmetic sugar (legacy kernels write a + b on tiles) --------------------------------------
    def _binary(self, op, other, reverse=False):
        return extensions.elementwise(op, other, self) if reverse else extensions.elementwise(op, self, other)

    def __add__(self, o): return self._binary("add", o)
    def __radd__(self, o): return self._binary("add", o, True)
    def __sub__(self, o): return self._binary("sub", o)
    def __rsub__(self, o): return self._binary("sub", o, True)
    def __mul__(self, o): return self._binary("mul", o)
    def __rmul__(self, o): return self._binary("mul", o, True)
    def __truediv__(self, o): return self._binary("div", o)
    def __rtruediv__(self, o): return self._binary("div", o, True)
    def __pow__(self, o): return self._binary("pow", o)
    def __neg__(self): return self._binary("mul", -1.0)
    def __lt__(self, o): return self._binary("lt", o)
    def __le__(self, o): return self._binary("le", o)
    def __gt__(self, o): return self._binary("gt", o)
    def __ge__(self, o): return self._binary("ge", o)

    # In place (acc += nl.matmul(...) in a loop adds into acc's memory, as NKI does).
    def _inplace(self, op, other):
        extensions.elementwise(op, self, other, out=self)
        return self

    def __iadd__(self, o): return self._inplace("add", o)
    def __isub__(self, o): return self._inplace("sub", o)
    def __imul__(self, o): return self._inplace("mul", o)
    def __itruediv__(self, o): return self._inplace("div", o)

    def __eq__(self, o):
        if o is None:  # `tensor == None` is a Python test of an optional argument
            return False
        return self._binary("eq", o)

    def __ne__(self, o):
        if o is None:
            return True
        return self._binary("ne", o)

    __hash__ = object.__hash__


ViewMethods._view_class = Tile


class _OutOfBounds(Tile):
    """An access pattern that reaches past its tensor: kernels build such patterns and use them only
    behind a bounds test (AWS's output_projection_tkg); any instruction that uses it, or a view of
    it, raises the bounds error."""

    out_of_bounds = ""

    def _keep(self, tile):
        return out_of_bounds_view(tile, self.out_of_bounds) if isinstance(tile, Tile) else tile

    def __getitem__(self, key):
        return self._keep(super().__getitem__(key))

    def reshape(self, *shape):
        return self._keep(super().reshape(*shape))

    def view(self, *args):
        return self._keep(super().view(*args))

    def expanded(self, shape):
        return self._keep(super().expanded(shape))

    def ap(self, *args, **kwargs):
        return self._keep(super().ap(*args, **kwargs))


def out_of_bounds_view(tile: Tile, message: str) -> Tile:
    view = _OutOfBounds(tile._buffer, tile.offset, tile.sizes, tile.strides, tile.checks)
    view.out_of_bounds = message
    return view


def _dim_error(tile: Tile, d: int, lo, hi, size) -> NKIError:
    return NKIError(f"NKI: out-of-bounds access on '{tile.name}' ({tile.buffer.name} {tile.dtype.name}"
                    f"{list(tile.sizes)}): dim {d} indices {lo}..{hi}, but its size is {size}")


def _check_range(tile: Tile, d: int, start, size: int, limit: int) -> None:
    lo, hi = bounds(start)
    if lo < 0 or hi + size > limit:
        raise _dim_error(tile, d, lo, hi + size - 1, limit)


def index_tile(tile: Tile, key) -> Tile:
    """tile[key] for ints, loop variables, slices, nl.ds, None, ... and legacy nl.arange indices."""
    key = key if isinstance(key, tuple) else (key,)
    if any(isinstance(k, ArangeIndex) for k in key):
        return _index_arange(tile, key)
    if any(k is Ellipsis for k in key):
        at = key.index(Ellipsis)
        fill = len(tile.sizes) - (len(key) - 1 - sum(k is None for k in key))
        key = key[:at] + (slice(None),) * fill + key[at + 1:]
    used = sum(k is not None for k in key)
    if used > len(tile.sizes):
        raise NKIError(f"NKI: {used} indices for '{tile.name}' of rank {len(tile.sizes)}")
    key = key + (slice(None),) * (len(tile.sizes) - used)
    offset, sizes, strides, d = tile.offset, [], [], 0
    for k in key:
        if k is None:
            sizes.append(1)
            strides.append(0)
            continue
        size, stride = tile.sizes[d], tile.strides[d]
        if isinstance(k, Tile):  # a dynamic index: the value of a one-element on-chip tile at run time
            k = current().dynamic_index(k, size, f"dim {d} of '{tile.name}'")
        if isinstance(k, (int, Index)) and not isinstance(k, bool):
            if isinstance(k, int) and k < 0:
                k += size
            _check_range(tile, d, k, 1, size)
            offset = offset + k * stride
        elif isinstance(k, DynSlice):
            _check_range(tile, d, k.start, (k.size - 1) * k.step + 1, size)
            offset = offset + k.start * stride
            sizes.append(k.size)
            strides.append(stride * k.step)
        elif isinstance(k, slice):
            step = 1 if k.step is None else k.step
            if not isinstance(step, int) or step <= 0:
                raise NKIError(f"NKI: slice steps must be positive constants, got {k.step!r}")
            start = 0 if k.start is None else k.start
            stop = size if k.stop is None else k.stop
            if isinstance(start, int) and start < 0:
                start += size
            if isinstance(stop, int) and stop < 0:
                stop += size
            extent = stop - start
            if is_symbolic(extent):
                if extent.terms is None or any(c != 0 for c in extent.terms.values()):
                    raise NKIError(f"NKI: slice {start!r}:{stop!r} of '{tile.name}' has no constant size; use nl.ds(start, size)")
                extent = extent.const
            if not is_symbolic(start) and not is_symbolic(stop):
                extent = max(0, stop - start)  # past the end is an error, not clamped as in NumPy
            count = max(0, (extent + step - 1) // step)
            _check_range(tile, d, start, (count - 1) * step + 1 if count else 0, size)
            offset = offset + start * stride
            sizes.append(count)
            strides.append(stride * step)
        else:
            raise NKIError(f"NKI: cannot index '{tile.name}' with {k!r}")
        d += 1
    if tile.buffer.on_chip and sizes and sizes[0] > PARTITION_MAX and key and isinstance(key[0], (int, Index)) \
            and not isinstance(key[0], bool):  # t[0, :] of a [P, F] tile: one partition, its F elements
        sizes, strides = [1] + sizes, [tile.strides[0]] + strides
    result = Tile(tile._buffer, offset, sizes, strides, tile.checks)
    if result.buffer.on_chip and sizes and sizes[0] > PARTITION_MAX:
        raise NKIError(f"NKI: a view of '{tile.name}' with {sizes[0]} partitions exceeds {PARTITION_MAX}")
    return result


def _index_arange(tile: Tile, key) -> Tile:
    if len(key) != len(tile.sizes):
        raise NKIError(f"NKI: index '{tile.name}' of rank {len(tile.sizes)} with one index per dimension when "
                       "using nl.arange / nl.mgrid")
    ndim = next(k.ndim for k in key if isinstance(k, ArangeIndex))
    sizes, strides = [1] * ndim, [0] * ndim
    offset, checks = tile.offset, list(tile.checks)
    for d, k in enumerate(key):
        if isinstance(k, ArangeIndex):
            if k.ndim != ndim:
                raise NKIError("NKI: nl.arange indices of one access must have the same rank ([:, None] with [None, :])")
            for axis, coeff in k.coeffs.items():
                if sizes[axis] != 1 and sizes[axis] != k.sizes[axis]:
                    raise NKIError(f"NKI: two aranges of sizes {sizes[axis]} and {k.sizes[axis]} on one axis")
                sizes[axis] = k.sizes[axis]
                strides[axis] += coeff * tile.strides[d]
            offset = offset + k.start * tile.strides[d]
            checks.append((d, k.start, dict(k.coeffs), dict(k.sizes), tile.sizes[d]))
        elif isinstance(k, (int, Index)):
            _check_range(tile, d, k, 1, tile.sizes[d])
            offset = offset + k * tile.strides[d]
        else:
            raise NKIError(f"NKI: mixing nl.arange with {k!r} in one index is not supported; use nl.arange for every dim")
    return Tile(tile._buffer, offset, sizes, strides, checks)


def check_deferred(tile: Tile, mask: Mask | None) -> None:
    """Checks arange-indexed dims against their limits, within what the mask lets the op touch:
    the highest index is start + sum(coeff * last), last = min(size, upper) - 1 per axis, bounded
    by every choice of the two (affine terms cancel, so a tail mask proves its access in bounds)."""
    mask_bounds = mask.bounds if mask is not None else {}
    for d, start, coeffs, sizes, limit in tile.checks:
        options = []
        for axis, coeff in coeffs.items():
            lower, upper = mask_bounds.get(axis, (None, None))
            last = [sizes[axis] - 1] + ([upper - 1] if upper is not None else [])
            first = [0] + ([lower] if lower is not None else [])
            options.append([(coeff, f, l) for f in first for l in last])
        hi = lo = None
        for choice in itertools.product(*options):
            top = start + _builtin_sum(c * (l if c > 0 else f) for c, f, l in choice)
            bottom = start + _builtin_sum(c * (f if c > 0 else l) for c, f, l in choice)
            hi = bounds(top)[1] if hi is None else min(hi, bounds(top)[1])
            lo = bounds(bottom)[0] if lo is None else max(lo, bounds(bottom)[0])
        if hi is None or hi < lo:
            continue  # nothing left to touch
        if lo < 0 or hi >= limit:
            raise NKIError(f"NKI: out-of-bounds access on '{tile.name}' ({tile.buffer.name} {tile.dtype.name}"
                           f"{list(tile._buffer.shape)}): dim {d} indices {lo}..{hi}, but its size is {limit}"
                           + ("" if mask is not None else "; mask the access with mask=(...)"))


def _builtin_sum(values):
    total = 0
    for v in values:
        total = total + v
    return total
