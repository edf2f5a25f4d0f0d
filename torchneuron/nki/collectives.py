"""nki.collectives: collectives between the ranks (processes) that each run the kernel, on the
torch.distributed default group (torchneuron's `neuron` c10d backend, or Gloo). The interpreter
(TORCHNEURON_NKI_INTERPRET=1) runs them where the kernel calls them: it reads the source tiles,
runs the collective and writes the destination tiles. A compiled kernel is cut at each collective
into device commands (segments) that keep the on-chip tiles between them, and the host runs the
collective in between, outside loops (the loops around one are unrolled), in a one-program grid.
send / recv are not provided."""
from __future__ import annotations

import torch

from ._current import current
from ._ops import op_name
from ._tensor import NKIError, Tile


class ReplicaGroup:
    """The ranks of a collective: a list of rank-lists, each running the collective on its own."""

    def __init__(self, replica_groups=None, *more, **_unused):
        groups = replica_groups if replica_groups is not None else []
        if groups and not isinstance(groups[0], (list, tuple)):  # ReplicaGroup([0, 1]) or ReplicaGroup(0, 1)
            groups = [list(groups) + list(more)]
        self.groups = [list(map(int, g)) for g in groups]

    def __repr__(self):
        return f"ReplicaGroup({self.groups})"


_process_groups = {}


def _distributed():
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_initialized():
        raise NKIError("nki.collectives: no torch.distributed default group; call torch.distributed."
                       "init_process_group('neuron') in every rank first")
    return dist


def rank_id():
    """This rank's number in the default group (0 without torch.distributed)."""
    import torch.distributed as dist
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def _group(replica_group):
    """(process group of this rank's rank-list, that list); every rank creates every rank-list's group."""
    dist = _distributed()
    world = dist.get_world_size()
    lists = replica_group.groups if isinstance(replica_group, ReplicaGroup) and replica_group.groups else \
        [list(range(world))]
    key = tuple(tuple(g) for g in lists)
    if key not in _process_groups:
        made = [dist.new_group(list(g)) if len(g) != world or sorted(g) != list(range(world)) else dist.group.WORLD
                for g in lists]
        _process_groups[key] = made
    rank = dist.get_rank()
    for g, pg in zip(lists, _process_groups[key]):
        if rank in g:
            return pg, g
    raise NKIError(f"nki.collectives: rank {rank} is in no rank-list of {lists}")


def _run(name, body, reads, writes):
    """Runs body(ctx) in an interpreted kernel; a compiled one is cut there (two device commands),
    and body runs between them on the host with the tiles as device tensors (_kernel.HostTiles)."""
    ctx = current()
    if ctx.interpreting:
        return body(ctx)
    tiles = [t for t in _as_list(reads) + _as_list(writes) if isinstance(t, Tile)]
    ctx.host_step(f"nki.collectives.{name}", body, tiles, [t for t in _as_list(writes) if isinstance(t, Tile)])
    return None


def _flat(nested):
    return [t for group in _as_list(nested) for t in _as_list(group)]


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _read(ctx, t: Tile) -> torch.Tensor:
    return ctx.view(t).float().cpu().clone()


def _write(ctx, t: Tile, values: torch.Tensor) -> None:
    if not t.buffer.on_chip:
        ctx.written.add(t._buffer)
    ctx.store(t, values.reshape(ctx.view(t).shape))


def _on_backend(dist, pg, value: torch.Tensor) -> torch.Tensor:
    """The tensor where the group's backend takes it: neuron for torchneuron's backend, else CPU."""
    backend = str(dist.get_backend(pg))
    return value.to("neuron") if backend == "neuron" else value.cpu()


_OPS = {"add": "SUM", "maximum": "MAX", "minimum": "MIN", "multiply": "PRODUCT"}


def _reduce_op(dist, op):
    name = op_name(op)
    if name not in _OPS:
        raise NKIError(f"nki.collectives: op must be nl.add, nl.maximum or nl.minimum, got {name}")
    return getattr(dist.ReduceOp, _OPS[name])


def all_reduce(srcs, dsts, replica_group=None, op=None, **_unused):
    """dsts[i] = op over the rank-list of srcs[i]."""
    dist = _distributed()
    pg, _ = _group(replica_group)
    reduce_op = _reduce_op(dist, op if op is not None else "add")

    def body(ctx):
        for src, dst in zip(_as_list(srcs), _as_list(dsts)):
            value = _on_backend(dist, pg, _read(ctx, src))
            dist.all_reduce(value, op=reduce_op, group=pg)
            _write(ctx, dst, value.cpu())
    _run("all_reduce", body, srcs, dsts)


