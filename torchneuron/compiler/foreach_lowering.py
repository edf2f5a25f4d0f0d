"""Lowering chains of foreach ops over device lists (a compiled optimizer step) into foreach
kernels: pointwise IR nodes over whole lists, which the native executor runs over every index
of the lists in one device job. Which foreach ops lower so (foreach_kernel_nodes), the lists and
per-index values they read (ListPack steps), and the results a kernel may write straight into
the inputs the graph copies them back into (write_back_targets)."""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
from torch import fx

from .. import _C
from .fx_nodes import DTYPES, _flat_nodes, _makes_alias, _tensor_meta
from .native_program import ListPack

aten = torch.ops.aten


# Foreach ops lowered as pointwise nodes over a whole list (a foreach kernel), and the compiler op
# each applies at every index.
_FOREACH_POINTWISE = {
    aten._foreach_add.Scalar: "add", aten._foreach_add.List: "add", aten._foreach_add.Tensor: "add",
    aten._foreach_sub.Scalar: "sub", aten._foreach_sub.List: "sub",
    aten._foreach_mul.Scalar: "mul", aten._foreach_mul.List: "mul", aten._foreach_mul.Tensor: "mul",
    aten._foreach_div.Scalar: "div", aten._foreach_div.List: "div", aten._foreach_div.Tensor: "div",
    aten._foreach_pow.Scalar: "pow", aten._foreach_pow.List: "pow",
    aten._foreach_maximum.List: "maximum", aten._foreach_minimum.List: "minimum",
    aten._foreach_clamp_min.Scalar: "clamp_min", aten._foreach_clamp_max.Scalar: "clamp_max",
    aten._foreach_addcmul.Scalar: "addcmul", aten._foreach_addcdiv.Scalar: "addcdiv",
    aten._foreach_lerp.Scalar: "lerp",
    **{getattr(aten, f"_foreach_{name}").default: name
       for name in ("sqrt", "rsqrt", "neg", "abs", "reciprocal", "exp", "expm1", "log", "log1p", "log2", "log10",
                    "sin", "cos", "tan", "tanh", "sigmoid", "erf", "erfc", "floor", "ceil", "trunc", "round", "sign")},
}
_FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


@dataclass
class _ForeachSpec:
    """How a foreach op runs in a foreach kernel: its compiler op and operands, each
    ("list", foreach node whose whole result it is), ("pack", elements, per-index shape or not),
    ("tensor", device 0-dim node) or ("literal", number)."""
    op: str
    operands: list
    alpha: float
    dtype: torch.dtype
    shapes: tuple  # the result's size at each index


def _foreach_operand(arg, results, specs):
    """A foreach kernel operand for argument `arg` of a foreach op whose result is `results`
    (fake tensors), or None."""
    device = results[0].device
    if isinstance(arg, (list, tuple)):
        if len(arg) != len(results) or not all(isinstance(a, fx.Node) for a in arg):
            return None
        source = arg[0].args[0] if arg[0].target is operator.getitem else None
        if source in specs and [(a.target, a.args) for a in arg] == [(operator.getitem, (source, i))
                                                                    for i in range(len(arg))]:
            return ("list", source) if specs[source].shapes == tuple(r.shape for r in results) else None
        vals = [_tensor_meta(a) for a in arg]
        if any(v is None or v.dtype not in _FLOATING or v.layout != torch.strided for v in vals):
            return None
        if len({v.dtype for v in vals}) != 1:
            return None
        if all(v.device == device and v.shape == r.shape for v, r in zip(vals, results)):
            return ("pack", tuple(arg), True)
        # One value per index: 0-dim tensors on the device, or on the CPU (copied by value).
        if (all(v.dim() == 0 for v in vals) and len({v.device for v in vals}) == 1
                and vals[0].device in (device, torch.device("cpu"))):
            return ("pack", tuple(arg), False)
        return None
    if isinstance(arg, fx.Node):  # one tensor for every index
        val = _tensor_meta(arg)
        if val is None or val.dim() != 0 or val.dtype not in _FLOATING:
            return None
        if val.device == device:
            return ("tensor", arg)
        return ("pack", (arg,), False) if val.device.type == "cpu" else None
    if type(arg) in (int, float):
        return ("literal", float(arg))
    return None  # bools (eager mode's errors), symbolic scalars


