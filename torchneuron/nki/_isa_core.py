"""nki.isa instructions that reduce across partitions, select by predicates and ranges, gather
within a partition, compact nonzeros, and compute in the DMA engines (the core kernels of AWS's
nki-library use them). Each is built from the tile ops both executors share (pointwise, reduce,
scan), so compiled and interpreted kernels agree."""
from __future__ import annotations

import math

import numpy as np
import torch

from ._context import Expression, Op, current
from ._dtypes import DTYPES, to_dtype
from ._isa_indirect import per_partition
from ._ops import _matched, copy_into, ndarray, op_name, reduce_tile
from ._tensor import SPACES, NKIError, Tile

_FP32_MIN = -3.4028234663852886e38


def _bind(args, kwargs, names, fn):
    if len(args) > len(names):
        raise NKIError(f"nisa.{fn}: too many positional arguments ({len(args)})")
    bound = dict(zip(names, args))
    bound.update(kwargs)
    for name in names:
        if name not in bound and name in ("dst",):
            raise NKIError(f"nisa.{fn} writes into dst=: pass the destination tile")
    return bound


def _rows(t: Tile) -> Tile:
    """t as [partitions, elements per partition] (its free dims flattened)."""
    if len(t.shape) == 2:
        return t
    if len(t.shape) == 1:
        return Tile(t._buffer, t.offset, [t.sizes[0], 1], [t.strides[0], 0])
    return t.reshape((t.shape[0], math.prod(t.shape[1:])))


def _partitions(t: Tile, start, count, step=1) -> Tile:
    """Partitions start, start + step, ... (count of them) of a [P, F] view."""
    return Tile(t._buffer, t.offset + start * t.strides[0], [count] + t.sizes[1:], [step * t.strides[0]] + t.strides[1:])


def _scratch(shape, dtype=DTYPES["float32"]) -> Tile:
    return ndarray(tuple(shape), dtype, buffer=SPACES["sbuf"])


def _op_or(op, default: str) -> str:
    """The name of an op argument, or `default` when none was given."""
    return op_name(op) if op else default


def _emit(dst, sources, expr, name, dma=False):
    current().emit(Op("pointwise", dst, sources, expr.nodes, dma=dma, name=name))


def _operand(expr, sources, value, shape):
    """A scalar literal, or a tile (a [P, 1] tile broadcast along the free axis) as an expression node."""
    if isinstance(value, Tile):
        sources.append(_matched(value, shape))
        return expr.source(len(sources) - 1)
    return expr.integer(value) if not isinstance(value, float) else expr.literal(value)


# Across partitions --------------------------------------------------------------------------------
def tensor_partition_reduce(*args, **kwargs):
    """dst [1, F] = op (add, max or min) over the partitions of data [P, F]."""
    b = _bind(args, kwargs, ["dst", "op", "data"], "tensor_partition_reduce")
    data, dst = _rows(b["data"]), _rows(b["dst"])
    reduce_op = {"add": "add", "maximum": "max", "minimum": "min"}.get(op_name(b["op"]))
    if reduce_op is None:
        raise NKIError("nisa.tensor_partition_reduce: op must be an add, max or min")
    if dst.shape != (1, data.shape[1]):
        raise NKIError(f"nisa.tensor_partition_reduce: dst {b['dst'].shape} must hold one partition of "
                       f"{data.shape[1]} elements")
    for f0 in range(0, data.shape[1], 128):  # the transposed view: free elements along partitions, 128 at a time
        n = min(128, data.shape[1] - f0)
        view = Tile(data._buffer, data.offset + f0 * data.strides[1], [n, data.shape[0]],
                    [data.strides[1], data.strides[0]])
        out = Tile(dst._buffer, dst.offset + f0 * dst.strides[1], [n, 1], [dst.strides[1], 0])
        reduce_tile(reduce_op, view, (1,), out=out, name="nisa.tensor_partition_reduce")
    return b["dst"]


# Predicates and ranges ----------------------------------------------------------------------------
def tensor_copy_predicated(*args, **kwargs):
    """dst = src where predicate is non-zero (zero with reverse_pred), dst unchanged elsewhere; src a
    tile or a scalar."""
    b = _bind(args, kwargs, ["dst", "src", "predicate", "reverse_pred"], "tensor_copy_predicated")
    dst, src, pred = b["dst"], b["src"], b["predicate"]
    expr, sources = Expression(), [dst, _matched(pred, dst.shape)]
    keep, test = expr.source(0), expr.op("ne", expr.source(1), expr.literal(0.0))
    if b.get("reverse_pred"):
        test = expr.op("logical_not", test)
    value = _operand(expr, sources, src, dst.shape)
    expr.op("where", test, value, keep)
    _emit(dst, sources, expr, "nisa.tensor_copy_predicated")
    return dst


