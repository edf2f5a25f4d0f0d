"""Whether this interpreter has the GIL that adaptive eager relies on (importable before _C)."""

import sys


def gil_refusal() -> str | None:
    """Why adaptive eager cannot run in this interpreter, or None: it decides that a recorded value
    is dead from Python reference counts read under the GIL, which free-threaded CPython lacks."""
    is_gil_enabled = getattr(sys, "_is_gil_enabled", None)
    if is_gil_enabled is None or is_gil_enabled():
        return None
    return ("adaptive eager needs the GIL, and this free-threaded Python runs without it: it reads "
            "Python reference counts to know which values nobody can see again. Run with PYTHON_GIL=1, "
            "or without adaptive eager.")
