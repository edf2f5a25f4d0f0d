"""Device implementations of the Triton kernels that vLLM's GPU model runner launches (the
platform registers them as overrides): each is a few native neuron ops, with no host sync."""

import torch


def compute_slot_mapping(num_tokens, max_num_tokens, query_start_loc, positions, block_table, block_table_stride,
                         slot_mapping, KV_CACHE_BLOCK_SIZE, TOTAL_CP_WORLD_SIZE=1, TOTAL_CP_RANK=0,  # noqa: N803
                         CP_KV_CACHE_INTERLEAVE_SIZE=1, PAD_ID=-1, BLOCK_SIZE=1024):  # noqa: N803
    """slot_mapping[t] = block_table[request of t, position // block size] * block size + position % block size;
    PAD_ID past the batch's tokens."""
    if TOTAL_CP_WORLD_SIZE != 1:
        raise NotImplementedError("context parallelism is not supported on neuron")
    positions = positions[:num_tokens]
    tokens = torch.arange(num_tokens, device=positions.device, dtype=query_start_loc.dtype)
    requests = torch.searchsorted(query_start_loc[1:], tokens, right=True)
    blocks = block_table.view(-1, block_table_stride)[requests, positions // KV_CACHE_BLOCK_SIZE].to(torch.int64)
    slot_mapping[:num_tokens] = blocks * KV_CACHE_BLOCK_SIZE + positions % KV_CACHE_BLOCK_SIZE
    slot_mapping[num_tokens:max_num_tokens].fill_(PAD_ID)


TRITON_OVERRIDES = {
    "vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel": compute_slot_mapping,
}
