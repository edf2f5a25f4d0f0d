"""torch.compile(backend="neuron", mode="reduce-overhead"): each compiled program runs through a
graph (torchneuron/graphs.py), so that a call costs the host one replay instead of a launch per
kernel. Per input signature, the first call runs the program plainly (a warm-up that also shows
which inputs keep their memory between calls: parameters and buffers), the second captures it.
Inputs that keep their memory are read in place; the others are copied into static buffers,
and copied back if the graph writes them. Outputs are copied out of the graph's memory, since the
next replay overwrites it. Where capture is impossible (a host read, a CPU input, a CPU fallback),
the program runs plainly after one warning."""

from __future__ import annotations

import warnings

import torch

_MAX_GRAPHS = 8  # input signatures captured per program; more run plainly


def _signature(inputs) -> tuple:
    return tuple((tuple(x.shape), tuple(x.stride()), x.dtype, x.device) if isinstance(x, torch.Tensor) else
                 (type(x), x) for x in inputs)


def _mutated_inputs(gm) -> set[int]:
    """Positions of the graph inputs the graph writes (copy_ into a placeholder)."""
    placeholders = {n: i for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    mutated = set()
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.aten.copy_.default and node.args[0] in placeholders:
            mutated.add(placeholders[node.args[0]])
    return mutated


class _Capture:
    def __init__(self, program, inputs, stable: list[bool], mutated: set[int]):
        self.stable_ptrs = [x.data_ptr() if keep else None for x, keep in zip(inputs, stable)]
        self.static = [x if keep or not isinstance(x, torch.Tensor) else
                       torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device).copy_(x)
                       for x, keep in zip(inputs, stable)]
        self.copied_back = [i for i in mutated if isinstance(inputs[i], torch.Tensor) and not stable[i]]
        from torchneuron.graphs import NeuronGraph, graph

        self.graph = NeuronGraph()
        with graph(self.graph):
            outputs = program(list(self.static))
        self.outputs = outputs

    def matches(self, inputs) -> bool:
        return all(p is None or x.data_ptr() == p for x, p in zip(inputs, self.stable_ptrs))

    def run(self, inputs):
        for x, static, ptr in zip(inputs, self.static, self.stable_ptrs):
            if ptr is None and isinstance(x, torch.Tensor):
                static.copy_(x)
        self.graph.replay()
        for i in self.copied_back:
            inputs[i].copy_(self.static[i])
        return [o.clone() if isinstance(o, torch.Tensor) else o for o in self.outputs]


class GraphedProgram:
    """A CompiledProgram (or eager fallback) run through graphs, per input signature."""

    def __init__(self, program, gm):
        self._boxed_call = True  # AOTAutograd's boxed convention, as CompiledProgram
        self.program = program
        self.mutated = _mutated_inputs(gm)
        self.warm_ptrs = {}  # signature -> data pointers of the warm-up call's tensor inputs
        self.captures = {}   # signature -> _Capture
        self.plain_reason = None

    def _run_plain(self, inputs):
        return self.program(inputs)

    def _capturable(self, inputs) -> str | None:
        for x in inputs:
            if isinstance(x, torch.Tensor) and x.device.type != "neuron":
                return f"an input on {x.device}"
        if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in inputs):
            return "an input requires grad inside the compiled graph"
        return None

    def __call__(self, *args):
        inputs = list(args[0]) if len(args) == 1 and isinstance(args[0], list) else list(args)
        if len(args) == 1 and isinstance(args[0], list):
            args[0].clear()
        if self.plain_reason is not None:
            return self._run_plain(inputs)
        key = _signature(inputs)
        capture = self.captures.get(key)
        if capture is not None and capture.matches(inputs):
            return capture.run(inputs)
        if capture is None and key not in self.warm_ptrs:
            why = self._capturable(inputs)
            if why is not None:
                return self._give_up(why, inputs)
            self.warm_ptrs[key] = [x.data_ptr() if isinstance(x, torch.Tensor) else None for x in inputs]
            return self._run_plain(inputs)
        if len(self.captures) >= _MAX_GRAPHS:
            return self._run_plain(inputs)
        warm = self.warm_ptrs.get(key) or [None] * len(inputs)
        stable = [isinstance(x, torch.Tensor) and x.data_ptr() == p for x, p in zip(inputs, warm)]
        try:
            capture = _Capture(self.program, inputs, stable, self.mutated)
        except RuntimeError as error:
            return self._give_up(str(error).splitlines()[0], inputs)
        self.captures[key] = capture
        return capture.run(inputs)

    def _give_up(self, why, inputs):
        self.plain_reason = why
        warnings.warn(f"torch.compile(backend='neuron', mode='reduce-overhead'): a graph runs without graph "
                      f"capture: {why}", stacklevel=3)
        return self._run_plain(inputs)
