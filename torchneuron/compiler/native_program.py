"""The native executor's program for a planned graph (_C._compiler.NativeProgram, run by
csrc/aten/compiled/compiled_program.cpp): the same steps as the Python step loop, encoded (kernels, ATen
ops and their arguments, tuple items, size arithmetic, foreach kernels and the lists they read),
put in an order where kernels fuse with matrix products (product_fusion.py), with tuple indexing
and aliases resolved and each value released after its last use. A graph it cannot run raises
_NotNative."""

from __future__ import annotations

import ctypes
import operator

import torch
from torch import fx

from .. import _C
from .fx_nodes import _has_node, promised_strides
from .product_fusion import (_hoist_product_readers, _hoist_products_to_prologues, _product_epilogues,
                             _product_prologues)


class ListPack:
    """An opaque step that gathers `elements` (FX nodes) into one list: a foreach kernel's
    operand. Compared by identity."""

    def __init__(self, elements: tuple):
        self.elements = elements


class _NotNative(Exception):
    """The graph holds a node the native executor does not run (a Python callable, an op whose
    arguments it cannot encode); the program runs its steps from Python instead."""


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
            restride = [] if list_return else promised_strides(node)  # (result position, strides)
            steps.append(("op", (name, overload, encoded, results, node in constants, description, restride), reads,
                          results))
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
            program.add_op(*payload[:6])
            if payload[6]:
                program.restride_results(payload[6])
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


def _static_shape(shape: list[str]) -> list[int] | None:
    """A kernel's IR shape as sizes, or None when some are symbolic."""
    return [int(d) for d in shape] if all(d.isdigit() for d in shape) else None


def _int_operands(node: fx.Node) -> bool:
    """Whether every argument is an int or a node whose traced value is an integer size."""
    def is_int(a):
        if isinstance(a, fx.Node):
            return isinstance(a.meta.get("val"), (int, torch.SymInt)) and not isinstance(a.meta.get("val"), bool)
        return type(a) is int
    return not node.kwargs and all(is_int(a) for a in node.args)
