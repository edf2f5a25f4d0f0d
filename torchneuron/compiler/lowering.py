"""Lowering an AOTAutograd FX graph (core ATen, functional) into the neuron compiler's IR.

Pointwise ATen ops with a code template become IR pointwise nodes, and sums, means, maxima and
minima over the innermost dims (row kernels) or with the innermost dim kept (column kernels) IR
reductions; every other node becomes an opaque node that the compiled program runs as an eager
call. The mapping from IR values back to FX nodes lets the runtime bind kernel outputs and
resolve eager calls' arguments.

Foreach ops lower into foreach kernels in foreach_lowering.py. The graph rewrites that run
before lowering live in layer_rewrites.py and optimizer_rewrites.py; compile_graph takes them
from this module."""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field

import torch
from torch import fx

from .. import _C
from .foreach_lowering import (_absorbed_items, _absorbed_unbinds, _foreach_dim, _lower_foreach, _pack,
                               _writes_what_they_read, foreach_kernel_nodes, write_back_targets)
from .fx_nodes import DTYPES, _flat_nodes, _on_device, _tensor_meta
# Imported from here by others: the rewrites compile_graph runs before lower() (tests patch them
# here), and the foreach ops' table (tests).
from .foreach_lowering import _FOREACH_POINTWISE  # noqa: F401
from .layer_rewrites import (split_bias_from_addmm, stack_select_backward_sums,  # noqa: F401
                             update_batch_norm_stats_in_place)
from .optimizer_rewrites import (foreach_in_place_on_dying_lists, group_write_back_copies,  # noqa: F401
                                 restore_foreach_lerp, stack_cpu_scalar_foreach_ops)

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
