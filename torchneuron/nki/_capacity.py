"""On-chip capacity, as AWS's allocator counts it (the rules in docs/nki.md): what the executors
share to check that a program's live SBUF and PSUM tiles fit the core."""
from __future__ import annotations

import weakref

from ._tensor import PSUM_BYTES_PER_PARTITION, SBUF_BYTES_PER_PARTITION, Buffer, NKIError


class Capacity:
    """Allocation bookkeeping: each on-chip allocation's lease, its uses and its drop."""

    def start_capacity(self):
        self.leases = []  # this program's on-chip allocations (lease())
        self.seq = 0  # orders allocations, uses and drops
        self.open_loops = []  # symbolic loops being traced: [identity, leases used inside]
        self.scopes = [[]]

    # On-chip capacity counts the tiles alive, as AWS's allocator does: a tile lives from its
    # allocation to its last use by an instruction (a use inside a loop that did not make it lasts
    # to the loop's end), or, when no instruction touches it, until the kernel drops its last
    # reference (or the loop iteration, interpreted or unrolled, that made it ends). The trace
    # knows the last uses only when the program ends, so the check runs then (check_capacity).
    def lease(self, buffer: Buffer, nbytes: int) -> None:
        space = buffer.space.name
        limit = SBUF_BYTES_PER_PARTITION if space == "sbuf" else PSUM_BYTES_PER_PARTITION
        address = getattr(buffer, "address", None)
        if address is not None:  # placed by the kernel (address=): its range must fit; it is not pooled
            start = address[-1] if isinstance(address, (tuple, list)) else address
            if not isinstance(start, int) or start < 0 or start + nbytes > limit:
                raise NKIError(f"NKI: '{buffer.name}' placed at address={address!r} with {nbytes} bytes per partition "
                               f"does not fit the {limit} bytes per partition of {space.upper()}")
            return
        if nbytes > limit:
            self._over(space, buffer.name, list(buffer.shape), nbytes)
        self.seq += 1
        # [space, bytes, allocated, last use (None: unused), dropped (None: referenced), name, shape, loops]
        lease = [space, nbytes, self.seq, None, None, buffer.name, list(buffer.shape), tuple(self.open_loops)]
        self.leases.append(lease)
        self.scopes[-1].append(lease)
        buffer.lease = lease
        weakref.finalize(buffer, self._release, lease)

    @staticmethod
    def _over(space, name, shape, total):
        limit = SBUF_BYTES_PER_PARTITION if space == "sbuf" else PSUM_BYTES_PER_PARTITION
        raise NKIError(f"NKI: {space.upper()} capacity exceeded allocating '{name}' {shape}: the kernel's live tiles "
                       f"take {total} bytes per partition, the core has {limit} "
                       f"({'28 MiB' if space == 'sbuf' else '2 MiB'} over 128 partitions)")

    def use(self, buffer) -> None:
        """An instruction touched the buffer: its tile lives at least to here (to the end of each
        loop entered since it was made)."""
        lease = getattr(buffer, "lease", None)
        if lease is None:
            return
        self.seq += 1
        lease[3] = self.seq
        made, now = lease[7], self.open_loops
        k = 0
        while k < len(made) and k < len(now) and made[k] is now[k]:
            k += 1
        if k < len(now):  # the outermost loop entered since: the tile is used in all its iterations
            now[k][1].append(lease)

    def begin_loop_scope(self):
        self.open_loops.append([object(), []])

    def end_loop_scope(self):
        self.seq += 1
        for lease in self.open_loops.pop()[1]:
            lease[3] = self.seq

    def check_capacity(self) -> None:
        """The program's peak of live tiles, per space, at each allocation; raises at the first over."""
        events = []
        for lease in self.leases:
            end = lease[3] if lease[3] is not None else lease[4]
            events.append((lease[2], 1, lease))
            if end is not None:
                events.append((end, 0, lease))  # a tile dead at seq e frees before an allocation after e
        events.sort(key=lambda e: (e[0], e[1]))
        live = {"sbuf": 0, "psum": 0}
        for _, kind, lease in events:
            if kind == 0:
                live[lease[0]] -= lease[1]
                continue
            live[lease[0]] += lease[1]
            limit = SBUF_BYTES_PER_PARTITION if lease[0] == "sbuf" else PSUM_BYTES_PER_PARTITION
            if live[lease[0]] > limit:
                self._over(lease[0], lease[5], lease[6], live[lease[0]])
        self.leases = []

    def _release(self, lease) -> None:
        if lease[4] is None:
            self.seq += 1
            lease[4] = self.seq

    def enter_scope(self):
        self.scopes.append([])

    def exit_scope(self):
        for lease in self.scopes.pop():
            self._release(lease)
