"""Graph capture and replay on neuron, in CUDA's shape: torch.neuron.NeuronGraph, the
torch.neuron.graph context manager, graph_pool_handle() and make_graphed_callables().

While a stream captures, the commands submitted on it are recorded instead of run, and memory
allocated on it comes from the graph's private pool, which stays reserved for the graph's
replays. A replay is one command on the current stream that runs the recorded list: no host
work per op. Host reads and synchronizations raise while capturing. Random ops draw from the
default generator at the offset each replay takes, so every replay gives new numbers."""

from __future__ import annotations

import gc

import torch

from torchneuron import _C

__all__ = ["NeuronGraph", "graph", "graph_pool_handle", "is_current_stream_capturing", "make_graphed_callables"]


def is_current_stream_capturing() -> bool:
    """Whether the current neuron stream is capturing a graph."""
    return _C._is_current_stream_capturing()


def graph_pool_handle() -> tuple[int, int]:
    """A new memory pool id that several graphs can share (pass it as `pool=`)."""
    return tuple(_C._graph_pool_handle())


class NeuronGraph(torch.accelerator.Graph):
    """A graph of neuron work: capture_begin / capture_end record the current stream's work,
    replay runs it again; torch.cuda.CUDAGraph's methods."""

    def __new__(cls, keep_graph: bool = False):
        return super().__new__(cls, keep_graph)

    def __init__(self, keep_graph: bool = False):
        super().__init__(keep_graph)

    def capture_begin(self, pool=None, capture_error_mode: str = "global") -> None:
        """Begins capturing the current stream's work, into `pool` if given (a graph's pool() or
        graph_pool_handle())."""
        torch._C._acceleratorGraph.capture_begin(self, pool=pool, capture_error_mode=capture_error_mode)

    def capture_end(self) -> None:
        """Ends the capture."""
        torch._C._acceleratorGraph.capture_end(self)


class graph:
    """Context manager that captures the work of its block into `neuron_graph`, as
    torch.cuda.graph does: the device is synchronized first, and the block runs on `stream` (a
    side stream by default) with memory from `pool` (a new private pool by default)."""

    _default_stream = None

    def __init__(self, neuron_graph: NeuronGraph, pool=None, stream=None, capture_error_mode: str = "global"):
        if stream is None:
            if graph._default_stream is None:
                graph._default_stream = torch.neuron.Stream()
            stream = graph._default_stream
        self.neuron_graph = neuron_graph
        self.pool = pool
        self.capture_stream = stream
        self.capture_error_mode = capture_error_mode
        self.stream_context = torch.neuron.stream(stream)

    def __enter__(self):
        torch.neuron.synchronize()
        gc.collect()
        torch.neuron.empty_cache()
        self.stream_context.__enter__()
        self.neuron_graph.capture_begin(pool=self.pool, capture_error_mode=self.capture_error_mode)

    def __exit__(self, *exc):
        try:
            self.neuron_graph.capture_end()
        finally:
            self.stream_context.__exit__(*exc)
        return False


def _flat_tensors(values):
    out = []
    for v in values if isinstance(values, (tuple, list)) else (values,):
        if isinstance(v, (tuple, list)):
            out.extend(_flat_tensors(v))
        elif isinstance(v, torch.Tensor):
            out.append(v)
    return out


