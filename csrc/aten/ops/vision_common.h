// What the vision op files (norm_ops, pool_ops, vision_ops) share: the floating-dtype test,
// results laid out like a channels-last input, and the out= forms built from functional ones.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>

#include <tuple>

#include "aten/device/neuron_tensor.h"
#include "kernels/floating.h"

namespace torchneuron::aten::vision {

inline bool floating(const at::Tensor& t) {
  return has_kernel_dtype(t.scalar_type()) && kernels::is_floating_dtype(to_kernel_dtype(t.scalar_type()));
}

// CPU PyTorch, and the meta kernels torch.compile traces with, give a 4-D op on a channels-last
// input a channels-last result; the kernels here write NCHW, so the result is relaid to match
// (a compiled graph that views the result relies on those strides).
inline at::Tensor like_input_layout(const at::Tensor& result, const at::Tensor& input) {
  if (result.dim() == 4 && input.dim() == 4 && input.suggest_memory_format() == at::MemoryFormat::ChannelsLast) {
    return result.contiguous(at::MemoryFormat::ChannelsLast);
  }
  return result;
}

// CPU PyTorch and the meta kernels give a channels-last input a channels-last result (4-D and 5-D).
inline at::Tensor like_input_format(const at::Tensor& result, const at::Tensor& input) {
  if (result.dim() == 5 && input.suggest_memory_format() == at::MemoryFormat::ChannelsLast3d) {
    return result.contiguous(at::MemoryFormat::ChannelsLast3d);
  }
  return like_input_layout(result, input);
}

// Copies a functional result into an out= tensor.
inline at::Tensor& write_out(const at::Tensor& value, at::Tensor& out) {
  at::native::resize_output(out, value.sizes());
  out.copy_(value);
  return out;
}

// out= forms: OutForm<f>::call takes f's arguments and `out` (`out` and `indices` for a function
// returning values and indices), and copies f's results into them (one definition for the
// upsampling and pooling out= and grad_input= overloads).
template <auto functional, typename Signature = decltype(functional)>
struct OutForm;
template <auto functional, typename... Args>
struct OutForm<functional, at::Tensor (*)(Args...)> {
  static at::Tensor& call(Args... args, at::Tensor& out) { return write_out(functional(args...), out); }
};
template <auto functional, typename... Args>
struct OutForm<functional, std::tuple<at::Tensor, at::Tensor> (*)(Args...)> {
  static std::tuple<at::Tensor&, at::Tensor&> call(Args... args, at::Tensor& out, at::Tensor& indices) {
    auto [values, positions] = functional(args...);
    write_out(values, out);
    write_out(positions, indices);
    return {out, indices};
  }
};

}  // namespace torchneuron::aten::vision
