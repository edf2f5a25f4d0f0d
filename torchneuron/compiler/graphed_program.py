"""torch.compile(backend="neuron", mode="reduce-overhead"): each compiled program runs through a
graph (torchneuron/graphs.py), so that a call costs the host one replay instead of a launch per
kernel. Per input signature, the first call runs the program plainly (a warm-up that also shows
which inputs keep their memory between calls: parameters and buffers), the second captures it.
Inputs that keep their memory, and inputs that are another capture's outputs (the backward reads
the forward's saved activations where the forward's replay left them), are read in place; the
others are copied into static buffers, and copied back if the graph writes them.

Outputs are returned as aliases of the graph's memory, not copies, as CUDA graph trees do. A
graph is replayed only when no alias of its previous outputs is alive (a storage's use count
above the graph's own); otherwise another capture of the same signature, in its own pool, runs
(so two forwards before their backwards, or a loop that holds the last output, alternate between
captures), and past the limit the program runs plainly. Alive outputs are never overwritten.
Where capture is impossible (a host read, a CPU input, a CPU fallback), the program runs plainly
after one warning."""

from __future__ import annotations

import warnings
import weakref

import torch

_MAX_GRAPHS = 8  # captures per program (signatures, and siblings of one signature); more run plainly

# Data pointers of the outputs of live captures: memory whose address stays fixed across replays.
_graph_output_ptrs: dict[int, int] = {}


def _signature(inputs) -> tuple:
    # Every call computes this: torch.Size is a tuple already, and a device index is cheaper than a
    # device object (every tensor input is a neuron tensor, or the program runs plainly).
    return tuple((x.shape, x.stride(), x.dtype, x.get_device()) if isinstance(x, torch.Tensor) else
                 (type(x), x) for x in inputs)


def _mutated_inputs(gm) -> set[int]:
    """Positions of the graph inputs the graph writes (copy_ into a placeholder)."""
    placeholders = {n: i for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    mutated = set()
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.aten.copy_.default and node.args[0] in placeholders:
            mutated.add(placeholders[node.args[0]])
    return mutated


def _use_count(cdata: int) -> int:
    return torch._C._storage_Use_Count(cdata)


def _forget_ptrs(ptrs):
    for p in ptrs:
        left = _graph_output_ptrs.get(p, 0) - 1
        if left > 0:
            _graph_output_ptrs[p] = left
        else:
            _graph_output_ptrs.pop(p, None)


class _Capture:
    def __init__(self, program, inputs, stable: list[bool], mutated: set[int]):
        self.stable_ptrs = [x.data_ptr() if keep else None for x, keep in zip(inputs, stable)]
        self.in_place = [(i, p) for i, p in enumerate(self.stable_ptrs) if p is not None]
        self.copied_in = [i for i, (x, p) in enumerate(zip(inputs, self.stable_ptrs))
                          if p is None and isinstance(x, torch.Tensor)]
        self.static = [x if keep or not isinstance(x, torch.Tensor) else
                       torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device).copy_(x)
                       for x, keep in zip(inputs, stable)]
        self.copied_back = [i for i in mutated if isinstance(inputs[i], torch.Tensor) and not stable[i]]
        from torchneuron.graphs import NeuronGraph, graph

        self.graph = NeuronGraph()
        with graph(self.graph):
            outputs = program(list(self.static))
        self.outputs = outputs
        self._plan_outputs()
        # Inputs read in place are checked by address at each replay; holding them would keep
        # another capture's outputs alive (the backward's inputs are the forward's outputs).
        self.static = [None if p is not None else s for s, p in zip(self.static, self.stable_ptrs)]

    def _plan_outputs(self):
        """How each output leaves a replay: an alias of graph memory ("graph", tracked), an alias
        of an input the caller owns ("alias"), or a clone (it aliases a static input buffer the
        next call overwrites)."""
        storage = lambda t: t.untyped_storage()._cdata
        copied = {storage(s) for s, p in zip(self.static, self.stable_ptrs) if p is None and isinstance(s, torch.Tensor)}
        owned = {storage(s) for s, p in zip(self.static, self.stable_ptrs) if p is not None}
        self.how = []
        tracked = {}
        for o in self.outputs:
            if not isinstance(o, torch.Tensor):
                self.how.append(None)
            elif storage(o) in copied:
                self.how.append("clone")
            elif storage(o) in owned:
                self.how.append("alias")
            else:
                self.how.append("graph")
                tracked[storage(o)] = None
        # The graph's own references: the static outputs (and the program's, if it keeps any).
        self.tracked = [(cdata, _use_count(cdata)) for cdata in tracked]
        self.returned = []  # weak references to the last replay's outputs in graph memory
        self.ptrs = [o.data_ptr() for o, how in zip(self.outputs, self.how) if how == "graph"]
        for p in self.ptrs:
            _graph_output_ptrs[p] = _graph_output_ptrs.get(p, 0) + 1
        weakref.finalize(self, _forget_ptrs, list(self.ptrs))

    def matches(self, inputs) -> bool:
        return all(inputs[i].data_ptr() == p for i, p in self.in_place)

    def outputs_alive(self) -> bool:
        """Whether something outside the graph still holds memory of its previous outputs: a
        returned tensor, or anything else on their storages (views, autograd's saved tensors)."""
        return (any(r() is not None for r in self.returned) or
                any(_use_count(cdata) > own for cdata, own in self.tracked))

    def run(self, inputs):
        for i in self.copied_in:
            self.static[i].copy_(inputs[i])
        self.graph.replay()
        for i in self.copied_back:
            inputs[i].copy_(self.static[i])
        results = [o if how is None else o.clone() if how == "clone" else o.detach()
                   for o, how in zip(self.outputs, self.how)]
        self.returned = [weakref.ref(o) for o, how in zip(results, self.how) if how == "graph"]
        return results


