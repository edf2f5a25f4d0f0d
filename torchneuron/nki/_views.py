"""NKI 0.4's view methods of a tensor (nl.NkiTensor): permute, broadcast, expand_dim, squeeze_dim,
reshape_dim, flatten_dims, slice, select, vector_select, rearrange, get_pattern. Tile inherits
them; each returns a new view of the same memory (no data moves)."""
from __future__ import annotations

import math

from ._dtypes import to_dtype
from ._errors import NKIError


class ViewMethods:
    """The shape-based views of an NkiTensor, on a Tile's (buffer, offset, sizes, strides)."""

    strides: list = ()  # (set per view) the element step of each dim
    offset = 0  # (set per view) the element where the view starts (an int or a loop expression)
    _view_class = None  # Tile (_tensor.py): the class of the views made

    def _like(self, offset, sizes, strides):
        return self._view_class(self._buffer, offset, sizes, strides)

    def _free_dim(self, dim: int, what: str, allow_partition=False) -> int:
        rank = len(self.sizes)
        dim = dim + rank if dim < 0 else dim
        if not 0 <= dim < rank:
            raise NKIError(f"NKI {what}: dim {dim} is out of range for '{self.name}' of rank {rank}")
        if dim == 0 and self.buffer.on_chip and not allow_partition:
            raise NKIError(f"NKI {what}: dim 0 of the on-chip '{self.name}' is its partition dim")
        return dim

    @property
    def size(self) -> int:
        """The number of elements of the view."""
        return math.prod(self.sizes)

    def get_pattern(self) -> list:
        """The view's access pattern, [[stride, count], ...] by dim (as .ap() takes it)."""
        return [[int(st), int(n)] for st, n in zip(self.strides, self.sizes)]

    def is_indirect(self) -> bool:
        """Whether the view is addressed at run time (.ap(scalar_offset= / vector_offset=), select by a tile)."""
        return hasattr(self, "row_stride") or "tn_checked" in str(getattr(self.offset, "text", "") or "")

    def permute(self, dims):
        """The dims reordered (on chip, the partition dim stays first)."""
        dims = tuple(int(d) for d in dims)
        if sorted(dims) != list(range(len(self.sizes))):
            raise NKIError(f"NKI permute: {dims} is not a permutation of the dims of '{self.name}' {self.shape}")
        if self.buffer.on_chip and dims[0] != 0:
            raise NKIError(f"NKI permute: the partition dim of the on-chip '{self.name}' stays first")
        return self._like(self.offset, [self.sizes[d] for d in dims], [self.strides[d] for d in dims])

    def broadcast(self, dim, size):
        """A size-1 dim repeated `size` times."""
        dim = self._free_dim(dim, "broadcast")
        if self.sizes[dim] != 1:
            raise NKIError(f"NKI broadcast: dim {dim} of '{self.name}' {self.shape} has size {self.sizes[dim]}, not 1")
        sizes, strides = list(self.sizes), list(self.strides)
        sizes[dim], strides[dim] = int(size), 0
        return self._like(self.offset, sizes, strides)

    def expand_dim(self, dim):
        """A new size-1 dim at `dim`."""
        rank = len(self.sizes)
        dim = dim + rank + 1 if dim < 0 else dim
        if not 0 <= dim <= rank or (dim == 0 and self.buffer.on_chip):
            raise NKIError(f"NKI expand_dim: cannot insert dim {dim} into '{self.name}' {self.shape}")
        return self._like(self.offset, self.sizes[:dim] + [1] + self.sizes[dim:], self.strides[:dim] + [0] + self.strides[dim:])

    def squeeze_dim(self, dim):
        """The size-1 dim `dim` removed."""
        dim = self._free_dim(dim, "squeeze_dim")
        if self.sizes[dim] != 1:
            raise NKIError(f"NKI squeeze_dim: dim {dim} of '{self.name}' {self.shape} has size {self.sizes[dim]}")
        return self._like(self.offset, self.sizes[:dim] + self.sizes[dim + 1:], self.strides[:dim] + self.strides[dim + 1:])

    def reshape_dim(self, dim, shape):
        """Dim `dim` split into `shape` (one entry may be -1)."""
        dim = self._free_dim(dim, "reshape_dim", allow_partition=len(shape) == 1)
        shape = [int(s) for s in shape]
        if shape.count(-1) == 1:
            shape[shape.index(-1)] = self.sizes[dim] // max(1, math.prod(s for s in shape if s != -1))
        if math.prod(shape) != self.sizes[dim]:
            raise NKIError(f"NKI reshape_dim: {tuple(shape)} does not split dim {dim} of size {self.sizes[dim]}")
        strides, step = [], self.strides[dim]
        for s in reversed(shape):
            strides.insert(0, step)
            step *= s
        return self._like(self.offset, self.sizes[:dim] + shape + self.sizes[dim + 1:],
                          self.strides[:dim] + strides + self.strides[dim + 1:])

    def flatten_dims(self, start_dim, end_dim):
        """Dims start_dim..end_dim (inclusive, contiguous in memory) merged into one."""
        start = self._free_dim(start_dim, "flatten_dims")
        end = self._free_dim(end_dim, "flatten_dims")
        kept = [d for d in range(start, end + 1) if self.sizes[d] != 1]
        for a, b in zip(kept, kept[1:]):
            if self.strides[a] != self.strides[b] * self.sizes[b]:
                raise NKIError(f"NKI flatten_dims: dims {start}..{end} of '{self.name}' are not contiguous")
        stride = self.strides[kept[-1]] if kept else 1
        return self._like(self.offset, self.sizes[:start] + [math.prod(self.sizes[start:end + 1])] + self.sizes[end + 1:],
                          self.strides[:start] + [stride] + self.strides[end + 1:])

    def slice(self, dim, start, end, step=1):
        """Elements start, start + step, ... before end of dim `dim`."""
        dim = self._free_dim(dim, "slice", allow_partition=True)
        if not (0 <= start < end <= self.sizes[dim]) or step < 1:
            raise NKIError(f"NKI slice: [{start}:{end}:{step}] of dim {dim} (size {self.sizes[dim]}) of '{self.name}'")
        sizes, strides = list(self.sizes), list(self.strides)
        sizes[dim], strides[dim] = (end - start + step - 1) // step, strides[dim] * step
        return self._like(self.offset + start * self.strides[dim], sizes, strides)

    def select(self, dim, index):
        """Element `index` of dim `dim`, the dim removed (on chip, dim 0 kept as size 1); `index` may
        be a one-element tile read at run time."""
        dim = self._free_dim(dim, "select", allow_partition=True)
        if not isinstance(index, int):
            return self[(slice(None),) * dim + (index,)]
        if not 0 <= index < self.sizes[dim]:
            raise NKIError(f"NKI select: index {index} of dim {dim} (size {self.sizes[dim]}) of '{self.name}'")
        offset = self.offset + index * self.strides[dim]
        if dim == 0 and self.buffer.on_chip:
            return self._like(offset, [1] + self.sizes[1:], self.strides)
        return self._like(offset, self.sizes[:dim] + self.sizes[dim + 1:], self.strides[:dim] + self.strides[dim + 1:])

    def vector_select(self, dim, vector_offset):
        """Partition p of the result reads row vector_offset[p] of dim 0 (device memory)."""
        if dim != 0 or self.buffer.on_chip:
            raise NKIError(f"NKI vector_select: dim 0 of a device-memory tensor, not dim {dim} of '{self.name}'")
        pattern = [[self.strides[0], vector_offset.shape[0]]] + self.get_pattern()[1:]
        return self.ap(pattern, 0, vector_offset=vector_offset, indirect_dim=0)

    def rearrange(self, src_pattern, dst_pattern, fixed_sizes=None):
        """einops-style: src_pattern names each dim (a tuple of names splits it), dst_pattern orders
        the names (a tuple of names merges them)."""
        fixed = dict(fixed_sizes or {})
        view, names = self, []
        for dim_groups in reversed(list(enumerate(src_pattern))):  # split from the last dim back
            d, group = dim_groups
            if isinstance(group, (tuple, list)):
                shape = [fixed.get(n, -1) for n in group]
                view = view.reshape_dim(d, shape) if len(group) > 1 else view
                names = list(group) + names
            else:
                names = [group] + names
        if len(names) != len(view.sizes):
            raise NKIError(f"NKI rearrange: {src_pattern} does not name the {len(self.sizes)} dims of '{self.name}'")
        flat = [n for g in dst_pattern for n in (g if isinstance(g, (tuple, list)) else (g,))]
        if sorted(flat) != sorted(names):
            raise NKIError(f"NKI rearrange: {dst_pattern} does not use the names of {src_pattern} once each")
        view = view.permute(tuple(names.index(n) for n in flat))
        position = 0
        for g in dst_pattern:
            count = len(g) if isinstance(g, (tuple, list)) else 1
            if count > 1:
                view = view.flatten_dims(position, position + count - 1)
            position += 1 if count else 0
        return view

    def reinterpret_cast(self, dtype):
        """The view's bytes as `dtype` (its last dim, contiguous, scaled by the ratio of the sizes):
        device memory any dtype, on chip float32 words as bfloat16 halves (as .ap(dtype=) reads them)."""
        new = to_dtype(dtype)
        if new is self.dtype:
            return self
        old = self.dtype.itemsize
        if not self.sizes or self.strides[-1] != 1:
            raise NKIError(f"NKI reinterpret_cast: the last dim of '{self.name}' must be contiguous")
        pattern = []
        for d, (stride, size) in enumerate(zip(self.strides, self.sizes)):
            last = d == len(self.sizes) - 1
            scaled_stride, scaled_size = stride * old, size * old if last else size
            if scaled_stride % new.itemsize or (last and scaled_size % new.itemsize):
                raise NKIError(f"NKI reinterpret_cast: '{self.name}' {self.shape} of {self.dtype.name} does not "
                               f"divide into whole {new.name} elements")
            pattern.append([scaled_stride // new.itemsize if not last else 1,
                            scaled_size // new.itemsize if last else size])
        return self.ap(pattern, 0, dtype=new)

    def depends_on(self, *producers):
        """As an instruction's handle (an ISA call returns its destination tile): runs after the
        producers; instructions run in program order, so one traced before is always done."""
        for producer in producers:
            if not isinstance(producer, ViewMethods):
                raise NKIError(f"NKI depends_on: {producer!r} is not an instruction's handle (the tile an ISA call "
                               "returns)")
        return self

