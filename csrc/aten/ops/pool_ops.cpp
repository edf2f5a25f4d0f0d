// Pooling on neuron: 2-D and 3-D max / average pooling and adaptive average / max pooling
// (2-D), with their backward ops and out= forms; max unpooling (2-D, 3-D), composed. The host
// checks arguments and computes output sizes as CPU PyTorch does; csrc/kernels/pool runs on the
// queue over contiguous NC(D)HW buffers.
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_adaptive_avg_pool2d_ops.h>
#include <ATen/ops/adaptive_max_pool2d_ops.h>
#include <ATen/ops/avg_pool2d_ops.h>
#include <ATen/ops/avg_pool3d_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/max_pool2d_with_indices_ops.h>
#include <ATen/ops/max_pool3d_with_indices_ops.h>
#include <ATen/ops/scatter.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "aten/device/neuron_tensor.h"
#include "aten/fallback/cpu_fallback.h"
#include "aten/ops/index_checks.h"
#include "aten/ops/vision_common.h"
#include "kernels/pool.h"

namespace torchneuron::aten {
namespace vision {

// ---- pooling -------------------------------------------------------------------------------

namespace {

// One value or one per spatial dim, as the pooling ops accept (stride empty means the kernel size).
int64_t pick(c10::IntArrayRef values, int64_t d, const char* what, int dims) {
  TORCH_CHECK(values.size() == 1 || static_cast<int>(values.size()) == dims, "pooling: ", what,
              " must either be a single int, or a tuple of ", dims == 2 ? "two" : "three", " ints");
  return values.size() == 1 ? values[0] : values[d];
}

int64_t pooled_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// Pooling input [N, C, (D,) H, W] or [C, (D,) H, W] with `dims` (2 or 3) spatial dims: the
// window, the shape (depth 1 for 2-D) and the output sizes, with CPU PyTorch's checks.
struct PoolPlan {
  kernels::PoolWindow window;
  kernels::PoolShape shape;
  std::vector<int64_t> out_sizes;
};

PoolPlan plan_pool(const char* op, int dims, const at::Tensor& input, c10::IntArrayRef kernel, c10::IntArrayRef stride,
                   c10::IntArrayRef padding, c10::IntArrayRef dilation, bool ceil_mode) {
  bool nonempty = input.dim() == dims + 1 || input.dim() == dims + 2;
  for (int64_t d = input.dim() - dims - 1; nonempty && d < input.dim(); ++d) nonempty = input.size(d) > 0;
  TORCH_CHECK(nonempty, op, ": Expected ", dims + 1, "D or ", dims + 2,
              "D (batch mode) tensor with optional 0 dim batch size for input, but got: ", input.sizes());
  PoolPlan plan;
  kernels::PoolWindow& k = plan.window;
  int64_t* const fields[4][3] = {{&k.kernel_d, &k.kernel_h, &k.kernel_w}, {&k.stride_d, &k.stride_h, &k.stride_w},
                                 {&k.pad_d, &k.pad_h, &k.pad_w}, {&k.dilation_d, &k.dilation_h, &k.dilation_w}};
  for (int d = 0; d < dims; ++d) {
    const int axis = 3 - dims + d;  // 2-D ops leave the depth fields at their defaults
    *fields[0][axis] = pick(kernel, d, "kernel_size", dims);
    *fields[1][axis] = stride.empty() ? *fields[0][axis] : pick(stride, d, "stride", dims);
    *fields[2][axis] = pick(padding, d, "padding", dims);
    *fields[3][axis] = pick(dilation, d, "dilation", dims);
  }
  const std::string t = dims == 3 ? "T: " + std::to_string(k.kernel_d) + " " : "";
  TORCH_CHECK(k.kernel_d > 0 && k.kernel_h > 0 && k.kernel_w > 0, op, ": kernel size should be greater than zero, but got k",
              t, "kH: ", k.kernel_h, " kW: ", k.kernel_w);
  TORCH_CHECK(k.stride_d > 0 && k.stride_h > 0 && k.stride_w > 0, op, ": stride should not be zero; it must be greater than zero, but got ",
              dims == 3 ? "dT: " + std::to_string(k.stride_d) + " " : "", "dH: ", k.stride_h, " dW: ", k.stride_w);
  TORCH_CHECK(k.dilation_d > 0 && k.dilation_h > 0 && k.dilation_w > 0, op, ": dilation should be greater than zero, but got ",
              dims == 3 ? "dilationT: " + std::to_string(k.dilation_d) + " " : "", "dilationH: ", k.dilation_h,
              " dilationW: ", k.dilation_w);
  for (int axis = 3 - dims; axis < 3; ++axis) {
    const int64_t kernel_size = *fields[0][axis], pad = *fields[2][axis], dilation_size = *fields[3][axis];
    TORCH_CHECK(pad >= 0 && pad <= ((kernel_size - 1) * dilation_size + 1) / 2, op,
                ": pad should be at most half of effective kernel size, but got pad=", pad, ", kernel_size=", kernel_size,
                " and dilation=", dilation_size);
  }
  kernels::PoolShape& s = plan.shape;
  s.in_d = dims == 3 ? input.size(-3) : 1;
  s.in_h = input.size(-2);
  s.in_w = input.size(-1);
  s.planes = input.numel() / (s.in_d * s.in_h * s.in_w);
  s.out_d = pooled_size(s.in_d, k.kernel_d, k.pad_d, k.stride_d, k.dilation_d, ceil_mode);
  s.out_h = pooled_size(s.in_h, k.kernel_h, k.pad_h, k.stride_h, k.dilation_h, ceil_mode);
  s.out_w = pooled_size(s.in_w, k.kernel_w, k.pad_w, k.stride_w, k.dilation_w, ceil_mode);
  const std::string depth_in = dims == 3 ? std::to_string(s.in_d) + "x" : "";
  const std::string depth_out = dims == 3 ? std::to_string(s.out_d) + "x" : "";
  const int64_t channels = input.size(-dims - 1);
  TORCH_CHECK(s.out_d > 0 && s.out_h > 0 && s.out_w > 0, "Given input size: (", channels, "x", depth_in, s.in_h, "x", s.in_w,
              "). Calculated output size: (", channels, "x", depth_out, s.out_h, "x", s.out_w, "). Output size is too small");
  plan.out_sizes.assign(input.sizes().begin(), input.sizes().end());
  if (dims == 3) plan.out_sizes[input.dim() - 3] = s.out_d;
  plan.out_sizes[input.dim() - 2] = s.out_h;
  plan.out_sizes[input.dim() - 1] = s.out_w;
  return plan;
}

// max_pool{2,3}d_with_indices and avg_pool{2,3}d, forward and backward, for `dims` spatial dims.
std::tuple<at::Tensor, at::Tensor> max_pool(const char* op, int dims, const at::Tensor& input, c10::IntArrayRef kernel,
                                            c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                            bool ceil_mode) {
  const PoolPlan plan = plan_pool(op, dims, input, kernel, stride, padding, dilation, ceil_mode);
  TORCH_CHECK(dims != 3 || input.suggest_memory_format() != at::MemoryFormat::ChannelsLast,
              "Unsupported memory format. Supports only ChannelsLast3d, Contiguous");
  const at::Tensor x = input.contiguous();
  at::Tensor out = at::empty(plan.out_sizes, x.options());
  at::Tensor indices = at::empty(plan.out_sizes, x.options().dtype(at::kLong));
  if (out.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(x.scalar_type());
    const void* px = x.data_ptr();
    void* po = out.data_ptr();
    int64_t* pi = indices.data_ptr<int64_t>();
    const auto shape = plan.shape;
    const auto window = plan.window;
    enqueue(out, op, {&x, &indices}, [=] { kernels::max_pool(dtype, shape, window, px, po, pi); });
  }
  return {like_input_format(out, input), like_input_format(indices, input)};
}

at::Tensor max_pool_backward(const char* op, int dims, const at::Tensor& grad_out, const at::Tensor& input,
                             c10::IntArrayRef kernel, c10::IntArrayRef stride, c10::IntArrayRef padding,
                             c10::IntArrayRef dilation, bool ceil_mode, const at::Tensor& indices) {
  check_same_device(op, input.device(), {&grad_out, &indices});
  TORCH_CHECK(floating(input), op, ": expected a floating input, got ", input.scalar_type());
  const PoolPlan plan = plan_pool(op, dims, input, kernel, stride, padding, dilation, ceil_mode);
  TORCH_CHECK(grad_out.sizes().equals(plan.out_sizes) && indices.sizes().equals(plan.out_sizes), op,
              ": expected grad_output and indices of size ", plan.out_sizes, ", got ", grad_out.sizes(), " and ",
              indices.sizes());
  const at::Tensor go = grad_out.to(input.scalar_type()).contiguous(), idx = indices.contiguous();
  at::Tensor grad_in = at::empty(input.sizes(), go.options());
  if (grad_in.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(go.scalar_type());
    const void* pgo = go.data_ptr();
    const int64_t* pi = idx.data_ptr<int64_t>();
    void* pgi = grad_in.data_ptr();
    const auto shape = plan.shape;
    enqueue(grad_in, op, {&go, &idx}, [=] { kernels::max_pool_backward(dtype, shape, pgo, pi, pgi); });
  }
  return like_input_format(grad_in, input);
}

at::Tensor avg_pool(const char* op, int dims, const at::Tensor& input, c10::IntArrayRef kernel, c10::IntArrayRef stride,
                    c10::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                    std::optional<int64_t> divisor_override) {
  TORCH_CHECK(!divisor_override.has_value() || *divisor_override != 0, "divisor must be not zero");
  const int64_t ones[] = {1};
  const PoolPlan plan = plan_pool(op, dims, input, kernel, stride, padding, ones, ceil_mode);
  const at::Tensor x = input.contiguous();
  at::Tensor out = at::empty(plan.out_sizes, x.options());
  if (out.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(x.scalar_type());
    const void* px = x.data_ptr();
    void* po = out.data_ptr();
    const auto shape = plan.shape;
    const auto window = plan.window;
    const int64_t divisor = divisor_override.value_or(0);
    enqueue(out, op, {&x}, [=] { kernels::avg_pool(dtype, shape, window, count_include_pad, divisor, px, po); });
  }
  // CPU's avg_pool3d (forward and backward) writes contiguous results for any input layout.
  return dims == 3 ? out : like_input_format(out, input);
}

at::Tensor avg_pool_backward(const char* op, int dims, const at::Tensor& grad_out, const at::Tensor& input,
                             c10::IntArrayRef kernel, c10::IntArrayRef stride, c10::IntArrayRef padding, bool ceil_mode,
                             bool count_include_pad, std::optional<int64_t> divisor_override) {
  check_same_device(op, input.device(), {&grad_out});
  TORCH_CHECK(floating(input), op, ": expected a floating input, got ", input.scalar_type());
  TORCH_CHECK(!divisor_override.has_value() || *divisor_override != 0, "divisor must be not zero");
  const int64_t ones[] = {1};
  const PoolPlan plan = plan_pool(op, dims, input, kernel, stride, padding, ones, ceil_mode);
  TORCH_CHECK(grad_out.sizes().equals(plan.out_sizes), op, ": expected grad_output of size ", plan.out_sizes, ", got ",
              grad_out.sizes());
  const at::Tensor go = grad_out.to(input.scalar_type()).contiguous();
  at::Tensor grad_in = at::empty(input.sizes(), go.options());
  if (grad_in.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(go.scalar_type());
    const void* pgo = go.data_ptr();
    void* pgi = grad_in.data_ptr();
    const auto shape = plan.shape;
    const auto window = plan.window;
    const int64_t divisor = divisor_override.value_or(0);
    enqueue(grad_in, op, {&go},
            [=] { kernels::avg_pool_backward(dtype, shape, window, count_include_pad, divisor, pgo, pgi); });
  }
  return dims == 3 ? grad_in : like_input_format(grad_in, input);
}

kernels::PlaneShape plane_shape(const at::Tensor& input, int64_t out_h, int64_t out_w) {
  kernels::PlaneShape s;
  s.in_h = input.size(-2);
  s.in_w = input.size(-1);
  s.planes = s.in_h * s.in_w == 0 ? 0 : input.numel() / (s.in_h * s.in_w);
  s.out_h = out_h;
  s.out_w = out_w;
  return s;
}

std::vector<int64_t> with_spatial(const at::Tensor& input, int64_t h, int64_t w) {
  std::vector<int64_t> sizes(input.sizes().begin(), input.sizes().end());
  sizes[sizes.size() - 2] = h;
  sizes[sizes.size() - 1] = w;
  return sizes;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> max_pool2d(const at::Tensor& input, c10::IntArrayRef kernel, c10::IntArrayRef stride,
                                              c10::IntArrayRef padding, c10::IntArrayRef dilation, bool ceil_mode) {
  if (!floating(input)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(max_pool2d_with_indices)>::call(
        input, kernel, stride, padding, dilation, ceil_mode);
  }
  return max_pool("aten::max_pool2d_with_indices", 2, input, kernel, stride, padding, dilation, ceil_mode);
}

std::tuple<at::Tensor, at::Tensor> max_pool3d(const at::Tensor& input, c10::IntArrayRef kernel, c10::IntArrayRef stride,
                                              c10::IntArrayRef padding, c10::IntArrayRef dilation, bool ceil_mode) {
  if (!floating(input)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(max_pool3d_with_indices)>::call(
        input, kernel, stride, padding, dilation, ceil_mode);
  }
  return max_pool("aten::max_pool3d_with_indices", 3, input, kernel, stride, padding, dilation, ceil_mode);
}

at::Tensor max_pool2d_backward(const at::Tensor& grad_out, const at::Tensor& input, c10::IntArrayRef kernel,
                               c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                               bool ceil_mode, const at::Tensor& indices) {
  return max_pool_backward("aten::max_pool2d_with_indices_backward", 2, grad_out, input, kernel, stride, padding, dilation,
                           ceil_mode, indices);
}

at::Tensor max_pool3d_backward(const at::Tensor& grad_out, const at::Tensor& input, c10::IntArrayRef kernel,
                               c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                               bool ceil_mode, const at::Tensor& indices) {
  return max_pool_backward("aten::max_pool3d_with_indices_backward", 3, grad_out, input, kernel, stride, padding, dilation,
                           ceil_mode, indices);
}

at::Tensor avg_pool2d(const at::Tensor& input, c10::IntArrayRef kernel, c10::IntArrayRef stride, c10::IntArrayRef padding,
                      bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  if (!floating(input)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(avg_pool2d)>::call(
        input, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
  }
  return avg_pool("aten::avg_pool2d", 2, input, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
}

at::Tensor avg_pool3d(const at::Tensor& input, c10::IntArrayRef kernel, c10::IntArrayRef stride, c10::IntArrayRef padding,
                      bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  if (!floating(input)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(avg_pool3d)>::call(
        input, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
  }
  return avg_pool("aten::avg_pool3d", 3, input, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
}

at::Tensor avg_pool2d_backward(const at::Tensor& grad_out, const at::Tensor& input, c10::IntArrayRef kernel,
                               c10::IntArrayRef stride, c10::IntArrayRef padding, bool ceil_mode,
                               bool count_include_pad, std::optional<int64_t> divisor_override) {
  return avg_pool_backward("aten::avg_pool2d_backward", 2, grad_out, input, kernel, stride, padding, ceil_mode,
                           count_include_pad, divisor_override);
}

at::Tensor avg_pool3d_backward(const at::Tensor& grad_out, const at::Tensor& input, c10::IntArrayRef kernel,
                               c10::IntArrayRef stride, c10::IntArrayRef padding, bool ceil_mode,
                               bool count_include_pad, std::optional<int64_t> divisor_override) {
  return avg_pool_backward("aten::avg_pool3d_backward", 3, grad_out, input, kernel, stride, padding, ceil_mode,
                           count_include_pad, divisor_override);
}

at::Tensor adaptive_avg_pool2d(const at::Tensor& input, c10::IntArrayRef output_size) {
  if (!floating(input)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_adaptive_avg_pool2d)>::call(
        input, output_size);
  }
  TORCH_CHECK(output_size.size() == 2, "adaptive_avg_pool2d: output_size must be 2");
  TORCH_CHECK((input.dim() == 3 || input.dim() == 4) && input.size(-1) > 0 && input.size(-2) > 0,
              "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got ", input.sizes());
  TORCH_CHECK(output_size[0] >= 0 && output_size[1] >= 0, "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but received {",
              output_size[0], ", ", output_size[1], "}");
  const at::Tensor x = input.contiguous();
  at::Tensor out = at::empty(with_spatial(x, output_size[0], output_size[1]), x.options());
  if (out.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(x.scalar_type());
    const kernels::PlaneShape shape = plane_shape(x, output_size[0], output_size[1]);
    const void* px = x.data_ptr();
    void* po = out.data_ptr();
    enqueue(out, "aten::_adaptive_avg_pool2d", {&x}, [=] { kernels::adaptive_avg_pool2d(dtype, shape, px, po); });
  }
  return like_input_layout(out, input);
}

// CPU PyTorch's check on an adaptive pooling's output gradient (an output_size of 0).
void check_adaptive_grad_nonempty(const char* op, const at::Tensor& grad_out) {
  for (int64_t i = 1; i < grad_out.dim(); ++i) {
    TORCH_CHECK(grad_out.size(i) > 0, op, "(): Expected grad_output to have non-zero size for non-batch dimensions, ",
                "but grad_output has sizes ", grad_out.sizes(), " with dimension ", i, " being empty");
  }
}

at::Tensor adaptive_avg_pool2d_backward(const at::Tensor& grad_out, const at::Tensor& input) {
  check_same_device("aten::_adaptive_avg_pool2d_backward", input.device(), {&grad_out});
  check_adaptive_grad_nonempty("adaptive_avg_pool2d_backward", grad_out);
  TORCH_CHECK(floating(input) && grad_out.dim() == input.dim(), "adaptive_avg_pool2d_backward: expected a floating input and a grad_output of the same rank, got ",
              input.scalar_type(), " ", input.sizes(), " and ", grad_out.sizes());
  const at::Tensor go = grad_out.to(input.scalar_type()).contiguous();
  at::Tensor grad_in = at::empty(input.sizes(), go.options());
  if (grad_in.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(go.scalar_type());
    const kernels::PlaneShape shape = plane_shape(input, go.size(-2), go.size(-1));
    const void* pgo = go.data_ptr();
    void* pgi = grad_in.data_ptr();
    enqueue(grad_in, "aten::_adaptive_avg_pool2d_backward", {&go},
            [=] { kernels::adaptive_avg_pool2d_backward(dtype, shape, pgo, pgi); });
  }
  return like_input_layout(grad_in, input);
}

std::tuple<at::Tensor, at::Tensor> adaptive_max_pool2d(const at::Tensor& input, c10::IntArrayRef output_size) {
  if (!floating(input)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(adaptive_max_pool2d)>::call(input, output_size);
  }
  TORCH_CHECK(output_size.size() == 2, "adaptive_max_pool2d(): internal error: output_size.size() must be 2");
  TORCH_CHECK(input.dim() == 3 || input.dim() == 4, "adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: ",
              input.sizes());
  for (int64_t d = 1; d < input.dim(); ++d) {
    TORCH_CHECK(input.size(d) > 0, "adaptive_max_pool2d(): Expected input to have non-zero size for non-batch dimensions, "
                "but input has sizes ", input.sizes(), " with dimension ", d, " being empty");
  }
  const at::Tensor x = input.contiguous();
  const std::vector<int64_t> sizes = with_spatial(x, output_size[0], output_size[1]);
  at::Tensor out = at::empty(sizes, x.options()), indices = at::empty(sizes, x.options().dtype(at::kLong));
  if (out.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(x.scalar_type());
    const kernels::PlaneShape shape = plane_shape(x, output_size[0], output_size[1]);
    const void* px = x.data_ptr();
    void* po = out.data_ptr();
    int64_t* pi = indices.data_ptr<int64_t>();
    enqueue(out, "aten::adaptive_max_pool2d", {&x, &indices},
            [=] { kernels::adaptive_max_pool2d(dtype, shape, px, po, pi); });
  }
  return {like_input_layout(out, input), like_input_layout(indices, input)};
}

// The gradient goes to the recorded positions, as max_pool2d's does.
at::Tensor adaptive_max_pool2d_backward(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& indices) {
  check_same_device("aten::adaptive_max_pool2d_backward", input.device(), {&grad_out, &indices});
  check_adaptive_grad_nonempty("adaptive_max_pool2d_backward", grad_out);
  TORCH_CHECK(floating(input), "adaptive_max_pool2d_backward: expected a floating input, got ", input.scalar_type());
  TORCH_CHECK(grad_out.dim() == input.dim() && grad_out.sizes() == indices.sizes(),
              "adaptive_max_pool2d_backward: expected grad_output and indices of the same sizes and the input's rank, got ",
              grad_out.sizes(), " and ", indices.sizes(), " for input ", input.sizes());
  const at::Tensor go = grad_out.to(input.scalar_type()).contiguous(), idx = indices.contiguous();
  at::Tensor grad_in = at::empty(input.sizes(), go.options());
  if (grad_in.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(go.scalar_type());
    kernels::PoolShape shape;  // max pooling's backward: a scatter to the recorded positions
    shape.in_h = input.size(-2);
    shape.in_w = input.size(-1);
    shape.planes = input.numel() / (shape.in_h * shape.in_w);
    shape.out_h = go.size(-2);
    shape.out_w = go.size(-1);
    const void* pgo = go.data_ptr();
    const int64_t* pi = idx.data_ptr<int64_t>();
    void* pgi = grad_in.data_ptr();
    enqueue(grad_in, "aten::adaptive_max_pool2d_backward", {&go, &idx},
            [=] { kernels::max_pool_backward(dtype, shape, pgo, pi, pgi); });
  }
  return like_input_layout(grad_in, input);
}

at::Tensor& adaptive_max_pool2d_backward_out(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& indices,
                                             at::Tensor& grad_in) {
  return write_out(vision::adaptive_max_pool2d_backward(grad_out, input, indices), grad_in);
}

// ---- max unpooling: each value written to the position its index records ----------------------

namespace {

at::Tensor max_unpool(const char* name, const at::Tensor& input, const at::Tensor& indices, c10::IntArrayRef output_size,
                      c10::MemoryFormat format) {
  const int64_t dims = static_cast<int64_t>(output_size.size());
  check_same_device(name, input.device(), {&indices});
  TORCH_CHECK(indices.scalar_type() == at::kLong, "elements in indices should be type int64 but got: ", indices.scalar_type());
  TORCH_CHECK(input.dim() == dims + 1 || input.dim() == dims + 2, "Input to ", name, " should be a ", dims + 1, "d or ",
              dims + 2, "d Tensor, but got a tensor with ", input.dim(), " dimensions.");
  TORCH_CHECK(input.sizes() == indices.sizes(), "Expected shape of indices to be same as that of the input tensor (",
              input.sizes(), ") but got indices tensor with shape: ", indices.sizes());
  for (int64_t d = 1; d < input.dim(); ++d) {
    TORCH_CHECK(input.size(d) > 0, name, "_forward_out_cpu(): Expected input to have non-zero size for non-batch "
                "dimensions, but got ", input.sizes(), " with dimension ", d, " being empty.");
  }
  std::vector<int64_t> sizes(input.sizes().begin(), input.sizes().end() - dims);
  int64_t volume = 1;
  for (int64_t d = 0; d < dims; ++d) {
    TORCH_CHECK(output_size[d] >= 0, name, "(): output_size must contain non-negative spatial dimensions, but got output_size[",
                d, "]=", output_size[d]);
    sizes.push_back(output_size[d]);
    volume *= output_size[d];
  }
  at::Tensor out = at::zeros(sizes, input.options());
  if (input.numel() > 0) {
    if (const auto bad = first_out_of_range(indices, 0, volume)) {
      std::string size = std::to_string(output_size[0]);
      for (int64_t d = 1; d < dims; ++d) {
        size += 'x';
        size += std::to_string(output_size[d]);
      }
      TORCH_CHECK(false, "Found an invalid max index: ", bad->value, " (output volumes are of size ", size);
    }
    int64_t planes = 1;  // the leading (batch and channel) dims
    for (int64_t d = 0; d < input.dim() - dims; ++d) planes *= input.size(d);
    out.view({planes, volume}).scatter_(1, indices.reshape({planes, -1}), input.reshape({planes, -1}));
  }
  return out.contiguous(format);
}

}  // namespace

at::Tensor max_unpool2d(const at::Tensor& input, const at::Tensor& indices, c10::IntArrayRef output_size) {
  TORCH_CHECK(output_size.size() == 2, "There should be exactly two elements (height, width) in output_size, but got ",
              output_size.size(), " elements.");
  return max_unpool("max_unpooling2d", input, indices, output_size, input.suggest_memory_format());
}

at::Tensor max_unpool3d(const at::Tensor& input, const at::Tensor& indices, c10::IntArrayRef output_size,
                        c10::IntArrayRef stride, c10::IntArrayRef padding) {
  TORCH_CHECK(output_size.size() == 3, "There should be exactly three elements (depth, height, width) in output_size, but got: ",
              output_size.size(), " elements.");
  TORCH_CHECK(stride.size() == 3, "There should be exactly three elements (depth, height, width) in stride, but got: ",
              stride.size(), " elements.");
  TORCH_CHECK(padding.size() == 3, "There should be exactly three elements (depth, height, width) in padding, but got: ",
              padding.size(), " elements.");
  TORCH_CHECK(stride[0] > 0 && stride[1] > 0 && stride[2] > 0, "strides should be greater than zero, but got stride: ", stride);
  return max_unpool("max_unpooling3d", input, indices, output_size, c10::MemoryFormat::Contiguous);
}

}  // namespace vision

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("max_pool2d_with_indices", TORCH_FN(vision::max_pool2d));
  m.impl("max_pool2d_with_indices.out", TORCH_FN(vision::OutForm<&vision::max_pool2d>::call));
  m.impl("max_pool2d_with_indices_backward", TORCH_FN(vision::max_pool2d_backward));
  m.impl("max_pool2d_with_indices_backward.grad_input", TORCH_FN(vision::OutForm<&vision::max_pool2d_backward>::call));
  m.impl("max_pool3d_with_indices", TORCH_FN(vision::max_pool3d));
  m.impl("max_pool3d_with_indices.out", TORCH_FN(vision::OutForm<&vision::max_pool3d>::call));
  m.impl("max_pool3d_with_indices_backward", TORCH_FN(vision::max_pool3d_backward));
  m.impl("max_pool3d_with_indices_backward.grad_input", TORCH_FN(vision::OutForm<&vision::max_pool3d_backward>::call));
  m.impl("avg_pool2d", TORCH_FN(vision::avg_pool2d));
  m.impl("avg_pool2d.out", TORCH_FN(vision::OutForm<&vision::avg_pool2d>::call));
  m.impl("avg_pool2d_backward", TORCH_FN(vision::avg_pool2d_backward));
  m.impl("avg_pool2d_backward.grad_input", TORCH_FN(vision::OutForm<&vision::avg_pool2d_backward>::call));
  m.impl("avg_pool3d", TORCH_FN(vision::avg_pool3d));
  m.impl("avg_pool3d.out", TORCH_FN(vision::OutForm<&vision::avg_pool3d>::call));
  m.impl("avg_pool3d_backward", TORCH_FN(vision::avg_pool3d_backward));
  m.impl("avg_pool3d_backward.grad_input", TORCH_FN(vision::OutForm<&vision::avg_pool3d_backward>::call));
  m.impl("_adaptive_avg_pool2d", TORCH_FN(vision::adaptive_avg_pool2d));
  m.impl("_adaptive_avg_pool2d_backward", TORCH_FN(vision::adaptive_avg_pool2d_backward));
  m.impl("adaptive_max_pool2d", TORCH_FN(vision::adaptive_max_pool2d));
  m.impl("adaptive_max_pool2d.out", TORCH_FN(vision::OutForm<&vision::adaptive_max_pool2d>::call));
  m.impl("adaptive_max_pool2d_backward", TORCH_FN(vision::adaptive_max_pool2d_backward));
  m.impl("adaptive_max_pool2d_backward.grad_input", TORCH_FN(vision::adaptive_max_pool2d_backward_out));
  m.impl("max_unpool2d", TORCH_FN(vision::max_unpool2d));
  m.impl("max_unpool2d.out", TORCH_FN(vision::OutForm<&vision::max_unpool2d>::call));
  m.impl("max_unpool3d", TORCH_FN(vision::max_unpool3d));
  m.impl("max_unpool3d.out", TORCH_FN(vision::OutForm<&vision::max_unpool3d>::call));
}

}  // namespace torchneuron::aten
