"""Lowering an AOTAutograd FX graph (core ATen, functional) into the neuron compiler's IR.

Pointwise ATen ops with a code template become IR pointwise nodes, and sums, means, maxima and
minima over the innermost dims (row kernels) or with the innermost dim kept (column kernels) IR
reductions; every other node becomes an opaque node that the compiled program runs as an eager
call. The mapping from IR values back to FX nodes lets the runtime bind kernel outputs and
resolve eager calls' arguments."""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field

import torch
from torch import fx

from .. import _C
from .program import ListPack, _has_node

aten = torch.ops.aten
prims = torch.ops.prims

# ATen overload -> compiler op, for ops whose tensor and scalar args map one to one.
POINTWISE = {
    aten.add.Tensor: "add", aten.add.Scalar: "add", aten.sub.Tensor: "sub", aten.sub.Scalar: "sub",
    aten.mul.Tensor: "mul", aten.mul.Scalar: "mul", aten.div.Tensor: "div", aten.div.Scalar: "div",
    aten.neg.default: "neg", aten.abs.default: "abs", aten.reciprocal.default: "reciprocal",
    aten.sqrt.default: "sqrt", aten.rsqrt.default: "rsqrt", aten.exp.default: "exp", aten.exp2.default: "exp2",
    aten.expm1.default: "expm1", aten.log.default: "log", aten.log1p.default: "log1p", aten.log2.default: "log2",
    aten.log10.default: "log10", aten.sin.default: "sin", aten.cos.default: "cos", aten.tan.default: "tan",
    aten.tanh.default: "tanh", aten.sinh.default: "sinh", aten.cosh.default: "cosh", aten.asin.default: "asin",
    aten.acos.default: "acos", aten.atan.default: "atan", aten.erf.default: "erf", aten.erfc.default: "erfc",
    aten.floor.default: "floor", aten.ceil.default: "ceil", aten.trunc.default: "trunc", aten.round.default: "round",
    aten.sign.default: "sign", aten.sigmoid.default: "sigmoid", aten.relu.default: "relu", aten.silu.default: "silu",
    aten.pow.Tensor_Scalar: "pow", aten.pow.Tensor_Tensor: "pow", aten.maximum.default: "maximum",
    aten.minimum.default: "minimum", aten.clamp_min.default: "clamp_min", aten.clamp_max.default: "clamp_max",
    aten.eq.Tensor: "eq", aten.eq.Scalar: "eq", aten.ne.Tensor: "ne", aten.ne.Scalar: "ne",
    aten.lt.Tensor: "lt", aten.lt.Scalar: "lt", aten.le.Tensor: "le", aten.le.Scalar: "le",
    aten.gt.Tensor: "gt", aten.gt.Scalar: "gt", aten.ge.Tensor: "ge", aten.ge.Scalar: "ge",
    aten.logical_not.default: "logical_not", aten.logical_and.default: "logical_and",
    aten.logical_or.default: "logical_or", aten.where.self: "where",
    aten.threshold_backward.default: "threshold_backward", aten.sigmoid_backward.default: "sigmoid_backward",
    aten.tanh_backward.default: "tanh_backward", aten.silu_backward.default: "silu_backward",
    prims.convert_element_type.default: "identity", aten.clone.default: "identity",
    aten.addcmul.default: "addcmul", aten.addcdiv.default: "addcdiv",
}
COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or"}
DTYPES = {
    torch.bool: "bool", torch.uint8: "uint8", torch.int8: "int8", torch.int32: "int32", torch.int64: "int64",
    torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32", torch.float64: "float64",
}


@dataclass
class Lowered:
    """An FX graph lowered to IR, with the maps the runtime needs."""
    graph: object                                      # _C._compiler.Graph
    value_source: dict = field(default_factory=dict)   # IR value -> (fx node, index in its tuple or None)
    fx_value: dict = field(default_factory=dict)       # fx node -> IR value (single-tensor nodes)
    value_meta: dict = field(default_factory=dict)     # IR value -> (torch dtype, device)
    layout: dict = field(default_factory=dict)         # IR value -> non-row-major layout (see _layout)
    opaque_nodes: list = field(default_factory=list)   # external id -> fx node
    tuple_values: dict = field(default_factory=dict)   # fx node returning a tuple -> its IR values
    foreach_nodes: set = field(default_factory=set)    # foreach ops lowered into foreach kernels
    foreach_sizes: dict = field(default_factory=dict)  # per-index sizes of a foreach list -> its IR dim
    packs: dict = field(default_factory=dict)          # elements of a foreach kernel operand -> IR value
    write_targets: dict = field(default_factory=dict)  # foreach result -> the list it may be written into


def _shape(val) -> list[str]:
    return [str(d) for d in val.shape]


