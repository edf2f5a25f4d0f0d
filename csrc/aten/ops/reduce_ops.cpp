// Reductions on neuron (sum, mean, prod, amax, amin, full max/min, vector norms, hash_tensor;
// var / std composed from them): the host resolves dims, keepdim and the output dtype, lays the reduced
// dimensions last, and csrc/kernels/reduce runs.
#include <ATen/Dispatch.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/amax_ops.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/amin_ops.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/hash_tensor_ops.h>
#include <ATen/ops/max_ops.h>
#include <ATen/ops/linalg_vector_norm_ops.h>
#include <ATen/ops/norm_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/min_ops.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/prod_ops.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/std_mean_ops.h>
#include <ATen/ops/std_ops.h>
#include <ATen/ops/var_mean_ops.h>
#include <ATen/ops/var_ops.h>
#include <ATen/ops/sum_ops.h>
#include <torch/library.h>

#include <algorithm>
#include <bitset>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "aten/fallback/cpu_fallback.h"
#include "aten/device/neuron_tensor.h"
#include "aten/ops/unsigned_dtypes.h"
#include "kernels/reduce.h"

namespace torchneuron::aten {
namespace {

using kernels::ReduceOp;
using DimMask = std::bitset<64>;

DimMask reduced_dims(const at::Tensor& self, at::OptionalIntArrayRef dims) {
  const int64_t ndim = self.dim();
  if (!dims.has_value() || dims->empty()) {
    DimMask all;
    for (int64_t d = 0; d < std::max<int64_t>(ndim, 1); ++d) all.set(d);
    return all;
  }
  return at::dim_list_to_bitset(*dims, ndim);
}

std::vector<int64_t> output_shape(const at::Tensor& self, const DimMask& mask, bool keepdim) {
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (!mask[d]) {
      shape.push_back(self.size(d));
    } else if (keepdim) {
      shape.push_back(1);
    }
  }
  return shape;
}

bool launch_unsigned_reduce(ReduceOp op, const char* name, const at::Tensor& self, const DimMask& mask,
                            bool keepdim, const at::Tensor& result);

// Runs `op` into `result` (already the right dtype); returns false when the kernels cannot.
bool launch_reduce(ReduceOp op, const char* name, const at::Tensor& self, const DimMask& mask,
                   bool keepdim, const at::Tensor& result) {
  if (is_wide_unsigned(self.scalar_type())) return launch_unsigned_reduce(op, name, self, mask, keepdim, result);
  if (self.dim() > kernels::kMaxDims || !has_kernel_dtype(self.scalar_type()) ||
      !has_kernel_dtype(result.scalar_type()) ||
      !kernels::reduce_supported(op, to_kernel_dtype(self.scalar_type()), to_kernel_dtype(result.scalar_type()))) {
    return false;
  }
  at::native::resize_output(result, output_shape(self, mask, keepdim));
  kernels::StridedView in;
  in.data = self.data_ptr();
  in.dtype = to_kernel_dtype(self.scalar_type());
  kernels::StridedView out;
  out.data = result.data_ptr();
  out.dtype = to_kernel_dtype(result.scalar_type());
  int reduced = 0;
  for (int64_t d = 0; d < self.dim(); ++d) {  // kept dimensions first, in order
    if (mask[d]) continue;
    in.sizes[in.ndim] = self.size(d);
    in.strides[in.ndim++] = self.stride(d);
  }
  for (int64_t d = 0; d < self.dim(); ++d) {  // then the reduced ones
    if (!mask[d]) continue;
    in.sizes[in.ndim] = self.size(d);
    in.strides[in.ndim++] = self.stride(d);
    ++reduced;
  }
  int64_t out_dim = 0;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (mask[d]) {
      out_dim += keepdim ? 1 : 0;
      continue;
    }
    out.sizes[out.ndim] = result.size(out_dim);
    out.strides[out.ndim++] = result.stride(out_dim);
    ++out_dim;
  }
  if (result.numel() > 0) {
    enqueue(result, name, {&self}, [op, out, in, reduced] { kernels::reduce(op, out, in, reduced); });
  }
  return true;
}

