// Selection operators on neuron: argmax / argmin, max / min along a dim with indices, sort,
// topk, mode, and unique, kthvalue, median and nanmedian (composed from sort). The host resolves
// the dim and allocates; csrc/kernels/select runs on the queue over a contiguous copy of the
// input. searchsorted / bucketize live in search_ops.cpp.
#include <ATen/ScalarOps.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/argmax_ops.h>
#include <ATen/ops/_unique2_ops.h>
#include <ATen/ops/argmin_ops.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/full.h>
#include <ATen/ops/masked_select.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/max_ops.h>
#include <ATen/ops/min_ops.h>
#include <ATen/ops/sort_ops.h>
#include <ATen/ops/topk_ops.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/floor_divide.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/kthvalue_ops.h>
#include <ATen/ops/median_ops.h>
#include <ATen/ops/mode_ops.h>
#include <ATen/ops/nanmedian_ops.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <tuple>

#include "aten/fallback/cpu_fallback.h"
#include "aten/device/neuron_tensor.h"
#include "aten/ops/unsigned_dtypes.h"
#include "aten/ops/index_checks.h"
#include "kernels/select.h"

namespace torchneuron::aten {
namespace select {
namespace {

bool kernel_can_take(const at::Tensor& t) { return has_kernel_dtype(t.scalar_type()) && !t.is_complex(); }

kernels::SoftmaxShape line_shape(const at::Tensor& t, int64_t dim) {
  kernels::SoftmaxShape shape;
  for (int64_t d = 0; d < dim; ++d) shape.outer *= t.size(d);
  shape.dim = t.dim() == 0 ? 1 : t.size(dim);
  for (int64_t d = dim + 1; d < t.dim(); ++d) shape.inner *= t.size(d);
  return shape;
}

std::vector<int64_t> sizes_with(const at::Tensor& t, int64_t dim, int64_t size, bool drop) {
  std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
  if (t.dim() == 0) return sizes;
  if (drop) {
    sizes.erase(sizes.begin() + dim);
  } else {
    sizes[dim] = size;
  }
  return sizes;
}

// Writes a functional result into out= tensors.
void write_out(const at::Tensor& value, const at::Tensor& out) {
  at::native::resize_output(out, value.sizes());
  out.copy_(value);
}

// values may be undefined (argmax / argmin).
void launch_extremum(const char* name, bool is_max, const at::Tensor& self, int64_t dim, at::Tensor& values,
                     at::Tensor& indices) {
  const at::Tensor input = self.contiguous();
  if (indices.numel() == 0) return;
  const kernels::SoftmaxShape shape = line_shape(input, dim);
  const kernels::DType dtype = to_kernel_dtype(input.scalar_type());
  const void* pi = input.data_ptr();
  void* pv = values.defined() ? values.data_ptr() : nullptr;
  int64_t* px = indices.data_ptr<int64_t>();
  enqueue(indices, name, {&input}, [=] { kernels::arg_extremum(dtype, is_max, shape, pi, pv, px); });
}

void check_reducible(const char* name, const at::Tensor& self, int64_t dim) {
  TORCH_CHECK_INDEX(self.dim() == 0 || self.size(dim) != 0, name, "(): Expected reduction dim ", dim,
              " to have non-zero size.");
}

}  // namespace

// ---- argmax / argmin -------------------------------------------------------------------------

at::Tensor arg_extremum(const char* name, bool is_max, const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  at::Tensor input = self;
  int64_t d = 0;
  if (dim.has_value()) {
    d = at::maybe_wrap_dim(*dim, self.dim());
    // CPU's reduction iterator holds a 64-bit dim mask (the kernel here works on lines).
    TORCH_CHECK(self.dim() <= 64, "only tensors with up to 64 dims are supported");
    check_reducible(name + 6, self, d);  // the name without "aten::"
  } else {
    TORCH_CHECK_INDEX(self.numel() > 0, name + 6, "(): Expected reduction dim to be specified for input.numel() == 0.");
    input = self.reshape({-1});
  }
  std::vector<int64_t> sizes = dim.has_value() ? sizes_with(self, d, 1, !keepdim)
                                               : (keepdim ? std::vector<int64_t>(self.dim(), 1) : std::vector<int64_t>{});
  at::Tensor indices = at::empty(sizes, self.options().dtype(at::kLong));
  at::Tensor no_values;
  launch_extremum(name, is_max, input, d, no_values, indices);
  return indices;
}

at::Tensor argmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  if (!kernel_can_take(self)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(argmax)>::call(self, dim, keepdim);
  }
  return arg_extremum("aten::argmax", true, self, dim, keepdim);
}

at::Tensor argmin(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  if (!kernel_can_take(self)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(argmin)>::call(self, dim, keepdim);
  }
  return arg_extremum("aten::argmin", false, self, dim, keepdim);
}

at::Tensor& argmax_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
  write_out(select::argmax(self, dim, keepdim), out);
  return out;
}

