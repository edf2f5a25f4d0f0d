#include "kernels/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/half.h"
#include "kernels/parallel.h"
#include "kernels/vector_math.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {
namespace {

[[noreturn]] void fail(const std::string& message) { throw runtime::KernelError("paged attention: " + message); }

char* at_bytes(const void* base, int64_t elements, size_t item) {
  return const_cast<char*>(static_cast<const char*>(base)) + elements * static_cast<int64_t>(item);
}

template <typename T>
void load_row(const void* src, float* dst, int64_t n) {
  const T* row = static_cast<const T*>(src);
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(dst, row, sizeof(float) * n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(row[i]);
  }
}

template <typename T>
void store_row(const float* src, void* dst, int64_t n) {
  T* row = static_cast<T*>(dst);
  for (int64_t i = 0; i < n; ++i) row[i] = T(src[i]);
}

// Eight partial sums, so that the loop vectorizes although the library keeps strict float order.
inline float dot(const float* a, const float* b, int64_t n) {
  float lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] += a[i + l] * b[i + l];
  }
  float sum = 0.0f;
  for (; i < n; ++i) sum += a[i] * b[i];
  for (int l = 0; l < 8; ++l) sum += lanes[l];
  return sum;
}

// One unit of work: a tile of one sequence's query tokens, for the query heads of one kv head.
struct WorkItem {
  int64_t seq, kv_head, first, last;  // query tokens [first, last) counted within the sequence
};

constexpr int64_t kQueryTile = 16;

std::vector<WorkItem> plan(const PagedAttentionProblem& p, int64_t tokens) {
  std::vector<WorkItem> items;
  for (int64_t s = 0; s < p.seqs; ++s) {
    const int64_t begin = p.query_start[s], end = p.query_start[s + 1], len = p.seq_lens[s];
    if (begin < 0 || end < begin || end > tokens) {
      fail("query_start_loc[" + std::to_string(s) + ":" + std::to_string(s + 2) + "] = (" + std::to_string(begin) +
           ", " + std::to_string(end) + ") is not a range within the " + std::to_string(tokens) + " query tokens");
    }
    if (len < end - begin || len > p.blocks_per_seq * p.block_size) {
      fail("seq_lens[" + std::to_string(s) + "] = " + std::to_string(len) + " must hold its " +
           std::to_string(end - begin) + " query tokens and fit the block table (" +
           std::to_string(p.blocks_per_seq * p.block_size) + " positions)");
    }
    for (int64_t first = 0; first < end - begin; first += kQueryTile) {
      for (int64_t h = 0; h < p.kv_heads; ++h) items.push_back({s, h, first, std::min(end - begin, first + kQueryTile)});
    }
  }
  return items;
}

