"""nki.isa's random numbers: nisa.rng, nisa.rand2, nisa.rand_get_state / rand_set_state and
nisa.set_rng_seed. Each of the 128 lanes (partitions) keeps a state of three integers below 4096;
a call derives each element's value from its lane's state and its position by a few rounds of
modular arithmetic on integers below 2 ** 24, exact in the float32 both executors compute in, so
compiled and interpreted kernels draw the same numbers. The sequence is deterministic per seed but
is not the XORWOW sequence of AWS's engines. A kernel call starts from the state of seed 0 (in
each program of a grid) until a kernel seeds it."""
from __future__ import annotations

import math

from ._context import Op, current
from ._dtypes import DTYPES
from ._expr import cpp
from ._isa_mx import _Builder
from ._tensor import PARTITION_MAX, SPACES, Buffer, NKIError, Tile

MODULI = (4093, 4091, 4079)  # primes: x * x + c stays below 2 ** 24
MULTIPLIERS = (3571, 2957, 3299)
STATE = len(MODULI)


def _mod(b: _Builder, x, m: int):
    """x mod m for an integer 0 <= x < 2 ** 24 (or any float, then deterministic but inexact)."""
    r = b.f("sub", x, b.f("mul", b.f("floor", b.f("div", x, b.lit(m))), b.lit(m)))
    r = b.f("where", b.f("lt", r, b.lit(0)), b.f("add", r, b.lit(m)), r)  # rounding near a multiple
    return b.f("where", b.f("ge", r, b.lit(m)), b.f("sub", r, b.lit(m)), r)


def _state(ctx) -> Tile:
    """This program's lane states [128, 3], seeded with 0 where the kernel first draws. Programs that
    take turns (the interpreter's grids, a lockstep trace) each keep their own."""
    owner = getattr(ctx, "pid", None)
    states = ctx.__dict__.setdefault("_rng_states", {})
    if owner not in states:
        buf = Buffer(ctx.name(f"rng_state{ctx.names}"), SPACES["sbuf"], DTYPES["float32"], (PARTITION_MAX, STATE))
        ctx.allocate_unchecked(buf)
        state = states[owner] = Tile(buf, 0, [PARTITION_MAX, STATE], [STATE, 1])
        _once_per_program(ctx, lambda: _seed_lanes(ctx, state, None))
    return states[owner]


def _once_per_program(ctx, emit) -> None:
    """Runs the ops `emit` gives once per program, even where traced inside a loop: a compiled kernel
    tests a flag holding the program's number (its on-chip memory outlives one program)."""
    if ctx.interpreting:
        emit()
        return
    flag = Buffer(ctx.name(f"rng_seeded{ctx.names}"), SPACES["sbuf"], DTYPES["float32"], (1, 1))
    ctx.allocate_unchecked(flag)
    marker = 1
    for axis, size in enumerate(ctx.grid):
        marker = (marker - 1) * size + ctx.program_id(axis) + 1
    ctx.program.begin_loop(f"(s{flag.id}[0] != ({cpp(marker)}) ? 1 : 0)")
    emit()
    b = _Builder()
    b.integer(marker)
    ctx.emit(Op("pointwise", Tile(flag, 0, [1, 1], [1, 1]), [], b.nodes, name="nisa.set_rng_seed"))
    ctx.program.end_loop()


def _seed_lanes(ctx, state: Tile, seed) -> None:
    """Every lane's state from one seed (a [1, 1] tile, or None for 0): lanes differ by partition."""
    for k, m in enumerate(MODULI):
        b = _Builder()
        x = b.lit(0) if seed is None else _mod(b, b.source(0), m)
        lane = b.index(0)
        x = _mod(b, b.f("add", b.f("add", x, b.f("mul", lane, b.lit(37 * (k + 1)))), b.lit(11 * k + 1)), m)
        x = _mod(b, b.f("mul", x, b.lit(MULTIPLIERS[k])), m)
        sources = [] if seed is None else [Tile(seed._buffer, seed.offset, [PARTITION_MAX, 1], [0, 0])]
        ctx.emit(Op("pointwise", Tile(state._buffer, k, [PARTITION_MAX, 1], [STATE, 1]), sources, b.nodes,
                    name="nisa.set_rng_seed"))


def _uniform(b: _Builder, lanes: list, position):
    """A value in [0, 1) from a lane's state (sources) and an element position (an integer node)."""
    streams = []
    for k, m in enumerate(MODULI):
        u = _mod(b, b.f("add", lanes[k], _mod(b, position, m)), m)
        for c in (7 + k, 3 + 5 * k):  # quadratic and linear rounds, each exact below 2 ** 24
            u = _mod(b, b.f("add", b.f("mul", u, u), b.lit(c)), m)
            u = _mod(b, b.f("add", b.f("mul", u, b.lit(MULTIPLIERS[k])), b.lit(1)), m)
        streams.append(u)
    mixed = [_mod(b, b.f("add", streams[k], streams[(k + 1) % STATE]), m) for k, m in enumerate(MODULI)]
    total = b.lit(0)
    for u, m in zip(mixed, MODULI):
        total = b.f("add", total, b.f("div", u, b.lit(m)))
    return b.f("sub", total, b.f("floor", total))


