"""The compiled program: runs a planned graph, launching fused kernels from the artifact on the
device queue and running opaque nodes as eager calls, with buffers reused as planned. The steps
run on the native executor (csrc/aten/compiled/compiled_program.cpp) when every node is an ATen op, a
tuple index, an alias or size arithmetic; otherwise each step is a small Python closure, so that
a call still does no graph walking."""

from __future__ import annotations

import ctypes
import operator

import torch
from torch import fx

from .fx_nodes import _has_node, promised_strides
from .native_program import _NotNative, _native_program, _static_shape
# Imported from here by others: ListPack (compile_graph) and _hoist_product_readers (tests).
from .native_program import ListPack  # noqa: F401
from .product_fusion import _hoist_product_readers  # noqa: F401


def _resolver(arg):
    """A function env -> arg with every FX node in `arg` replaced by its value in env."""
    if isinstance(arg, fx.Node):
        return lambda env: env[arg]
    if isinstance(arg, (list, tuple)):
        parts = [_resolver(a) for a in arg]
        if isinstance(arg, tuple):
            return lambda env: tuple(p(env) for p in parts)
        return lambda env: [p(env) for p in parts]
    if isinstance(arg, dict):
        items = [(k, _resolver(v)) for k, v in arg.items()]
        return lambda env: {k: p(env) for k, p in items}
    return lambda env: arg


# Views and tuple indexing are most of a graph's eager calls; Tensor methods skip the
# OpOverload layer and run the same ATen op.
_METHODS = {
    torch.ops.aten.view.default: torch.Tensor.view, torch.ops.aten.permute.default: torch.Tensor.permute,
    torch.ops.aten.t.default: torch.Tensor.t,
    torch.ops.aten.transpose.int: torch.Tensor.transpose, torch.ops.aten.unsqueeze.default: torch.Tensor.unsqueeze,
    torch.ops.aten.squeeze.dim: torch.Tensor.squeeze, torch.ops.aten.select.int: torch.Tensor.select,
}


# Constant folding keeps at most this many elements per folded value on the device.
_FOLD_LIMIT = 1 << 20


def _constant_nodes(graph: fx.Graph) -> set:
    """Nodes whose value is the same at every call: deterministic, non-mutating ATen ops on
    graph constants and literals only (positions from arange, filled tensors, casts of
    parameters frozen into the graph), with static sizes. Values a graph output may alias (the
    outputs and what they are views of) are left out, since a caller may modify what it gets
    back."""
    escaping = set()
    for node in graph.nodes:
        if node.op == "output":
            fx.node.map_arg(node.args[0], lambda n: escaping.add(n) or n)
    for node in reversed(graph.nodes):  # users before producers: follow views back to their bases
        if node not in escaping or node.op != "call_function":
            continue
        views = node.target is operator.getitem or (
            isinstance(node.target, torch._ops.OpOverload)
            and any(r.alias_info is not None for r in node.target._schema.returns))
        if views:
            escaping.update(node.all_input_nodes)
    constant = set()
    for node in graph.nodes:
        if node.op == "get_attr":
            constant.add(node)
            continue
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        schema = node.target._schema
        if schema.is_mutable or torch.Tag.nondeterministic_seeded in node.target.tags:
            continue
        if not all(arg in constant for arg in node.all_input_nodes):
            continue
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor) or not all(type(d) is int for d in val.shape) or val.numel() > _FOLD_LIMIT:
            continue
        constant.add(node)
    return {n for n in constant if n.op == "call_function" and n not in escaping}


def _binder(node):
    """A function (target, env) -> the node's value, with its constant arguments bound once and
    only its FX-node arguments looked up per call (the common shapes get their own closures)."""
    args, kwargs = node.args, node.kwargs
    if _has_node(kwargs):
        resolve = _resolver((args, kwargs))

        def call(target, env):
            a, k = resolve(env)
            return target(*a, **k)

        return call
    if node.target is operator.getitem and isinstance(args[0], fx.Node) and not _has_node(args[1]):
        source, index = args
        return lambda target, env: env[source][index]
    method = _METHODS.get(node.target)
    if args and isinstance(args[0], fx.Node) and not _has_node(args[1:]):
        first, rest = args[0], tuple(args[1:])
        if method is not None and not kwargs:
            return lambda target, env: method(env[first], *rest)
        if kwargs:
            return lambda target, env: target(env[first], *rest, **kwargs)
        return lambda target, env: target(env[first], *rest)
    direct = [(i, a) for i, a in enumerate(args) if isinstance(a, fx.Node)]
    nested = [(i, _resolver(a)) for i, a in enumerate(args) if not isinstance(a, fx.Node) and _has_node(a)]
    template = list(args)

    def call(target, env):
        a = template.copy()
        for i, n in direct:
            a[i] = env[n]
        for i, r in nested:
            a[i] = r(env)
        return target(*a, **kwargs)

    return call