class _Graphed:
    """One callable captured twice: its forward, and the backward of its outputs with respect
    to its tensor inputs and parameters."""

    def __init__(self, fn, sample_args, num_warmup_iters, allow_unused_input, pool):
        self.fn = fn
        self.module = fn if isinstance(fn, torch.nn.Module) else None
        self.params = [p for p in self.module.parameters() if p.requires_grad] if self.module is not None else []
        self.static_inputs = list(sample_args)
        self.grad_targets = [t for t in self.static_inputs if isinstance(t, torch.Tensor) and t.requires_grad]
        self.grad_targets += self.params
        self.allow_unused = allow_unused_input
        self.pool = pool
        self.num_warmup_iters = num_warmup_iters

    def _run_backward(self, outputs, grad_outputs):
        pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
        if not pairs or not self.grad_targets:
            return [None] * len(self.grad_targets)
        return list(torch.autograd.grad([o for o, _ in pairs], self.grad_targets, [g for _, g in pairs],
                                        allow_unused=self.allow_unused))

    def warm_up(self):
        for _ in range(self.num_warmup_iters):
            outputs = _flat_tensors(self.fn(*self.static_inputs))
            self._run_backward(outputs, [torch.empty_like(o) for o in outputs])

    def capture(self, stream):
        self.forward_graph, self.backward_graph = NeuronGraph(), NeuronGraph()
        with graph(self.forward_graph, pool=self.pool, stream=stream):
            outputs = self.fn(*self.static_inputs)
        self.output_structure = outputs
        self.static_outputs = _flat_tensors(outputs)
        self.static_grad_outputs = [torch.empty_like(o) if o.requires_grad else None for o in self.static_outputs]
        with graph(self.backward_graph, pool=self.forward_graph.pool(), stream=stream):
            grads = self._run_backward(self.static_outputs, self.static_grad_outputs)
        self.static_grads = grads

    def function(self):
        graphed = self

        class GraphedFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, *inputs):
                for static, new in zip(graphed.static_inputs, inputs[:len(graphed.static_inputs)]):
                    if isinstance(static, torch.Tensor) and static.data_ptr() != new.data_ptr():
                        static.copy_(new)
                graphed.forward_graph.replay()
                return tuple(o.detach() for o in graphed.static_outputs)

            @staticmethod
            def backward(ctx, *grad_outputs):
                for static, grad in zip(graphed.static_grad_outputs, grad_outputs):
                    if static is not None:
                        if grad is None:
                            static.zero_()
                        elif static.data_ptr() != grad.data_ptr():
                            static.copy_(grad)
                graphed.backward_graph.replay()
                grads = iter(g.detach() if g is not None else None for g in graphed.static_grads)
                result = []
                for t in list(graphed.static_inputs) + graphed.params:
                    result.append(next(grads) if isinstance(t, torch.Tensor) and t.requires_grad else None)
                return tuple(result)

        def run(*args):
            if len(args) != len(graphed.static_inputs):
                raise TypeError(f"graphed callable expects {len(graphed.static_inputs)} arguments, got {len(args)}")
            outputs = GraphedFunction.apply(*args, *graphed.params)
            return _restructure(graphed.output_structure, iter(outputs))

        return run


def _restructure(structure, flat):
    if isinstance(structure, torch.Tensor):
        return next(flat)
    if isinstance(structure, (tuple, list)):
        return type(structure)(_restructure(s, flat) for s in structure)
    return structure


def make_graphed_callables(callables, sample_args, num_warmup_iters: int = 3, allow_unused_input: bool = False,
                           pool=None):
    """Graphs callables (modules or functions) forward and backward, as
    torch.cuda.make_graphed_callables does: each is warmed up, then its forward and its
    backward (gradients of its tensor inputs that require grad and of its parameters) are
    captured with `sample_args` as static inputs. Calls copy their arguments into the static
    inputs and replay; a module's forward is replaced (in training mode) by the graphed one."""
    single = not isinstance(callables, tuple)
    if single:
        callables, sample_args = (callables,), (sample_args,)
    if len(callables) != len(sample_args):
        raise ValueError("make_graphed_callables: one tuple of sample arguments per callable")
    graphed = []
    for fn, args in zip(callables, sample_args):
        if isinstance(fn, torch.nn.Module) and (fn._backward_hooks or fn._forward_hooks or fn._forward_pre_hooks):
            raise RuntimeError("make_graphed_callables: modules with registered hooks cannot be graphed")
        if not all(isinstance(a, torch.Tensor) for a in args):
            raise TypeError("make_graphed_callables: sample_args must hold tensors only")
        graphed.append(_Graphed(fn, tuple(args), num_warmup_iters, allow_unused_input, pool))
    # Warm-up and capture on one stream: autograd accumulates a parameter's gradient on the stream
    # where its first backward ran, and work on another stream would not be captured.
    torch.neuron.synchronize()
    side = torch.neuron.Stream()
    with torch.neuron.stream(side):
        for g in graphed:
            g.warm_up()
    torch.neuron.synchronize()
    for g in graphed:
        g.capture(side)
    results = []
    for fn, g in zip(callables, graphed):
        run = g.function()
        if isinstance(fn, torch.nn.Module):
            eager_forward = fn.forward

            def forward(*args, _run=run, _module=fn, _eager=eager_forward):
                return _run(*args) if _module.training else _eager(*args)

            fn.forward = forward
            results.append(fn)
        else:
            results.append(run)
    return results[0] if single else tuple(results)
