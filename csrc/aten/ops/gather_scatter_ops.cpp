// Gathers and scatters along one dim on neuron: index_select (the embedding forward) and the
// embedding backward, embedding_bag and its backward ops, gather, scatter (with a value's
// accumulation or a reduction), scatter_reduce and index_reduce. The host checks arguments and
// makes the index int64 and contiguous; csrc/kernels/nn runs on the queue.
// Kernels take raw pointers: a temporary freed here can only be reused by later commands,
// which the in-order queue runs after this one.
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_embedding_bag_backward_ops.h>
#include <ATen/ops/_embedding_bag_dense_backward_ops.h>
#include <ATen/ops/_embedding_bag_ops.h>
#include <ATen/ops/_embedding_bag_per_sample_weights_backward_ops.h>
#include <ATen/ops/embedding_dense_backward_ops.h>
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
#include "aten/fallback/cpu_fallback.h"
#include "aten/ops/nn_common.h"
#include "kernels/nn.h"

namespace torchneuron::aten {
namespace nn {

// ---- index_select, embedding backward -------------------------------------------------------

at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& result) {
  TORCH_CHECK(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == c10::kLong || index.scalar_type() == c10::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  if (!has_kernel_dtype(self.scalar_type()) || result.scalar_type() != self.scalar_type() ||
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

at::Tensor embedding_dense_backward(const at::Tensor& grad_output, const at::Tensor& indices, int64_t num_weights,
                                    int64_t padding_idx, bool scale_grad_by_freq) {
  if (scale_grad_by_freq || !floating_kernel_dtype(grad_output)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(embedding_dense_backward)>::call(
        grad_output, indices, num_weights, padding_idx, scale_grad_by_freq);
  }
  check_same_device("aten::embedding_dense_backward", grad_output.device(), {&indices});
  const at::Tensor idx = indices.reshape({-1}).to(c10::kLong).contiguous();
  const int64_t cols = grad_output.size(-1);
  const at::Tensor grad = grad_output.reshape({idx.numel(), cols}).contiguous();
  at::Tensor grad_weight = at::empty({num_weights, cols}, grad.options());
  if (grad_weight.numel() == 0) return grad_weight;
  const kernels::DType dtype = to_kernel_dtype(grad.scalar_type());
  const void* pg = grad.data_ptr();
  const auto* pi = static_cast<const int64_t*>(idx.data_ptr());
  void* pw = grad_weight.data_ptr();
  const int64_t count = idx.numel();
  enqueue(grad_weight, "aten::embedding_dense_backward", {&grad, &idx}, [=] {
    kernels::embedding_backward(dtype, count, cols, pg, pi, num_weights, padding_idx, pw);
  });
  return grad_weight;
}

// ---- embedding_bag ------------------------------------------------------------------------
// Outputs laid out as on CUDA (the meta functions' non-CPU shapes): offset2bag [count],
// bag_size [offsets], max_indices [bags, dim] for max, else empty; in the indices' dtype.

namespace {

struct BagInputs {
  at::Tensor indices, offsets;  // int64, contiguous
  kernels::EmbeddingBagShape shape;
};

// The host-side checks of CPU PyTorch, with its messages; false for what the kernels do not take.
bool bag_inputs(const char* op, const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets,
                int64_t mode, const std::optional<at::Tensor>& per_sample_weights, bool include_last_offset,
                BagInputs& in) {
  TORCH_CHECK(indices.dim() == 1, "input has to be a 1D or 2D Tensor, but got Tensor of dimension ", indices.dim());
  TORCH_CHECK(offsets.dim() == 1, "offsets has to be a 1D Tensor, but got Tensor of dimension ", offsets.dim());
  TORCH_CHECK(weight.dim() == 2, "weight has to be a 2D Tensor, but got Tensor of dimension ", weight.dim());
  for (const at::Tensor* t : {&indices, &offsets}) {
    TORCH_CHECK(t->scalar_type() == at::kLong || t->scalar_type() == at::kInt, op,
                ": expected indices and offsets to be long or int, got ", t->scalar_type());
  }
  TORCH_CHECK(mode >= 0 && mode <= 2, op, ": mode has to be 0 (sum), 1 (mean) or 2 (max), got ", mode);
  TORCH_CHECK(!include_last_offset || offsets.size(0) >= 1, "include_last_offset: number of offset should be at least 1");
  const at::Tensor* scale = per_sample_weights.has_value() && per_sample_weights->defined() ? &*per_sample_weights : nullptr;
  if (scale) {
    TORCH_CHECK(mode == 0, "embedding_bag: per_sample_weights only supported with mode='sum'");
    TORCH_CHECK(scale->dim() == 1 && scale->numel() == indices.numel(), "embedding_bag: expected per_sample_weights to be a 1D tensor of ",
                indices.numel(), " elements (as many as indices), got shape ", scale->sizes());
    TORCH_CHECK(scale->scalar_type() == weight.scalar_type(), "embedding_bag: expected scalar type ",
                weight.scalar_type(), " for per_sample_weights, which must have the same type as weight; got ",
                scale->scalar_type());
  }
  check_same_device(op, weight.device(), {&indices, &offsets, scale});
  if (!floating_kernel_dtype(weight)) return false;
  in.indices = indices.to(at::kLong).contiguous();
  in.offsets = offsets.to(at::kLong).contiguous();
  in.shape.num_weights = weight.size(0);
  in.shape.dim = weight.size(1);
  in.shape.count = indices.numel();
  in.shape.num_offsets = offsets.numel();
  in.shape.num_bags = offsets.numel() - (include_last_offset ? 1 : 0);
  return true;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> embedding_bag(
    const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets, bool scale_grad_by_freq, int64_t mode,
    bool sparse, const std::optional<at::Tensor>& per_sample_weights, bool include_last_offset, int64_t padding_idx) {
  BagInputs in;
  if (!bag_inputs("embedding_bag", weight, indices, offsets, mode, per_sample_weights, include_last_offset, in)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_embedding_bag)>::call(
        weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights, include_last_offset, padding_idx);
  }
  const kernels::EmbeddingBagShape shape = in.shape;
  const at::Tensor w = weight.contiguous();
  const at::Tensor scale = per_sample_weights.has_value() && per_sample_weights->defined() ? per_sample_weights->contiguous() : at::Tensor();
  at::Tensor out = at::empty({shape.num_bags, shape.dim}, weight.options());
  const auto long_options = in.indices.options();
  at::Tensor offset2bag = at::empty({shape.count}, long_options);
  at::Tensor bag_size = at::empty({shape.num_offsets}, long_options);
  at::Tensor max_indices = mode == 2 ? at::empty({shape.num_bags, shape.dim}, long_options) : at::empty({0}, long_options);
  const kernels::DType dtype = to_kernel_dtype(weight.scalar_type());
  const auto bag_mode = static_cast<kernels::BagMode>(mode);
  const void* pw = w.data_ptr();
  const void* ps = scale.defined() ? scale.data_ptr() : nullptr;
  const auto* pi = in.indices.const_data_ptr<int64_t>();
  const auto* po = in.offsets.const_data_ptr<int64_t>();
  void* pout = out.data_ptr();
  auto* p2b = offset2bag.mutable_data_ptr<int64_t>();
  auto* psize = bag_size.mutable_data_ptr<int64_t>();
  auto* pmax = mode == 2 ? max_indices.mutable_data_ptr<int64_t>() : nullptr;
  enqueue(out, "aten::_embedding_bag", {&w, &in.indices, &in.offsets, &scale}, [=] {
    kernels::embedding_bag(dtype, bag_mode, shape, pw, pi, po, ps, padding_idx, pout, p2b, psize, pmax);
  });
  const auto index_dtype = indices.scalar_type();
  return {out, offset2bag.to(index_dtype), bag_size.to(index_dtype), max_indices.to(index_dtype)};
}

at::Tensor embedding_bag_dense_backward(const at::Tensor& grad, const at::Tensor& indices, const at::Tensor& offset2bag,
                                        const at::Tensor& bag_size, const at::Tensor& maximum_indices, c10::SymInt num_weights,
                                        bool scale_grad_by_freq, int64_t mode,
                                        const std::optional<at::Tensor>& per_sample_weights, int64_t padding_idx) {
  const at::Tensor* scale = per_sample_weights.has_value() && per_sample_weights->defined() ? &*per_sample_weights : nullptr;
  if (scale_grad_by_freq || !floating_kernel_dtype(grad) || grad.dim() != 2 || mode < 0 || mode > 2 ||
      (scale && scale->scalar_type() != grad.scalar_type())) {
    return at::native::call_fallback_fn_symint<&neuron_cpu_fallback, ATEN_OP(_embedding_bag_dense_backward)>::call(
        grad, indices, offset2bag, bag_size, maximum_indices, num_weights, scale_grad_by_freq, mode, per_sample_weights,
        padding_idx);
  }
  check_same_device("embedding_bag backward", grad.device(), {&indices, &offset2bag, &bag_size, &maximum_indices, scale});
  kernels::EmbeddingBagShape shape;
  shape.num_weights = num_weights.expect_int();
  shape.dim = grad.size(1);
  shape.count = indices.numel();
  shape.num_bags = grad.size(0);
  const at::Tensor g = grad.contiguous();
  const at::Tensor idx = indices.to(at::kLong).contiguous();
  const at::Tensor bags = offset2bag.to(at::kLong).contiguous();
  const at::Tensor sizes = bag_size.to(at::kLong).contiguous();
  const at::Tensor maxima = mode == 2 ? maximum_indices.to(at::kLong).contiguous() : at::Tensor();
  const at::Tensor s = scale ? scale->contiguous() : at::Tensor();
  TORCH_CHECK(bags.numel() == shape.count && (mode != 2 || maxima.numel() == shape.num_bags * shape.dim),
              "embedding_bag backward: offset2bag and max_indices must be those of the forward on this device");
  at::Tensor grad_weight = at::empty({shape.num_weights, shape.dim}, grad.options());
  if (grad_weight.numel() == 0) return grad_weight;
  const kernels::DType dtype = to_kernel_dtype(grad.scalar_type());
  const auto bag_mode = static_cast<kernels::BagMode>(mode);
  const void* pg = g.data_ptr();
  const auto* pi = idx.const_data_ptr<int64_t>();
  const auto* p2b = bags.const_data_ptr<int64_t>();
  const auto* psize = sizes.const_data_ptr<int64_t>();
  const int64_t* pmax = maxima.defined() ? maxima.const_data_ptr<int64_t>() : nullptr;
  const void* ps = s.defined() ? s.data_ptr() : nullptr;
  void* pgw = grad_weight.data_ptr();
  enqueue(grad_weight, "aten::_embedding_bag_dense_backward", {&g, &idx, &bags, &sizes, &maxima, &s}, [=] {
    kernels::embedding_bag_backward(dtype, bag_mode, shape, pg, pi, p2b, psize, pmax, ps, padding_idx, pgw);
  });
  return grad_weight;
}

at::Tensor embedding_bag_backward(const at::Tensor& grad, const at::Tensor& indices, const at::Tensor& offsets,
                                  const at::Tensor& offset2bag, const at::Tensor& bag_size, const at::Tensor& maximum_indices,
                                  c10::SymInt num_weights, bool scale_grad_by_freq, int64_t mode, bool sparse,
                                  const std::optional<at::Tensor>& per_sample_weights, int64_t padding_idx) {
  if (sparse) {  // a sparse gradient: no sparse layouts on neuron
    return at::native::call_fallback_fn_symint<&neuron_cpu_fallback, ATEN_OP(_embedding_bag_backward)>::call(
        grad, indices, offsets, offset2bag, bag_size, maximum_indices, num_weights, scale_grad_by_freq, mode, sparse,
        per_sample_weights, padding_idx);
  }
  return embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices, num_weights,
                                      scale_grad_by_freq, mode, per_sample_weights, padding_idx);
}

at::Tensor embedding_bag_per_sample_weights_backward(const at::Tensor& grad, const at::Tensor& weight,
                                                     const at::Tensor& indices, const at::Tensor& offsets,
                                                     const at::Tensor& offset2bag, int64_t mode, int64_t padding_idx) {
  TORCH_CHECK(mode == 0, "embedding_bag_backward: per_sample_weights only supported for mode='sum'");
  if (!floating_kernel_dtype(grad) || grad.scalar_type() != weight.scalar_type() || grad.dim() != 2 || weight.dim() != 2) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_embedding_bag_per_sample_weights_backward)>::call(
        grad, weight, indices, offsets, offset2bag, mode, padding_idx);
  }
  check_same_device("embedding_bag backward", grad.device(), {&weight, &indices, &offset2bag});
  kernels::EmbeddingBagShape shape;
  shape.num_weights = weight.size(0);
  shape.dim = weight.size(1);
  shape.count = indices.numel();
  shape.num_bags = grad.size(0);
  const at::Tensor g = grad.contiguous();
  const at::Tensor w = weight.contiguous();
  const at::Tensor idx = indices.to(at::kLong).contiguous();
  const at::Tensor bags = offset2bag.to(at::kLong).contiguous();
  TORCH_CHECK(bags.numel() == shape.count, "embedding_bag backward: offset2bag must be that of the forward on this device");
  at::Tensor out = at::empty({shape.count}, grad.options());
  if (out.numel() == 0) return out;
  const kernels::DType dtype = to_kernel_dtype(grad.scalar_type());
  const void* pg = g.data_ptr();
  const void* pw = w.data_ptr();
  const auto* pi = idx.const_data_ptr<int64_t>();
  const auto* p2b = bags.const_data_ptr<int64_t>();
  void* po = out.data_ptr();
  enqueue(out, "aten::_embedding_bag_per_sample_weights_backward", {&g, &w, &idx, &bags}, [=] {
    kernels::embedding_bag_per_sample_weights_backward(dtype, shape, pg, pw, pi, p2b, padding_idx, po);
  });
  return out;
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
  if (self.dim() == 0 || index.dim() == 0 || !has_kernel_dtype(self.scalar_type()) ||
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
  return scatter_reduce_into(self, wrapped, index.reshape(along).expand(source.sizes()), source, reduce, include_self,
                             result, "aten::index_reduce");
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
  m.impl("embedding_dense_backward", TORCH_FN(nn::embedding_dense_backward));
  m.impl("_embedding_bag", TORCH_FN(nn::embedding_bag));
  m.impl("_embedding_bag_forward_only", TORCH_FN(nn::embedding_bag));
  m.impl("_embedding_bag_backward", TORCH_FN(nn::embedding_bag_backward));
  m.impl("_embedding_bag_dense_backward", TORCH_FN(nn::embedding_bag_dense_backward));
  m.impl("_embedding_bag_per_sample_weights_backward", TORCH_FN(nn::embedding_bag_per_sample_weights_backward));
}

}  // namespace torchneuron::aten
