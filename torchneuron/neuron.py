"""torch.neuron: the device module for `neuron`, shaped like torch.cuda."""

import dataclasses
import os
import warnings

import torch

from torchneuron import _C

OutOfMemoryError = torch.OutOfMemoryError
AcceleratorError = torch.AcceleratorError


# ---- devices -------------------------------------------------------------------------------


def is_available():
    """Returns True when at least one neuron device is configured."""
    return _C._device_count() > 0


def device_count():
    """Returns the number of neuron devices (TORCHNEURON_NUM_DEVICES, default 2)."""
    return _C._device_count()


def is_initialized():
    """Returns True once a neuron device has started in this process."""
    return _C._is_initialized()


def _is_in_bad_fork():
    """Returns True in a child forked after the parent had started a neuron device."""
    return _C._is_in_bad_fork()


def _lazy_init():
    """Devices start lazily on first use; raises in a process forked after initialization."""
    if _is_in_bad_fork():
        raise RuntimeError(
            "Cannot use the neuron device in a forked subprocess: the parent had already "
            "started it. Use the 'spawn' start method."
        )


def init():
    """Initializes the neuron runtime (a no-op beyond the fork check: devices start lazily)."""
    _lazy_init()


def _get_device_index(device, optional=True):
    """Turns a device, string, int or None into a neuron device index."""
    if device is None:
        return current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"expected a neuron device, got {device}")
        return current_device() if device.index is None else device.index
    if isinstance(device, int):
        return device
    raise TypeError(f"expected a neuron device, index or None, got {type(device).__name__}")


def _existing_device_index(device):
    """_get_device_index, raising ValueError for an index with no device behind it."""
    index = _get_device_index(device)
    if not 0 <= index < device_count():
        raise ValueError(f"neuron device index {index} is out of range (0..{device_count() - 1})")
    return index


def current_device():
    """Returns the index of the calling thread's current neuron device."""
    return _C._current_device()


def set_device(device):
    """Sets the calling thread's current neuron device, starting it (as torch.cuda.set_device
    initializes CUDA): then is_initialized() is True, and code that resolves "neuron" without an
    index, such as FakeTensor's, takes this device."""
    index = _get_device_index(device)
    if index < 0:
        return  # as torch.cuda.set_device: a negative index is a no-op (Dynamo's exchange_device(-1))
    _C._set_device(index)
    _C._start_device(index)


class device:
    """Context manager that makes `device` the current neuron device inside the block."""

    def __init__(self, device):
        self.idx = -1 if device is None else _get_device_index(device)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev_idx = current_device()
            set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx >= 0:
            set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the device of tensor `obj` current (CPU tensors: no change)."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.device.type == "neuron" else None)


def synchronize(device=None):
    """Waits for all work queued on the device and raises the first error it hit."""
    _C._synchronize(_get_device_index(device))


def _sleep(microseconds, device=None):
    """Queues a command that holds the device for `microseconds` (as torch.cuda._sleep spins
    the GPU): tests use it to make the host get ahead of the device."""
    _C._sleep(_get_device_index(device), int(microseconds))


# ---- streams and events --------------------------------------------------------------------


class Stream(torch.Stream):
    """A neuron stream. All streams of a device share its one hardware queue, in order."""

    def __new__(cls, device=None, priority=0, **kwargs):
        if "stream_id" in kwargs:
            return super().__new__(cls, **kwargs)
        index = _get_device_index(device)
        return super().__new__(cls, device=torch.device("neuron", index), priority=priority)

    def __repr__(self):
        return f"<torch.neuron.Stream device=neuron:{self.device_index} stream_id={self.stream_id}>"


class Event(torch.Event):
    """A neuron event: a marker in the device's queue that can be waited on and timed."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        if interprocess:
            raise ValueError("neuron events cannot be shared between processes (interprocess=True)")
        return super().__new__(cls, device="neuron", enable_timing=enable_timing)

    def elapsed_time(self, end_event):
        """Milliseconds from this event to `end_event`, waiting for both to complete."""
        if not isinstance(end_event, torch.Event) or end_event.device.type != "neuron":
            raise TypeError(f"elapsed_time expects a neuron event, got {end_event!r}")
        return _C._event_elapsed_ms(self.event_id, end_event.event_id)


def _wrap_stream(stream):
    return Stream(
        stream_id=stream.stream_id, device_index=stream.device_index, device_type=stream.device_type
    )


def current_stream(device=None):
    """Returns the calling thread's current stream on the device."""
    return _wrap_stream(torch.accelerator.current_stream(_get_device_index(device)))


