// 3-D adaptive average and max pooling on neuron, with their backward ops, composed of the 2-D
// ones (pool_ops.cpp): an adaptive window is a box, so pooling over (height, width) for each depth
// and then over depth (the pooled pixels as the width of a 2-D pooling that keeps it) covers the
// same box; a max's index is the depth the second step picked times H * W plus the position the
// first step recorded at that depth. Half types compute in float32, rounded once at the end.
#include <ATen/native/Resize.h>
#include <ATen/ops/_adaptive_avg_pool2d.h>
#include <ATen/ops/_adaptive_avg_pool2d_backward.h>
#include <ATen/ops/adaptive_max_pool2d.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "aten/device/neuron_tensor.h"
#include "aten/ops/vision_common.h"

namespace torchneuron::aten {
namespace pool3d {

using vision::floating;
using vision::write_out;

// A [.., D, H, W] tensor's leading dims as one plane count P.
struct Volume {
  int64_t planes, depth, height, width;
};

Volume check_volume(const char* name, const at::Tensor& input, c10::IntArrayRef output_size) {
  TORCH_CHECK(output_size.size() == 3, name, ": output_size must be 3");
  TORCH_CHECK(input.dim() == 4 || input.dim() == 5, name, "(): Expected 4D or 5D tensor, but got ", input.sizes());
  for (int64_t d = 1; d < input.dim(); ++d) {
    TORCH_CHECK(input.size(d) > 0, name, "(): Expected input to have non-zero size for non-batch dimensions, but "
                "input has sizes ", input.sizes(), " with dimension ", d, " being empty");
  }
  for (int64_t d = 0; d < 3; ++d) {
    TORCH_CHECK(output_size[d] >= 0, name, ": elements of output_size must be greater than or equal to 0 but received {",
                output_size[0], ", ", output_size[1], ", ", output_size[2], "}");
  }
  const int64_t planes = input.dim() == 5 ? input.size(0) * input.size(1) : input.size(0);
  return {planes, input.size(-3), input.size(-2), input.size(-1)};
}

std::vector<int64_t> pooled_sizes(const at::Tensor& input, c10::IntArrayRef output_size) {
  std::vector<int64_t> sizes(input.sizes().begin(), input.sizes().end() - 3);
  sizes.insert(sizes.end(), output_size.begin(), output_size.end());
  return sizes;
}

at::Tensor in_float(const at::Tensor& t) {
  return t.scalar_type() == at::kDouble ? t.contiguous() : t.to(at::kFloat).contiguous();
}

at::Tensor adaptive_avg_pool3d(const at::Tensor& input, c10::IntArrayRef output_size) {
  const Volume v = check_volume("adaptive_avg_pool3d", input, output_size);
  TORCH_CHECK(floating(input), "adaptive_avg_pool3d: expected a floating input, got ", input.scalar_type());
  if (v.planes == 0 || output_size[0] * output_size[1] * output_size[2] == 0) {
    return at::zeros(pooled_sizes(input, output_size), input.options());
  }
  const int64_t pixels = output_size[1] * output_size[2];
  const at::Tensor slices =
      at::_adaptive_avg_pool2d(in_float(input).view({v.planes * v.depth, v.height, v.width}), {output_size[1], output_size[2]});
  const at::Tensor pooled = at::_adaptive_avg_pool2d(slices.view({v.planes, v.depth, pixels}), {output_size[0], pixels});
  return pooled.view(pooled_sizes(input, output_size)).to(input.scalar_type());
}

at::Tensor adaptive_avg_pool3d_backward(const at::Tensor& grad_out, const at::Tensor& input) {
  check_same_device("aten::_adaptive_avg_pool3d_backward", input.device(), {&grad_out});
  TORCH_CHECK(floating(input) && grad_out.dim() == input.dim(),
              "adaptive_avg_pool3d_backward: expected a floating input and a grad_output of the same rank, got ",
              input.scalar_type(), " ", input.sizes(), " and ", grad_out.sizes());
  for (int64_t d = 1; d < grad_out.dim(); ++d) {
    TORCH_CHECK(grad_out.size(d) > 0, "adaptive_avg_pool3d_backward(): Expected grad_output to have non-zero size for "
                "non-batch dimensions, but grad_output has sizes ", grad_out.sizes(), " with dimension ", d, " being empty");
  }
  const Volume v = check_volume("adaptive_avg_pool3d_backward", input, grad_out.sizes().slice(grad_out.dim() - 3));
  if (v.planes == 0) return at::zeros(input.sizes(), input.options());
  const int64_t out_h = grad_out.size(-2), out_w = grad_out.size(-1), pixels = out_h * out_w;
  const at::Tensor go = in_float(grad_out).view({v.planes, grad_out.size(-3), pixels});
  const at::Tensor float_input = in_float(input);
  // The second step's input ([P, D, pixels]) and the first's ([P * D, H, W]) only give shapes.
  const at::Tensor grad_slices = at::_adaptive_avg_pool2d_backward(
      go, at::empty({v.planes, v.depth, pixels}, float_input.options()));
  const at::Tensor grad_in = at::_adaptive_avg_pool2d_backward(
      grad_slices.view({v.planes * v.depth, out_h, out_w}), float_input.view({v.planes * v.depth, v.height, v.width}));
  return grad_in.view(input.sizes()).to(input.scalar_type());
}

at::Tensor& adaptive_avg_pool3d_out(const at::Tensor& input, c10::IntArrayRef output_size, at::Tensor& out) {
  return write_out(pool3d::adaptive_avg_pool3d(input, output_size), out);
}

at::Tensor& adaptive_avg_pool3d_backward_out(const at::Tensor& grad_out, const at::Tensor& input, at::Tensor& out) {
  return write_out(pool3d::adaptive_avg_pool3d_backward(grad_out, input), out);
}

std::tuple<at::Tensor, at::Tensor> adaptive_max_pool3d(const at::Tensor& input, c10::IntArrayRef output_size) {
  const Volume v = check_volume("adaptive_max_pool3d", input, output_size);
  TORCH_CHECK(floating(input), "adaptive_max_pool3d: expected a floating input, got ", input.scalar_type());
  const std::vector<int64_t> sizes = pooled_sizes(input, output_size);
  if (v.planes == 0 || output_size[0] * output_size[1] * output_size[2] == 0) {
    return {at::zeros(sizes, input.options()), at::zeros(sizes, input.options().dtype(at::kLong))};
  }
  const int64_t pixels = output_size[1] * output_size[2];
  // The 2-D max keeps its input's values exactly: no widening needed.
  auto [slice_max, slice_index] = at::adaptive_max_pool2d(input.contiguous().view({v.planes * v.depth, v.height, v.width}),
                                                           {output_size[1], output_size[2]});
  auto [volume_max, depth_index] =
      at::adaptive_max_pool2d(slice_max.view({v.planes, v.depth, pixels}), {output_size[0], pixels});
  // depth_index is d * pixels + j for column j: the depth d, then that depth's in-slice position.
  const at::Tensor depth = depth_index.div(pixels, "floor");
  const at::Tensor in_slice = slice_index.view({v.planes, v.depth, pixels}).gather(1, depth);
  const at::Tensor index = depth.mul(v.height * v.width).add(in_slice);
  return {volume_max.view(sizes), index.view(sizes)};
}

// Each output's gradient added at the input position its index records.
at::Tensor adaptive_max_pool3d_backward(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& indices) {
  check_same_device("aten::adaptive_max_pool3d_backward", input.device(), {&grad_out, &indices});
  TORCH_CHECK(floating(input) && grad_out.dim() == input.dim() && grad_out.sizes() == indices.sizes(),
              "adaptive_max_pool3d_backward: expected grad_output and indices of the same sizes and the input's rank, "
              "got ", grad_out.sizes(), " and ", indices.sizes(), " for input ", input.sizes());
  const Volume v = check_volume("adaptive_max_pool3d_backward", input, grad_out.sizes().slice(grad_out.dim() - 3));
  at::Tensor grad_in = at::zeros({v.planes, v.depth * v.height * v.width}, input.options());
  if (grad_out.numel() > 0) {
    grad_in.scatter_add_(1, indices.reshape({v.planes, -1}), grad_out.to(input.scalar_type()).reshape({v.planes, -1}));
  }
  return grad_in.view(input.sizes());
}

at::Tensor& adaptive_max_pool3d_backward_out(const at::Tensor& grad_out, const at::Tensor& input,
                                             const at::Tensor& indices, at::Tensor& grad_in) {
  return write_out(pool3d::adaptive_max_pool3d_backward(grad_out, input, indices), grad_in);
}

}  // namespace pool3d

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_adaptive_avg_pool3d", TORCH_FN(pool3d::adaptive_avg_pool3d));
  m.impl("_adaptive_avg_pool3d.out", TORCH_FN(pool3d::adaptive_avg_pool3d_out));
  m.impl("_adaptive_avg_pool3d_backward", TORCH_FN(pool3d::adaptive_avg_pool3d_backward));
  m.impl("_adaptive_avg_pool3d_backward.out", TORCH_FN(pool3d::adaptive_avg_pool3d_backward_out));
  m.impl("adaptive_max_pool3d", TORCH_FN(pool3d::adaptive_max_pool3d));
  m.impl("adaptive_max_pool3d.out", TORCH_FN(vision::OutForm<&pool3d::adaptive_max_pool3d>::call));
  m.impl("adaptive_max_pool3d_backward", TORCH_FN(pool3d::adaptive_max_pool3d_backward));
  m.impl("adaptive_max_pool3d_backward.grad_input", TORCH_FN(pool3d::adaptive_max_pool3d_backward_out));
}

}  // namespace torchneuron::aten
