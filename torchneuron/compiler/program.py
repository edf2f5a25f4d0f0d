"""The compiled program: runs a planned graph, launching fused kernels from the artifact on the
device queue and running opaque nodes as eager calls, with buffers reused as planned. The steps
run on the native executor (csrc/aten/compiled_program.cpp) when every node is an ATen op, a
tuple index, an alias or size arithmetic; otherwise each step is a small Python closure, so that
a call still does no graph walking."""

from __future__ import annotations

import ctypes
import operator

import torch
from torch import fx

from .. import _C


class ListPack:
    """An opaque step that gathers `elements` (FX nodes) into one list: a foreach kernel's
    operand. Compared by identity."""

    def __init__(self, elements: tuple):
        self.elements = elements


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


def _has_node(arg) -> bool:
    if isinstance(arg, fx.Node):
        return True
    if isinstance(arg, (list, tuple)):
        return any(_has_node(a) for a in arg)
    if isinstance(arg, dict):
        return any(_has_node(a) for a in arg.values())
    return False


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


class _NotNative(Exception):
    """The graph holds a node the native executor does not run (a Python callable, an op whose
    arguments it cannot encode); the program runs its steps from Python instead."""


# Whether programs run on the native executor when their graph allows it (tests turn it off to
# compare against the Python step loop).
native_executor = True


def _literal(arg):
    """A constant argument in the form the native executor converts by the op's schema."""
    if isinstance(arg, (list, tuple)):
        return [_literal(a) for a in arg]
    if isinstance(arg, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise _NotNative(f"symbolic constant {arg}")
    return arg


# Python integer operators on sizes (dynamic shapes) that the native executor computes.
_INT_ARITHMETIC = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.floordiv: "/", operator.mod: "%",
                   operator.neg: "n"}


