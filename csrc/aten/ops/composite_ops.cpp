// Operators composed on the host from native neuron operators, for ATen ops whose own kernels
// are backend-specific: dropout, addbmm (as one addmm), all/any and isposinf/isneginf, flip, half-type
// addr, weight norm, equal, nansum, aminmax, count_nonzero, isin, repeat_interleave's indices,
// channel_shuffle, linalg.cross, vdot, torch.complex / polar and unique_consecutive. Every step dispatches to
// a native kernel; nothing runs on the CPU.
#include <ATen/Context.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_unique2.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/add.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/addr_native.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/any.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/div.h>
#include <ATen/ops/dot.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/full.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/i0.h>
#include <ATen/ops/index.h>
#include <ATen/ops/index_copy.h>
#include <ATen/ops/index_put.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/masked_fill.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/reshape.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/WrapDimUtils.h>
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

// all / any: a min / max reduction of the truth values. An empty dim list reduces nothing (unlike
// sum's, which reduces every dim): the truth values themselves, as on the CPU.
at::Tensor& truth_reduce_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, bool all,
                             at::Tensor& result) {
  TORCH_CHECK(result.scalar_type() == at::kBool || result.scalar_type() == at::kByte, all ? "all" : "any",
              " only supports bool tensor for result, got: ", result.scalar_type());
  const at::Tensor truth = self.scalar_type() == at::kBool ? self : at::ne(self, 0);
  const std::vector<int64_t> dims = dim.has_value() ? dim->vec() : std::vector<int64_t>{};
  at::Tensor value;
  if (dim.has_value() && dims.empty()) {
    value = truth;
  } else if (truth.numel() == 0) {
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
  TORCH_CHECK(result.scalar_type() == at::kBool, negative ? "isneginf" : "isposinf",
              " does not support non-boolean outputs.");
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

// Reversal along each dim: an index_select with a descending arange (both native), in self's
// layout where CPU keeps it (empty_like's preserve rule: a channels-last input stays so).
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
  if (result.is_same(self)) return self.clone();
  const at::Tensor like = self.is_contiguous() ? result : at::empty_like(self);  // CPU keeps self's layout
  return like.is_contiguous() ? result : like.copy_(result);
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

// beta * self + alpha * sum over i of batch1[i] @ batch2[i], as one addmm: the batch and inner
// dims are one sum, so [b, n, m] @ [b, m, p] is [n, b m] @ [b m, p].
at::Tensor& addbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                       const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  TORCH_CHECK(batch1.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(batch2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(batch1.size(0) == batch2.size(0), "batch1 and batch2 must have same number of batches, got ",
              batch1.size(0), " and ", batch2.size(0));
  TORCH_CHECK(batch1.size(2) == batch2.size(1), "Incompatible matrix sizes for bmm (", batch1.size(1), "x",
              batch1.size(2), " and ", batch2.size(1), "x", batch2.size(2), ")");
  const int64_t batches = batch1.size(0), n = batch1.size(1), m = batch1.size(2), p = batch2.size(2);
  if (self.is_complex() && batches > 0) {  // CPU's order, one addmm_ per batch (complex GEMMs round per batch there)
    at::native::resize_output(out, {n, p});
    out.copy_(self.expand({n, p}));
    for (int64_t b = 0; b < batches; ++b) out.addmm_(batch1[b], batch2[b], b == 0 ? beta : at::Scalar(1), alpha);
    return out;
  }
  const at::Tensor left = batch1.permute({1, 0, 2}).reshape({n, batches * m});
  const at::Tensor right = batch2.reshape({batches * m, p});
  return at::addmm_out(out, self.expand({n, p}), left, right, beta, alpha);
}

at::Tensor addbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const at::Scalar& beta,
                  const at::Scalar& alpha) {
  at::Tensor out = at::empty({0}, self.options());
  return addbmm_out(self, batch1, batch2, beta, alpha, out);
}

at::Tensor& addbmm_(at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const at::Scalar& beta,
                    const at::Scalar& alpha) {
  return self.copy_(composite::addbmm(self, batch1, batch2, beta, alpha));
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

// ---- comparisons, counts and searches ------------------------------------------------------

// torch.equal: same sizes and equal elements (after type promotion, as on CPU); one sync.
bool equal(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(), "Cannot compare two tensors on different devices. Got: ", self.device(),
              " and ", other.device());
  if (!self.is_same_size(other)) return false;
  if (self.numel() == 0) return true;
  return at::eq(self, other).all().item<bool>();
}

at::Tensor& nansum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<c10::ScalarType> dtype, at::Tensor& result) {
  TORCH_CHECK(!c10::isComplexType(self.scalar_type()), "nansum does not support complex inputs");
  const at::Tensor values = at::isFloatingType(self.scalar_type()) ? self.masked_fill(at::isnan(self), 0) : self;
  return at::sum_out(result, values, dim, keepdim, dtype);
}

at::Tensor nansum(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                  std::optional<c10::ScalarType> dtype) {
  TORCH_CHECK(!c10::isComplexType(self.scalar_type()), "nansum does not support complex inputs");
  const at::Tensor values = at::isFloatingType(self.scalar_type()) ? self.masked_fill(at::isnan(self), 0) : self;
  return at::sum(values, dim, keepdim, dtype);
}

std::tuple<at::Tensor, at::Tensor> aminmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  if (dim.has_value()) return {at::amin(self, {*dim}, keepdim), at::amax(self, {*dim}, keepdim)};
  TORCH_CHECK(self.numel() > 0, "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.");
  const at::Tensor flat = self.reshape({-1});
  at::Tensor lo = at::amin(flat, {0}), hi = at::amax(flat, {0});
  if (keepdim) {
    const std::vector<int64_t> ones(static_cast<size_t>(self.dim()), 1);
    return {lo.reshape(ones), hi.reshape(ones)};
  }
  return {lo, hi};
}

