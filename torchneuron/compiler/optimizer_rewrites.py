"""Rewrites of a compiled optimizer step's FX graph that run before lowering: foreach ops over
lists of CPU scalars run once on the stacked list, Dynamo's written-out _foreach_lerp is one
again, out-of-place foreach ops run in place on temporaries nothing reads later, and the
write-back copies of updated inputs run as one _foreach_copy_."""

from __future__ import annotations

import operator

import torch
from torch import fx

from .fx_nodes import _call_with_meta, _has_node, _makes_alias, _on_device, _tensor_meta

aten = torch.ops.aten


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
