// Embeddings on neuron: embedding (its indices checked at the call, as CPU PyTorch does, then
// index_select), its dense backward, embedding_bag and its backward ops. The host checks
// arguments and makes indices int64 and contiguous; csrc/kernels/nn runs on the queue.
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_embedding_bag_backward_ops.h>
#include <ATen/ops/_embedding_bag_dense_backward_ops.h>
#include <ATen/ops/_embedding_bag_ops.h>
#include <ATen/ops/_embedding_bag_per_sample_weights_backward_ops.h>
#include <ATen/ops/embedding_dense_backward_ops.h>
#include <ATen/ops/embedding_native.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <tuple>

#include "aten/device/neuron_tensor.h"
#include "aten/fallback/cpu_fallback.h"
#include "aten/ops/index_checks.h"
#include "aten/ops/nn_common.h"
#include "kernels/nn.h"

namespace torchneuron::aten {
namespace nn {

// CPU PyTorch's embedding. Host-resident indices are checked at the call with CPU's IndexError;
// device-resident ones by the lookup (index_select's kernel), an error at the next sync: reading
// them at every call would wait for the device at each training step's embedding, losing the
// host's lead (adaptive eager's regions with it).
at::Tensor embedding(const at::Tensor& weight, const at::Tensor& indices, c10::SymInt padding_idx,
                     bool scale_grad_by_freq, bool sparse) {
  if (weight.dim() == 2 && indices.is_cpu() && (indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt)) {
    if (const std::optional<OutOfRange> bad = first_out_of_range(indices, 0, weight.size(0))) {
      TORCH_CHECK_INDEX(false, "index out of range in self: index ", bad->value, " (position ", bad->position,
                        " of the indices) is not in [0, ", weight.size(0), ")");
    }
  }
  return at::native::embedding_symint(weight, indices, std::move(padding_idx), scale_grad_by_freq, sparse);
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
  // Host-resident indices checked at the call with CPU PyTorch's message; device-resident ones by
  // the kernel (see embedding above).
  if (const std::optional<OutOfRange> bad =
          indices.is_cpu() ? first_out_of_range(indices, 0, shape.num_weights) : std::nullopt) {
    TORCH_CHECK(false, "embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be ", bad->value);
  }
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

}  // namespace nn

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("embedding", TORCH_FN(nn::embedding));
  m.impl("embedding_dense_backward", TORCH_FN(nn::embedding_dense_backward));
  m.impl("_embedding_bag", TORCH_FN(nn::embedding_bag));
  m.impl("_embedding_bag_forward_only", TORCH_FN(nn::embedding_bag));
  m.impl("_embedding_bag_backward", TORCH_FN(nn::embedding_bag_backward));
  m.impl("_embedding_bag_dense_backward", TORCH_FN(nn::embedding_bag_dense_backward));
  m.impl("_embedding_bag_per_sample_weights_backward", TORCH_FN(nn::embedding_bag_per_sample_weights_backward));
}

}  // namespace torchneuron::aten
