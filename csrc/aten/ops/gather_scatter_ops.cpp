// Gathers and scatters along one dim on neuron: index_select (the embedding forward), gather,
// scatter (with a value's accumulation or a reduction), scatter_reduce and index_reduce. The
// host checks arguments and makes the index int64 and contiguous; csrc/kernels/nn runs on the queue.
// Kernels take raw pointers: a temporary freed here can only be reused by later commands,
// which the in-order queue runs after this one.
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/gather_ops.h>
#include <ATen/ops/index_reduce_ops.h>
#include <ATen/ops/index_select_ops.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/scatter_add_ops.h>
#include <ATen/ops/scatter_ops.h>
#include <ATen/ops/scatter_reduce_ops.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <limits>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "aten/device/neuron_tensor.h"
#include "aten/ops/unsigned_dtypes.h"
#include "aten/fallback/cpu_fallback.h"
#include "aten/ops/nn_common.h"
#include "kernels/nn.h"

namespace torchneuron::aten {
namespace nn {

// ---- index_select -----------------------------------------------------------------------------

at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& result) {
  TORCH_CHECK(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == c10::kLong || index.scalar_type() == c10::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  // Rows move as bytes: every dtype that copies as bits (uint16/32/64 and float8 too).
  if (!copies_as_bits(self.scalar_type()) || result.scalar_type() != self.scalar_type() ||
      index.device() != self.device()) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(index_select, out)>::call(self, dim, index, result);
  }
  const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
  const at::Tensor src = self.contiguous();
  const at::Tensor idx = index.reshape({-1}).to(c10::kLong).contiguous();
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
  if (self.dim() > 0) shape[wrapped] = idx.numel();
  at::native::resize_output(result, shape);
  at::Tensor out = result.is_contiguous() ? result : at::empty(shape, src.options());
  int64_t outer = 1;
  for (int64_t d = 0; d < wrapped; ++d) outer *= src.size(d);
  int64_t row = static_cast<int64_t>(src.element_size());
  for (int64_t d = wrapped + 1; d < src.dim(); ++d) row *= src.size(d);
  const int64_t self_dim = src.dim() == 0 ? 1 : src.size(wrapped);
  if (out.numel() > 0) {
    const char* ps = static_cast<const char*>(src.data_ptr());
    const auto* pi = static_cast<const int64_t*>(idx.data_ptr());
    char* po = static_cast<char*>(out.data_ptr());
    const int64_t count = idx.numel();
    enqueue(out, "aten::index_select", {&src, &idx}, [=] { kernels::index_select(outer, self_dim, row, ps, pi, count, po); });
  }
  if (!out.is_same(result)) result.copy_(out);
  return result;
}

at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  at::Tensor result = at::empty({0}, self.options());
  return index_select_out(self, dim, index, result);
}

// ---- gather / scatter ----------------------------------------------------------------------

void check_index_shape(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor* src,
                       const char* name) {
  TORCH_CHECK(index.scalar_type() == c10::kLong || index.scalar_type() == c10::kInt, name,
              "(): Expected dtype int32 or int64 for index");
  TORCH_CHECK(index.dim() == self.dim() || index.numel() == 0, "Index tensor must have the same number of dimensions as ",
              src ? "self tensor" : "input tensor");
  for (int64_t d = 0; d < index.dim(); ++d) {
    if (d == dim) continue;
    TORCH_CHECK(index.size(d) <= self.size(d), "Size does not match at dimension ", d, " expected index ",
                index.sizes(), " to be no larger than self ", self.sizes(), " apart from dimension ", dim);
    if (src != nullptr) {
      TORCH_CHECK(index.size(d) <= src->size(d), "Size does not match at dimension ", d, " expected index ",
                  index.sizes(), " to be no larger than src ", src->sizes());
    }
  }
}

// The index as the kernels read it, int64 and contiguous. An index broadcast (stride 0) over
// every dim after `dim`, as x.gather(1, i.unsqueeze(-1).expand(b, k, d)) writes it, keeps only
// its entries up to `dim` (the flag is true): the broadcast is never materialized.
std::pair<at::Tensor, bool> kernel_index(const at::Tensor& index, int64_t dim) {
  bool inner_broadcast = index.dim() > dim + 1;
  for (int64_t d = dim + 1; d < index.dim(); ++d) inner_broadcast = inner_broadcast && index.stride(d) == 0;
  at::Tensor entries = index;
  if (inner_broadcast) {
    for (int64_t d = dim + 1; d < index.dim(); ++d) entries = entries.narrow(d, 0, 1);
  }
  return {entries.to(c10::kLong).contiguous(), inner_broadcast};
}