def _native_program(gm: fx.GraphModule, lowered, plan: dict, library, constants: set):
    """The program as a _C._compiler.NativeProgram: the same steps as the Python loop, with
    tuple indexing and aliases resolved now and each value released after its last use."""
    ids = {}  # (fx node, index in its tuple or None) -> value id

    def vid(key):
        return ids.setdefault(key, len(ids))

    nodes = list(gm.graph.nodes)
    inputs = [vid((n, None)) for n in nodes if n.op == "placeholder"]
    source = lowered.value_source
    steps = []  # (kind, payload, values read, values written)
    column_kernels = set()  # entries of kernels reducing outer dims: they need every row first
    constant_values = {}

    def encode(arg, argument):
        if isinstance(arg, fx.Node):
            number = isinstance(argument.type, torch.TensorType) and not isinstance(arg.meta.get("val"), torch.Tensor)
            return ("number" if number else "value", vid((arg, None)))
        if isinstance(arg, (list, tuple)) and _has_node(arg):
            return ("list", [("value", vid((a, None))) if isinstance(a, fx.Node) else _literal(a) for a in arg])
        return ("literal", _literal(arg))

    for is_kernel, index, _ in plan["steps"]:
        if is_kernel:
            k = plan["kernels"][index]
            entry = ctypes.cast(getattr(library, k["symbol"]), ctypes.c_void_p).value
            reads = [vid(source[v]) for v in k["inputs"]]
            if any(d.startswith("foreach") for d in k["shape"]):
                targets = lowered.write_targets
                outputs = [(vid(source[v]), lowered.value_meta[v][0], vid(source[targets[v]]) if v in targets else -1)
                           for v in k["outputs"]]
                kept = reads + [o[2] for o in outputs if o[2] >= 0]  # the target lists live until the kernel
                steps.append(("foreach", (entry, reads, outputs), kept, [o[0] for o in outputs]))
                continue
            outputs = []
            for v, form in zip(k["outputs"], k["output_forms"]):
                reuse, layout = plan["in_place"][v], lowered.layout.get(v)
                overwrites = vid(source[reuse]) if reuse >= 0 and lowered.layout.get(reuse) == layout else -1
                outputs.append((vid(source[v]), lowered.value_meta[v][0], layout, plan["slot"][v], overwrites, form))
            static_shape = _static_shape(k["shape"])
            steps.append(("kernel", (entry, reads, outputs, static_shape, k["reduce_dims"]), reads,
                          [o[0] for o in outputs]))
            if k["reduce_dims"] and k["reduce_dims"][-1] != len(k["shape"]) - 1:
                column_kernels.add(entry)
            continue
        node = lowered.opaque_nodes[index]
        if isinstance(node, ListPack):
            elements = [vid((e, None)) for e in node.elements]
            steps.append(("pack", (elements, vid((node, None))), elements, [vid((node, None))]))
            continue
        target = node.target
        if node.op == "get_attr":
            value = getattr(gm, node.target)
            if not isinstance(value, torch.Tensor):
                raise _NotNative(f"constant {node.target} of type {type(value).__name__}")
            constant_values[vid((node, None))] = value
        elif target is operator.getitem and node.args[0] in lowered.foreach_nodes:
            src, item = node.args  # an element of a foreach kernel's result list
            steps.append(("item", (vid((src, None)), item, vid((node, None))), [vid((src, None))], [vid((node, None))]))
        elif target is operator.getitem:
            src, item = node.args
            if not isinstance(src, fx.Node) or (src, item) not in ids:
                raise _NotNative(f"indexing {node.format_node()}")
            ids[(node, None)] = ids[(src, item)]
        elif target is torch.ops.aten.alias.default and isinstance(node.args[0], fx.Node):
            ids[(node, None)] = vid((node.args[0], None))  # functional graphs never mutate through an alias's metadata
        elif isinstance(target, torch._ops.OpOverload):
            schema = target._schema
            encoded = []
            for i, argument in enumerate(schema.arguments):
                if i < len(node.args):
                    encoded.append(encode(node.args[i], argument))
                elif argument.name in node.kwargs:
                    encoded.append(encode(node.kwargs[argument.name], argument))
                else:
                    encoded.append(("default",))
            returns = schema.returns
            list_return = len(returns) == 1 and isinstance(returns[0].type, torch.ListType)
            if len(returns) > 1 and any(isinstance(r.type, torch.ListType) for r in returns):
                raise _NotNative(f"op {target} returns lists in a tuple")
            results = [vid((node, None))] if len(returns) == 1 else [vid((node, i)) for i in range(len(returns))]
            reads = [e[1] for e in encoded if e[0] in ("value", "number")]
            reads += [x[1] for e in encoded if e[0] == "list" for x in e[1] if isinstance(x, tuple) and x[:1] == ("value",)]
            name, overload = schema.name, schema.overload_name
            description = f"{node.name} = {node.format_node()}"
            steps.append(("op", (name, overload, encoded, results, node in constants, description), reads, results))
            if list_return:  # tuple indexing reads the elements as values of their own
                val = node.meta.get("val")
                if not isinstance(val, (list, tuple)):
                    raise _NotNative(f"op {target} returns a list of unknown length")
                for i in range(len(val)):
                    steps.append(("item", (results[0], i, vid((node, i))), [results[0]], [vid((node, i))]))
        elif target in _INT_ARITHMETIC and _int_operands(node):
            operands = tuple(("value", vid((a, None))) if isinstance(a, fx.Node) else a for a in node.args)
            result = vid((node, None))
            reads = [o[1] for o in operands if isinstance(o, tuple)]
            steps.append(("int", (_INT_ARITHMETIC[target], operands, result), reads, [result]))
        else:
            raise _NotNative(f"node {node.format_node()}")

    output_args = next(n for n in nodes if n.op == "output").args[0]
    if not isinstance(output_args, (list, tuple)) or not all(a is None or isinstance(a, fx.Node) for a in output_args):
        raise _NotNative("graph outputs are not a flat list of values")
    outputs = [-1 if a is None else vid((a, None)) for a in output_args]

    steps = _hoist_product_readers(_hoist_products_to_prologues(steps, column_kernels), column_kernels)
    _drop_unsafe_write_targets(steps)
    # Release each value after the last step that reads it (or the one that writes it, if none).
    kept = set(outputs) | set(constant_values)
    last = {}
    for position, (_, _, reads, writes) in enumerate(steps):
        for v in writes:
            last.setdefault(v, position)
        for v in reads:
            last[v] = position
    release = [[] for _ in steps]
    for v, position in last.items():
        if v not in kept:
            release[position].append(v)

    epilogues = _product_epilogues(steps, column_kernels)
    prologues = _product_prologues(steps, epilogues, column_kernels)
    program = _C._compiler.NativeProgram(len(ids), plan["num_slots"], inputs)
    for v, tensor in constant_values.items():
        program.set_constant(v, tensor)
    for (kind, payload, _, _), released in zip(steps, release):
        if kind == "kernel":
            program.add_kernel(*payload)
        elif kind == "op":
            program.add_op(*payload)
        elif kind == "int":
            program.add_int_arithmetic(*payload)
        elif kind == "pack":
            program.add_pack(*payload)
        elif kind == "foreach":
            program.add_foreach_kernel(*payload)
        else:
            program.add_list_item(*payload)
        if released:
            program.release_after_last_step(released)
    for mm_step, kernel_step, product_input in epilogues:
        program.fuse_product_epilogue(mm_step, kernel_step, product_input)
    for kernel_step, mm_step in prologues:
        program.fuse_product_prologue(kernel_step, mm_step)
    program.set_outputs(outputs)
    return program, isinstance(output_args, list), len(epilogues), len(prologues)