def all_gather(srcs, dsts, replica_group=None, collective_dim=0, **_unused):
    """dsts[i] = srcs[i] of every rank of the rank-list, in its order, concatenated along collective_dim."""
    dist = _distributed()
    pg, ranks = _group(replica_group)

    def body(ctx):
        for src, dst in zip(_as_list(srcs), _as_list(dsts)):
            value = _on_backend(dist, pg, _read(ctx, src))
            parts = [torch.empty_like(value) for _ in ranks]
            dist.all_gather(parts, value, group=pg)
            _write(ctx, dst, torch.cat([p.cpu() for p in parts], dim=int(collective_dim)))
    _run("all_gather", body, srcs, dsts)


def reduce_scatter(srcs, dsts, replica_group=None, collective_dim=0, op=None, **_unused):
    """dsts[i] = this rank's part (along collective_dim) of op over the rank-list of srcs[i]."""
    dist = _distributed()
    pg, ranks = _group(replica_group)
    reduce_op = _reduce_op(dist, op if op is not None else "add")

    def body(ctx):
        for src, dst in zip(_as_list(srcs), _as_list(dsts)):
            value = _on_backend(dist, pg, _read(ctx, src))
            dist.all_reduce(value, op=reduce_op, group=pg)
            parts = value.cpu().chunk(len(ranks), dim=int(collective_dim))
            _write(ctx, dst, parts[ranks.index(dist.get_rank())])
    _run("reduce_scatter", body, srcs, dsts)


def all_to_all(srcs, dsts, replica_group=None, collective_dim=0, **_unused):
    """Part j (along collective_dim) of srcs[i] goes to the rank-list's rank j; dsts[i] is the parts
    every rank sent this one, in rank-list order (exchanged as one all-gather)."""
    dist = _distributed()
    pg, ranks = _group(replica_group)
    me, dim = ranks.index(dist.get_rank()), int(collective_dim)

    def body(ctx):
        for src, dst in zip(_as_list(srcs), _as_list(dsts)):
            value = _on_backend(dist, pg, _read(ctx, src))
            parts = [torch.empty_like(value) for _ in ranks]
            dist.all_gather(parts, value, group=pg)
            _write(ctx, dst, torch.cat([p.cpu().chunk(len(ranks), dim=dim)[me] for p in parts], dim=dim))
    _run("all_to_all", body, srcs, dsts)


def _gathered(ctx, dist, pg, ranks, src):
    """src of every rank of the rank-list, in its order (CPU tensors)."""
    value = _on_backend(dist, pg, _read(ctx, src))
    parts = [torch.empty_like(value) for _ in ranks]
    dist.all_gather(parts, value, group=pg)
    return [p.cpu() for p in parts]


def collective_permute(srcs, dsts, source_target_pairs, **_unused):
    """dsts[i] = srcs[i] of the rank s of a pair [s, this rank]; without such a pair dsts[i] is left."""
    dist = _distributed()
    pg, ranks = _group(None)
    me = dist.get_rank()
    sources = [int(s) for s, t in source_target_pairs if int(t) == me]

    def body(ctx):
        for src, dst in zip(_as_list(srcs), _as_list(dsts)):
            parts = _gathered(ctx, dist, pg, ranks, src)
            if sources:
                _write(ctx, dst, parts[ranks.index(sources[0])])
    _run("collective_permute", body, srcs, dsts)


def _ring(replica_group):
    dist = _distributed()
    pg, ranks = _group(replica_group)
    return dist, pg, ranks, ranks.index(dist.get_rank())


def collective_permute_implicit(srcs_by_channel, dsts_by_channel, replica_group=None, channel_ids=(0,), **_unused):
    """Each rank of a rank-list sends to its successor in the ring: dsts = the predecessor's srcs."""
    dist, pg, ranks, me = _ring(replica_group)

    def body(ctx):
        for srcs, dsts in zip(_as_list(srcs_by_channel), _as_list(dsts_by_channel)):
            for src, dst in zip(_as_list(srcs), _as_list(dsts)):
                _write(ctx, dst, _gathered(ctx, dist, pg, ranks, src)[(me - 1) % len(ranks)])
    _run("collective_permute_implicit", body, _flat(srcs_by_channel), _flat(dsts_by_channel))


