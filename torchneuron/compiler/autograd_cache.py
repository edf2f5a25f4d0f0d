"""Whole-graph cache: AOTAutograd's result (forward and backward graphs, the partition and the
runtime metadata that wraps them) kept on disk next to the artifacts, so that a warm start
skips AOTAutograd's tracing and partitioning, most of a warm compile. An entry is
AOTAutograd's own bundled cache entry, reloaded through its own runtime wrappers; what is ours
is the key (computed before AOTAutograd runs, from the Dynamo graph and its inputs), where
entries live, and the compiled graph inside (NeuronOutputCode), which keeps its FX graph and
recompiles it on load from the artifact cache.

Only graphs with plain tensor (and symbolic size) inputs are cached; others compile as before.
A graph with dynamic sizes has one entry for every size its shape guards admit."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
import pickle
import tempfile
import threading
import time
from typing import Any

import torch
from torch import fx
from torch._inductor.output_code import OutputCode

from .. import _C

_log = logging.getLogger(__name__)
_entries: dict[str, bytes] = {}  # entry path -> pickled entry (the in-memory cache in front of the disk)
_lock = threading.Lock()
_source_digest: str | None = None


def forget_loaded() -> None:
    """Drops the entries held in memory (after the disk cache was cleared)."""
    with _lock:
        _entries.clear()


def _compiler_source_digest() -> str:
    """Our lowering and planning decide what an entry's graphs compile to; a changed file must miss."""
    global _source_digest
    if _source_digest is None:
        digest = hashlib.sha256()
        here = os.path.dirname(os.path.abspath(__file__))
        for name in sorted(os.listdir(here)):
            if name.endswith(".py"):
                with open(os.path.join(here, name), "rb") as f:
                    digest.update(name.encode() + f.read())
        _source_digest = digest.hexdigest()
    return _source_digest


def _refusal(gm: fx.GraphModule, example_inputs) -> str | None:
    """Why this Dynamo graph cannot be cached, or None. The key hashes the graph's code, so
    everything the graph does must be in that code: no submodules, attributes or functions
    outside torch whose behaviour the code only names."""
    from torch._functorch._aot_autograd.autograd_cache import check_node_safe

    if hasattr(gm, "saved_tensors_hooks_pack_0"):
        return "saved tensor hooks"
    for node in gm.graph.nodes:
        if node.op in ("get_attr", "call_module"):
            return f"graph reads {node.op} {node.target}"
        try:
            check_node_safe(node)
        except Exception as error:  # noqa: BLE001 - a node AOTAutograd's cache would not key safely
            return str(error).splitlines()[0]
    for x in example_inputs:
        if type(x) not in (torch.Tensor, torch.nn.Parameter, torch.SymInt):
            return f"input of type {type(x).__name__}"
    return None


def _input_metadata(x, traced, storages: dict[int, int]) -> tuple:
    """What of an input the compiled graphs depend on. Sizes come from the value Dynamo traced
    (`traced`), where dynamic ones are symbols whose values the entry's shape guards check, so
    that one entry serves every size."""
    if isinstance(x, torch.SymInt):
        return ("SymInt", str(traced))
    shaped = traced if isinstance(traced, torch.Tensor) else x
    return (type(x).__name__, x.dtype, x.device, tuple(map(str, shaped.shape)), tuple(map(str, shaped.stride())),
            str(shaped.storage_offset()), x.requires_grad, x._is_view(),
            storages.setdefault(x.untyped_storage()._cdata, len(storages)))


def cache_key(gm: fx.GraphModule, example_inputs) -> str | None:
    """The key of a Dynamo graph with these inputs, or None when it is not cacheable (the reason
    is logged at debug level)."""
    refusal = _refusal(gm, example_inputs)
    if refusal is not None:
        _log.debug("graph cache: not caching a graph of %d nodes: %s", len(gm.graph.nodes), refusal)
        return None
    import torch._functorch.config as functorch_config

    digest = hashlib.sha256()
    for part in (torch.__version__, _C._compiler.version, _compiler_source_digest(), gm.code):
        digest.update(part.encode() + b"\0")
    digest.update(functorch_config.save_config())
    autocast = [(d, torch.get_autocast_dtype(d)) for d in ("cpu", "neuron") if torch.is_autocast_enabled(d)]
    storages: dict[int, int] = {}
    traced = [node.meta.get("example_value") for node in gm.graph.find_nodes(op="placeholder")]
    if len(traced) != len(example_inputs):
        traced = [None] * len(example_inputs)
    inputs = [_input_metadata(x, t, storages) for x, t in zip(example_inputs, traced)]
    state = (torch.is_grad_enabled(), torch.are_deterministic_algorithms_enabled(), autocast, inputs)
    digest.update(repr(state).encode())
    return "neuron-aot-" + digest.hexdigest()


def _path(key: str) -> str:
    from . import cache_dir

    return os.path.join(cache_dir(), "graphs", key + ".pkl")


def _load(key: str) -> bytes | None:
    path = _path(key)
    with _lock:
        content = _entries.get(path)
    if content is not None:
        return content
    try:
        with open(path, "rb") as f:
            content = f.read()
    except OSError:
        return None
    with _lock:
        _entries[path] = content
    return content


