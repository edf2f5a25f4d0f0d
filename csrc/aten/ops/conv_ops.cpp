// Convolution, which reaches backends as convolution_overrideable: 1-D and 2-D convolutions,
// plain and transposed, run natively by im2col + GEMM in float32 (bfloat16 and float16 are
// converted to float on the device and back, accumulating in float as CPU PyTorch does); float64
// ones, and transposed ones whose output padding reaches the stride, by the device's im2col /
// col2im and matmul; 3-D ones as sums of 2-D ones over depth slices (conv3d_ops.cpp). Other
// dtypes take an explicit host route, counted like any fallback, since the boxed fallback has no
// CPU kernel for this op.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/col2im.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/im2col.h>
#include <ATen/ops/matmul.h>
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
#include "aten/ops/conv3d.h"
#include "kernels/conv.h"

namespace torchneuron::aten {
namespace {

at::Tensor to_host(const at::Tensor& t) { return t.defined() ? t.cpu() : t; }

at::Tensor to_device_of(const at::Tensor& t, const at::Tensor& like) {
  return t.defined() ? t.to(like.device()) : t;
}

bool kernel_dtype(c10::ScalarType t) { return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf; }
bool unfold_dtype(c10::ScalarType t) { return t == at::kDouble || kernel_dtype(t); }

// The dtype the composed paths compute in: float64 as it is, the others in float32.
at::Tensor as_compute(const at::Tensor& t) {
  return t.defined() ? t.to(t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat).contiguous() : t;
}

// The native path: 1-D or 2-D, float32 or a half type, one dtype for every operand.
bool native_convolution(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  return (input.dim() == 3 || input.dim() == 4) && kernel_dtype(input.scalar_type()) &&
         weight.scalar_type() == input.scalar_type() && (!bias.defined() || bias.scalar_type() == input.scalar_type());
}

// 3-D convolutions run as 2-D ones over depth slices (conv3d.h), float64 included.
bool native_convolution_3d(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  return input.dim() == 5 && unfold_dtype(input.scalar_type()) && weight.scalar_type() == input.scalar_type() &&
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

// ---- float64, and transposed ones whose output padding reaches the stride: unfold + GEMM -------
// The convolution as products of the weight with the input's columns (im2col), grouped as
// [batch, groups, K, L] (K = channels per group x taps, L = output pixels), in the operands' own
// dtype (float32 for half types), through the device's im2col / col2im and matmul. 1-D runs as
// 2-D of height 1. A transposed convolution is the input gradient of the forward one from its
// output to its input: its columns are folded (col2im) over the unpadded frame of
// (in - 1) * stride + dilation * (kernel - 1) + 1 pixels, which every output padding fits by
// cropping or zero-filling, and cropped to the output.

at::Tensor as_image(const at::Tensor& t) { return t.dim() == 3 ? t.unsqueeze(2) : t; }

// Operands the unfold path takes: 1-D or 2-D, one floating dtype for every operand.
bool unfold_convolution(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  return (input.dim() == 3 || input.dim() == 4) && unfold_dtype(input.scalar_type()) &&
         weight.scalar_type() == input.scalar_type() && (!bias.defined() || bias.scalar_type() == input.scalar_type());
}

// [N, groups * K, L] columns of an image, as [N, groups, K, L].
at::Tensor grouped_columns(const at::Tensor& image, const kernels::Conv2dShape& s, int64_t pad_h, int64_t pad_w) {
  const at::Tensor columns = at::im2col(image, {s.kernel_h, s.kernel_w}, {s.dilation_h, s.dilation_w}, {pad_h, pad_w},
                                        {s.stride_h, s.stride_w});
  return columns.view({image.size(0), s.groups, columns.size(1) / s.groups, columns.size(2)});
}

// A [O, C / groups, kh, kw] weight as [groups, O / groups, K].
at::Tensor grouped_weight(const at::Tensor& weight, int64_t groups) {
  return weight.reshape({groups, weight.size(0) / groups, -1});
}

// The unpadded frame a transposed convolution's columns fold over.
int64_t frame(int64_t in, int64_t kernel, int64_t stride, int64_t dilation) {
  return (in - 1) * stride + dilation * (kernel - 1) + 1;
}
// The pads (negative: crops) that take an image between a transposed convolution's output
// [.., height, width] and its frame, `to_frame` saying which way.
std::vector<int64_t> frame_pads(const kernels::Conv2dShape& s, int64_t frame_h, int64_t frame_w, bool to_frame) {
  const int64_t sign = to_frame ? 1 : -1;
  return {sign * s.pad_w, sign * (frame_w - s.pad_w - s.width), sign * s.pad_h, sign * (frame_h - s.pad_h - s.height)};
}

at::Tensor convolution_unfold(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                              c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                              bool transposed, c10::IntArrayRef output_padding, int64_t groups, c10::MemoryFormat format) {
  const at::Tensor x = as_image(as_compute(input)).contiguous(), w = as_image(as_compute(weight));
  const int64_t n = x.size(0);
  at::Tensor out;
  if (!transposed) {
    const kernels::Conv2dShape s = conv_shape(input, weight, stride, padding, dilation, groups);
    check_conv_args(input, weight, s);
    if (x.numel() == 0 || w.numel() == 0) {
      out = at::zeros({n, s.out_channels, s.out_h(), s.out_w()}, x.options());
    } else {
      const at::Tensor columns = grouped_columns(x, s, s.pad_h, s.pad_w);
      out = at::matmul(grouped_weight(w, groups), columns).view({n, s.out_channels, s.out_h(), s.out_w()});
    }
  } else {
    const kernels::Conv2dShape s = transposed_shape(input, weight, stride, padding, dilation, output_padding, groups);
    const int64_t frame_h = frame(x.size(2), s.kernel_h, s.stride_h, s.dilation_h);
    const int64_t frame_w = frame(x.size(3), s.kernel_w, s.stride_w, s.dilation_w);
    if (x.numel() == 0 || w.numel() == 0) {
      out = at::zeros({n, s.in_channels, s.height, s.width}, x.options());
    } else {
      const at::Tensor rows = x.view({n, groups, s.out_channels / groups, -1});
      const at::Tensor columns = at::matmul(grouped_weight(w, groups).transpose(1, 2), rows);
      const at::Tensor folded = at::col2im(columns.reshape({n, -1, columns.size(3)}), {frame_h, frame_w},
                                           {s.kernel_h, s.kernel_w}, {s.dilation_h, s.dilation_w}, {0, 0},
                                           {s.stride_h, s.stride_w});
      out = at::constant_pad_nd(folded, frame_pads(s, frame_h, frame_w, false));
    }
  }
  if (bias.defined()) out = out.add_(as_compute(bias).view({1, -1, 1, 1}));
  if (input.dim() == 3) out = out.squeeze(2);
  return out.to(input.scalar_type(), false, false, format);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_unfold(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask, c10::MemoryFormat format) {
  const at::Tensor go = as_image(as_compute(grad_output)).contiguous(), x = as_image(as_compute(input)).contiguous(),
                   w = as_image(as_compute(weight));
  const int64_t n = x.size(0);
  at::Tensor grad_input, grad_weight;
  const bool empty = go.numel() == 0 || x.numel() == 0 || w.numel() == 0;
  if (!transposed) {
    // go [N, O, oh, ow]: the columns' gradient is W^T go, folded; the weight's, go x columns^T.
    const kernels::Conv2dShape s = conv_shape(input, weight, stride, padding, dilation, groups);
    const at::Tensor rows = go.view({n, groups, s.out_channels / groups, go.size(2) * go.size(3)});
    if (output_mask[0]) {
      grad_input = empty ? at::zeros(x.sizes(), x.options())
                         : at::col2im(at::matmul(grouped_weight(w, groups).transpose(1, 2), rows).reshape({n, -1, rows.size(3)}),
                                      {x.size(2), x.size(3)}, {s.kernel_h, s.kernel_w}, {s.dilation_h, s.dilation_w},
                                      {s.pad_h, s.pad_w}, {s.stride_h, s.stride_w});
    }
    if (output_mask[1]) {
      grad_weight = empty ? at::zeros(w.sizes(), w.options())
                          : at::matmul(rows, grouped_columns(x, s, s.pad_h, s.pad_w).transpose(2, 3)).sum(0).view(w.sizes());
    }
  } else {
    // The forward convolution's roles swapped: grad_output is its image (in the frame), input its output.
    const kernels::Conv2dShape s = transposed_shape(input, weight, stride, padding, dilation, output_padding, groups);
    const int64_t frame_h = frame(x.size(2), s.kernel_h, s.stride_h, s.dilation_h);
    const int64_t frame_w = frame(x.size(3), s.kernel_w, s.stride_w, s.dilation_w);
    const at::Tensor columns =
        empty ? at::Tensor()
              : grouped_columns(at::constant_pad_nd(go, frame_pads(s, frame_h, frame_w, true)), s, 0, 0);
    if (output_mask[0]) {
      grad_input = empty ? at::zeros(x.sizes(), x.options())
                         : at::matmul(grouped_weight(w, groups), columns).view(x.sizes());
    }
    if (output_mask[1]) {
      const at::Tensor rows = x.view({n, groups, s.out_channels / groups, x.size(2) * x.size(3)});
      grad_weight = empty ? at::zeros(w.sizes(), w.options())
                          : at::matmul(rows, columns.transpose(2, 3)).sum(0).view(w.sizes());
    }
  }
  at::Tensor grad_bias = output_mask[2] ? at::sum(go, {0, 2, 3}) : at::Tensor();
  auto back = [&](at::Tensor t, c10::MemoryFormat f) {
    if (!t.defined()) return t;
    if (input.dim() == 3 && t.dim() == 4) t = t.squeeze(2);
    return t.to(input.scalar_type(), false, false, f);
  };
  return {back(grad_input, format), back(grad_weight, format), back(grad_bias, c10::MemoryFormat::Contiguous)};
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
    const at::Tensor x = as_compute(input), w = as_compute(weight), b = as_compute(bias);
    const at::Tensor out =
        transposed ? conv3d::convolution_transpose_3d(x, w, b, stride, padding, dilation, output_padding, groups, format)
                   : conv3d::convolution_3d(x, w, b, stride, padding, dilation, groups, format);
    return out.to(input.scalar_type());  // keeps the layout
  }
  if (native_convolution(input, weight, bias) && (!transposed || padding_below_stride(output_padding, stride))) {
    const c10::MemoryFormat format = result_format(input, weight, stride, dilation, transposed, output_padding, groups);
    if (pointwise_channels_last(input, weight, stride, padding, dilation, transposed, groups, format)) {
      return pointwise_forward(input, weight, bias);
    }
    return convolution_native(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, format);
  }
  if (unfold_convolution(input, weight, bias)) {
    const c10::MemoryFormat format = result_format(input, weight, stride, dilation, transposed, output_padding, groups);
    return convolution_unfold(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, format);
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
    const at::Tensor go = as_compute(grad_output), x = as_compute(input), w = as_compute(weight);
    auto [grad_input, grad_weight, grad_bias] =
        transposed ? conv3d::convolution_transpose_backward_3d(go, x, w, stride, padding, dilation, output_padding,
                                                               groups, output_mask, format)
                   : conv3d::convolution_backward_3d(go, x, w, stride, padding, dilation, groups, output_mask, format);
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
  if (unfold_convolution(input, weight, at::Tensor()) && grad_output.scalar_type() == input.scalar_type()) {
    return convolution_backward_unfold(grad_output, input, weight, stride, padding, dilation, transposed,
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
