"""torchneuron.nki: the Neuron Kernel Interface on the neuron device. Kernels written against
`nki` / `nki.language` / `nki.isa` (or the legacy `neuronxcc.nki`) are traced once per argument
shapes into the compiler's tile programs, compiled, and run as one command on the device queue.
`install()` (or TORCHNEURON_NKI_MODULES=1) makes `import nki` and `import neuronxcc.nki` find
this package; see docs/nki.md."""
from . import collectives, compiler, isa, language, typing
from . import _isa_bytes, _isa_indirect, _isa_mx  # noqa: F401  (they provide the tile extensions: _tensor.extensions)
from ._expr import KernelTraceError
from ._kernel import Kernel, interpreting, jit, simulate_kernel
from ._modules import install
from ._dtypes import dtype
from ._tensor import NKIError
from .custom_op import nki_op

baremetal = jit  # the legacy decorator for kernels called with NumPy arrays


def profile(fn=None, **_unused):
    """Legacy decorator: the kernel, compiled (no profile is written)."""
    return jit(fn) if fn is not None else jit


def simulate(kernel):
    """nki.simulate(kernel)(*arrays): the kernel (a grid too: kernel[2]) run in the interpreter."""
    return lambda *args, **kwargs: simulate_kernel(kernel, *args, **kwargs)


def benchmark(fn=None, **_unused):
    """Legacy decorator: the kernel, compiled (time it with torchneuron's benchmarks)."""
    return jit(fn) if fn is not None else jit


__all__ = ["collectives", "compiler", "jit", "Kernel", "language", "isa", "typing", "install", "simulate", "simulate_kernel", "baremetal", "benchmark",
           "NKIError", "KernelTraceError", "interpreting", "nki_op", "dtype"]
