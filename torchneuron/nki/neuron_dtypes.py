"""neuron_dtypes: the NumPy-side dtype helpers that AWS's NKI kernels and their references import
(`import neuron_dtypes as dt`), registered under that name by `torchneuron.nki.install()`.

What is provided: `static_cast(array, dtype)` (a NumPy array converted to a dtype, rounding to
bfloat16 / float16 / float8 where the dtype has fewer bits), `sizeinbytes(dtype)`, `finfo(dtype)`,
`is_float_type(dtype)`, and the dtype names (`bfloat16`, the float8 and packed MX names; a cast to a
packed `*_x4` dtype packs 4 values a word along the last dim, into an array of those words whose
dtype is a one-field record named after the format: `str(a.dtype)` names it, `a.view(np.uint16)`
gives the words). When the
`ml_dtypes` package is installed its NumPy dtypes are used; without it the names are the nl dtypes
and arrays cast to them are float32 arrays holding values rounded to that dtype."""
from __future__ import annotations

import numpy as np
import torch

try:  # NumPy dtypes for bfloat16 and float8 where available
    import ml_dtypes as _ml
except ImportError:  # pragma: no cover - depends on the environment
    _ml = None

from ._dtypes import DTYPES, packed_name, packed_numpy_dtype, to_dtype

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
# Packed MX dtypes: 4 values an item, the first in the lowest byte (nibble); arrays of them hold
# those words (uint32 for the float8 ones, uint16 for float4).
float8_e4m3fn_x4 = DTYPES["float8_e4m3fn_x4"]
float8_e5m2_x4 = DTYPES["float8_e5m2_x4"]
float4_e2m1fn_x4 = DTYPES["float4_e2m1fn_x4"]
_FP4 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def _fp4_codes(values):
    """float4_e2m1fn codes (sign bit 3) of values, nearest (ties to the even code), saturating at 6."""
    magnitude = np.minimum(np.abs(values), 6.0)
    below = np.clip(np.searchsorted(_FP4, magnitude, side="right") - 1, 0, 7)
    above = np.minimum(below + 1, 7)
    low, high = _FP4[below], _FP4[above]
    pick_high = (magnitude - low > high - magnitude) | ((magnitude - low == high - magnitude) & (below % 2 == 1))
    codes = np.where(pick_high, above, below).astype(np.uint16)
    return codes | (np.signbit(values).astype(np.uint16) << 3)


def _unpack_x4(words, name):
    words = np.asarray(words)
    words = words.view(words.dtype[0]).astype(np.int64)
    if name == "float4_e2m1fn_x4":
        codes = np.stack([(words >> shift) & 0xF for shift in (0, 4, 8, 12)], axis=-1)
        values = np.where(codes & 8, -1.0, 1.0) * _FP4[codes & 7]
    else:
        raw = np.stack([(words >> shift) & 0xFF for shift in (0, 8, 16, 24)], axis=-1).astype(np.uint8)
        narrow = torch.float8_e4m3fn if name == "float8_e4m3fn_x4" else torch.float8_e5m2
        values = torch.from_numpy(np.ascontiguousarray(raw)).view(narrow).float().numpy()
    return values.reshape(words.shape[:-1] + (words.shape[-1] * 4,)).astype(np.float32)


def _pack_x4(array, name):
    if array.shape[-1] % 4:
        raise ValueError(f"neuron_dtypes.static_cast: {name} packs 4 values; the last dim {array.shape[-1]} is not a "
                         "multiple of 4")
    values = np.ascontiguousarray(array, dtype=np.float32)
    if name == "float4_e2m1fn_x4":
        codes = _fp4_codes(values).reshape(values.shape[:-1] + (-1, 4))
        words = (codes[..., 0] | codes[..., 1] << 4 | codes[..., 2] << 8 | codes[..., 3] << 12).astype(np.uint16)
    else:
        narrow = torch.float8_e4m3fn if name == "float8_e4m3fn_x4" else torch.float8_e5m2
        raw = torch.from_numpy(values).to(narrow).view(torch.uint8).numpy().astype(np.uint32)
        raw = raw.reshape(values.shape[:-1] + (-1, 4))
        words = raw[..., 0] | raw[..., 1] << 8 | raw[..., 2] << 16 | raw[..., 3] << 24
    return np.ascontiguousarray(words).view(packed_numpy_dtype(name))


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
    packed_from = packed_name(array.dtype)
    name = _name(dtype)
    if packed_from is not None and name == packed_from:
        return array.copy()
    if packed_from is not None:  # words of a packed MX array: their values
        array = _unpack_x4(array, packed_from)
    if name in _TORCH_NARROW and _TORCH_NARROW[name] is not None:
        rounded = torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).to(_TORCH_NARROW[name]).float()
        values = rounded.numpy()
        target = _ml_dtype(name)
        return values.astype(target) if target is not None else values
    if name in ("float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4"):
        return _pack_x4(array, name)
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
