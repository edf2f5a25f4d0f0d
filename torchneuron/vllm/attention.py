"""vLLM's attention on neuron: the KV cache is written by slot and read through block tables by
native device ops, torch.ops.torchneuron.paged_cache_write and paged_attention (one command each
per layer, for prefill chunks and decode steps in one batch)."""

from dataclasses import dataclass
from typing import ClassVar

import torch
from vllm.v1.attention.backend import (
    AttentionBackend,
    AttentionCGSupport,
    AttentionImpl,
    AttentionMetadataBuilder,
    AttentionType,
    CommonAttentionMetadata,
    MultipleOf,
)
from vllm.v1.kv_cache_interface import KVCacheLayout

import torchneuron  # noqa: F401  (the ops are registered by its extension)


class NeuronAttentionBackend(AttentionBackend):
    """Paged attention on neuron's native ops."""

    forward_includes_kv_cache_update: bool = False
    supported_dtypes: ClassVar[list[torch.dtype]] = [torch.float16, torch.bfloat16, torch.float32]
    supported_kv_cache_dtypes: ClassVar[list[str]] = ["auto"]

    @staticmethod
    def get_name() -> str:
        return "NEURON_PAGED"

    @staticmethod
    def get_impl_cls():
        return NeuronAttentionImpl

    @staticmethod
    def get_builder_cls():
        return NeuronAttentionMetadataBuilder

    @staticmethod
    def get_supported_kernel_block_sizes(kv_cache_spec=None):
        return [MultipleOf(1)]

    @classmethod
    def supported_kv_cache_layouts(cls):
        return (KVCacheLayout.LBNHC,)

    @classmethod
    def supports_sliding_window(cls) -> bool:
        return True

    @classmethod
    def supports_attn_type(cls, attn_type: str) -> bool:
        return attn_type == AttentionType.DECODER


@dataclass
class NeuronAttentionMetadata:
    """One batch's attention inputs, on the device."""

    num_actual_tokens: int
    query_start_loc: torch.Tensor  # int32 [seqs + 1]
    seq_lens: torch.Tensor  # int32 [seqs]
    block_table: torch.Tensor  # int32 [seqs, max blocks]
    slot_mapping: torch.Tensor  # int64 [tokens]


class NeuronAttentionMetadataBuilder(AttentionMetadataBuilder[NeuronAttentionMetadata]):
    """Takes vLLM's common metadata as it is: the kernel reads it on the device."""

    _cudagraph_support: ClassVar[AttentionCGSupport] = AttentionCGSupport.UNIFORM_BATCH

    def __init__(self, kv_cache_spec, layer_names, vllm_config, device):
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)

    def build(self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata,
              fast_build: bool = False) -> NeuronAttentionMetadata:
        m = common_attn_metadata
        if isinstance(m.causal, torch.Tensor) or not m.causal:
            raise NotImplementedError("neuron paged attention is causal (decoder) attention only")
        return NeuronAttentionMetadata(
            num_actual_tokens=m.num_actual_tokens,
            query_start_loc=m.query_start_loc[: m.num_reqs + 1],
            seq_lens=m.seq_lens[: m.num_reqs],
            block_table=m.block_table_tensor[: m.num_reqs],
            slot_mapping=m.slot_mapping[: m.num_actual_tokens],
        )


class NeuronAttentionImpl(AttentionImpl[NeuronAttentionMetadata]):
    """Causal, grouped-query attention with optional sliding window and logit soft-capping."""

    def __init__(self, num_heads, head_size, scale, num_kv_heads=None, alibi_slopes=None,
                 sliding_window=None, kv_cache_dtype="auto", logits_soft_cap=None,
                 attn_type=AttentionType.DECODER, kv_sharing_target_layer_name=None, sinks=None, **kwargs):
        if alibi_slopes is not None:
            raise NotImplementedError("neuron paged attention does not take ALiBi slopes")
        if sinks is not None:
            raise NotImplementedError("neuron paged attention does not take attention sinks")
        if attn_type != AttentionType.DECODER:
            raise NotImplementedError(f"neuron paged attention serves decoder attention, not {attn_type}")
        if kv_cache_dtype != "auto":
            raise NotImplementedError(f"neuron paged attention keeps the KV cache in the model dtype, "
                                      f"not {kv_cache_dtype}")
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)
        self.num_kv_heads = num_kv_heads or num_heads
        self.sliding_window = int(sliding_window) if sliding_window else 0
        self.logits_soft_cap = float(logits_soft_cap) if logits_soft_cap else 0.0
        self.kv_cache_dtype = kv_cache_dtype
        self.attn_type = attn_type
        self.kv_sharing_target_layer_name = kv_sharing_target_layer_name

    def _split_cache(self, kv_cache: torch.Tensor):
        # [blocks, kv_heads, block_size, 2 * head_size] -> key and value [blocks, block_size, kv_heads, head_size]
        return kv_cache.transpose(1, 2).split(self.head_size, dim=-1)

    def do_kv_cache_update(self, layer, key, value, kv_cache, slot_mapping):
        key_cache, value_cache = self._split_cache(kv_cache)
        torch.ops.torchneuron.paged_cache_write(key, value, key_cache, value_cache, slot_mapping)

    def forward(self, layer, query, key, value, kv_cache, attn_metadata, output=None, output_scale=None,
                output_block_scale=None):
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("neuron paged attention does not fuse output quantization")
        if attn_metadata is None:  # a profiling run
            return output.fill_(0)
        n = attn_metadata.num_actual_tokens
        key_cache, value_cache = self._split_cache(kv_cache)
        out = output.view(-1, self.num_heads, self.head_size)[:n]
        torch.ops.torchneuron.paged_attention(
            query.view(-1, self.num_heads, self.head_size)[:n], key_cache, value_cache, attn_metadata.block_table,
            attn_metadata.query_start_loc, attn_metadata.seq_lens, self.scale, self.sliding_window,
            self.logits_soft_cap, out=out)
        return output
