"""neuron_dtypes: the NumPy-side dtype helpers that AWS's NKI kernels and their references import
(`import neuron_dtypes as dt`), registered under that name by `torchneuron.nki.install()`.

What is provided: `static_cast(array, dtype)` (a NumPy array converted to a dtype, rounding to
bfloat16 / float16 / float8 where the dtype has fewer bits), `sizeinbytes(dtype)`, `finfo(dtype)`,
`is_float_type(dtype)`, and the dtype names (`bfloat16`, the float8 and packed MX names). When the
`ml_dtypes` package is installed its NumPy dtypes are used; without it the names are the nl dtypes
and arrays cast to them are float32 arrays holding values rounded to that dtype."""
from __future__ import annotations

import numpy as np
import torch

try:  # NumPy dtypes for bfloat16 and float8 where available
    import ml_dtypes as _ml
except ImportError:  # pragma: no cover - depends on the environment
    _ml = None

from ._dtypes import DTYPES, to_dtype

_TORCH_NARROW = {"bfloat16": torch.bfloat16, "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2,
                 "float8_e4m3": torch.float8_e4m3fn, "float8_e8m0fnu": getattr(torch, "float8_e8m0fnu", None)}


def _ml_dtype(name):
    return np.dtype(getattr(_ml, name)) if _ml is not None and hasattr(_ml, name) else None


# Without ml_dtypes these are the nl dtypes: static_cast to them gives float32 arrays of rounded values.
bfloat16 = _ml_dtype("bfloat16") or DTYPES["bfloat16"]
float8_e4m3 = _ml_dtype("float8_e4m3") or DTYPES["float8_e4m3"]
float8_e4m3fn = _ml_dtype("float8_e4m3fn") or DTYPES["float8_e4m3fn"]
float8_e5m2 = _ml_dtype("float8_e5m2") or DTYPES["float8_e5m2"]
float8_e8m0fnu = _ml_dtype("float8_e8m0fnu") or DTYPES["float8_e8m0fnu"]
# Packed MX dtypes (4 values an item): named so that code refering to them imports; arrays of them
# are their raw bits.
float8_e4m3fn_x4 = np.dtype(np.uint32)
float8_e5m2_x4 = np.dtype(np.uint32)
float4_e2m1fn_x4 = np.dtype(np.uint16)


def _name(dtype) -> str:
    """The NKI name of a NumPy, torch or NKI dtype (or its name)."""
    if isinstance(dtype, np.dtype) and _ml is not None:
        for name in ("bfloat16", "float8_e4m3", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"):
            if _ml_dtype(name) == dtype:
                return name
    try:
        return to_dtype(dtype).name
    except TypeError:
        return np.dtype(dtype).name


def static_cast(array, dtype):
    """`array` as a NumPy array of `dtype`: floats rounded to nearest even (narrow float dtypes
    through torch's conversions), floats to integers truncated toward zero."""
    array = np.asarray(array)
    name = _name(dtype)
    if name in _TORCH_NARROW and _TORCH_NARROW[name] is not None:
        rounded = torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).to(_TORCH_NARROW[name]).float()
        values = rounded.numpy()
        target = _ml_dtype(name)
        return values.astype(target) if target is not None else values
    if name in ("float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4"):
        raise NotImplementedError(f"neuron_dtypes.static_cast: packed MX dtype {name} is not provided by torchneuron")
    target = np.dtype(np.bool_ if name == "bool" else name)
    if target.kind in "iu" and array.dtype.kind == "f":
        array = np.trunc(array)
    return array.astype(target)


def sizeinbytes(dtype) -> int:
    """Bytes per element (per packed item for the MX `*_x4` dtypes)."""
    name = _name(dtype)
    return DTYPES[name].itemsize if name in DTYPES else np.dtype(dtype).itemsize


def is_float_type(dtype) -> bool:
    name = _name(dtype)
    return DTYPES[name].is_float if name in DTYPES else np.dtype(dtype).kind == "f"


class _FInfo:
    def __init__(self, bits, eps, max_value, tiny):
        self.bits, self.eps, self.max, self.tiny = bits, eps, max_value, tiny
        self.min = -max_value
        self.smallest_normal = tiny


def finfo(dtype):
    """Limits of a float dtype (bits, eps, max, min, tiny), also for bfloat16 and float8."""
    name = _name(dtype)
    torch_dtype = _TORCH_NARROW.get(name) or getattr(torch, name, None)
    if torch_dtype is None or not torch_dtype.is_floating_point:
        raise TypeError(f"neuron_dtypes.finfo: {dtype!r} is not a float dtype")
    info = torch.finfo(torch_dtype)
    return _FInfo(info.bits, float(info.eps), float(info.max), float(info.tiny))
