"""The matrix engine's rules and its matmul op, shared by nisa.nc_matmul / nisa.nc_transpose and
nl.matmul (which sits below nki.isa)."""
from __future__ import annotations

from ._context import Op, check_matmul_sizes, current
from ._expr import is_symbolic
from ._tensor import NKIError, Tile


def check_operands(stationary: Tile, moving: Tile) -> None:
    """nc_matmul's operands: 2-D, one contraction (partition) dim, within the engine's sizes."""
    if len(stationary.shape) != 2 or len(moving.shape) != 2:
        raise NKIError(f"nisa.nc_matmul takes 2-D tiles, got {stationary.shape} and {moving.shape}")
    if stationary.shape[0] != moving.shape[0]:
        raise NKIError(f"nisa.nc_matmul: stationary {stationary.shape} and moving {moving.shape} must share the "
                       "partition (contraction) dim")
    check_matmul_sizes(stationary.shape[0], stationary.shape[1], moving.shape[1], "nisa.nc_matmul")


def emit_matmul(dst: Tile, stationary: Tile, moving: Tile, accumulate) -> Tile:
    """dst [M, N] = stationary [K, M]^T @ moving [K, N] (operands checked by check_operands)."""
    if tuple(dst.shape) != (stationary.shape[1], moving.shape[1]):
        raise NKIError(f"nisa.nc_matmul: dst {dst.shape} must be [{stationary.shape[1]}, {moving.shape[1]}]")
    current().emit(Op("matmul", dst, [stationary, moving], accumulate=_accumulate_flag(accumulate),
                      name="nisa.nc_matmul"))
    return dst


def _accumulate_flag(value):
    """nc_matmul's accumulate: None (the default) follows the PSUM accumulation groups: the matmul
    adds to what a matmul (or a memset) left in dst and not yet read, and overwrites the rest."""
    if value is None:
        return None
    if isinstance(value, Tile) or is_symbolic(value):
        raise NKIError("nisa.nc_matmul: accumulate must be True, False or None at trace time")
    return bool(value)


def transposed_view(data: Tile) -> Tile:
    """nc_transpose's source [P, F] seen as [F, P] (both at most 128)."""
    if len(data.shape) != 2:
        raise NKIError(f"nisa.nc_transpose takes a 2-D tile, got {data.shape}")
    if data.shape[0] > 128 or data.shape[1] > 128:
        raise NKIError(f"nisa.nc_transpose: tile {data.shape} exceeds 128 x 128")
    return Tile(data._buffer, data.offset, data.sizes[::-1], data.strides[::-1], data.checks)
