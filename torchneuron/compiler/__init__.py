"""torch.compile backend "neuron": Dynamo -> AOTAutograd (forward and backward graphs, core ATen
decompositions, min-cut partitioning) -> lowering to the compiler IR -> passes, fusion, memory
planning and C++ code generation in csrc/compiler -> a cached shared-object artifact whose
kernels run on the device queue. AOTAutograd's result is cached too (autograd_cache.py), so that
a warm start skips its tracing. Nodes the compiler does not fuse run as eager calls inside the
compiled program; a graph the compiler rejects runs eagerly after one warning."""

from __future__ import annotations

import ctypes
import hashlib
import os
import threading
import time
import warnings

import torch

from .. import _C

__all__ = ["neuron_backend", "compile_stats", "reset_compile_stats", "cache_dir", "clear_cache"]

# Half-precision (bfloat16, float16) values inside a fused kernel stay in float; only stored
# values and explicit casts are rounded, as Inductor does by default. True rounds every value
# where it is computed, as eager mode stores each op's result: bitwise agreement with eager mode
# for chains of ops, at the price of rounding composite ops that Dynamo or AOTAutograd
# decompose (addcdiv with a value, lerp, softplus) at each step where eager rounds once.
emulate_precision_casts = False

# Whether chains of foreach ops over device lists (a compiled optimizer step) lower into foreach
# kernels: generated code run over every index of the lists in one device job. Off, each foreach
# op runs as its native command.
foreach_kernels = True

_lock = threading.Lock()
_stats = {}
_libraries = {}  # source hash -> loaded artifact (the in-memory cache)


def reset_compile_stats() -> None:
    """Zeroes the counters compile_stats() reports."""
    with _lock:
        _stats.clear()
        _C._compiler.reset_fused_launches()
        _stats.update(graphs_compiled=0, graphs_native=0, graphs_eager=0, kernels_generated=0, mm_epilogues=0,
                      mm_prologues=0, ops_lowered=0, ops_eager=0, constants_folded=0, memory_cache_hits=0,
                      disk_cache_hits=0, artifacts_built=0, graph_cache_hits=0, graph_cache_saves=0,
                      compile_seconds=0.0, codegen_seconds=0.0)


reset_compile_stats()


def compile_stats() -> dict:
    """Counters of the neuron compiler since start (or the last reset): graphs compiled (of them,
    graphs_native run by the native executor, the rest by the Python step loop) and run
    eagerly, kernels generated (of them, mm_epilogues run with the matrix product before them, on
    each block of its rows, and mm_prologues write the product's first operand, each block of
    rows right before the product reads it), ops fused into kernels vs run as eager calls, eager
    calls folded into constants (computed once), artifact cache hits in memory and on disk,
    Dynamo graphs whose AOTAutograd result was saved to and reloaded from the graph cache
    (graph_cache_saves, graph_cache_hits: a hit skips AOTAutograd's tracing and partitioning),
    and seconds spent compiling (all of it) and in the system compiler. Those are what the compiler
    planned; at run time a kernel may still launch apart from its product (an operand in another
    layout, memory that both read and write): epilogue_launches and prologue_launches count the
    launches that ran fused, and foreach_in_place the foreach kernel launches that wrote their
    results straight into the inputs the graph copies them back into."""
    prologues, epilogues, foreach_in_place = _C._compiler.fused_launches()
    with _lock:
        return dict(_stats, prologue_launches=prologues, epilogue_launches=epilogues, foreach_in_place=foreach_in_place)


def _count(**deltas) -> None:
    with _lock:
        for key, delta in deltas.items():
            _stats[key] += delta