// uint16/32/64: sums and products of the int64 values into an integer result (of the values
// converted to a floating one), max and min of the order keys (unsigned_dtypes.h) into the
// input's dtype.
bool launch_unsigned_reduce(ReduceOp op, const char* name, const at::Tensor& self, const DimMask& mask,
                            bool keepdim, const at::Tensor& result) {
  const c10::ScalarType type = self.scalar_type(), out_type = result.scalar_type();
  at::Tensor input, staged;
  if ((op == ReduceOp::kSum || op == ReduceOp::kProd) && at::isFloatingType(out_type)) {
    // A floating result (sum(dtype=torch.float32)): the values converted to it, then reduced.
    return launch_reduce(op, name, self.to(out_type), mask, keepdim, result);
  }
  if (op == ReduceOp::kSum || op == ReduceOp::kProd) {
    if (out_type != c10::kLong && !is_wide_unsigned(out_type)) return false;
    input = unsigned_as_long(self);
    staged = out_type == c10::kLong ? result : at::empty({0}, result.options().dtype(c10::kLong));
  } else if (op == ReduceOp::kMax || op == ReduceOp::kMin) {
    if (out_type != type) return false;
    input = unsigned_order_keys(self);
    staged = at::empty({0}, input.options());
  } else {
    return false;
  }
  if (!launch_reduce(op, name, input, mask, keepdim, staged)) return false;
  if (staged.is_same(result)) return true;
  at::native::resize_output(result, staged.sizes());
  result.copy_(op == ReduceOp::kMax || op == ReduceOp::kMin ? from_order_keys(staged, type) : staged);
  return true;
}

// Sum or mean of a complex tensor into a complex `result` of its dtype: its (real, imaginary)
// pairs reduced with the pair dim kept (a lazy conjugate resolved first; a 0-dim input is its own
// sum). False, with nothing enqueued, for what the kernels cannot take (another result dtype, a
// conjugate result).
bool launch_complex_reduce(ReduceOp op, const char* name, const at::Tensor& self, const DimMask& mask, bool keepdim,
                           const at::Tensor& result) {
  if (!self.is_complex() || result.scalar_type() != self.scalar_type() || result.is_conj() ||
      self.dim() + 1 > kernels::kMaxDims) {
    return false;
  }
  if (self.dim() == 0) {
    at::native::resize_output(result, {});
    result.copy_(self);
    return true;
  }
  const at::Tensor input = self.is_conj() ? self.resolve_conj() : self;
  at::native::resize_output(result, output_shape(input, mask, keepdim));
  DimMask pair_mask;
  for (int64_t d = 0; d < input.dim(); ++d) pair_mask[d] = mask[d];
  return launch_reduce(op, name, at::view_as_real(input), pair_mask, keepdim, at::view_as_real(result));
}

c10::ScalarType sum_dtype(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  if (dtype.has_value()) return *dtype;
  return at::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? c10::kLong : self.scalar_type();
}

void check_max_min_input(const at::Tensor& self, const DimMask& mask, const char* name) {
  if (self.numel() != 0) return;
  for (int64_t d = 0; d < self.dim(); ++d) {
    TORCH_CHECK_INDEX(!mask[d] || self.size(d) != 0, name, "(): Expected reduction dim ", d,
                " to have non-zero size.");
  }
}

}  // namespace

namespace reductions {

at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<c10::ScalarType> dtype, at::Tensor& result) {
  const DimMask mask = reduced_dims(self, dim);
  const bool launched = self.is_complex() ? launch_complex_reduce(ReduceOp::kSum, "aten::sum", self, mask, keepdim, result)
                                          : launch_reduce(ReduceOp::kSum, "aten::sum", self, mask, keepdim, result);
  if (!launched) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(sum, IntList_out)>::call(self, dim, keepdim, dtype, result);
  }
  return result;
}

at::Tensor sum_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<c10::ScalarType> dtype) {
  at::Tensor result = at::empty({0}, self.options().dtype(sum_dtype(self, dtype)));
  return reductions::sum_out(self, dim, keepdim, dtype, result);
}

at::Tensor& mean_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                     std::optional<c10::ScalarType> dtype, at::Tensor& result) {
  const c10::ScalarType type = dtype.value_or(result.scalar_type());
  TORCH_CHECK(at::isFloatingType(type) || at::isComplexType(type),
              "mean(): could not infer output dtype. Optional dtype must be either a floating point "
              "or complex dtype. Got: ", type);
  const DimMask mask = reduced_dims(self, dim);
  if (self.is_complex()) {
    // As CPU PyTorch: the sum divided by the count as complex numbers, so that a NaN or an
    // infinity in either part of the sum reaches both parts of the mean.
    if (!launch_complex_reduce(ReduceOp::kSum, "aten::mean", self, mask, keepdim, result)) {
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(mean, out)>::call(self, dim, keepdim, dtype, result);
    }
    int64_t count = 1;
    for (int64_t d = 0; d < self.dim(); ++d) count *= mask[d] ? self.size(d) : 1;
    return result.div_(c10::complex<double>(static_cast<double>(count), 0.0));
  }
  if (!launch_reduce(ReduceOp::kMean, "aten::mean", self, mask, keepdim, result)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(mean, out)>::call(self, dim, keepdim, dtype, result);
  }
  return result;
}

