// scaled_dot_product_attention on neuron. PyTorch asks each backend which implementation to use
// (_fused_sdp_choice_stub); we answer "overrideable" for the cases our memory-efficient kernel
// covers (4-D, no dropout, matching heads) and "math" otherwise, whose decomposition runs on
// native ops. The overrideable forward and backward run csrc/kernels/attention on the queue.
#include <ATen/native/transformers/attention.h>
#include <ATen/SDPBackend.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>
#include <tuple>

#include "aten/ops/layout.h"
#include "aten/device/neuron_tensor.h"
#include "kernels/attention.h"
#include "kernels/floating.h"

namespace torchneuron::aten {
namespace attention {
namespace {

bool floating(const at::Tensor& t) {
  return has_kernel_dtype(t.scalar_type()) && kernels::is_floating_dtype(to_kernel_dtype(t.scalar_type()));
}

int64_t choose_backend(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                       const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                       std::optional<double> scale, bool enable_gqa) {
  const bool mask_ok = !attn_mask.has_value() || !attn_mask->defined() ||
                       attn_mask->scalar_type() == at::kBool || attn_mask->scalar_type() == query.scalar_type();
  const bool shapes_ok = query.dim() == 4 && key.dim() == 4 && value.dim() == 4 && query.size(0) == key.size(0) &&
                         key.size(0) == value.size(0) && query.size(1) == key.size(1) && key.size(1) == value.size(1) &&
                         query.size(3) == key.size(3) && key.size(2) == value.size(2);
  const bool dtypes_ok = floating(query) && key.scalar_type() == query.scalar_type() &&
                         value.scalar_type() == query.scalar_type();
  const bool kernel_covers = dropout_p == 0.0 && mask_ok && shapes_ok && dtypes_ok && !query.is_nested();
  return static_cast<int64_t>(kernel_covers ? at::SDPBackend::overrideable : at::SDPBackend::math);
}

double softmax_scale(const at::Tensor& query, std::optional<double> scale) {
  return scale.value_or(1.0 / std::sqrt(static_cast<double>(query.size(-1))));
}

kernels::AttentionShape attention_shape(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  return {q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), v.size(3)};
}

// The additive bias in the inputs' dtype, expanded (stride 0) to [B, H, L, S]; a bool mask
// becomes 0 where attending and -inf elsewhere.
at::Tensor additive_bias(const at::Tensor& mask, const at::Tensor& q, const at::Tensor& k) {
  if (!mask.defined()) return mask;
  at::Tensor bias = mask.scalar_type() == at::kBool
                        ? at::where(mask, at::zeros_like(mask, q.options()), -std::numeric_limits<double>::infinity())
                        : mask;
  return bias.expand({q.size(0), q.size(1), q.size(2), k.size(2)});
}

// An empty 4-D result laid out like `like` (as PyTorch's meta functions for these ops allocate
// it) when that keeps each row, the last dim, contiguous for the kernel to write; else a
// contiguous one, which in_layout_of copies afterwards.
at::Tensor empty_result_like(const at::Tensor& like, at::IntArrayRef sizes, const at::TensorOptions& options) {
  const std::vector<int64_t> order = dim_order(like.strides());
  if (like.is_contiguous() || order.back() != 3) return at::empty(sizes, options);
  return empty_in_order(order, sizes, options);
}

// `values` laid out like `like`: itself when it already is, else a copy.
at::Tensor in_layout_of(const at::Tensor& like, const at::Tensor& values) {
  const std::vector<int64_t> order = dim_order(like.strides());
  if (like.is_contiguous() || dim_order(values.strides()) == order) return values;
  at::Tensor result = empty_in_order(order, values.sizes(), values.options());
  result.copy_(values);
  return result;
}

// The tensor itself when its rows are contiguous (the kernel reads it through its strides),
// else a contiguous copy.
at::Tensor rows_contiguous(const at::Tensor& t) { return t.size(3) <= 1 || t.stride(3) == 1 ? t : t.contiguous(); }

kernels::HeadStrides head_strides(const at::Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2)}; }

