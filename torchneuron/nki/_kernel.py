"""@nki.jit: a kernel traced once per (shapes, dtypes, other arguments, grid) into a tile program,
compiled and run as one command on the device queue; or, with TORCHNEURON_NKI_INTERPRET=1, run
instruction by instruction in Python."""
from __future__ import annotations

import ctypes
import functools
import inspect
import math
import itertools
import os
import re
import threading

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensor

from .. import _C, compiler
from ._context import Interpreter, _state, activate, round_to, torch_dtype
from ._expr import KernelTraceError, ProgramTraceError, is_symbolic
from ._lockstep import Lockstep, LockstepRecorder
from ._recorder import Recorder
from ._dtypes import STORAGE_DTYPES, packed_name, to_dtype
from ._tensor import SPACES, Buffer, NKIError, Tile

# Float8 tensors in device memory: a compiled kernel reads and writes a float32 copy, and each
# one it may have written is cast back with torch's own conversion (round to nearest even and its
# saturation rules), so results match torch's .to(float8).
_FLOAT8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_WORDS = (torch.uint16, torch.int16, torch.uint32)  # stored as int32 words in compiled code


def _storage_name(nki_dtype) -> str:
    return str(torch_dtype(nki_dtype)).replace("torch.", "")


def interpreting() -> bool:
    """Whether kernels run in the Python interpreter (TORCHNEURON_NKI_INTERPRET=1)."""
    return os.environ.get("TORCHNEURON_NKI_INTERPRET", "0") not in ("", "0")


def _is_tensor(value) -> bool:
    return isinstance(value, (torch.Tensor, np.ndarray))


# Traces share the variable ranges of _expr: one trace at a time per process.
_trace_lock = threading.RLock()


def _is_fake(value) -> bool:
    return isinstance(value, FakeTensor) or (isinstance(value, torch.Tensor) and value.device.type == "meta")


def _from_numpy(array) -> torch.Tensor:
    """A NumPy argument as a host tensor; a packed MX array (neuron_dtypes) as its words (FP8 x4
    as int32, FP4 x4 as uint16), which the kernel reads as its packed dtype."""
    array = np.ascontiguousarray(array)
    if packed_name(array.dtype) is not None:
        array = array.view(np.int32 if array.dtype.itemsize == 4 else np.uint16)
    return torch.from_numpy(array)


def _key_of(value):
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), str(value.dtype))
    if isinstance(value, np.ndarray):
        return ("tensor", tuple(value.shape), str(_from_numpy(np.zeros(0, value.dtype)).dtype))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__,) + tuple(_key_of(v) for v in value)
    if isinstance(value, (int, float, bool, str, type(None))):
        return (type(value).__name__, value)
    return (type(value).__name__, repr(value))


class _Compiled:
    """A traced kernel: its entry points (one a segment), grid size and HBM tensors (inputs by
    position, or new); a kernel in segments also keeps its program (scratch offsets) and the host
    steps run between the segments."""

    def __init__(self, source, symbol, programs, hbm, outputs, written_inputs, program=None, host_steps=()):
        self.source, self.symbol, self.programs, self.hbm, self.outputs = source, symbol, programs, hbm, outputs
        self.written_inputs = written_inputs
        self.program, self.host_steps = program, list(host_steps)
        self.symbols = [symbol] if not self.host_steps else [f"{symbol}_s{k}" for k in range(len(self.host_steps) + 1)]
        self.entries = self.library = None

    def load(self) -> list:
        """The entry points, compiling the source (or finding it in the artifact cache) once."""
        if self.entries is None:
            self.library = compiler._load_artifact(self.source)
            self.entries = [ctypes.cast(getattr(self.library, s), ctypes.c_void_p).value for s in self.symbols]
        return self.entries