def _reduce_result(b, data, expr, sources, name):
    if b.get("reduce_res") is None:
        return
    reduce_op = {"add": "add", "maximum": "max", "minimum": "min"}.get(_op_or(b.get("reduce_op"), "maximum"))
    if reduce_op is None:
        raise NKIError(f"nisa.{name}: reduce_op must be add, max or min")
    reduce_tile(reduce_op, data, tuple(range(1, len(data.shape))), out=b["reduce_res"], expression=expr,
                sources=sources, name=f"nisa.{name}")


def range_select(*args, **kwargs):
    """dst = on_true_tile where comp_op0(i + range_start, bound0) and comp_op1(i + range_start, bound1)
    for the free index i (bounds [P, 1] tiles or scalars), else on_false_value; reduce_res gets
    reduce_op (max by default) of the result along the free axis."""
    b = _bind(args, kwargs, ["dst", "on_true_tile", "comp_op0", "comp_op1", "bound0", "bound1", "reduce_cmd",
                             "reduce_res", "reduce_op", "range_start", "on_false_value"], "range_select")
    dst, on_true = b["dst"], _rows(b["on_true_tile"])
    if len(b["on_true_tile"].shape) > 2:
        raise NKIError("nisa.range_select takes a 2-D on_true_tile [P, F]")
    false_value = b.get("on_false_value", _FP32_MIN)
    false_value = _FP32_MIN if false_value is Ellipsis or false_value is None else float(false_value)
    expr, sources = Expression(), [on_true]
    position = expr.op("add", expr.index(1), expr.integer(b.get("range_start", 0)))
    first = expr.op(op_name(b["comp_op0"]), position, _operand(expr, sources, b["bound0"], on_true.shape))
    second = expr.op(op_name(b["comp_op1"]), position, _operand(expr, sources, b["bound1"], on_true.shape))
    expr.op("where", expr.op("logical_and", first, second), expr.source(0), expr.literal(false_value))
    _emit(_matched(dst, on_true.shape) if dst.shape != on_true.shape else dst, sources, expr, "nisa.range_select")
    _reduce_result(b, on_true, expr, sources, "range_select")
    return dst


def select_reduce(*args, **kwargs):
    """dst = on_true where predicate (not, with reverse_pred) else on_false (a scalar or [P, 1] tile);
    reduce_res gets the max (reduce_op) of dst along the free axes."""
    b = _bind(args, kwargs, ["dst", "predicate", "on_true", "on_false", "reduce_res", "reduce_cmd", "reduce_op",
                             "reverse_pred"], "select_reduce")
    dst, on_true = b["dst"], b["on_true"]
    expr, sources = Expression(), [on_true, _matched(b["predicate"], on_true.shape)]
    test = expr.op("ne", expr.source(1), expr.literal(0.0))
    if b.get("reverse_pred"):
        test = expr.op("logical_not", test)
    on_false = b["on_false"]
    expr.op("where", test, expr.source(0), _operand(expr, sources, float(on_false) if not isinstance(on_false, Tile)
                                                    else on_false, on_true.shape))
    _emit(dst, sources, expr, "nisa.select_reduce")
    _reduce_result(b, on_true, expr, sources, "select_reduce")
    return dst


# Gathers and compaction ---------------------------------------------------------------------------
def nc_n_gather(*args, **kwargs):
    """dst[p, j] = data[p, indices[p, j]], the free dims of data flattened (an index outside them gives 0)."""
    b = _bind(args, kwargs, ["dst", "data", "indices"], "nc_n_gather")
    data, idx, dst = _rows(b["data"]), _rows(b["indices"]), _rows(b["dst"])
    p, j, f = data.shape[0], idx.shape[1], data.shape[1]
    if idx.shape[0] != p or dst.shape != (p, j):
        raise NKIError(f"nisa.nc_n_gather: data {b['data'].shape}, indices {b['indices'].shape} and dst "
                       f"{b['dst'].shape} must share partitions, dst as many elements as indices")
    wanted = Tile(idx._buffer, idx.offset, [p, j, f], [idx.strides[0], idx.strides[1], 0])
    values = Tile(data._buffer, data.offset, [p, j, f], [data.strides[0], 0, data.strides[1]])
    expr = Expression()
    expr.op("where", expr.op("eq", expr.source(0), expr.index(2)), expr.source(1), expr.literal(0.0))
    out = Tile(dst._buffer, dst.offset, [p, j, 1], [dst.strides[0], dst.strides[1], 0])
    reduce_tile("add", wanted, (2,), out=out, expression=expr, sources=[wanted, values], name="nisa.nc_n_gather")
    return b["dst"]