at::Tensor mean_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<c10::ScalarType> dtype) {
  const c10::ScalarType type = dtype.value_or(self.scalar_type());
  TORCH_CHECK(at::isFloatingType(type) || at::isComplexType(type),
              "mean(): could not infer output dtype. Input dtype must be either a floating point or "
              "complex dtype. Got: ", c10::toString(type));
  at::Tensor result = at::empty({0}, self.options().dtype(type));
  return reductions::mean_out(self, dim, keepdim, dtype, result);
}

#define NEURON_EXTREMUM(name, KOP)                                                               \
  at::Tensor& name##_out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& result) { \
    const DimMask mask = reduced_dims(self, dim);                                               \
    check_max_min_input(self, mask, #name);                                                     \
    if (!launch_reduce(KOP, "aten::" #name, self, mask, keepdim, result)) {                     \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(name, out)>::call(self, dim, keepdim, result); \
    }                                                                                           \
    return result;                                                                              \
  }                                                                                             \
  at::Tensor name(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {                  \
    at::Tensor result = at::empty({0}, self.options());                                         \
    return reductions::name##_out(self, dim, keepdim, result);                                  \
  }

NEURON_EXTREMUM(amax, ReduceOp::kMax)
NEURON_EXTREMUM(amin, ReduceOp::kMin)
#undef NEURON_EXTREMUM

at::Tensor max_all(const at::Tensor& self) {
  TORCH_CHECK(self.numel() > 0, "max(): Expected reduction dim to be specified for input.numel() == 0. "
              "Specify the reduction dim with the 'dim' argument.");
  return reductions::amax(self, {}, false);
}

at::Tensor min_all(const at::Tensor& self) {
  TORCH_CHECK(self.numel() > 0, "min(): Expected reduction dim to be specified for input.numel() == 0. "
              "Specify the reduction dim with the 'dim' argument.");
  return reductions::amin(self, {}, false);
}

// torch.max(t, out=) / torch.min(t, out=): CPU's checks, the functional op's value cast into a
// 0-dim `out`. An empty input gives the reduction's identity (CPU's all-reduce starts there).
at::Tensor& extremum_all_out(const at::Tensor& self, bool is_max, at::Tensor& out) {
  using c10::canCast;
  using c10::typeMetaToScalarType;
  TORCH_CHECK(self.device() == out.device());
  TORCH_CHECK(canCast(
      typeMetaToScalarType(self.dtype()),
      typeMetaToScalarType(out.dtype())));
  at::native::resize_output(out, {});
  const c10::ScalarType type = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(!is_wide_unsigned(type) && !at::isComplexType(type), "\"", is_max ? "max_all" : "min_all",
                              "\" not implemented for '", c10::toString(type), "'");
  if (self.numel() > 0) return out.copy_(is_max ? reductions::max_all(self) : reductions::min_all(self));
  if (type == at::kBool) return out.fill_(!is_max);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (at::isFloatingType(type)) return out.fill_(is_max ? -kInf : kInf);
  const at::Tensor limit = at::empty({}, self.options().device(at::kCPU));  // the dtype's bound, from c10
  AT_DISPATCH_INTEGRAL_TYPES(type, "extremum_all_out", [&] {
    limit.fill_(is_max ? std::numeric_limits<scalar_t>::lowest() : std::numeric_limits<scalar_t>::max());
  });
  return out.copy_(limit);
}

at::Tensor& max_unary_out(const at::Tensor& self, at::Tensor& out) { return extremum_all_out(self, true, out); }
at::Tensor& min_unary_out(const at::Tensor& self, at::Tensor& out) { return extremum_all_out(self, false, out); }

// ---- vector norms: p = 0, 1, 2, +-inf native, other p composed from native ops ------------

at::Tensor& linalg_vector_norm_out(const at::Tensor& self, const c10::Scalar& ord, at::OptionalIntArrayRef dim,
                                   bool keepdim, std::optional<c10::ScalarType> dtype, at::Tensor& result) {
  if (self.is_complex()) {  // the norm of the magnitudes, in the real dtype
    TORCH_CHECK(!dtype.has_value() || at::isComplexType(*dtype),
                "linalg.vector_norm: dtype should be complex for complex inputs, but got ", *dtype);
    const at::Tensor z = dtype.has_value() ? self.to(*dtype) : self;
    return reductions::linalg_vector_norm_out(at::abs(z), ord, dim, keepdim, std::nullopt, result);
  }
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ", self.scalar_type());
  const at::Tensor x = dtype.has_value() ? self.to(*dtype) : self;
  const double p = ord.toDouble();
  const DimMask mask = reduced_dims(x, dim);
  if (std::isinf(p) && x.numel() == 0) {
    const bool all_dims = !dim.has_value() || dim->empty();
    TORCH_CHECK(!all_dims, "linalg.vector_norm cannot compute the ", ord, " norm on an empty tensor because the "
                "operation does not have an identity");
    for (int64_t d = 0; d < x.dim(); ++d) {
      TORCH_CHECK(!mask[d] || x.size(d) != 0, "linalg.vector_norm cannot compute the ", ord,
                  " norm on the dimension ", d, " because this dimension is empty and the operation does not have an "
                  "identity");
    }
  }
  if (p == 0.0 || p == 1.0 || p == 2.0 || std::isinf(p)) {
    const ReduceOp op = p == 0.0   ? ReduceOp::kNorm0
                        : p == 1.0 ? ReduceOp::kNorm1
                        : p == 2.0 ? ReduceOp::kNorm2
                        : p > 0    ? ReduceOp::kNormInf
                                   : ReduceOp::kNormNegInf;
    if (launch_reduce(op, "aten::linalg_vector_norm", x, mask, keepdim, result)) return result;
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(linalg_vector_norm, out)>::call(
        self, ord, dim, keepdim, dtype, result);
  }
  // Powers of a half type in float32, as CPU's opmath: |x|^p overflows float16 long before the norm does.
  const bool half = x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16;
  const at::Tensor wide = half ? x.to(at::kFloat) : x;
  const at::Tensor norm = at::pow(reductions::sum_dim(at::pow(at::abs(wide), ord), dim, keepdim, std::nullopt), 1.0 / p);
  at::native::resize_output(result, norm.sizes());
  result.copy_(norm);
  return result;
}

at::Tensor linalg_vector_norm(const at::Tensor& self, const c10::Scalar& ord, at::OptionalIntArrayRef dim,
                              bool keepdim, std::optional<c10::ScalarType> dtype) {
  const c10::ScalarType type = dtype.value_or(self.scalar_type());
  at::Tensor result = at::empty({0}, self.options().dtype(c10::toRealValueType(type)));
  return reductions::linalg_vector_norm_out(self, ord, dim, keepdim, dtype, result);
}

// The legacy torch.norm (pairwise_distance, triplet_margin_loss call it): linalg_vector_norm's
// kernels, p = None meaning 2.
at::Tensor& norm_dtype_out(const at::Tensor& self, const std::optional<c10::Scalar>& p, at::IntArrayRef dim,
                           bool keepdim, c10::ScalarType dtype, at::Tensor& result) {
  if (!at::isFloatingType(self.scalar_type())) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(norm, dtype_out)>::call(self, p, dim, keepdim, dtype, result);
  }
  return reductions::linalg_vector_norm_out(self, p.value_or(2.0), dim, keepdim, dtype, result);
}

at::Tensor& norm_out(const at::Tensor& self, const std::optional<c10::Scalar>& p, at::IntArrayRef dim, bool keepdim,
                     at::Tensor& result) {
  if (!at::isFloatingType(self.scalar_type()) && !at::isComplexType(self.scalar_type())) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(norm, out)>::call(self, p, dim, keepdim, result);
  }
  return reductions::linalg_vector_norm_out(self, p.value_or(2.0), dim, keepdim, std::nullopt, result);
}

