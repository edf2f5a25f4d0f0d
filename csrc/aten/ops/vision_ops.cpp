// Upsampling, patch and sampling operators on neuron: upsample (nearest, nearest-exact, linear,
// bilinear, bicubic, trilinear, antialiased bilinear / bicubic), im2col / col2im (nn.Unfold /
// nn.Fold) and grid_sample (bilinear, nearest), with their backward ops; pixel (un)shuffle as a
// permuting copy. The host checks
// arguments and computes output sizes; csrc/kernels (upsample, patches, grid_sample) run on the
// queue over contiguous NCHW buffers.
#include <ATen/native/CPUFallback.h>
#include <ATen/native/PixelShuffle.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/_upsample_bicubic2d_aa_backward_ops.h>
#include <ATen/ops/_upsample_bicubic2d_aa_ops.h>
#include <ATen/ops/_upsample_bilinear2d_aa_backward_ops.h>
#include <ATen/ops/_upsample_bilinear2d_aa_ops.h>
#include <ATen/ops/_upsample_nearest_exact1d_ops.h>
#include <ATen/ops/_upsample_nearest_exact2d_ops.h>
#include <ATen/ops/_upsample_nearest_exact3d_ops.h>
#include <ATen/ops/col2im_ops.h>
#include <ATen/ops/grid_sampler_2d_backward_ops.h>
#include <ATen/ops/grid_sampler_2d_ops.h>
#include <ATen/ops/im2col_ops.h>
#include <ATen/ops/upsample_bicubic2d_ops.h>
#include <ATen/ops/upsample_bilinear2d_ops.h>
#include <ATen/ops/upsample_linear1d_ops.h>
#include <ATen/ops/upsample_nearest1d_ops.h>
#include <ATen/ops/upsample_nearest2d_ops.h>
#include <ATen/ops/upsample_nearest3d_ops.h>
#include <ATen/ops/upsample_trilinear3d_ops.h>
#include <torch/library.h>

#include <algorithm>
#include <initializer_list>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "aten/device/neuron_tensor.h"
#include "aten/fallback/cpu_fallback.h"
#include "aten/ops/vision_common.h"
#include "kernels/floating.h"
#include "kernels/grid_sample.h"
#include "kernels/patches.h"
#include "kernels/upsample.h"

