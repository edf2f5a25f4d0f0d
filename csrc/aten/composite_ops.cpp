// Operators composed on the host from native neuron operators, for ATen ops whose own kernels
// are backend-specific: dropout, tril/triu masks, all/any and isposinf/isneginf, flip, half-type
// addr, weight norm. Every step dispatches to a native kernel; nothing runs on the CPU.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/addr_native.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/div.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/index_copy.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/_unique2.h>
#include <ATen/ops/le.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

namespace torchneuron::aten {
namespace composite {

// Keeps each element with probability 1 - p and scales kept ones by 1 / (1 - p); the mask is
// drawn from the device generator.
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  if (!train.value_or(true) || p == 0) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  if (p == 1) {
    return {at::zeros_like(input), at::zeros_like(input, input.options().dtype(at::kBool))};
  }
  at::Tensor noise = at::empty_like(input, input.options().dtype(at::isFloatingType(input.scalar_type()) ? input.scalar_type() : at::kFloat));
  noise.uniform_(0.0, 1.0);
  at::Tensor mask = at::lt(noise, 1.0 - p);
  at::Tensor output = at::mul(at::mul(input, mask), 1.0 / (1.0 - p));
  return {output, mask};
}

// nn.Embedding(max_norm=...): rows that the indices name and whose norm passes max_norm are
// scaled to max_norm (over norm + 1e-7, as CPU PyTorch), each row once, composed of native ops.
at::Tensor& embedding_renorm_(at::Tensor& self, const at::Tensor& indices, double max_norm, double norm_type) {
  TORCH_CHECK(self.dim() == 2, "embedding_renorm_(): expected self to be 2-D, got ", self.dim(), "-D");
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "embedding_renorm_(): Expected indices to have type Long or Int, got ", indices.scalar_type());
  const at::Tensor rows_index = std::get<0>(at::_unique2(indices.reshape({-1}).to(at::kLong), true, false, false));
  const at::Tensor rows = self.index_select(0, rows_index);
  const at::Tensor norms = at::linalg_vector_norm(rows, norm_type, {1}, true, std::nullopt);
  const at::Tensor scale = at::where(at::gt(norms, max_norm), at::div(at::full_like(norms, max_norm), norms.add(1e-7)),
                                     at::ones_like(norms));
  return self.index_copy_(0, rows_index, at::mul(rows, scale));
}

at::Tensor native_dropout_backward(const at::Tensor& grad_output, const at::Tensor& mask, double scale) {
  return at::mul(at::mul(grad_output, mask), scale);
}

// Elements with column - row <= diagonal (tril) or >= diagonal (triu) of the last two dims.
at::Tensor triangle_mask(const at::Tensor& self, int64_t diagonal, bool lower) {
  TORCH_CHECK(self.dim() >= 2, lower ? "tril" : "triu", ": input tensor must have at least 2 dimensions");
  const auto options = self.options().dtype(at::kLong);
  at::Tensor rows = at::arange(self.size(-2), options).unsqueeze(1);
  at::Tensor cols = at::arange(self.size(-1), options);
  at::Tensor offset = at::sub(cols, rows);
  return lower ? at::le(offset, diagonal) : at::ge(offset, diagonal);
}

at::Tensor& tril_out(const at::Tensor& self, int64_t diagonal, at::Tensor& result) {
  at::Tensor value = at::where(triangle_mask(self, diagonal, true), self, at::zeros_like(self));
  at::native::resize_output(result, self.sizes());
  return result.copy_(value);
}

at::Tensor& triu_out(const at::Tensor& self, int64_t diagonal, at::Tensor& result) {
  at::Tensor value = at::where(triangle_mask(self, diagonal, false), self, at::zeros_like(self));
  at::native::resize_output(result, self.sizes());
  return result.copy_(value);
}

at::Tensor tril(const at::Tensor& self, int64_t diagonal) {
  at::Tensor result = at::empty({0}, self.options());
  return tril_out(self, diagonal, result);
}

