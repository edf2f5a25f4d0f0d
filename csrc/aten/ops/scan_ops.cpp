// Scans and counts on neuron: cumsum / cumprod, cummax / cummin and logcumsumexp along a dim,
// histc, and the ops whose output size depends on the data (masked_select, nonzero and
// nonzero_static: the count is read back, a sync, then the kernel compacts). csrc/kernels/nn runs
// on the queue.
// Kernels take raw pointers: a temporary freed here can only be reused by later commands,
// which the in-order queue runs after this one.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_cummax_helper_ops.h>
#include <ATen/ops/_cummin_helper_ops.h>
#include <ATen/ops/_logcumsumexp_ops.h>
#include <ATen/ops/cumprod_ops.h>
#include <ATen/ops/cumsum_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/view_as_complex.h>
#include <ATen/ops/view_as_real.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "aten/device/neuron_tensor.h"
#include "aten/fallback/cpu_fallback.h"
#include "aten/ops/nn_common.h"
#include "aten/ops/unsigned_dtypes.h"
#include "kernels/nn.h"

namespace torchneuron::aten {
namespace nn {

// ---- cumulative sum ------------------------------------------------------------------------

bool cumulative_dtype_ok(c10::ScalarType t) {
  return t == c10::kFloat || t == c10::kDouble || t == c10::kBFloat16 || t == c10::kHalf || t == c10::kLong ||
         t == c10::kInt;
}

// Runs a scan along dim over a contiguous copy of self into result (resized; through a
// contiguous buffer when result is not contiguous). kernel(shape, in, out) makes the queue job.
template <typename Kernel>
void scan_into(const char* name, const at::Tensor& self, int64_t dim, at::Tensor& result, Kernel kernel) {
  const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
  const at::Tensor input = self.contiguous();
  at::native::resize_output(result, self.sizes());
  at::Tensor out = result.is_contiguous() ? result : at::empty(self.sizes(), result.options());
  if (input.numel() > 0) {
    const kernels::SoftmaxShape shape = softmax_shape(input, wrapped);
    enqueue(out, name, {&input}, kernel(shape, input.data_ptr(), out.data_ptr()));
  }
  if (!out.is_same(result)) result.copy_(out);
}

// Runs cumsum / cumprod into `result`; false when the kernel cannot take these dtypes.
bool cumulative_into(kernels::ScanOp op, const char* name, const at::Tensor& self, int64_t dim,
                     std::optional<c10::ScalarType> dtype, at::Tensor& result) {
  check_same_device(name, self.device(), {&result});
  const c10::ScalarType out_type = result.scalar_type();
  if (is_wide_unsigned(self.scalar_type())) {
    // uint16/32/64: the scan of the int64 values (wrap-around sums and products have the bits
    // of the unsigned ones), into an integer result.
    if ((out_type != c10::kLong && !is_wide_unsigned(out_type)) || (dtype.has_value() && *dtype != out_type)) {
      return false;
    }
    const at::Tensor values = unsigned_as_long(self);
    if (out_type == c10::kLong) return cumulative_into(op, name, values, dim, std::nullopt, result);
    at::Tensor staged = at::empty({0}, result.options().dtype(c10::kLong));
    if (!cumulative_into(op, name, values, dim, std::nullopt, staged)) return false;
    at::native::resize_output(result, staged.sizes());
    result.copy_(staged);
    return true;
  }
  if (!has_kernel_dtype(self.scalar_type()) || c10::isComplexType(self.scalar_type()) ||
      !cumulative_dtype_ok(result.scalar_type()) || (dtype.has_value() && *dtype != result.scalar_type())) {
    return false;
  }
  const kernels::DType in_dtype = to_kernel_dtype(self.scalar_type()), out_dtype = to_kernel_dtype(result.scalar_type());
  scan_into(name, self, dim, result, [=](kernels::SoftmaxShape shape, const void* pi, void* po) {
    return [=] { kernels::cumulative(op, in_dtype, out_dtype, shape, pi, po); };
  });
  return true;
}

// cummax / cummin's kernel: the composite cummax_out resizes values and indices and calls it.
void cumulative_extremum_into(bool is_max, const at::Tensor& self, at::Tensor& values, at::Tensor& indices,
                              int64_t dim) {
  const char* name = is_max ? "aten::_cummax_helper" : "aten::_cummin_helper";
  check_same_device(name, self.device(), {&values, &indices});
  const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
  const at::Tensor input = self.contiguous();
  const bool direct = values.is_contiguous() && indices.is_contiguous() && values.scalar_type() == self.scalar_type() &&
                      indices.scalar_type() == at::kLong;
  at::Tensor vals = direct ? values : at::empty(self.sizes(), self.options());
  at::Tensor idx = direct ? indices : at::empty(self.sizes(), self.options().dtype(at::kLong));
  if (input.numel() > 0) {
    const kernels::SoftmaxShape shape = softmax_shape(input, wrapped);
    const kernels::DType dtype = to_kernel_dtype(input.scalar_type());
    const void* pi = input.data_ptr();
    void* pv = vals.data_ptr();
    int64_t* px = idx.data_ptr<int64_t>();
    enqueue(vals, name, {&input, &idx}, [=] { kernels::cumulative_extremum(dtype, is_max, shape, pi, pv, px); });
  }
  if (!direct) {
    values.copy_(vals);
    indices.copy_(idx);
  }
}

bool extremum_scannable(const at::Tensor& self) {
  return has_kernel_dtype(self.scalar_type()) && !c10::isComplexType(self.scalar_type());
}

void cummax_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  if (!extremum_scannable(self)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_cummax_helper)>::call(self, values, indices, dim);
  }
  cumulative_extremum_into(true, self, values, indices, dim);
}

