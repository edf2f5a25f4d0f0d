"""nki.isa's cross-partition data movement: nisa.nc_stream_shuffle, which copies partitions within
each 32-partition quadrant. Each run of partitions the shuffle mask moves together becomes one
strided copy, so both executors run the same ops."""
from __future__ import annotations

from ._context import current
from ._dtypes import DTYPES
from ._ops import copy_into
from ._tensor import SPACES, Buffer, NKIError, Tile

QUADRANT = 32
UNMODIFIED = 255  # a mask entry that leaves its output partition as it was


def _runs(mask, rows):
    """(first output row, first input row, length) of the runs of consecutive rows in `mask`."""
    runs = []
    for i in range(rows):
        j = mask[i]
        if j == UNMODIFIED:
            continue
        if runs and runs[-1][0] + runs[-1][2] == i and runs[-1][1] + runs[-1][2] == j:
            runs[-1][2] += 1
        else:
            runs.append([i, j, 1])
    return runs


def _scratch_copy(src: Tile) -> Tile:
    """src copied to an internal buffer (an in-place shuffle reads the rows before they change)."""
    ctx = current()
    buf = Buffer(ctx.name(f"shuffle{ctx.names}"), SPACES["sbuf"], DTYPES["float32"], tuple(src.sizes))
    ctx.allocate_unchecked(buf)
    strides, step = [], 1
    for s in reversed(src.sizes):
        strides.append(step)
        step *= s
    copy = Tile(buf, 0, list(src.sizes), list(reversed(strides)))
    copy_into(copy, src, name="nisa.nc_stream_shuffle")
    return copy


def nc_stream_shuffle(*args, **kwargs):
    """dst partition i of each 32-partition quadrant = src partition shuffle_mask[i] of that quadrant
    (255: left unmodified)."""
    bound = dict(zip(["dst", "src", "shuffle_mask", "name"], args))
    bound.update(kwargs)
    dst, src, mask = bound.get("dst"), bound.get("src"), bound.get("shuffle_mask")
    if not isinstance(dst, Tile) or not isinstance(src, Tile) or mask is None:
        raise NKIError("nisa.nc_stream_shuffle takes dst and src tiles and a shuffle_mask of 32 entries")
    mask = [int(m) for m in mask]
    if len(mask) != QUADRANT or any(not (0 <= m < QUADRANT or m == UNMODIFIED) for m in mask):
        raise NKIError(f"nisa.nc_stream_shuffle: shuffle_mask must be 32 entries in 0..31 or 255, got {mask}")
    for t in (dst, src):
        if not t.buffer.on_chip:
            raise NKIError(f"nisa.nc_stream_shuffle: '{t.name}' is in {t.buffer.name}; it moves SBUF / PSUM data")
    rows = dst.sizes[0]
    quadrants = (rows + QUADRANT - 1) // QUADRANT
    if quadrants > 1 and rows % QUADRANT:
        raise NKIError(f"nisa.nc_stream_shuffle: dst spans {rows} partitions; use 32, 64, 96 or 128")
    if list(dst.sizes[1:]) != list(src.sizes[1:]):
        raise NKIError(f"nisa.nc_stream_shuffle: dst {list(dst.sizes)} and src {list(src.sizes)} differ in their "
                       "elements per partition")
    if src._buffer is dst._buffer:
        src = _scratch_copy(src)
    for i, j, length in _runs(mask, min(rows, QUADRANT)):
        for q in range(quadrants):
            top = q * QUADRANT + j + length
            if top > src.sizes[0]:
                raise NKIError(f"nisa.nc_stream_shuffle: shuffle_mask reads partition {top - 1} of '{src.name}', "
                               f"which spans {src.sizes[0]}")
        out = Tile(dst._buffer, dst.offset + i * dst.strides[0], [quadrants, length] + dst.sizes[1:],
                   [QUADRANT * dst.strides[0]] + dst.strides, dst.checks)
        inp = Tile(src._buffer, src.offset + j * src.strides[0], [quadrants, length] + src.sizes[1:],
                   [QUADRANT * src.strides[0]] + src.strides, src.checks)
        copy_into(out, inp, name="nisa.nc_stream_shuffle")
    return dst