at::Tensor triu(const at::Tensor& self, int64_t diagonal) {
  at::Tensor result = at::empty({0}, self.options());
  return triu_out(self, diagonal, result);
}

at::Tensor& tril_inplace(at::Tensor& self, int64_t diagonal) { return tril_out(self.clone(), diagonal, self); }
at::Tensor& triu_inplace(at::Tensor& self, int64_t diagonal) { return triu_out(self.clone(), diagonal, self); }

// all / any: a min / max reduction of the truth values.
at::Tensor& truth_reduce_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, bool all,
                             at::Tensor& result) {
  const at::Tensor truth = self.scalar_type() == at::kBool ? self : at::ne(self, 0);
  const std::vector<int64_t> dims = dim.has_value() ? dim->vec() : std::vector<int64_t>{};
  at::Tensor value;
  if (truth.numel() == 0) {
    // Empty reductions: all() is true and any() is false, in the shape a sum would have.
    value = at::full_like(at::sum(truth, dim, keepdim), all, truth.options().dtype(at::kBool));
  } else {
    value = all ? at::amin(truth, dims, keepdim) : at::amax(truth, dims, keepdim);
  }
  at::native::resize_output(result, value.sizes());
  return result.copy_(value);
}

at::Tensor truth_reduce(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, bool all) {
  const auto dtype = self.scalar_type() == at::kByte ? at::kByte : at::kBool;
  at::Tensor result = at::empty({0}, self.options().dtype(dtype));
  return truth_reduce_out(self, dim, keepdim, all, result);
}

at::Tensor all_full(const at::Tensor& self) { return truth_reduce(self, std::nullopt, false, true); }
at::Tensor& all_full_out(const at::Tensor& self, at::Tensor& out) { return truth_reduce_out(self, std::nullopt, false, true, out); }
at::Tensor all_dim(const at::Tensor& self, int64_t dim, bool keepdim) { return truth_reduce(self, at::IntArrayRef{dim}, keepdim, true); }
at::Tensor& all_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {
  return truth_reduce_out(self, at::IntArrayRef{dim}, keepdim, true, out);
}
at::Tensor all_dims(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) { return truth_reduce(self, dim, keepdim, true); }
at::Tensor& all_dims_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, at::Tensor& out) {
  return truth_reduce_out(self, dim, keepdim, true, out);
}
at::Tensor any_full(const at::Tensor& self) { return truth_reduce(self, std::nullopt, false, false); }
at::Tensor& any_full_out(const at::Tensor& self, at::Tensor& out) { return truth_reduce_out(self, std::nullopt, false, false, out); }
at::Tensor any_dim(const at::Tensor& self, int64_t dim, bool keepdim) { return truth_reduce(self, at::IntArrayRef{dim}, keepdim, false); }
at::Tensor& any_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {
  return truth_reduce_out(self, at::IntArrayRef{dim}, keepdim, false, out);
}
at::Tensor any_dims(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) { return truth_reduce(self, dim, keepdim, false); }
at::Tensor& any_dims_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, at::Tensor& out) {
  return truth_reduce_out(self, dim, keepdim, false, out);
}

at::Tensor& infinity_test_out(const at::Tensor& self, bool negative, at::Tensor& result) {
  TORCH_CHECK(!self.is_complex(), negative ? "isneginf" : "isposinf", " does not support complex inputs.");
  at::Tensor value = at::isFloatingType(self.scalar_type())
                         ? at::eq(self, negative ? -std::numeric_limits<double>::infinity()
                                                 : std::numeric_limits<double>::infinity())
                         : at::zeros_like(self, self.options().dtype(at::kBool));
  at::native::resize_output(result, value.sizes());
  return result.copy_(value);
}