def default_stream(device=None):
    """Returns the default stream of the device."""
    index = _get_device_index(device)
    return Stream(stream_id=0, device_index=index, device_type=current_stream(index).device_type)


def set_stream(stream):
    """Makes `stream` the current stream of its device."""
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    """Makes `stream` current inside a `with` block and restores the previous stream and device
    after it (None: no change)."""

    def __init__(self, stream):
        self.stream = stream
        self._previous = None

    def __enter__(self):
        if self.stream is not None:
            self._previous = (current_stream(self.stream.device_index), current_device())
            set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self._previous is not None:
            previous_stream, previous_device = self._previous
            self._previous = None
            set_stream(previous_stream)
            set_device(previous_device)
        return False


def stream(stream):
    """Context manager that makes `stream` current inside the block (None: no change)."""
    return StreamContext(stream)


def can_device_access_peer(device, peer_device):
    """Whether `device` can copy to and from `peer_device` directly: any two distinct neuron
    devices can (copies between them run on the queues, without a stop on the host)."""
    return _existing_device_index(device) != _existing_device_index(peer_device)


# ---- memory --------------------------------------------------------------------------------


def memory_stats(device=None):
    """Returns the caching allocator's statistics for the device, keyed like torch.cuda's."""
    return torch.accelerator.memory_stats(_get_device_index(device))


def memory_stats_as_nested_dict(device=None):
    """memory_stats as nested dicts: "allocated_bytes.all.current" becomes
    ["allocated_bytes"]["all"]["current"]."""
    nested = {}
    for key, value in memory_stats(device).items():
        *path, leaf = key.split(".")
        level = nested
        for part in path:
            level = level.setdefault(part, {})
        level[leaf] = value
    return nested


def memory_allocated(device=None):
    """Returns the bytes currently held by tensors on the device."""
    return torch.accelerator.memory_allocated(_get_device_index(device))


def max_memory_allocated(device=None):
    """Returns the peak of memory_allocated since start or the last reset."""
    return torch.accelerator.max_memory_allocated(_get_device_index(device))


def memory_reserved(device=None):
    """Returns the bytes the caching allocator holds from the device's HBM."""
    return torch.accelerator.memory_reserved(_get_device_index(device))


def max_memory_reserved(device=None):
    """Returns the peak of memory_reserved since start or the last reset."""
    return torch.accelerator.max_memory_reserved(_get_device_index(device))


def reset_peak_memory_stats(device=None):
    """Resets the peak values of the allocator statistics."""
    torch.accelerator.reset_peak_memory_stats(_get_device_index(device))


def reset_accumulated_memory_stats(device=None):
    """Resets the running totals (allocated/freed counts) of the allocator statistics."""
    torch.accelerator.reset_accumulated_memory_stats(_get_device_index(device))


def reset_max_memory_allocated(device=None):
    """Deprecated, as in torch.cuda: resets every peak statistic (reset_peak_memory_stats)."""
    warnings.warn("torch.neuron.reset_max_memory_allocated is deprecated: it resets every peak statistic, "
                  "as torch.neuron.reset_peak_memory_stats does", FutureWarning, stacklevel=2)
    reset_peak_memory_stats(device)


def memory_cached(device=None):
    """Deprecated, as in torch.cuda: memory_reserved."""
    warnings.warn("torch.neuron.memory_cached is deprecated; use torch.neuron.memory_reserved", FutureWarning,
                  stacklevel=2)
    return memory_reserved(device)


def max_memory_cached(device=None):
    """Deprecated, as in torch.cuda: max_memory_reserved."""
    warnings.warn("torch.neuron.max_memory_cached is deprecated; use torch.neuron.max_memory_reserved",
                  FutureWarning, stacklevel=2)
    return max_memory_reserved(device)


def empty_cache():
    """Returns unused cached memory of every neuron device to its HBM."""
    torch.accelerator.empty_cache()


def mem_get_info(device=None):
    """Returns (free, total) bytes of the device's HBM."""
    return torch.accelerator.get_memory_info(_get_device_index(device))