GPSIMD_PARTITIONS = 16  # each of the GpSimd engine's 8 cores reads and writes 16 partitions


def local_gather(*args, **kwargs):
    """dst[p, k * n + e] = src_buffer[p, ind[k] + e] (free dims flattened, e < n = num_elem_per_idx):
    ind lists the index entries of p's GpSimd core (its 16 partitions), partitions first, and the
    first num_valid_indices of them are used (all by default). The legacy call returns a new tile
    [P, num_valid_indices, n]."""
    legacy = "dst" not in kwargs and not (len(args) >= 3 and all(isinstance(a, Tile) for a in args[:3]))
    names = ["src_buffer", "index", "num_elem_per_idx", "num_valid_indices"]
    b = _bind(args, kwargs, names if legacy else ["dst"] + names, "local_gather")
    src, idx = _rows(b["src_buffer"]), _rows(b["index"])
    p, columns = src.shape[0], idx.shape[1]
    rows = min(GPSIMD_PARTITIONS, p)
    per_core = rows * columns
    n = int(b.get("num_elem_per_idx") or 1)
    valid = per_core if b.get("num_valid_indices") is None else int(b["num_valid_indices"])
    if idx.shape[0] != p or p % rows:
        raise NKIError(f"nisa.local_gather: src_buffer {b['src_buffer'].shape} and index {b['index'].shape} must "
                       f"share their partitions, in groups of {GPSIMD_PARTITIONS} (one GpSimd core each)")
    if not 1 <= valid <= per_core or n < 1:
        raise NKIError(f"nisa.local_gather: num_valid_indices {valid} must be 1..{per_core} (the index entries of a "
                       f"core) and num_elem_per_idx {n} at least 1")
    if legacy:
        b["dst"] = ndarray((p, valid, n), b["src_buffer"].dtype, buffer=SPACES["sbuf"])
    dst = _rows(b["dst"])
    if dst.shape != (p, valid * n):
        raise NKIError(f"nisa.local_gather: dst {b['dst'].shape} needs {p} partitions of num_valid_indices * "
                       f"num_elem_per_idx = {valid * n} elements")
    # Each core's index entries, partitions first, in every partition of that core: column
    # c * rows + r of `ind` holds index[core start + r, c].
    cores, ind = p // rows, _scratch((p, per_core))
    step, pitch = ind.strides[0], idx.strides[0]
    for r in range(rows):
        copy_into(Tile(ind._buffer, ind.offset + r, [cores, rows, columns], [rows * step, step, rows]),
                  Tile(idx._buffer, idx.offset + r * pitch, [cores, rows, columns], [rows * pitch, 0, idx.strides[1]]),
                  name="nisa.local_gather")
    # dst[p, k, e] = the element of src whose position f equals ind[p, k] + e (a one-hot sum over f)
    f = src.shape[1]
    wanted = Tile(ind._buffer, ind.offset, [p, valid, n, f], [step, 1, 0, 0])
    values = Tile(src._buffer, src.offset, [p, valid, n, f], [src.strides[0], 0, 0, src.strides[1]])
    expr = Expression()
    position = expr.op("add", expr.source(0), expr.index(2))
    expr.op("where", expr.op("eq", position, expr.index(3)), expr.source(1), expr.literal(0.0))
    out = Tile(dst._buffer, dst.offset, [p, valid, n, 1], [dst.strides[0], n * dst.strides[1], dst.strides[1], 0])
    reduce_tile("add", wanted, (3,), out=out, expression=expr, sources=[wanted, values], name="nisa.local_gather")
    return b["dst"]


