"""nki.isa's virtual registers: register_alloc / register_move / register_load / register_store,
and nl.dynamic_range loops whose bounds a register holds at run time. A register is one int32
element of on-chip memory, so both executors run the same copies: the interpreter reads it when a
loop starts, a compiled kernel's C++ loop reads a snapshot of it taken where the loop starts."""
from __future__ import annotations

from ._context import current
from ._dtypes import DTYPES
from ._expr import Index
from ._ops import copy_into, memset_tile
from ._tensor import SPACES, Buffer, NKIError, Tile

# A register-bounded loop's variable has no range known at trace time: used in an access, the
# bounds check over [0, _UNBOUNDED] refuses it instead of letting it run past the tensor.
_UNBOUNDED = 2 ** 31 - 1


class VirtualRegister:
    """A virtual register of an engine sequencer (nisa.register_alloc): a 32-bit integer that
    dynamic loop bounds read at run time."""

    def __init__(self, name=""):
        ctx = current()
        self._buffer = Buffer(ctx.name(name or "register"), SPACES["sbuf"], DTYPES["int32"], (1, 1))
        ctx.allocate_unchecked(self._buffer)  # registers are not SBUF capacity
        self.tile = Tile(self._buffer, 0, [1, 1], [1, 1])

    def __repr__(self):
        return f"<NKI register {self._buffer.name}>"

    def __bool__(self):
        raise NKIError("NKI: a register has no value while the kernel is traced: loop on it with "
                       "nl.while_loop(register, body) or nl.dynamic_range / nl.fori_loop")

    def register_range(self, start, stop, step):
        return _register_range(start, stop, step)


def _as_tile(value, where: str) -> Tile:
    if isinstance(value, VirtualRegister):
        return value.tile
    if isinstance(value, Tile):
        if value.sizes and len([s for s in value.sizes if s != 1]) > 0:
            raise NKIError(f"NKI {where}: the tensor '{value.name}' has shape {list(value.sizes)}; a register holds "
                           "one element (shape [1] or [1, 1])")
        return value.reshape(*([1] * len(value.sizes))) if value.sizes else value
    raise NKIError(f"NKI {where}: expected a register or a one-element tensor, got {value!r}")


def _one(tile: Tile) -> Tile:
    """The single element of `tile` as a [1, 1] view."""
    return Tile(tile._buffer, tile.offset, [1, 1], [1, 1], tile.checks)


def register_alloc(x=None, name=""):
    """A new virtual register, set to x (an int, another register, or a one-element tensor) if given."""
    reg = VirtualRegister(name)
    if x is not None:
        if isinstance(x, (VirtualRegister, Tile)):
            copy_into(reg.tile, _one(_as_tile(x, "nisa.register_alloc")), name="nisa.register_alloc")
        else:
            register_move(reg, x)
    return reg


def _check_register(dst, where):
    if not isinstance(dst, VirtualRegister):
        raise NKIError(f"NKI {where}: dst must be a register from nisa.register_alloc(), got {dst!r}")


def register_move(dst, imm=None, src=None, **_unused):
    """dst = a compile-time integer, or the value of another register."""
    value = imm if imm is not None else src
    _check_register(dst, "nisa.register_move")
    if isinstance(value, VirtualRegister):
        copy_into(dst.tile, value.tile, name="nisa.register_move")
        return dst
    if isinstance(value, bool) or not isinstance(value, int):
        raise NKIError(f"NKI nisa.register_move: the value must be a Python int or a register, got {value!r}")
    if not -2 ** 31 <= value < 2 ** 32:
        raise NKIError(f"NKI nisa.register_move: {value} does not fit a 32-bit register")
    memset_tile(dst.tile, value)
    return dst


def register_load(dst, src, **_unused):
    """dst = the one element of tensor src (HBM or SBUF), read at run time."""
    _check_register(dst, "nisa.register_load")
    copy_into(dst.tile, _one(_as_tile(src, "nisa.register_load")), name="nisa.register_load")
    return dst


def register_store(dst, src, **_unused):
    """The register src's value written to the one-element tensor dst (HBM or SBUF)."""
    _check_register(src, "nisa.register_store")
    copy_into(_one(_as_tile(dst, "nisa.register_store")), src.tile, name="nisa.register_store")
    return dst


def _snapshot(ctx, value):
    """The C++ text of a loop bound taken now: a register is copied to a register of its own, so a
    kernel that changes the register inside the loop does not move the loop's bound."""
    if not isinstance(value, VirtualRegister):
        return str(int(value))
    copy = VirtualRegister("bound")
    copy_into(copy.tile, value.tile, name="nl.dynamic_range")
    return f"static_cast<int64_t>(s{copy._buffer.id}[0])"


def _value(value) -> int:
    if isinstance(value, VirtualRegister):
        return int(value._buffer.storage[0])
    return int(value)


def _register_range(start, stop, step):
    """nl.dynamic_range(start, stop, step) where start or stop is a register."""
    if stop is None:
        start, stop = 0, start
    if not isinstance(step, int) or step <= 0:
        raise NKIError(f"NKI nl.dynamic_range: the step must be a positive Python int, got {step!r}")
    for bound in (start, stop):
        if not isinstance(bound, (VirtualRegister, int)) or isinstance(bound, bool):
            raise NKIError(f"NKI nl.dynamic_range: bounds are Python ints or registers, got {bound!r}")
    ctx = current()
    if ctx.interpreting:
        for value in range(_value(start), _value(stop), step):
            ctx.enter_scope()
            try:
                yield value
            finally:
                ctx.exit_scope()
        return
    first, last = _snapshot(ctx, start), _snapshot(ctx, stop)
    extent = f"(({last}) - ({first}) + {step - 1}) / {step}"
    var = ctx.dynamic_loop(f"({extent} > 0 ? {extent} : 0)")  # ended by ctx.end_loop()
    index = Index(None, 0, f"(({first}) + i{var} * {step})", 0, _UNBOUNDED)
    try:
        yield index
    finally:
        ctx.end_loop()