kernels::AttentionBias bias_view(const at::Tensor& bias) {
  kernels::AttentionBias view;
  if (!bias.defined()) return view;
  view.data = bias.data_ptr();
  view.stride_b = bias.stride(0);
  view.stride_h = bias.stride(1);
  view.stride_q = bias.stride(2);
  view.stride_k = bias.stride(3);
  return view;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor, at::Tensor>
fused_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal, bool return_debug_mask,
                std::optional<double> scale) {
  TORCH_CHECK(dropout_p == 0.0, "neuron's fused attention does not apply dropout; the math backend handles dropout_p > 0");
  TORCH_CHECK(query.dim() == 4 && key.dim() == 4 && value.dim() == 4,
              "fused attention expects 4-D query, key and value, got ", query.sizes(), ", ", key.sizes(), ", ", value.sizes());
  const at::Tensor mask = attn_bias.has_value() ? *attn_bias : at::Tensor();
  check_same_device("aten::_scaled_dot_product_fused_attention_overrideable", query.device(), {&key, &value, &mask});
  const at::Tensor q = rows_contiguous(query), k = rows_contiguous(key), v = rows_contiguous(value);
  const at::Tensor bias = additive_bias(mask, q, k);
  const kernels::AttentionShape shape = attention_shape(q, k, v);
  at::Tensor out = empty_result_like(query, {shape.batch, shape.heads, shape.q_len, shape.value_dim}, q.options());
  kernels::AttentionLayout layout;
  layout.q = head_strides(q);
  layout.k = head_strides(k);
  layout.v = head_strides(v);
  layout.out = head_strides(out);
  const auto lse_dtype = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor lse = at::empty({shape.batch, shape.heads, shape.q_len}, q.options().dtype(lse_dtype));
  if (out.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(q.scalar_type());
    const kernels::AttentionBias view = bias_view(bias);
    const double s = softmax_scale(q, scale);
    const void *pq = q.data_ptr(), *pk = k.data_ptr(), *pv = v.data_ptr();
    void *po = out.data_ptr(), *pl = lse.data_ptr();
    enqueue(out, "aten::_scaled_dot_product_fused_attention_overrideable", {&q, &k, &v, &bias},
            [=] { kernels::attention_forward(dtype, shape, layout, pq, pk, pv, view, is_causal, s, po, pl); });
  }
  const at::Tensor none = at::empty({0}, q.options().dtype(at::kLong));
  return {in_layout_of(query, out), lse, none, none, c10::SymInt(shape.q_len), c10::SymInt(shape.kv_len), none, none,
          at::empty({0}, q.options())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out, const at::Tensor& logsumexp,
    const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k, c10::SymInt max_q, c10::SymInt max_k, double dropout_p,
    bool is_causal, const at::Tensor& philox_seed, const at::Tensor& philox_offset, std::optional<double> scale) {
  // An undefined output gradient (autograd's undefined-gradient check) gives undefined input gradients.
  if (!grad_out.defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  TORCH_CHECK(dropout_p == 0.0, "neuron's fused attention backward does not apply dropout");
  check_same_device("aten::_scaled_dot_product_fused_attention_overrideable_backward", query.device(),
                    {&grad_out, &key, &value, &attn_bias, &out, &logsumexp});
  const at::Tensor q = rows_contiguous(query), k = rows_contiguous(key), v = rows_contiguous(value);
  const at::Tensor go = rows_contiguous(grad_out), o = rows_contiguous(out), lse = logsumexp.contiguous();
  const at::Tensor bias = additive_bias(attn_bias, q, k);
  const kernels::AttentionShape shape = attention_shape(q, k, v);
  at::Tensor grad_q = grad_input_mask[0] ? empty_result_like(query, q.sizes(), q.options()) : at::Tensor();
  at::Tensor grad_k = grad_input_mask[1] ? empty_result_like(key, k.sizes(), k.options()) : at::Tensor();
  at::Tensor grad_v = grad_input_mask[2] ? empty_result_like(value, v.sizes(), v.options()) : at::Tensor();
  kernels::AttentionLayout layout;
  layout.q = head_strides(q);
  layout.k = head_strides(k);
  layout.v = head_strides(v);
  layout.out = head_strides(o);
  layout.grad_out = head_strides(go);
  if (grad_q.defined()) layout.grad_q = head_strides(grad_q);
  if (grad_k.defined()) layout.grad_k = head_strides(grad_k);
  if (grad_v.defined()) layout.grad_v = head_strides(grad_v);
  const bool want_bias = grad_input_mask[3] && attn_bias.defined() && attn_bias.scalar_type() != at::kBool;
  at::Tensor grad_full_bias = want_bias ? at::empty({shape.batch, shape.heads, shape.q_len, shape.kv_len}, q.options())
                                        : at::Tensor();
  if (grad_k.defined() && shape.q_len == 0) grad_k.zero_();
  if (grad_v.defined() && shape.q_len == 0) grad_v.zero_();
  if (q.numel() + k.numel() > 0 && shape.q_len > 0) {
    const kernels::DType dtype = to_kernel_dtype(q.scalar_type());
    const kernels::AttentionBias view = bias_view(bias);
    const double s = softmax_scale(q, scale);
    const void *pgo = go.data_ptr(), *pq = q.data_ptr(), *pk = k.data_ptr(), *pv = v.data_ptr();
    const void *po = o.data_ptr(), *pl = lse.data_ptr();
    auto ptr = [](const at::Tensor& t) -> void* { return t.defined() && t.numel() > 0 ? t.data_ptr() : nullptr; };
    void *pgq = ptr(grad_q), *pgk = ptr(grad_k), *pgv = ptr(grad_v), *pgb = ptr(grad_full_bias);
    enqueue(q, "aten::_scaled_dot_product_fused_attention_overrideable_backward", {&go, &q, &k, &v, &o, &lse}, [=] {
      kernels::attention_backward(dtype, shape, layout, pgo, pq, pk, pv, view, is_causal, s, po, pl, pgq, pgk, pgv, pgb);
    });
  }
  at::Tensor grad_bias;
  if (want_bias) {  // sum over the dims the bias was broadcast along
    std::vector<int64_t> dims;
    const int64_t offset = 4 - attn_bias.dim();
    for (int64_t d = 0; d < 4; ++d) {
      if (d < offset || attn_bias.size(d - offset) == 1) dims.push_back(d);
    }
    grad_bias = dims.empty() ? grad_full_bias : at::sum(grad_full_bias, dims, /*keepdim=*/true);
    grad_bias = grad_bias.reshape(attn_bias.sizes());
  }
  auto like = [](const at::Tensor& model, const at::Tensor& t) { return t.defined() ? in_layout_of(model, t) : t; };
  return {like(query, grad_q), like(key, grad_k), like(value, grad_v), grad_bias};
}

}  // namespace attention

}  // namespace torchneuron::aten

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torchneuron::aten::attention::choose_backend)
}  // namespace at::native

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(torchneuron::aten::attention::fused_attention));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
         TORCH_FN(torchneuron::aten::attention::fused_attention_backward));
}