at::Tensor trace(const at::Tensor& self) {
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  return reductions::sum_dim(self.diagonal(), std::nullopt, false, std::nullopt);
}

// ---- prod ----------------------------------------------------------------------------------

at::Tensor& prod_out(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<c10::ScalarType> dtype,
                     at::Tensor& result) {
  const int64_t dims[] = {dim};
  if (!launch_reduce(ReduceOp::kProd, "aten::prod", self, reduced_dims(self, dims), keepdim, result)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(prod, int_out)>::call(self, dim, keepdim, dtype, result);
  }
  return result;
}

at::Tensor prod_dim(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<c10::ScalarType> dtype) {
  at::Tensor result = at::empty({0}, self.options().dtype(sum_dtype(self, dtype)));
  return reductions::prod_out(self, dim, keepdim, dtype, result);
}

at::Tensor prod_all(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  at::Tensor result = at::empty({0}, self.options().dtype(sum_dtype(self, dtype)));
  if (!launch_reduce(ReduceOp::kProd, "aten::prod", self, reduced_dims(self, std::nullopt), false, result)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(prod)>::call(self, dtype);
  }
  return result;
}

// ---- var / std: mean, centred squares and their sum, all native -----------------------------

std::tuple<at::Tensor, at::Tensor> var_and_mean(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                                const std::optional<c10::Scalar>& correction, bool keepdim, bool take_sqrt) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "std and var only support floating point and complex dtypes");
  const DimMask mask = reduced_dims(self, dim);
  int64_t count = 1;
  for (int64_t d = 0; d < self.dim(); ++d) count *= mask[d] ? self.size(d) : 1;
  const double divisor = std::max(0.0, static_cast<double>(count) - (correction.has_value() ? correction->toDouble() : 1.0));
  if (divisor <= 0) {
    TORCH_WARN("var(): degrees of freedom is <= 0. Correction should be strictly less than the reduction factor "
               "(input numel divided by output numel).");
  }
  // Half types compute in float, as CPU PyTorch does.
  const c10::ScalarType compute = self.scalar_type() == c10::kDouble ? c10::kDouble : c10::kFloat;
  const at::Tensor x = self.to(compute);
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < std::max<int64_t>(self.dim(), 1); ++d) {
    if (mask[d] && d < self.dim()) dims.push_back(d);
  }
  const at::Tensor mean = reductions::mean_dim(x, dims, /*keepdim=*/true, std::nullopt);
  const at::Tensor centered = at::sub(x, mean);
  at::Tensor var = reductions::sum_dim(at::mul(centered, centered), dims, keepdim, std::nullopt);
  var.div_(divisor);
  if (take_sqrt) var.sqrt_();
  const at::Tensor kept_mean = keepdim ? mean : reductions::mean_dim(x, dims, false, std::nullopt);
  return {var.to(self.scalar_type()), kept_mean.to(self.scalar_type())};
}