_WRITE_BACKS = {("aten::copy_", ""), ("aten::_foreach_copy_", "")}


def _drop_unsafe_write_targets(steps) -> None:
    """A foreach kernel writes a result into its target list (the inputs the graph copies it back
    into) only if every other step reading those inputs runs before it, or is a copy writing them
    back, and reads them through a list that nothing reads after it: once the kernel ran, the
    inputs hold the new values."""
    readers, packs = {}, {}
    for position, (kind, payload, reads, writes) in enumerate(steps):
        for v in reads:
            readers.setdefault(v, []).append(position)
        if kind == "pack":
            packs[writes[0]] = payload[0]

    def safe(position, target):
        for element in packs.get(target, ()):
            for q in readers.get(element, ()):
                kind, payload = steps[q][:2]
                if q > position and not (kind == "op" and payload[:2] in _WRITE_BACKS):
                    return False
                if q < position and kind == "pack" and any(r > position for r in readers.get(steps[q][3][0], ())):
                    return False
                if q < position and kind != "pack":
                    return False
        return target in packs

    for position, (kind, payload, reads, writes) in enumerate(steps):
        if kind == "foreach":
            entry, inputs, outputs = payload
            outputs = [(v, dtype, target if target >= 0 and safe(position, target) else -1)
                       for v, dtype, target in outputs]
            steps[position] = (kind, (entry, inputs, outputs), reads, writes)


_VIEWS = {("aten::view", ""), ("aten::_unsafe_view", "")}


# Ops that only make a new view of their first argument: moving one moves no data.
_METADATA = _VIEWS | {("aten::permute", ""), ("aten::t", ""), ("aten::expand", ""), ("aten::unsqueeze", ""),
                      ("aten::squeeze", "dim"), ("aten::squeeze", "dims")}
# Views that keep a contiguous tensor contiguous (an expand that broadcasts does not, and the run
# time then launches the kernel alone).
_RESHAPES = _VIEWS | {("aten::expand", ""), ("aten::unsqueeze", ""), ("aten::squeeze", "dim"), ("aten::squeeze", "dims")}
_PRODUCTS = (("aten::mm", ""), ("aten::bmm", ""))


def _product_chain(steps, i):
    """(product and its views, view steps making them, first later step reading any of them or
    len(steps)) for the mm or bmm at step i."""
    chain, views, j = set(steps[i][3]), [], i + 1
    while j < len(steps):
        kind, payload, reads, writes = steps[j]
        if kind == "op" and payload[:2] in _VIEWS and reads and reads[0] in chain:
            chain.update(writes)
            views.append(j)
        elif any(v in chain for v in reads):
            break
        j += 1
    return chain, views, j


def _first_writes(steps) -> dict:
    """Value id -> the first step that writes it."""
    written_at = {}
    for position, step in enumerate(steps):
        for v in step[3]:
            written_at.setdefault(v, position)
    return written_at