void cummin_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  if (!extremum_scannable(self)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_cummin_helper)>::call(self, values, indices, dim);
  }
  cumulative_extremum_into(false, self, values, indices, dim);
}

at::Tensor& logcumsumexp_out(const at::Tensor& self, int64_t dim, at::Tensor& result) {
  const bool native = has_kernel_dtype(self.scalar_type()) && at::isFloatingType(self.scalar_type()) &&
                      result.scalar_type() == self.scalar_type();
  if (!native) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(_logcumsumexp, out)>::call(self, dim, result);
  }
  check_same_device("aten::_logcumsumexp", self.device(), {&result});
  const kernels::DType dtype = to_kernel_dtype(self.scalar_type());
  scan_into("aten::_logcumsumexp", self, dim, result, [=](kernels::SoftmaxShape shape, const void* pi, void* po) {
    return [=] { kernels::log_cumulative_sum_exp(dtype, shape, pi, po); };
  });
  return result;
}

at::Tensor logcumsumexp(const at::Tensor& self, int64_t dim) {
  at::Tensor result = at::empty({0}, self.options());
  return logcumsumexp_out(self, dim, result);
}

c10::ScalarType scan_dtype(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  return dtype.value_or(at::isIntegralType(self.scalar_type(), true) ? c10::kLong : self.scalar_type());
}

at::Tensor cumsum(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype);

at::Tensor& cumsum_out(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype, at::Tensor& result) {
  if (self.is_complex() && has_kernel_dtype(self.scalar_type()) && result.scalar_type() == self.scalar_type() &&
      (!dtype.has_value() || *dtype == self.scalar_type())) {
    // The real and imaginary parts' sums, side by side.
    const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
    const at::Tensor sums =
        self.dim() == 0 ? self.resolve_conj()
                        : at::view_as_complex(nn::cumsum(at::view_as_real(self.resolve_conj()), wrapped, std::nullopt));
    at::native::resize_output(result, sums.sizes());
    result.copy_(sums);
    return result;
  }
  if (!cumulative_into(kernels::ScanOp::kSum, "aten::cumsum", self, dim, dtype, result)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(cumsum, out)>::call(self, dim, dtype, result);
  }
  return result;
}