def _tensor_meta(node) -> torch.Tensor | None:
    val = node.meta.get("val") if isinstance(node, fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def _layout(val: torch.Tensor):
    """How eager mode lays out val when it is not row-major (eager ops keep their inputs'
    layout, and later views may rely on it): (sizes, strides) when they are concrete, else None
    (symbolic sizes: reading them would specialize the graph, so row-major is assumed)."""
    sizes, strides = list(val.shape), list(val.stride())
    if not all(type(x) is int for x in sizes + strides):
        return None
    # Exactly row-major, size-1 dims included: their strides steer later ops' layouts.
    row_major, step = [], 1
    for size in reversed(sizes):
        row_major.append(step)
        step *= max(size, 1)
    return None if strides == row_major[::-1] else (tuple(sizes), tuple(strides))


def _on_device(val: torch.Tensor) -> bool:
    return val.device.type == "neuron" and val.dtype in DTYPES and val.layout == torch.strided


def _through_views(arg, static_shape: bool):
    """The node a pointwise operand reads its values from: aliases are the same values, and an
    expand only broadcasts, which the kernel does itself. Reading the source keeps the eager
    call from splitting a kernel, and lets the kernel read a broadcast operand as one (an
    expanded input looks dense to the code generator and would take the strided loop).
    Expands are kept for symbolic output sizes: there the kernel's size comes from its inputs'
    broadcast."""
    while isinstance(arg, fx.Node) and arg.op == "call_function":
        if arg.target is aten.alias.default:
            arg = arg.args[0]
        elif static_shape and arg.target is aten.expand.default and isinstance(arg.args[0], fx.Node):
            source = _tensor_meta(arg.args[0])
            if source is None or source.dim() > len(arg.args[1]):
                break
            arg = arg.args[0]
        else:
            break
    return arg


def _scalar_constant(node: fx.Node) -> float | None:
    """The value of a 0-dim constant tensor (aten.scalar_tensor of a literal, which
    decompositions such as threshold_backward's emit) when its dtype holds it exactly: a
    literal operand instead, so that the eager call between producer and consumer does not
    split their kernel."""
    if node.op != "call_function" or node.target is not aten.scalar_tensor.default:
        return None
    value, val = node.args[0], _tensor_meta(node)
    if not isinstance(value, (int, float)) or val is None or not _on_device(val):
        return None
    if float(torch.tensor(value, dtype=val.dtype)) != float(value):
        return None
    return float(value)


def _pointwise_operands(node: fx.Node, lowered: Lowered):
    """The node's operands as IR value ids (int) and literals (float), or None if unsupported."""
    target = node.target
    args = list(node.args)
    kwargs = dict(node.kwargs)
    if target is aten.add.Tensor or target is aten.sub.Tensor:
        if kwargs.pop("alpha", 1) != 1:
            return None
    if target is prims.convert_element_type.default:
        args = args[:1]
    elif target is aten.clone.default:
        # The output's layout is the traced one whatever the memory format asked for; a clone
        # only a kernel reads (dropout with p=0 decomposes to one) then never reaches memory.
        kwargs.pop("memory_format", None)
    elif target in (aten.addcmul.default, aten.addcdiv.default):
        out = _tensor_meta(node)
        if out is None or out.dtype == torch.bool or (target is aten.addcdiv.default and not out.is_floating_point()):
            return None  # eager mode's errors and fallbacks
        args.append(kwargs.pop("value", 1))
    elif target in (aten.gelu.default, aten.gelu_backward.default):
        args = args[:2] if target is aten.gelu_backward.default else args[:1]
        kwargs.pop("approximate", None)
    if kwargs:
        return None
    out = _tensor_meta(node)
    static_shape = out is not None and all(type(d) is int for d in out.shape)
    operands = []
    for arg in args:
        arg = _through_views(arg, static_shape)
        if isinstance(arg, fx.Node) and (constant := _scalar_constant(arg)) is not None:
            operands.append(constant)
        elif isinstance(arg, fx.Node):
            val = _tensor_meta(arg)
            if val is None or not _on_device(val) or arg not in lowered.fx_value:
                return None
            operands.append(lowered.fx_value[arg])
        elif isinstance(arg, bool):
            operands.append(float(arg))
        elif isinstance(arg, (int, float)):
            operands.append(float(arg))
        else:
            return None  # symbolic scalars and other arguments stay eager
    return operands


def _compute_dtype(node: fx.Node, op: str, out: torch.Tensor) -> torch.dtype:
    if op not in COMPARISONS:
        return out.dtype
    values = []
    for arg in node.args:
        val = _tensor_meta(arg)
        values.append(val if val is not None else torch.tensor(arg))
    return torch.result_type(*values) if len(values) > 1 else values[0].dtype


def _try_pointwise(node: fx.Node, lowered: Lowered) -> bool:
    out = _tensor_meta(node)
    if out is None or not _on_device(out):
        return False
    op = POINTWISE.get(node.target)
    if node.target is aten.gelu.default:
        op = "gelu_tanh" if node.kwargs.get("approximate", "none") == "tanh" else "gelu"
    elif node.target is aten.gelu_backward.default and node.kwargs.get("approximate", "none") == "none":
        op = "gelu_backward"
    elif node.target is aten.threshold_backward.default:
        op = "threshold_backward"
    if op is None:
        return False
    operands = _pointwise_operands(node, lowered)
    if operands is None or not _C._compiler.supports(op, len(operands)):
        return False
    if not any(isinstance(o, int) for o in operands):
        return False
    compute = _compute_dtype(node, op, out)
    if compute not in DTYPES:
        return False
    value = lowered.graph.add_pointwise(op, operands, DTYPES[out.dtype], _shape(out), DTYPES[compute])
    layout = _layout(out)
    if layout is not None:
        lowered.layout[value] = layout
    lowered.fx_value[node] = value
    lowered.value_source[value] = (node, None)
    lowered.value_meta[value] = (out.dtype, out.device)
    return True


REDUCTIONS = {aten.sum.dim_IntList: "sum", aten.sum.default: "sum", aten.mean.dim: "mean",
              aten.mean.default: "mean", aten.amax.default: "amax", aten.amin.default: "amin"}

# A reduction kernel with a single row runs on one thread; above this many elements the eager
# kernel, which splits the row, is faster than saving the launches around it.
_SINGLE_ROW_LIMIT = 1 << 16
# Kept elements per thread's block in a column kernel (the launcher's grain).
_COLUMN_BLOCK = 64


def _try_reduction(node: fx.Node, lowered: Lowered) -> bool:
    """A sum, mean, amax or amin over the innermost dims of its operand (a row kernel: norms,
    softmax, losses written by hand) or over dims that leave the innermost one kept (a column
    kernel: bias and norm-weight gradients over the outermost dims, pooling over a sequence's
    middle dim) becomes an IR reduction, which fuses with the pointwise ops around it. Others
    (the innermost dim and some outer one, as batch norm's statistics) stay eager, as do
    reductions too large for the few threads a kernel would get (one huge row, one or two
    blocks of columns)."""
    op = REDUCTIONS.get(node.target)
    out = _tensor_meta(node)
    if op is None or out is None or not _on_device(out):
        return False
    args, kwargs = list(node.args), dict(node.kwargs)
    kwargs.pop("dtype", None)  # the output's dtype, read from its meta
    if kwargs or not isinstance(args[0], fx.Node):
        return False
    source = _through_views(args[0], static_shape=False)
    x = _tensor_meta(source)
    if x is None or not _on_device(x) or source not in lowered.fx_value or x.dim() == 0:
        return False
    if not (x.dtype.is_floating_point or (op == "sum" and out.dtype == torch.int64)):
        return False
    if not (out.dtype.is_floating_point or out.dtype == torch.int64):
        return False
    dims = args[1] if len(args) > 1 else None
    keepdim = bool(args[2]) if len(args) > 2 else False
    if dims is None or len(dims) == 0:
        dims = list(range(x.dim()))
    if not all(type(d) is int for d in dims):
        return False
    dims = sorted(d % x.dim() for d in dims)
    rows = dims == list(range(x.dim() - len(dims), x.dim()))  # the innermost dims: a row kernel
    if not rows and dims[-1] == x.dim() - 1:
        return False  # rows strided through memory: the eager kernel is faster
    if any(type(x.shape[d]) is int and x.shape[d] == 1 for d in dims):
        return False  # folding a size-1 dim is a copy
    contiguous = dims if rows else [d for d in range(x.dim()) if d not in dims]
    layout = _layout(x)
    if layout is not None:  # the row (or the kept dims of a column kernel) innermost in memory too
        if not rows and dims != list(range(len(dims))):
            return False
        sizes, strides = layout
        step = 1
        for d in reversed(contiguous):
            if strides[d] != step:
                return False
            step *= sizes[d]
    kept = [x.shape[d] for d in range(x.dim()) if d not in dims]
    folded = [x.shape[d] for d in dims]
    if rows and all(type(size) is int for size in kept) and math.prod(kept) < 2:  # one row
        if not all(type(size) is int for size in folded) or math.prod(folded) > _SINGLE_ROW_LIMIT:
            return False
    if not rows and all(type(size) is int for size in kept + folded) and math.prod(kept) < _COLUMN_BLOCK * 2:
        if math.prod(kept) * math.prod(folded) > _SINGLE_ROW_LIMIT * 4:
            return False  # one or two blocks of columns: too few threads for this much work
    compute = torch.float64 if out.dtype == torch.float64 else torch.int64 if out.dtype == torch.int64 else torch.float32
    value = lowered.graph.add_reduction(op, lowered.fx_value[source], dims, keepdim, DTYPES[out.dtype],
                                        DTYPES[compute])
    out_layout = _layout(out)
    if out_layout is not None:
        lowered.layout[value] = out_layout
    lowered.fx_value[node] = value
    lowered.value_source[value] = (node, None)
    lowered.value_meta[value] = (out.dtype, out.device)
    return True


def _add_opaque(node: fx.Node, lowered: Lowered) -> None:
    reads = []
    for arg in node.all_input_nodes:
        if arg in lowered.fx_value:
            reads.append(lowered.fx_value[arg])
        reads.extend(lowered.tuple_values.get(arg, ()))  # members of a tuple an earlier node returned
    val = node.meta.get("val")
    outputs = []
    if isinstance(val, torch.Tensor):
        outputs = [(None, val)]
    elif isinstance(val, (tuple, list)):
        outputs = [(i, v) for i, v in enumerate(val) if isinstance(v, torch.Tensor)]
    outputs = [(i, v) for i, v in outputs if v.dtype in DTYPES]
    external = len(lowered.opaque_nodes)
    lowered.opaque_nodes.append(node)
    values = lowered.graph.add_opaque(external, sorted(set(reads)), [DTYPES[v.dtype] for _, v in outputs],
                                      [_shape(v) for _, v in outputs])
    for value, (index, v) in zip(values, outputs):
        lowered.value_source[value] = (node, index)
        lowered.value_meta[value] = (v.dtype, v.device)
        if index is None:
            lowered.fx_value[node] = value
        else:
            lowered.tuple_values.setdefault(node, []).append(value)


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


def update_batch_norm_stats_in_place(gm: fx.GraphModule) -> int:
    """Functionalization turns a training batch norm into _native_batch_norm_legit_functional,
    which returns new running statistics, and copy_ nodes that write them back into the
    buffers: two clones and two copies per batch norm. When the buffers are graph inputs read by
    nothing else, native_batch_norm updates them in place instead, as eager mode does. Returns
    the number of batch norms rewritten."""
    graph, rewritten = gm.graph, 0
    for node in list(graph.nodes):
        if node.target is not aten._native_batch_norm_legit_functional.default:
            continue
        if len(node.args) != 8 or node.kwargs:
            continue
        x, weight, bias, running_mean, running_var, training, momentum, eps = node.args
        if not training or not all(isinstance(b, fx.Node) and b.op == "placeholder" for b in (running_mean, running_var)):
            continue
        items = {}
        for user in node.users:
            if user.target is not operator.getitem:
                break
            items[user.args[1]] = user
        else:
            stale = []  # each buffer's write-back copy and the new value it copied
            for index, buffer in ((3, running_mean), (4, running_var)):
                item = items.get(index)
                users = list(item.users) if item is not None else []
                copies = [u for u in users if u.target is aten.copy_.default]
                # The new value may also be saved for the backward (a graph output), which
                # then reads the updated buffer itself.
                if (len(copies) != 1 or copies[0].args != (buffer, item) or copies[0].users
                        or any(u.op != "output" for u in users if u is not copies[0])
                        or any(u.op != "output" for u in buffer.users if u not in (node, copies[0]))):
                    break
                stale.append((copies[0], item, buffer))
            else:
                with graph.inserting_before(node):
                    in_place = graph.call_function(aten.native_batch_norm.default,
                                                   (x, weight, bias, running_mean, running_var, True, momentum, eps))
                in_place.meta["val"] = tuple(node.meta["val"][:3])
                for copy, item, buffer in stale:
                    graph.erase_node(copy)
                    item.replace_all_uses_with(buffer)
                    graph.erase_node(item)
                node.replace_all_uses_with(in_place)
                graph.erase_node(node)
                rewritten += 1
    if rewritten:
        gm.recompile()
    return rewritten


def split_bias_from_addmm(gm: fx.GraphModule) -> int:
    """addmm(bias, a, b) becomes mm(a, b) + bias, so that the bias add and the pointwise ops
    after it run as the mm's epilogue, on each block of the product's rows while it is in cache.
    When the product is only viewed back to more dims (a linear layer on a 3-D input), the add
    moves after the view, where it fuses with its consumers. Returns the number rewritten."""
    graph, rewritten = gm.graph, 0
    for node in list(graph.nodes):
        if node.target is not aten.addmm.default or len(node.args) != 3 or node.kwargs:
            continue
        bias, a, b = node.args
        out, bias_val = _tensor_meta(node), _tensor_meta(bias)
        if out is None or bias_val is None or not _on_device(out) or not out.dtype.is_floating_point:
            continue
        with graph.inserting_before(node):
            product = graph.call_function(aten.mm.default, (a, b))
        product.meta["val"] = node.meta["val"]
        users = list(node.users)
        view = users[0] if len(users) == 1 else None
        view_val = _tensor_meta(view) if view is not None else None
        if (view_val is not None and view.target in (aten.view.default, aten._unsafe_view.default)
                and bias_val.dim() == 1 and type(out.shape[-1]) is int and type(view_val.shape[-1]) is int
                and view_val.shape[-1] == out.shape[-1]):
            view.replace_input_with(node, product)
            with graph.inserting_after(view):
                added = graph.call_function(aten.add.Tensor, (view, bias))
            added.meta["val"] = view.meta["val"]
            view.replace_all_uses_with(added, delete_user_cb=lambda user: user is not added)
        else:
            with graph.inserting_after(product):
                added = graph.call_function(aten.add.Tensor, (product, bias))
            added.meta["val"] = node.meta["val"]
            node.replace_all_uses_with(added)
        graph.erase_node(node)
        rewritten += 1
    if rewritten:
        gm.recompile()
    return rewritten


def restore_foreach_lerp(gm: fx.GraphModule) -> int:
    """Dynamo traces an optimizer's _foreach_lerp_(self, ends, w) with a weight under 0.5 as
    diff = _foreach_sub(ends, self), a full_like(d, w) per tensor and _foreach_addcmul(self,
    those, diff): a list of filled tensors and a command more than _foreach_lerp(self, ends, w),
    whose formula there is the same, self + w * (ends - self). Such patterns over float32 and
    float64 device tensors become that call again. Returns the number rewritten."""
    graph, rewritten = gm.graph, 0
    for node in list(graph.nodes):
        if node.target is not aten._foreach_addcmul.Scalar or len(node.args) != 3 or node.kwargs.keys() - {"value"}:
            continue
        self_list, weights, diffs = node.args
        if node.kwargs.get("value", 1) != 1 or not diffs or len(weights) != len(diffs):
            continue
        diff = diffs[0].args[0] if isinstance(diffs[0], fx.Node) and diffs[0].target is operator.getitem else None
        if (diff is None or diff.target is not aten._foreach_sub.List or diff.kwargs or len(diff.args) != 2
                or list(diff.args[1]) != list(self_list)):
            continue
        items = sorted(diff.users, key=lambda n: n.args[1] if n.target is operator.getitem else -1)
        if items != list(diffs) or [n.args[1] for n in items] != list(range(len(items))):
            continue
        fills = [w if isinstance(w, fx.Node) and w.target is aten.full_like.default and len(w.args) == 2
                 and w.args[0] is d and set(w.kwargs) <= {"pin_memory"} and len(w.users) == 1 else None
                 for w, d in zip(weights, diffs)]
        if None in fills or len({f.args[1] for f in fills}) != 1:
            continue
        weight = fills[0].args[1]
        vals = [_tensor_meta(n) for n in list(self_list) + list(diff.args[0])]
        if (not isinstance(weight, float) or not abs(weight) < 0.5
                or any(v is None or not _on_device(v) or v.dtype not in (torch.float32, torch.float64) for v in vals)
                or any(set(d.users) - {node, f} for d, f in zip(diffs, fills))):
            continue
        with graph.inserting_before(node):
            lerp = graph.call_function(aten._foreach_lerp.Scalar, (self_list, diff.args[0], weight))
        lerp.meta["val"] = node.meta.get("val")
        node.replace_all_uses_with(lerp)
        for dead in [node, *fills, *diffs, diff]:
            graph.erase_node(dead)
        rewritten += 1
    if rewritten:
        gm.recompile()
    return rewritten


# Out-of-place foreach ops and their in-place forms (native single commands).
_IN_PLACE_FOREACH = {
    aten._foreach_add.Scalar: aten._foreach_add_.Scalar, aten._foreach_add.List: aten._foreach_add_.List,
    aten._foreach_sub.Scalar: aten._foreach_sub_.Scalar, aten._foreach_sub.List: aten._foreach_sub_.List,
    aten._foreach_mul.Scalar: aten._foreach_mul_.Scalar, aten._foreach_mul.List: aten._foreach_mul_.List,
    aten._foreach_div.Scalar: aten._foreach_div_.Scalar, aten._foreach_div.List: aten._foreach_div_.List,
    aten._foreach_sqrt.default: aten._foreach_sqrt_.default, aten._foreach_neg.default: aten._foreach_neg_.default,
    aten._foreach_reciprocal.default: aten._foreach_reciprocal_.default,
    aten._foreach_lerp.Scalar: aten._foreach_lerp_.Scalar, aten._foreach_addcmul.Scalar: aten._foreach_addcmul_.Scalar,
    aten._foreach_addcdiv.Scalar: aten._foreach_addcdiv_.Scalar,
}


def _makes_alias(node: fx.Node) -> bool:
    """Whether the node's result may share memory with an argument (a view, an in-place op)."""
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and any(r.alias_info is not None for r in target._schema.returns)


def foreach_in_place_on_dying_lists(gm: fx.GraphModule, keep=()) -> int:
    """An out-of-place foreach op whose first list is the result of an earlier foreach op that
    nothing reads afterwards, nor views (a compiled optimizer step's chain of temporaries: the
    square root of the second moment, divided, shifted by eps, divided again) runs in place on it
    instead, as eager mode's optimizer does: no new tensor per element and op. Nodes in `keep`
    (those that lower into foreach kernels) stay. Returns the number of foreach ops rewritten."""
    graph, rewritten = gm.graph, 0
    order = {node: i for i, node in enumerate(graph.nodes)}
    for node in list(graph.nodes):
        in_place = _IN_PLACE_FOREACH.get(node.target)
        if (in_place is None or node in keep or not node.args or not isinstance(node.args[0], (list, tuple))
                or not node.args[0]):
            continue
        items, results = list(node.args[0]), node.meta.get("val")
        if not isinstance(results, (list, tuple)) or len(results) != len(items):
            continue
        if any(u.target is not operator.getitem for u in node.users):
            continue

        def dying_temporary(item, result):
            if not (isinstance(item, fx.Node) and item.target is operator.getitem):
                return False
            source, val = item.args[0], _tensor_meta(item)
            return (source.op == "call_function" and source.target in _IN_PLACE_FOREACH and val is not None
                    and _on_device(val) and isinstance(result, torch.Tensor) and val.dtype == result.dtype
                    and val.shape == result.shape and all(order[u] <= order[node] for u in item.users)
                    and not any(u is not node and _makes_alias(u) for u in item.users))

        if not all(dying_temporary(item, result) for item, result in zip(items, results)):
            continue
        if len({item.args for item in items}) != len(items):  # one tensor twice would be updated twice
            continue
        # Another operand list may hold an item only at its own index (elementwise, in place).
        if any(isinstance(other, (list, tuple)) and any(o in items and o is not items[j] for j, o in enumerate(other))
               for other in node.args[1:]):
            continue
        with graph.inserting_before(node):
            updated = graph.call_function(in_place, tuple(node.args), dict(node.kwargs))
        order[updated] = order[node]
        for user in list(node.users):
            user.replace_all_uses_with(items[user.args[1]])
            graph.erase_node(user)
        graph.erase_node(node)
        rewritten += 1
    if rewritten:
        gm.recompile()
    return rewritten


def group_write_back_copies(gm: fx.GraphModule) -> int:
    """The copy_ nodes between two device tensors in a run of consecutive copy_ nodes whose
    results nothing reads (AOTAutograd's write-backs of mutated inputs: a compiled optimizer
    step ends with three per parameter) become one _foreach_copy_ after the run, which copies
    them in one queue command (or in turn, where their memory meets). Copies to or from the CPU
    (an optimizer's step counts) stay as they are, before it: they touch other memory. Returns
    the number of copy_ nodes grouped."""
    graph, grouped = gm.graph, 0
    runs, run = [], []
    for node in list(graph.nodes) + [None]:
        if (node is not None and node.op == "call_function" and node.target is aten.copy_.default
                and len(node.args) == 2 and not node.kwargs and not node.users
                and all(isinstance(a, fx.Node) for a in node.args)):
            run.append(node)
            continue
        runs.append(run)
        run = []
    for run in runs:
        on_device = [n for n in run if all((v := _tensor_meta(a)) is not None and _on_device(v) for a in n.args)]
        # Moving them past the other copies must not change what those read or write.
        touched_by_others = {a for n in run if n not in on_device for a in n.args}
        if len(on_device) < 2 or any(a in touched_by_others for n in on_device for a in n.args):
            continue
        with graph.inserting_after(run[-1]):
            graph.call_function(aten._foreach_copy_.default,
                                ([n.args[0] for n in on_device], [n.args[1] for n in on_device]))
        for node in on_device:
            graph.erase_node(node)
        grouped += len(on_device)
    if grouped:
        gm.recompile()
    return grouped


# Foreach ops over lists of CPU scalar tensors, and the op each runs as on the stacked list.
_ON_STACK = {
    aten._foreach_add.Scalar: aten.add.Scalar, aten._foreach_sub.Scalar: aten.sub.Scalar,
    aten._foreach_mul.Scalar: aten.mul.Scalar, aten._foreach_div.Scalar: aten.div.Scalar,
    aten._foreach_add.List: aten.add.Tensor, aten._foreach_sub.List: aten.sub.Tensor,
    aten._foreach_mul.List: aten.mul.Tensor, aten._foreach_div.List: aten.div.Tensor,
    aten._foreach_neg.default: aten.neg.default, aten._foreach_reciprocal.default: aten.reciprocal.default,
    aten._foreach_sqrt.default: aten.sqrt.default, aten._foreach_pow.ScalarAndTensor: aten.pow.Scalar,
}


def _cpu_scalar(node) -> torch.dtype | None:
    val = _tensor_meta(node)
    if val is None or val.device.type != "cpu" or val.dim() != 0 or not val.dtype.is_floating_point:
        return None
    return val.dtype


def stack_cpu_scalar_foreach_ops(gm: fx.GraphModule) -> int:
    """A foreach op over lists of 0-dim CPU tensors (a compiled optimizer step's step counts and
    bias corrections, unless it is capturable) runs PyTorch's per-tensor CPU ops: 28 parameters
    and eight such ops made 224 CPU calls per step. Each becomes the same op once, on the list
    stacked into one tensor; later such ops read that tensor directly, and other readers take its
    elements from one unbind. Returns the number of foreach ops rewritten."""
    graph, rewritten = gm.graph, 0
    stacked = {}  # unbind node -> the stacked tensor it splits
    for node in list(graph.nodes):
        target = _ON_STACK.get(node.target)
        if target is None or node.kwargs.keys() - {"alpha"} or _has_node(node.kwargs):
            continue
        lists = [a for a in node.args if isinstance(a, (list, tuple))]
        others = [a for a in node.args if not isinstance(a, (list, tuple))]
        if not lists or any(_has_node(a) for a in others):
            continue
        count = len(lists[0])
        dtypes = {_cpu_scalar(n) if isinstance(n, fx.Node) else None for items in lists for n in items}
        if count < 2 or any(len(items) != count for items in lists) or len(dtypes) != 1 or None in dtypes:
            continue
        if not node.users or any(u.target is not operator.getitem or not isinstance(u.args[1], int) for u in node.users):
            continue

        def whole(items):
            source = items[0].args[0] if items[0].target is operator.getitem else None
            if source in stacked and all(n.target is operator.getitem and n.args == (source, i)
                                         for i, n in enumerate(items)):
                return stacked[source]
            return _call_with_meta(graph, aten.stack.default, (list(items),))

        with graph.inserting_before(node):
            args = tuple(whole(a) if isinstance(a, (list, tuple)) else a for a in node.args)
            result = graph.call_function(target, args, dict(node.kwargs))
            result.meta["val"] = target(*fx.node.map_arg(args, lambda n: n.meta["val"]), **node.kwargs)
            parts = _call_with_meta(graph, aten.unbind.int, (result,))
        stacked[parts] = result
        for user in list(node.users):
            user.args = (parts, user.args[1])
        graph.erase_node(node)
        rewritten += 1
    for parts in stacked:  # unbinds whose elements only stacked ops read
        items = list(parts.users)
        if all(not item.users for item in items):
            for item in items:
                graph.erase_node(item)
            graph.erase_node(parts)
    if rewritten:
        gm.recompile()
    return rewritten


def _call_with_meta(graph: fx.Graph, target, args) -> fx.Node:
    """A new call node whose meta["val"] is `target` run on its arguments' fake values."""
    node = graph.call_function(target, args)
    # Fake tensors dispatch to their own mode.
    node.meta["val"] = target(*fx.node.map_arg(args, lambda n: n.meta["val"]))
    return node


def _selected_slice(where: fx.Node, out):
    """(dim, index, gradient) when `where` is one decomposed select_backward over `out`'s shape:
    where(arange(n).view(1.., n, ..1) == index, g.unsqueeze(d).expand(shape), zeros)."""
    if where.target is not aten.where.self or len(where.args) != 3 or len(where.users) != 1:
        return None
    eq, expanded, zeros = where.args
    if not all(isinstance(a, fx.Node) for a in (eq, expanded, zeros)):
        return None
    if (zeros.target is not aten.full.default or zeros.args[1] != 0 or list(zeros.args[0]) != list(out.shape)
            or eq.target is not aten.eq.Scalar or expanded.target is not aten.expand.default):
        return None
    positions, index = eq.args
    unsqueezed = expanded.args[0]
    if (not isinstance(positions, fx.Node) or positions.target is not aten.view.default
            or not isinstance(unsqueezed, fx.Node) or unsqueezed.target is not aten.unsqueeze.default
            or list(expanded.args[1]) != list(out.shape)):
        return None
    arange, dim = positions.args[0], unsqueezed.args[1] % out.dim()
    pos_val, grad_val = _tensor_meta(positions), _tensor_meta(unsqueezed.args[0])
    if (not isinstance(arange, fx.Node) or arange.target not in (aten.arange.default, aten.arange.start_step)
            or pos_val is None or grad_val is None or grad_val.dtype != out.dtype
            or list(pos_val.shape) != [out.shape[d] if d == dim else 1 for d in range(out.dim())]
            or (arange.target is aten.arange.start_step and (arange.args[0] != 0 or len(arange.args) > 2))):
        return None
    return dim, index, unsqueezed.args[0]


def _erase_dead_producers(graph: fx.Graph, node: fx.Node) -> None:
    """Erases `node`, which nothing reads any more, and the calls that only it read."""
    pending, erased = [node], set()
    while pending:
        n = pending.pop()
        if n.op == "call_function" and not n.users and n not in erased:
            inputs = n.all_input_nodes
            graph.erase_node(n)
            erased.add(n)
            pending.extend(inputs)


def stack_select_backward_sums(gm: fx.GraphModule) -> int:
    """The gradient of a tensor unpacked along a dim (q, k, v = qkv.unbind(0)) decomposes into
    one zero-filled where() per slice and a sum of them, where eager autograd runs one stack.
    When the sum is permuted and copied to a contiguous layout (to reach the weight-gradient mm),
    the where() chain and the transposing copy become one cat that writes that layout (on an
    attention block's qkv gradient, 162 us down to 65-105 us). Returns the number rewritten."""
    graph, rewritten = gm.graph, 0
    for node in list(graph.nodes):
        if node.target is not aten.add.Tensor:
            continue
        out = _tensor_meta(node)
        if (out is None or not all(type(size) is int for size in out.shape)
                or any(u.target is aten.add.Tensor and len(node.users) == 1 for u in node.users)):
            continue  # dynamic sizes, or not the last add of a chain
        leaves, pending = [], [node]
        while pending and leaves is not None:
            n = pending.pop()
            if n.target is aten.add.Tensor and (n is node or len(n.users) == 1):
                if len(n.args) != 2 or n.kwargs or not all(isinstance(a, fx.Node) for a in n.args):
                    leaves = None
                else:
                    pending.extend(n.args)
            else:
                leaves.append(n)
        slices = [_selected_slice(leaf, out) for leaf in leaves or []]
        if not slices or None in slices or len({d for d, _, _ in slices}) != 1:
            continue
        dim = slices[0][0]
        by_index = {index: grad for _, index, grad in slices}
        if sorted(by_index) != list(range(out.shape[dim])) or len(by_index) != len(slices):
            continue
        grads = [by_index[i] for i in range(out.shape[dim])]
        users = list(node.users)
        permute = users[0] if len(users) == 1 and users[0].target is aten.permute.default else None
        clone = next(iter(permute.users)) if permute is not None and len(permute.users) == 1 else None
        if (clone is None or clone.target is not aten.clone.default
                or clone.kwargs.get("memory_format") != torch.contiguous_format):
            continue  # the where() chain fuses with a pointwise consumer: as cheap as a cat
        order = [d % out.dim() for d in permute.args[1]]
        at = order.index(dim)
        rest = [d - (d > dim) for d in order if d != dim]
        with graph.inserting_before(clone):
            parts = [_call_with_meta(graph, aten.unsqueeze.default,
                                     (_call_with_meta(graph, aten.permute.default, (g, rest)), at)) for g in grads]
            stacked = _call_with_meta(graph, aten.cat.default, (parts, at))
        clone.replace_all_uses_with(stacked)
        _erase_dead_producers(graph, clone)
        rewritten += 1
    if rewritten:
        gm.recompile()
    return rewritten


def lower(gm: fx.GraphModule, round_intermediates: bool = False, foreach_kernels: bool = True) -> Lowered:
    """Lowers every node of `gm`; raises for graphs the compiler cannot take at all.
    `round_intermediates`: round each half-precision value as eager mode stores it (see
    torchneuron.compiler.emulate_precision_casts). `foreach_kernels`: lower the foreach ops that
    can be into kernels over whole lists (only the native executor runs those)."""
    lowered = Lowered(graph=_C._compiler.Graph())
    lowered.graph.round_intermediates = round_intermediates
    foreach = foreach_kernel_nodes(gm) if foreach_kernels else {}
    absorbed, targets = _absorbed_items(foreach) | _absorbed_unbinds(foreach), write_back_targets(foreach)
    # Foreach ops wait until something else reads one of them, or may write what they read: the
    # planner fuses a node only into a kernel placed after its operands, and an optimizer step
    # computes some of them (bias corrections on the CPU) between its foreach ops.
    # Their elements that other nodes read wait with them.
    pending, pending_items = {}, []
    for node in gm.graph.nodes:
        if node in absorbed:
            continue
        if node in foreach:
            pending[node] = None
            continue
        if node.target is operator.getitem and node.args[0] in pending:
            pending_items.append(node)
            continue
        if pending and (node.op == "output" or any(a in pending or a in pending_items for a in node.all_input_nodes)
                        or _writes_what_they_read(node, [foreach[f] for f in pending])):
            for waiting in pending:  # the lists first, so that the ops can share one kernel after them
                for operand in foreach[waiting].operands:
                    if operand[0] == "pack":
                        _pack(operand[1], [_foreach_dim(foreach[waiting], lowered)] if operand[2] else [], lowered)
            for waiting in pending:
                _lower_foreach(waiting, foreach[waiting], lowered, targets.get(waiting))
            for item in pending_items:
                _add_opaque(item, lowered)
            pending.clear()
            pending_items.clear()
        if node.op == "placeholder":
            val = _tensor_meta(node)
            if val is not None and val.dtype in DTYPES:
                value = lowered.graph.add_input(DTYPES[val.dtype], _shape(val))
                lowered.fx_value[node] = value
                lowered.value_source[value] = (node, None)
                lowered.value_meta[value] = (val.dtype, val.device)
        elif node.op == "get_attr":  # a constant tensor of the graph module: read at run time
            _add_opaque(node, lowered)
        elif node.op == "call_function":
            if node.target is operator.getitem or not (_try_pointwise(node, lowered) or _try_reduction(node, lowered)):
                _add_opaque(node, lowered)
        elif node.op == "output":
            for arg in _flat_nodes(node.args[0]):
                if arg in lowered.fx_value:
                    lowered.graph.mark_output(lowered.fx_value[arg])
        else:
            raise ValueError(f"FX node kind {node.op!r} ({node.target}) is not supported by the neuron compiler")
    return lowered


def _flat_nodes(arg) -> list[fx.Node]:
    out = []
    fx.node.map_arg(arg, lambda n: out.append(n) or n)
    return out