at::Tensor& gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad,
                       at::Tensor& result) {
  if (self.dim() == 0 && index.dim() <= 1 && index.device() == self.device() && result.scalar_type() == self.scalar_type()) {
    at::Tensor line = at::empty({0}, self.options());  // as one-element 1-D tensors
    gather_out(self.view({1}), dim, index.reshape({-1}), sparse_grad, line);
    at::native::resize_output(result, index.sizes());
    return result.copy_(line.view(index.sizes()));
  }
  if (self.dim() == 0 || index.dim() == 0 || !copies_as_bits(self.scalar_type()) ||
      result.scalar_type() != self.scalar_type() || index.device() != self.device()) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(gather, out)>::call(self, dim, index, sparse_grad, result);
  }
  const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
  if (index.numel() == 0) {  // any index dtype is accepted when there is nothing to gather
    at::native::resize_output(result, index.sizes());
    return result;
  }
  check_index_shape(self, wrapped, index, nullptr, "gather");
  const at::Tensor data = self.contiguous();
  const auto [idx, inner_broadcast] = kernel_index(index, wrapped);
  at::native::resize_output(result, index.sizes());
  at::Tensor out = result.is_contiguous() ? result : at::empty(index.sizes(), data.options());
  if (idx.numel() > 0) {
    const int ndim = static_cast<int>(data.dim());
    std::array<int64_t, kernels::kMaxDims> index_sizes{}, data_sizes{};
    for (int d = 0; d < ndim; ++d) {
      index_sizes[d] = index.size(d);
      data_sizes[d] = data.size(d);
    }
    const auto* pi = idx.data_ptr<int64_t>();
    const char* pd = static_cast<const char*>(data.data_ptr());
    char* po = static_cast<char*>(out.data_ptr());
    const int64_t bytes = static_cast<int64_t>(data.element_size());
    const int d = static_cast<int>(wrapped);
    const bool broadcast = inner_broadcast;  // a plain local: the lambda copies it
    enqueue(out, "aten::gather", {&data, &idx}, [=] {
      kernels::gather(ndim, index_sizes.data(), pi, broadcast, d, data_sizes.data(), bytes, pd, po);
    });
  }
  if (!out.is_same(result)) result.copy_(out);
  return result;
}

at::Tensor gather(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad) {
  at::Tensor result = at::empty({0}, self.options());
  return gather_out(self, dim, index, sparse_grad, result);
}

// result = self with src scattered (add: accumulated; reduce: reduced by that op) along dim;
// result may be self.
bool scatter_into(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src, bool add,
                  at::Tensor& result, const char* name,
                  std::optional<kernels::ScatterReduceOp> reduce = std::nullopt) {
  if (self.dim() == 0 && index.dim() <= 1 && src.dim() <= 1) {  // as one-element 1-D tensors (autograd's 0-dim backward)
    if (!result.is_same(self)) at::native::resize_output(result, {});
    at::Tensor result_line = result.view({1});
    return scatter_into(self.view({1}), dim, index.reshape({-1}), src.reshape({-1}), add, result_line, name, reduce);
  }
  if (self.dim() == 0 || index.dim() == 0 || !has_kernel_dtype(self.scalar_type()) ||
      c10::isComplexType(self.scalar_type()) || src.scalar_type() != self.scalar_type() ||
      result.scalar_type() != self.scalar_type() || index.device() != self.device() || src.device() != self.device()) {
    return false;
  }
  const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
  if (index.numel() != 0) check_index_shape(self, wrapped, index, &src, name);
  if (!result.is_same(self)) {
    at::native::resize_output(result, self.sizes());
    result.copy_(self);
  }
  at::Tensor data = result.is_contiguous() ? result : result.contiguous();
  if (index.numel() == 0) return true;
  const auto [idx, inner_broadcast] = kernel_index(index, wrapped);
  const at::Tensor values = src.as_strided(index.sizes(), src.strides(), src.storage_offset()).contiguous();
  {
    const int ndim = static_cast<int>(data.dim());
    std::array<int64_t, kernels::kMaxDims> index_sizes{}, data_sizes{};
    for (int d = 0; d < ndim; ++d) {
      index_sizes[d] = index.size(d);
      data_sizes[d] = data.size(d);
    }
    const auto* pi = idx.data_ptr<int64_t>();
    const char* ps = static_cast<const char*>(values.data_ptr());
    char* pd = static_cast<char*>(data.data_ptr());
    const kernels::DType dtype = to_kernel_dtype(data.scalar_type());
    const int d = static_cast<int>(wrapped);
    const bool broadcast = inner_broadcast;  // a plain local: the lambda copies it
    enqueue(data, name, {&idx, &values}, [=] {
      if (reduce.has_value()) {
        kernels::scatter_reduce(dtype, *reduce, ndim, index_sizes.data(), pi, broadcast, d, data_sizes.data(), ps, pd);
      } else {
        kernels::scatter(dtype, add, ndim, index_sizes.data(), pi, broadcast, d, data_sizes.data(), ps, pd);
      }
    });
  }
  if (!data.is_same(result)) result.copy_(data);
  return true;
}