at::Tensor cumsum(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {
  at::Tensor result = at::empty({0}, self.options().dtype(scan_dtype(self, dtype)));
  return cumsum_out(self, dim, dtype, result);
}

at::Tensor& cumsum_(at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {
  return cumsum_out(self.clone(), dim, dtype, self);
}

at::Tensor& cumprod_out(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype, at::Tensor& result) {
  if (!cumulative_into(kernels::ScanOp::kProd, "aten::cumprod", self, dim, dtype, result)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(cumprod, out)>::call(self, dim, dtype, result);
  }
  return result;
}

at::Tensor cumprod(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {
  at::Tensor result = at::empty({0}, self.options().dtype(scan_dtype(self, dtype)));
  return cumprod_out(self, dim, dtype, result);
}

at::Tensor& cumprod_(at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {
  return cumprod_out(self.clone(), dim, dtype, self);
}

// ---- histogram -----------------------------------------------------------------------------

// As on CUDA, integer inputs are counted too (CPU PyTorch supports floating inputs only).
at::Tensor& histc_out(const at::Tensor& self, int64_t bins, const c10::Scalar& min, const c10::Scalar& max,
                      at::Tensor& result) {
  TORCH_CHECK(bins > 0, "torch.histc: bins must be > 0, but got ", bins, " for bins");
  TORCH_CHECK(!self.is_complex() && self.scalar_type() != c10::kBool, "torch.histc: input dtype ", self.scalar_type(),
              " is not supported");
  TORCH_CHECK(result.scalar_type() == self.scalar_type(), "torch.histc: input tensor and out tensor should have the same dtype");
  check_same_device("aten::histc", self.device(), {&result});
  double lo = min.toDouble(), hi = max.toDouble();
  TORCH_CHECK(!(std::isinf(lo) || std::isinf(hi) || std::isnan(lo) || std::isnan(hi)),
              "torch.histc: range of [", lo, ", ", hi, "] is not finite");
  TORCH_CHECK(lo <= hi, "torch.histc: max must be larger than min");
  const at::Tensor values = self.contiguous();
  if (lo == hi && values.numel() > 0) {  // the data's own range, read back (a sync)
    lo = values.min().item<double>();
    hi = values.max().item<double>();
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  at::native::resize_output(result, {bins});
  at::Tensor out = result.is_contiguous() ? result : at::empty({bins}, values.options());
  const kernels::DType dtype = to_kernel_dtype(values.scalar_type());
  const int64_t numel = values.numel();
  const void* pv = values.data_ptr();
  void* po = out.data_ptr();
  enqueue(out, "aten::histc", {&values}, [=] { kernels::histc(dtype, numel, pv, bins, lo, hi, po); });
  if (!out.is_same(result)) result.copy_(out);
  return result;
}

at::Tensor histc(const at::Tensor& self, int64_t bins, const c10::Scalar& min, const c10::Scalar& max) {
  at::Tensor result = at::empty({0}, self.options());
  return histc_out(self, bins, min, max, result);
}

// ---- data-dependent shapes: the count is read back (a sync), then the kernel compacts ------

at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& result) {
  TORCH_CHECK(mask.scalar_type() == c10::kBool, "masked_select: expected BoolTensor for mask");
  check_same_device("aten::masked_select", self.device(), {&mask, &result});
  TORCH_CHECK(result.scalar_type() == self.scalar_type(), "masked_select(): self and result must have the same scalar type");
  const std::vector<int64_t> shape = at::infer_size(self.sizes(), mask.sizes());
  const at::Tensor values = self.expand(shape).contiguous();
  const at::Tensor flags = mask.expand(shape).contiguous();
  const int64_t count = flags.sum().item<int64_t>();
  at::native::resize_output(result, {count});
  at::Tensor out = result.is_contiguous() ? result : at::empty({count}, values.options());
  if (count > 0) {
    const int64_t numel = values.numel();
    const int64_t bytes = static_cast<int64_t>(values.element_size());
    const char* pv = static_cast<const char*>(values.data_ptr());
    const bool* pm = flags.data_ptr<bool>();
    char* po = static_cast<char*>(out.data_ptr());
    enqueue(out, "aten::masked_select", {&values, &flags}, [=] { kernels::masked_compact(numel, bytes, pv, pm, po); });
  }
  if (!out.is_same(result)) result.copy_(out);
  return result;
}

at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask) {
  at::Tensor result = at::empty({0}, self.options());
  return masked_select_out(self, mask, result);
}

at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& result) {
  TORCH_CHECK(result.scalar_type() == c10::kLong, "nonzero: Expected out tensor to have scalar type Long but got scalar type",
              result.scalar_type());
  TORCH_CHECK(self.dim() <= kernels::kMaxDims, "nonzero is not supported for tensors with more than ",
              kernels::kMaxDims, " dimensions");
  const at::Tensor flags = (self.scalar_type() == c10::kBool ? self : self.ne(0)).contiguous();
  const int64_t count = flags.sum().item<int64_t>();
  const int ndim = static_cast<int>(self.dim());
  at::native::resize_output(result, {count, ndim});
  at::Tensor out = result.is_contiguous() ? result : at::empty({count, ndim}, result.options());
  if (count > 0 && ndim > 0) {
    std::array<int64_t, kernels::kMaxDims> sizes{};
    for (int d = 0; d < ndim; ++d) sizes[d] = self.size(d);
    const bool* pm = flags.data_ptr<bool>();
    auto* po = out.data_ptr<int64_t>();
    enqueue(out, "aten::nonzero", {&flags}, [=] { kernels::nonzero_coordinates(ndim, sizes.data(), pm, po); });
  }
  if (!out.is_same(result)) result.copy_(out);
  return result;
}

at::Tensor nonzero(const at::Tensor& self) {
  at::Tensor result = at::empty({0}, self.options().dtype(c10::kLong));
  return nonzero_out(self, result);
}

// nonzero_static: nonzero's first `size` coordinates, padded with rows of fill_value.
at::Tensor& nonzero_static_out(const at::Tensor& self, int64_t size, int64_t fill_value, at::Tensor& result) {
  TORCH_CHECK(size >= 0, "nonzero_static: 'size' must be an non-negative integer");
  TORCH_CHECK(result.scalar_type() == c10::kLong,
              "nonzero_static: Expected out tensor to have scalar type Long but got scalar type", result.scalar_type());
  const at::Tensor found = nn::nonzero(self);
  const int64_t kept = std::min(size, found.size(0));
  at::native::resize_output(result, {size, self.dim()});
  result.narrow(0, 0, kept).copy_(found.narrow(0, 0, kept));
  if (kept < size) result.narrow(0, kept, size - kept).fill_(fill_value);
  return result;
}

at::Tensor nonzero_static(const at::Tensor& self, int64_t size, int64_t fill_value) {
  at::Tensor result = at::empty({0}, self.options().dtype(c10::kLong));
  return nonzero_static_out(self, size, fill_value, result);
}

}  // namespace nn

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_cummax_helper", TORCH_FN(nn::cummax_helper));
  m.impl("_cummin_helper", TORCH_FN(nn::cummin_helper));
  m.impl("_logcumsumexp", TORCH_FN(nn::logcumsumexp));
  m.impl("_logcumsumexp.out", TORCH_FN(nn::logcumsumexp_out));
  m.impl("cumsum", TORCH_FN(nn::cumsum));
  m.impl("cumsum.out", TORCH_FN(nn::cumsum_out));
  m.impl("cumsum_", TORCH_FN(nn::cumsum_));
  m.impl("cumprod", TORCH_FN(nn::cumprod));
  m.impl("cumprod.out", TORCH_FN(nn::cumprod_out));
  m.impl("cumprod_", TORCH_FN(nn::cumprod_));
  m.impl("histc", TORCH_FN(nn::histc));
  m.impl("histc.out", TORCH_FN(nn::histc_out));
  m.impl("masked_select", TORCH_FN(nn::masked_select));
  m.impl("masked_select.out", TORCH_FN(nn::masked_select_out));
  m.impl("nonzero", TORCH_FN(nn::nonzero));
  m.impl("nonzero.out", TORCH_FN(nn::nonzero_out));
  m.impl("nonzero_static", TORCH_FN(nn::nonzero_static));
  m.impl("nonzero_static.out", TORCH_FN(nn::nonzero_static_out));
}

}  // namespace torchneuron::aten