def _foreach_spec(node: fx.Node, specs: dict) -> _ForeachSpec | None:
    op = _FOREACH_POINTWISE.get(node.target)
    results = node.meta.get("val")
    if op is None or not isinstance(results, (list, tuple)) or not results:
        return None
    if not all(isinstance(r, torch.Tensor) for r in results):
        return None
    dtype, device = results[0].dtype, results[0].device
    if (dtype not in _FLOATING or device.type != "neuron"
            or any(r.dtype != dtype or r.device != device or r.dim() == 0 or r.layout != torch.strided for r in results)
            or not all(type(d) is int for r in results for d in r.shape)):
        return None
    kwargs = dict(node.kwargs)
    alpha = kwargs.pop("alpha", 1)
    args = list(node.args)
    if op in ("addcmul", "addcdiv"):
        args.append(kwargs.pop("value", 1) if len(args) < 4 else args.pop())
    if kwargs or type(alpha) not in (int, float):
        return None
    operands = [_foreach_operand(a, results, specs) for a in args]
    if None in operands or operands[0][0] == "literal" or operands[0][0] == "tensor":
        return None
    arity = 2 if op == "lerp" else len(operands)
    if op == "lerp" and (operands[2][0] != "literal" or operands[1][0] == "literal"):
        return None
    if op != "lerp" and not _C._compiler.supports(op, arity):
        return None
    return _ForeachSpec(op, operands, float(alpha), dtype, tuple(r.shape for r in results))


def foreach_kernel_nodes(gm: fx.GraphModule) -> dict:
    """The foreach ops that lower into foreach kernels (pointwise ops over floating lists on one
    device, whose operands are such lists at the same sizes, one value per index, or scalars),
    with how each does."""
    specs = {}
    for node in gm.graph.nodes:
        if node.op == "call_function":
            spec = _foreach_spec(node, specs)
            if spec is not None:
                specs[node] = spec
    return specs


def _absorbed_items(specs: dict) -> set:
    """Tuple indexing of foreach kernel results that only foreach kernels read, and only as a
    whole list: nothing needs those elements one by one."""
    absorbed = set()
    for node in specs:
        for item in node.users:
            if item.target is not operator.getitem:
                continue
            ok = bool(item.users)
            for user in item.users:
                spec = specs.get(user)
                whole = spec is not None and ("list", node) in [o[:2] for o in spec.operands]
                loose = spec is None or any(item in o[1] for o in spec.operands if o[0] == "pack")
                ok = ok and whole and not loose
            if ok:
                absorbed.add(item)
    return absorbed


def _foreach_dim(spec: _ForeachSpec, lowered) -> str:
    """The IR dim of lists with the result's sizes: one per distinct list of sizes."""
    return lowered.foreach_sizes.setdefault(spec.shapes, f"foreach{len(lowered.foreach_sizes)}")


def _copy_destination(copy: fx.Node, item: fx.Node):
    """The tensor `copy` (a copy_ or _foreach_copy_) writes `item` into, or None."""
    if copy.target is aten.copy_.default and len(copy.args) == 2 and copy.args[1] is item and not copy.kwargs:
        return copy.args[0]
    if copy.target is aten._foreach_copy_.default and len(copy.args) == 2 and not copy.kwargs:
        dsts, srcs = copy.args
        at = [j for j, src in enumerate(srcs) if src is item]
        return dsts[at[0]] if len(at) == 1 else None
    return None


def write_back_targets(specs: dict) -> dict:
    """Foreach kernel results whose elements the graph only copies back into inputs (AOTAutograd's
    write-back of a compiled optimizer step's updated state): foreach node -> those inputs, by
    index. The kernel may write them there itself when nothing else reads an input but foreach
    kernels and its copy (the program checks that they all run before it, and the run time that
    their memory allows it)."""
    targets = {}
    for node, spec in specs.items():
        items = {u.args[1]: u for u in node.users if u.target is operator.getitem}
        if len(items) != len(node.users) or sorted(items) != list(range(len(spec.shapes))):
            continue
        dsts = []
        for i, shape in enumerate(spec.shapes):
            copies = [u for u in items[i].users if u not in specs]  # besides later foreach kernel ops
            dst = _copy_destination(copies[0], items[i]) if len(copies) == 1 else None
            val = _tensor_meta(dst) if isinstance(dst, fx.Node) and dst.op == "placeholder" else None
            if (val is None or val.dtype != spec.dtype or tuple(val.shape) != shape
                    or val.device != node.meta["val"][i].device
                    or any(u is not copies[0] and u not in specs for u in dst.users)):
                break
            dsts.append(dst)
        else:
            if len(set(dsts)) == len(dsts):
                targets[node] = tuple(dsts)
    return targets


