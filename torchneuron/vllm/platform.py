"""NeuronPlatform: what vLLM asks of a device. Attributes vLLM reads that are not defined here
fall through to torch.neuron (vLLM's Platform.__getattr__)."""

import os

import torch
from vllm.logger import init_logger
from vllm.platforms.interface import Platform, PlatformEnum
from vllm.v1.attention.backends.registry import AttentionBackendEnum, register_backend

import torchneuron  # noqa: F401  (registers the device)

logger = init_logger(__name__)

ATTENTION_BACKEND = "torchneuron.vllm.attention.NeuronAttentionBackend"
WORKER = "torchneuron.vllm.worker.NeuronWorker"
COMPILER = "torchneuron.vllm.compiler.NeuronCompiler"

# Layers look their backend up by name in vLLM's registry.
if "NEURON_PAGED" not in AttentionBackendEnum.__members__:
    register_backend("NEURON_PAGED", ATTENTION_BACKEND)


def _compiled() -> bool:
    return os.environ.get("TORCHNEURON_VLLM_COMPILE", "0") == "1"


class NeuronPlatform(Platform):
    """vLLM's device abstraction for torchneuron's `neuron` device."""

    _enum = PlatformEnum.OOT
    device_name: str = "neuron"
    device_type: str = "neuron"
    dispatch_key: str = "PrivateUse1"
    ray_device_key: str = "neuron"
    dist_backend: str = "neuron"
    simple_compile_backend: str = "neuron"
    supported_quantization: list[str] = []

    @property
    def supported_dtypes(self) -> list[torch.dtype]:
        return [torch.bfloat16, torch.float16, torch.float32]

    @classmethod
    def get_attn_backend_cls(cls, selected_backend, attn_selector_config, num_heads=None) -> str:
        if attn_selector_config.use_mla or attn_selector_config.use_sparse:
            raise NotImplementedError("neuron: MLA and sparse attention are not supported")
        if selected_backend is not None:
            logger.info("neuron: attention backend %s is not available; using NEURON_PAGED", selected_backend)
        return ATTENTION_BACKEND

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return torch.neuron.get_device_name(device_id)

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        return torch.neuron.get_device_properties(device_id).total_memory

    @classmethod
    def get_current_memory_usage(cls, device=None) -> float:
        return float(torch.neuron.memory_allocated(device))

    @classmethod
    def set_device(cls, device: torch.device) -> None:
        torch.neuron.set_device(device)

    @classmethod
    def manual_seed_all(cls, seed: int) -> None:
        torch.neuron.manual_seed_all(seed)

    @classmethod
    def inference_mode(cls):
        return torch.no_grad()

    @classmethod
    def is_pin_memory_available(cls) -> bool:
        return True

    @classmethod
    def register_triton_kernel_overrides(cls) -> None:
        from vllm.triton_utils.dispatcher import register_kernels

        from torchneuron.vllm.kernels import TRITON_OVERRIDES

        register_kernels(TRITON_OVERRIDES)

    @classmethod
    def check_if_supports_dtype(cls, dtype: torch.dtype):
        if dtype not in (torch.bfloat16, torch.float16, torch.float32):
            raise ValueError(f"neuron serves float32, bfloat16 and float16 models, not {dtype}")

    @classmethod
    def get_compile_backend(cls) -> str:
        return COMPILER

    @classmethod
    def opaque_attention_op(cls) -> bool:
        # Compiled pieces end at attention, which runs our paged op with its step's metadata;
        # eager model code calls the backend directly, without the custom op's dispatch.
        return _compiled()

    @classmethod
    def get_static_graph_wrapper_cls(cls) -> str:
        return "vllm.compilation.cuda_graph.CUDAGraphWrapper"

    @classmethod
    def support_static_graph_mode(cls) -> bool:
        return True

    @classmethod
    def check_and_update_config(cls, vllm_config) -> None:
        # vllm.config imports the platform: read it only once the platform is resolved.
        from vllm.config import CompilationMode, CUDAGraphMode

        parallel_config = vllm_config.parallel_config
        if parallel_config.worker_cls == "auto":
            parallel_config.worker_cls = WORKER
        cache_config = vllm_config.cache_config
        if not cache_config.user_specified_block_size:
            cache_config.block_size = 16
        compilation_config = vllm_config.compilation_config
        # Decode steps (every request one token) replay captured graphs, one per batch size
        # (TORCHNEURON_VLLM_GRAPHS=0 runs them eagerly). TORCHNEURON_VLLM_COMPILE=1 also has vLLM
        # compile the model between attention calls with torchneuron's compiler, as it does on
        # CUDA; it is off by default: at low load it measured no faster than graphs alone.
        # enforce_eager turns both off.
        model_config = vllm_config.model_config
        compiled = _compiled() and model_config is not None and not model_config.enforce_eager
        if compiled:
            compilation_config.mode = CompilationMode.VLLM_COMPILE
            compilation_config.backend = COMPILER
            # vLLM's ahead-of-time artifact stores Inductor's code; our compiler caches its own.
            os.environ.setdefault("VLLM_USE_AOT_COMPILE", "0")
            # vLLM's fusion passes rewrite to CUDA kernels (quantization, all-reduce, RoPE + cache).
            passes = compilation_config.pass_config
            for name in type(passes).model_fields if hasattr(type(passes), "model_fields") else vars(passes):
                if name.startswith("fuse_") or name == "enable_qk_norm_rope_fusion":
                    setattr(passes, name, False)
        else:
            compilation_config.mode = CompilationMode.NONE
        wanted = os.environ.get("TORCHNEURON_VLLM_GRAPHS", "1") != "0"
        graphs = wanted and model_config is not None and not model_config.enforce_eager
        if graphs and parallel_config.world_size > 1:
            logger.info("neuron: decode graphs are off with tensor or pipeline parallelism (the neuron "
                        "backend's collectives are not captured); running eagerly")
            graphs = False
        if graphs:
            compilation_config.cudagraph_mode = CUDAGraphMode.FULL_DECODE_ONLY
        else:
            compilation_config.cudagraph_mode = CUDAGraphMode.NONE
            compilation_config.cudagraph_capture_sizes = []
        vllm_config.scheduler_config.async_scheduling = False
        # The engine's processes start fresh (a forked child would inherit the device's threads).
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"
