"""torchneuron: a native PyTorch backend for a Trainium-class device, simulated on the host CPU.

Importing it (or just `import torch`, through the `torch.backends` entry point) registers the
`neuron` device: tensors, modules and `torch.accelerator` code then run with device='neuron'.
"""

import atexit
import os
import sys


def _autoload():
    """Entry point of the `torch.backends` group; importing this package did the work."""


# Defined before `import torch`: when this package is imported first (python -m
# torchneuron.tool), torch's autoload re-enters it while it is still partly initialized.
import torch  # noqa: E402

_FALLBACK_MODES = ("warn", "silent", "error")


def _check_environment():
    """Rejects malformed TORCHNEURON_* settings before the runtime reads them."""
    mode = os.environ.get("TORCHNEURON_FALLBACK", "warn") or "warn"
    if mode not in _FALLBACK_MODES:
        raise ValueError(
            f"TORCHNEURON_FALLBACK={mode!r} is not a fallback mode; "
            f"use one of {', '.join(_FALLBACK_MODES)}."
        )
    adaptive = os.environ.get("TORCHNEURON_ADAPTIVE_EAGER", "")
    if adaptive not in ("", "0", "1"):
        raise ValueError(f"TORCHNEURON_ADAPTIVE_EAGER={adaptive!r} must be 0 or 1.")
    if adaptive == "1":
        from torchneuron._gil import gil_refusal

        if reason := gil_refusal():
            raise RuntimeError(f"TORCHNEURON_ADAPTIVE_EAGER=1: {reason}")
    for name, low, high in (("TORCHNEURON_NUM_DEVICES", 0, 64), ("TORCHNEURON_HBM_GB", 1, 1 << 20)):
        value = os.environ.get(name, "")
        if value and not (value.isdigit() and low <= int(value) <= high):
            raise ValueError(f"{name}={value!r} must be a whole number from {low} to {high}.")


_check_environment()

from torchneuron import _cpu_dispatch  # noqa: E402

_cpu_dispatch.load()  # before _C, which runs whichever kernel library is loaded first

from torchneuron import _C  # noqa: E402  (registers the C++ device, allocator and operators)
from torchneuron import _dynamo_interface, neuron  # noqa: E402


def _register():
    """Renames PrivateUse1 to `neuron` and installs torch.neuron and the tensor methods."""
    if torch._C._get_privateuse1_backend_name() == "neuron":
        return
    torch.utils.rename_privateuse1_backend("neuron")
    torch._register_device_module("neuron", neuron)
    from torchneuron import memory

    neuron.memory = memory  # torch.neuron.memory, as torch.cuda.memory
    sys.modules["torch.neuron.memory"] = memory
    neuron.memory_snapshot = memory.memory_snapshot
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
    _C._set_library_prefixes(
        [os.path.dirname(torch.__file__) + os.sep, os.path.dirname(__file__) + os.sep]
    )
    _dynamo_interface.register_when_dynamo_loads()
    from torchneuron import compat, distributed

    distributed.register()
    compat.apply_when_frameworks_load()


_register()


def _drain_at_exit():
    """Runs the work queued before exit while the interpreter still works, and reports a fault it
    raises: unsynchronized work would otherwise run during finalization, its errors unseen."""
    if not _C._is_initialized() or _C._is_in_bad_fork():
        return
    for index in range(_C._device_count()):
        try:
            neuron.synchronize(index)
        except Exception as error:  # noqa: BLE001  (any device error; exit goes on)
            sys.stderr.write(
                f"torchneuron: neuron:{index} had a device error pending at exit (call "
                f"torch.neuron.synchronize() before exiting to handle it):\n{error}\n"
            )


atexit.register(_drain_at_exit)


def nki_op(name, *, mutates_args=(), device_types=None, schema=None):
    """Makes a function that calls NKI kernels a torch.library custom op (see torchneuron.nki)."""
    from torchneuron.nki import nki_op as make

    return make(name, mutates_args=mutates_args, device_types=device_types, schema=schema)


if os.environ.get("TORCHNEURON_NKI_MODULES", "0") not in ("", "0"):
    from torchneuron import nki as _nki

    _nki.install()

if os.environ.get("TORCHNEURON_NKI_ATTENTION", "0") not in ("", "0"):
    from torchneuron.nki import library as _nki_library

    _nki_library.use_nki_attention(True)


def cpu_capability():
    """Returns the instruction-set level the native kernels run at: 'avx512', 'avx2' or 'default'."""
    return _cpu_dispatch.loaded_level()


def fallback_report():
    """Returns {ATen operator name: calls} for every operator that fell back to the CPU."""
    return dict(_C._fallback_counts())


def reset_fallback_report():
    """Clears the counts that fallback_report() returns."""
    _C._reset_fallback_counts()


def fallback_mode():
    """Returns the CPU fallback mode: 'warn', 'silent' or 'error'."""
    return _C._fallback_mode()


def set_fallback_mode(mode):
    """Sets the CPU fallback mode: 'warn' (once per op), 'silent', or 'error' (raise instead)."""
    if mode not in _FALLBACK_MODES:
        raise ValueError(f"fallback mode must be one of {_FALLBACK_MODES}, got {mode!r}")
    _C._set_fallback_mode(mode)


def native_ops():
    """Returns the sorted ATen operator names with a native neuron kernel, read from the dispatcher."""
    names = torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")
    return sorted(name for name in names if name.startswith("aten::"))


def compile_stats():
    """Counters of torch.compile(backend="neuron"): graphs compiled and run eagerly, kernels
    generated, ops fused vs run as eager calls, artifact cache hits, compile seconds."""
    from torchneuron.compiler import compile_stats as stats

    return stats()


def reset_compile_stats():
    """Zeroes the counters that compile_stats() returns."""
    from torchneuron.compiler import reset_compile_stats as reset

    reset()


from torchneuron.adaptive import (adaptive_eager, adaptive_eager_settings, adaptive_eager_stats,  # noqa: E402
                                  is_adaptive_eager_enabled, reset_adaptive_eager_stats, set_adaptive_eager_settings)

__all__ = [
    "adaptive_eager",
    "adaptive_eager_settings",
    "adaptive_eager_stats",
    "compile_stats",
    "cpu_capability",
    "fallback_mode",
    "fallback_report",
    "is_adaptive_eager_enabled",
    "native_ops",
    "nki_op",
    "reset_adaptive_eager_stats",
    "reset_compile_stats",
    "reset_fallback_report",
    "set_adaptive_eager_settings",
    "set_fallback_mode",
]
