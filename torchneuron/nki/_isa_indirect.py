"""Indirect DMA: tensor.ap(pattern, offset, vector_offset=idx, indirect_dim=d), a gather or scatter
whose partition p reaches index idx[p] of the tensor's dim d (idx an on-chip [P, 1] tile read at
run time). A DMA through such a view runs as one copy per partition, each at a run-time offset
(the same dynamic index a scalar_offset uses; compiled, a loop over the partitions), and every index
is checked against the tensor."""
from __future__ import annotations

from ._context import current
from ._expr import bounds
from ._ops import copy_into
from ._tensor import NKIError, Tile, extensions


class IndirectView(Tile):
    """An access pattern whose partition dim is indexed by a tile of row indices: `sizes` and
    `strides` are the pattern's (the partition stride unused), `offset` its static start."""

    def __init__(self, base: Tile, index: Tile, row_stride: int, limit: int):
        super().__init__(base._buffer, base.offset, base.sizes, base.strides)
        self.index, self.row_stride, self.limit = index, row_stride, limit

    def row(self, p) -> Tile:
        """Partition p of the view: one row at index[p] of the indexed dim."""
        element = Tile(self.index._buffer, self.index.offset + p * self.index.strides[0], [1, 1], [1, 1])
        where = f"partition {p} of an indirect access to '{self.name}' (.ap vector_offset)"
        start = current().dynamic_index(element, self.limit, where) * self.row_stride
        return Tile(self._buffer, self.offset + start, [1] + self.sizes[1:], [0] + self.strides[1:])


def indirect_view(tensor: Tile, view: Tile, vector_offset, indirect_dim) -> IndirectView:
    """The view .ap() built (its partition stride ignored), indexed per partition by vector_offset."""
    if not isinstance(vector_offset, Tile) or not vector_offset.buffer.on_chip:
        raise NKIError(f"NKI: .ap(vector_offset=) on '{tensor.name}' takes an on-chip tile of indices, one per "
                       f"partition; got {vector_offset!r}")
    if tensor.buffer.on_chip:
        raise NKIError(f"NKI: .ap(vector_offset=) indexes device memory; '{tensor.name}' is in {tensor.buffer.name}")
    partitions = view.sizes[0]
    if vector_offset.sizes[0] < partitions or any(s != 1 for s in vector_offset.sizes[1:]):
        raise NKIError(f"NKI: .ap(vector_offset=) needs a [{partitions}, 1] index tile for a pattern of {partitions} "
                       f"partitions; got {list(vector_offset.sizes)}")
    dim = int(indirect_dim)
    row_stride = tensor.strides[dim]
    _, hi = bounds(view.offset)
    top = hi + sum((s - 1) * st for s, st in zip(view.sizes[1:], view.strides[1:]) if st > 0)
    room = (tensor._buffer.elements - 1 - top) // row_stride + 1 if row_stride > 0 else 1
    if room < 1:
        raise NKIError(f"NKI: out-of-bounds indirect access pattern on '{tensor.name}'")
    return IndirectView(view, vector_offset, row_stride, min(tensor.sizes[dim], room))


def _row(t: Tile, p) -> Tile:
    if isinstance(t, IndirectView):
        return t.row(p)
    return Tile(t._buffer, t.offset + p * t.strides[0], [1] + t.sizes[1:], [0] + t.strides[1:], t.checks)


def per_partition(fn, dst: Tile, srcs) -> Tile:
    """fn(dst row, [src rows]) for every partition: a Python loop interpreted, a loop compiled."""
    partitions = dst.sizes[0]
    for s in srcs:
        free = [[n for n in t.sizes[1:] if n != 1] for t in (dst, s)]
        if s.sizes[0] != partitions or free[0] != free[1]:  # unit dims may differ, as in any DMA
            raise NKIError(f"NKI: an indirect DMA copies matching shapes, got {list(s.sizes)} to {list(dst.sizes)}")
    ctx = current()
    if ctx.interpreting:
        for p in range(partitions):
            fn(_row(dst, p), [_row(s, p) for s in srcs])
        return dst
    p = ctx.loop(partitions)  # compiled: one loop over the partitions, each reading its index
    try:
        fn(_row(dst, p), [_row(s, p) for s in srcs])
    finally:
        ctx.end_loop()
    return dst


def copy_indirect(dst: Tile, src: Tile, mask, name: str) -> None:
    """dst = src where either is an indirect view: one copy per partition."""
    if mask is not None:
        raise NKIError(f"NKI {name}: mask= on an indirect DMA is not supported")
    per_partition(lambda d, s: copy_into(d, s[0], name=name), dst, [src])


extensions.provide(indirect_view=indirect_view, copy_indirect=copy_indirect)