def nonzero_with_count(*args, **kwargs):
    """For partitions 0, 16, ..., 112 of src [P, F] (free dims flattened): dst[p, :n] = the positions
    (+ index_offset) of its n nonzero elements in order, dst[p, n:F] = padding_val, dst[p, F] = n.
    Other partitions of dst are left as they are."""
    b = _bind(args, kwargs, ["dst", "src", "index_offset", "padding_val"], "nonzero_with_count")
    src, dst = _rows(b["src"]), _rows(b["dst"])
    f = src.shape[1]
    if dst.shape[1] != f + 1 or dst.shape[0] != src.shape[0]:
        raise NKIError(f"nisa.nonzero_with_count: dst {b['dst'].shape} must have the partitions of src "
                       f"{b['src'].shape} and one element more per partition")
    active = math.ceil(src.shape[0] / 16)
    src, dst = _partitions(src, 0, active, 16), _partitions(dst, 0, active, 16)
    nonzero, count = _scratch((active, f)), _scratch((active, f))
    expr = Expression()
    expr.op("ne", expr.source(0), expr.literal(0.0))
    _emit(nonzero, [src], expr, "nisa.nonzero_with_count")
    scan = Expression()
    scan.op("add", scan.carry(), scan.source(0))  # count[i]: nonzeros among 0..i
    current().emit(Op("scan", count, [nonzero, nonzero], scan.nodes, initial=0.0, name="nisa.nonzero_with_count"))
    # The j-th nonzero sits where the running count first exceeds j: at the number of i with count[i] <= j.
    position = _scratch((active, f))
    block = max(1, (1 << 23) // max(1, active * f))
    for j0 in range(0, f, block):
        n = min(block, f - j0)
        counts = Tile(count._buffer, count.offset, [active, n, f], [count.strides[0], 0, count.strides[1]])
        expr = Expression()
        expr.op("le", expr.source(0), expr.op("add", expr.index(1), expr.literal(float(j0))))
        out = Tile(position._buffer, position.offset + j0, [active, n, 1], [position.strides[0], 1, 0])
        reduce_tile("add", counts, (2,), out=out, expression=expr, sources=[counts], name="nisa.nonzero_with_count")
    expr, total = Expression(), Tile(count._buffer, count.offset + f - 1, [active, f], [count.strides[0], 0])
    offset = expr.op("add", expr.source(0), expr.integer(b.get("index_offset", 0)))
    padding = b.get("padding_val", -1)
    expr.op("where", expr.op("lt", expr.index(1), expr.source(1)), offset, expr.literal(float(padding)))
    _emit(Tile(dst._buffer, dst.offset, [active, f], dst.strides), [position, total], expr, "nisa.nonzero_with_count")
    copy_into(Tile(dst._buffer, dst.offset + f * dst.strides[1], [active, 1], [dst.strides[0], 0]),
              Tile(count._buffer, count.offset + f - 1, [active, 1], [count.strides[0], 0]),
              name="nisa.nonzero_with_count")
    return b["dst"]


# The DMA engines' arithmetic ----------------------------------------------------------------------
def dma_compute(*args, **kwargs):
    """dst = reduce_op(srcs[0] * scales[0], srcs[1] * scales[1], ...) in float32, between any memories."""
    b = _bind(args, kwargs, ["dst", "srcs", "reduce_op", "scales", "unique_indices"], "dma_compute")
    dst, srcs = b["dst"], list(b["srcs"])
    if any(hasattr(t, "row_stride") for t in [dst] + srcs):  # an indirect access: one DMA per partition
        if not b.get("unique_indices", True):
            raise NKIError("nisa.dma_compute: unique_indices=False (repeated scatter / gather indices) is not "
                           "supported, as on hardware")
        return per_partition(lambda d, s: dma_compute(d, s, b.get("reduce_op"), b.get("scales")), dst, srcs)
    scales = list(b.get("scales") or [1.0] * len(srcs))
    if len(scales) != len(srcs) or not srcs:
        raise NKIError(f"nisa.dma_compute: {len(srcs)} srcs and {len(scales)} scales")
    name = _op_or(b.get("reduce_op"), "add")
    if name not in ("add", "maximum", "minimum", "mul"):
        raise NKIError(f"nisa.dma_compute: reduce_op must be add (or max, min, multiply), got {name}")
    expr, sources, value = Expression(), [], None
    for src, scale in zip(srcs, scales):
        sources.append(_matched(src, dst.shape))
        term = expr.source(len(sources) - 1)
        if float(scale) != 1.0:
            term = expr.op("mul", term, expr.literal(float(scale)))
        value = term if value is None else expr.op(name, value, term)
    _emit(dst, sources, expr, "nisa.dma_compute", dma=True)
    return dst


def conform(*tiles):
    """Tiles of one partition count and one number of elements per partition but different free
    shapes ([128, 160] against a broadcast view [128, 8, 20]) seen in one shape: the shape of the
    one whose free dims cannot be merged, the others (contiguous per partition) reshaped to it."""
    present = [t for t in tiles if isinstance(t, Tile)]
    shapes = {tuple(t.shape) for t in present}
    if len(shapes) < 2 or len({(s[0], math.prod(s[1:])) for s in shapes if s}) != 1:
        return tiles
    def mergeable(t):
        free = Tile(t._buffer, t.offset, t.sizes[1:], t.strides[1:])
        return free.is_contiguous()
    fixed = [t for t in present if not mergeable(t)]
    if len({tuple(t.shape) for t in fixed}) > 1:
        return tiles
    shape = tuple(fixed[0].shape) if fixed else max(shapes, key=len)
    return tuple(t.reshape(shape) if isinstance(t, Tile) and tuple(t.shape) != shape else t for t in tiles)


def copy_skipping_oob(dst, src, mask, name):
    """A DMA with oob_mode=skip: left out where a dynamic index its views read (.ap(scalar_offset=))
    is out of range (compiled: the copy runs under a run-time test of every such index)."""
    ctx = current()
    if ctx.interpreting:
        if getattr(ctx, "oob_error", None) is not None:
            ctx.oob_error = None
            return
        copy_into(dst, src, mask, name=name)
        return
    reads = list(getattr(ctx, "dynamic_reads", None) or [])
    if not reads:
        copy_into(dst, src, mask, name=name)
        return
    test = " && ".join(f"({v} >= 0 && {v} < {limit})" for v, limit in reads)
    ctx.program.begin_loop(f"({test} ? 1 : 0)")
    ctx.depth = getattr(ctx, "depth", 0) + 1  # in a lockstep trace, no other program's turn inside the test
    try:
        copy_into(dst, src, mask, name=name)
    finally:
        ctx.depth -= 1
        ctx.program.end_loop()


def nc_match_replace8(*args, **kwargs):
    """dst = data with the first occurrence of each of the 8 values of vals [P, 8] (per partition)
    replaced by imm; dst_idx (optional) gets their positions. Duplicates in vals are taken from the
    last slot back, so the first matching position goes to the highest of their slots."""
    b = _bind(args, kwargs, ["dst", "data", "vals", "imm", "dst_idx"], "nc_match_replace8")
    data, vals, dst = _rows(b["data"]), _rows(b["vals"]), _rows(b["dst"])
    p = data.shape[0]
    if vals.shape != (p, 8) or dst.shape != data.shape:
        raise NKIError(f"nisa.nc_match_replace8: data [P, F], vals [P, 8] and dst like data, got {b['data'].shape}, "
                       f"{b['vals'].shape} and {b['dst'].shape}")
    reversed_vals, found = _scratch((p, 8)), _scratch((p, 8))
    for k in range(8):  # the slots from the last: find_index8 pairs duplicates with positions in slot order
        copy_into(reversed_vals[:, 7 - k:8 - k], vals[:, k:k + 1], name="nisa.nc_match_replace8")
    current().emit(Op("find_index8", found, [data, reversed_vals], name="nisa.nc_match_replace8"))
    if b.get("dst_idx") is not None:
        idx = _rows(b["dst_idx"])
        for k in range(8):
            copy_into(idx[:, k:k + 1], found[:, 7 - k:8 - k], name="nisa.nc_match_replace8")
    expr, sources = Expression(), [data]
    hit = None
    for k in range(8):
        sources.append(Tile(found._buffer, found.offset + k, [p, data.shape[1]], [found.strides[0], 0]))
        test = expr.op("eq", expr.index(1), expr.source(len(sources) - 1))
        hit = test if hit is None else expr.op("logical_or", hit, test)
    expr.op("where", hit, expr.literal(float(b["imm"])), expr.source(0))
    _emit(dst, sources, expr, "nisa.nc_match_replace8")
    return b["dst"]


def shared_constant(constant, dtype=None, **_unused):
    """A device-memory tensor holding `constant` (a NumPy array, or the path of a .npy file), its
    values fixed when the kernel is traced (passed to the compiled kernel at each launch)."""
    array = np.load(constant) if isinstance(constant, (str, bytes)) or hasattr(constant, "__fspath__") else \
        np.asarray(constant)
    kind = to_dtype(dtype if dtype is not None else array.dtype)
    tile = ndarray(array.shape, kind, buffer=SPACES["shared_hbm"], name="shared_constant")
    array = np.ascontiguousarray(array.astype(np.float32) if kind.is_float else array.astype(np.int64))
    buffer = tile._buffer
    if current().interpreting:
        buffer.storage.copy_(torch.from_numpy(array.reshape(-1)).to(buffer.storage.dtype))
    else:
        buffer.constant = array
    return tile
