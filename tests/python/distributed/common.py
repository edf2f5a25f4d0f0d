"""Shared by the torchrun workers of test_distributed.py: set-up, checks and the final report."""

import faulthandler
import os
import sys
import traceback

import torch
import torch.distributed as dist

_failures = []
_passed = 0


def setup(backend="neuron", bind_device=False):
    """Initializes the default group; local rank r uses neuron:r (bound to the group with
    `bind_device`, which split_group needs). Returns (rank, world size, device)."""
    # A hung worker prints every thread's stack and exits, so a test never hangs.
    faulthandler.dump_traceback_later(float(os.environ.get("WORKER_DEADLINE_S", "240")), exit=True)
    device = torch.device("neuron", int(os.environ["LOCAL_RANK"]))
    torch.neuron.set_device(device)
    dist.init_process_group(backend, device_id=device if bind_device else None)
    return dist.get_rank(), dist.get_world_size(), device


def check(name, body):
    """Runs one assertion; a failure is recorded and reported at the end, not raised."""
    global _passed
    try:
        body()
        _passed += 1
    except Exception:  # noqa: BLE001
        _failures.append(name)
        print(f"[rank {dist.get_rank()}] FAILED {name}\n{traceback.format_exc()}", flush=True)


def equal(a, b):
    assert a == b, f"{a!r} != {b!r}"


def raises(body, text):
    """Asserts that body() raises an error whose message contains `text`."""
    try:
        body()
    except Exception as e:  # noqa: BLE001
        assert text in str(e), f"expected {text!r} in the error, got: {e}"
        return
    raise AssertionError(f"no error raised (expected one containing {text!r})")


def report():
    """Prints the tally; exits non-zero on any failure."""
    rank = dist.get_rank()
    print(f"[rank {rank}] {_passed} checks passed, {len(_failures)} failed", flush=True)
    if _failures:
        dist.destroy_process_group()
        sys.exit(1)
