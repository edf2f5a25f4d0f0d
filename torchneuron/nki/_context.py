"""The executors of NKI kernels: the Executor base (ops checked against the hardware's rules),
the Interpreter, which runs each instruction at once on CPU torch tensors, and what both share;
the compiler's Recorder is in _recorder.py."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ._activations import COMPOSITES
from ._bitwise import BITWISE_OPS
from ._expr import bounds, cpp, is_symbolic
from ._capacity import Capacity
from ._current import _state, activate, current  # noqa: F401  (re-exported: the executors' entry points)
from ._dtypes import DTYPES
from ._float8 import FLOAT8_FORMATS, float8_rounding
from ._tensor import (PARTITION_MAX, PSUM_BYTES_PER_PARTITION, SBUF_BYTES_PER_PARTITION, SPACES, Buffer, Mask, NKIError,
                      Tile, bytes_per_partition, check_deferred, check_on_chip_shape)

@dataclass
class Op:
    kind: str  # pointwise, reduce, matmul, scan, max8, find_index8, print
    dst: Tile | None
    sources: list
    expression: list = field(default_factory=list)  # (op, args, source, literal, dim, text)
    mask: Mask | None = None
    dma: bool = False  # a DMA (load, store, copy) may touch HBM
    name: str = ""  # the NKI call, for error messages
    reduce_op: str = ""
    reduce_dims: tuple = ()
    scale: float = 1.0
    accumulate: bool | None = False  # matmul: None follows the PSUM accumulation groups
    initial: float = 0.0
    label: str = ""


class Expression:
    """Builds an op's expression as a list of nodes; each method returns a node number."""

    def __init__(self):
        self.nodes = []

    def _add(self, op, args=(), source=-1, literal=0.0, dim=-1, text=""):
        self.nodes.append((op, list(args), source, float(literal), dim, text))
        return len(self.nodes) - 1

    def source(self, k):
        return self._add("source", source=k)

    def literal(self, value):
        return self._add("literal", literal=value)

    def index(self, dim):
        return self._add("index", dim=dim)

    def integer(self, value):
        """A loop variable or program id expression (or int) as a value."""
        if is_symbolic(value):
            return self._add("expression", text=cpp(value))
        return self.literal(int(value))

    def carry(self):
        return self._add("carry")

    def op(self, name, *args):
        composite = COMPOSITES.get(name)
        if composite is not None:
            return composite(self, *args)
        return self._add(name, args)

    def constant(self, value):
        return self.literal(value)


def check_matmul_sizes(k: int, m: int, n: int, name: str) -> None:
    """The matrix engine's limits: contraction and stationary free sizes 128, moving free size 512."""
    if k > PARTITION_MAX:
        raise NKIError(f"NKI {name}: contraction (partition) size {k} exceeds {PARTITION_MAX}")
    if m > 128:
        raise NKIError(f"NKI {name}: stationary free size {m} exceeds 128 (nl.tile_size.gemm_stationary_fmax)")
    if n > 512:
        raise NKIError(f"NKI {name}: moving free size {n} exceeds 512 (nl.tile_size.gemm_moving_fmax)")


def check_extents(op: Op, tiles) -> None:
    """Refuses an instruction whose operand reaches past its tensor: a view flagged by .ap(), or any
    view (without a mask or deferred arange checks) whose elements leave the buffer."""
    for t in tiles:
        message = getattr(t, "out_of_bounds", None)
        if message:
            raise NKIError(f"{message} (used by {op.name})")
        if op.mask is not None or t.checks or not t.sizes or not all(t.sizes):
            continue
        lo, hi = bounds(t.offset)
        top = hi + sum((s - 1) * st for s, st in zip(t.sizes, t.strides) if st > 0)
        bottom = lo + sum((s - 1) * st for s, st in zip(t.sizes, t.strides) if st < 0)
        if bottom < 0 or top >= t._buffer.elements:
            raise NKIError(f"NKI {op.name}: access past '{t.name}': elements {bottom}..{top} of {t._buffer.elements}")


