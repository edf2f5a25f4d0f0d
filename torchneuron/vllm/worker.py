"""The vLLM worker and model runner on neuron: vLLM's GPU worker and model runner, given the
neuron device and torch.neuron where they call torch.cuda."""

import contextlib
import functools
import gc

import torch
from vllm.compilation import cuda_graph
from vllm.platforms import current_platform
from vllm.utils.mem_utils import MemorySnapshot
from vllm.utils.torch_utils import set_random_seed
from vllm.v1.worker import gpu_worker
from vllm.v1.worker.gpu_model_runner import GPUModelRunner
from vllm.v1.worker.gpu_worker import Worker, init_worker_distributed_environment
from vllm.v1.worker.utils import request_memory

CUDA_NAMES = ("Stream", "Event", "current_stream", "default_stream", "stream", "set_stream", "graph", "CUDAGraph",
              "graph_pool_handle", "is_current_stream_capturing", "synchronize")


def bind_cuda_names_to_neuron() -> dict:
    """Points torch.cuda's stream, event and graph names at torch.neuron's (vLLM's runner and graph
    wrapper call torch.cuda by name); returns what they were. Each name gets a callable of its
    own: Dynamo refuses two registrations of one function."""
    saved = {name: getattr(torch.cuda, name) for name in CUDA_NAMES}

    def event(*args, blocking=None, **kwargs):
        return torch.neuron.Event(*args, **kwargs)

    torch.cuda.Stream = torch.neuron.Stream
    torch.cuda.Event = event
    torch.cuda.CUDAGraph = torch.neuron.NeuronGraph
    torch.cuda.is_current_stream_capturing = torch.neuron.is_current_stream_capturing
    for name in ("current_stream", "default_stream", "stream", "set_stream", "graph", "graph_pool_handle",
                 "synchronize"):
        setattr(torch.cuda, name, functools.partial(getattr(torch.neuron, name)))
    return saved


@contextlib.contextmanager
def neuron_as_cuda():
    """torch.cuda's names bound to torch.neuron's for the duration (see bind_cuda_names_to_neuron)."""
    saved = bind_cuda_names_to_neuron()
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(torch.cuda, name, value)


def enable_graph_capture():
    """For vLLM's full-graph decode: its CUDAGraphWrapper calls torch.cuda.CUDAGraph / graph at
    capture time, so the names stay bound in the worker; and it keeps weak references to graph
    outputs through a CUDA / CPU custom op that neuron lacks, so it keeps plain references (the
    outputs stay in the graph's pool either way)."""
    bind_cuda_names_to_neuron()
    cuda_graph.weak_ref_tensors = lambda tensors: tensors


class NeuronModelRunner(GPUModelRunner):
    """vLLM's model runner on a neuron device."""

    def __init__(self, vllm_config, device: torch.device):
        with neuron_as_cuda():
            super().__init__(vllm_config, device)

    def _sync_device(self) -> None:
        torch.neuron.synchronize(self.device)


class NeuronWorker(Worker):
    """vLLM's worker on neuron device `local_rank`."""

    def init_device(self):
        if self.local_rank >= torch.neuron.device_count():
            raise RuntimeError(
                f"vLLM worker {self.local_rank} needs neuron:{self.local_rank}, but there are "
                f"{torch.neuron.device_count()} neuron devices; set TORCHNEURON_NUM_DEVICES")
        self.device = torch.device(f"neuron:{self.local_rank}")
        torch.neuron.set_device(self.device)
        if self.vllm_config.compilation_config.cudagraph_mode.has_full_cudagraphs():
            enable_graph_capture()
        current_platform.check_if_supports_dtype(self.model_config.dtype)
        init_worker_distributed_environment(self.vllm_config, self.rank, self.distributed_init_method,
                                            self.local_rank, current_platform.dist_backend)
        set_random_seed(self.model_config.seed)
        gc.collect()
        torch.neuron.empty_cache()
        self.init_snapshot = MemorySnapshot(device=self.device)
        self.requested_memory = request_memory(self.init_snapshot, self.cache_config)
        self._init_workspace_and_model_runner()

    def _maybe_get_memory_pool_context(self, tag: str):
        # vLLM's sleep-mode allocator is CUDA's (cumem); neuron memory comes from its own allocator.
        if self.vllm_config.model_config.enable_sleep_mode:
            raise NotImplementedError("vLLM's sleep mode is not supported on neuron")
        return contextlib.nullcontext()

    def compile_or_warm_up_model(self):
        # vLLM's kernel warm-up tunes CUDA libraries (FlashInfer, DeepGEMM) and imports their
        # models; neuron has none of them. The rest (sampler warm-up, graph capture) is vLLM's.
        saved = gpu_worker.kernel_warmup
        gpu_worker.kernel_warmup = lambda worker: None
        try:
            return super().compile_or_warm_up_model()
        finally:
            gpu_worker.kernel_warmup = saved

    def _make_model_runner(self):
        return NeuronModelRunner(self.vllm_config, self.device)
