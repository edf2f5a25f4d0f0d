"""vLLM's compiler interface on torchneuron's compiler: where vLLM compiles a model (mode
VLLM_COMPILE), each piece of its split graph (the layers between attention calls) is lowered by
the same backend as torch.compile(backend="neuron"), with its dynamic token count."""

import copy

import torch
from vllm.compilation.compiler_interface import CompilerInterface

from torchneuron.compiler import neuron_backend


class NeuronCompiler(CompilerInterface):
    """One compiled program per graph piece and size range; not cached by vLLM (our compiler keeps
    its own cache of compiled graphs, torchneuron.compiler.cache_dir())."""

    name = "neuron"

    def compile(self, graph, example_inputs, compiler_config, compile_range, key=None):
        # The backend rewrites the graph in place; vLLM compiles the same piece for several ranges.
        # vLLM's ahead-of-time Dynamo compile forces AOTAutograd's cache, whose entries must be
        # Inductor's; our compiler caches its programs itself.
        with torch._functorch.config.patch(force_autograd_cache=False):
            return neuron_backend(copy.deepcopy(graph), example_inputs), None