def _engine_check(op: Op) -> None:
    tiles = ([op.dst] if op.dst is not None else []) + list(op.sources)
    check_extents(op, tiles)  # an access past its tensor (a lazy .ap() pattern) is refused here
    packed = [t.dtype.name for t in tiles if t.dtype.packed != 1]
    if packed and not op.name.startswith(("nisa.quantize_mx", "nisa.nc_matmul_mx", "nisa.dma_copy (MX)")):
        raise NKIError(f"NKI {op.name}: packed MX tiles ({', '.join(packed)}) are made by nisa.quantize_mx or a DMA "
                       "from device memory and read by nisa.nc_matmul_mx or a DMA only")
    if not op.dma:
        for t in tiles:
            if not t.buffer.on_chip:
                raise NKIError(f"NKI {op.name}: '{t.name}' is in {t.buffer.name}; compute engines read and write "
                               "SBUF or PSUM only: load it first (nl.load / nisa.dma_copy)")
    for t in tiles:
        if t.buffer.on_chip and t.sizes and t.sizes[0] > PARTITION_MAX:
            raise NKIError(f"NKI {op.name}: '{t.name}' spans {t.sizes[0]} partitions; the limit is {PARTITION_MAX}")
    if op.kind == "matmul":
        stationary, moving = op.sources
        for role, t in (("stationary", stationary), ("moving", moving)):
            if t.buffer.name != "sbuf":
                raise NKIError(f"NKI {op.name}: the {role} operand '{t.name}' is in {t.buffer.name}; matmul operands "
                               "must be in SBUF")
        if op.dst.buffer.name != "psum":
            raise NKIError(f"NKI {op.name}: the result '{op.dst.name}' is in {op.dst.buffer.name}; matmul writes PSUM")
        check_matmul_sizes(*stationary.sizes, moving.sizes[1], op.name)
    if op.kind == "reduce" and 0 in op.reduce_dims:
        raise NKIError(f"NKI {op.name}: cannot reduce along the partition axis (axis 0); transpose the tile first "
                       "(nisa.nc_transpose) or reduce along the free axes")
    for t in tiles:
        if t.checks:
            check_deferred(t, op.mask)