at::Tensor& argmin_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
  write_out(select::argmin(self, dim, keepdim), out);
  return out;
}

// ---- max / min along a dim -------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor> extremum_dim(const char* name, bool is_max, const at::Tensor& self, int64_t dim,
                                                bool keepdim) {
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  check_reducible(name + 6, self, d);
  const std::vector<int64_t> sizes = sizes_with(self, d, 1, !keepdim);
  at::Tensor values = at::empty(sizes, self.options());
  at::Tensor indices = at::empty(sizes, self.options().dtype(at::kLong));
  launch_extremum(name, is_max, self, d, values, indices);
  return {values, indices};
}

// uint16/32/64 select on their order keys (unsigned_dtypes.h): the same positions and ties.
std::tuple<at::Tensor, at::Tensor> from_keys(const std::tuple<at::Tensor, at::Tensor>& result, c10::ScalarType type) {
  return {from_order_keys(std::get<0>(result), type), std::get<1>(result)};
}

std::tuple<at::Tensor, at::Tensor> max_dim(const at::Tensor& self, int64_t dim, bool keepdim) {
  if (is_wide_unsigned(self.scalar_type())) {
    return from_keys(select::max_dim(unsigned_order_keys(self), dim, keepdim), self.scalar_type());
  }
  if (!kernel_can_take(self)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(max, dim)>::call(self, dim, keepdim);
  }
  return extremum_dim("aten::max", true, self, dim, keepdim);
}

std::tuple<at::Tensor, at::Tensor> min_dim(const at::Tensor& self, int64_t dim, bool keepdim) {
  if (is_wide_unsigned(self.scalar_type())) {
    return from_keys(select::min_dim(unsigned_order_keys(self), dim, keepdim), self.scalar_type());
  }
  if (!kernel_can_take(self)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(min, dim)>::call(self, dim, keepdim);
  }
  return extremum_dim("aten::min", false, self, dim, keepdim);
}

// CPU's out= dtype checks of max / min along a dim, values first, with its message.
void check_extremum_out(const at::Tensor& self, const at::Tensor& values, const at::Tensor& indices) {
  for (const auto& [out, dtype] : {std::pair{&values, self.dtype()}, std::pair{&indices, caffe2::TypeMeta::Make<int64_t>()}}) {
    TORCH_CHECK(out->dtype() == dtype, "Expected out tensor to have dtype ", dtype, ", but got ", out->dtype(), " instead");
  }
}

std::tuple<at::Tensor&, at::Tensor&> max_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& values,
                                                 at::Tensor& indices) {
  check_extremum_out(self, values, indices);
  auto [v, i] = select::max_dim(self, dim, keepdim);
  write_out(v, values);
  write_out(i, indices);
  return {values, indices};
}

std::tuple<at::Tensor&, at::Tensor&> min_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& values,
                                                 at::Tensor& indices) {
  check_extremum_out(self, values, indices);
  auto [v, i] = select::min_dim(self, dim, keepdim);
  write_out(v, values);
  write_out(i, indices);
  return {values, indices};
}

// ---- sort / topk -----------------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor> sort(const at::Tensor& self, std::optional<bool> stable, int64_t dim, bool descending) {
  if (is_wide_unsigned(self.scalar_type())) {
    return from_keys(select::sort(unsigned_order_keys(self), stable, dim, descending), self.scalar_type());
  }
  if (!kernel_can_take(self)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(sort, stable)>::call(self, stable, dim, descending);
  }
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  const at::Tensor input = self.contiguous();
  at::Tensor values = at::empty(self.sizes(), self.options());
  at::Tensor indices = at::empty(self.sizes(), self.options().dtype(at::kLong));
  if (input.numel() > 0) {
    const kernels::SoftmaxShape shape = line_shape(input, d);
    const kernels::DType dtype = to_kernel_dtype(input.scalar_type());
    const void* pi = input.data_ptr();
    void* pv = values.data_ptr();
    int64_t* px = indices.data_ptr<int64_t>();
    const bool is_stable = stable.value_or(false);
    enqueue(values, "aten::sort", {&input}, [=] { kernels::sort(dtype, shape, is_stable, descending, pi, pv, px); });
  }
  return {values, indices};
}