namespace torchneuron::aten {
namespace vision {

// ---- upsampling ----------------------------------------------------------------------------
// nearest / nearest-exact (1-3 spatial dims), linear, bilinear, bicubic and trilinear, with
// their backward ops; the .vec overloads are composites of these.

namespace {

constexpr const char* kAxisNames[3][3] = {{"W"}, {"H", "W"}, {"D", "H", "W"}};

// "(D: 4, H: 0, W: 5)": the spatial sizes as CPU PyTorch's messages name them.
std::string spatial_sizes(c10::IntArrayRef sizes) {
  std::string text = "(";
  for (size_t i = 0; i < sizes.size(); ++i) {
    text += std::string(i ? ", " : "") + kAxisNames[sizes.size() - 1][i] + ": " + std::to_string(sizes[i]);
  }
  return text + ")";
}

kernels::UpsampleShape upsample_shape(c10::IntArrayRef full_input_size, c10::IntArrayRef output_size,
                                      const std::vector<std::optional<double>>& scales) {
  kernels::UpsampleShape shape;
  shape.dims = static_cast<int>(output_size.size());
  shape.planes = full_input_size[0] * full_input_size[1];
  for (int i = 0; i < shape.dims; ++i) {
    shape.in[i] = full_input_size[2 + i];
    shape.out[i] = output_size[i];
    shape.scale[i] = scales[i].value_or(0.0);
  }
  return shape;
}

void check_upsample_sizes(const char* op, c10::IntArrayRef input_size, c10::IntArrayRef output_size, size_t dims) {
  TORCH_CHECK(output_size.size() == dims, op, ": It is expected output_size equals to ", dims, ", but got size ",
              output_size.size());
  TORCH_CHECK(input_size.size() == dims + 2, op, ": It is expected input_size equals to ", dims + 2, ", but got size ",
              input_size.size());
  const c10::IntArrayRef spatial = input_size.slice(2);
  const bool positive = std::all_of(spatial.begin(), spatial.end(), [](int64_t n) { return n > 0; }) &&
                        std::all_of(output_size.begin(), output_size.end(), [](int64_t n) { return n > 0; });
  TORCH_CHECK(positive, op, ": Input and output sizes should be greater than 0, but got input ", spatial_sizes(spatial),
              " and output ", spatial_sizes(output_size));
}

// Whether the kernels take this input: a floating dtype, or uint8 for the nearest modes (CPU
// PyTorch's set; other dtypes take the fallback, which raises CPU's error).
bool upsample_native(const at::Tensor& input, kernels::Interpolation mode) {
  const bool nearest = mode == kernels::Interpolation::kNearest || mode == kernels::Interpolation::kNearestExact;
  return floating(input) || (nearest && input.scalar_type() == at::kByte);
}

at::Tensor upsample(const char* op, kernels::Interpolation mode, bool align_corners, const at::Tensor& input,
                    c10::IntArrayRef output_size, const std::vector<std::optional<double>>& scales) {
  check_upsample_sizes(op, input.sizes(), output_size, scales.size());
  const at::Tensor x = input.contiguous();
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().begin() + 2);
  sizes.insert(sizes.end(), output_size.begin(), output_size.end());
  at::Tensor out = at::empty(sizes, x.options());
  if (out.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(x.scalar_type());
    const kernels::UpsampleShape shape = upsample_shape(x.sizes(), output_size, scales);
    const void* px = x.data_ptr();
    void* po = out.data_ptr();
    enqueue(out, op, {&x}, [=] { kernels::upsample(dtype, mode, align_corners, shape, px, po); });
  }
  return like_input_format(out, input);
}

at::Tensor upsample_backward(const char* op, kernels::Interpolation mode, bool align_corners, const at::Tensor& grad_out,
                             c10::IntArrayRef output_size, c10::IntArrayRef input_size,
                             const std::vector<std::optional<double>>& scales) {
  check_upsample_sizes(op, input_size, output_size, scales.size());
  for (size_t d = 0; d < input_size.size(); ++d) {
    const int64_t expected = d < 2 ? input_size[d] : output_size[d - 2];
    TORCH_CHECK(grad_out.dim() == static_cast<int64_t>(input_size.size()) && grad_out.size(d) == expected, op,
                ": Expected grad_output to have the same shape as output; output.size(", d, ") = ", expected,
                " but got grad_output", grad_out.dim() == static_cast<int64_t>(input_size.size())
                    ? ".size(" + std::to_string(d) + ") = " + std::to_string(grad_out.size(d)) : " of sizes " + c10::str(grad_out.sizes()));
  }
  TORCH_CHECK(floating(grad_out), op, ": expected a floating grad_output, got ", grad_out.scalar_type());
  const at::Tensor go = grad_out.contiguous();
  at::Tensor grad_in = at::empty(input_size, go.options());
  if (grad_in.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(go.scalar_type());
    const kernels::UpsampleShape shape = upsample_shape(input_size, output_size, scales);
    const void* pgo = go.data_ptr();
    void* pgi = grad_in.data_ptr();
    enqueue(grad_in, op, {&go}, [=] { kernels::upsample_backward(dtype, mode, align_corners, shape, pgo, pgi); });
  }
  // CPU lays the input gradient out like grad_output for the nearest (2-D), (bi/tri)linear and
  // antialiased bilinear modes; bicubic and 3-D nearest gradients are contiguous.
  const bool nearest = mode == kernels::Interpolation::kNearest || mode == kernels::Interpolation::kNearestExact;
  const bool linear = mode == kernels::Interpolation::kLinear || mode == kernels::Interpolation::kLinearAntialias;
  if ((nearest && input_size.size() == 4) || linear) return grad_in.contiguous(grad_out.suggest_memory_format());
  return grad_in;
}

using Scale = std::optional<double>;
constexpr auto kNearest = kernels::Interpolation::kNearest;
constexpr auto kNearestExact = kernels::Interpolation::kNearestExact;
constexpr auto kLinear = kernels::Interpolation::kLinear;
constexpr auto kCubic = kernels::Interpolation::kCubic;
constexpr auto kLinearAntialias = kernels::Interpolation::kLinearAntialias;
constexpr auto kCubicAntialias = kernels::Interpolation::kCubicAntialias;

}  // namespace

// Each operator: the functional form (falling back for dtypes the kernels do not take), out=,
// backward and backward's grad_input=.
#define NEURON_UPSAMPLE_FALLBACK(name, ...)                                                    \
  at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(name)>::call(__VA_ARGS__)

at::Tensor upsample_nearest1d(const at::Tensor& input, c10::IntArrayRef size, Scale s) {
  if (!upsample_native(input, kNearest)) return NEURON_UPSAMPLE_FALLBACK(upsample_nearest1d, input, size, s);
  return upsample("aten::upsample_nearest1d", kNearest, false, input, size, {s});
}
at::Tensor upsample_nearest2d(const at::Tensor& input, c10::IntArrayRef size, Scale sh, Scale sw) {
  if (!upsample_native(input, kNearest)) return NEURON_UPSAMPLE_FALLBACK(upsample_nearest2d, input, size, sh, sw);
  return upsample("aten::upsample_nearest2d", kNearest, false, input, size, {sh, sw});
}
at::Tensor upsample_nearest3d(const at::Tensor& input, c10::IntArrayRef size, Scale sd, Scale sh, Scale sw) {
  if (!upsample_native(input, kNearest)) return NEURON_UPSAMPLE_FALLBACK(upsample_nearest3d, input, size, sd, sh, sw);
  return upsample("aten::upsample_nearest3d", kNearest, false, input, size, {sd, sh, sw});
}
at::Tensor upsample_nearest_exact1d(const at::Tensor& input, c10::IntArrayRef size, Scale s) {
  if (!upsample_native(input, kNearestExact)) return NEURON_UPSAMPLE_FALLBACK(_upsample_nearest_exact1d, input, size, s);
  return upsample("aten::_upsample_nearest_exact1d", kNearestExact, false, input, size, {s});
}
at::Tensor upsample_nearest_exact2d(const at::Tensor& input, c10::IntArrayRef size, Scale sh, Scale sw) {
  if (!upsample_native(input, kNearestExact)) {
    return NEURON_UPSAMPLE_FALLBACK(_upsample_nearest_exact2d, input, size, sh, sw);
  }
  return upsample("aten::_upsample_nearest_exact2d", kNearestExact, false, input, size, {sh, sw});
}
at::Tensor upsample_nearest_exact3d(const at::Tensor& input, c10::IntArrayRef size, Scale sd, Scale sh, Scale sw) {
  if (!upsample_native(input, kNearestExact)) {
    return NEURON_UPSAMPLE_FALLBACK(_upsample_nearest_exact3d, input, size, sd, sh, sw);
  }
  return upsample("aten::_upsample_nearest_exact3d", kNearestExact, false, input, size, {sd, sh, sw});
}
at::Tensor upsample_linear1d(const at::Tensor& input, c10::IntArrayRef size, bool align, Scale s) {
  if (!upsample_native(input, kLinear)) return NEURON_UPSAMPLE_FALLBACK(upsample_linear1d, input, size, align, s);
  return upsample("aten::upsample_linear1d", kLinear, align, input, size, {s});
}
at::Tensor upsample_bilinear2d(const at::Tensor& input, c10::IntArrayRef size, bool align, Scale sh, Scale sw) {
  if (!upsample_native(input, kLinear)) return NEURON_UPSAMPLE_FALLBACK(upsample_bilinear2d, input, size, align, sh, sw);
  return upsample("aten::upsample_bilinear2d", kLinear, align, input, size, {sh, sw});
}
at::Tensor upsample_bicubic2d(const at::Tensor& input, c10::IntArrayRef size, bool align, Scale sh, Scale sw) {
  if (!upsample_native(input, kCubic)) return NEURON_UPSAMPLE_FALLBACK(upsample_bicubic2d, input, size, align, sh, sw);
  return upsample("aten::upsample_bicubic2d", kCubic, align, input, size, {sh, sw});
}
at::Tensor upsample_trilinear3d(const at::Tensor& input, c10::IntArrayRef size, bool align, Scale sd, Scale sh,
                                Scale sw) {
  if (!upsample_native(input, kLinear)) {
    return NEURON_UPSAMPLE_FALLBACK(upsample_trilinear3d, input, size, align, sd, sh, sw);
  }
  return upsample("aten::upsample_trilinear3d", kLinear, align, input, size, {sd, sh, sw});
}

// antialias=True; uint8 images (CPU's own integer path) take the fallback.
at::Tensor upsample_bilinear2d_aa(const at::Tensor& input, c10::IntArrayRef size, bool align, Scale sh, Scale sw) {
  if (!upsample_native(input, kLinearAntialias)) {
    return NEURON_UPSAMPLE_FALLBACK(_upsample_bilinear2d_aa, input, size, align, sh, sw);
  }
  return upsample("aten::_upsample_bilinear2d_aa", kLinearAntialias, align, input, size, {sh, sw});
}
at::Tensor upsample_bicubic2d_aa(const at::Tensor& input, c10::IntArrayRef size, bool align, Scale sh, Scale sw) {
  if (!upsample_native(input, kCubicAntialias)) {
    return NEURON_UPSAMPLE_FALLBACK(_upsample_bicubic2d_aa, input, size, align, sh, sw);
  }
  return upsample("aten::_upsample_bicubic2d_aa", kCubicAntialias, align, input, size, {sh, sw});
}

#undef NEURON_UPSAMPLE_FALLBACK

at::Tensor upsample_nearest1d_backward(const at::Tensor& g, c10::IntArrayRef size, c10::IntArrayRef in, Scale s) {
  return upsample_backward("aten::upsample_nearest1d_backward", kNearest, false, g, size, in, {s});
}
at::Tensor upsample_nearest2d_backward(const at::Tensor& g, c10::IntArrayRef size, c10::IntArrayRef in, Scale sh,
                                       Scale sw) {
  return upsample_backward("aten::upsample_nearest2d_backward", kNearest, false, g, size, in, {sh, sw});
}
at::Tensor upsample_nearest3d_backward(const at::Tensor& g, c10::IntArrayRef size, c10::IntArrayRef in, Scale sd,
                                       Scale sh, Scale sw) {
  return upsample_backward("aten::upsample_nearest3d_backward", kNearest, false, g, size, in, {sd, sh, sw});
}
at::Tensor upsample_nearest_exact1d_backward(const at::Tensor& g, c10::IntArrayRef size, c10::IntArrayRef in, Scale s) {
  return upsample_backward("aten::_upsample_nearest_exact1d_backward", kNearestExact, false, g, size, in, {s});
}
at::Tensor upsample_nearest_exact2d_backward(const at::Tensor& g, c10::IntArrayRef size, c10::IntArrayRef in,
                                             Scale sh, Scale sw) {
  return upsample_backward("aten::_upsample_nearest_exact2d_backward", kNearestExact, false, g, size, in, {sh, sw});
}
at::Tensor upsample_nearest_exact3d_backward(const at::Tensor& g, c10::IntArrayRef size, c10::IntArrayRef in,
                                             Scale sd, Scale sh, Scale sw) {
  return upsample_backward("aten::_upsample_nearest_exact3d_backward", kNearestExact, false, g, size, in, {sd, sh, sw});
}
at::Tensor upsample_linear1d_backward(const at::Tensor& g, c10::IntArrayRef size, c10::IntArrayRef in, bool align,
                                      Scale s) {
  return upsample_backward("aten::upsample_linear1d_backward", kLinear, align, g, size, in, {s});
}
at::Tensor upsample_bilinear2d_backward(const at::Tensor& g, c10::IntArrayRef size, c10::IntArrayRef in, bool align,
                                        Scale sh, Scale sw) {
  return upsample_backward("aten::upsample_bilinear2d_backward", kLinear, align, g, size, in, {sh, sw});
}
at::Tensor upsample_bicubic2d_backward(const at::Tensor& g, c10::IntArrayRef size, c10::IntArrayRef in, bool align,
                                       Scale sh, Scale sw) {
  return upsample_backward("aten::upsample_bicubic2d_backward", kCubic, align, g, size, in, {sh, sw});
}
at::Tensor upsample_bilinear2d_aa_backward(const at::Tensor& g, c10::IntArrayRef size, c10::IntArrayRef in, bool align,
                                           Scale sh, Scale sw) {
  return upsample_backward("aten::_upsample_bilinear2d_aa_backward", kLinearAntialias, align, g, size, in, {sh, sw});
}
at::Tensor upsample_bicubic2d_aa_backward(const at::Tensor& g, c10::IntArrayRef size, c10::IntArrayRef in, bool align,
                                          Scale sh, Scale sw) {
  return upsample_backward("aten::_upsample_bicubic2d_aa_backward", kCubicAntialias, align, g, size, in, {sh, sw});
}
at::Tensor upsample_trilinear3d_backward(const at::Tensor& g, c10::IntArrayRef size, c10::IntArrayRef in, bool align,
                                         Scale sd, Scale sh, Scale sw) {
  return upsample_backward("aten::upsample_trilinear3d_backward", kLinear, align, g, size, in, {sd, sh, sw});
}

// ---- im2col / col2im (nn.Unfold / nn.Fold) -------------------------------------------------

namespace {

// The arguments as CPU PyTorch checks them; `image` holds (height, width) of the image, which
// messages call `image_name`.
kernels::PatchShape patch_shape(const char* op, const char* image_name, c10::IntArrayRef image, c10::IntArrayRef kernel_size,
                                c10::IntArrayRef dilation, c10::IntArrayRef padding, c10::IntArrayRef stride) {
  for (auto [name, arg] : {std::pair{"kernel_size", kernel_size}, std::pair{"dilation", dilation},
                           std::pair{"padding", padding}, std::pair{"stride", stride}}) {
    TORCH_CHECK(arg.size() == 2, op, ": It is expected ", name, " equals to 2, but got size ", arg.size());
  }
  TORCH_CHECK(kernel_size[0] > 0 && kernel_size[1] > 0, op, ": kernel size should be greater than zero, but got kernel_height: ",
              kernel_size[0], " kernel_width: ", kernel_size[1]);
  TORCH_CHECK(dilation[0] > 0 && dilation[1] > 0, op, ": dilation should be greater than zero, but got dilation_height: ",
              dilation[0], " dilation_width: ", dilation[1]);
  TORCH_CHECK(padding[0] >= 0 && padding[1] >= 0, op, ": padding should be non-negative, but got pad_height: ", padding[0],
              " pad_width: ", padding[1]);
  TORCH_CHECK(stride[0] > 0 && stride[1] > 0, op, ": stride should be greater than zero, but got stride_height: ",
              stride[0], " stride_width: ", stride[1]);
  kernels::PatchShape s;
  s.height = image[0];
  s.width = image[1];
  s.kernel_h = kernel_size[0];
  s.kernel_w = kernel_size[1];
  s.dilation_h = dilation[0];
  s.dilation_w = dilation[1];
  s.pad_h = padding[0];
  s.pad_w = padding[1];
  s.stride_h = stride[0];
  s.stride_w = stride[1];
  TORCH_CHECK(s.blocks_h() >= 1 && s.blocks_w() >= 1, op, ": Given ", image_name,
              image, ", kernel_size=", kernel_size, ", dilation=", dilation, ", padding=", padding,
              ", calculated shape of the array of sliding blocks as (", s.blocks_h(), ", ", s.blocks_w(),
              "), but its components must be at least one.");
  return s;
}

}  // namespace

at::Tensor im2col(const at::Tensor& input, c10::IntArrayRef kernel_size, c10::IntArrayRef dilation,
                  c10::IntArrayRef padding, c10::IntArrayRef stride) {
  if (!floating(input) && !(has_kernel_dtype(input.scalar_type()) && kernels::is_complex(to_kernel_dtype(input.scalar_type())))) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(im2col)>::call(input, kernel_size, dilation,
                                                                                      padding, stride);
  }
  const bool batched = input.dim() == 4;
  TORCH_CHECK((input.dim() == 3 || batched) && input.size(-1) > 0 && input.size(-2) > 0 && input.size(-3) > 0,
              "aten::im2col: Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero "
              "dimensions for input, but got: ", input.sizes());
  kernels::PatchShape s = patch_shape("aten::im2col", "input with spatial size ", input.sizes().slice(input.dim() - 2), kernel_size, dilation, padding, stride);
  s.batch = batched ? input.size(0) : 1;
  s.channels = input.size(-3);
  const at::Tensor x = input.contiguous();
  std::vector<int64_t> sizes{s.channels * s.kernel_h * s.kernel_w, s.blocks_h() * s.blocks_w()};
  if (batched) sizes.insert(sizes.begin(), s.batch);
  at::Tensor columns = at::empty(sizes, x.options());
  if (columns.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(x.scalar_type());
    const void* px = x.data_ptr();
    void* pc = columns.data_ptr();
    enqueue(columns, "aten::im2col", {&x}, [=] { kernels::im2col(dtype, s, px, pc); });
  }
  return columns;
}