at::Tensor var(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<c10::Scalar>& correction, bool keepdim) {
  if (!at::isFloatingType(self.scalar_type())) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(var, correction)>::call(self, dim, correction, keepdim);
  }
  return std::get<0>(var_and_mean(self, dim, correction, keepdim, false));
}

at::Tensor std(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<c10::Scalar>& correction, bool keepdim) {
  if (!at::isFloatingType(self.scalar_type())) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(std, correction)>::call(self, dim, correction, keepdim);
  }
  return std::get<0>(var_and_mean(self, dim, correction, keepdim, true));
}

at::Tensor& var_out(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<c10::Scalar>& correction,
                    bool keepdim, at::Tensor& out) {
  const at::Tensor value = reductions::var(self, dim, correction, keepdim);
  at::native::resize_output(out, value.sizes());
  return out.copy_(value);
}

at::Tensor& std_out(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<c10::Scalar>& correction,
                    bool keepdim, at::Tensor& out) {
  const at::Tensor value = reductions::std(self, dim, correction, keepdim);
  at::native::resize_output(out, value.sizes());
  return out.copy_(value);
}

std::tuple<at::Tensor, at::Tensor> var_mean(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                            const std::optional<c10::Scalar>& correction, bool keepdim) {
  if (!at::isFloatingType(self.scalar_type())) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(var_mean, correction)>::call(self, dim, correction, keepdim);
  }
  return var_and_mean(self, dim, correction, keepdim, false);
}

std::tuple<at::Tensor, at::Tensor> std_mean(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                            const std::optional<c10::Scalar>& correction, bool keepdim) {
  if (!at::isFloatingType(self.scalar_type())) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(std_mean, correction)>::call(self, dim, correction, keepdim);
  }
  return var_and_mean(self, dim, correction, keepdim, true);
}