# Whether programs run on the native executor when their graph allows it (tests turn it off to
# compare against the Python step loop).
native_executor = True


def _output_shape(shape, reduce_dims, form):
    """A kernel output's shape: the kernel's (form 0) or reduced, keeping the folded dims as
    size 1 (form 1) or dropping them (form 2)."""
    if form == 0:
        return shape
    return torch.Size([1 if d in reduce_dims else size for d, size in enumerate(shape)
                       if form == 1 or d not in reduce_dims])


class CompiledProgram:
    """Called with the list of the FX graph's inputs (AOTAutograd's boxed convention: the list is
    emptied so that inputs can be freed early) or with the inputs themselves; returns the
    graph's outputs. Runs on the native executor unless the graph holds a node it cannot run."""

    def __init__(self, gm: fx.GraphModule, lowered, plan: dict, library: ctypes.CDLL | None):
        # An instance attribute, not a class one: Dynamo wraps backward programs in
        # torch._dynamo.disable, whose functools.wraps copies the instance's __dict__ only.
        # Without it AOTAutograd calls the backward unboxed (saved tensors live to its end).
        self._boxed_call = True
        self.gm = gm
        nodes = list(gm.graph.nodes)
        self.placeholders = [n for n in nodes if n.op == "placeholder"]
        self.outputs = _resolver(next(n for n in nodes if n.op == "output").args[0])
        self.num_slots = plan["num_slots"]
        self.launch = torch.ops.torchneuron.launch_fused
        source = lowered.value_source

        def read(v):
            node, index = source[v]
            return (lambda env: env[node]) if index is None else (lambda env: env[node][index])

        # FX nodes whose every IR value dies at a step are dropped from the environment there.
        values_of = {}
        for v, (node, _) in source.items():
            values_of.setdefault(node, []).append(v)
        released = set()
        constants = _constant_nodes(gm.graph)
        self.constant_count = sum(1 for n in lowered.opaque_nodes if n in constants)
        self.native, self.not_native_reason, self.mm_epilogues, self.mm_prologues = None, None, 0, 0
        if lowered.foreach_nodes and not native_executor:
            raise _NotNative("foreach kernels run on the native executor only")
        if native_executor:
            try:
                self.native, self._list_outputs, self.mm_epilogues, self.mm_prologues = _native_program(
                    gm, lowered, plan, library, constants)
            except _NotNative as reason:
                if lowered.foreach_nodes:
                    raise  # the caller lowers the graph again without foreach kernels
                self.not_native_reason = str(reason)
        self.steps = []  # the Python step loop, when the native executor cannot run the graph
        if self.native is not None:
            return
        for is_kernel, index, release in plan["steps"]:
            released.update(release)
            drop = [n for n, vs in values_of.items() if n.op != "placeholder" and all(v in released for v in vs)]
            for n in drop:
                del values_of[n]
            if is_kernel:
                k = plan["kernels"][index]
                entry = ctypes.cast(getattr(library, k["symbol"]), ctypes.c_void_p).value
                outputs = [(source[v][0], lowered.value_meta[v][0], lowered.layout.get(v), plan["slot"][v],
                            plan["in_place"][v], plan["in_place"][v] >= 0 and lowered.layout.get(v) ==
                            lowered.layout.get(plan["in_place"][v]), form)
                           for v, form in zip(k["outputs"], k["output_forms"])]
                in_place_sources = {v: source[v][0] for v in k["inputs"]}
                static_shape = _static_shape(k["shape"])
                self.steps.append(self._kernel_step(entry, [read(v) for v in k["inputs"]], outputs, in_place_sources,
                                                    drop, static_shape, k["reduce_dims"]))
            else:
                node = lowered.opaque_nodes[index]
                self.steps.append(self._opaque_step(node, drop, node in constants))

    def _kernel_step(self, entry, inputs, outputs, in_place_sources, drop, static_shape, reduce_dims):
        launch = self.launch
        reduction = torch.ops.torchneuron.launch_fused_reduction
        static = torch.Size(static_shape) if static_shape is not None else None

        def run(env, slots):
            tensors = [r(env) for r in inputs]
            shape = static if static is not None else torch.broadcast_shapes(*[t.shape for t in tensors])
            device = tensors[0].device
            outs = []
            for node, dtype, order, slot, reuse, same_layout, form in outputs:
                out_shape = _output_shape(shape, reduce_dims, form)
                buffer = None
                if reuse >= 0 and same_layout:
                    buffer = env[in_place_sources[reuse]]
                elif slot >= 0 and order is None:
                    buffer = slots[slot]
                if buffer is None or not _suits(buffer, out_shape, dtype, order):
                    buffer = _allocate(out_shape, dtype, device, order)
                if slot >= 0:
                    slots[slot] = buffer
                outs.append(buffer)
                env[node] = buffer
            if reduce_dims:
                reduction(entry, outs, tensors, list(shape), reduce_dims)
            else:
                launch(entry, outs, tensors, list(shape))
            for node in drop:
                env.pop(node, None)

        return run

    def _opaque_step(self, node, drop, constant=False):
        if node.op == "get_attr":
            gm, target = self.gm, node.target

            def run(env, slots):
                env[node] = getattr(gm, target)
                for n in drop:
                    env.pop(n, None)

            return run
        target, call = node.target, _binder(node)
        if isinstance(target, torch._ops.OpOverload):
            target = target._op  # the C++ callable: OpOverload.__call__ is one more Python frame per op
        if constant:  # folded: computed by the first call, then reused
            bind, folded = call, []

            def call(target, env):
                if not folded:
                    folded.append(bind(target, env))
                return folded[0]

        restride = promised_strides(node)
        if restride:
            bound = call

            def call(target, env):
                return _restrided(bound(target, env), restride)

        def run(env, slots):
            try:
                env[node] = call(target, env)
            except Exception as error:
                error.add_note(f"(raised by node {node.name} = {node.format_node()} of a neuron-compiled graph)")
                raise
            for n in drop:
                env.pop(n, None)

        return run

    def __call__(self, *args):
        boxed = len(args) == 1 and isinstance(args[0], list)  # boxed: graph inputs are never lists
        if self.native is not None:
            outputs = self.native.run(args[0] if boxed else list(args))
            return list(outputs) if self._list_outputs else outputs
        if boxed:
            boxed = args[0]
            args = tuple(boxed)
            boxed.clear()
        env = dict(zip(self.placeholders, args))
        slots = [None] * self.num_slots
        for step in self.steps:
            step(env, slots)
        return self.outputs(env)