at::Tensor& scatter_src_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                            at::Tensor& result) {
  at::assert_no_overlap(result, index);  // CPU's checks, before the fallback's copies hide the overlap
  at::assert_no_overlap(result, src);
  if (!scatter_into(self, dim, index, src, false, result, "aten::scatter")) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(scatter, src_out)>::call(self, dim, index, src, result);
  }
  return result;
}

at::Tensor scatter_src(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  at::Tensor result = at::empty({0}, self.options());
  return scatter_src_out(self, dim, index, src, result);
}

at::Tensor& scatter_src_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  return scatter_src_out(self, dim, index, src, self);
}

at::Tensor& scatter_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                            at::Tensor& result) {
  at::assert_no_overlap(result, index);
  at::assert_no_overlap(result, src);
  if (!scatter_into(self, dim, index, src, true, result, "aten::scatter_add")) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(scatter_add, out)>::call(self, dim, index, src, result);
  }
  return result;
}

at::Tensor scatter_add(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  at::Tensor result = at::empty({0}, self.options());
  return scatter_add_out(self, dim, index, src, result);
}

at::Tensor& scatter_add_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  return scatter_add_out(self, dim, index, src, self);
}

// The identity of amax (lowest: true) or amin in a dtype: -inf / inf for floats, the integer
// type's own limits (a Scalar beyond them would not convert).
c10::Scalar reduction_extreme(at::ScalarType type, bool lowest) {
  auto limit = [lowest](auto zero) -> c10::Scalar {
    using T = decltype(zero);
    return lowest ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  };
  switch (type) {
    case at::kByte: return limit(uint8_t{});
    case at::kChar: return limit(int8_t{});
    case at::kShort: return limit(int16_t{});
    case at::kInt: return limit(int32_t{});
    case at::kLong: return limit(int64_t{});
    default: return lowest ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
}

// scatter_reduce.two: as CPU PyTorch computes it. Without include_self, the written positions
// start from the reduction's identity; mean sums, then divides by the count of values each
// position reduced (floor division for integers).
// name: the op that device errors name (index_reduce comes through here too).
at::Tensor& scatter_reduce_into(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                c10::string_view reduce, bool include_self, at::Tensor& result, const char* name) {
  TORCH_CHECK(reduce == "sum" || reduce == "prod" || reduce == "mean" || reduce == "amax" || reduce == "amin",
              "reduce argument must be either sum, prod, mean, amax or amin, got ", reduce);
  if (self.scalar_type() == c10::kBool && src.scalar_type() == c10::kBool && result.scalar_type() == c10::kBool &&
      reduce != "mean" && self.dim() > 0 && index.dim() > 0 && index.device() == self.device() &&
      src.device() == self.device()) {
    // Truth values as 0 / 1 in int64 (no wrap-around): sum and amax are or, prod and amin and.
    at::Tensor wide = self.to(c10::kLong);
    scatter_reduce_into(wide, dim, index, src.to(c10::kLong), reduce, include_self, wide, name);
    at::native::resize_output(result, self.sizes());
    return result.copy_(wide.ne(0));
  }
  const bool supported = self.dim() > 0 && index.dim() > 0 && has_kernel_dtype(self.scalar_type()) &&
                         !c10::isComplexType(self.scalar_type()) && self.scalar_type() != c10::kBool &&
                         src.scalar_type() == self.scalar_type() && result.scalar_type() == self.scalar_type() &&
                         index.device() == self.device() && src.device() == self.device();
  if (!supported) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(scatter_reduce, two_out)>::call(
        self, dim, index, src, reduce, include_self, result);
  }
  const bool mean = reduce == "mean";
  const kernels::ScatterReduceOp op = reduce == "prod"   ? kernels::ScatterReduceOp::kProd
                                      : reduce == "amax" ? kernels::ScatterReduceOp::kAmax
                                      : reduce == "amin" ? kernels::ScatterReduceOp::kAmin
                                                         : kernels::ScatterReduceOp::kSum;
  if (!result.is_same(self)) {
    at::native::resize_output(result, self.sizes());
    result.copy_(self);
  }
  if (index.numel() == 0) return result;
  if (!include_self) {
    c10::Scalar identity = op == kernels::ScatterReduceOp::kProd ? 1 : 0;
    if (op == kernels::ScatterReduceOp::kAmax || op == kernels::ScatterReduceOp::kAmin) {
      identity = reduction_extreme(self.scalar_type(), op == kernels::ScatterReduceOp::kAmax);
    }
    result.scatter_(dim, index, identity);
  }
  // `supported` above holds every condition scatter_into checks: it cannot decline here.
  const bool reduced = scatter_into(result, dim, index, src, false, result, name, op);
  TORCH_INTERNAL_ASSERT(reduced, name, ": scatter_into declined a reduction it was checked for");
  if (mean) {
    at::Tensor count = include_self ? at::ones_like(result) : at::zeros_like(result);
    count.scatter_add_(dim, index, at::ones_like(src));
    count.masked_fill_(at::eq(count, 0), 1);
    if (at::isFloatingType(result.scalar_type())) {
      result.div_(count);
    } else {
      result.div_(count, "floor");
    }
  }
  return result;
}