def _store(key: str, content: bytes) -> None:
    """Writes to a temporary file and renames it into place: a reader sees a whole entry or none,
    and processes saving the same key at once each write a complete, equal entry."""
    path = _path(key)
    with _lock:
        _entries[path] = content
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


@dataclasses.dataclass
class NeuronOutputCode(OutputCode):
    """One compiled AOTAutograd graph as AOTAutograd's cache stores it: the program, and the
    pickled FX graph (with its fake-tensor metadata) it was compiled from."""

    program: Any = None
    serialized_graph: bytes | None = None

    def __post_init__(self):
        # On the instance: the wrappers AOTAutograd puts around a compiled backward copy
        # the instance's attributes, and without this one they would unpack the inputs.
        self._boxed_call = True

    def __call__(self, inputs):
        return self.program(inputs)

    def prepare_for_serialization(self) -> None:
        from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache

        if self.serialized_graph is None:
            raise BypassAOTAutogradCache("the graph could not be pickled")
        self.program = None

    def post_compile(self, example_inputs, constants, graph_kwargs) -> None:
        if self.program is not None:
            return
        from torch._subclasses import FakeTensorMode
        from torch.fx._graph_pickler import GraphPickler
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        from . import compile_graph

        gm = GraphPickler.loads(self.serialized_graph, FakeTensorMode(shape_env=ShapeEnv()))
        gm.recompile()  # its forward, which the eager fallback of a rejected graph runs
        self.program = compile_graph(gm, example_inputs)

    def set_triton_bundle(self, triton_bundle) -> None:
        pass


def _kept_metadata(key: str) -> bool:
    """Lowering reads only the fake values; stack traces and provenance would make an entry megabytes."""
    return key == "val"


def serializable_compiler(compile_graph):
    """compile_graph as a compiler whose results AOTAutograd's bundled cache can store."""
    from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler
    from torch.fx._graph_pickler import GraphPickler, Options

    def compile_and_keep_graph(gm, example_inputs):
        try:  # before compile_graph rewrites gm in place
            serialized = GraphPickler.dumps(gm, Options(ops_filter=None, node_metadata_key_filter=_kept_metadata))
        except Exception:  # noqa: BLE001 - an unpicklable graph is compiled, just not cached
            serialized = None
        return NeuronOutputCode(program=compile_graph(gm, example_inputs), serialized_graph=serialized)

    return SerializableAOTDispatchCompiler(NeuronOutputCode, compile_and_keep_graph)


@contextlib.contextmanager
def cached_by(key: str, on_hit, on_save):
    """Within this block AOTAutograd's cache is ours: it looks up `key` in our entries and
    stores what it would save under `key` there. The backward compiles with the forward, so
    that the entry is complete before the block ends. Dynamo compiles one graph at a time
    (under its compile lock), so swapping the class's methods for the block is safe."""
    import torch._functorch.config as functorch_config
    from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCache, create_fx_config
    from torch._functorch._aot_autograd.schemas import AOTAutogradCacheInfo
    from torch.fx.experimental.symbolic_shapes import guarding_hint_or_throw

    def try_load(mod, args, aot_config, compiler_config_extra, local, remote, compile_region_name=None):
        symints = AOTAutogradCache._filter_backed_symints(args)
        content = _load(key)
        if content is not None:
            try:
                entry = pickle.loads(content)
                # Sizes outside the entry's shape guards miss without touching the shape
                # environment; on a hit, wrap_post_compile installs those guards in it.
                hints = [guarding_hint_or_throw(s) for s in symints]
                if not entry.guards_expr or AOTAutogradCache.evaluate_guards(entry.guards_expr, hints):
                    fx_config = create_fx_config(compiler_config_extra, compile_region_name)
                    compiled = entry.wrap_post_compile(args, aot_config, fx_config)
                    on_hit()
                    return compiled, aot_config
            except Exception:  # noqa: BLE001 - an unreadable entry is a miss, and is overwritten
                pass
        info = AOTAutogradCacheInfo(key, time.time_ns(), forward_symints=symints)
        return None, dataclasses.replace(aot_config, cache_info=info)

    def save(entry_key, entry, remote):
        if entry_key != key:  # another thread's lazily compiled Inductor backward: not ours
            return original[1].__func__(entry_key, entry, remote)
        try:
            entry.pre_save()
            with torch.utils._python_dispatch._disable_current_modes():
                content = pickle.dumps(entry)
        except Exception:  # noqa: BLE001 - not cached; the compiled graph still runs
            return
        _store(entry_key, content)
        on_save()

    original = AOTAutogradCache.__dict__["try_load"], AOTAutogradCache.__dict__["save"]
    AOTAutogradCache.try_load, AOTAutogradCache.save = staticmethod(try_load), staticmethod(save)
    try:
        with functorch_config.patch(enable_autograd_cache=True, bundled_autograd_cache=True,
                                    force_non_lazy_backward_lowering=True):
            yield
    finally:
        AOTAutogradCache.try_load, AOTAutogradCache.save = original
