"""NKI dtypes: the nl dtype objects, their lookup from torch and NumPy dtypes or names, and
the promotion rule of ops over tiles."""
from __future__ import annotations


class dtype:
    """An NKI dtype; compares equal to the torch and NumPy dtypes (and names) of the same type."""

    def __init__(self, name: str, itemsize: int, is_float: bool, packed: int = 1):
        self.name, self.itemsize, self.is_float = name, itemsize, is_float
        self.packed = packed  # MX formats: elements per item (`*_x4` hold 4)

    def __repr__(self):
        return f"nl.{self.name}"

    def __str__(self):
        return self.name

    def __eq__(self, other):
        try:
            return to_dtype(other).name == self.name
        except (TypeError, KeyError):
            return False

    def __reduce__(self):  # copies and pickles are the one dtype of that name
        return (to_dtype, (self.name,))

    def __hash__(self):
        return hash(self.name)

    @property
    def dtype(self):
        """The NumPy dtype of this dtype, so `np.zeros(shape, dtype=nl.bfloat16)` works as with AWS's nl
        dtypes: bfloat16 and float8 from ml_dtypes when installed (else float32), packed MX dtypes as
        their raw unsigned words."""
        import numpy as np
        if self.name in ("bfloat16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn", "float8_e8m0fnu"):
            try:
                import ml_dtypes
                return np.dtype(getattr(ml_dtypes, self.name))
            except (ImportError, AttributeError):
                return np.dtype(np.float32)
        if self.packed != 1:
            return packed_numpy_dtype(self.name)
        return np.dtype(np.float32 if self.name == "tfloat32" else self.name)


DTYPES = {d.name: d for d in [
    dtype("float32", 4, True), dtype("bfloat16", 2, True), dtype("float16", 2, True), dtype("float64", 8, True),
    dtype("int8", 1, False), dtype("uint8", 1, False), dtype("int16", 2, False), dtype("uint16", 2, False),
    dtype("int32", 4, False), dtype("uint32", 4, False), dtype("int64", 8, False), dtype("bool", 1, False),
    dtype("tfloat32", 4, True), dtype("float8_e4m3", 1, True), dtype("float8_e5m2", 1, True),
    dtype("float8_e4m3fn", 1, True), dtype("float8_e8m0fnu", 1, True),
    dtype("float8_e4m3fn_x4", 4, True, 4), dtype("float8_e5m2_x4", 4, True, 4), dtype("float4_e2m1fn_x4", 2, True, 4),
]}
for _name, _dtype in DTYPES.items():  # nki.dtype.bfloat16 (`import nki.dtype as nt; nt.float8_e4m3`)
    setattr(dtype, _name, _dtype)
_ALIASES = {"float": "float32", "half": "float16", "bool_": "bool", "fp32": "float32", "bf16": "bfloat16"}


def packed_numpy_dtype(name: str):
    """The NumPy dtype of a packed MX dtype's arrays: its words (uint32 for FP8 x4, uint16 for FP4
    x4) in a one-field record named after it, so `str(array.dtype)` names the format as AWS's do."""
    import numpy as np
    return np.dtype([(name, "<u4" if DTYPES[name].itemsize == 4 else "<u2")])


def packed_name(np_dtype):
    """The packed MX dtype a NumPy dtype made by packed_numpy_dtype stands for, else None."""
    names = getattr(np_dtype, "names", None)
    return names[0] if names and len(names) == 1 and names[0] in DTYPES and DTYPES[names[0]].packed != 1 else None


def to_dtype(value) -> dtype:
    """The NKI dtype of an nl dtype, a torch or NumPy dtype, or a name."""
    if isinstance(value, dtype):
        return value
    if packed_name(value) is not None:
        return DTYPES[packed_name(value)]
    name = getattr(value, "__name__", None) if isinstance(value, type) else None
    if name is None:
        name = str(value)
    name = name.replace("torch.", "").replace("numpy.", "").replace("<class '", "").replace("'>", "")
    name = name.replace("nl.", "")
    name = _ALIASES.get(name, name)
    if name not in DTYPES:
        raise TypeError(f"NKI: unsupported dtype {value!r}")
    return DTYPES[name]


# The dtypes the compiled code stores in HBM (the compiler's DType names); others are refused.
STORAGE_DTYPES = {"float32", "bfloat16", "float16", "float64", "int8", "uint8", "int32", "int64", "bool"}


def promote(*dtypes: dtype) -> dtype:
    """The result dtype of an op over tiles of these dtypes: the widest float, else the widest int."""
    floats = [d for d in dtypes if d.is_float]
    pool = floats or list(dtypes)
    if floats and any(d.name == "float32" for d in floats):
        return DTYPES["float32"]
    return max(pool, key=lambda d: (d.itemsize, d.name != "bfloat16"))
