"""The interpreter's bitwise ops (the compiler's bits_* pointwise ops, codegen.cpp): integer values
held as floats, taken as their 32-bit two's-complement pattern."""
import torch


def _bits(values: torch.Tensor) -> torch.Tensor:
    """Integer values wrapped to 32-bit two's complement, as int64."""
    wrapped = values.to(torch.int64) & 0xFFFFFFFF
    return torch.where(wrapped >= 2 ** 31, wrapped - 2 ** 32, wrapped)


BITWISE_OPS = {
    "bits_and": lambda a, b: _bits(a) & _bits(b), "bits_or": lambda a, b: _bits(a) | _bits(b),
    "bits_xor": lambda a, b: _bits(a) ^ _bits(b), "bits_not": lambda a: ~_bits(a),
    "bits_shl": lambda a, b: _bits((_bits(a) & 0xFFFFFFFF) << (_bits(b) & 31)),
    "bits_shr": lambda a, b: _bits(a) >> (_bits(b) & 31),
    "bits_shr_logical": lambda a, b: (_bits(a) & 0xFFFFFFFF) >> (_bits(b) & 31),
}