std::tuple<at::Tensor&, at::Tensor&> sort_out(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                              bool descending, at::Tensor& values, at::Tensor& indices) {
  auto [v, i] = select::sort(self, stable, dim, descending);
  write_out(v, values);
  write_out(i, indices);
  return {values, indices};
}

std::tuple<at::Tensor, at::Tensor> topk(const at::Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted) {
  if (is_wide_unsigned(self.scalar_type())) {
    return from_keys(select::topk(unsigned_order_keys(self), k, dim, largest, sorted), self.scalar_type());
  }
  if (!kernel_can_take(self)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(topk)>::call(self, k, dim, largest, sorted);
  }
  const int64_t d = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  const int64_t size = self.dim() == 0 ? 1 : self.size(d);
  TORCH_CHECK(k >= 0 && k <= size, "selected index k out of range");
  const at::Tensor input = self.contiguous();
  const std::vector<int64_t> sizes = sizes_with(self, d, k, false);
  at::Tensor values = at::empty(sizes, self.options());
  at::Tensor indices = at::empty(sizes, self.options().dtype(at::kLong));
  if (values.numel() > 0) {
    const kernels::SoftmaxShape shape = line_shape(input, d);
    const kernels::DType dtype = to_kernel_dtype(input.scalar_type());
    const void* pi = input.data_ptr();
    void* pv = values.data_ptr();
    int64_t* px = indices.data_ptr<int64_t>();
    enqueue(values, "aten::topk", {&input}, [=] { kernels::topk(dtype, shape, k, largest, pi, pv, px); });
  }
  return {values, indices};
}

std::tuple<at::Tensor&, at::Tensor&> topk_out(const at::Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted,
                                              at::Tensor& values, at::Tensor& indices) {
  auto [v, i] = select::topk(self, k, dim, largest, sorted);
  write_out(v, values);
  write_out(i, indices);
  return {values, indices};
}

// ---- unique: sort, mark where values change, compact ----------------------------------------

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique(const at::Tensor& self, bool sorted, bool return_inverse,
                                                     bool return_counts) {
  if (is_wide_unsigned(self.scalar_type())) {
    auto [keys, inverse, counts] = select::unique(unsigned_order_keys(self), sorted, return_inverse, return_counts);
    return {from_order_keys(keys, self.scalar_type()), inverse, counts};
  }
  if (!kernel_can_take(self)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_unique2)>::call(self, sorted, return_inverse,
                                                                                       return_counts);
  }
  const auto long_options = self.options().dtype(at::kLong);
  const int64_t n = self.numel();
  at::Tensor inverse = at::empty(return_inverse ? self.sizes() : at::IntArrayRef{0}, long_options);
  at::Tensor counts = at::empty({0}, long_options);
  if (n == 0) return {at::empty({0}, self.options()), inverse, counts};
  auto [ordered, order] = select::sort(self.reshape({-1}), /*stable=*/true, 0, /*descending=*/false);
  at::Tensor starts_group = at::ones({n}, self.options().dtype(at::kBool));
  if (n > 1) starts_group.narrow(0, 1, n - 1).copy_(at::ne(ordered.narrow(0, 1, n - 1), ordered.narrow(0, 0, n - 1)));
  const at::Tensor values = at::masked_select(ordered, starts_group);
  if (return_inverse) {
    const at::Tensor group = at::cumsum(starts_group, 0).sub_(1);
    at::Tensor flat_inverse = at::empty({n}, long_options);
    const TrustedIndices trusted;  // sort's permutation
    flat_inverse.index_put_({order}, group);
    inverse = flat_inverse.view(self.sizes());
  }
  if (return_counts) {
    const at::Tensor starts = at::nonzero(starts_group).squeeze(1);
    const at::Tensor ends = at::cat({starts.narrow(0, 1, starts.numel() - 1), at::full({1}, n, long_options)});
    counts = at::sub(ends, starts);
  }
  return {values, inverse, counts};
}

// ---- order statistics (kthvalue, median, nanmedian), composed from a stable sort ---------------
// Among equal values, which one's index is returned is unspecified in PyTorch (CPU's
// nth_element picks one); here it is the one a stable sort puts at the position.