std::tuple<at::Tensor&, at::Tensor&> aminmax_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                                                 at::Tensor& min, at::Tensor& max) {
  auto [lo, hi] = composite::aminmax(self, dim, keepdim);
  at::native::resize_output(min, lo.sizes());
  at::native::resize_output(max, hi.sizes());
  min.copy_(lo);
  max.copy_(hi);
  return {min, max};
}

at::Tensor count_nonzero(const at::Tensor& self, at::IntArrayRef dim) { return at::ne(self, 0).sum(dim); }

// isin: a comparison with every test element for small test sets, else a binary search in the
// sorted test elements. NaN is in nothing, as on CPU.
at::Tensor& isin_out(const at::Tensor& elements, const at::Tensor& test_elements, bool assume_unique, bool invert,
                     at::Tensor& result) {
  const c10::ScalarType common = at::result_type(elements, test_elements);
  const at::Tensor values = elements.to(common);
  const at::Tensor tests = test_elements.to(common).reshape({-1});
  at::Tensor found;
  if (tests.numel() <= 64) {
    found = at::eq(values.unsqueeze(-1), tests).any(-1);
  } else {
    const at::Tensor sorted = std::get<0>(at::sort(tests));
    const at::Tensor position = at::searchsorted(sorted, values.reshape({-1})).clamp_max(tests.numel() - 1);
    found = at::eq(sorted.index_select(0, position).view(values.sizes()), values);
  }
  if (invert) found = at::logical_not(found);
  at::native::resize_output(result, elements.sizes());
  return result.copy_(found);
}

at::Tensor isin(const at::Tensor& elements, const at::Tensor& test_elements, bool assume_unique, bool invert) {
  at::Tensor result = at::empty({0}, elements.options().dtype(at::kBool));
  return isin_out(elements, test_elements, assume_unique, invert, result);
}

