// Operators the boxed CPU fallback cannot take, routed through the host explicitly and
// counted like any fallback: convolution reaches backends as convolution_overrideable, which
// has no CPU kernel to fall back to. Also the shallow-copy compatibility query that keeps
// tied parameters tied when a module moves between CPU and neuron.
#include <ATen/core/Tensor.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <torch/library.h>

#include <tuple>

#include "aten/cpu_fallback.h"

namespace torchneuron::aten {
namespace {

at::Tensor to_host(const at::Tensor& t) { return t.defined() ? t.cpu() : t; }

at::Tensor to_device_of(const at::Tensor& t, const at::Tensor& like) {
  return t.defined() ? t.to(like.device()) : t;
}

at::Tensor convolution_via_host(const at::Tensor& input, const at::Tensor& weight,
                                const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                                c10::IntArrayRef output_padding, int64_t groups) {
  note_cpu_fallback("aten::convolution_overrideable");
  std::optional<at::Tensor> host_bias;
  if (bias.has_value() && bias->defined()) host_bias = to_host(*bias);
  const at::Tensor out = at::convolution(to_host(input), to_host(weight), host_bias, stride, padding,
                                         dilation, transposed, output_padding, groups);
  return to_device_of(out, input);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_via_host(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
    c10::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  note_cpu_fallback("aten::convolution_backward_overrideable");
  // The bias has one entry per output channel.
  const int64_t out_channels = transposed ? weight.size(1) * groups : weight.size(0);
  const std::vector<int64_t> bias_sizes{out_channels};
  auto [grad_input, grad_weight, grad_bias] = at::convolution_backward(
      to_host(grad_output), to_host(input), to_host(weight), at::OptionalIntArrayRef(bias_sizes),
      stride, padding, dilation, transposed, output_padding, groups, output_mask);
  return {to_device_of(grad_input, input), to_device_of(grad_weight, input),
          to_device_of(grad_bias, input)};
}

bool is_dense_cpu_or_neuron(const at::Tensor& t) {
  const bool device_ok = t.device().is_cpu() || t.device().type() == c10::DeviceType::PrivateUse1;
  return device_ok && t.layout() == c10::kStrided && !t.is_quantized() && !t.is_nested();
}

// c10 counts only its built-in backends as dense; without this, module.to('neuron') would give
// every parameter a new Parameter object and untie shared weights.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  return is_dense_cpu_or_neuron(self) && is_dense_cpu_or_neuron(from);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(convolution_via_host));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward_via_host));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
}

}  // namespace torchneuron::aten