def _runs_on_row_blocks(step, column_kernels) -> bool:
    """Whether a step is a kernel that can run block by block with a product's rows (as their
    epilogue or their prologue): a column kernel finishes no row before the last."""
    return step[0] == "kernel" and step[1][0] not in column_kernels


def _hoist_product_readers(steps, column_kernels):
    """Moves a kernel that is the first reader of an mm's or bmm's product up to right after
    it, with the views it reads, when everything else it reads exists by then (views of earlier
    values go before the mm): it then runs as the product's epilogue. AOTAutograd's backward
    puts the weight-gradient mm between an input-gradient mm and the activation backward that
    reads it. A moved kernel's outputs get buffers of their own: the memory plan assumed them
    written later, and the input they were to overwrite may now still be read."""
    written_at = _first_writes(steps)
    i = 0
    while i < len(steps):
        kind, payload = steps[i][:2]
        if kind != "op" or payload[:2] not in _PRODUCTS or payload[4]:  # [4]: folded
            i += 1
            continue
        chain, views, j = _product_chain(steps, i)
        if j == len(steps) or not _runs_on_row_blocks(steps[j], column_kernels) or views == list(range(i + 1, j)):
            i += 1  # nothing to read it, not a kernel that could, or already right after the mm
            continue
        kernel = steps[j]
        made_early = (lambda r: r in chain or written_at.get(r) is None or written_at[r] < i)
        if sum(v in chain for v in kernel[2]) != 1 or not all(made_early(r) for s in views for r in steps[s][2]):
            i += 1  # read twice (no epilogue then), or a view's size is computed later
            continue
        before, ok = [], True  # metadata steps between i and j making the kernel's other inputs
        for v in kernel[2]:
            at = written_at.get(v)
            if v in chain or at is None or at < i:
                continue
            step = steps[at]
            if i < at < j and step[0] == "op" and step[1][:2] in _METADATA and all(made_early(r) and r not in chain
                                                                                for r in step[2]):
                before.append(at)
            else:
                ok = False
                break
        if not ok:
            i += 1
            continue
        entry, reads, outputs, static_shape, reduce_dims = kernel[1]
        fresh = [(value, dtype, layout, -1, -1, form) for value, dtype, layout, _, _, form in outputs]
        moved = (entry, reads, fresh, static_shape, reduce_dims)
        before = sorted(set(before))
        rest = [s for s in range(i + 1, j) if s not in views and s not in before]
        order = list(range(i)) + before + [i] + views + [j] + rest + list(range(j + 1, len(steps)))
        steps = [steps[s] if s != j else (kernel[0], moved, kernel[2], kernel[3]) for s in order]
        written_at = _first_writes(steps)
        i = order.index(i) + 1
    return steps


def _product_epilogues(steps, column_kernels) -> list[tuple[int, int, int]]:
    """(mm step, kernel step, kernel input) for each kernel that reads an mm's or bmm's product
    right after it, with only views of the product in between: the kernel then runs as the
    mm's epilogue (NativeProgram.fuse_product_epilogue)."""
    found = []
    for i, (kind, payload, _, _) in enumerate(steps):
        if kind != "op" or payload[:2] not in _PRODUCTS or payload[4]:  # [4]: folded
            continue
        chain, views, j = _product_chain(steps, i)
        if j == len(steps) or not _runs_on_row_blocks(steps[j], column_kernels) or views != list(range(i + 1, j)):
            continue
        reads = [n for n, v in enumerate(steps[j][1][1]) if v in chain]
        if len(reads) == 1:
            found.append((i, j, reads[0]))
    return found


def _operand_kernel(steps, written_at, value):
    """The step of the kernel whose output `value` is, through views that keep its memory order,
    or None."""
    at = written_at.get(value)
    # Not through transposes: the kernel writes rows, and a transposed operand's rows are columns.
    while at is not None and steps[at][0] == "op" and steps[at][1][:2] in _RESHAPES and steps[at][2]:
        at = written_at.get(steps[at][2][0])
    return at if at is not None and steps[at][0] == "kernel" else None