def _draw(dst: Tile, where: str, finish) -> Tile:
    """dst = finish(b, uniform value, sources) per element; then the lanes' states move on."""
    ctx = current()
    if not isinstance(dst, Tile) or not dst.buffer.on_chip:
        raise NKIError(f"NKI {where}: dst must be an SBUF or PSUM tile, got {dst!r}")
    state = _state(ctx)
    p = dst.sizes[0]
    free = dst.sizes[1:]
    b = _Builder()
    lanes = [b.source(k) for k in range(STATE)]
    position = b.lit(0)
    step = 1
    for d in reversed(range(1, len(dst.sizes))):  # the element's place in its partition
        position = b.f("add", position, b.f("mul", b.index(d), b.lit(step)))
        step *= dst.sizes[d]
    sources = [Tile(state._buffer, k, [p] + free, [STATE] + [0] * len(free)) for k in range(STATE)]
    extra = finish(b, _uniform(b, lanes, position), sources)
    ctx.emit(Op("pointwise", dst, sources + extra, b.nodes, name=where))
    count = math.prod(free)
    for k, m in enumerate(MODULI):  # advance: s = (s + count + 17) * a mod m
        b = _Builder()
        s = _mod(b, b.f("add", b.source(0), b.lit(count % m + 17)), m)
        _mod(b, b.f("mul", s, b.lit(MULTIPLIERS[k])), m)
        column = Tile(state._buffer, k, [PARTITION_MAX, 1], [STATE, 1])
        ctx.emit(Op("pointwise", column, [column], b.nodes, name=where))
    return dst


def rng(dst, engine=None, name=None, **_unused):
    """dst = random integers, 24 random bits each (0 <= value < 2 ** 24), from each lane's state."""
    def finish(b, r, sources):
        b.f("floor", b.f("mul", r, b.lit(2 ** 24)))
        return []
    return _draw(dst, "nisa.rng", finish)


def rand2(dst, min, max, name=None, **_unused):  # noqa: A002 (AWS's parameter names)
    """dst = values uniform in [min, max) (scalars, or [P, 1] tiles of per-partition bounds)."""
    def finish(b, r, sources):
        extra, bounds = [], []
        for bound in (min, max):
            if isinstance(bound, Tile):
                extra.append(Tile(bound._buffer, bound.offset, [dst.sizes[0]] + dst.sizes[1:],
                                  [bound.strides[0]] + [0] * (len(dst.sizes) - 1), bound.checks))
                bounds.append(b.source(STATE + len(extra) - 1))
            else:
                bounds.append(b.lit(float(bound)))
        b.f("add", bounds[0], b.f("mul", r, b.f("sub", bounds[1], bounds[0])))
        return extra
    return _draw(dst, "nisa.rand2", finish)


def rand_get_state(dst, engine=None, name=None, **_unused):
    """dst [P, n] (n >= 3) = the lanes' states (three integers below 4096), the rest 0."""
    ctx = current()
    if not isinstance(dst, Tile) or len(dst.sizes) != 2 or dst.sizes[1] < STATE:
        raise NKIError(f"NKI nisa.rand_get_state: dst must be a [P, n] tile with n >= {STATE}, got {dst!r}")
    state = _state(ctx)
    p = dst.sizes[0]
    for column in range(dst.sizes[1]):
        b, sources = _Builder(), []
        if column < STATE:
            b.source(0)
            sources.append(Tile(state._buffer, column, [p, 1], [STATE, 1]))
        else:
            b.lit(0)
        ctx.emit(Op("pointwise", Tile(dst._buffer, dst.offset + column * dst.strides[1], [p, 1], [dst.strides[0], 1]),
                    sources, b.nodes, name="nisa.rand_get_state"))
    return dst


def rand_set_state(src_seeds, engine=None, name=None, **_unused):
    """The lanes' states from src_seeds [P, n]: state k = (seeds k, k + 3, k + 6, ... summed) mod its
    modulus, so a state read with rand_get_state is restored exactly."""
    ctx = current()
    seeds = src_seeds
    if not isinstance(seeds, Tile) or len(seeds.sizes) != 2 or not seeds.buffer.on_chip:
        raise NKIError(f"NKI nisa.rand_set_state: src_seeds must be a [P, n] SBUF tile, got {seeds!r}")
    state = _state(ctx)
    p, n = seeds.sizes
    for k, m in enumerate(MODULI):
        b = _Builder()
        columns = list(range(k, n, STATE))
        total = b.lit(0)
        for i, _ in enumerate(columns):
            total = b.f("add", total, _mod(b, b.source(i), m))
        _mod(b, total, m)
        sources = [Tile(seeds._buffer, seeds.offset + c * seeds.strides[1], [p, 1], [seeds.strides[0], 1], seeds.checks)
                   for c in columns]
        ctx.emit(Op("pointwise", Tile(state._buffer, k, [p, 1], [STATE, 1]), sources, b.nodes,
                    name="nisa.rand_set_state"))


def set_rng_seed(src_seeds, name=None, **_unused):
    """Seeds every lane from the one value of src_seeds (a [1, 1] tile): the same seed, the same numbers."""
    ctx = current()
    if not isinstance(src_seeds, Tile) or math.prod(src_seeds.sizes) != 1 or not src_seeds.buffer.on_chip:
        raise NKIError(f"NKI nisa.set_rng_seed: src_seeds must be a [1, 1] SBUF tile, got {src_seeds!r}")
    _seed_lanes(ctx, _state(ctx), src_seeds)
