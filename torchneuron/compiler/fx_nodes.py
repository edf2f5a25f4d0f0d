"""What lowering, the graph rewrites and the compiled program ask of FX nodes: the compiler's name
for a torch dtype, a node's traced tensor and whether it lives on the device, the nodes an
argument holds, whether a node's result may alias an argument; and new call nodes that carry
their traced value."""

from __future__ import annotations

import operator

import torch
from torch import fx


DTYPES = {
    torch.bool: "bool", torch.uint8: "uint8", torch.int8: "int8", torch.int32: "int32", torch.int64: "int64",
    torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32", torch.float64: "float64",
}


def _tensor_meta(node) -> torch.Tensor | None:
    val = node.meta.get("val") if isinstance(node, fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def _on_device(val: torch.Tensor) -> bool:
    return val.device.type == "neuron" and val.dtype in DTYPES and val.layout == torch.strided


def _flat_nodes(arg) -> list[fx.Node]:
    out = []
    fx.node.map_arg(arg, lambda n: out.append(n) or n)
    return out


def _has_node(arg) -> bool:
    if isinstance(arg, fx.Node):
        return True
    if isinstance(arg, (list, tuple)):
        return any(_has_node(a) for a in arg)
    if isinstance(arg, dict):
        return any(_has_node(a) for a in arg.values())
    return False


def _makes_alias(node: fx.Node) -> bool:
    """Whether the node's result may share memory with an argument (a view, an in-place op)."""
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and any(r.alias_info is not None for r in target._schema.returns)


def _call_with_meta(graph: fx.Graph, target, args) -> fx.Node:
    """A new call node whose meta["val"] is `target` run on its arguments' fake values."""
    node = graph.call_function(target, args)
    # Fake tensors dispatch to their own mode.
    node.meta["val"] = target(*fx.node.map_arg(args, lambda n: n.meta["val"]))
    return node


# Ops whose result needs its input's strides to be expressible as a view.
_STRIDE_SENSITIVE = {torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default, torch.ops.aten.as_strided.default}


def _row_major(sizes) -> list[int]:
    strides, step = [], 1
    for size in reversed(sizes):
        strides.append(step)
        step *= max(size, 1)
    return strides[::-1]


def promised_strides(node: fx.Node) -> list[tuple[int, list[int]]]:
    """(result index, traced strides) for each result of an eager call whose layout the graph
    relies on: not row-major, concrete, and read through views by an op that needs exact strides
    (aten.view). Eager neuron ops may lay a result out otherwise than the trace (CPU's layout rules
    are not always followed), and the view would then fail; the compiled program restrides those
    results. Views and in-place ops keep their argument's memory and are left alone."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or _makes_alias(node) or target._schema.is_mutable:
        return []
    val = node.meta.get("val")
    vals = [val] if isinstance(val, torch.Tensor) else list(val) if isinstance(val, (list, tuple)) else []
    uses = {}  # result index -> the nodes that read it
    for user in node.users:
        if user.target is operator.getitem and isinstance(user.args[1], int):
            uses.setdefault(user.args[1], []).extend(user.users)
        else:
            uses.setdefault(0, []).append(user)
    promised = []
    for index, v in enumerate(vals):
        if not isinstance(v, torch.Tensor) or v.layout != torch.strided:
            continue
        sizes, strides = list(v.shape), list(v.stride())
        if not all(type(x) is int for x in sizes + strides) or strides == _row_major(sizes):
            continue
        if _reaches_strided_view(uses.get(index, [])):
            promised.append((index, strides))
    return promised


def _reaches_strided_view(users) -> bool:
    pending, seen = list(users), set()
    while pending:
        user = pending.pop()
        if user in seen or user.op != "call_function":
            continue
        seen.add(user)
        if user.target in _STRIDE_SENSITIVE:
            return True
        if _makes_alias(user) and not user.target._schema.is_mutable:
            pending.extend(user.users)
    return False