at::Tensor isneginf(const at::Tensor& self) {
  at::Tensor result = at::empty({0}, self.options().dtype(at::kBool));
  return infinity_test_out(self, true, result);
}
at::Tensor& isneginf_out(const at::Tensor& self, at::Tensor& result) { return infinity_test_out(self, true, result); }
at::Tensor isposinf(const at::Tensor& self) {
  at::Tensor result = at::empty({0}, self.options().dtype(at::kBool));
  return infinity_test_out(self, false, result);
}
at::Tensor& isposinf_out(const at::Tensor& self, at::Tensor& result) { return infinity_test_out(self, false, result); }

// Reversal along each dim: an index_select with a descending arange (both native).
at::Tensor flip(const at::Tensor& self, at::IntArrayRef dims) {
  at::Tensor result = self;
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(self.dim(), 1)), false);
  for (int64_t dim : dims) {
    const int64_t d = at::maybe_wrap_dim(dim, self.dim());
    TORCH_CHECK(!seen[d], "dim ", d, " appears multiple times in the list of dims");
    seen[d] = true;
    if (self.dim() == 0 || self.size(d) <= 1) continue;
    result = result.index_select(d, at::arange(self.size(d) - 1, -1, -1, self.options().dtype(at::kLong)));
  }
  return result.is_same(self) ? self.clone() : result;
}

// beta * self + alpha * (vec1 ⊗ vec2). ATen's composite rounds both terms to a half type before
// adding them (up to 2 units off); computed in float32, the result is rounded once (on OpInfo's
// samples, nearer the float64 result than CPU PyTorch's own half-type kernel).
at::Tensor addr(const at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2, const at::Scalar& beta,
                const at::Scalar& alpha) {
  const c10::ScalarType dtype = self.scalar_type();
  if ((dtype != at::kBFloat16 && dtype != at::kHalf) || vec1.scalar_type() != dtype || vec2.scalar_type() != dtype) {
    return at::native::math_addr(self, vec1, vec2, beta, alpha);
  }
  return at::native::math_addr(self.to(at::kFloat), vec1.to(at::kFloat), vec2.to(at::kFloat), beta, alpha).to(dtype);
}

// Weight norm (torch.nn.utils.weight_norm's fused form): w = v * (g / ||v||), the norm over every
// dim but `dim`, computed in float for bfloat16 and float16.
at::ScalarType weight_norm_accumulate_type(at::ScalarType type) {
  return type == at::kBFloat16 || type == at::kHalf ? at::kFloat : type;
}

std::vector<int64_t> dims_except(const at::Tensor& v, int64_t dim) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < v.dim(); ++d) {
    if (d != dim) dims.push_back(d);
  }
  return dims;
}

std::tuple<at::Tensor, at::Tensor> weight_norm_interface(const at::Tensor& v, const at::Tensor& g, int64_t dim) {
  TORCH_CHECK(v.device() == g.device(), "weight_norm: v and g must be on the same device, but got ", v.device(),
              " and ", g.device());
  TORCH_CHECK(v.dim() > 0, "weight_norm: v must have at least one dimension");
  const int64_t wrapped = at::maybe_wrap_dim(dim, v.dim());
  TORCH_CHECK(g.numel() == v.size(wrapped), "weight_norm: g must have one element per slice of v along dim ", dim,
              " (", v.size(wrapped), "), but has ", g.numel());
  const at::ScalarType accumulate = weight_norm_accumulate_type(g.scalar_type());
  const at::Tensor v_acc = v.to(accumulate);
  const at::Tensor norm = at::sqrt(at::sum(at::mul(v_acc, v_acc), dims_except(v, wrapped), /*keepdim=*/true));
  const at::Tensor w = at::mul(v_acc, at::div(g.reshape(norm.sizes()).to(accumulate), norm)).to(v.scalar_type());
  // The norms' dtype as CPU PyTorch gives it: float for bfloat16, else g's.
  at::Tensor norm_out = at::empty_strided(g.sizes(), g.strides(),
                                          g.options().dtype(g.scalar_type() == at::kBFloat16 ? at::kFloat : g.scalar_type()));
  norm_out.copy_(norm.reshape(g.sizes()));
  return {w.contiguous(), norm_out};
}