at::Tensor& scatter_reduce_two_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                   c10::string_view reduce, bool include_self, at::Tensor& result) {
  return scatter_reduce_into(self, dim, index, src, reduce, include_self, result, "aten::scatter_reduce");
}

at::Tensor scatter_reduce_two(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                              c10::string_view reduce, bool include_self) {
  at::Tensor result = at::empty({0}, self.options());
  return scatter_reduce_two_out(self, dim, index, src, reduce, include_self, result);
}

at::Tensor& scatter_reduce_two_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                c10::string_view reduce, bool include_self) {
  return scatter_reduce_two_out(self, dim, index, src, reduce, include_self, self);
}

// The legacy scatter(..., reduce="add" / "multiply"): scatter_reduce's sum / prod including self.
at::Tensor& scatter_legacy_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                      c10::string_view reduce, at::Tensor& result) {
  TORCH_CHECK(reduce == "add" || reduce == "multiply", "reduce argument must be either add or multiply.");
  return scatter_reduce_into(self, dim, index, src, reduce == "add" ? "sum" : "prod", true, result, "aten::scatter");
}

at::Tensor scatter_legacy_reduce(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                 c10::string_view reduce) {
  at::Tensor result = at::empty({0}, self.options());
  return scatter_legacy_reduce_out(self, dim, index, src, reduce, result);
}

at::Tensor& scatter_legacy_reduce_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                   c10::string_view reduce) {
  return scatter_legacy_reduce_out(self, dim, index, src, reduce, self);
}