at::Tensor col2im(const at::Tensor& input, c10::IntArrayRef output_size, c10::IntArrayRef kernel_size,
                  c10::IntArrayRef dilation, c10::IntArrayRef padding, c10::IntArrayRef stride) {
  if (!floating(input)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(col2im)>::call(input, output_size, kernel_size,
                                                                                      dilation, padding, stride);
  }
  TORCH_CHECK(output_size.size() == 2, "aten::col2im: It is expected output_size equals to 2, but got size ", output_size.size());
  const bool batched = input.dim() == 3;
  TORCH_CHECK((input.dim() == 2 || batched) && input.size(-1) > 0 && input.size(-2) > 0,
              "aten::col2im: Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero "
              "dimensions for input, but got: ", input.sizes());
  kernels::PatchShape s = patch_shape("aten::col2im", "output_size=", output_size, kernel_size, dilation, padding, stride);
  const int64_t taps = s.kernel_h * s.kernel_w;
  TORCH_CHECK(input.size(-2) % taps == 0, "aten::col2im: Expected size of input's dimension 1 to be divisible by the "
              "product of kernel_size, but got input.size(1)=", input.size(-2), " and kernel_size=", kernel_size, ".");
  TORCH_CHECK(input.size(-1) == s.blocks_h() * s.blocks_w(), "aten::col2im: Given output_size=", output_size,
              ", kernel_size=", kernel_size, ", dilation=", dilation, ", padding=", padding, ", stride=", stride,
              ", expected size of input's dimension 2 to match the calculated number of sliding blocks ", s.blocks_h(),
              " * ", s.blocks_w(), " = ", s.blocks_h() * s.blocks_w(), ", but got input.size(2)=", input.size(-1), ".");
  s.batch = batched ? input.size(0) : 1;
  s.channels = input.size(-2) / taps;
  const at::Tensor columns = input.contiguous();
  std::vector<int64_t> sizes{s.channels, s.height, s.width};
  if (batched) sizes.insert(sizes.begin(), s.batch);
  at::Tensor image = at::empty(sizes, columns.options());
  if (image.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(columns.scalar_type());
    const void* pc = columns.data_ptr();
    void* pi = image.data_ptr();
    enqueue(image, "aten::col2im", {&columns}, [=] { kernels::col2im(dtype, s, pc, pi); });
  }
  return image;
}

