"""Loads the copy of the kernel library built for this CPU's instruction-set level.

The native kernels are compiled once per level (baseline x86-64, AVX2, AVX-512) into
lib/<level>/libtorchneuron_kernels.so; every copy has the same soname, so the one loaded here,
before the extension module, is the one the extension module runs.
"""

import ctypes
import os
import warnings

LEVELS = ("default", "avx2", "avx512")
_LIB_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib")

_kernels = None


def _runtime():
    runtime = ctypes.CDLL(os.path.join(_LIB_DIR, "libtorchneuron_runtime.so"))
    for name in ("torchneuron_highest_cpu_capability", "torchneuron_selected_cpu_capability"):
        getattr(runtime, name).restype = ctypes.c_char_p
    return runtime


def highest_supported():
    """Returns the highest level this CPU and operating system support."""
    return _runtime().torchneuron_highest_cpu_capability().decode()


def _available():
    """The levels built into this installation, lowest first."""
    return [level for level in LEVELS if os.path.exists(os.path.join(_LIB_DIR, level, "libtorchneuron_kernels.so"))]


def _built_level_for(level, built):
    """The highest built level at or below `level` (a package built with fewer levels than this
    CPU has runs at the best one it holds), with a warning; ImportError when there is none."""
    below = [b for b in built if LEVELS.index(b) <= LEVELS.index(level)]
    if not below:
        raise ImportError(
            f"torchneuron was built without a kernel library this CPU can run (it supports up to {level}; "
            f"built: {', '.join(built) or 'none'}); rebuild with `make build`."
        )
    warnings.warn(
        f"torchneuron was built without the {level} kernel library; running at {below[-1]} "
        "(build with TORCHNEURON_CPU_LEVELS=supported or all for this CPU's own).",
        stacklevel=3,
    )
    return below[-1]


def check_request(requested, highest):
    """Rejects a TORCHNEURON_CPU_CAPABILITY that names no level; warns when it is above the CPU's."""
    if not requested:
        return
    if requested not in LEVELS:
        raise ValueError(
            f"TORCHNEURON_CPU_CAPABILITY={requested!r} is not a level; use one of {', '.join(LEVELS)}."
        )
    if LEVELS.index(requested) > LEVELS.index(highest):
        warnings.warn(
            f"TORCHNEURON_CPU_CAPABILITY={requested} is above what this CPU supports; running at {highest}.",
            stacklevel=3,
        )


def load():
    """Loads the kernel library of the selected level once; returns its level."""
    global _kernels
    if _kernels is None:
        runtime = _runtime()
        check_request(os.environ.get("TORCHNEURON_CPU_CAPABILITY", ""), runtime.torchneuron_highest_cpu_capability().decode())
        level = runtime.torchneuron_selected_cpu_capability().decode()
        if level not in _available():
            level = _built_level_for(level, _available())
            # The runtime reads the variable too: generated code then targets the loaded level.
            os.environ["TORCHNEURON_CPU_CAPABILITY"] = level
        _kernels = ctypes.CDLL(os.path.join(_LIB_DIR, level, "libtorchneuron_kernels.so"))
        _kernels.torchneuron_kernels_cpu_capability.restype = ctypes.c_char_p
    return loaded_level()


def loaded_level():
    """The level of the kernel library that runs, as the library itself reports it."""
    return _kernels.torchneuron_kernels_cpu_capability().decode()