namespace {

enum class OrderStatistic { kKth, kMedian, kNanMedian };

std::tuple<at::Tensor, at::Tensor> order_statistic(const char* op, OrderStatistic kind, const at::Tensor& self, int64_t k,
                                                   int64_t dim, bool keepdim) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  const int64_t n = self.dim() == 0 ? 1 : self.size(dim);
  TORCH_CHECK_INDEX(n > 0, op, "(): Expected reduction dim ", dim, " to have non-zero size.");
  if (kind == OrderStatistic::kKth) {
    TORCH_CHECK(k >= 1 && k <= n, "kthvalue(): selected number k out of range for dimension ", dim);
  }
  if (self.dim() == 0) return {self.clone(), at::zeros({}, self.options().dtype(at::kLong))};
  std::vector<int64_t> reduced(self.sizes().begin(), self.sizes().end());
  reduced[dim] = 1;
  if (self.numel() == 0) {
    at::Tensor values = at::empty(reduced, self.options()), indices = at::empty(reduced, self.options().dtype(at::kLong));
    return keepdim ? std::tuple{values, indices} : std::tuple{values.squeeze(dim), indices.squeeze(dim)};
  }
  auto [sorted, order] = at::sort(self, /*stable=*/true, dim, /*descending=*/false);
  at::Tensor position;  // [.., 1, ..] int64: where the statistic sits in each sorted line
  if (kind == OrderStatistic::kKth || !at::isFloatingType(self.scalar_type())) {
    const int64_t at_position = kind == OrderStatistic::kKth ? k - 1 : (n - 1) / 2;
    position = at::full(reduced, at_position, self.options().dtype(at::kLong));
  } else {
    // NaNs sort last, in their original order. median: the first NaN where a line has one;
    // nanmedian: the lower median of the numbers (the first NaN of an all-NaN line).
    const at::Tensor nans = at::sum(at::isnan(self), {dim}, /*keepdim=*/true, at::kLong);
    const at::Tensor numbers = at::rsub(nans, n);
    if (kind == OrderStatistic::kMedian) {
      position = at::where(at::gt(nans, 0), numbers, at::full(reduced, (n - 1) / 2, nans.options()));
    } else {
      position = at::clamp_min(at::floor_divide(at::sub(numbers, 1), 2), 0);
    }
  }
  at::Tensor values = at::gather(sorted, dim, position), indices = at::gather(order, dim, position);
  if (!keepdim) {
    values = values.squeeze(dim);
    indices = indices.squeeze(dim);
  }
  return {values, indices};
}

std::tuple<at::Tensor&, at::Tensor&> write_pair(const std::tuple<at::Tensor, at::Tensor>& result, at::Tensor& values,
                                                at::Tensor& indices) {
  at::native::resize_output(values, std::get<0>(result).sizes());
  at::native::resize_output(indices, std::get<1>(result).sizes());
  values.copy_(std::get<0>(result));
  indices.copy_(std::get<1>(result));
  return {values, indices};
}

bool sortable(const at::Tensor& t) { return kernel_can_take(t) && t.scalar_type() != at::kBool; }

}  // namespace

std::tuple<at::Tensor&, at::Tensor&> kthvalue_out(const at::Tensor& self, int64_t k, int64_t dim, bool keepdim,
                                                  at::Tensor& values, at::Tensor& indices) {
  if (!sortable(self)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(kthvalue, values)>::call(self, k, dim, keepdim,
                                                                                              values, indices);
  }
  return write_pair(order_statistic("kthvalue", OrderStatistic::kKth, self, k, dim, keepdim), values, indices);
}

std::tuple<at::Tensor&, at::Tensor&> median_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& values,
                                                    at::Tensor& indices) {
  if (!sortable(self)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(median, dim_values)>::call(self, dim, keepdim,
                                                                                                 values, indices);
  }
  return write_pair(order_statistic("median", OrderStatistic::kMedian, self, 0, dim, keepdim), values, indices);
}

std::tuple<at::Tensor&, at::Tensor&> nanmedian_dim_out(const at::Tensor& self, int64_t dim, bool keepdim,
                                                       at::Tensor& values, at::Tensor& indices) {
  if (!sortable(self)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(nanmedian, dim_values)>::call(self, dim, keepdim,
                                                                                                    values, indices);
  }
  return write_pair(order_statistic("nanmedian", OrderStatistic::kNanMedian, self, 0, dim, keepdim), values, indices);
}

