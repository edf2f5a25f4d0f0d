"""torch.neuron.memory: memory history and snapshots in the format of torch.cuda.memory, so that
`python -m torch.cuda._memory_viz` and PyTorch's memory viewer read them.

    torch.neuron.memory._record_memory_history(max_entries=100000)
    ... run the model ...
    torch.neuron.memory._dump_snapshot("snapshot.pickle")
    # python -m torch.cuda._memory_viz trace_plot snapshot.pickle -o trace.html

Each event and block carries the Python line that launched the allocating op (one frame)."""
from __future__ import annotations

import pickle
import sys

import torch

from torchneuron import _C

_DEFAULT_ENTRIES = sys.maxsize


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=_DEFAULT_ENTRIES, device=None,
                           **_unused):
    """Starts recording every allocation and free on every neuron device (enabled=None stops and
    forgets the history), keeping the last `max_entries` events."""
    if enabled not in (None, "all", "state", True, False):
        raise ValueError(f"_record_memory_history: enabled must be None, 'state' or 'all', got {enabled!r}")
    on = enabled not in (None, False)
    _C._record_memory_history(on, min(int(max_entries), 2**62) if on else 0)


def _frames(site):
    if not site:
        return []
    filename, _, line = site.rpartition(":")
    return [{"filename": filename, "line": int(line) if line.isdigit() else 0, "name": "<neuron op>"}]


def _snapshot(device=None):
    """The allocators' state as torch.cuda.memory._snapshot() returns CUDA's: segments with their
    blocks (and the frames of each live block's allocation), and the recorded history per device."""
    events = _C._memory_history()
    last_alloc = {}
    traces = [[] for _ in range(torch.neuron.device_count())]
    for dev, action, address, size, site, time_us in events:
        frames = _frames(site)
        if action == "alloc":
            last_alloc[(dev, address)] = frames
        traces[dev].append({"action": action, "addr": address, "size": size, "stream": 0, "time_us": time_us,
                            "frames": frames})
    segments = []
    for dev in range(torch.neuron.device_count()):
        if device is not None and torch.device(device).index not in (None, dev):
            continue
        for address, size, pool, graph_pool, blocks in _C._memory_segments(dev):
            block_dicts = []
            for b_address, b_size, requested, allocated in blocks:
                block_dicts.append({
                    "address": b_address, "size": b_size, "requested_size": requested if allocated else 0,
                    "state": "active_allocated" if allocated else "inactive",
                    "frames": last_alloc.get((dev, b_address), []) if allocated else [],
                })
            allocated_size = sum(b["size"] for b in block_dicts if b["state"] == "active_allocated")
            segments.append({
                "device": dev, "address": address, "total_size": size, "allocated_size": allocated_size,
                "active_size": allocated_size, "requested_size": sum(b["requested_size"] for b in block_dicts),
                "stream": 0, "segment_type": pool, "segment_pool_id": (0, graph_pool), "is_expandable": False,
                "frames": [], "blocks": block_dicts,
            })
    return {"segments": segments, "device_traces": traces,
            "allocator_settings": {"PYTORCH_NEURON_ALLOC_CONF": {}, "max_split_size": -1}}


def _dump_snapshot(filename="dump_snapshot.pickle"):
    """Writes _snapshot() as a pickle, the file _memory_viz and the memory viewer open."""
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


def memory_snapshot():
    """The segments of _snapshot(), as torch.cuda.memory_snapshot() returns them."""
    return _snapshot()["segments"]
