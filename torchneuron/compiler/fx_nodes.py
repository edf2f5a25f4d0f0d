"""What lowering, the graph rewrites and the compiled program ask of FX nodes: the compiler's name
for a torch dtype, a node's traced tensor and whether it lives on the device, the nodes an
argument holds, whether a node's result may alias an argument; and new call nodes that carry
their traced value."""

from __future__ import annotations

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