// torch.mode: each line (along dim, made the last and contiguous) through kernels::mode, which
// returns CPU's value and index. Dtypes CPU has no mode for (complex, uint16/32/64, float8)
// raise its error, after the checks CPU makes first.
std::tuple<at::Tensor, at::Tensor> mode(const at::Tensor& self, int64_t dim, bool keepdim) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  if (self.dim() == 0) return {self.clone(), at::zeros({}, self.options().dtype(at::kLong))};
  check_reducible("mode", self, dim);
  TORCH_CHECK_NOT_IMPLEMENTED(kernel_can_take(self), "\"mode_cpu\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  const at::Tensor lines = self.movedim(dim, -1).contiguous();
  const int64_t n = self.size(dim), rows = lines.numel() / n;
  at::Tensor values = at::empty(sizes_with(self, dim, 1, true), self.options());
  at::Tensor indices = at::empty(values.sizes(), self.options().dtype(at::kLong));
  if (rows > 0) {
    const kernels::DType dtype = to_kernel_dtype(self.scalar_type());
    const void* pi = lines.data_ptr();
    void* pv = values.data_ptr();
    int64_t* px = indices.data_ptr<int64_t>();
    enqueue(values, "aten::mode", {&lines}, [=] { kernels::mode(dtype, rows, n, pi, pv, px); });
  }
  if (keepdim) return {values.unsqueeze(dim), indices.unsqueeze(dim)};
  return {values, indices};
}

// torch.mode's out= form: ATen's composite admits only CPU / CUDA / XPU tensors. CPU's checks on
// the out= tensors, then the functional op written into them.
std::tuple<at::Tensor&, at::Tensor&> mode_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& values,
                                              at::Tensor& indices) {
  TORCH_CHECK(self.layout() == at::Layout::Strided, "mode only supports strided layout, got: ", self.layout());
  TORCH_CHECK(self.device() == values.device(), "expected device '", self.device(), "' but got '", values.device(),
              "' for values output");
  TORCH_CHECK(self.device() == indices.device(), "expected device '", self.device(), "' but got '", indices.device(),
              "' for indices output");
  TORCH_CHECK(self.scalar_type() == values.scalar_type(), "expected scalar type '", self.scalar_type(), "' but got '",
              values.scalar_type(), "' for values output");
  TORCH_CHECK(indices.scalar_type() == at::kLong, "expected scalar type '", at::kLong, "' but got '",
              indices.scalar_type(), "' for indices output");
  return write_pair(select::mode(self, dim, keepdim), values, indices);
}

// The whole tensor's median (the value only).
at::Tensor median(const at::Tensor& self) {
  if (!sortable(self) || self.numel() == 0) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(median)>::call(self);
  }
  return std::get<0>(order_statistic("median", OrderStatistic::kMedian, self.reshape({-1}), 0, 0, false));
}

at::Tensor nanmedian(const at::Tensor& self) {
  if (!sortable(self) || self.numel() == 0) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(nanmedian)>::call(self);
  }
  return std::get<0>(order_statistic("nanmedian", OrderStatistic::kNanMedian, self.reshape({-1}), 0, 0, false));
}

}  // namespace select

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("argmax", TORCH_FN(select::argmax));
  m.impl("argmax.out", TORCH_FN(select::argmax_out));
  m.impl("argmin", TORCH_FN(select::argmin));
  m.impl("argmin.out", TORCH_FN(select::argmin_out));
  m.impl("max.dim", TORCH_FN(select::max_dim));
  m.impl("max.dim_max", TORCH_FN(select::max_dim_out));
  m.impl("min.dim", TORCH_FN(select::min_dim));
  m.impl("min.dim_min", TORCH_FN(select::min_dim_out));
  m.impl("sort.stable", TORCH_FN(select::sort));
  m.impl("sort.values_stable", TORCH_FN(select::sort_out));
  m.impl("topk", TORCH_FN(select::topk));
  m.impl("topk.values", TORCH_FN(select::topk_out));
  m.impl("_unique2", TORCH_FN(select::unique));
  m.impl("kthvalue.values", TORCH_FN(select::kthvalue_out));
  m.impl("median.dim_values", TORCH_FN(select::median_dim_out));
  m.impl("median", TORCH_FN(select::median));
  m.impl("mode", TORCH_FN(select::mode));
  m.impl("mode.values", TORCH_FN(select::mode_out));
  m.impl("nanmedian.dim_values", TORCH_FN(select::nanmedian_dim_out));
  m.impl("nanmedian", TORCH_FN(select::nanmedian));
}

}  // namespace torchneuron::aten