template <typename T>
void run_item(const PagedAttentionProblem& p, const WorkItem& w, std::vector<float>& scratch) {
  const int64_t D = p.head_dim, group = p.q_heads / p.kv_heads, bs = p.block_size;
  const int64_t q_begin = p.query_start[w.seq], q_len = p.query_start[w.seq + 1] - q_begin;
  const int64_t len = p.seq_lens[w.seq], rows = (w.last - w.first) * group;
  scratch.resize(static_cast<size_t>(rows * D * 2 + 2 * bs * D + bs + 2 * rows));
  float* q = scratch.data();
  float* acc = q + rows * D;
  float* keys = acc + rows * D;
  float* values = keys + bs * D;
  float* scores = values + bs * D;
  float* row_max = scores + bs;
  float* row_sum = row_max + rows;
  const size_t item = sizeof(T);
  for (int64_t t = w.first; t < w.last; ++t) {
    for (int64_t g = 0; g < group; ++g) {
      const int64_t r = (t - w.first) * group + g, head = w.kv_head * group + g;
      load_row<T>(at_bytes(p.query, (q_begin + t) * p.query_rows.token_stride + head * p.query_rows.head_stride, item),
                  q + r * D, D);
    }
  }
  std::fill(acc, acc + rows * D, 0.0f);
  std::fill(row_max, row_max + rows, -std::numeric_limits<float>::infinity());
  std::fill(row_sum, row_sum + rows, 0.0f);
  const int64_t offset = len - q_len;  // position of the sequence's first query token
  const int64_t last_pos = offset + w.last - 1;
  const int64_t first_pos = p.sliding_window > 0 ? std::max<int64_t>(0, offset + w.first - p.sliding_window + 1) : 0;
  const float scale = static_cast<float>(p.scale), cap = static_cast<float>(p.softcap);
  for (int64_t b = first_pos / bs; b <= last_pos / bs; ++b) {
    const int64_t block = p.block_table[w.seq * p.block_table_stride + b];
    if (block < 0 || block >= p.num_blocks) {
      fail("block_table[" + std::to_string(w.seq) + ", " + std::to_string(b) + "] = " + std::to_string(block) +
           " is not a block of the cache (" + std::to_string(p.num_blocks) + " blocks)");
    }
    const int64_t lo = std::max(first_pos, b * bs), hi = std::min(last_pos, b * bs + bs - 1);
    for (int64_t k = lo; k <= hi; ++k) {
      const int64_t slot = k - b * bs;
      load_row<T>(at_bytes(p.key_cache, block * p.key_layout.block_stride + slot * p.key_layout.slot_stride +
                                            w.kv_head * p.key_layout.head_stride, item),
                  keys + slot * D, D);
      load_row<T>(at_bytes(p.value_cache, block * p.value_layout.block_stride + slot * p.value_layout.slot_stride +
                                              w.kv_head * p.value_layout.head_stride, item),
                  values + slot * D, D);
    }
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t pos = offset + w.first + r / group;
      const int64_t k_lo = std::max(lo, p.sliding_window > 0 ? pos - p.sliding_window + 1 : 0);
      const int64_t k_hi = std::min(hi, pos);
      if (k_lo > k_hi) continue;
      float block_max = -std::numeric_limits<float>::infinity();
      for (int64_t k = k_lo; k <= k_hi; ++k) {
        float s = scale * dot(q + r * D, keys + (k - b * bs) * D, D);
        if (cap > 0.0f) s = cap * std::tanh(s / cap);
        scores[k - k_lo] = s;
        block_max = std::max(block_max, s);
      }
      const float new_max = std::max(row_max[r], block_max);
      const float correction = vector_exp_nonpositive(row_max[r] - new_max);
      float* a = acc + r * D;
      float sum = 0.0f;
      for (int64_t d = 0; d < D; ++d) a[d] *= correction;
      for (int64_t k = k_lo; k <= k_hi; ++k) {
        const float weight = vector_exp_nonpositive(scores[k - k_lo] - new_max);
        sum += weight;
        const float* v = values + (k - b * bs) * D;
        for (int64_t d = 0; d < D; ++d) a[d] += weight * v[d];
      }
      row_sum[r] = row_sum[r] * correction + sum;
      row_max[r] = new_max;
    }
  }
  for (int64_t t = w.first; t < w.last; ++t) {
    for (int64_t g = 0; g < group; ++g) {
      const int64_t r = (t - w.first) * group + g, head = w.kv_head * group + g;
      float* a = acc + r * D;
      const float inverse = row_sum[r] > 0.0f ? 1.0f / row_sum[r] : 0.0f;
      for (int64_t d = 0; d < D; ++d) a[d] *= inverse;
      store_row<T>(a, at_bytes(p.out, (q_begin + t) * p.out_rows.token_stride + head * p.out_rows.head_stride, item),
                   D);
    }
  }
}

template <typename F>
void dispatch_attention_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32: return f(float{});
    case DType::kBFloat16: return f(BFloat16{});
    case DType::kFloat16: return f(Half{});
    default: fail(std::string("no kernel for ") + dtype_name(dtype) + " (float32, bfloat16 and float16 are supported)");
  }
}

}  // namespace

void paged_cache_write(DType dtype, int64_t tokens, int64_t kv_heads, int64_t head_dim, const void* key,
                       TokenRows key_rows, const void* value, TokenRows value_rows, void* key_cache,
                       PagedCache key_layout, void* value_cache, PagedCache value_layout, int64_t num_blocks,
                       int64_t block_size, const int64_t* slot_mapping) {
  const size_t item = element_size(dtype), row_bytes = item * static_cast<size_t>(head_dim);
  const int64_t slots = num_blocks * block_size;
  for (int64_t t = 0; t < tokens; ++t) {
    if (slot_mapping[t] >= slots) {
      fail("slot_mapping[" + std::to_string(t) + "] = " + std::to_string(slot_mapping[t]) + " is past the cache's " +
           std::to_string(slots) + " slots");
    }
  }
  parallel_for(tokens, 64, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t slot = slot_mapping[t];
      if (slot < 0) continue;
      const int64_t block = slot / block_size, row = slot % block_size;
      for (int64_t h = 0; h < kv_heads; ++h) {
        std::memcpy(at_bytes(key_cache, block * key_layout.block_stride + row * key_layout.slot_stride +
                                            h * key_layout.head_stride, item),
                    at_bytes(key, t * key_rows.token_stride + h * key_rows.head_stride, item), row_bytes);
        std::memcpy(at_bytes(value_cache, block * value_layout.block_stride + row * value_layout.slot_stride +
                                              h * value_layout.head_stride, item),
                    at_bytes(value, t * value_rows.token_stride + h * value_rows.head_stride, item), row_bytes);
      }
    }
  });
}

void paged_attention(DType dtype, const PagedAttentionProblem& p) {
  if (p.seqs == 0) return;
  dispatch_attention_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const std::vector<WorkItem> items = plan(p, p.tokens);
    parallel_for(static_cast<int64_t>(items.size()), 1, [&](int64_t begin, int64_t end) {
      std::vector<float> scratch;
      for (int64_t i = begin; i < end; ++i) run_item<T>(p, items[static_cast<size_t>(i)], scratch);
    });
  });
}

}  // namespace torchneuron::kernels