at::Tensor& im2col_out(const at::Tensor& input, c10::IntArrayRef kernel_size, c10::IntArrayRef dilation,
                       c10::IntArrayRef padding, c10::IntArrayRef stride, at::Tensor& out) {
  return write_out(vision::im2col(input, kernel_size, dilation, padding, stride), out);
}

at::Tensor& col2im_out(const at::Tensor& input, c10::IntArrayRef output_size, c10::IntArrayRef kernel_size,
                       c10::IntArrayRef dilation, c10::IntArrayRef padding, c10::IntArrayRef stride, at::Tensor& out) {
  return write_out(vision::col2im(input, output_size, kernel_size, dilation, padding, stride), out);
}

// ---- grid_sampler_2d -----------------------------------------------------------------------
// Bilinear and nearest natively; bicubic takes the counted CPU fallback.

bool grid_sample_native(const at::Tensor& input, const at::Tensor& grid, int64_t interpolation_mode, int64_t padding_mode) {
  return (interpolation_mode == 0 || interpolation_mode == 1) && padding_mode >= 0 && padding_mode <= 2 &&
         has_kernel_dtype(input.scalar_type()) && kernels::is_floating_dtype(to_kernel_dtype(input.scalar_type())) &&
         grid.scalar_type() == input.scalar_type() && input.dim() == 4 && grid.dim() == 4;
}