class Executor(Capacity):
    """What both executors share: allocation bookkeeping and the rules."""

    interpreting = False
    unrolled = False  # True: loops run in Python with integer indices; an int: loops of at most that many iterations
    unroll_sites = frozenset()  # the (file, line) of loops to unroll whatever their size

    @property
    def loop_sites(self) -> dict:
        """The (file, line) of each symbolic loop variable's `for`, by variable name."""
        return self.__dict__.setdefault("_loop_sites", {})

    def __init__(self, grid):
        self.grid = tuple(grid)
        self.names = 0
        self.written = set()  # device-memory buffers an op wrote
        self.start_capacity()

    def placed_memory(self, space: str, dtype) -> Buffer:
        """The memory that tiles placed with address= in `space` share, one per dtype: [128
        partitions, the space's bytes per partition / itemsize] elements, so tiles placed at one
        address alias each other (as a kernel's circular buffers expect)."""
        key = (space, dtype.name, getattr(self, "pid", None))  # each program (core) has its own
        placed = getattr(self, "_placed", None)
        if placed is None:
            placed = self._placed = {}
        if key not in placed:
            per_partition = SBUF_BYTES_PER_PARTITION if space == "sbuf" else PSUM_BYTES_PER_PARTITION
            buffer = Buffer(f"{space}_placed_{dtype.name}", SPACES[space], dtype,
                            (PARTITION_MAX, per_partition // dtype.itemsize))
            self.allocate_unchecked(buffer)
            if space == "psum":
                self.track_psum(buffer)
            placed[key] = buffer
        return placed[key]

    def placed_tile(self, tile: Tile) -> None:
        """A new tile placed in shared memory starts with no PSUM accumulation group."""
        flags = self._flag_view(tile)
        if flags is not None:
            self._set_flags(flags, 0.0)

    def name(self, given):
        self.names += 1
        return given or f"tile{self.names}"

    @staticmethod
    def _check_index_tile(tile: Tile, where: str) -> None:
        if not tile.buffer.on_chip or math.prod(tile.sizes) != 1:
            raise NKIError(f"NKI: a tile used as an index ({where}) must be one element on chip, got '{tile.name}' "
                           f"{tile.buffer.name}{list(tile.sizes)}")

    def num_programs(self, axis):
        if axis is None:
            return math.prod(self.grid)
        if axis >= len(self.grid):
            return 1
        return self.grid[axis]

    def emit(self, op: Op) -> None:
        error, self.oob_error, self.dynamic_reads = getattr(self, "oob_error", None), None, []
        if error is not None:  # a dynamic index out of range, read for this op (nisa.oob_mode.skip skips instead)
            raise error
        _engine_check(op)
        for t in ([op.dst] if op.dst is not None else []) + list(op.sources):
            self.use(t._buffer)
        if op.dst is not None and not op.dst.buffer.on_chip:
            self.written.add(op.dst._buffer)
        if op.kind == "matmul":
            self._open_group(op)
        self.run(op)
        if op.dst is not None and op.dst.buffer.on_chip and op.dst.dtype.name in FLOAT8_FORMATS and \
                not getattr(op.dst._buffer, "codes", False):  # (a float32 word's bytes: kept as they are)
            nodes = float8_rounding(Expression(), op.dst.dtype.name)
            self.run(Op("pointwise", op.dst, [op.dst], nodes, name=op.name))
        if op.kind != "print":
            self._track_groups(op)
        lockstep = getattr(self, "lockstep", None)
        if lockstep is not None and not getattr(self, "depth", 0):  # the next program's turn (_lockstep.py)
            lockstep.step()

    # PSUM accumulation groups. Each PSUM element has a flag (a shadow buffer of the same layout):
    # 1 while it holds a value a matmul adds to (written by a matmul, or initialised by another
    # instruction such as a memset), 0 when it is new (allocated, in this loop iteration) or has
    # been read since. A matmul with accumulate=None adds to the elements whose flag is 1 and
    # overwrites the others (it starts a new group there); accumulate=True always adds,
    # accumulate=False always overwrites. Both executors run the same flag ops, so they agree.
    def track_psum(self, buffer: Buffer) -> None:
        """Gives a new PSUM buffer its accumulation flags, all 0 (emitted where it is allocated)."""
        flags = Buffer(buffer.name + "_groups", buffer.space, DTYPES["float32"], buffer.shape)
        self.allocate_flags(flags)
        buffer.flags = flags
        self._set_flags(Tile(flags, 0, [flags.elements], [1]), 0.0)

    @staticmethod
    def _flag_view(tile: Tile) -> Tile | None:
        flags = getattr(tile._buffer, "flags", None)
        return None if flags is None else Tile(flags, tile.offset, tile.sizes, tile.strides)

    def _set_flags(self, view: Tile, value: float, mask=None) -> None:
        self.run(Op("pointwise", view, [], [("literal", [], -1, float(value), -1, "")], mask=mask, name="psum group"))

    def _open_group(self, op: Op) -> None:
        flags = self._flag_view(op.dst)
        if op.accumulate is None:
            if flags is not None:  # keep the open groups, zero the rest, then add
                nodes = [("source", [], 0, 0.0, -1, ""), ("source", [], 1, 0.0, -1, ""), ("literal", [], -1, 0.0, -1, ""),
                         ("where", [1, 0, 2], -1, 0.0, -1, "")]
                self.run(Op("pointwise", op.dst, [op.dst, flags], nodes, name="psum group"))
            op.accumulate = flags is not None

    def _track_groups(self, op: Op) -> None:
        per_source = op.kind == "pointwise"
        for source in op.sources:
            flags = self._flag_view(source)
            if flags is not None and op.kind != "matmul":
                self._set_flags(flags, 0.0, op.mask if per_source or source is op.sources[0] else None)
        if op.dst is not None:
            flags = self._flag_view(op.dst)
            if flags is not None:
                self._set_flags(flags, 1.0, op.mask if op.kind == "pointwise" else None)


# The interpreter's side ---------------------------------------------------------------------------

_INT_MARKER = -0x5A5A5A5A


_TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
                 "float64": torch.float64, "int8": torch.int8, "uint8": torch.uint8, "int32": torch.int32,
                 "int64": torch.int64, "bool": torch.bool, "uint32": torch.int32, "uint16": torch.int32,
                 "int16": torch.int32, "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2,
                 "float8_e4m3": torch.uint8}  # NKI's IEEE-style e4m3 has no torch dtype: its bytes


def torch_dtype(nki_dtype) -> torch.dtype:
    """The torch dtype an HBM tensor of `nki_dtype` is stored as (unsigned 16/32-bit as int32)."""
    try:
        return _TORCH_DTYPES[nki_dtype.name]
    except KeyError:
        raise NKIError(f"NKI: HBM tensors of {nki_dtype.name} are not supported; use float32, bfloat16, float16, "
                       "or an integer type") from None


def empty_storage(buffer: Buffer) -> torch.Tensor:
    """New memory as the device hands it out: NaN, or a marker for integers, so unwritten reads show."""
    if buffer.space.on_chip:
        return torch.full((buffer.elements,), float("nan"), dtype=torch.float32)
    dtype = torch_dtype(buffer.dtype)
    fill = float("nan") if dtype.is_floating_point else (_INT_MARKER if dtype in (torch.int32, torch.int64) else 0)
    return torch.full((buffer.elements,), fill, dtype=dtype)


def round_to(values: torch.Tensor, nki_dtype) -> torch.Tensor:
    """Float values as a tile of `nki_dtype` holds them (engines compute in fp32, round on write)."""
    name = nki_dtype.name
    if name == "bfloat16":
        return values.to(torch.bfloat16).float()
    if name == "float16":
        return values.to(torch.float16).float()
    if name == "bool":
        return (values != 0).float()
    if not nki_dtype.is_float:
        return torch.trunc(values)
    return values


_TORCH_OPS = {
    "identity": lambda x: x, "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "maximum": torch.maximum, "minimum": torch.minimum, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
    "relu": torch.relu, "gelu": torch.nn.functional.gelu, "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "silu": torch.nn.functional.silu, "abs": torch.abs, "neg": torch.neg, "sign": torch.sign, "sin": torch.sin,
    "cos": torch.cos, "erf": torch.erf, "floor": torch.floor, "ceil": torch.ceil, "pow": torch.pow,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "logical_and": lambda a, b: (a != 0) & (b != 0), "logical_or": lambda a, b: (a != 0) | (b != 0),
    "logical_not": lambda a: a == 0, "where": lambda c, a, b: torch.where(c != 0, a, b),
    "log1p": torch.log1p, "expm1": torch.expm1, "tan": torch.tan, "round": torch.round, "trunc": torch.trunc,
    "clamp_min": torch.clamp_min, "clamp_max": torch.clamp_max, "atan": torch.atan, "asin": torch.asin,
    "acos": torch.acos, "sinh": torch.sinh, "cosh": torch.cosh, "exp2": torch.exp2, "log2": torch.log2,
    "log10": torch.log10, "erfc": torch.erfc,
    **BITWISE_OPS,
}


class Interpreter(Executor):
    """Runs a kernel op by op on CPU torch tensors, one program id at a time; HBM buffers a
    kernel allocates are shared by all its programs (matched by allocation order), except
    nl.private_hbm ones, which each program has to itself."""

    interpreting = True

    def __init__(self, grid):
        super().__init__(grid)
        self.pid = (0,) * max(1, len(self.grid))
        self.arguments = 0
        self.kernel_hbm = []  # allocated by the kernel, in order
        self.hbm_seen = 0

    def start_program(self, pid):
        self.pid = pid
        self.hbm_seen = 0
        for scope in self.scopes:  # the previous program's tiles
            for lease in scope:
                self._release(lease)
        self.leases = []
        self.scopes = [[]]

    def program_id(self, axis):
        return self.pid[axis] if axis < len(self.pid) else 0

    def dynamic_index(self, tile: Tile, limit: int, where: str) -> int:
        self._check_index_tile(tile, where)
        self.use(tile._buffer)
        value = int(tile._buffer.storage[int(tile.offset)])
        if not 0 <= value < limit:  # raised by the op that reads it (emit), unless it skips (oob_mode.skip)
            self.oob_error = NKIError(f"NKI: dynamic index {value} out of range [0, {limit}) for {where}")
        return min(max(value, 0), limit - 1)

    def add_hbm(self, buffer: Buffer) -> None:
        buffer.argument = self.arguments
        self.arguments += 1

    def allocate(self, buffer: Buffer) -> None:
        if buffer.space.name == "private_hbm":  # each program's own
            buffer.storage = empty_storage(buffer)
            self.add_hbm(buffer)
            return
        if not buffer.space.on_chip:
            if self.hbm_seen < len(self.kernel_hbm):  # the same output in a later program
                shared = self.kernel_hbm[self.hbm_seen]
                buffer.storage, buffer.argument = shared.storage, shared.argument
            else:
                buffer.storage = empty_storage(buffer)
                self.add_hbm(buffer)
                self.kernel_hbm.append(buffer)
            self.hbm_seen += 1
            return
        check_on_chip_shape(buffer.shape, buffer.space, buffer.dtype, buffer.name)
        space = buffer.space.name
        self.lease(buffer, bytes_per_partition(buffer.shape, buffer.dtype))
        buffer.storage = empty_storage(buffer)
        if space == "psum":
            self.track_psum(buffer)

    def allocate_flags(self, flags: Buffer) -> None:
        flags.storage = empty_storage(flags)

    def allocate_unchecked(self, buffer: Buffer) -> None:
        buffer.storage = empty_storage(buffer)

    def loop(self, extent):
        raise AssertionError("the interpreter iterates ranges in Python")

    @staticmethod
    def view(tile: Tile, limits=None) -> torch.Tensor:
        """The tile's elements, cut to `limits` ({axis: (lower, upper)}, a mask's bounds)."""
        offset, sizes = int(tile.offset), list(tile.sizes)
        for axis, (lo, hi) in (limits or {}).items():
            lo = 0 if lo is None else max(0, int(lo))
            hi = tile.sizes[axis] if hi is None else min(tile.sizes[axis], int(hi))
            offset += lo * tile.strides[axis]
            sizes[axis] = max(0, hi - lo)
        if all(sizes):
            first = offset + sum((s - 1) * st for s, st in zip(sizes, tile.strides) if st < 0)
            last = offset + sum((s - 1) * st for s, st in zip(sizes, tile.strides) if st > 0)
            if first < 0 or last >= tile._buffer.elements:
                raise NKIError(f"NKI: out-of-bounds access on '{tile.name}': elements {first}..{last} of "
                               f"{tile._buffer.elements}")
        else:
            offset = 0
        return torch.as_strided(tile._buffer.storage, sizes, tile.strides, offset)

    def store(self, tile: Tile, values: torch.Tensor, limits=None) -> None:
        target = self.view(tile, limits)
        values = values.expand_as(target)
        repeated = tuple(slice(-1, None) if st == 0 and n > 1 else slice(None) for n, st in zip(target.shape, tile.strides))
        if any(r.start is not None for r in repeated):  # a broadcast view written: its last value lands
            target, values = target[repeated], values[repeated]
        if tile.buffer.on_chip:
            target.copy_(round_to(values, tile.dtype).expand_as(target))
        else:
            target.copy_(values.expand_as(target).to(target.dtype))

    def evaluate(self, op: Op, loads, carry=None, column=None):
        values = []
        shape = loads[0].shape if loads else None
        for name, args, source, literal, dim, text in op.expression:
            if name == "source":
                values.append(loads[source])
            elif name == "literal":
                values.append(torch.tensor(literal, dtype=torch.float32))
            elif name == "index" and column is not None:  # a scan's column (dim 1)
                values.append(torch.tensor(float(column) if dim == 1 else 0.0))
            elif name == "index":
                size = shape[dim]
                lo = 0
                limits = op.mask.bounds if op.mask is not None else {}
                if dim in limits and limits[dim][0] is not None:
                    lo = max(0, int(limits[dim][0]))
                view_shape = [1] * len(shape)
                view_shape[dim] = size
                values.append(torch.arange(lo, lo + size, dtype=torch.float32).reshape(view_shape))
            elif name == "expression":
                raise AssertionError("the interpreter has no symbolic values")
            elif name == "carry":
                values.append(carry)
            else:
                values.append(_TORCH_OPS[name](*[values[a] for a in args]).float())
        return values[-1]

    def run(self, op: Op) -> None:
        getattr(self, "_" + op.kind)(op)

    def _pointwise(self, op: Op) -> None:
        limits = op.mask.bounds if op.mask is not None else None
        loads = [self.view(s, limits).float() for s in op.sources]
        dst_shape = self.view(op.dst, limits).shape
        value = self.evaluate(op, loads or [torch.empty(dst_shape)])
        self.store(op.dst, value.expand(dst_shape), limits)

    def _reduce(self, op: Op) -> None:
        limits = op.mask.bounds if op.mask is not None else None
        loads = [self.view(s, limits).float() for s in op.sources]
        value = self.evaluate(op, loads)
        dims = list(op.reduce_dims)
        if op.reduce_op == "add":
            result = value.sum(dim=dims, keepdim=True)
        elif op.reduce_op == "mul":
            result = value.double()
            for d in dims:
                result = result.prod(dim=d, keepdim=True)
            result = result.float()
        elif op.reduce_op == "max":
            result = value.amax(dim=dims, keepdim=True)
        else:
            result = value.amin(dim=dims, keepdim=True)
        result = result * op.scale
        kept = {a: b for a, b in (limits or {}).items() if a not in dims}
        if op.accumulate:
            result = result + self.view(op.dst, kept).float()
        self.store(op.dst, result, kept)

    def _matmul(self, op: Op) -> None:
        stationary, moving = (self.view(s).float() for s in op.sources)
        product = stationary.t().double() @ moving.double()  # fp32 accumulation, to within rounding
        if op.accumulate:
            product = product + self.view(op.dst).double()
        self.store(op.dst, product.float())

    def _scan(self, op: Op) -> None:
        loads = [self.view(s).float() for s in op.sources]
        a = loads[0]
        out = torch.empty_like(a)
        carry = torch.full((a.shape[0],), op.initial, dtype=torch.float32)
        for f in range(a.shape[1]):
            carry = self.evaluate(op, [x[:, f] for x in loads], carry, column=f).expand(a.shape[0])
            out[:, f] = carry
        self.store(op.dst, out)

    def _max8(self, op: Op) -> None:
        data = self.view(op.sources[0], op.mask.bounds if op.mask is not None else None).float()
        self.store(op.dst, torch.topk(data, 8, dim=1).values)

    def _find_index8(self, op: Op) -> None:
        data = self.view(op.sources[0]).float()
        wanted = self.view(op.sources[1]).float()
        out = torch.full(wanted.shape, -1.0)
        for p in range(data.shape[0]):
            taken = set()
            for k in range(8):
                matches = (data[p] == wanted[p, k]).nonzero().flatten().tolist()
                choice = next((m for m in matches if m not in taken), -1)
                taken.add(choice)
                out[p, k] = choice
        self.store(op.dst, out)

    def _print(self, op: Op) -> None:
        print(op.label)
        print(self.view(op.sources[0]).float())