def _restrided(value, restride):
    """value with each listed result in its traced strides (copied where eager mode laid it out
    otherwise)."""
    results = [value] if isinstance(value, torch.Tensor) else list(value)
    for index, strides in restride:
        t = results[index]
        if t.stride() != tuple(strides):
            results[index] = torch.empty_strided(t.shape, strides, dtype=t.dtype, device=t.device).copy_(t)
    return results[0] if isinstance(value, torch.Tensor) else type(value)(results)


def _suits(buffer, shape, dtype, layout) -> bool:
    """Whether a planned buffer (a dying input's, or a slot's last tensor) can hold an output:
    the planner matches sizes and dtypes only, and a slot may last have held a value that eager
    mode lays out otherwise (a later view of the output relies on its strides)."""
    if buffer.shape != shape or buffer.dtype != dtype:
        return False
    if layout is None:  # exactly row-major, size-1 dims included, as torch.empty makes it
        step, strides = 1, []
        for size in reversed(shape):
            strides.append(step)
            step *= max(size, 1)
        return buffer.stride() == tuple(reversed(strides))
    sizes, strides = layout
    return tuple(sizes) == tuple(shape) and tuple(buffer.stride()) == tuple(strides)


def _allocate(shape, dtype, device, layout):
    """An empty tensor of `shape` in eager mode's layout: the traced strides when the sizes are
    the traced ones, else the traced dim order (outermost first), else row-major."""
    if layout is None:
        return torch.empty(shape, dtype=dtype, device=device)
    sizes, strides = layout
    if tuple(shape) == sizes:
        return torch.empty_strided(sizes, strides, dtype=dtype, device=device)
    order = sorted(range(len(sizes)), key=lambda d: -strides[d])
    physical = torch.empty([shape[d] for d in order], dtype=dtype, device=device)
    return physical.permute([order.index(d) for d in range(len(order))])
