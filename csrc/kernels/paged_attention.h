// Attention over a paged key/value cache, the layout serving engines (vLLM) keep: keys and values
// live in fixed-size blocks, each sequence's blocks are listed in a block table.
#pragma once

#include <cstdint>

#include "kernels/strided.h"

namespace torchneuron::kernels {

// A cache [blocks, block_size, kv_heads, head_dim]: element strides of the first three dims, a
// head's head_dim elements contiguous.
struct PagedCache {
  int64_t block_stride = 0, slot_stride = 0, head_stride = 0;
};

// Rows [tokens, heads, dim] with element strides of the token and head dims, dim contiguous.
struct TokenRows {
  int64_t token_stride = 0, head_stride = 0;
};

// Writes token t's key and value rows (every kv head) into cache slot slot_mapping[t]: block
// slot / block_size, row slot % block_size. A negative slot (a padding token) is skipped; a slot
// past the cache raises KernelError.
void paged_cache_write(DType dtype, int64_t tokens, int64_t kv_heads, int64_t head_dim, const void* key,
                       TokenRows key_rows, const void* value, TokenRows value_rows, void* key_cache,
                       PagedCache key_layout, void* value_cache, PagedCache value_layout, int64_t num_blocks,
                       int64_t block_size, const int64_t* slot_mapping);

// A batch of sequences with variable query lengths (prefill chunks and decode steps together).
// Sequence s owns query tokens [query_start[s], query_start[s + 1]); their keys and values are
// the first seq_lens[s] cache positions listed by block_table row s, the queries being the last
// positions. Query i of a sequence at position p sees keys 0..p (causal), and only the last
// `sliding_window` of them when that is positive. Scores are scale * q.k, then
// softcap * tanh(score / softcap) when softcap > 0. Query head h reads kv head
// h / (q_heads / kv_heads). Computed in float (double for double) with an online softmax.
struct PagedAttentionProblem {
  int64_t tokens = 0;  // rows of query and out
  int64_t seqs = 0, q_heads = 0, kv_heads = 0, head_dim = 0, block_size = 0, num_blocks = 0;
  const void* query = nullptr;
  TokenRows query_rows;
  const void* key_cache = nullptr;
  const void* value_cache = nullptr;
  PagedCache key_layout, value_layout;
  const int32_t* block_table = nullptr;
  int64_t block_table_stride = 0, blocks_per_seq = 0;
  const int32_t* query_start = nullptr;
  const int32_t* seq_lens = nullptr;
  double scale = 1.0;
  int64_t sliding_window = 0;
  double softcap = 0.0;
  void* out = nullptr;
  TokenRows out_rows;
};

// Raises KernelError for inconsistent offsets, lengths or block ids (read on the device).
void paged_attention(DType dtype, const PagedAttentionProblem& problem);

}  // namespace torchneuron::kernels