def collective_permute_implicit_reduce(srcs0_by_channel, srcs1_by_channel, dsts_by_channel, replica_group=None,
                                       op=None, channel_ids=(0,), **_unused):
    """dsts = the predecessor's op(srcs0, srcs1), around the ring."""
    dist, pg, ranks, me = _ring(replica_group)
    combine = {"add": torch.add, "maximum": torch.maximum, "minimum": torch.minimum}[op_name(op or "add")]

    def body(ctx):
        for s0, s1, dsts in zip(_as_list(srcs0_by_channel), _as_list(srcs1_by_channel), _as_list(dsts_by_channel)):
            for a, b, dst in zip(_as_list(s0), _as_list(s1), _as_list(dsts)):
                value = _on_backend(dist, pg, combine(_read(ctx, a), _read(ctx, b)))
                parts = [torch.empty_like(value) for _ in ranks]
                dist.all_gather(parts, value, group=pg)
                _write(ctx, dst, parts[(me - 1) % len(ranks)].cpu())
    _run("collective_permute_implicit_reduce", body, _flat(srcs0_by_channel) + _flat(srcs1_by_channel),
         _flat(dsts_by_channel))


def collective_permute_implicit_current_processing_rank_id(iteration_id, replica_group=None, channel_id=0, **_unused):
    """The rank whose data a ring step `iteration_id` holds: this rank at 0, then its predecessors."""
    _, _, ranks, me = _ring(replica_group)
    return ranks[(me - int(iteration_id)) % len(ranks)]


def _exchange_v(name, srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls, broadcast):
    """all_gather_v (broadcast: one chunk to every rank) and all_to_all_v (a chunk per rank): flat
    element buffers, counts and displacements from the uint32 metadata rows (send counts, send
    displacements, received counts written back unless recv_counts_known, receive displacements
    with has_rdispls; else rank r's chunk lands at slot r of dst's equal slots)."""
    dist = _distributed()
    pg, ranks = _group(replica_group)
    n, me = len(ranks), ranks.index(dist.get_rank())
    (src,), (dst,) = _as_list(srcs), _as_list(dsts)

    def body(ctx):
        meta = _read(ctx, metadata_tensor).reshape(-1, n).long()
        if meta.shape[0] < (4 if has_rdispls else 3):
            raise NKIError(f"nki.collectives.{name}: metadata_tensor needs {4 if has_rdispls else 3} rows of "
                           f"{n} (one per rank of the rank-list), got {tuple(metadata_tensor.shape)}")
        chunks = _gathered(ctx, dist, pg, ranks, src)
        sends = _gathered(ctx, dist, pg, ranks, metadata_tensor)
        out = _read(ctx, dst).reshape(-1)
        slot = out.numel() // n
        for r in range(n):
            sent = sends[r].reshape(-1, n).long()
            column = 0 if broadcast else me
            count, start = int(sent[0, column]), int(sent[1, column])
            at = int(meta[3, r]) if has_rdispls else slot * r
            flat = chunks[r].reshape(-1)
            if start < 0 or start + count > flat.numel() or at < 0 or at + count > out.numel() or \
                    (not has_rdispls and count > slot):
                raise NKIError(f"nki.collectives.{name}: rank {ranks[r]} sends {count} elements from {start} of its "
                               f"{flat.numel()}, to element {at} of {out.numel()}: past a buffer or its slot")
            out[at:at + count] = flat[start:start + count]
            meta[2, r] = count
        _write(ctx, dst, out)
        if not recv_counts_known:
            _write(ctx, metadata_tensor, meta.float())
    _run(name, body, [src, dst, metadata_tensor], [dst] if recv_counts_known else [dst, metadata_tensor])


def all_gather_v(srcs, dsts, replica_group, metadata_tensor, recv_counts_known=False, has_rdispls=False, **_unused):
    """Each rank's chunk src[send_displ : send_displ + send_count] (metadata rows 0 and 1, first
    column) goes to every rank of the rank-list, rank r's into slot r of dst (or at recv_displs[r])."""
    _exchange_v("all_gather_v", srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls, True)


def all_to_all_v(srcs, dsts, replica_group, metadata_tensor, recv_counts_known=False, has_rdispls=False, **_unused):
    """Rank s sends src[send_displs[r] : + send_counts[r]] to rank r of the rank-list, which puts it in
    slot s of dst (or at recv_displs[s]); received counts go to metadata row 2."""
    _exchange_v("all_to_all_v", srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls, False)


def _unsupported(name):
    def function(*_args, **_kwargs):
        raise NKIError(f"nki.collectives.{name} is not provided by torchneuron")
    function.__name__ = name
    return function


for _name in ("send", "recv"):
    globals()[_name] = _unsupported(_name)

__all__ = ["ReplicaGroup", "all_reduce", "all_gather", "all_gather_v", "reduce_scatter", "all_to_all", "all_to_all_v",
           "collective_permute",
           "collective_permute_implicit", "collective_permute_implicit_reduce",
           "collective_permute_implicit_current_processing_rank_id", "rank_id", "send", "recv"]
