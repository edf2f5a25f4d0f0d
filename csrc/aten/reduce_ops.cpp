// Reductions on neuron (sum, mean, amax, amin, full max/min): the host resolves dims, keepdim
// and the output dtype, lays the reduced dimensions last, and csrc/kernels/reduce runs.
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/amax_ops.h>
#include <ATen/ops/amin_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/max_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/min_ops.h>
#include <ATen/ops/sum_ops.h>
#include <torch/library.h>

#include <bitset>
#include <vector>

#include "aten/cpu_fallback.h"
#include "aten/neuron_tensor.h"
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

// Runs `op` into `result` (already the right dtype); returns false when the kernels cannot.
bool launch_reduce(ReduceOp op, const char* name, const at::Tensor& self, const DimMask& mask,
                   bool keepdim, const at::Tensor& result) {
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

c10::ScalarType sum_dtype(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  if (dtype.has_value()) return *dtype;
  return at::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? c10::kLong : self.scalar_type();
}

void check_max_min_input(const at::Tensor& self, const DimMask& mask, const char* name) {
  if (self.numel() != 0) return;
  for (int64_t d = 0; d < self.dim(); ++d) {
    TORCH_CHECK(!mask[d] || self.size(d) != 0, name, "(): Expected reduction dim ", d,
                " to have non-zero size.");
  }
}

}  // namespace

namespace reductions {

at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<c10::ScalarType> dtype, at::Tensor& result) {
  if (!launch_reduce(ReduceOp::kSum, "aten::sum", self, reduced_dims(self, dim), keepdim, result)) {
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
  if (!launch_reduce(ReduceOp::kMean, "aten::mean", self, reduced_dims(self, dim), keepdim, result)) {
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

}  // namespace reductions

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sum.dim_IntList", TORCH_FN(reductions::sum_dim));
  m.impl("sum.IntList_out", TORCH_FN(reductions::sum_out));
  m.impl("mean.dim", TORCH_FN(reductions::mean_dim));
  m.impl("mean.out", TORCH_FN(reductions::mean_out));
  m.impl("amax", TORCH_FN(reductions::amax));
  m.impl("amax.out", TORCH_FN(reductions::amax_out));
  m.impl("amin", TORCH_FN(reductions::amin));
  m.impl("amin.out", TORCH_FN(reductions::amin_out));
  m.impl("max", TORCH_FN(reductions::max_all));
  m.impl("min", TORCH_FN(reductions::min_all));
}

}  // namespace torchneuron::aten
