"""Runs tasks in spawned worker processes (never forked: the device runtime does not survive a
fork): a task that hangs past its timeout, or kills its worker, gets an error record and the
worker is replaced. The conformance run and the model sweep both run their tasks here."""

import faulthandler
import multiprocessing as mp
import os
import tempfile
import time
import traceback
from multiprocessing.connection import wait as mp_wait


_HEARTBEAT = None


def heartbeat():
    """Tells the parent a unit of work (one sample) started, restarting its timeout."""
    if _HEARTBEAT is not None:
        _HEARTBEAT()


def _worker(conn, runner, crash_log):
    """Worker loop: receives tasks over `conn` and sends back `runner`'s records. A fatal signal
    (a crash in native code) writes every thread's Python stack to `crash_log`, which the parent
    puts in the task's record."""
    global _HEARTBEAT
    _HEARTBEAT = lambda: conn.send("beat")  # noqa: E731
    faulthandler.enable(open(crash_log, "w"), all_threads=True)  # noqa: SIM115 - open until the process ends
    runner.setup()
    conn.send("ready")
    while True:
        task = conn.recv()
        if task is None:
            return
        try:
            entry = runner.run(task)
        except BaseException as exc:  # noqa: BLE001
            entry = runner.failed(task, f"{type(exc).__name__}: {str(exc)[:300]} (in harness)",
                                  traceback.format_exc()[-2000:])
        conn.send(entry)


class _Slot:
    """One worker process with its pipe, the task it runs and that task's deadline."""

    def __init__(self, ctx, runner):
        self.conn, child = ctx.Pipe()
        handle, self.crash_log = tempfile.mkstemp(prefix="torchneuron-conformance-", suffix=".log")
        os.close(handle)
        self.proc = ctx.Process(target=_worker, args=(child, runner, self.crash_log), daemon=True)
        self.proc.start()
        child.close()
        self.task, self.deadline, self.ready = None, None, False

    def crash_report(self):
        """What the worker's fault handler wrote (empty unless it died of a fatal signal)."""
        try:
            with open(self.crash_log, errors="replace") as f:
                text = f.read()
        except OSError:
            return ""
        # The fault and the stacks come first; the list of loaded extension modules after them
        # is long (SciPy's alone is dozens) and says nothing about the crash.
        return text.split("\nExtension modules:", 1)[0][:4000]

    def kill(self):
        """Ends the worker process."""
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()
        try:
            os.unlink(self.crash_log)
        except OSError:
            pass


def run_tasks(tasks, jobs=1, timeout=60.0, grad=True, extra=None, on_result=None, runner=None):
    """Runs tasks in `jobs` spawned workers; returns their records in task order.

    `runner` (picklable; default OpInfoRunner(extra, grad)) has setup(), run(task) -> record and
    failed(task, detail, trace=None) -> record. A task that times out or kills its worker gets
    failed()'s record and the worker is replaced; on_result(record, done, total) sees each record.
    """
    from .samples import OpInfoRunner  # the default runner; samples.py imports this module

    runner = runner if runner is not None else OpInfoRunner(extra, grad)
    ctx = mp.get_context("spawn")
    pending, results = list(enumerate(tasks)), {}
    slots = [_Slot(ctx, runner) for _ in range(max(1, min(jobs, len(tasks))))]
    startup = 300.0
    for slot in slots:
        slot.deadline = time.monotonic() + startup
    try:
        while len(results) < len(tasks):
            for i, slot in enumerate(slots):
                if slot.ready and slot.task is None and pending:
                    slot.task = pending.pop(0)
                    slot.deadline = time.monotonic() + timeout
                    slot.conn.send(slot.task[1])
            now = time.monotonic()
            ready = mp_wait([s.conn for s in slots] + [s.proc.sentinel for s in slots],
                            timeout=max(0.05, min(s.deadline for s in slots) - now))
            for i, slot in enumerate(slots):
                record = None
                if slot.conn in ready:
                    try:
                        msg = slot.conn.recv()
                    except (EOFError, OSError):
                        msg = None
                    if msg == "ready":
                        slot.ready = True
                        continue
                    if msg == "beat":  # a new sample started: its own timeout begins
                        slot.deadline = time.monotonic() + timeout
                        continue
                    record = msg
                if record is None and slot.proc.sentinel not in ready and \
                        time.monotonic() < slot.deadline:
                    continue
                task = slot.task
                if record is None:
                    dead = not slot.proc.is_alive() or slot.proc.sentinel in ready
                    if dead:
                        slot.proc.join(5)  # reap it, so exitcode is known
                    why = (f"worker died (exit code {slot.proc.exitcode})" if dead
                           else f"timeout after {timeout:g} s")
                    crash = slot.crash_report() if dead else ""
                    slot.kill()
                    slots[i] = _Slot(ctx, runner)
                    slots[i].deadline = time.monotonic() + startup
                    if task is None:
                        raise RuntimeError(f"worker failed to start: {why}" + (f"\n{crash}" if crash else ""))
                    record = runner.failed(task[1], why, crash or None)
                else:
                    slot.task, slot.deadline = None, time.monotonic() + 1e9
                results[task[0]] = record
                if on_result:
                    on_result(record, len(results), len(tasks))
    finally:
        for slot in slots:
            try:
                slot.conn.send(None)
            except (OSError, BrokenPipeError):
                pass
            slot.kill()
    return [results[i] for i in range(len(tasks))]
