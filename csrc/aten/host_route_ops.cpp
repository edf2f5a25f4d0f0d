// Convolution, which reaches backends as convolution_overrideable: float32 1-D and 2-D
// convolutions run natively (im2col + GEMM); other cases (transposed, 3-D, other dtypes) take
// an explicit host route, counted like any fallback, since the boxed fallback has no CPU kernel
// for this op. Also the shallow-copy compatibility query that keeps tied parameters tied when a
// module moves between CPU and neuron.
#include <ATen/core/Tensor.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <tuple>

#include "aten/cpu_fallback.h"
#include "aten/neuron_tensor.h"
#include "kernels/conv.h"

namespace torchneuron::aten {
namespace {

at::Tensor to_host(const at::Tensor& t) { return t.defined() ? t.cpu() : t; }

at::Tensor to_device_of(const at::Tensor& t, const at::Tensor& like) {
  return t.defined() ? t.to(like.device()) : t;
}

// The native path: not transposed, 1-D or 2-D, float32, no output padding.
bool native_convolution(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                        bool transposed, c10::IntArrayRef output_padding) {
  const bool bias_ok = !bias.has_value() || !bias->defined() || bias->scalar_type() == at::kFloat;
  bool no_output_padding = true;
  for (int64_t p : output_padding) no_output_padding = no_output_padding && p == 0;
  return !transposed && (input.dim() == 3 || input.dim() == 4) && input.scalar_type() == at::kFloat &&
         weight.scalar_type() == at::kFloat && bias_ok && no_output_padding;
}

// Shape of a 1-D convolution seen as a 2-D one of height 1.
kernels::Conv2dShape conv_shape(const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
                                c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups) {
  const bool one_d = input.dim() == 3;
  auto at2 = [one_d](c10::IntArrayRef values, int64_t d) { return one_d ? (d == 0 ? 1 : values[0]) : values[d]; };
  auto pad2 = [one_d](c10::IntArrayRef values, int64_t d) { return one_d ? (d == 0 ? 0 : values[0]) : values[d]; };
  kernels::Conv2dShape s;
  s.batch = input.size(0);
  s.in_channels = input.size(1);
  s.height = one_d ? 1 : input.size(2);
  s.width = input.size(-1);
  s.out_channels = weight.size(0);
  s.kernel_h = one_d ? 1 : weight.size(2);
  s.kernel_w = weight.size(-1);
  s.stride_h = at2(stride, 0);
  s.stride_w = at2(stride, 1);
  s.pad_h = pad2(padding, 0);
  s.pad_w = pad2(padding, 1);
  s.dilation_h = at2(dilation, 0);
  s.dilation_w = at2(dilation, 1);
  s.groups = groups;
  return s;
}

std::vector<int64_t> conv_output_sizes(const at::Tensor& input, const kernels::Conv2dShape& s) {
  if (input.dim() == 3) return {s.batch, s.out_channels, s.out_w()};
  return {s.batch, s.out_channels, s.out_h(), s.out_w()};
}

void check_conv_args(const at::Tensor& input, const at::Tensor& weight, const kernels::Conv2dShape& s) {
  TORCH_CHECK(weight.dim() == input.dim(), "Expected ", input.dim(), "-dimensional weight for ", input.dim(),
              "-dimensional input, but got weight of size ", weight.sizes());
  TORCH_CHECK(s.groups > 0 && s.in_channels % s.groups == 0 && s.out_channels % s.groups == 0,
              "convolution: channels (", s.in_channels, " in, ", s.out_channels, " out) must be divisible by groups (",
              s.groups, ")");
  TORCH_CHECK(weight.size(1) * s.groups == s.in_channels, "Given groups=", s.groups, ", weight of size ",
              weight.sizes(), ", expected input", input.sizes(), " to have ", weight.size(1) * s.groups,
              " channels, but got ", s.in_channels, " channels instead");
  TORCH_CHECK(s.out_h() > 0 && s.out_w() > 0, "Calculated output size is too small for input ", input.sizes(),
              " and kernel ", weight.sizes());
}

at::Tensor convolution_via_host(const at::Tensor& input, const at::Tensor& weight,
                                const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                                c10::IntArrayRef output_padding, int64_t groups) {
  check_same_device("aten::convolution", input.device(), {&weight});
  if (bias.has_value()) check_same_device("aten::convolution", input.device(), {&*bias});
  if (native_convolution(input, weight, bias, transposed, output_padding)) {
    const kernels::Conv2dShape s = conv_shape(input, weight, stride, padding, dilation, groups);
    check_conv_args(input, weight, s);
    const at::Tensor x = input.contiguous();
    const at::Tensor w = weight.contiguous();
    const at::Tensor b = bias.has_value() && bias->defined() ? bias->contiguous() : at::Tensor();
    at::Tensor out = at::empty(conv_output_sizes(input, s), x.options());
    if (out.numel() == 0) return out;
    const float* px = x.data_ptr<float>();
    const float* pw = w.data_ptr<float>();
    const float* pb = b.defined() ? b.data_ptr<float>() : nullptr;
    float* po = out.data_ptr<float>();
    enqueue(out, "aten::convolution", {&x, &w, &b}, [=] { kernels::conv2d_forward(s, px, pw, pb, po); });
    return out;
  }
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
  if (native_convolution(input, weight, std::nullopt, transposed, output_padding) &&
      grad_output.scalar_type() == at::kFloat) {
    const kernels::Conv2dShape s = conv_shape(input, weight, stride, padding, dilation, groups);
    const at::Tensor go = grad_output.contiguous();
    const at::Tensor x = input.contiguous();
    const at::Tensor w = weight.contiguous();
    at::Tensor grad_input = output_mask[0] ? at::empty_like(x) : at::Tensor();
    at::Tensor grad_weight = output_mask[1] ? at::empty_like(w) : at::Tensor();
    at::Tensor grad_bias = output_mask[2] ? at::empty({s.out_channels}, x.options()) : at::Tensor();
    const float* pgo = go.data_ptr<float>();
    const float* px = x.data_ptr<float>();
    const float* pw = w.data_ptr<float>();
    float* pgi = grad_input.defined() ? grad_input.data_ptr<float>() : nullptr;
    float* pgw = grad_weight.defined() ? grad_weight.data_ptr<float>() : nullptr;
    float* pgb = grad_bias.defined() ? grad_bias.data_ptr<float>() : nullptr;
    if (go.numel() > 0 && (pgi != nullptr || pgw != nullptr || pgb != nullptr)) {
      check_same_device("aten::convolution_backward", go.device(), {&w});
      enqueue(go, "aten::convolution_backward", {&go, &x}, [=] {
        kernels::conv2d_backward(s, pgo, px, pw, pgi, pgw, pgb);
      });
    }
    return {grad_input, grad_weight, grad_bias};
  }
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