class GraphedProgram:
    """A CompiledProgram (or eager fallback) run through graphs, per input signature."""

    def __init__(self, program, gm):
        self._boxed_call = True  # AOTAutograd's boxed convention, as CompiledProgram
        self.program = program
        self.mutated = _mutated_inputs(gm)
        self.warm_ptrs = {}  # signature -> data pointers of the warm-up call's tensor inputs
        self.captures = {}   # signature -> [_Capture], siblings for other input memory or busy outputs
        self.capture_count = 0
        self.warned_full = False
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
        siblings = self.captures.get(key)
        if siblings:
            for capture in siblings:
                if capture.matches(inputs) and not capture.outputs_alive():
                    return capture.run(inputs)
        elif key not in self.warm_ptrs:
            why = self._capturable(inputs)
            if why is not None:
                return self._give_up(why, inputs)
            self.warm_ptrs[key] = [x.data_ptr() if isinstance(x, torch.Tensor) else None for x in inputs]
            return self._run_plain(inputs)
        if self.capture_count >= _MAX_GRAPHS:
            if not self.warned_full:
                self.warned_full = True
                warnings.warn(f"torch.compile(backend='neuron', mode='reduce-overhead'): {_MAX_GRAPHS} graphs "
                              "captured for one program (new shapes or input memory, or outputs of earlier calls "
                              "still alive); further calls that no graph fits run without a graph", stacklevel=3)
            return self._run_plain(inputs)
        warm = self.warm_ptrs.get(key) or [None] * len(inputs)
        stable = [isinstance(x, torch.Tensor) and (x.data_ptr() == p or x.data_ptr() in _graph_output_ptrs)
                  for x, p in zip(inputs, warm)]
        try:
            capture = _Capture(self.program, inputs, stable, self.mutated)
        except RuntimeError as error:
            return self._give_up(str(error).splitlines()[0], inputs)
        self.captures.setdefault(key, []).append(capture)
        self.capture_count += 1
        return capture.run(inputs)

    def _give_up(self, why, inputs):
        self.plain_reason = why
        warnings.warn(f"torch.compile(backend='neuron', mode='reduce-overhead'): a graph runs without graph "
                      f"capture: {why}", stacklevel=3)
        return self._run_plain(inputs)
