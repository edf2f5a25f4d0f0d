"""The two ways NKI tests run a kernel: compiled (the kernel called) and interpreted
(nki.simulate_kernel), so each behaviour is checked in both executors."""

from torchneuron import nki

RUNS = ["compiled", "interpreted"]


def run(kernel, mode, *args, **kwargs):
    """Runs `kernel` compiled or interpreted (mode is one of RUNS)."""
    if mode == "interpreted":
        return nki.simulate_kernel(kernel, *args, **kwargs)
    return kernel(*args, **kwargs)