def _cache_root() -> str:
    return os.environ.get("TORCHNEURON_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "torchneuron")


def cache_dir() -> str:
    """Where artifacts are kept: compiler-v<version> under TORCHNEURON_CACHE_DIR (default
    ~/.cache/torchneuron), so that a new code generator never loads an old artifact."""
    return os.path.join(_cache_root(), "compiler-v" + _C._compiler.version)


def clear_cache() -> None:
    """Removes every compiler version's artifacts and graph cache from disk and forgets the graph
    cache held in memory; functions compiled already keep their loaded artifacts."""
    import shutil

    from . import autograd_cache

    root = _cache_root()
    if os.path.isdir(root):
        for name in os.listdir(root):
            if name.startswith("compiler-v"):
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    autograd_cache.forget_loaded()


def _load_artifact(source: str) -> ctypes.CDLL:
    key = hashlib.sha256(source.encode()).hexdigest()
    with _lock:
        library = _libraries.get(key)
    if library is not None:
        _count(memory_cache_hits=1)
        return library
    path, hit, seconds = _C._compiler.build_artifact(source, cache_dir())
    _count(disk_cache_hits=int(hit), artifacts_built=int(not hit), codegen_seconds=seconds)
    library = ctypes.CDLL(path)
    with _lock:
        _libraries[key] = library
    return library


def compile_graph(gm: torch.fx.GraphModule, example_inputs):
    """Compiles one AOTAutograd graph into a CompiledProgram (or, after a warning, gm.forward)."""
    from .lowering import (foreach_in_place_on_dying_lists, foreach_kernel_nodes, group_write_back_copies, lower,
                           restore_foreach_lerp, split_bias_from_addmm, stack_cpu_scalar_foreach_ops,
                           stack_select_backward_sums, update_batch_norm_stats_in_place)
    from . import program as program_module
    from .program import CompiledProgram, ListPack, _NotNative

    start = time.perf_counter()
    try:
        update_batch_norm_stats_in_place(gm)
        split_bias_from_addmm(gm)
        stack_select_backward_sums(gm)
        stack_cpu_scalar_foreach_ops(gm)
        restore_foreach_lerp(gm)
        use_foreach_kernels = foreach_kernels and program_module.native_executor
        foreach_in_place_on_dying_lists(gm, keep=foreach_kernel_nodes(gm) if use_foreach_kernels else ())
        group_write_back_copies(gm)
        lowered = lower(gm, round_intermediates=emulate_precision_casts, foreach_kernels=use_foreach_kernels)
        plan = _C._compiler.plan(lowered.graph)
        library = _load_artifact(plan["source"]) if plan["kernels"] else None
        try:
            program = CompiledProgram(gm, lowered, plan, library)
        except _NotNative:  # only the native executor runs foreach kernels
            lowered = lower(gm, round_intermediates=emulate_precision_casts, foreach_kernels=False)
            plan = _C._compiler.plan(lowered.graph)
            library = _load_artifact(plan["source"]) if plan["kernels"] else None
            program = CompiledProgram(gm, lowered, plan, library)
    except Exception as error:  # noqa: BLE001 - any failure means: run this graph eagerly
        warnings.warn(f"torchneuron.compile: running a graph of {len(gm.graph.nodes)} nodes eagerly: "
                      f"{type(error).__name__}: {error}", stacklevel=2)
        _count(graphs_eager=1, compile_seconds=time.perf_counter() - start)
        from functorch.compile import make_boxed_func

        return make_boxed_func(gm.forward)
    _count(graphs_compiled=1, graphs_native=int(program.native is not None), kernels_generated=len(plan["kernels"]),
           mm_epilogues=program.mm_epilogues, mm_prologues=program.mm_prologues,
           ops_lowered=plan["fused_nodes"], ops_eager=sum(not isinstance(n, ListPack) for n in lowered.opaque_nodes),
           constants_folded=program.constant_count, compile_seconds=time.perf_counter() - start)
    return program


def _decompositions():
    """Core ATen decompositions, except for ops with a native neuron kernel that a decomposition
    would split into many launches (norms, pooling, indexing, some reductions, losses).
    Pointwise activations decompose: their pieces fuse. So do softmax and log-softmax (forward
    and backward), whose pieces become one row kernel with the ops around them; measured
    against the native kernels, cross entropy's forward and backward ran 1.6-2.6x faster.
    addcmul and addcdiv stay whole, one fused pointwise op with eager mode's formula: the same
    order of operations, and one rounding of a half-precision result under
    emulate_precision_casts. linspace and logspace stay whole: their decompositions combine
    0-dim start and end tensors on the device with a CPU range (torch.linspace(a, b, n) for
    device tensors a and b makes a CPU tensor), which fake tensors refuse as a device mismatch.
    Dynamo writes addcmul_ and addcdiv_ with a value as Inductor's prims.fma, a Python op the
    native executor cannot call with a number operand: it becomes a multiply and an add, the
    roundings of eager mode's formula."""
    from torch._decomp import core_aten_decompositions, get_decompositions

    aten = torch.ops.aten
    keep = {aten.native_layer_norm, aten.native_layer_norm_backward, aten.nll_loss_forward, aten.nll_loss_backward,
            aten.embedding_dense_backward, aten.native_batch_norm, aten.native_batch_norm_backward,
            aten.native_group_norm, aten.native_group_norm_backward, aten.gelu, aten.gelu_backward,
            aten.silu, aten.silu_backward, aten.sigmoid_backward, aten.tanh_backward, aten.addmm, aten.mm,
            aten.bmm, aten.baddbmm, aten.index_select, aten.cat, aten.mse_loss, aten.mse_loss_backward,
            aten.upsample_nearest2d, aten.upsample_bilinear2d, aten.adaptive_avg_pool2d, aten.max_pool2d,
            aten.index_add, aten.index_copy, aten.index_fill, aten.var, aten.std, aten.var_mean, aten.std_mean,
            aten.logsumexp, aten.binary_cross_entropy, aten.binary_cross_entropy_backward, aten.addcmul,
            aten.addcdiv, aten.linspace, aten.logspace}
    table = core_aten_decompositions()
    table.update(get_decompositions([aten._softmax, aten._log_softmax, aten._softmax_backward_data,
                                     aten._log_softmax_backward_data]))
    table = {op: fn for op, fn in table.items() if op.overloadpacket not in keep}
    from torch._inductor import inductor_prims  # registers prims.fma

    table[inductor_prims.fma] = lambda a, b, c: aten.add(aten.mul(a, b), c)
    return table


# torch.compile's modes. "reduce-overhead" runs each compiled program through graph capture
# (graphed_program.py); the others compile the same way: the neuron compiler does no autotuning.
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def _graphed_compile_graph(gm: torch.fx.GraphModule, example_inputs):
    """compile_graph for mode="reduce-overhead": the program runs through graphs."""
    from .graphed_program import GraphedProgram

    return GraphedProgram(compile_graph(gm, example_inputs), gm)


def neuron_backend(gm: torch.fx.GraphModule, example_inputs, mode=None, options=None):
    """The Dynamo backend: torch.compile(model, backend="neuron"). Any mode of torch.compile is
    accepted; options are refused by name, since the compiler takes none."""
    if mode is not None and mode not in COMPILE_MODES:
        raise RuntimeError(f"torch.compile(backend='neuron'): unknown mode {mode!r}; the modes are "
                           f"{', '.join(COMPILE_MODES)}")
    if options:
        raise RuntimeError(f"torch.compile(backend='neuron') takes no options, got {', '.join(map(str, options))}")
    from functorch.compile import min_cut_rematerialization_partition
    from torch._dynamo.backends.common import aot_autograd

    from . import autograd_cache

    graphed = mode == "reduce-overhead"
    # The graph cache stores plain programs only.
    key = None if graphed else autograd_cache.cache_key(gm, example_inputs)
    compiler = _graphed_compile_graph if graphed else compile_graph
    # Two compilers: aot_autograd wraps the backward's in place.
    fw_compiler, bw_compiler = (compiler, compiler) if key is None else (
        autograd_cache.serializable_compiler(compile_graph), autograd_cache.serializable_compiler(compile_graph))
    backend = aot_autograd(fw_compiler=fw_compiler, bw_compiler=bw_compiler,
                           decompositions=_decompositions(), partition_fn=min_cut_rematerialization_partition,
                           keep_inference_input_mutations=True)
    if key is None:
        return backend(gm, example_inputs)
    with autograd_cache.cached_by(key, on_hit=lambda: _count(graph_cache_hits=1),
                                  on_save=lambda: _count(graph_cache_saves=1)):
        return backend(gm, example_inputs)
