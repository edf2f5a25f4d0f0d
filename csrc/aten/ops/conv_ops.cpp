// Convolution, which reaches backends as convolution_overrideable: 1-D and 2-D convolutions,
// plain and transposed, run natively by im2col + GEMM in float32 (bfloat16 and float16 are
// converted to float on the device and back, accumulating in float as CPU PyTorch does); 3-D
// ones, plain and transposed, as sums of 2-D ones over depth slices. Other cases (float64,
// output padding past the stride) take an explicit host route, counted like any fallback, since the
// boxed fallback has no CPU kernel for this op.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <algorithm>
#include <tuple>

#include "aten/fallback/cpu_fallback.h"
#include "aten/device/neuron_tensor.h"
#include "kernels/conv.h"

namespace torchneuron::aten {
namespace {

at::Tensor to_host(const at::Tensor& t) { return t.defined() ? t.cpu() : t; }

at::Tensor to_device_of(const at::Tensor& t, const at::Tensor& like) {
  return t.defined() ? t.to(like.device()) : t;
}

bool kernel_dtype(c10::ScalarType t) { return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf; }

// The native path: 1-D or 2-D, float32 or a half type, one dtype for every operand.
bool native_convolution(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  return (input.dim() == 3 || input.dim() == 4) && kernel_dtype(input.scalar_type()) &&
         weight.scalar_type() == input.scalar_type() && (!bias.defined() || bias.scalar_type() == input.scalar_type());
}

// 3-D convolutions run as 2-D ones over depth slices (convolution_3d, convolution_transpose_3d).
bool native_convolution_3d(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  return input.dim() == 5 && kernel_dtype(input.scalar_type()) && weight.scalar_type() == input.scalar_type() &&
         (!bias.defined() || bias.scalar_type() == input.scalar_type());
}

// Transposed convolutions whose output padding reaches the stride (allowed when below the
// dilation) do not map onto one forward convolution's input gradient; they take the host route.
bool padding_below_stride(c10::IntArrayRef output_padding, c10::IntArrayRef stride) {
  for (size_t d = 0; d < output_padding.size(); ++d) {
    if (output_padding[d] >= stride[stride.size() == 1 ? 0 : d]) return false;
  }
  return true;
}

// ---- result memory format, as CPU PyTorch picks it ------------------------------------------
// CPU gives a 2-D convolution whose input or weight is channels-last a channels-last output and
// gradients (both its oneDNN and its native kernels). A 3-D one is channels-last-3d only where
// CPU runs oneDNN: bfloat16 / float16 where the CPU has oneDNN kernels for them, float32 by
// oneDNN's size heuristic; its native 3-D kernels write contiguous results.

bool mkldnn_supports(const char* check) {
  const auto handle = c10::Dispatcher::singleton().findSchema({check, ""});
  return handle.has_value() && handle->typed<bool()>().call();
}

bool any_not_one(c10::IntArrayRef values) {
  return std::any_of(values.begin(), values.end(), [](int64_t v) { return v != 1; });
}

// CPU's choice of oneDNN for a 3-D convolution (its use_mkldnn rule).
bool cpu_uses_mkldnn_3d(const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
                        c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding, int64_t groups) {
  if (!at::hasMKLDNN() || !at::globalContext().userEnabledMkldnn()) return false;
  if (transposed && !padding_below_stride(output_padding, stride)) return false;
  static const bool bf16 = mkldnn_supports("mkldnn::_is_mkldnn_bf16_supported");
  static const bool fp16 = mkldnn_supports("mkldnn::_is_mkldnn_fp16_supported");
  if (input.scalar_type() == at::kBFloat16) return bf16;
  if (input.scalar_type() == at::kHalf) return fp16;
  if (input.scalar_type() != at::kFloat) return false;
  const int64_t n = input.size(0);
  const bool worth = any_not_one(stride) || any_not_one(dilation) || n >= 16 || weight.size(-1) != 1 ||
                     weight.size(-2) != 1 || at::get_num_threads() > 1;
  return worth && (groups > 1 || (weight.size(-1) > 3 && weight.size(-2) > 3) || n > 1 ||
                   n * input.size(1) * input.size(2) * input.size(3) > 20480);
}

c10::MemoryFormat result_format(const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
                                c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
                                int64_t groups) {
  const c10::MemoryFormat in = input.suggest_memory_format(), w = weight.suggest_memory_format();
  if (input.dim() == 4 && (in == c10::MemoryFormat::ChannelsLast || w == c10::MemoryFormat::ChannelsLast)) {
    return c10::MemoryFormat::ChannelsLast;
  }
  if (input.dim() == 5 && (in == c10::MemoryFormat::ChannelsLast3d || w == c10::MemoryFormat::ChannelsLast3d) &&
      cpu_uses_mkldnn_3d(input, weight, stride, dilation, transposed, output_padding, groups)) {
    return c10::MemoryFormat::ChannelsLast3d;
  }
  return c10::MemoryFormat::Contiguous;
}

at::Tensor as_float(const at::Tensor& t) { return t.defined() ? t.to(at::kFloat).contiguous() : t; }
float* float_ptr(const at::Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; }

// A 1-D convolution is a 2-D one of height 1.
struct Params2d {
  int64_t h, w;
};
Params2d pick(c10::IntArrayRef values, bool one_d, int64_t neutral) {
  return one_d ? Params2d{neutral, values[0]} : Params2d{values[0], values[1]};
}

// The window of a convolution (kernel, stride, padding, dilation, groups) from its weight and
// arguments; the caller fills in the image and channel sizes.
kernels::Conv2dShape conv_window(const at::Tensor& weight, bool one_d, c10::IntArrayRef stride,
                                 c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups) {
  const Params2d st = pick(stride, one_d, 1), pad = pick(padding, one_d, 0), dil = pick(dilation, one_d, 1);
  kernels::Conv2dShape s;
  s.kernel_h = one_d ? 1 : weight.size(2);
  s.kernel_w = weight.size(-1);
  s.stride_h = st.h;
  s.stride_w = st.w;
  s.pad_h = pad.h;
  s.pad_w = pad.w;
  s.dilation_h = dil.h;
  s.dilation_w = dil.w;
  s.groups = groups;
  return s;
}

// The forward convolution's shape, for conv(input, weight).
kernels::Conv2dShape conv_shape(const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
                                c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups) {
  const bool one_d = input.dim() == 3;
  kernels::Conv2dShape s = conv_window(weight, one_d, stride, padding, dilation, groups);
  s.batch = input.size(0);
  s.in_channels = input.size(1);
  s.height = one_d ? 1 : input.size(2);
  s.width = input.size(-1);
  s.out_channels = weight.size(0);
  return s;
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

// A transposed convolution is the input gradient of the forward convolution that maps its
// output back to its input: this is that forward convolution's shape (its "input" is the
// transposed convolution's output).
kernels::Conv2dShape transposed_shape(const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
                                      c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                      c10::IntArrayRef output_padding, int64_t groups) {
  const bool one_d = input.dim() == 3;
  TORCH_CHECK(weight.dim() == input.dim(), "Expected ", input.dim(), "-dimensional weight for ", input.dim(),
              "-dimensional input, but got weight of size ", weight.sizes());
  TORCH_CHECK(groups > 0 && weight.size(0) == input.size(1) && input.size(1) % groups == 0, "Given transposed=1, weight of size ",
              weight.sizes(), ", expected input", input.sizes(), " to have ", weight.size(0), " channels, but got ",
              input.size(1), " channels instead");
  const Params2d extra = pick(output_padding, one_d, 0);
  kernels::Conv2dShape s = conv_window(weight, one_d, stride, padding, dilation, groups);
  TORCH_CHECK((extra.h < s.stride_h || extra.h < s.dilation_h) && (extra.w < s.stride_w || extra.w < s.dilation_w),
              "output padding must be smaller than either stride or dilation, got output_padding ", output_padding);
  s.batch = input.size(0);
  s.in_channels = weight.size(1) * groups;
  s.out_channels = weight.size(0);
  const int64_t in_h = one_d ? 1 : input.size(2), in_w = input.size(-1);
  s.height = (in_h - 1) * s.stride_h - 2 * s.pad_h + s.dilation_h * (s.kernel_h - 1) + extra.h + 1;
  s.width = (in_w - 1) * s.stride_w - 2 * s.pad_w + s.dilation_w * (s.kernel_w - 1) + extra.w + 1;
  TORCH_CHECK(s.height > 0 && s.width > 0, "Calculated output size is too small for transposed convolution of input ",
              input.sizes(), " and kernel ", weight.sizes());
  return s;
}

// Sizes of a [batch, channels, height, width] buffer, without the height for 1-D.
std::vector<int64_t> nchw(const at::Tensor& like, int64_t batch, int64_t channels, int64_t h, int64_t w) {
  if (like.dim() == 3) return {batch, channels, w};
  return {batch, channels, h, w};
}

at::Tensor convolution_native(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                              c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                              bool transposed, c10::IntArrayRef output_padding, int64_t groups,
                              c10::MemoryFormat format) {
  const at::Tensor x = as_float(input), w = as_float(weight), b = as_float(bias);
  at::Tensor out;
  if (!transposed) {
    const kernels::Conv2dShape s = conv_shape(input, weight, stride, padding, dilation, groups);
    check_conv_args(input, weight, s);
    out = at::empty(nchw(input, s.batch, s.out_channels, s.out_h(), s.out_w()), x.options());
    if (out.numel() > 0) {
      const float *px = x.data_ptr<float>(), *pw = w.data_ptr<float>(), *pb = float_ptr(b);
      float* po = out.data_ptr<float>();
      enqueue(out, "aten::convolution", {&x, &w, &b}, [=] { kernels::conv2d_forward(s, px, pw, pb, po); });
    }
  } else {
    const kernels::Conv2dShape s = transposed_shape(input, weight, stride, padding, dilation, output_padding, groups);
    out = at::empty(nchw(input, s.batch, s.in_channels, s.height, s.width), x.options());
    if (out.numel() > 0) {
      const float *px = x.data_ptr<float>(), *pw = w.data_ptr<float>();
      float* po = out.data_ptr<float>();
      enqueue(out, "aten::convolution", {&x, &w},
              [=] { kernels::conv2d_backward(s, px, nullptr, pw, po, nullptr, nullptr); });
    }
    if (b.defined()) out.add_(input.dim() == 3 ? b.view({1, -1, 1}) : b.view({1, -1, 1, 1}));
  }
  // One copy both casts back and relays (the kernels write NCHW).
  return out.to(input.scalar_type(), false, false, format);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_native(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask, c10::MemoryFormat format) {
  const at::Tensor go = as_float(grad_output), x = as_float(input), w = as_float(weight);
  at::Tensor grad_input = output_mask[0] ? at::empty(x.sizes(), x.options()) : at::Tensor();
  at::Tensor grad_weight = output_mask[1] ? at::empty(w.sizes(), w.options()) : at::Tensor();
  at::Tensor grad_bias;
  if (!transposed) {
    const kernels::Conv2dShape s = conv_shape(input, weight, stride, padding, dilation, groups);
    grad_bias = output_mask[2] ? at::empty({s.out_channels}, x.options()) : at::Tensor();
    float *pgi = float_ptr(grad_input), *pgw = float_ptr(grad_weight), *pgb = float_ptr(grad_bias);
    if (go.numel() > 0 && (pgi != nullptr || pgw != nullptr || pgb != nullptr)) {
      const float *pgo = go.data_ptr<float>(), *px = x.data_ptr<float>(), *pw = w.data_ptr<float>();
      enqueue(go, "aten::convolution_backward", {&go, &x, &w},
              [=] { kernels::conv2d_backward(s, pgo, px, pw, pgi, pgw, pgb); });
    } else {
      for (at::Tensor* t : {&grad_input, &grad_weight, &grad_bias}) {
        if (t->defined()) t->zero_();
      }
    }
  } else {
    // The transposed convolution's input gradient is the forward convolution of grad_output;
    // its weight gradient is that convolution's weight gradient with the roles swapped.
    const kernels::Conv2dShape s = transposed_shape(input, weight, stride, padding, dilation, output_padding, groups);
    float *pgi = float_ptr(grad_input), *pgw = float_ptr(grad_weight);
    if (go.numel() > 0 && (pgi != nullptr || pgw != nullptr)) {
      const float *pgo = go.data_ptr<float>(), *px = x.data_ptr<float>(), *pw = w.data_ptr<float>();
      enqueue(go, "aten::convolution_backward", {&go, &x, &w}, [=] {
        if (pgi != nullptr) kernels::conv2d_forward(s, pgo, pw, nullptr, pgi);
        if (pgw != nullptr) kernels::conv2d_backward(s, px, pgo, pw, nullptr, pgw, nullptr);
      });
    }
    if (output_mask[2]) grad_bias = at::sum(go, input.dim() == 3 ? std::vector<int64_t>{0, 2} : std::vector<int64_t>{0, 2, 3});
  }
  auto back = [&](const at::Tensor& t, c10::MemoryFormat f) {
    return t.defined() ? t.to(input.scalar_type(), false, false, f) : t;
  };
  return {back(grad_input, format), back(grad_weight, format), back(grad_bias, c10::MemoryFormat::Contiguous)};
}

// ---- 3-D convolution: a sum over the kernel's depth taps of 2-D convolutions ---------------
// Tap kd reads input depth t * stride + kd * dilation - padding for every output depth t (zeros
// outside): those slices, batched as [batch * out_depth, channels, H, W] images, convolved with
// weight[:, :, kd] by the native 2-D path. The same multiplies as a direct 3-D convolution; the
// slices cost kernel-depth copies of the input.

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

// ---- 1x1 channels-last convolutions: one matrix product over the pixels -----------------------
// A 1x1, stride-1, unpadded, ungrouped 2-D convolution of a dense channels-last input is the
// product [N * H * W, C] x [C, O] on the input's own memory, whose result is already
// channels-last: no relayout before or after (in float, as the other native paths).

bool pointwise_channels_last(const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
                             c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, int64_t groups,
                             c10::MemoryFormat format) {
  return format == c10::MemoryFormat::ChannelsLast && !transposed && groups == 1 && input.dim() == 4 &&
         weight.dim() == 4 && weight.size(2) == 1 && weight.size(3) == 1 && weight.size(1) == input.size(1) &&
         !any_not_one(stride) && !any_not_one(dilation) &&
         std::all_of(padding.begin(), padding.end(), [](int64_t p) { return p == 0; }) &&
         input.is_contiguous(c10::MemoryFormat::ChannelsLast) && input.numel() > 0 && weight.numel() > 0;
}

// A channels-last [N, C, H, W] tensor's pixels as [N * H * W, C] rows, in float (views when float).
at::Tensor pixel_rows(const at::Tensor& t) {
  return t.to(at::kFloat).contiguous(c10::MemoryFormat::ChannelsLast).permute({0, 2, 3, 1}).reshape({-1, t.size(1)});
}

// [N * H * W, C] rows back to a channels-last [N, C, H, W] tensor of `like`'s batch and image.
at::Tensor from_pixel_rows(const at::Tensor& rows, const at::Tensor& like, c10::ScalarType dtype) {
  return rows.view({like.size(0), like.size(2), like.size(3), rows.size(1)}).permute({0, 3, 1, 2}).to(dtype);
}

at::Tensor pointwise_forward(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  const at::Tensor w = as_float(weight).reshape({weight.size(0), weight.size(1)}).t();
  const at::Tensor rows = pixel_rows(input);
  const at::Tensor out = bias.defined() ? at::addmm(as_float(bias), rows, w) : at::mm(rows, w);
  return from_pixel_rows(out, input, input.scalar_type());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> pointwise_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                                                  const at::Tensor& weight, std::array<bool, 3> mask) {
  const int64_t out_channels = weight.size(0), in_channels = weight.size(1);
  const at::Tensor go = pixel_rows(grad_output), w = as_float(weight).reshape({out_channels, in_channels});
  at::Tensor grad_input, grad_weight, grad_bias;
  if (mask[0]) grad_input = from_pixel_rows(at::mm(go, w), input, input.scalar_type());
  if (mask[1]) {
    // [O, C] as the channels-last [O, C, 1, 1] CPU gives (the strides of its size-1 dims too).
    grad_weight = at::mm(go.t(), pixel_rows(input))
                      .as_strided({out_channels, in_channels, 1, 1}, {in_channels, 1, in_channels, in_channels})
                      .to(weight.scalar_type());
  }
  if (mask[2]) grad_bias = at::sum(go, {0}).to(weight.scalar_type());
  return {grad_input, grad_weight, grad_bias};
}

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias_opt,
                       c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                       c10::IntArrayRef output_padding, int64_t groups) {
  const at::Tensor bias = bias_opt.has_value() ? *bias_opt : at::Tensor();
  check_same_device("aten::convolution", input.device(), {&weight, &bias});
  if (native_convolution_3d(input, weight, bias)) {
    const c10::MemoryFormat format = result_format(input, weight, stride, dilation, transposed, output_padding, groups);
    // In float for half types: the taps' partial sums rounded to bfloat16 were 0.9 off.
    const at::Tensor x = as_float(input), w = as_float(weight), b = as_float(bias);
    const at::Tensor out =
        transposed ? convolution_transpose_3d(x, w, b, stride, padding, dilation, output_padding, groups, format)
                   : convolution_3d(x, w, b, stride, padding, dilation, groups, format);
    return out.to(input.scalar_type());  // keeps the layout
  }
  if (native_convolution(input, weight, bias) && (!transposed || padding_below_stride(output_padding, stride))) {
    const c10::MemoryFormat format = result_format(input, weight, stride, dilation, transposed, output_padding, groups);
    if (pointwise_channels_last(input, weight, stride, padding, dilation, transposed, groups, format)) {
      return pointwise_forward(input, weight, bias);
    }
    return convolution_native(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, format);
  }
  note_cpu_fallback("aten::convolution_overrideable");
  std::optional<at::Tensor> host_bias;
  if (bias.defined()) host_bias = to_host(bias);
  const at::Tensor out = at::convolution(to_host(input), to_host(weight), host_bias, stride, padding,
                                         dilation, transposed, output_padding, groups);
  return to_device_of(out, input);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
    c10::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  check_same_device("aten::convolution_backward", input.device(), {&grad_output, &weight});
  const c10::MemoryFormat format = result_format(input, weight, stride, dilation, transposed, output_padding, groups);
  if (native_convolution_3d(input, weight, at::Tensor()) && grad_output.scalar_type() == input.scalar_type()) {
    const at::Tensor go = as_float(grad_output), x = as_float(input), w = as_float(weight);
    auto [grad_input, grad_weight, grad_bias] =
        transposed ? convolution_transpose_backward_3d(go, x, w, stride, padding, dilation, output_padding, groups,
                                                       output_mask, format)
                   : convolution_backward_3d(go, x, w, stride, padding, dilation, groups, output_mask, format);
    auto back = [&](const at::Tensor& t) { return t.defined() ? t.to(input.scalar_type()) : t; };
    return {back(grad_input), back(grad_weight), back(grad_bias)};
  }
  if (native_convolution(input, weight, at::Tensor()) && grad_output.scalar_type() == input.scalar_type() &&
      (!transposed || padding_below_stride(output_padding, stride))) {
    if (pointwise_channels_last(input, weight, stride, padding, dilation, transposed, groups, format)) {
      return pointwise_backward(grad_output, input, weight, output_mask);
    }
    return convolution_backward_native(grad_output, input, weight, stride, padding, dilation, transposed,
                                       output_padding, groups, output_mask, format);
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

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(convolution));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward));
}

}  // namespace torchneuron::aten
