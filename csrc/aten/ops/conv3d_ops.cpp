// 3-D convolutions, plain and transposed, with their backwards, as sums over the kernel's depth
// taps of 2-D convolutions (at::convolution, i.e. conv_ops.cpp's native 2-D paths).
// Tap kd reads input depth t * stride + kd * dilation - padding for every output depth t (zeros
// outside): those slices, batched as [batch * out_depth, channels, H, W] images, convolved with
// weight[:, :, kd] by the native 2-D path. The same multiplies as a direct 3-D convolution; the
// slices cost kernel-depth copies of the input.
#include "aten/ops/conv3d.h"

#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>

#include <optional>
#include <vector>

namespace torchneuron::aten::conv3d {
namespace {

struct DepthWindow {
  int64_t kernel, stride, padding, dilation, in_depth, out_depth;
};

DepthWindow depth_window(const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
                         c10::IntArrayRef padding, c10::IntArrayRef dilation) {
  auto first = [](c10::IntArrayRef values, int64_t neutral) { return values.empty() ? neutral : values[0]; };
  DepthWindow d{weight.size(2), first(stride, 1), first(padding, 0), first(dilation, 1), input.size(2), 0};
  d.out_depth = (d.in_depth + 2 * d.padding - d.dilation * (d.kernel - 1) - 1) / d.stride + 1;
  return d;
}

// The last two entries of a 3-D convolution's per-dimension argument (height and width).
std::vector<int64_t> spatial(c10::IntArrayRef values) {
  return values.size() == 1 ? std::vector<int64_t>{values[0], values[0]} : std::vector<int64_t>{values[1], values[2]};
}

// The depth slices of a zero-padded [batch, channels, padded depth, H, W] tensor that tap kd
// pairs with depths 0 .. count - 1 of the other side (a convolution's output, a transposed
// one's input): [batch, channels, count, H, W], a strided view.
at::Tensor tap_view(const at::Tensor& padded, const DepthWindow& d, int64_t kd, int64_t count) {
  return padded.narrow(2, kd * d.dilation, (count - 1) * d.stride + 1).slice(2, 0, c10::nullopt, d.stride);
}

// [batch, channels, depth, H, W] <-> [batch * depth, channels, H, W].
at::Tensor depth_to_batch(const at::Tensor& t) {
  return t.permute({0, 2, 1, 3, 4}).reshape({t.size(0) * t.size(2), t.size(1), t.size(3), t.size(4)});
}
at::Tensor batch_to_depth(const at::Tensor& t, int64_t batch) {
  return t.view({batch, t.size(0) / batch, t.size(1), t.size(2), t.size(3)}).permute({0, 2, 1, 3, 4});
}

at::Tensor padded_input(const at::Tensor& input, const DepthWindow& d) {
  if (d.padding == 0) return input;
  std::vector<int64_t> sizes = input.sizes().vec();
  sizes[2] += 2 * d.padding;
  at::Tensor padded = at::zeros(sizes, input.options());
  padded.narrow(2, d.padding, d.in_depth).copy_(input);
  return padded;
}

}  // namespace

at::Tensor convolution_3d(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias, c10::IntArrayRef stride,
                          c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups, c10::MemoryFormat format) {
  TORCH_CHECK(weight.dim() == 5, "Expected 5-dimensional weight for 5-dimensional input, but got weight of size ", weight.sizes());
  // Checked here, where the message can name the 5-D shapes rather than a depth slice's.
  TORCH_CHECK(groups > 0 && weight.size(1) * groups == input.size(1), "Given groups=", groups, ", weight of size ",
              weight.sizes(), ", expected input", input.sizes(), " to have ", weight.size(1) * groups,
              " channels, but got ", input.size(1), " channels instead");
  const DepthWindow d = depth_window(input, weight, stride, padding, dilation);
  TORCH_CHECK(d.out_depth > 0, "Calculated output size is too small for input ", input.sizes(), " and kernel ", weight.sizes());
  const at::Tensor padded = padded_input(input, d);
  at::Tensor sum;
  for (int64_t kd = 0; kd < d.kernel; ++kd) {
    const at::Tensor images = depth_to_batch(tap_view(padded, d, kd, d.out_depth));
    const std::optional<at::Tensor> tap_bias = kd == 0 && bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt;
    const at::Tensor part = at::convolution(images, weight.select(2, kd), tap_bias, spatial(stride), spatial(padding),
                                            spatial(dilation), false, {0, 0}, groups);
    sum = kd == 0 ? part : sum.add_(part);
  }
  return batch_to_depth(sum, input.size(0)).contiguous(format);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_3d(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups, std::array<bool, 3> output_mask,
    c10::MemoryFormat format) {
  const DepthWindow d = depth_window(input, weight, stride, padding, dilation);
  const at::Tensor padded = padded_input(input, d);
  const at::Tensor grad_images = depth_to_batch(grad_output);
  at::Tensor grad_padded = output_mask[0] ? at::zeros(padded.sizes(), input.options()) : at::Tensor();
  at::Tensor grad_weight = output_mask[1] ? at::empty(weight.sizes(), weight.options()) : at::Tensor();
  for (int64_t kd = 0; kd < d.kernel && (output_mask[0] || output_mask[1]); ++kd) {
    const at::Tensor images = depth_to_batch(tap_view(padded, d, kd, d.out_depth));
    auto [grad_images_in, grad_tap_weight, unused] = at::convolution_backward(
        grad_images, images, weight.select(2, kd), std::nullopt, spatial(stride), spatial(padding), spatial(dilation),
        false, {0, 0}, groups, {output_mask[0], output_mask[1], false});
    if (output_mask[0]) tap_view(grad_padded, d, kd, d.out_depth).add_(batch_to_depth(grad_images_in, input.size(0)));
    if (output_mask[1]) grad_weight.select(2, kd).copy_(grad_tap_weight);
  }
  at::Tensor grad_input = output_mask[0] ? grad_padded.narrow(2, d.padding, d.in_depth).contiguous(format) : at::Tensor();
  at::Tensor grad_bias = output_mask[2] ? at::sum(grad_output, {0, 2, 3, 4}) : at::Tensor();
  return {grad_input, output_mask[1] ? grad_weight.contiguous(format) : grad_weight, grad_bias};
}

// A transposed 3-D convolution: for each tap, the transposed 2-D convolution of every input
// depth slice, added into output depths t * stride + kd * dilation (before cropping the padding).
at::Tensor convolution_transpose_3d(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                                    c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                    c10::IntArrayRef output_padding, int64_t groups, c10::MemoryFormat format) {
  TORCH_CHECK(weight.dim() == 5, "Expected 5-dimensional weight for 5-dimensional input, but got weight of size ", weight.sizes());
  DepthWindow d = depth_window(input, weight, stride, padding, dilation);
  const int64_t extra = output_padding.empty() ? 0 : output_padding[0];
  const int64_t out_depth = (d.in_depth - 1) * d.stride - 2 * d.padding + d.dilation * (d.kernel - 1) + extra + 1;
  TORCH_CHECK(out_depth > 0, "Calculated output size is too small for transposed convolution of input ", input.sizes(),
              " and kernel ", weight.sizes());
  const at::Tensor images = depth_to_batch(input);
  at::Tensor buffer;
  for (int64_t kd = 0; kd < d.kernel; ++kd) {
    const at::Tensor part = at::convolution(images, weight.select(2, kd), std::nullopt, spatial(stride), spatial(padding),
                                            spatial(dilation), true, spatial(output_padding), groups);
    if (kd == 0) {
      buffer = at::zeros({input.size(0), part.size(1), out_depth + 2 * d.padding, part.size(2), part.size(3)}, part.options());
    }
    tap_view(buffer, d, kd, d.in_depth).add_(batch_to_depth(part, input.size(0)));
  }
  at::Tensor out = buffer.narrow(2, d.padding, out_depth).contiguous(format);
  if (bias.defined()) out.add_(bias.view({1, -1, 1, 1, 1}));
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_transpose_backward_3d(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, c10::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask, c10::MemoryFormat format) {
  DepthWindow d = depth_window(input, weight, stride, padding, dilation);
  d.in_depth = grad_output.size(2);  // the transposed convolution's output, padded like an input
  const at::Tensor grad_padded = padded_input(grad_output, d);
  const at::Tensor images = depth_to_batch(input);
  at::Tensor grad_images_sum;
  at::Tensor grad_weight = output_mask[1] ? at::empty(weight.sizes(), weight.options()) : at::Tensor();
  for (int64_t kd = 0; kd < d.kernel && (output_mask[0] || output_mask[1]); ++kd) {
    const at::Tensor grad_images = depth_to_batch(tap_view(grad_padded, d, kd, input.size(2)));
    auto [grad_images_in, grad_tap_weight, unused] = at::convolution_backward(
        grad_images, images, weight.select(2, kd), std::nullopt, spatial(stride), spatial(padding), spatial(dilation),
        true, spatial(output_padding), groups, {output_mask[0], output_mask[1], false});
    if (output_mask[0]) grad_images_sum = kd == 0 ? grad_images_in : grad_images_sum.add_(grad_images_in);
    if (output_mask[1]) grad_weight.select(2, kd).copy_(grad_tap_weight);
  }
  at::Tensor grad_input =
      output_mask[0] ? batch_to_depth(grad_images_sum, input.size(0)).contiguous(format) : at::Tensor();
  at::Tensor grad_bias = output_mask[2] ? at::sum(grad_output, {0, 2, 3, 4}) : at::Tensor();
  return {grad_input, output_mask[1] ? grad_weight.contiguous(format) : grad_weight, grad_bias};
}

}  // namespace torchneuron::aten::conv3d