// repeat_interleave(repeats): index i repeated repeats[i] times, found by a binary search of
// each output position in the running totals. One sync, for the size and the sign check.
at::Tensor repeat_interleave_indices(const at::Tensor& repeats, std::optional<c10::SymInt> output_size) {
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK(repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
              "repeats has to be Long or Int tensor");
  if (repeats.numel() == 0) return at::empty({0}, repeats.options());
  const at::Tensor totals = at::cumsum(repeats, 0, at::kLong);
  const at::Tensor facts = at::stack({totals[-1], repeats.min().to(at::kLong)}).cpu();
  const int64_t total = facts[0].item<int64_t>();
  TORCH_CHECK(facts[1].item<int64_t>() >= 0, "repeats can not be negative");
  TORCH_CHECK(!output_size.has_value() || output_size->expect_int() == total, "allocated size does not match required size");
  const at::Tensor positions = at::arange(total, repeats.options().dtype(at::kLong));
  return at::searchsorted(totals, positions, repeats.scalar_type() == at::kInt, /*right=*/true);
}

at::Tensor channel_shuffle(const at::Tensor& self, int64_t groups) {
  TORCH_CHECK(self.dim() > 2, "channel_shuffle expects input to have at least 3 dimensions, but got input with sizes ",
              self.sizes());
  TORCH_CHECK(groups > 0, "Number of groups to divide channels in must be positive.", " Value of groups:", groups);
  const int64_t channels = self.size(1);
  TORCH_CHECK(channels % groups == 0, "Number of channels must be divisible by groups. Got ", channels,
              " channels and ", groups, " groups.");
  if (self.numel() == 0) return self.clone();
  const at::Tensor shuffled =
      self.reshape({self.size(0), groups, channels / groups, -1}).transpose(1, 2).reshape(self.sizes());
  return shuffled.contiguous(self.suggest_memory_format());
}

// linalg.cross over a dim of length 3, inputs broadcast; each component rounds like CPU's.
at::Tensor& linalg_cross_out(const at::Tensor& self, const at::Tensor& other, int64_t dim, at::Tensor& result) {
  TORCH_CHECK(self.dim() == other.dim(), "linalg.cross: inputs must have the same number of dimensions.");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "expected scalar type ", self.scalar_type(), " but found ",
              other.scalar_type());
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(self.size(d) == 3 && other.size(d) == 3, "linalg.cross: inputs dimension ", dim,
              " must have length 3. Got ", self.size(d), " and ", other.size(d));
  const std::vector<int64_t> shape = at::infer_size(self.sizes(), other.sizes());
  const at::Tensor x = self.expand(shape), y = other.expand(shape);
  // Component i: x[j] y[k] - x[k] y[j] for the next two indices j, k.
  auto component = [&](int64_t j, int64_t k) {
    return at::sub(at::mul(x.select(d, j), y.select(d, k)), at::mul(x.select(d, k), y.select(d, j)));
  };
  const at::Tensor value = at::stack({component(1, 2), component(2, 0), component(0, 1)}, d);
  at::native::resize_output(result, shape);
  return result.copy_(value);
}

at::Tensor linalg_cross(const at::Tensor& self, const at::Tensor& other, int64_t dim) {
  at::Tensor result = at::empty({0}, self.options());
  return linalg_cross_out(self, other, dim, result);
}

// vdot: dot with the first vector conjugated (a lazy conjugate, which the product resolves).
at::Tensor vdot(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.dim() == 1 && other.dim() == 1, "1D tensors expected, but got ", self.dim(), "D and ", other.dim(),
              "D tensors");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "vdot : expected both vectors to have same dtype, but found ",
              self.scalar_type(), " and ", other.scalar_type());
  return at::dot(self.conj(), other);
}

// torch.complex and torch.polar: the real and imaginary parts written into the two halves of
// the result's (real, imaginary) pairs by native copies (polar's from native cos, sin and mul).
void check_complex_parts(const at::Tensor& first, const at::Tensor& second, const at::Tensor& result) {
  TORCH_CHECK(first.scalar_type() == second.scalar_type(), "Expected object of scalar type ", first.scalar_type(),
              " but got scalar type ", second.scalar_type(), " for second argument");
  TORCH_CHECK(at::isFloatingType(first.scalar_type()), "Expected both inputs to be Half, Float or Double tensors but got ",
              first.scalar_type(), " and ", second.scalar_type());
  const c10::ScalarType expected = c10::toComplexType(first.scalar_type());
  TORCH_CHECK(result.scalar_type() == expected, "Expected object of scalar type ", expected, " but got scalar type ",
              result.scalar_type(), " for argument 'out'");
}

