// torch.ops.torchneuron.paged_cache_write / paged_attention: the serving engine's attention on
// neuron (torchneuron.vllm's attention backend), over csrc/kernels/paged_attention. Both write
// into tensors they are given, so torch.compile and graph capture see one node each.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <cmath>

#include "aten/device/neuron_tensor.h"
#include "kernels/paged_attention.h"

namespace torchneuron::aten {
namespace {

void check_float(const char* op, const at::Tensor& t, const char* name, c10::ScalarType dtype) {
  TORCH_CHECK(t.scalar_type() == dtype, op, ": ", name, " is ", t.scalar_type(), ", expected ", dtype,
              " like the query / key");
  TORCH_CHECK(t.stride(-1) == 1, op, ": ", name, "'s last dim must be contiguous, got strides ", t.strides());
}

void check_cache(const char* op, const at::Tensor& cache, const char* name, int64_t kv_heads, int64_t head_dim) {
  TORCH_CHECK(cache.dim() == 4 && cache.size(2) == kv_heads && cache.size(3) == head_dim, op, ": ", name,
              " must be [num_blocks, block_size, ", kv_heads, ", ", head_dim, "], got ", cache.sizes());
}

void check_index(const char* op, const at::Tensor& t, const char* name, c10::ScalarType dtype, int64_t dims) {
  TORCH_CHECK(t.scalar_type() == dtype && t.dim() == dims, op, ": ", name, " must be a ", dims, "-D ", dtype,
              " tensor, got ", t.scalar_type(), " of shape ", t.sizes());
}

kernels::PagedCache cache_layout(const at::Tensor& c) { return {c.stride(0), c.stride(1), c.stride(2)}; }
kernels::TokenRows token_rows(const at::Tensor& t) { return {t.stride(0), t.stride(1)}; }

void paged_cache_write(const at::Tensor& key, const at::Tensor& value, const at::Tensor& key_cache,
                       const at::Tensor& value_cache, const at::Tensor& slot_mapping) {
  const char* op = "torchneuron::paged_cache_write";
  check_same_device(op, key_cache.device(), {&key, &value, &value_cache, &slot_mapping});
  TORCH_CHECK(key.dim() == 3 && value.sizes() == key.sizes(), op,
              ": key and value must be [tokens, kv_heads, head_dim] of one shape, got ", key.sizes(), " and ",
              value.sizes());
  const int64_t tokens = slot_mapping.numel(), kv_heads = key.size(1), head_dim = key.size(2);
  check_index(op, slot_mapping, "slot_mapping", at::kLong, 1);
  TORCH_CHECK(key.size(0) >= tokens, op, ": ", tokens, " slots for ", key.size(0), " key rows");
  check_cache(op, key_cache, "key_cache", kv_heads, head_dim);
  check_cache(op, value_cache, "value_cache", kv_heads, head_dim);
  TORCH_CHECK(value_cache.sizes() == key_cache.sizes(), op, ": key_cache and value_cache differ in shape");
  const c10::ScalarType dtype = key_cache.scalar_type();
  for (auto [t, name] : {std::pair{&key, "key"}, {&value, "value"}, {&value_cache, "value_cache"}}) {
    check_float(op, *t, name, dtype);
  }
  check_float(op, key_cache, "key_cache", dtype);
  const at::Tensor slots = slot_mapping.contiguous();
  const kernels::DType kd = to_kernel_dtype(dtype);
  const kernels::TokenRows kr = token_rows(key), vr = token_rows(value);
  const kernels::PagedCache kl = cache_layout(key_cache), vl = cache_layout(value_cache);
  const int64_t blocks = key_cache.size(0), block_size = key_cache.size(1);
  const void *pk = key.data_ptr(), *pv = value.data_ptr();
  void *pkc = key_cache.data_ptr(), *pvc = value_cache.data_ptr();
  const int64_t* ps = slots.const_data_ptr<int64_t>();
  enqueue(key_cache, op, {&key, &value, &value_cache, &slots}, [=] {
    kernels::paged_cache_write(kd, tokens, kv_heads, head_dim, pk, kr, pv, vr, pkc, kl, pvc, vl, blocks, block_size, ps);
  });
}

void paged_attention(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                     const at::Tensor& block_table, const at::Tensor& query_start_loc, const at::Tensor& seq_lens,
                     double scale, int64_t sliding_window, double softcap, const at::Tensor& out) {
  const char* op = "torchneuron::paged_attention";
  check_same_device(op, out.device(), {&query, &key_cache, &value_cache, &block_table, &query_start_loc, &seq_lens});
  TORCH_CHECK(query.dim() == 3, op, ": query must be [tokens, heads, head_dim], got ", query.sizes());
  TORCH_CHECK(out.sizes() == query.sizes(), op, ": out must be shaped like query ", query.sizes(), ", got ",
              out.sizes());
  const int64_t q_heads = query.size(1), head_dim = query.size(2);
  TORCH_CHECK(key_cache.dim() == 4, op, ": key_cache must be [num_blocks, block_size, kv_heads, head_dim], got ",
              key_cache.sizes());
  const int64_t kv_heads = key_cache.size(2);
  TORCH_CHECK(kv_heads > 0 && q_heads % kv_heads == 0, op, ": ", q_heads, " query heads are not a multiple of ",
              kv_heads, " kv heads");
  check_cache(op, key_cache, "key_cache", kv_heads, head_dim);
  check_cache(op, value_cache, "value_cache", kv_heads, head_dim);
  const c10::ScalarType dtype = query.scalar_type();
  for (auto [t, name] : {std::pair{&query, "query"}, {&key_cache, "key_cache"}, {&value_cache, "value_cache"},
                         {&out, "out"}}) {
    check_float(op, *t, name, dtype);
  }
  check_index(op, block_table, "block_table", at::kInt, 2);
  check_index(op, query_start_loc, "query_start_loc", at::kInt, 1);
  check_index(op, seq_lens, "seq_lens", at::kInt, 1);
  const int64_t seqs = seq_lens.numel();
  TORCH_CHECK(query_start_loc.numel() >= seqs + 1 && block_table.size(0) >= seqs, op, ": ", seqs,
              " sequences need ", seqs + 1, " query_start_loc entries and ", seqs, " block_table rows, got ",
              query_start_loc.numel(), " and ", block_table.size(0));
  TORCH_CHECK(block_table.stride(1) == 1, op, ": block_table rows must be contiguous");
  TORCH_CHECK(std::isfinite(scale) && softcap >= 0, op, ": scale must be finite and softcap >= 0");
  const at::Tensor starts = query_start_loc.contiguous(), lens = seq_lens.contiguous();
  kernels::PagedAttentionProblem p;
  p.tokens = query.size(0);
  p.seqs = seqs;
  p.q_heads = q_heads;
  p.kv_heads = kv_heads;
  p.head_dim = head_dim;
  p.block_size = key_cache.size(1);
  p.num_blocks = key_cache.size(0);
  p.query = query.data_ptr();
  p.query_rows = token_rows(query);
  p.key_cache = key_cache.data_ptr();
  p.value_cache = value_cache.data_ptr();
  p.key_layout = cache_layout(key_cache);
  p.value_layout = cache_layout(value_cache);
  p.block_table = block_table.const_data_ptr<int32_t>();
  p.block_table_stride = block_table.stride(0);
  p.blocks_per_seq = block_table.size(1);
  p.query_start = starts.const_data_ptr<int32_t>();
  p.seq_lens = lens.const_data_ptr<int32_t>();
  p.scale = scale;
  p.sliding_window = sliding_window;
  p.softcap = softcap;
  p.out = out.data_ptr();
  p.out_rows = token_rows(out);
  const kernels::DType kd = to_kernel_dtype(dtype);
  enqueue(out, op, {&query, &key_cache, &value_cache, &block_table, &starts, &lens},
          [=] { kernels::paged_attention(kd, p); });
}

// Shapes only: what the compiler traces with.
void paged_cache_write_meta(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                            const at::Tensor&) {}
void paged_attention_meta(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                          const at::Tensor&, const at::Tensor&, double, int64_t, double, const at::Tensor&) {}

}  // namespace

TORCH_LIBRARY_FRAGMENT(torchneuron, m) {
  m.def("paged_cache_write(Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache, "
        "Tensor slot_mapping) -> ()");
  m.def("paged_attention(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_table, "
        "Tensor query_start_loc, Tensor seq_lens, float scale, int sliding_window=0, float softcap=0.0, "
        "*, Tensor(a!) out) -> ()");
}

TORCH_LIBRARY_IMPL(torchneuron, PrivateUse1, m) {
  m.impl("paged_cache_write", paged_cache_write);
  m.impl("paged_attention", paged_attention);
}

TORCH_LIBRARY_IMPL(torchneuron, Meta, m) {
  m.impl("paged_cache_write", paged_cache_write_meta);
  m.impl("paged_attention", paged_attention_meta);
}

}  // namespace torchneuron::aten
