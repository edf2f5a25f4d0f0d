"""The compiled program: runs a planned graph, launching fused kernels from the artifact on the
device queue and running opaque nodes as eager calls, with buffers reused as planned."""

from __future__ import annotations

import ctypes
import operator

import torch
from torch import fx

launch_fused = None  # torch.ops.torchneuron.launch_fused, bound on first use


def _launch():
    global launch_fused
    if launch_fused is None:
        launch_fused = torch.ops.torchneuron.launch_fused
    return launch_fused


class CompiledProgram:
    """Called with the list of the FX graph's inputs (AOTAutograd's boxed convention: the list is
    emptied so that inputs can be freed early) or with the inputs themselves; returns the
    graph's outputs."""

    _boxed_call = True

    def __init__(self, gm: fx.GraphModule, lowered, plan: dict, library: ctypes.CDLL | None):
        self.gm = gm
        nodes = list(gm.graph.nodes)
        self.placeholders = [n for n in nodes if n.op == "placeholder"]
        self.output_node = next(n for n in nodes if n.op == "output")
        self.kernels = []
        for k in plan["kernels"]:
            entry = ctypes.cast(getattr(library, k["symbol"]), ctypes.c_void_p).value
            self.kernels.append((entry, k["inputs"], k["outputs"]))
        self.steps = plan["steps"]
        self.slot = plan["slot"]
        self.in_place = plan["in_place"]
        self.num_slots = plan["num_slots"]
        self.value_source = lowered.value_source
        self.value_meta = lowered.value_meta
        self.layout = lowered.layout
        self.opaque_nodes = lowered.opaque_nodes
        # The IR value (if any) of each FX node that a kernel materializes.
        self.kernel_value_node = {v: lowered.value_source[v][0] for k in plan["kernels"] for v in k["outputs"]}

    def _allocate(self, v, shape, dtype, device):
        order = self.layout.get(v)
        if order is None:
            return torch.empty(shape, dtype=dtype, device=device)
        physical = torch.empty([shape[d] for d in order], dtype=dtype, device=device)
        inverse = [order.index(d) for d in range(len(order))]
        return physical.permute(inverse)

    def __call__(self, *args):
        if len(args) == 1 and isinstance(args[0], list):  # boxed: graph inputs are never lists
            boxed = args[0]
            args = tuple(boxed)
            boxed.clear()
        env = dict(zip(self.placeholders, args))
        values = {}  # IR value -> tensor
        slots = [None] * self.num_slots
        source = self.value_source

        def value(v):
            if v in values:
                return values[v]
            node, index = source[v]
            obj = env[node]
            return obj if index is None else obj[index]

        for is_kernel, index, release in self.steps:
            if is_kernel:
                entry, inputs, outputs = self.kernels[index]
                tensors = [value(v) for v in inputs]
                shape = torch.broadcast_shapes(*[t.shape for t in tensors])
                outs = []
                for v in outputs:
                    dtype, device = self.value_meta[v]
                    reuse = self.in_place[v]
                    buffer = values[reuse] if reuse >= 0 else slots[self.slot[v]] if self.slot[v] >= 0 else None
                    if buffer is None or buffer.shape != shape or buffer.dtype != dtype:
                        buffer = self._allocate(v, shape, dtype, tensors[0].device if tensors else device)
                    if self.slot[v] >= 0:
                        slots[self.slot[v]] = buffer
                    outs.append(buffer)
                _launch()(entry, outs, tensors, list(shape))
                for v, t in zip(outputs, outs):
                    values[v] = t
                    env[self.kernel_value_node[v]] = t
            else:
                node = self.opaque_nodes[index]
                if node.op == "get_attr":
                    env[node] = getattr(self.gm, node.target)
                else:
                    node_args, node_kwargs = fx.node.map_arg((node.args, node.kwargs), lambda n: env[n])
                    env[node] = node.target(*node_args, **node_kwargs)
            for v in release:
                values.pop(v, None)
        return fx.node.map_arg(self.output_node.args[0], lambda n: env[n])