at::Tensor& write_complex_parts(const at::Tensor& real, const at::Tensor& imag, at::Tensor& result) {
  const std::vector<int64_t> shape = at::infer_size(real.sizes(), imag.sizes());
  at::native::resize_output(result, shape);
  const at::Tensor pairs = at::view_as_real(result.is_conj() ? result.conj() : result);
  pairs.select(-1, 0).copy_(real.expand(shape));
  pairs.select(-1, 1).copy_(result.is_conj() ? at::neg(imag).expand(shape) : imag.expand(shape));
  return result;
}

at::Tensor& complex_out(const at::Tensor& real, const at::Tensor& imag, at::Tensor& result) {
  check_complex_parts(real, imag, result);
  return write_complex_parts(real, imag, result);
}

at::Tensor& polar_out(const at::Tensor& abs, const at::Tensor& angle, at::Tensor& result) {
  check_complex_parts(abs, angle, result);
  return write_complex_parts(at::mul(abs, at::cos(angle)), at::mul(abs, at::sin(angle)), result);
}

// kaiser_window: I0(beta sqrt(1 - ((n - a) / a)^2)) / I0(beta) over n = 0 .. N-1, a = (N - 1) / 2
// (N one more, and the last point dropped, when periodic). CPU PyTorch computes it with a
// kernel stub that has no entry for other devices: without this, torch.kaiser_window on neuron
// raised an internal assert.
at::Tensor kaiser_window(int64_t window_length, bool periodic, double beta, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<at::Device> device, std::optional<bool> pin_memory) {
  const at::TensorOptions options =
      at::TensorOptions().dtype(dtype).layout(layout).device(device).pinned_memory(pin_memory);
  TORCH_CHECK(window_length >= 0, "kaiser_window requires non-negative window_length, got window_length=", window_length);
  TORCH_CHECK(options.layout() == at::kStrided, "kaiser_window is not implemented for sparse types, got: ", options);
  TORCH_CHECK(at::isFloatingType(at::typeMetaToScalarType(options.dtype())),
              "kaiser_window expects floating point dtypes, got: ", options);
  if (window_length == 0) return at::empty({0}, options);
  if (window_length == 1) return at::ones({1}, options);
  const int64_t points = periodic ? window_length + 1 : window_length;
  const double half = (points - 1) / 2.0;
  const at::Tensor ratio = at::div(at::sub(at::arange(points, options), half), half);
  const at::Tensor window = at::div(at::i0(at::mul(at::sqrt(at::rsub(at::mul(ratio, ratio), 1)), beta)),
                                    at::i0(at::full({}, beta, options)));
  return periodic ? window.narrow(0, 0, window_length) : window;
}
// The shorter overloads call the beta form directly, not through the dispatcher: periodic, beta 12.
at::Tensor kaiser_window_periodic(int64_t window_length, bool periodic, std::optional<at::ScalarType> dtype,
                                  std::optional<at::Layout> layout, std::optional<at::Device> device,
                                  std::optional<bool> pin_memory) {
  return kaiser_window(window_length, periodic, 12.0, dtype, layout, device, pin_memory);
}
at::Tensor kaiser_window_default(int64_t window_length, std::optional<at::ScalarType> dtype,
                                 std::optional<at::Layout> layout, std::optional<at::Device> device,
                                 std::optional<bool> pin_memory) {
  return kaiser_window(window_length, true, 12.0, dtype, layout, device, pin_memory);
}