def _hoist_products_to_prologues(steps, column_kernels):
    """Moves an mm or bmm whose first operand a kernel writes up to right after that kernel,
    with the metadata steps making its operands, when everything else it reads exists by then:
    the kernel can then run as its prologue. The planner's order puts a graph's independent
    kernels first (the RMS norms of queries and keys, say) and their products after all of
    them. Moving an op only makes its fresh output exist earlier; the kernels it moves past are
    not moved. A move is kept only if more kernels fuse with products after it: the epilogue
    kernel of the product moved, or of another, may no longer be able to follow it."""
    fused, i = _fused_with_products(steps, column_kernels), 0
    while i < len(steps):
        kind, payload, reads = steps[i][:3]
        if kind != "op" or payload[:2] not in _PRODUCTS or payload[4] or not reads:  # [4]: folded
            i += 1
            continue
        written_at = _first_writes(steps)
        k = _operand_kernel(steps, written_at, reads[0])
        if k is None or k > i or not _runs_on_row_blocks(steps[k], column_kernels):
            i += 1
            continue
        # The metadata steps after the kernel that make the product's operands, and whether all
        # else it reads comes from before the kernel.
        needed, pending, movable = set(), list(reads), True
        while pending and movable:
            at = written_at.get(pending.pop())
            if at is None or at <= k or at in needed:
                continue
            if steps[at][0] == "op" and steps[at][1][:2] in _METADATA or steps[at][0] == "int":
                needed.add(at)
                pending.extend(steps[at][2])
            else:
                movable = False
        between = range(k + 1, i)
        if not movable or all(s in needed for s in between):
            i += 1
            continue
        rest = [s for s in between if s not in needed]
        order = list(range(k + 1)) + sorted(needed) + [i] + rest + list(range(i + 1, len(steps)))
        moved = [steps[s] for s in order]
        fused_if_moved = _fused_with_products(moved, column_kernels)
        if fused_if_moved > fused:
            steps, fused = moved, fused_if_moved
        i += 1
    return steps


def _fused_with_products(steps, column_kernels) -> int:
    """How many kernels run as epilogues or prologues of products in this order of steps."""
    steps = _hoist_product_readers(steps, column_kernels)
    epilogues = _product_epilogues(steps, column_kernels)
    return len(epilogues) + len(_product_prologues(steps, epilogues, column_kernels))


def _product_prologues(steps, epilogues, column_kernels) -> list[tuple[int, int]]:
    """(kernel step, mm step) for each kernel whose output, through views that keep its memory
    order, is the first operand of a later mm or bmm with only metadata steps in between (they
    neither read nor write data): the kernel then writes each block of the operand's rows as the
    product's prologue (NativeProgram.fuse_product_prologue). A kernel that is an epilogue stays
    one."""
    epilogue_kernels = {j for _, j, _ in epilogues}
    written_at = _first_writes(steps)
    found, taken = [], set()
    for i, (kind, payload, reads, _) in enumerate(steps):
        if kind != "op" or payload[:2] not in _PRODUCTS or payload[4] or not reads:  # [4]: folded
            continue
        at = _operand_kernel(steps, written_at, reads[0])
        if at is None or not _runs_on_row_blocks(steps[at], column_kernels) or at in epilogue_kernels or at in taken:
            continue
        if all(steps[s][0] == "int" or (steps[s][0] == "op" and steps[s][1][:2] in _METADATA) for s in range(at + 1, i)):
            found.append((at, i))
            taken.add(at)
    return found


def _static_shape(shape: list[str]) -> list[int] | None:
    """A kernel's IR shape as sizes, or None when some are symbolic."""
    return [int(d) for d in shape] if all(d.isdigit() for d in shape) else None


def _output_shape(shape, reduce_dims, form):
    """A kernel output's shape: the kernel's (form 0) or reduced, keeping the folded dims as
    size 1 (form 1) or dropping them (form 2)."""
    if form == 0:
        return shape
    return torch.Size([1 if d in reduce_dims else size for d, size in enumerate(shape)
                       if form == 1 or d not in reduce_dims])


def _int_operands(node: fx.Node) -> bool:
    """Whether every argument is an int or a node whose traced value is an integer size."""
    def is_int(a):
        if isinstance(a, fx.Node):
            return isinstance(a.meta.get("val"), (int, torch.SymInt)) and not isinstance(a.meta.get("val"), bool)
        return type(a) is int
    return not node.kwargs and all(is_int(a) for a in node.args)


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