def memory_summary(device=None, abbreviated=False):
    """Returns a printable table of the allocator statistics of the device."""
    index = _get_device_index(device)
    stats = memory_stats(index)

    def fmt_bytes(value):
        for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
            if abs(value) < 1024 or unit == "TiB":
                return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
            value /= 1024

    rows = [
        ("Allocated memory", "allocated_bytes", fmt_bytes),
        ("Active memory", "active_bytes", fmt_bytes),
        ("Requested memory", "requested_bytes", fmt_bytes),
        ("Reserved memory", "reserved_bytes", fmt_bytes),
        ("Non-releasable memory", "inactive_split_bytes", fmt_bytes),
        ("Allocations", "allocation", str),
        ("Active allocs", "active", str),
        ("Reserved segments", "segment", str),
    ]
    pools = ("all",) if abbreviated else ("all", "small_pool", "large_pool")
    header = f"{'Metric':<28}{'Cur Usage':>14}{'Peak Usage':>14}{'Tot Alloc':>14}{'Tot Freed':>14}"
    lines = [
        "=" * len(header),
        f" neuron:{index} memory summary (capacity {fmt_bytes(_C._hbm_capacity())})",
        "=" * len(header),
        header,
        "-" * len(header),
    ]
    for title, key, fmt in rows:
        for pool in pools:
            label = title if pool == "all" else f"  from {pool.replace('_', ' ')}"
            values = [stats.get(f"{key}.{pool}.{field}", 0) for field in ("current", "peak", "allocated", "freed")]
            lines.append(f"{label:<28}" + "".join(f"{fmt(v):>14}" for v in values))
    lines.append("-" * len(header))
    lines.append(
        f"Allocation retries: {stats.get('num_alloc_retries', 0)}   "
        f"OOMs: {stats.get('num_ooms', 0)}   "
        f"HBM segment allocs/frees: {stats.get('num_device_alloc', 0)}/{stats.get('num_device_free', 0)}"
    )
    lines.append("=" * len(header))
    return "\n".join(lines) + "\n"


# ---- random numbers ------------------------------------------------------------------------


# Each device's default generator as a torch.Generator, as torch.cuda.default_generators.
default_generators = _C._default_generators()


def manual_seed(seed):
    """Seeds the current neuron device's default generator."""
    default_generators[current_device()].manual_seed(int(seed))


def manual_seed_all(seed):
    """Seeds the default generator of every neuron device."""
    # torch.Generator.manual_seed takes what torch.manual_seed takes, [-2**63, 2**64), and keeps
    # a negative seed's two's-complement bits, as torch.cuda.manual_seed does.
    seed = int(seed)
    for generator in default_generators:
        generator.manual_seed(seed)


def seed():
    """Seeds the current device's default generator with a random number."""
    _C._seed(current_device())


def seed_all():
    """Seeds every device's default generator with one random number."""
    manual_seed_all(int.from_bytes(os.urandom(8), "little"))


def initial_seed(device=None):
    """Returns the seed of the device's default generator."""
    return _C._initial_seed(_get_device_index(device))


def get_rng_state(device="neuron"):
    """Returns the default generator's state as a CPU uint8 tensor: seed then offset, 8 bytes each."""
    return torch.frombuffer(bytearray(_C._get_rng_state(_get_device_index(device))), dtype=torch.uint8)


def set_rng_state(new_state, device="neuron"):
    """Restores a state returned by get_rng_state."""
    if not isinstance(new_state, torch.Tensor) or new_state.dtype != torch.uint8:
        raise TypeError("set_rng_state expects a torch.uint8 tensor from get_rng_state()")
    _C._set_rng_state(_get_device_index(device), bytes(new_state.cpu().contiguous().numpy().tobytes()))


def get_rng_state_all():
    """Returns the generator state of every device."""
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states):
    """Restores the generator state of every device."""
    for index, state in enumerate(new_states):
        set_rng_state(state, index)


# ---- properties ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _NeuronDeviceProperties:
    name: str
    total_memory: int
    multi_processor_count: int
    major: int = 2
    minor: int = 0
    is_simulated: bool = True


def get_device_properties(device=None):
    """Returns name, total_memory (HBM bytes) and engine count of the device."""
    _existing_device_index(device)
    return _NeuronDeviceProperties(
        name="NeuronCore (simulated on host CPU)",
        total_memory=_C._hbm_capacity(),
        multi_processor_count=os.cpu_count() or 1,
    )


def get_device_name(device=None):
    """Returns the device's name."""
    return get_device_properties(device).name


def get_device_capability(device=None):
    """Returns the device's (major, minor) capability."""
    props = get_device_properties(device)
    return props.major, props.minor


def is_bf16_supported(including_emulation=True):
    """Returns True: neuron computes in bfloat16."""
    return True


def get_amp_supported_dtype():
    """Returns the dtypes autocast may use on neuron."""
    return [torch.bfloat16, torch.float16]


# Graph capture and replay (torchneuron/graphs.py), as torch.cuda has them.
from torchneuron.graphs import (NeuronGraph, graph, graph_pool_handle, is_current_stream_capturing,  # noqa: E402,F401
                                make_graphed_callables)