kernels::GridSampleShape grid_sample_shape(const at::Tensor& input, const at::Tensor& grid) {
  TORCH_CHECK(grid.size(0) == input.size(0), "grid_sampler(): expected grid and input to have same batch size, but got input with sizes ",
              input.sizes(), " and grid with sizes ", grid.sizes());
  TORCH_CHECK(grid.size(3) == 2, "grid_sampler(): expected grid to have size 2 in last dimension, but got grid with sizes ", grid.sizes());
  return {input.size(0), input.size(1), input.size(2), input.size(3), grid.size(1), grid.size(2)};
}

at::Tensor grid_sampler_2d(const at::Tensor& input, const at::Tensor& grid, int64_t interpolation_mode, int64_t padding_mode,
                           bool align_corners) {
  if (!grid_sample_native(input, grid, interpolation_mode, padding_mode)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(grid_sampler_2d)>::call(
        input, grid, interpolation_mode, padding_mode, align_corners);
  }
  check_same_device("aten::grid_sampler_2d", input.device(), {&grid});
  const kernels::GridSampleShape shape = grid_sample_shape(input, grid);
  const at::Tensor x = input.contiguous(), g = grid.contiguous();
  at::Tensor out = at::empty({shape.batch, shape.channels, shape.out_h, shape.out_w}, input.options());
  if (out.numel() == 0) return out;
  const kernels::DType dtype = to_kernel_dtype(input.scalar_type());
  const auto interpolation = static_cast<kernels::GridInterpolation>(interpolation_mode);
  const auto padding = static_cast<kernels::GridPadding>(padding_mode);
  const void *px = x.data_ptr(), *pg = g.data_ptr();
  void* po = out.data_ptr();
  enqueue(out, "aten::grid_sampler_2d", {&x, &g}, [=] {
    kernels::grid_sample_2d(dtype, shape, interpolation, padding, align_corners, px, pg, po);
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor> grid_sampler_2d_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                                            const at::Tensor& grid, int64_t interpolation_mode,
                                                            int64_t padding_mode, bool align_corners,
                                                            std::array<bool, 2> output_mask) {
  if (!grid_sample_native(input, grid, interpolation_mode, padding_mode) || grad_output.scalar_type() != input.scalar_type()) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(grid_sampler_2d_backward)>::call(
        grad_output, input, grid, interpolation_mode, padding_mode, align_corners, output_mask);
  }
  check_same_device("aten::grid_sampler_2d_backward", input.device(), {&grid, &grad_output});
  const kernels::GridSampleShape shape = grid_sample_shape(input, grid);
  const at::Tensor go = grad_output.contiguous(), x = input.contiguous(), g = grid.contiguous();
  // As CPU PyTorch: the grid's gradient always, the input's when asked for.
  at::Tensor grad_input = output_mask[0] ? at::empty(x.sizes(), x.options()) : at::Tensor();
  at::Tensor grad_grid = at::empty(g.sizes(), g.options());
  if (grad_input.defined() && shape.out_h * shape.out_w == 0) grad_input.zero_();
  if (go.numel() == 0 && grad_grid.numel() == 0) return {grad_input, grad_grid};
  const kernels::DType dtype = to_kernel_dtype(input.scalar_type());
  const auto interpolation = static_cast<kernels::GridInterpolation>(interpolation_mode);
  const auto padding = static_cast<kernels::GridPadding>(padding_mode);
  const void *pgo = go.data_ptr(), *px = x.data_ptr(), *pg = g.data_ptr();
  void* pgi = grad_input.defined() ? grad_input.data_ptr() : nullptr;
  void* pgg = grad_grid.data_ptr();
  enqueue(grad_grid, "aten::grid_sampler_2d_backward", {&go, &x, &g}, [=] {
    kernels::grid_sample_2d_backward(dtype, shape, interpolation, padding, align_corners, pgo, px, pg, pgi, pgg);
  });
  return {grad_input, grad_grid};
}

// ---- pixel shuffle -------------------------------------------------------------------------
// A permuting copy into a result in the input's suggested memory format, as CPU allocates it
// (ATen's composite returned a contiguous result for a channels-last input). `split` views the
// source, and `order` permutes it, to the result viewed as [..., C, H, r, W, r] (shuffle) or
// [..., C, r, r, H, W] (unshuffle).
at::Tensor permuted_copy(const at::Tensor& self, const std::vector<int64_t>& split, const std::vector<int64_t>& order,
                         const std::vector<int64_t>& out_sizes, const std::vector<int64_t>& out_split) {
  const c10::MemoryFormat format = self.suggest_memory_format();
  TORCH_CHECK(format != at::MemoryFormat::ChannelsLast3d, "Unsupported memory format. Supports only ChannelsLast, Contiguous");
  at::Tensor out = at::empty(out_sizes, self.options().memory_format(format));
  out.view(out_split).copy_(self.reshape(split).permute(order));
  return out;
}

// Leading (batch) sizes of a [..., C, H, W] tensor, followed by `tail`.
std::vector<int64_t> with_batch(const at::Tensor& self, std::initializer_list<int64_t> tail) {
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end() - 3);
  sizes.insert(sizes.end(), tail);
  return sizes;
}

