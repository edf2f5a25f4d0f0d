"""Adaptive eager: while the device is behind the host, pointwise ops are recorded and run as one
fused command at the next point that could observe them, with results bitwise equal to plain
eager. See docs/adaptive_eager.md."""

from torchneuron import _C
from torchneuron._gil import gil_refusal


class adaptive_eager:
    """Turns adaptive eager on (or off); used as a context manager, it restores the previous
    setting on exit, like torch.set_grad_enabled."""

    def __init__(self, enabled: bool = True):
        if enabled and (reason := gil_refusal()):
            raise RuntimeError(reason)
        self._previous = _C._adaptive_eager_enabled()
        _C._set_adaptive_eager(bool(enabled))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_adaptive_eager(self._previous)
        return False


def is_adaptive_eager_enabled() -> bool:
    """Whether adaptive eager is on (TORCHNEURON_ADAPTIVE_EAGER=1 turns it on at start)."""
    return _C._adaptive_eager_enabled()


def adaptive_eager_settings() -> dict:
    """The thresholds: backlog (commands waiting before a region opens), hot_after (sightings of
    a structure before it runs fused), max_ops (ops per region) and min_bytes (an op whose output
    is no larger opens no region)."""
    return dict(_C._adaptive_eager_settings())


def set_adaptive_eager_settings(*, backlog=None, hot_after=None, max_ops=None, min_bytes=None):
    """Changes the thresholds that adaptive_eager_settings() returns; None keeps one."""
    current = adaptive_eager_settings()
    given = dict(backlog=backlog, hot_after=hot_after, max_ops=max_ops, min_bytes=min_bytes)
    _C._set_adaptive_eager_settings(*(current[k] if v is None else int(v) for k, v in given.items()))


def adaptive_eager_stats() -> dict:
    """Counters since start or the last reset: ops recorded, regions (fused or run op by op),
    plan cache hits and misses with their hit rate, values never written to memory, and why
    regions ended (flush_*)."""
    stats = dict(_C._adaptive_eager_stats())
    lookups = stats["plan_hits"] + stats["plan_misses"]
    stats["plan_hit_rate"] = stats["plan_hits"] / lookups if lookups else 0.0
    return stats


def reset_adaptive_eager_stats():
    """Zeroes the counters and forgets every region structure seen (so each is cold again)."""
    _C._reset_adaptive_eager_stats()
