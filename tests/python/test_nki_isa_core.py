"""Instructions and helpers that the core kernels of AWS's nki-library use: neuron_dtypes, the
cross-partition instructions (nc_stream_shuffle, tensor_partition_reduce), gathers, nonzero_with_count,
predicated copies and range selects, dma_compute, registers; each a small kernel of our own checked
against NumPy, compiled and interpreted."""
import sys

import numpy as np
import pytest
import torch

import torchneuron  # noqa: F401
from torchneuron import nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

RUNS = ["compiled", "interpreted"]


def run(kernel, mode, *args, **kwargs):
    if mode == "interpreted":
        return nki.simulate_kernel(kernel, *args, **kwargs)
    return kernel(*args, **kwargs)


def test_neuron_dtypes_module():
    nki.install()
    import neuron_dtypes as dt
    assert sys.modules["neuron_dtypes"] is dt
    x = np.array([1.0 + 2 ** -9, -2.7, 3.5], np.float32)
    b = dt.static_cast(x, dt.bfloat16).astype(np.float32)
    assert b[0] == 1.0 and b[1] == np.float32(torch.tensor(-2.7).bfloat16().item())  # round to nearest even
    assert dt.static_cast(x, nl.int32).tolist() == [1, -2, 3] and dt.static_cast(x, nl.int32).dtype == np.int32
    assert dt.static_cast(x, np.float32) is not x and dt.static_cast(x, "float16").dtype == np.float16
    assert dt.sizeinbytes(nl.bfloat16) == 2 and dt.sizeinbytes(np.float32) == 4 and dt.sizeinbytes(nl.float8_e4m3fn_x4) == 4
    assert dt.is_float_type(nl.bfloat16) and not dt.is_float_type(np.int32)
    assert dt.finfo(nl.bfloat16).max == torch.finfo(torch.bfloat16).max and dt.finfo(np.float32).bits == 32
    with pytest.raises(TypeError):
        dt.finfo(np.int32)