// The permutation that keeps the leading dims and orders the last five as `last`.
std::vector<int64_t> keep_batch(const at::Tensor& self, std::initializer_list<int64_t> last) {
  const int64_t lead = self.dim() - 3;
  std::vector<int64_t> order(lead);
  std::iota(order.begin(), order.end(), int64_t{0});
  for (int64_t d : last) order.push_back(lead + d);
  return order;
}

at::Tensor pixel_shuffle(const at::Tensor& self, int64_t r) {
  at::native::check_pixel_shuffle_shapes(self, r);
  const int64_t c = self.size(-3) / (r * r), h = self.size(-2), w = self.size(-1);
  return permuted_copy(self, with_batch(self, {c, r, r, h, w}), keep_batch(self, {0, 3, 1, 4, 2}),
                       with_batch(self, {c, h * r, w * r}), with_batch(self, {c, h, r, w, r}));
}

at::Tensor pixel_unshuffle(const at::Tensor& self, int64_t r) {
  at::native::check_pixel_unshuffle_shapes(self, r);
  const int64_t c = self.size(-3), h = self.size(-2) / r, w = self.size(-1) / r;
  return permuted_copy(self, with_batch(self, {c, h, r, w, r}), keep_batch(self, {0, 2, 4, 1, 3}),
                       with_batch(self, {c * r * r, h, w}), with_batch(self, {c, r, r, h, w}));
}

}  // namespace vision

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("pixel_shuffle", TORCH_FN(vision::pixel_shuffle));
  m.impl("pixel_unshuffle", TORCH_FN(vision::pixel_unshuffle));
  m.impl("grid_sampler_2d", TORCH_FN(vision::grid_sampler_2d));
  m.impl("grid_sampler_2d_backward", TORCH_FN(vision::grid_sampler_2d_backward));
  m.impl("im2col", TORCH_FN(vision::im2col));
  m.impl("im2col.out", TORCH_FN(vision::im2col_out));
  m.impl("col2im", TORCH_FN(vision::col2im));
  m.impl("col2im.out", TORCH_FN(vision::col2im_out));
  m.impl("upsample_nearest1d", TORCH_FN(vision::upsample_nearest1d));
  m.impl("upsample_nearest1d.out", TORCH_FN(vision::OutForm<&vision::upsample_nearest1d>::call));
  m.impl("upsample_nearest1d_backward", TORCH_FN(vision::upsample_nearest1d_backward));
  m.impl("upsample_nearest1d_backward.grad_input", TORCH_FN(vision::OutForm<&vision::upsample_nearest1d_backward>::call));
  m.impl("upsample_nearest2d", TORCH_FN(vision::upsample_nearest2d));
  m.impl("upsample_nearest2d.out", TORCH_FN(vision::OutForm<&vision::upsample_nearest2d>::call));
  m.impl("upsample_nearest2d_backward", TORCH_FN(vision::upsample_nearest2d_backward));
  m.impl("upsample_nearest2d_backward.grad_input", TORCH_FN(vision::OutForm<&vision::upsample_nearest2d_backward>::call));
  m.impl("upsample_nearest3d", TORCH_FN(vision::upsample_nearest3d));
  m.impl("upsample_nearest3d.out", TORCH_FN(vision::OutForm<&vision::upsample_nearest3d>::call));
  m.impl("upsample_nearest3d_backward", TORCH_FN(vision::upsample_nearest3d_backward));
  m.impl("upsample_nearest3d_backward.grad_input", TORCH_FN(vision::OutForm<&vision::upsample_nearest3d_backward>::call));
  m.impl("_upsample_nearest_exact1d", TORCH_FN(vision::upsample_nearest_exact1d));
  m.impl("_upsample_nearest_exact1d.out", TORCH_FN(vision::OutForm<&vision::upsample_nearest_exact1d>::call));
  m.impl("_upsample_nearest_exact1d_backward", TORCH_FN(vision::upsample_nearest_exact1d_backward));
  m.impl("_upsample_nearest_exact1d_backward.grad_input", TORCH_FN(vision::OutForm<&vision::upsample_nearest_exact1d_backward>::call));
  m.impl("_upsample_nearest_exact2d", TORCH_FN(vision::upsample_nearest_exact2d));
  m.impl("_upsample_nearest_exact2d.out", TORCH_FN(vision::OutForm<&vision::upsample_nearest_exact2d>::call));
  m.impl("_upsample_nearest_exact2d_backward", TORCH_FN(vision::upsample_nearest_exact2d_backward));
  m.impl("_upsample_nearest_exact2d_backward.grad_input", TORCH_FN(vision::OutForm<&vision::upsample_nearest_exact2d_backward>::call));
  m.impl("_upsample_nearest_exact3d", TORCH_FN(vision::upsample_nearest_exact3d));
  m.impl("_upsample_nearest_exact3d.out", TORCH_FN(vision::OutForm<&vision::upsample_nearest_exact3d>::call));
  m.impl("_upsample_nearest_exact3d_backward", TORCH_FN(vision::upsample_nearest_exact3d_backward));
  m.impl("_upsample_nearest_exact3d_backward.grad_input", TORCH_FN(vision::OutForm<&vision::upsample_nearest_exact3d_backward>::call));
  m.impl("upsample_linear1d", TORCH_FN(vision::upsample_linear1d));
  m.impl("upsample_linear1d.out", TORCH_FN(vision::OutForm<&vision::upsample_linear1d>::call));
  m.impl("upsample_linear1d_backward", TORCH_FN(vision::upsample_linear1d_backward));
  m.impl("upsample_linear1d_backward.grad_input", TORCH_FN(vision::OutForm<&vision::upsample_linear1d_backward>::call));
  m.impl("_upsample_bilinear2d_aa", TORCH_FN(vision::upsample_bilinear2d_aa));
  m.impl("_upsample_bilinear2d_aa.out", TORCH_FN(vision::OutForm<&vision::upsample_bilinear2d_aa>::call));
  m.impl("_upsample_bilinear2d_aa_backward", TORCH_FN(vision::upsample_bilinear2d_aa_backward));
  m.impl("_upsample_bilinear2d_aa_backward.grad_input",
         TORCH_FN(vision::OutForm<&vision::upsample_bilinear2d_aa_backward>::call));
  m.impl("_upsample_bicubic2d_aa", TORCH_FN(vision::upsample_bicubic2d_aa));
  m.impl("_upsample_bicubic2d_aa.out", TORCH_FN(vision::OutForm<&vision::upsample_bicubic2d_aa>::call));
  m.impl("_upsample_bicubic2d_aa_backward", TORCH_FN(vision::upsample_bicubic2d_aa_backward));
  m.impl("_upsample_bicubic2d_aa_backward.grad_input",
         TORCH_FN(vision::OutForm<&vision::upsample_bicubic2d_aa_backward>::call));
  m.impl("upsample_bilinear2d", TORCH_FN(vision::upsample_bilinear2d));
  m.impl("upsample_bilinear2d.out", TORCH_FN(vision::OutForm<&vision::upsample_bilinear2d>::call));
  m.impl("upsample_bilinear2d_backward", TORCH_FN(vision::upsample_bilinear2d_backward));
  m.impl("upsample_bilinear2d_backward.grad_input", TORCH_FN(vision::OutForm<&vision::upsample_bilinear2d_backward>::call));
  m.impl("upsample_bicubic2d", TORCH_FN(vision::upsample_bicubic2d));
  m.impl("upsample_bicubic2d.out", TORCH_FN(vision::OutForm<&vision::upsample_bicubic2d>::call));
  m.impl("upsample_bicubic2d_backward", TORCH_FN(vision::upsample_bicubic2d_backward));
  m.impl("upsample_bicubic2d_backward.grad_input", TORCH_FN(vision::OutForm<&vision::upsample_bicubic2d_backward>::call));
  m.impl("upsample_trilinear3d", TORCH_FN(vision::upsample_trilinear3d));
  m.impl("upsample_trilinear3d.out", TORCH_FN(vision::OutForm<&vision::upsample_trilinear3d>::call));
  m.impl("upsample_trilinear3d_backward", TORCH_FN(vision::upsample_trilinear3d_backward));
  m.impl("upsample_trilinear3d_backward.grad_input", TORCH_FN(vision::OutForm<&vision::upsample_trilinear3d_backward>::call));
}

}  // namespace torchneuron::aten