// hash_tensor (mode 0): the xor of the elements' 64-bit words (floating values widened to
// float64, integers to int64, and their bits taken as uint64), folded in halves with native xors.
at::Tensor& hash_tensor_out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, int64_t mode, at::Tensor& result) {
  TORCH_CHECK(mode == 0, "Unknown hash_tensor mode: ", mode);
  const c10::ScalarType type = self.scalar_type();
  if (at::isComplexType(type) || self.dim() > kernels::kMaxDims || result.scalar_type() != c10::kUInt64) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(hash_tensor, out)>::call(self, dim, keepdim,
                                                                                               mode, result);
  }
  const DimMask mask = reduced_dims(self, dim);
  std::vector<int64_t> order, kept_sizes;
  int64_t count = 1;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (!mask[d]) {
      order.push_back(d);
      kept_sizes.push_back(self.size(d));
    }
  }
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (!mask[d]) continue;
    TORCH_CHECK_INDEX(self.size(d) > 0, "hash_tensor: Expected reduction dim ", d, " to have non-zero size.");
    order.push_back(d);
    count *= self.size(d);
  }
  at::Tensor words = at::isFloatingType(type)            ? self.to(c10::kDouble).view(c10::kLong)
                     : type == c10::kUInt64              ? self.view(c10::kLong)
                                                         : self.to(c10::kLong);
  std::vector<int64_t> rows = kept_sizes;
  rows.push_back(count);
  words = words.permute(order).reshape(rows);
  while (words.size(-1) > 1) {
    const int64_t half = words.size(-1) / 2;
    at::Tensor folded = words.narrow(-1, 0, half).bitwise_xor(words.narrow(-1, half, half));
    words = words.size(-1) % 2 == 0 ? folded : at::cat({folded, words.narrow(-1, 2 * half, 1)}, -1);
  }
  const at::Tensor hashed = words.squeeze(-1).reshape(output_shape(self, mask, keepdim)).view(c10::kUInt64);
  at::native::resize_output(result, hashed.sizes());
  return result.copy_(hashed);
}

at::Tensor hash_tensor(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, int64_t mode) {
  at::Tensor result = at::empty({0}, self.options().dtype(c10::kUInt64));
  return hash_tensor_out(self, dim, keepdim, mode, result);
}

}  // namespace reductions

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sum.dim_IntList", TORCH_FN(reductions::sum_dim));
  m.impl("sum.IntList_out", TORCH_FN(reductions::sum_out));
  m.impl("hash_tensor", TORCH_FN(reductions::hash_tensor));
  m.impl("hash_tensor.out", TORCH_FN(reductions::hash_tensor_out));
  m.impl("mean.dim", TORCH_FN(reductions::mean_dim));
  m.impl("mean.out", TORCH_FN(reductions::mean_out));
  m.impl("amax", TORCH_FN(reductions::amax));
  m.impl("amax.out", TORCH_FN(reductions::amax_out));
  m.impl("amin", TORCH_FN(reductions::amin));
  m.impl("amin.out", TORCH_FN(reductions::amin_out));
  m.impl("max", TORCH_FN(reductions::max_all));
  m.impl("min", TORCH_FN(reductions::min_all));
  m.impl("max.unary_out", TORCH_FN(reductions::max_unary_out));
  m.impl("min.unary_out", TORCH_FN(reductions::min_unary_out));
  m.impl("linalg_vector_norm", TORCH_FN(reductions::linalg_vector_norm));
  m.impl("linalg_vector_norm.out", TORCH_FN(reductions::linalg_vector_norm_out));
  m.impl("norm.out", TORCH_FN(reductions::norm_out));
  m.impl("norm.dtype_out", TORCH_FN(reductions::norm_dtype_out));
  m.impl("trace", TORCH_FN(reductions::trace));
  m.impl("prod", TORCH_FN(reductions::prod_all));
  m.impl("prod.dim_int", TORCH_FN(reductions::prod_dim));
  m.impl("prod.int_out", TORCH_FN(reductions::prod_out));
  m.impl("var.correction", TORCH_FN(reductions::var));
  m.impl("var.correction_out", TORCH_FN(reductions::var_out));
  m.impl("std.correction", TORCH_FN(reductions::std));
  m.impl("std.correction_out", TORCH_FN(reductions::std_out));
  m.impl("var_mean.correction", TORCH_FN(reductions::var_mean));
  m.impl("std_mean.correction", TORCH_FN(reductions::std_mean));
}

}  // namespace torchneuron::aten