// grad_g = sum(grad_w v) / ||v||; grad_v = (g / ||v||) (grad_w - v sum(grad_w v) / ||v||^2).
std::tuple<at::Tensor, at::Tensor> weight_norm_interface_backward(const at::Tensor& grad_w, const at::Tensor& saved_v,
                                                                  const at::Tensor& saved_g,
                                                                  const at::Tensor& saved_norms, int64_t dim) {
  const int64_t wrapped = at::maybe_wrap_dim(dim, saved_v.dim());
  const at::ScalarType accumulate = weight_norm_accumulate_type(saved_g.scalar_type());
  const at::Tensor v = saved_v.to(accumulate);
  const at::Tensor grad = grad_w.to(accumulate);
  const auto dims = dims_except(saved_v, wrapped);
  const at::Tensor dot = at::sum(at::mul(grad, v), dims, /*keepdim=*/true);
  const at::Tensor norm = saved_norms.to(accumulate).reshape(dot.sizes());
  const at::Tensor g = saved_g.to(accumulate).reshape(dot.sizes());
  const at::Tensor grad_g = at::div(dot, norm);
  const at::Tensor grad_v = at::mul(at::div(g, norm), at::sub(grad, at::mul(v, at::div(grad_g, norm))));
  return {grad_v.to(saved_v.scalar_type()).contiguous(),
          grad_g.reshape(saved_g.sizes()).to(saved_g.scalar_type()).contiguous()};
}

}  // namespace composite

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("addr", TORCH_FN(composite::addr));
  m.impl("flip", TORCH_FN(composite::flip));
  m.impl("_weight_norm_interface", TORCH_FN(composite::weight_norm_interface));
  m.impl("_weight_norm_interface_backward", TORCH_FN(composite::weight_norm_interface_backward));
  m.impl("native_dropout", TORCH_FN(composite::native_dropout));
  m.impl("native_dropout_backward", TORCH_FN(composite::native_dropout_backward));
  m.impl("embedding_renorm_", TORCH_FN(composite::embedding_renorm_));
  m.impl("tril", TORCH_FN(composite::tril));
  m.impl("tril.out", TORCH_FN(composite::tril_out));
  m.impl("tril_", TORCH_FN(composite::tril_inplace));
  m.impl("triu", TORCH_FN(composite::triu));
  m.impl("triu.out", TORCH_FN(composite::triu_out));
  m.impl("triu_", TORCH_FN(composite::triu_inplace));
  m.impl("all", TORCH_FN(composite::all_full));
  m.impl("all.all_out", TORCH_FN(composite::all_full_out));
  m.impl("all.dim", TORCH_FN(composite::all_dim));
  m.impl("all.out", TORCH_FN(composite::all_dim_out));
  m.impl("all.dims", TORCH_FN(composite::all_dims));
  m.impl("all.dims_out", TORCH_FN(composite::all_dims_out));
  m.impl("any", TORCH_FN(composite::any_full));
  m.impl("any.all_out", TORCH_FN(composite::any_full_out));
  m.impl("any.dim", TORCH_FN(composite::any_dim));
  m.impl("any.out", TORCH_FN(composite::any_dim_out));
  m.impl("any.dims", TORCH_FN(composite::any_dims));
  m.impl("any.dims_out", TORCH_FN(composite::any_dims_out));
  m.impl("isneginf", TORCH_FN(composite::isneginf));
  m.impl("isneginf.out", TORCH_FN(composite::isneginf_out));
  m.impl("isposinf", TORCH_FN(composite::isposinf));
  m.impl("isposinf.out", TORCH_FN(composite::isposinf_out));
}

}  // namespace torchneuron::aten