def _lower_foreach(node: fx.Node, spec: _ForeachSpec, lowered, targets=None) -> None:
    """Lowers a foreach op into pointwise nodes over its lists; `targets`: the inputs its result
    is copied back into (write_back_targets)."""
    shape = [_foreach_dim(spec, lowered)]
    device = node.meta["val"][0].device
    dtype = DTYPES[spec.dtype]
    operands = []
    for operand in spec.operands:
        kind = operand[0]
        if kind == "literal":
            operands.append(operand[1])
        elif kind in ("list", "tensor"):
            operands.append(lowered.fx_value[operand[1]])
        else:
            operands.append(_pack(operand[1], shape if operand[2] else [], lowered))
    add = lambda op, ops: lowered.graph.add_pointwise(op, ops, dtype, shape, dtype)
    if spec.op == "lerp":  # as eager mode computes it: from the nearer end
        start, end, weight = operands
        diff = add("sub", [end, start])
        if abs(weight) < 0.5:
            value = add("add", [start, add("mul", [diff, weight])])
        else:
            opmath = torch.float64 if spec.dtype == torch.float64 else torch.float32
            rest = float(torch.tensor(1.0, dtype=opmath) - torch.tensor(weight, dtype=opmath))
            value = add("sub", [end, add("mul", [diff, rest])])
    else:
        if spec.alpha != 1:
            operands[1] = add("mul", [operands[1], spec.alpha])
        value = add(spec.op, operands)
    lowered.fx_value[node] = value
    lowered.value_source[value] = (node, None)
    lowered.value_meta[value] = (spec.dtype, device)
    lowered.foreach_nodes.add(node)
    if targets in lowered.packs:  # the kernel reads them already: their list exists before it
        lowered.write_targets[value] = lowered.packs[targets]


def _writes_what_they_read(node: fx.Node, specs) -> bool:
    """Whether `node` may write a tensor that one of the foreach ops in `specs` reads: an
    argument it mutates, or a view of one, is one of their operands (an in-place foreach op on
    other temporaries, as a capturable optimizer step's bias corrections, does not)."""
    if not isinstance(node.target, torch._ops.OpOverload) or not node.target._schema.is_mutable:
        return False
    written = set()
    for argument, value in zip(node.target._schema.arguments, node.args):
        if argument.alias_info is not None and argument.alias_info.is_write:
            written.update(_flat_nodes(value))
    for value in node.kwargs.values():
        written.update(_flat_nodes(value))  # out= and other keyword arguments: assume written
    pending = list(written)
    while pending:  # and every view of a written tensor
        for user in pending.pop().users:
            if user not in written and (user.target is operator.getitem or _makes_alias(user)):
                written.add(user)
                pending.append(user)
    for spec in specs:
        for operand in spec.operands:
            if operand[0] == "tensor" and operand[1] in written:
                return True
            if operand[0] == "pack" and any(e in written for e in operand[1]):
                return True
    return False


def _host_vector(elements: tuple):
    """The 1-D CPU tensor whose unbind `elements` are, all of them in order (an optimizer's
    stacked step counts and bias corrections), or None. Never for one element: that is the value
    for every index, where a vector would give each index its own."""
    first = elements[0]
    if len(elements) < 2:
        return None
    unbind = first.args[0] if first.target is operator.getitem else None
    if (unbind is None or unbind.target is not aten.unbind.int or unbind.args[1:] not in ((), (0,))
            or unbind.kwargs or [(e.target, e.args) for e in elements] != [(operator.getitem, (unbind, i))
                                                                            for i in range(len(elements))]):
        return None
    val = _tensor_meta(unbind.args[0])
    if (val is None or val.device.type != "cpu" or val.dim() != 1 or val.shape[0] != len(elements)
            or val.dtype not in _FLOATING):
        return None
    return unbind.args[0]


def _absorbed_unbinds(specs: dict) -> set:
    """Unbinds of host vectors, and their elements, that only foreach kernels read, as whole
    vectors: the kernels take the vector itself, and nothing needs the elements one by one."""
    whole = {}
    for spec in specs.values():
        for operand in spec.operands:
            if operand[0] == "pack" and not operand[2] and _host_vector(operand[1]) is not None:
                whole.setdefault(operand[1][0].args[0], set()).update(operand[1])
    absorbed = set()
    for unbind, read in whole.items():
        items = set(unbind.users)
        if items == read and all(u in specs and not any(i in o[1] for o in specs[u].operands
                                                        if o[0] == "pack" and _host_vector(o[1]) is None)
                                 for i in items for u in i.users):
            absorbed |= items | {unbind}
    return absorbed


def _pack(elements: tuple, shape: list, lowered) -> int:
    """The IR value of the list of `elements` (one opaque step gathers them per call): for the
    elements of a host vector, a list holding the vector."""
    key = elements
    if key in lowered.packs:
        return lowered.packs[key]
    val = _tensor_meta(elements[0])
    vector = _host_vector(elements) if not shape else None
    if vector is not None:
        elements = (vector,)
    reads = set()
    for element in elements:
        if element in lowered.fx_value:
            reads.add(lowered.fx_value[element])
        reads.update(lowered.tuple_values.get(element, ()))
    pack = ListPack(elements)
    external = len(lowered.opaque_nodes)
    lowered.opaque_nodes.append(pack)
    (value,) = lowered.graph.add_opaque(external, sorted(reads), [DTYPES[val.dtype]], [shape])
    lowered.value_source[value] = (pack, None)
    lowered.value_meta[value] = (val.dtype, val.device)
    lowered.packs[key] = value
    return value
