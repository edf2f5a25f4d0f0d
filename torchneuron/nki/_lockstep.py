"""The programs of a grid in lockstep: each program runs the kernel's Python code in a thread of its
own, one thread at a time, with its program id an integer. They take turns instruction by
instruction (in a compiled trace, at instructions outside loops), as cores run side by side; a
program that reaches a barrier (`nisa.core_barrier`) or an exchange (`nisa.sendrecv`) waits there
until every program has, and they go on in program order. The interpreter runs grids so; a compiled kernel is traced so when its
Python code branches on a program id or its programs synchronise, and then the trace is one program
holding each program's instructions, phase by phase, so the barriers hold (AWS's LNC2 kernels: two
cores sharing their work and exchanging tiles)."""
from __future__ import annotations

import itertools
import threading

from ._context import activate
from ._expr import Index, ProgramTraceError
from ._recorder import Recorder
from ._ops import copy_into
from ._tensor import NKIError

_PER_PROGRAM = ("pid", "hbm_seen", "leases", "scopes")


class _Abort(BaseException):
    """Ends a program's thread when another program failed."""


class LockstepRecorder(Recorder):
    """A Recorder whose programs are traced one after another into a single program: program ids
    are integers, and the device memory a kernel allocates is shared by its programs (matched by
    allocation order, as in the interpreter), except nl.private_hbm, each program's own."""

    def __init__(self, grid, program, unrolled=False):
        super().__init__(grid, program, unrolled)
        program.set_grid([1])
        self.pid = (0,) * max(1, len(self.grid))
        self.kernel_hbm, self.hbm_seen = [], 0

    def program_id(self, axis):
        return self.pid[axis] if axis < len(self.pid) else 0

    private_copies_per_program = False  # a program's private_hbm tensors are allocated in its own turn

    def allocate(self, buffer) -> None:
        if buffer.space.on_chip:
            return super().allocate(buffer)
        if buffer.space.name == "private_hbm":
            return self.add_hbm(buffer)
        if self.hbm_seen < len(self.kernel_hbm):  # the same output in a later program
            shared = self.kernel_hbm[self.hbm_seen]
            buffer.id, buffer.argument = shared.id, shared.argument
        else:
            self.add_hbm(buffer)
            self.kernel_hbm.append(buffer)
        self.hbm_seen += 1


class Lockstep:
    """Runs body(k) for each program k of the executor's grid, one at a time, switching at sync points."""

    def __init__(self, executor):
        self.executor = executor
        self.pids = list(itertools.product(*(range(g) for g in (executor.grid or (1,)))))
        n = len(self.pids)
        self.cond = threading.Condition()
        self.turn, self.generation = 0, 0
        self.done, self.arrived = [False] * n, {}
        self.error, self.completing = None, False
        self.results = [None] * n
        self.states = [{"pid": pid, "hbm_seen": 0, "leases": [], "scopes": [[]]} for pid in self.pids]

    def _load(self, k):
        for name in _PER_PROGRAM:
            if name in self.states[k]:
                setattr(self.executor, name, self.states[k][name])

    def _save(self, k):
        self.states[k] = {name: getattr(self.executor, name) for name in _PER_PROGRAM if hasattr(self.executor, name)}

    def _wait_turn(self, k, generation=None):
        while self.error is None and (self.turn != k or (generation is not None and self.generation == generation)):
            self.cond.wait()
        if self.error is not None:
            raise _Abort()
        self._load(k)

    def _next(self):
        """The first program still running that has not reached the current sync point."""
        waiting = [j for j in range(len(self.pids)) if not self.done[j] and j not in self.arrived]
        return waiting[0] if waiting else None

    def run(self, body):
        self.executor.lockstep = self
        threads = [threading.Thread(target=self._main, args=(k, body), daemon=True) for k in range(len(self.pids))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.executor.lockstep = None
        if self.error is not None:
            raise self.error
        return self.results

    def _main(self, k, body):
        try:
            with self.cond:
                self._wait_turn(k)
            with activate(self.executor):
                self.results[k] = body(k)
            with self.cond:
                self.done[k] = True
                self.executor.check_capacity()  # the program's tiles, freed at their last use
                for scope in self.executor.scopes:  # this program's tiles
                    for lease in scope:
                        self.executor._release(lease)
                self._save(k)
                self._advance()
        except _Abort:
            pass
        except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
            with self.cond:
                if self.error is None:
                    self.error = error
                self.cond.notify_all()

    def _advance(self):
        """After a program stopped (ended, or reached a sync point): the next one runs, or the sync completes."""
        nxt = self._next()
        if nxt is None and self.arrived:
            self._complete()
            nxt = self._next()
        if nxt is not None:
            self.turn = nxt
        self.cond.notify_all()

    def step(self):
        """After an instruction: the next running program takes its turn, so the programs advance
        together as cores do (a program's early writes land before another's later ones)."""
        if self.completing or len(self.pids) == 1:
            return
        k = self.pids.index(self.executor.pid)
        with self.cond:
            n = len(self.pids)
            after = [(k + i) % n for i in range(1, n)]
            ready = [j for j in after if not self.done[j] and j not in self.arrived]
            if not ready:
                return
            self._save(k)
            self.turn = ready[0]
            self.cond.notify_all()
            self._wait_turn(k)

    def sync(self, kind, payload=None):
        """Called by the running program at a barrier or exchange; returns when every program is past it."""
        k = self.pids.index(self.executor.pid)
        if getattr(self.executor, "depth", 0):  # the loops around it are unrolled in the next trace
            error = ProgramTraceError(f"nisa.{kind} inside a loop of a compiled kernel: traced again with loops unrolled")
            error.variables = set(getattr(self.executor, "open_loops_vars", ()))
            raise error
        with self.cond:
            self.arrived[k] = (kind, payload)
            generation = self.generation
            self._save(k)
            self._advance()
            self._wait_turn(k, generation)

    def _complete(self):
        """Every running program reached the sync point: carries out the exchanges."""
        arrived, self.arrived = self.arrived, {}
        self.generation += 1
        self.completing = True  # the exchanges' copies run here, in no program's turn
        kinds = {kind for kind, _ in arrived.values()}
        if len(kinds) > 1:
            raise NKIError(f"NKI: the programs of the grid met at different instructions ({sorted(kinds)})")
        if kinds == {"sendrecv"}:
            for k, (_, (src, dst, send_to, recv_from)) in sorted(arrived.items()):
                peer = arrived.get(recv_from)
                if peer is None or peer[1][2] != k:
                    raise NKIError(f"nisa.sendrecv: program {k} receives from rank {recv_from}, which does not send "
                                   f"to it")
                copy_into(dst, peer[1][0], name="nisa.sendrecv")
        self.completing = False


def rank_of(value) -> int:
    """A rank given as an int (or a one-element tuple / list)."""
    if isinstance(value, (tuple, list)):
        value = value[0]
    if isinstance(value, Index):
        raise ProgramTraceError("nisa.sendrecv: a rank computed from a program id")
    return int(value)
