"""Shims that let TorchTitan 0.3.0 run on torch 2.13 (and so on neuron), applied as soon as a
process that loaded torchneuron imports `torchtitan`. Each adds something torch 2.13 lacks and
does nothing where torch has it; each says which torch makes it unnecessary. Tested in
tests/python/test_titan.py."""
from __future__ import annotations

import torch

APPLIED: list[str] = []


def _set_timeout() -> None:
    # torchtitan 0.3.0 calls torch.distributed.set_timeout(timeout, group) after its first step;
    # torch 2.13 has it as the private _set_pg_timeout (same arguments). Unneeded on torch
    # builds that export set_timeout (the nightlies torchtitan 0.3.0 was developed against).
    import torch.distributed as dist

    if not hasattr(dist, "set_timeout") and hasattr(dist.distributed_c10d, "_set_pg_timeout"):
        dist.set_timeout = dist.distributed_c10d._set_pg_timeout
        APPLIED.append("torch.distributed.set_timeout")


def apply(_torchtitan_module=None) -> list[str]:
    """Applies every shim torch 2.13 needs; returns the names of those applied."""
    if torch.distributed.is_available():
        _set_timeout()
    return list(APPLIED)


def apply_when_torchtitan_loads() -> None:
    """Runs apply() when torchtitan is imported (now, if it already is)."""
    from torchneuron._dynamo_interface import _when_loaded

    _when_loaded("torchtitan", apply)
