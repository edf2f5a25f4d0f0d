// aten::_flash_attention_forward / _flash_attention_backward on neuron: FlashAttention's layout
// ([batch, seq, heads, dim], or packed [tokens, heads, dim] with cumulative sequence offsets for
// variable-length batches; logsumexp [batch, heads, seq] or [heads, tokens]) over the attention
// kernels of csrc/kernels. One queue command per call reads the offsets on the device and runs
// each sequence. Grouped-query heads are expanded to the query heads (and their gradients summed
// back). PyTorch has no CPU kernel for these ops; torch.nn.attention.varlen and TorchTitan call them.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/repeat_interleave.h>
#include <ATen/ops/sum.h>
#include <torch/library.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "aten/device/neuron_tensor.h"
#include "kernels/attention.h"

namespace torchneuron::aten {
namespace {

// Query heads for every key/value head: repeated so that the kernels see equal head counts.
at::Tensor expand_heads(const at::Tensor& t, int64_t heads, int head_dim_index) {
  const int64_t kv_heads = t.size(head_dim_index);
  TORCH_CHECK(heads % kv_heads == 0, "flash attention: ", heads, " query heads are not a multiple of ", kv_heads,
              " key/value heads");
  return kv_heads == heads ? t : at::repeat_interleave(t, heads / kv_heads, head_dim_index);
}

at::Tensor sum_heads(const at::Tensor& grad, int64_t kv_heads, int head_dim_index) {
  const int64_t heads = grad.size(head_dim_index);
  if (heads == kv_heads) return grad;
  std::vector<int64_t> sizes(grad.sizes().begin(), grad.sizes().end());
  sizes[head_dim_index] = kv_heads;
  sizes.insert(sizes.begin() + head_dim_index + 1, heads / kv_heads);
  return at::sum(grad.reshape(sizes), {head_dim_index + 1});
}

// Windows are refused except (-1, 0) with is_causal, which varlen_attn passes for causal.
void check_supported(const char* op, double dropout_p, bool is_causal, const std::optional<int64_t>& window_left,
                     const std::optional<int64_t>& window_right) {
  TORCH_CHECK(dropout_p == 0.0, op, " on neuron does not apply dropout (dropout_p=", dropout_p, ")");
  const bool right_ok = !window_right.has_value() || *window_right < 0 || (*window_right == 0 && is_causal);
  TORCH_CHECK((!window_left.has_value() || *window_left < 0) && right_ok, op,
              " on neuron does not support sliding windows (window_size_left/right)");
}

// Sequence boundaries: the offsets tensor's values when packed, else `batch` sequences of `len`.
struct Sequences {
  const int32_t* q = nullptr;  // device pointers to the cumulative offsets, or null
  const int32_t* k = nullptr;
  int64_t count = 0, q_len = 0, k_len = 0;
  int64_t q_begin(int64_t i) const { return q ? q[i] : i * q_len; }
  int64_t q_end(int64_t i) const { return q ? q[i + 1] : (i + 1) * q_len; }
  int64_t k_begin(int64_t i) const { return k ? k[i] : i * k_len; }
  int64_t k_end(int64_t i) const { return k ? k[i + 1] : (i + 1) * k_len; }
};

Sequences sequences_of(const at::Tensor& q, const at::Tensor& k, const std::optional<at::Tensor>& cum_q,
                       const std::optional<at::Tensor>& cum_k) {
  Sequences s;
  const bool packed = cum_q.has_value() && cum_q->defined();
  if (packed) {
    TORCH_CHECK(cum_k.has_value() && cum_k->defined(), "flash attention: cum_seq_k is needed with cum_seq_q");
    TORCH_CHECK(q.dim() == 3 && k.dim() == 3, "flash attention with cum_seq_q takes packed [tokens, heads, dim] "
                "inputs, got ", q.sizes(), " and ", k.sizes());
    TORCH_CHECK(cum_q->scalar_type() == at::kInt && cum_k->scalar_type() == at::kInt && cum_q->dim() == 1 &&
                    cum_q->numel() == cum_k->numel() && cum_q->numel() >= 1,
                "flash attention: cum_seq_q and cum_seq_k must be int32 offsets of one length");
    TORCH_CHECK(cum_q->is_contiguous() && cum_k->is_contiguous(), "flash attention: offsets must be contiguous");
    s.q = cum_q->data_ptr<int32_t>();
    s.k = cum_k->data_ptr<int32_t>();
    s.count = cum_q->numel() - 1;
  } else {
    TORCH_CHECK(q.dim() == 4 && k.dim() == 4, "flash attention takes [batch, seq, heads, dim] inputs, got ", q.sizes(),
                " and ", k.sizes());
    s.count = q.size(0);
    s.q_len = q.size(1);
    s.k_len = k.size(1);
  }
  return s;
}

// Token-major views: [tokens, heads, dim] whatever the input's form (a dense batch is its
// sequences one after another).
at::Tensor tokens(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return c.dim() == 4 ? c.reshape({c.size(0) * c.size(1), c.size(2), c.size(3)}) : c;
}

kernels::HeadStrides token_strides(const at::Tensor& t) { return {0, t.stride(1), t.stride(0)}; }

// One sequence: shape [1, heads, q rows, k rows] with rows starting at its offsets.
kernels::AttentionShape sequence_shape(const Sequences& s, int64_t i, int64_t heads, int64_t dim, int64_t vdim) {
  return {1, heads, s.q_end(i) - s.q_begin(i), s.k_end(i) - s.k_begin(i), dim, vdim};
}

template <typename T>
const T* rows_at(const void* base, int64_t row, int64_t row_stride, size_t item) {
  return reinterpret_cast<const T*>(static_cast<const char*>(base) + row * row_stride * static_cast<int64_t>(item));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> flash_attention_forward(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const std::optional<at::Tensor>& cum_seq_q,
    const std::optional<at::Tensor>& cum_seq_k, int64_t /*max_q*/, int64_t /*max_k*/, double dropout_p,
    bool is_causal, bool /*return_debug_mask*/, std::optional<double> scale, std::optional<int64_t> window_left,
    std::optional<int64_t> window_right, const std::optional<at::Tensor>& seqused_k,
    const std::optional<at::Tensor>& alibi_slopes, const std::optional<at::Tensor>& block_table,
    std::optional<int64_t> num_splits) {
  const char* op = "aten::_flash_attention_forward";
  check_supported(op, dropout_p, is_causal, window_left, window_right);
  // num_splits is a CUDA kernel's work split: nothing to do with the result, ignored here.
  (void)num_splits;
  TORCH_CHECK(!(seqused_k.has_value() && seqused_k->defined()), op, " on neuron does not support seqused_k");
  TORCH_CHECK(!(alibi_slopes.has_value() && alibi_slopes->defined()), op, " on neuron does not support alibi_slopes");
  TORCH_CHECK(!(block_table.has_value() && block_table->defined()), op,
              " on neuron does not support block_table (paged key/value)");
  const at::Tensor* offsets[] = {cum_seq_q ? &*cum_seq_q : nullptr, cum_seq_k ? &*cum_seq_k : nullptr};
  check_same_device(op, query.device(), {&key, &value, offsets[0], offsets[1]});
  const bool packed = cum_seq_q.has_value() && cum_seq_q->defined();
  const int head_index = packed ? 1 : 2;
  const int64_t heads = query.size(head_index), dim = query.size(-1);
  const at::Tensor q = tokens(query);
  const at::Tensor k = tokens(expand_heads(key, heads, head_index));
  const at::Tensor v = tokens(expand_heads(value, heads, head_index));
  const Sequences seqs = sequences_of(query, key, cum_seq_q, cum_seq_k);
  const int64_t vdim = v.size(2);
  at::Tensor out = at::empty({q.size(0), heads, vdim}, q.options());
  at::Tensor lse = packed ? at::empty({heads, q.size(0)}, q.options().dtype(at::kFloat))
                          : at::empty({seqs.count, heads, seqs.q_len}, q.options().dtype(at::kFloat));
  TORCH_CHECK(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type() &&
                  (q.scalar_type() == at::kFloat || q.scalar_type() == at::kBFloat16 || q.scalar_type() == at::kHalf),
              op, " takes query, key and value of one float dtype, got ", q.scalar_type(), ", ", k.scalar_type(), ", ",
              v.scalar_type());
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(dim)));
  const kernels::DType dtype = to_kernel_dtype(q.scalar_type());
  kernels::AttentionLayout layout;
  layout.q = token_strides(q);
  layout.k = token_strides(k);
  layout.v = token_strides(v);
  layout.out = token_strides(out);
  const size_t item = q.element_size();
  const void *pq = q.data_ptr(), *pk = k.data_ptr(), *pv = v.data_ptr();
  void *po = out.data_ptr(), *pl = lse.data_ptr();
  const int64_t total = q.size(0);
  enqueue(out, op, {&q, &k, &v}, [=] {
    std::vector<float> row_lse;
    for (int64_t i = 0; i < seqs.count; ++i) {
      const kernels::AttentionShape shape = sequence_shape(seqs, i, heads, dim, vdim);
      if (shape.q_len <= 0) continue;
      row_lse.assign(static_cast<size_t>(heads * shape.q_len), 0.0f);
      kernels::attention_forward(dtype, shape, layout, rows_at<char>(pq, seqs.q_begin(i), layout.q.row, item),
                                 rows_at<char>(pk, seqs.k_begin(i), layout.k.row, item),
                                 rows_at<char>(pv, seqs.k_begin(i), layout.v.row, item), {}, is_causal, s,
                                 const_cast<char*>(rows_at<char>(po, seqs.q_begin(i), layout.out.row, item)),
                                 row_lse.data());
      float* lse_out = static_cast<float*>(pl);
      for (int64_t h = 0; h < heads; ++h) {
        float* dst = packed ? lse_out + h * total + seqs.q_begin(i) : lse_out + (i * heads + h) * shape.q_len;
        std::memcpy(dst, row_lse.data() + h * shape.q_len, sizeof(float) * shape.q_len);
      }
    }
  });
  const at::Tensor result = packed ? out : out.reshape({query.size(0), query.size(1), heads, vdim});
  const at::Tensor none = at::empty({0}, q.options());
  return {result, lse, at::empty({2}, q.options().dtype(at::kLong)).zero_(), at::empty({0}, q.options().dtype(at::kLong)),
          none};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k,
    int64_t /*max_q*/, int64_t /*max_k*/, double dropout_p, bool is_causal, const at::Tensor& /*rng_state*/,
    const at::Tensor& /*unused*/, std::optional<double> scale, std::optional<int64_t> window_left,
    std::optional<int64_t> window_right) {
  const char* op = "aten::_flash_attention_backward";
  check_supported(op, dropout_p, is_causal, window_left, window_right);
  check_same_device(op, query.device(), {&grad_out, &key, &value, &out, &logsumexp, &cum_seq_q, &cum_seq_k});
  const bool packed = cum_seq_q.defined() && cum_seq_q.numel() > 0;
  const int head_index = packed ? 1 : 2;
  const int64_t heads = query.size(head_index), kv_heads = key.size(head_index), dim = query.size(-1);
  const at::Tensor q = tokens(query), go = tokens(grad_out), o = tokens(out);
  const at::Tensor k = tokens(expand_heads(key, heads, head_index));
  const at::Tensor v = tokens(expand_heads(value, heads, head_index));
  const at::Tensor lse = logsumexp.contiguous();
  const Sequences seqs = sequences_of(query, key, packed ? std::optional<at::Tensor>(cum_seq_q) : std::nullopt,
                                      packed ? std::optional<at::Tensor>(cum_seq_k) : std::nullopt);
  const int64_t vdim = v.size(2);
  at::Tensor grad_q = at::empty_like(q), grad_k = at::empty_like(k), grad_v = at::empty_like(v);
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(dim)));
  const kernels::DType dtype = to_kernel_dtype(q.scalar_type());
  kernels::AttentionLayout layout;
  layout.q = token_strides(q);
  layout.k = token_strides(k);
  layout.v = token_strides(v);
  layout.out = token_strides(o);
  layout.grad_out = token_strides(go);
  layout.grad_q = token_strides(grad_q);
  layout.grad_k = token_strides(grad_k);
  layout.grad_v = token_strides(grad_v);
  const size_t item = q.element_size();
  const void *pgo = go.data_ptr(), *pq = q.data_ptr(), *pk = k.data_ptr(), *pv = v.data_ptr(), *po = o.data_ptr();
  const float* pl = lse.data_ptr<float>();
  void *pgq = grad_q.data_ptr(), *pgk = grad_k.data_ptr(), *pgv = grad_v.data_ptr();
  const int64_t total = q.size(0), k_total = k.size(0);
  enqueue(grad_q, op, {&go, &q, &k, &v, &o, &lse}, [=] {
    // Keys no query attends to (past the last sequence) get zero gradients.
    std::memset(pgk, 0, static_cast<size_t>(k_total * heads * dim) * item);
    std::memset(pgv, 0, static_cast<size_t>(k_total * heads * vdim) * item);
    std::memset(pgq, 0, static_cast<size_t>(total * heads * dim) * item);
    std::vector<float> row_lse;
    for (int64_t i = 0; i < seqs.count; ++i) {
      const kernels::AttentionShape shape = sequence_shape(seqs, i, heads, dim, vdim);
      if (shape.q_len <= 0 || shape.kv_len <= 0) continue;
      row_lse.resize(static_cast<size_t>(heads * shape.q_len));
      for (int64_t h = 0; h < heads; ++h) {
        const float* src = packed ? pl + h * total + seqs.q_begin(i) : pl + (i * heads + h) * shape.q_len;
        std::memcpy(row_lse.data() + h * shape.q_len, src, sizeof(float) * shape.q_len);
      }
      auto at_q = [&](const void* base, const kernels::HeadStrides& st) {
        return const_cast<char*>(rows_at<char>(base, seqs.q_begin(i), st.row, item));
      };
      auto at_k = [&](const void* base, const kernels::HeadStrides& st) {
        return const_cast<char*>(rows_at<char>(base, seqs.k_begin(i), st.row, item));
      };
      kernels::attention_backward(dtype, shape, layout, at_q(pgo, layout.grad_out), at_q(pq, layout.q),
                                  at_k(pk, layout.k), at_k(pv, layout.v), {}, is_causal, s, at_q(po, layout.out),
                                  row_lse.data(), at_q(pgq, layout.grad_q), at_k(pgk, layout.grad_k),
                                  at_k(pgv, layout.grad_v), nullptr);
    }
  });
  auto shaped = [&](const at::Tensor& g, const at::Tensor& like, int64_t kv) {
    const at::Tensor full = packed ? g : g.reshape({like.size(0), like.size(1), heads, g.size(2)});
    return sum_heads(full, kv, head_index);
  };
  return {shaped(grad_q, query, heads), shaped(grad_k, key, kv_heads), shaped(grad_v, value, kv_heads)};
}

}  // namespace
}  // namespace torchneuron::aten

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_flash_attention_forward", TORCH_FN(torchneuron::aten::flash_attention_forward));
  m.impl("_flash_attention_backward", TORCH_FN(torchneuron::aten::flash_attention_backward));
}