// index_reduce: scatter_reduce with the 1-D index spread over source's shape along dim.
// Anything but a 1-D index whose length is source's size along dim, with source's other sizes
// those of self, goes to the CPU, which raises its own error for it.
at::Tensor& index_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                             c10::string_view reduce, bool include_self, at::Tensor& result) {
  TORCH_CHECK(reduce == "prod" || reduce == "mean" || reduce == "amax" || reduce == "amin",
              "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got ", reduce, ".");
  if (self.dim() == 0 && index.dim() <= 1 && source.dim() <= 1 && (dim == 0 || dim == -1) &&
      index.numel() == source.numel()) {
    // A scalar as a one-element vector (its view, so that the in-place form writes it).
    const at::Tensor vector = self.reshape({1});
    at::Tensor vector_result = result.is_same(self) ? vector : at::empty({0}, result.options());
    index_reduce_out(vector, 0, index.reshape({-1}), source.reshape({-1}), reduce, include_self, vector_result);
    if (!result.is_same(self)) {
      at::native::resize_output(result, {});
      result.copy_(vector_result.squeeze(0));
    }
    return result;
  }
  bool shaped = self.dim() > 0 && index.dim() == 1 && source.dim() == self.dim() &&
                (index.scalar_type() == c10::kLong || index.scalar_type() == c10::kInt);
  const int64_t wrapped = shaped ? at::maybe_wrap_dim(dim, self.dim()) : 0;
  for (int64_t d = 0; shaped && d < self.dim(); ++d) {
    shaped = d == wrapped ? source.size(d) == index.numel() : source.size(d) == self.size(d);
  }
  if (!shaped) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(index_reduce, out)>::call(
        self, dim, index, source, reduce, include_self, result);
  }
  std::vector<int64_t> along(static_cast<size_t>(source.dim()), 1);
  along[static_cast<size_t>(wrapped)] = -1;
  const at::Tensor spread = index.reshape(along).expand(source.sizes());
  const c10::ScalarType type = self.scalar_type();
  if (reduce == "prod" && is_wide_unsigned(type) && source.scalar_type() == type && result.scalar_type() == type) {
    // Wrap-around products have the same bits on the signed twin.
    if (!result.is_same(self)) {
      at::native::resize_output(result, self.sizes());
      result.copy_(self);
    }
    at::Tensor twin = result.view(signed_twin(type));
    scatter_reduce_into(twin, wrapped, spread, source.view(signed_twin(type)), reduce, include_self, twin,
                        "aten::index_reduce");
    return result;
  }
  return scatter_reduce_into(self, wrapped, spread, source, reduce, include_self, result, "aten::index_reduce");
}

at::Tensor index_reduce(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                        c10::string_view reduce, bool include_self) {
  at::Tensor result = at::empty({0}, self.options());
  return index_reduce_out(self, dim, index, source, reduce, include_self, result);
}

at::Tensor& index_reduce_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                          c10::string_view reduce, bool include_self) {
  return index_reduce_out(self, dim, index, source, reduce, include_self, self);
}

}  // namespace nn

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("gather", TORCH_FN(nn::gather));
  m.impl("gather.out", TORCH_FN(nn::gather_out));
  m.impl("scatter.src", TORCH_FN(nn::scatter_src));
  m.impl("scatter.src_out", TORCH_FN(nn::scatter_src_out));
  m.impl("scatter_.src", TORCH_FN(nn::scatter_src_));
  m.impl("scatter.reduce", TORCH_FN(nn::scatter_legacy_reduce));
  m.impl("scatter.reduce_out", TORCH_FN(nn::scatter_legacy_reduce_out));
  m.impl("scatter_.reduce", TORCH_FN(nn::scatter_legacy_reduce_));
  m.impl("scatter_add", TORCH_FN(nn::scatter_add));
  m.impl("scatter_add.out", TORCH_FN(nn::scatter_add_out));
  m.impl("scatter_add_", TORCH_FN(nn::scatter_add_));
  m.impl("scatter_reduce.two", TORCH_FN(nn::scatter_reduce_two));
  m.impl("scatter_reduce.two_out", TORCH_FN(nn::scatter_reduce_two_out));
  m.impl("scatter_reduce_.two", TORCH_FN(nn::scatter_reduce_two_));
  m.impl("index_reduce", TORCH_FN(nn::index_reduce));
  m.impl("index_reduce.out", TORCH_FN(nn::index_reduce_out));
  m.impl("index_reduce_", TORCH_FN(nn::index_reduce_));
  m.impl("index_select", TORCH_FN(nn::index_select));
  m.impl("index_select.out", TORCH_FN(nn::index_select_out));
}

}  // namespace torchneuron::aten
