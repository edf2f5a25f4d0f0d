"""The torch.distributed backend `neuron`: collectives on neuron tensors, in device queue order.

Registered when torchneuron loads, so `dist.init_process_group("neuron")`, `init_process_group()`
and `init_process_group("cpu:gloo,neuron:neuron")` work under torchrun. Inside one machine the
bytes of the main collectives move through shared memory; everything else, and every group that
spans machines, goes through a Gloo process group built from the same store (TCP;
GLOO_SOCKET_IFNAME is honoured). See docs/distributed.md.
"""

import os
import socket
from datetime import timedelta

import torch
import torch.distributed as dist

from torchneuron import _C

BACKEND_NAME = "neuron"


def _create_transport(store, rank, size, timeout_s, global_ranks):
    """The Gloo group that moves a neuron group's bytes; configured as torch configures its own."""
    transport = dist.ProcessGroupGloo(store, rank, size, timedelta(seconds=timeout_s))
    transport.options.global_ranks_in_group = list(global_ranks)
    return transport


def _machine_id():
    """Equal for processes that can share memory: one boot of one machine, one network and IPC
    namespace (so two "hosts" made of network namespaces still talk over the network). Empty
    when TORCHNEURON_SHM_COLLECTIVES=0 turns the shared-memory transport off."""
    if os.environ.get("TORCHNEURON_SHM_COLLECTIVES", "1") == "0":
        return ""
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            parts = [socket.gethostname(), boot.read().strip()]
        parts += [os.readlink(f"/proc/self/ns/{kind}") for kind in ("net", "ipc")]
    except OSError:
        return ""  # not Linux: Gloo only
    return "|".join(parts)


def _create_backend(backend_options, _extra_options=None):
    """Builds the backend of one process group: a Gloo transport, wrapped by the neuron backend."""
    timeout_s = backend_options.timeout.total_seconds()
    rank, size = backend_options.group_rank, backend_options.group_size
    # The default group's list is empty: it holds every rank.
    global_ranks = list(backend_options.global_ranks_in_group) or list(range(size))
    transport = _create_transport(backend_options.store, rank, size, timeout_s, global_ranks)
    transport.options.group_name = backend_options.group_id
    backend = _C._c10d.create_backend(
        transport, backend_options.store, rank, size, timeout_s, global_ranks, _create_transport,
        _machine_id(),
    )
    # Gloo's sequence numbers, agreed through the store as torch does for its own Gloo groups.
    backend._set_sequence_number_for_group()
    return backend


def _make_neuron_the_default_backend(new_group_helper):
    """torch 2.13 builds a group made by `init_process_group()` (no backend named, as DeviceMesh
    does) with only the accelerator's backend and marks GLOO, which it lacks, as the default: CPU
    tensors then have no backend and sequence numbers fail. Such a group here gets Gloo for CPU
    tensors and neuron for neuron tensors, and neuron is the default wherever it serves neuron
    tensors, as NCCL is for CUDA."""

    def helper(*args, **kwargs):
        args = list(args)
        backend = args[3] if len(args) > 3 else kwargs.get("backend")
        if backend == dist.Backend.UNDEFINED and _accelerator_is_neuron():
            backend = dist.Backend(f"cpu:gloo,{BACKEND_NAME}:{BACKEND_NAME}")
            if len(args) > 3:
                args[3] = backend
            else:
                kwargs["backend"] = backend
        result = new_group_helper(*args, **kwargs)
        group = result[0] if isinstance(result, tuple) else result
        if isinstance(group, dist.ProcessGroup) and backend is not None:
            config = dist.distributed_c10d.BackendConfig(dist.Backend(str(backend)))
            if config.get_device_backend_map().get(BACKEND_NAME) == BACKEND_NAME:
                group._set_default_backend(dist.ProcessGroup.BackendType.CUSTOM)
        return result

    helper.__wrapped__ = new_group_helper
    return helper


def _accelerator_is_neuron():
    return torch._C._get_accelerator().type == BACKEND_NAME


def _with_neuron_sequence_numbers(method_name):
    """ProcessGroup asks only built-in backends for sequence numbers; ours keeps Gloo's."""
    original = getattr(dist.ProcessGroup, method_name)

    def method(group):
        if group._get_backend_name() == "custom":
            backend = group._get_backend(torch.device(BACKEND_NAME))
            return getattr(backend, method_name)()
        return original(group)

    method.__wrapped__ = original
    method.__doc__ = original.__doc__
    return method


def register():
    """Registers `neuron` with torch.distributed (idempotent)."""
    if not dist.is_available():
        return
    if BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(
            BACKEND_NAME, _create_backend, extended_api=True, devices=[BACKEND_NAME]
        )
    c10d = dist.distributed_c10d
    if not hasattr(c10d._new_process_group_helper, "__wrapped__"):
        c10d._new_process_group_helper = _make_neuron_the_default_backend(
            c10d._new_process_group_helper
        )
        for name in ("_get_sequence_number_for_group", "_set_sequence_number_for_group"):
            setattr(dist.ProcessGroup, name, _with_neuron_sequence_numbers(name))


__all__ = ["BACKEND_NAME", "register"]
