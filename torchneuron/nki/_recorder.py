"""The compiler's executor of NKI kernels: a Recorder traces one call into the compiler's tile
program (csrc/compiler/tile_program.h); loops stay loops, indices stay symbolic."""
from __future__ import annotations

import math

from ._context import Executor, Op
from ._expr import Index, ProgramTraceError, cpp
from ._expr import _ranges as _expr_ranges
from ._tensor import Buffer, Mask, NKIError, Tile, check_on_chip_shape, bytes_per_partition


def _on_chip_rounding(nki_dtype) -> str:
    """The compiler dtype whose rounding an on-chip tile of `nki_dtype` applies on write."""
    if nki_dtype.name in ("float32", "bfloat16", "float16", "bool", "int8", "uint8", "int32", "int64"):
        return nki_dtype.name
    return "float32" if nki_dtype.is_float else "int32"


class Recorder(Executor):
    """Traces a kernel into a TileProgram: loops stay loops, indices stay symbolic."""

    def __init__(self, grid, program, unrolled=False):
        super().__init__(grid)
        self.program = program
        self.unrolled = unrolled
        _expr_ranges.clear()
        self.hbm_buffers = []  # in argument order
        self.host_steps = []  # run between the program's segments (host_step)
        program.set_grid(list(self.grid) or [1])

    def program_id(self, axis):
        if axis >= len(self.grid):
            return 0
        return Index.variable(f"p{axis}", self.grid[axis] - 1)

    def dynamic_index(self, tile: Tile, limit: int, where: str) -> Index:
        self._check_index_tile(tile, where)
        self.use(tile._buffer)
        self.__dict__.setdefault("dynamic_reads", []).append((f"s{tile._buffer.id}[{cpp(tile.offset)}]", limit))
        return Index(None, 0, f"tn_checked(s{tile._buffer.id}[{cpp(tile.offset)}], {limit}, fault)", 0, limit - 1)

    # nl.private_hbm is each program's own: in a grid whose programs run side by side, one copy per
    # program, addressed by the program's number (_access); a lockstep trace allocates it anew instead.
    private_copies_per_program = True

    def add_hbm(self, buffer: Buffer) -> None:
        buffer.argument = len(self.hbm_buffers)
        self.hbm_buffers.append(buffer)
        stored = {"uint32": "int32", "uint16": "int32", "int16": "int32", "float8_e4m3fn": "float32",  # float8: a
                  "float8_e5m2": "float32",  # float32 copy (_kernel.py)
                  "float8_e4m3": "uint8"}.get(buffer.dtype.name, buffer.dtype.name)  # its bytes (_isa_bytes.py)
        private = buffer.space.name == "private_hbm" and self.private_copies_per_program
        buffer.copies = math.prod(self.grid) if private and self.grid else 1
        buffer.id = self.program.add_buffer(buffer.name, "hbm", stored, buffer.elements * buffer.copies,
                                            buffer.argument)

    def allocate(self, buffer: Buffer) -> None:
        if not buffer.space.on_chip:
            self.add_hbm(buffer)
            return
        check_on_chip_shape(buffer.shape, buffer.space, buffer.dtype, buffer.name)
        self.lease(buffer, bytes_per_partition(buffer.shape, buffer.dtype))
        buffer.id = self.program.add_buffer(buffer.name, buffer.space.name, _on_chip_rounding(buffer.dtype),
                                             buffer.elements, -1)
        if buffer.space.name == "psum":
            self.track_psum(buffer)

    def allocate_flags(self, flags: Buffer) -> None:
        flags.id = self.program.add_buffer(flags.name, flags.space.name, "float32", flags.elements, -1)

    def allocate_unchecked(self, buffer: Buffer) -> None:
        buffer.id = self.program.add_buffer(buffer.name, buffer.space.name, _on_chip_rounding(buffer.dtype),
                                             buffer.elements, -1)

    def loop(self, extent):
        self.begin_loop_scope()
        var = self.program.begin_loop(cpp(extent))
        self.depth = getattr(self, "depth", 0) + 1
        self.__dict__.setdefault("open_loops_vars", []).append(f"i{var}")
        return Index.variable(f"i{var}", extent - 1)

    def dynamic_loop(self, extent: str) -> int:
        """A loop whose trip count is read at run time (a C++ expression); ended by end_loop."""
        self.begin_loop_scope()
        var = self.program.begin_loop(extent)
        self.depth = getattr(self, "depth", 0) + 1
        self.__dict__.setdefault("open_loops_vars", []).append(None)  # never unrolled
        return var

    def end_loop(self):
        self.depth -= 1
        self.open_loops_vars.pop()
        self.end_loop_scope()
        self.program.end_loop()

    def host_step(self, name: str, body, tiles, writes) -> None:
        """Something only the host can do in the middle of a kernel (a collective, which waits for
        the other ranks): the program is cut there, and body(io) runs between its two segments,
        reading and writing tiles through io (_kernel.HostTiles)."""
        if None in getattr(self, "open_loops_vars", ()):
            raise NKIError(f"{name} inside a loop of a compiled kernel whose trip count is read at run time "
                           "(a register or while loop); run it interpreted (TORCHNEURON_NKI_INTERPRET=1)")
        if getattr(self, "depth", 0):  # the loops around it are unrolled in the next trace
            error = ProgramTraceError(f"{name} inside a loop of a compiled kernel: traced again with loops unrolled")
            error.variables = set(self.open_loops_vars)
            raise error
        if math.prod(self.grid or (1,)) != 1:
            raise NKIError(f"{name}: a compiled kernel of {math.prod(self.grid)} programs cannot run a collective "
                           "(one program can); run it interpreted (TORCHNEURON_NKI_INTERPRET=1)")
        for t in tiles:
            self.use(t._buffer)
        for t in writes:
            if not t.buffer.on_chip:
                self.written.add(t._buffer)
        self.program.cut()  # refuses a cut inside a loop the tracer did not unroll (a dynamic one)
        self.host_steps.append(body)

    @staticmethod
    def _access(tile: Tile, mask: Mask | None):
        lower, upper = [], []
        if mask is not None and mask.bounds:
            for axis in range(len(tile.sizes)):
                lo, hi = mask.bounds.get(axis, (None, None))
                lower.append("" if lo is None else cpp(lo))
                upper.append("" if hi is None else cpp(hi))
        offset = cpp(tile.offset)
        if getattr(tile._buffer, "copies", 1) > 1:  # this program's copy of a private_hbm tensor
            offset = f"({offset}) + program * {tile._buffer.elements}"
        return (tile._buffer.id, offset, list(tile.sizes), list(tile.strides), lower, upper)

    def run(self, op: Op) -> None:
        bounded = op.sources[0] if op.kind in ("reduce", "max8") else op.dst
        dst = None if op.dst is None else self._access(op.dst, op.mask if bounded is op.dst else None)
        sources = [self._access(s, op.mask if s is bounded else None) for s in op.sources]
        spec = dict(kind=op.kind, destination=dst, sources=sources, expression=op.expression, accumulate=op.accumulate,
                    scale=float(op.scale), initial=float(op.initial), label=op.label)
        if op.reduce_op:
            spec.update(reduce_op=op.reduce_op, reduce_dims=list(op.reduce_dims))
        self.program.add(spec)