class HostTiles:
    """The tiles of a kernel in segments as device tensors, for the host steps between segments
    (the collectives): on-chip tiles in the launch's scratch tensor, HBM ones in its tensors."""

    def __init__(self, program, tensors, scratch):
        self.program, self.tensors, self.scratch = program, tensors, scratch
        self.align = (16 - scratch.data_ptr() // 4 % 16) % 16  # as the generated code aligns it
        self.written = set()

    def view(self, tile: Tile) -> torch.Tensor:
        if tile.buffer.on_chip:
            base, start = self.scratch, self.align + self.program.scratch_offset(tile._buffer.id)
        else:
            base, start = self.tensors[tile._buffer.argument], 0
        return base.as_strided(tuple(tile.sizes), tuple(tile.strides),
                               base.storage_offset() + start + int(tile.offset))

    def store(self, tile: Tile, values: torch.Tensor) -> None:
        target = self.view(tile)
        values = values.reshape(target.shape).to(target.device)
        target.copy_(round_to(values.float(), tile.dtype) if tile.buffer.on_chip else values.to(target.dtype))


def _flatten_outputs(result):
    if result is None:
        return [], None
    if isinstance(result, Tile):
        return [result], 0
    if isinstance(result, (tuple, list)):
        tiles = []
        structure = []
        for item in result:
            if not isinstance(item, Tile):
                raise NKIError(f"NKI: a kernel returns tensors, got {item!r}")
            tiles.append(item)
            structure.append(len(tiles) - 1)
        return tiles, tuple(structure)
    raise NKIError(f"NKI: a kernel returns tensors, got {result!r}")


def _check_output(tile: Tile) -> None:
    if tile.buffer.name not in ("shared_hbm", "hbm"):
        raise NKIError(f"NKI: kernel output '{tile.name}' is in {tile.buffer.name}; allocate outputs in device memory with "
                       f"nl.ndarray(shape, dtype, buffer=nl.shared_hbm) and store into them")
    if not tile.is_contiguous() or is_symbolic(tile.offset) or tile.offset != 0 or \
            math.prod(tile.shape) != tile._buffer.elements:
        raise NKIError(f"NKI: a kernel returns whole tensors (or reshaped views of them); '{tile.name}' is returned as "
                       "a part of one")


class Kernel:
    """An NKI kernel: call it with tensors, or launch it on a grid with kernel[g0, g1](...)."""

    def __init__(self, fn, grid=(), mode=None, cache=None):
        self.fn, self.grid, self.mode = fn, tuple(grid), mode
        self._cache = {} if cache is None else cache
        self._lock = threading.Lock()
        self.traces = 0
        functools.update_wrapper(self, fn)

    def __getitem__(self, grid):
        grid = grid if isinstance(grid, tuple) else (grid,)
        if len(grid) == 1 and isinstance(grid[0], (tuple, list)):
            grid = tuple(grid[0])
        grid = tuple(int(g) for g in grid)
        if len(grid) > 3 or any(g < 1 for g in grid):
            raise NKIError(f"NKI: a launch grid has 1 to 3 positive dims, got {grid}")
        launcher = Kernel(self.fn, grid, self.mode, self._cache)
        launcher._parent = self
        return launcher

    def _owner(self):
        return getattr(self, "_parent", self)

    def __call__(self, *args, **kwargs):
        if getattr(_state, "ctx", None) is not None:  # called by a running kernel: its code runs inline, on its grid
            return self.fn(*args, **kwargs)
        numpy_io = any(isinstance(v, np.ndarray) for v in itertools.chain(args, kwargs.values()))
        if (self.mode == "interpret" or (self.mode is None and interpreting())) and not any(
                _is_fake(v) for v in itertools.chain(args, kwargs.values())):
            return self._interpret(args, kwargs, numpy_io)
        return self._run_compiled(args, kwargs, numpy_io)

    # Arguments ----------------------------------------------------------------------------------
    def _bound(self, args, kwargs):
        try:
            bound = inspect.signature(self.fn).bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError(f"NKI kernel {self.fn.__name__}: {error}") from None
        bound.apply_defaults()
        return bound

    @staticmethod
    def _device_of(values):
        devices = {v.device for v in values if isinstance(v, torch.Tensor)}
        if any(d.type != "neuron" for d in devices):
            raise NKIError("NKI kernels take neuron tensors (or NumPy arrays); got a tensor on "
                           f"{sorted(str(d) for d in devices if d.type != 'neuron')[0]}: move it with .to('neuron')")
        if len(devices) > 1:
            raise NKIError(f"NKI kernels take tensors on one device, got {sorted(map(str, devices))}")
        return devices.pop() if devices else torch.device("neuron", torch.neuron.current_device())

    def _wrap(self, bound, executor, storages=None):
        """The kernel's arguments with every tensor replaced by an HBM tile of a new Buffer."""
        wrapped, position = {}, 0
        for name, value in bound.arguments.items():
            if _is_tensor(value):
                kind = to_dtype(value.dtype)
                if kind.packed != 1:  # a packed MX NumPy array: its words, as _from_numpy passes them
                    kind = to_dtype("int32" if kind.itemsize == 4 else "uint16")
                buf = Buffer(name, SPACES["shared_hbm"], kind, tuple(value.shape))
                executor.add_hbm(buf)
                if storages is not None:
                    buf.storage = storages[position]
                position += 1
                strides, step = [], 1
                for s in reversed(buf.shape):
                    strides.append(step)
                    step *= s
                wrapped[name] = Tile(buf, 0, buf.shape, list(reversed(strides)))
            else:
                wrapped[name] = value
        return wrapped

    # Compiled ------------------------------------------------------------------------------------
    def _record(self, bound, unrolled, lockstep=False, sites=frozenset()):
        program = _C._compiler.TileProgram()
        recorder = (LockstepRecorder if lockstep else Recorder)(self.grid, program, unrolled)
        recorder.unroll_sites = frozenset(sites)
        try:
            with activate(recorder):
                wrapped = self._wrap(bound, recorder)
                if not lockstep:
                    result = self.fn(**wrapped)
                    recorder.check_capacity()  # the tiles' last uses are known now
                    return program, recorder, result
            return program, recorder, Lockstep(recorder).run(lambda k: self.fn(**wrapped))[0]
        except KernelTraceError as error:  # the `for` lines of the loops whose variables it names
            error.loop_sites = {recorder.loop_sites[n] for n in getattr(error, "variables", ())
                                if recorder.loop_sites.get(n) is not None}
            raise

    def _trace(self, bound):
        # Loops stay loops with symbolic indices; a kernel whose Python code needs their values
        # (an `if`, a list index: current NKI gives affine_range indices as integers at trace
        # time) is traced again with those loops (their `for` lines) unrolled, one more each time
        # it needs one; where that does not do, with its short loops unrolled (up to 2, 4, ... 64
        # iterations: the fewest that let it trace, so the compiled code stays small), then with
        # all of them. Python code that branches on a program id, or programs that synchronise
        # (core_barrier, sendrecv), switch to tracing the grid's programs in lockstep with integer
        # ids (_lockstep.py).
        with _trace_lock:
            first, lockstep, levels, sites = None, False, [False, 2, 4, 8, 16, 64, True], set()
            while levels:
                unrolled = levels[0]
                try:
                    program, recorder, result = self._record(bound, unrolled, lockstep, sites)
                    break
                except (KernelTraceError, IndexError, TypeError) as error:
                    # other errors of Python code on an index still symbolic (once a trace has
                    # failed): traced again with more loops unrolled, as the old levels did
                    if not isinstance(error, KernelTraceError) and first is None:
                        raise
                    if isinstance(error, ProgramTraceError) and not lockstep:
                        lockstep = True
                        continue
                    first = first or error
                    more = getattr(error, "loop_sites", set()) - sites
                    if more:
                        sites |= more
                        continue
                    levels.pop(0)
                    if not levels:
                        raise first from None
        tiles, structure = _flatten_outputs(result)
        for t in tiles:
            _check_output(t)
        inputs = sum(1 for v in bound.arguments.values() if _is_tensor(v))
        hbm = []
        for buf in recorder.hbm_buffers:
            if buf.argument < inputs:
                hbm.append(("input", buf.argument))
            else:
                constant = getattr(buf, "constant", None)  # nl.shared_constant: its values, passed at launch
                shape = tuple(buf.shape) if getattr(buf, "copies", 1) == 1 else (buf.copies, *buf.shape)
                hbm.append(("new", shape, torch_dtype(buf.dtype)) if constant is None else
                           ("const", constant, torch_dtype(buf.dtype)))
        for buf in recorder.hbm_buffers:
            name = _storage_name(buf.dtype)
            if name not in STORAGE_DTYPES and torch_dtype(buf.dtype) not in _FLOAT8:
                raise NKIError(f"NKI: tensor '{buf.name}' of {buf.dtype.name} is not supported in device memory")
        outputs = [(t._buffer.argument, tuple(int(d) for d in t.shape)) for t in tiles]
        written = sorted({b.argument for b in recorder.written if not b.space.on_chip and b.argument < inputs})
        symbol = "nki_" + re.sub(r"\W", "_", self.fn.__name__)
        self._owner().traces += 1
        if not recorder.host_steps:
            return _Compiled(program.source(symbol), symbol, program.programs, hbm, (outputs, structure), written)
        program.set_external_scratch(len(hbm))  # a tensor after the HBM ones (_run_compiled)
        return _Compiled(program.source(symbol), symbol, program.programs, hbm, (outputs, structure), written,
                         program, recorder.host_steps)

    def _compiled_for(self, bound):
        key = (self.grid, tuple((n, _key_of(v)) for n, v in bound.arguments.items()))
        owner = self._owner()
        with owner._lock:
            compiled = self._cache.get(key)
        if compiled is None:
            compiled = self._trace(bound)
            with owner._lock:
                self._cache[key] = compiled
        return compiled

    def _run_compiled(self, args, kwargs, numpy_io):
        bound = self._bound(args, kwargs)
        values = [v for v in bound.arguments.values() if _is_tensor(v)]
        if any(_is_fake(v) for v in values):
            return self._fake_outputs(bound, values)
        device = self._device_of(values) if not numpy_io or any(isinstance(v, torch.Tensor) for v in values) else \
            torch.device("neuron", torch.neuron.current_device())
        compiled = self._compiled_for(bound)
        inputs = [_from_numpy(v).to(device) if isinstance(v, np.ndarray) else v
                  for v in values]
        contiguous = [t.contiguous() for t in inputs]
        tensors = []
        for spec in compiled.hbm:
            if spec[0] == "input":
                tensors.append(contiguous[spec[1]])
            elif spec[0] == "const":
                tensors.append(torch.from_numpy(np.ascontiguousarray(spec[1])).to(spec[2]).to(device))
            else:
                fill = float("nan") if spec[2].is_floating_point else (-0x5A5A5A5A if spec[2] in (torch.int32, torch.int64) else 0)
                tensors.append(torch.full(spec[1], fill, dtype=spec[2], device=device))
        staged = {k: t for k, t in enumerate(tensors) if t.dtype in _FLOAT8 or t.dtype in _WORDS}
        for k, t in staged.items():  # the compiled code keeps these as float32 / int32 (add_hbm)
            tensors[k] = t.float() if t.dtype in _FLOAT8 else t.to(torch.int32)
        entries = compiled.load()
        if not compiled.host_steps:
            torch.ops.torchneuron.launch_tile_program(entries[0], tensors, compiled.programs, self.fn.__name__)
        else:  # segment by segment, the host steps (collectives) between them, the tiles kept in scratch
            scratch = torch.full((compiled.program.scratch_floats + 16,), float("nan"), device=device)
            host = HostTiles(compiled.program, tensors, scratch)
            for k, entry in enumerate(entries):
                torch.ops.torchneuron.launch_tile_program(entry, tensors + [scratch], 1, self.fn.__name__)
                if k < len(compiled.host_steps):
                    compiled.host_steps[k](host)
        for k, t in staged.items():  # the float8 / narrow int tensors the kernel made or wrote, cast back
            spec = compiled.hbm[k]
            if spec[0] != "input" or spec[1] in compiled.written_inputs:
                t.copy_(tensors[k].to(t.dtype))
            tensors[k] = t
        for k in compiled.written_inputs:
            if contiguous[k] is not inputs[k]:
                inputs[k].copy_(contiguous[k])
            if isinstance(values[k], np.ndarray):
                values[k][...] = inputs[k].cpu().numpy()
        outputs, structure = compiled.outputs
        results = [tensors[a].reshape(shape) for a, shape in outputs]
        return _shape_results(results, structure, numpy_io)

    def _fake_outputs(self, bound, values):
        """Outputs of the traced shapes, for fake tensors (a custom op's fake implementation)."""
        compiled = self._compiled_for(bound)
        device = values[0].device
        outputs, structure = compiled.outputs
        specs = [compiled.hbm[a] for a, _ in outputs]  # ("const", values, dtype): a shared constant's shape
        results = [values[s[1]] if s[0] == "input" else
                   torch.empty(tuple(getattr(s[1], "shape", s[1])), dtype=s[2], device=device) for s in specs]
        results = [r.reshape(shape) for r, (_, shape) in zip(results, outputs)]
        return _shape_results(results, structure, False)

    # Interpreted ---------------------------------------------------------------------------------
    def _interpret(self, args, kwargs, numpy_io):
        bound = self._bound(args, kwargs)
        values = [v for v in bound.arguments.values() if _is_tensor(v)]
        device = None if numpy_io and not any(isinstance(v, torch.Tensor) for v in values) else self._device_of(values)
        host = [_from_numpy(v) if isinstance(v, np.ndarray) else v.detach().cpu()
                for v in values]
        storages = [h.contiguous().reshape(-1).clone() for h in host]
        interpreter = Interpreter(self.grid)
        # The programs run in lockstep (_lockstep.py): one at a time, switching at barriers and exchanges.
        result = Lockstep(interpreter).run(lambda k: self.fn(**self._wrap(bound, interpreter, storages)))[-1]
        tiles, structure = _flatten_outputs(result)
        for t in tiles:
            _check_output(t)
        written = {b.name for b in interpreter.written if not b.space.on_chip}
        for name_, value, storage in zip([n for n, v in bound.arguments.items() if _is_tensor(v)], values, storages):
            if name_ in written:
                restored = storage.reshape(value.shape)
                if isinstance(value, np.ndarray):
                    value[...] = restored.numpy()
                else:
                    value.copy_(restored.to(value.device))
        results = []
        for t in tiles:
            tensor = t._buffer.storage.reshape(tuple(int(d) for d in t.shape))
            results.append(tensor if device is None else tensor.to(device))
        return _shape_results(results, structure, numpy_io)


def _shape_results(results, structure, numpy_io):
    if numpy_io:
        results = [r.cpu().numpy() if r.dtype != torch.bfloat16 else r.float().cpu().numpy() for r in results]
    if structure is None:
        return None
    if structure == 0:
        return results[0]
    return tuple(results[i] for i in structure)


def jit(fn=None, *, mode=None, **_unused):
    """Makes `fn` an NKI kernel: traced and compiled per argument shapes (mode="interpret": run in Python)."""
    if fn is None:
        return lambda f: jit(f, mode=mode)
    if isinstance(fn, Kernel):
        return fn
    return Kernel(fn, mode=mode if mode in ("interpret",) else None)


def simulate_kernel(kernel, *args, **kwargs):
    """Runs a kernel in the interpreter on NumPy arrays (as neuronxcc.nki.simulate_kernel)."""
    if not isinstance(kernel, Kernel):
        kernel = Kernel(kernel)
    interpreter_kernel = Kernel(kernel.fn, kernel.grid, "interpret")
    return interpreter_kernel(*args, **kwargs)