// unique_consecutive: where a run starts (the first element, and each one that differs from
// the one before; NaN differs from everything, as on CPU), then the run starts selected, the
// run index of every element, and the run lengths. One sync, for the number of runs.
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_consecutive(const at::Tensor& self, bool return_inverse,
                                                                  bool return_counts, std::optional<int64_t> dim) {
  const at::Tensor values = dim.has_value() ? self : self.reshape({-1});
  const int64_t d = dim.has_value() ? at::maybe_wrap_dim(*dim, self.dim()) : 0;
  TORCH_CHECK(!dim.has_value() || self.dim() > 0, "unique_consecutive: dim is out of range for a 0-dim tensor");
  const int64_t n = values.dim() == 0 ? 1 : values.size(d);
  const at::TensorOptions index_options = self.options().dtype(at::kLong);
  if (n == 0) {  // CPU's shapes: the inverse of a flattened empty input keeps the input's shape
    const std::vector<int64_t> inverse_shape =
        return_inverse && !dim.has_value() ? self.sizes().vec() : std::vector<int64_t>{0};
    return {values.clone(), at::empty(inverse_shape, index_options), at::empty({0}, index_options)};
  }
  // starts[i]: element (or slice) i begins a run.
  at::Tensor differs = at::ne(values.narrow(d, 1, n - 1), values.narrow(d, 0, n - 1));
  if (dim.has_value() && values.dim() > 1) {
    differs = differs.movedim(d, 0).reshape({n - 1, -1}).any(1);  // a slice differs where any element does
  }
  const at::Tensor starts = at::cat({at::ones({1}, differs.options()), differs});
  const at::Tensor first = at::nonzero(starts).reshape({-1});  // syncs for the run count
  const at::Tensor output = values.index_select(d, first);
  at::Tensor inverse = at::empty({0}, index_options);
  if (return_inverse) {
    inverse = at::sub(at::cumsum(starts, 0, at::kLong), 1);
    if (!dim.has_value()) inverse = inverse.reshape(self.sizes());
  }
  at::Tensor counts = at::empty({0}, index_options);
  if (return_counts) {
    const at::Tensor ends = at::cat({first.narrow(0, 1, first.size(0) - 1), at::full({1}, n, index_options)});
    counts = at::sub(ends, first);
  }
  return {output, inverse, counts};
}

}  // namespace composite

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("addr", TORCH_FN(composite::addr));
  m.impl("addbmm", TORCH_FN(composite::addbmm));
  m.impl("addbmm.out", TORCH_FN(composite::addbmm_out));
  m.impl("addbmm_", TORCH_FN(composite::addbmm_));
  m.impl("flip", TORCH_FN(composite::flip));
  m.impl("_weight_norm_interface", TORCH_FN(composite::weight_norm_interface));
  m.impl("_weight_norm_interface_backward", TORCH_FN(composite::weight_norm_interface_backward));
  m.impl("native_dropout", TORCH_FN(composite::native_dropout));
  m.impl("native_dropout_backward", TORCH_FN(composite::native_dropout_backward));
  m.impl("embedding_renorm_", TORCH_FN(composite::embedding_renorm_));
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
  m.impl("equal", TORCH_FN(composite::equal));
  m.impl("nansum", TORCH_FN(composite::nansum));
  m.impl("nansum.out", TORCH_FN(composite::nansum_out));
  m.impl("aminmax", TORCH_FN(composite::aminmax));
  m.impl("aminmax.out", TORCH_FN(composite::aminmax_out));
  m.impl("count_nonzero.dim_IntList", TORCH_FN(composite::count_nonzero));
  m.impl("isin.Tensor_Tensor", TORCH_FN(composite::isin));
  m.impl("isin.Tensor_Tensor_out", TORCH_FN(composite::isin_out));
  m.impl("repeat_interleave.Tensor", TORCH_FN(composite::repeat_interleave_indices));
  m.impl("channel_shuffle", TORCH_FN(composite::channel_shuffle));
  m.impl("linalg_cross", TORCH_FN(composite::linalg_cross));
  m.impl("linalg_cross.out", TORCH_FN(composite::linalg_cross_out));
  m.impl("vdot", TORCH_FN(composite::vdot));
  m.impl("complex.out", TORCH_FN(composite::complex_out));
  m.impl("polar.out", TORCH_FN(composite::polar_out));
  m.impl("kaiser_window.beta", TORCH_FN(composite::kaiser_window));
  m.impl("kaiser_window.periodic", TORCH_FN(composite::kaiser_window_periodic));
  m.impl("kaiser_window", TORCH_FN(composite::kaiser_window_default));
  m.impl("unique_consecutive", TORCH_FN(composite::unique_consecutive));
}

}  // namespace torchneuron::aten
