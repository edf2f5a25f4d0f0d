// Normalization, pooling, upsampling and patch operators on neuron: batch norm (train and eval),
// group norm, 2-D and 3-D max / average pooling, adaptive average / max pooling, upsampling,
// im2col / col2im and grid_sample (bilinear, nearest), with their backward ops. The host checks
// arguments and computes output sizes; csrc/kernels (norm, pool, upsample, patches, grid_sample)
// run on the queue over contiguous NCHW buffers.
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_adaptive_avg_pool2d_ops.h>
#include <ATen/ops/adaptive_max_pool2d_ops.h>
#include <ATen/ops/avg_pool2d_ops.h>
#include <ATen/ops/avg_pool3d_ops.h>
#include <ATen/ops/col2im_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/grid_sampler_2d_backward_ops.h>
#include <ATen/ops/grid_sampler_2d_ops.h>
#include <ATen/ops/im2col_ops.h>
#include <ATen/ops/max_pool2d_with_indices_ops.h>
#include <ATen/ops/max_pool3d_with_indices_ops.h>
#include <ATen/ops/native_batch_norm_ops.h>
#include <ATen/ops/_upsample_nearest_exact1d_ops.h>
#include <ATen/ops/_upsample_nearest_exact2d_ops.h>
#include <ATen/ops/_upsample_nearest_exact3d_ops.h>
#include <ATen/ops/upsample_bicubic2d_ops.h>
#include <ATen/ops/_upsample_bicubic2d_aa_backward_ops.h>
#include <ATen/ops/_upsample_bicubic2d_aa_ops.h>
#include <ATen/ops/_upsample_bilinear2d_aa_backward_ops.h>
#include <ATen/ops/_upsample_bilinear2d_aa_ops.h>
#include <ATen/ops/upsample_bilinear2d_ops.h>
#include <ATen/ops/upsample_linear1d_ops.h>
#include <ATen/ops/upsample_nearest1d_ops.h>
#include <ATen/ops/upsample_nearest2d_ops.h>
#include <ATen/ops/upsample_nearest3d_ops.h>
#include <ATen/ops/upsample_trilinear3d_ops.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <cmath>
#include <tuple>

#include "aten/cpu_fallback.h"
#include "aten/neuron_tensor.h"
#include "kernels/floating.h"
#include "kernels/grid_sample.h"
#include "kernels/norm.h"
#include "kernels/patches.h"
#include "kernels/pool.h"
#include "kernels/upsample.h"

namespace torchneuron::aten {
namespace vision {
namespace {

bool floating(const at::Tensor& t) {
  return has_kernel_dtype(t.scalar_type()) && kernels::is_floating_dtype(to_kernel_dtype(t.scalar_type()));
}

at::Tensor defined_or_empty(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? *t : at::Tensor();
}

// Optional parameters in `dtype`, contiguous (a mixed-precision call computes in float).
at::Tensor param(const at::Tensor& t, c10::ScalarType dtype) {
  return t.defined() ? t.to(dtype).contiguous() : t;
}

const void* ptr(const at::Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
void* mutable_ptr(const at::Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

// CPU PyTorch, and the meta kernels torch.compile traces with, give a 4-D op on a channels-last
// input a channels-last result; the kernels here write NCHW, so the result is relaid to match
// (a compiled graph that views the result relies on those strides).
at::Tensor like_input_layout(const at::Tensor& result, const at::Tensor& input) {
  if (result.dim() == 4 && input.dim() == 4 && input.suggest_memory_format() == at::MemoryFormat::ChannelsLast) {
    return result.contiguous(at::MemoryFormat::ChannelsLast);
  }
  return result;
}

// CPU PyTorch and the meta kernels give a channels-last input a channels-last result (4-D and 5-D).
at::Tensor like_input_format(const at::Tensor& result, const at::Tensor& input) {
  if (result.dim() == 5 && input.suggest_memory_format() == at::MemoryFormat::ChannelsLast3d) {
    return result.contiguous(at::MemoryFormat::ChannelsLast3d);
  }
  return like_input_layout(result, input);
}

// Copies a functional result into an out= tensor.
at::Tensor& write_out(const at::Tensor& value, at::Tensor& out) {
  at::native::resize_output(out, value.sizes());
  out.copy_(value);
  return out;
}

// out= forms: OutForm<f>::call takes f's arguments and `out`, and copies f's result into it (one
// definition for the upsampling and pooling out= and grad_input= overloads).
template <auto functional, typename Signature = decltype(functional)>
struct OutForm;
template <auto functional, typename... Args>
struct OutForm<functional, at::Tensor (*)(Args...)> {
  static at::Tensor& call(Args... args, at::Tensor& out) { return write_out(functional(args...), out); }
};

kernels::BatchNormShape channel_shape(const at::Tensor& x) {
  kernels::BatchNormShape s;
  s.batch = x.size(0);
  s.channels = x.dim() > 1 ? x.size(1) : 1;
  for (int64_t d = 2; d < x.dim(); ++d) s.inner *= x.size(d);
  return s;
}

// The dtype parameters and statistics use: the input's, or float when they are float and the
// input is a half type (as CPU PyTorch's mixed-precision batch norm).
c10::ScalarType stats_dtype(const at::Tensor& input, std::initializer_list<const at::Tensor*> params) {
  for (const at::Tensor* p : params) {
    if (p->defined() && p->scalar_type() != input.scalar_type()) return p->scalar_type();
  }
  return input.scalar_type();
}

}  // namespace

// ---- batch norm ----------------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm(const at::Tensor& input, const std::optional<at::Tensor>& weight_opt,
                                                          const std::optional<at::Tensor>& bias_opt,
                                                          const std::optional<at::Tensor>& running_mean_opt,
                                                          const std::optional<at::Tensor>& running_var_opt, bool training,
                                                          double momentum, double eps) {
  const at::Tensor weight = defined_or_empty(weight_opt), bias = defined_or_empty(bias_opt);
  at::Tensor running_mean = defined_or_empty(running_mean_opt), running_var = defined_or_empty(running_var_opt);
  check_same_device("aten::native_batch_norm", input.device(), {&weight, &bias, &running_mean, &running_var});
  const c10::ScalarType stats = stats_dtype(input, {&weight, &bias, &running_mean, &running_var});
  const bool mixed = stats != input.scalar_type();
  if (!floating(input) || (mixed && stats != at::kFloat)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(native_batch_norm)>::call(
        input, weight_opt, bias_opt, running_mean_opt, running_var_opt, training, momentum, eps);
  }
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected an input with at least 2 dimensions, got ", input.sizes());
  const kernels::BatchNormShape shape = channel_shape(input);
  for (const at::Tensor* t : std::initializer_list<const at::Tensor*>{&weight, &bias, &running_mean, &running_var}) {
    TORCH_CHECK(!t->defined() || t->numel() == shape.channels, "batch_norm: expected weight, bias and running stats of ",
                shape.channels, " elements (the input's channels), got ", t->sizes());
  }
  TORCH_CHECK(training || (running_mean.defined() && running_var.defined()),
              "batch_norm in eval mode needs running_mean and running_var");
  TORCH_CHECK(!training || shape.batch * shape.inner > 1 || shape.channels == 0,
              "Expected more than 1 value per channel when training, got input size ", input.sizes());
  const at::Tensor x = input.to(stats).contiguous();
  const at::Tensor w = param(weight, stats), b = param(bias, stats);
  // Running stats are updated in place: work on contiguous copies and write them back.
  at::Tensor rm = running_mean.defined() ? running_mean.contiguous() : at::Tensor();
  at::Tensor rv = running_var.defined() ? running_var.contiguous() : at::Tensor();
  at::Tensor out = at::empty_like(x);
  at::Tensor save_mean = at::empty({training ? shape.channels : 0}, x.options());
  at::Tensor save_invstd = at::empty({training ? shape.channels : 0}, x.options());
  if (x.numel() > 0 || training) {
    const kernels::DType dtype = to_kernel_dtype(stats);
    const void *px = x.data_ptr(), *pw = ptr(w), *pb = ptr(b);
    void *prm = mutable_ptr(rm), *prv = mutable_ptr(rv), *po = out.data_ptr();
    void *psm = mutable_ptr(save_mean), *psi = mutable_ptr(save_invstd);
    enqueue(out, "aten::native_batch_norm", {&x, &w, &b, &rm, &rv}, [=] {
      kernels::batch_norm(dtype, shape, px, pw, pb, prm, prv, training, momentum, eps, po, psm, psi);
    });
  }
  if (rm.defined() && !rm.is_same(running_mean)) running_mean.copy_(rm);
  if (rv.defined() && !rv.is_same(running_var)) running_var.copy_(rv);
  return {mixed ? out.to(input.scalar_type()) : out, save_mean, save_invstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& weight_opt,
    const std::optional<at::Tensor>& running_mean_opt, const std::optional<at::Tensor>& running_var_opt,
    const std::optional<at::Tensor>& save_mean_opt, const std::optional<at::Tensor>& save_invstd_opt, bool training,
    double eps, std::array<bool, 3> output_mask) {
  const at::Tensor weight = defined_or_empty(weight_opt);
  const at::Tensor running_mean = defined_or_empty(running_mean_opt), running_var = defined_or_empty(running_var_opt);
  const at::Tensor save_mean = defined_or_empty(save_mean_opt), save_invstd = defined_or_empty(save_invstd_opt);
  check_same_device("aten::native_batch_norm_backward", input.device(),
                    {&grad_out, &weight, &running_mean, &running_var, &save_mean, &save_invstd});
  const c10::ScalarType stats = stats_dtype(input, {&weight, &running_mean, &running_var, &save_mean});
  if (!floating(input) || (stats != input.scalar_type() && stats != at::kFloat)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(native_batch_norm_backward)>::call(
        grad_out, input, weight_opt, running_mean_opt, running_var_opt, save_mean_opt, save_invstd_opt, training,
        eps, output_mask);
  }
  TORCH_CHECK(!training || (save_mean.defined() && save_invstd.defined()),
              "batch_norm_backward in training mode needs save_mean and save_invstd");
  TORCH_CHECK(training || (running_mean.defined() && running_var.defined()),
              "batch_norm_backward in eval mode needs running_mean and running_var");
  const kernels::BatchNormShape shape = channel_shape(input);
  const at::Tensor x = input.to(stats).contiguous(), go = grad_out.to(stats).contiguous();
  const at::Tensor w = param(weight, stats), rm = param(running_mean, stats), rv = param(running_var, stats);
  const at::Tensor sm = param(save_mean, stats), si = param(save_invstd, stats);
  at::Tensor grad_x = output_mask[0] ? at::empty_like(x) : at::Tensor();
  const auto param_options = x.options();
  at::Tensor grad_w = output_mask[1] ? at::empty({shape.channels}, param_options) : at::Tensor();
  at::Tensor grad_b = output_mask[2] ? at::empty({shape.channels}, param_options) : at::Tensor();
  if (grad_x.defined() || grad_w.defined() || grad_b.defined()) {
    const kernels::DType dtype = to_kernel_dtype(stats);
    const void *pgo = go.data_ptr(), *px = x.data_ptr(), *pw = ptr(w), *prm = ptr(rm), *prv = ptr(rv);
    const void *psm = ptr(sm), *psi = ptr(si);
    void *pgx = mutable_ptr(grad_x), *pgw = mutable_ptr(grad_w), *pgb = mutable_ptr(grad_b);
    enqueue(x, "aten::native_batch_norm_backward", {&go, &x, &w, &rm, &rv, &sm}, [=] {
      kernels::batch_norm_backward(dtype, shape, pgo, px, pw, prm, prv, psm, psi, training, eps, pgx, pgw, pgb);
    });
  }
  if (grad_x.defined()) grad_x = grad_x.to(input.scalar_type());
  if (weight.defined()) {
    if (grad_w.defined()) grad_w = grad_w.to(weight.scalar_type());
    if (grad_b.defined()) grad_b = grad_b.to(weight.scalar_type());
  }
  return {grad_x, grad_w, grad_b};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_legit(const at::Tensor& input,
                                                                const std::optional<at::Tensor>& weight,
                                                                const std::optional<at::Tensor>& bias,
                                                                at::Tensor& running_mean, at::Tensor& running_var,
                                                                bool training, double momentum, double eps) {
  return batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_legit_no_stats(const at::Tensor& input,
                                                                         const std::optional<at::Tensor>& weight,
                                                                         const std::optional<at::Tensor>& bias,
                                                                         bool training, double momentum, double eps) {
  return batch_norm(input, weight, bias, std::nullopt, std::nullopt, training, momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_legit_no_training(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    const at::Tensor& running_mean, const at::Tensor& running_var, double momentum, double eps) {
  return batch_norm(input, weight, bias, running_mean, running_var, false, momentum, eps);
}

// ---- group norm ----------------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor, at::Tensor> group_norm(const at::Tensor& input, const std::optional<at::Tensor>& weight_opt,
                                                          const std::optional<at::Tensor>& bias_opt, int64_t N, int64_t C,
                                                          int64_t HxW, int64_t group, double eps) {
  const at::Tensor weight = defined_or_empty(weight_opt), bias = defined_or_empty(bias_opt);
  check_same_device("aten::native_group_norm", input.device(), {&weight, &bias});
  TORCH_CHECK(floating(input), "group_norm: expected a floating input, got ", input.scalar_type());
  TORCH_CHECK(group > 0 && C % group == 0, "Expected number of channels in input to be divisible by num_groups, but got input of shape ",
              input.sizes(), " and num_groups=", group);
  TORCH_CHECK(input.numel() == N * C * HxW, "group_norm: input of ", input.numel(), " elements is not N * C * HxW = ",
              N, " * ", C, " * ", HxW);
  for (const at::Tensor* t : {&weight, &bias}) {
    TORCH_CHECK(!t->defined() || t->numel() == C, "group_norm: expected weight and bias of ", C, " elements, got ", t->sizes());
  }
  const c10::ScalarType stats = stats_dtype(input, {&weight, &bias});
  const at::Tensor x = input.to(stats).contiguous();
  const at::Tensor w = param(weight, stats), b = param(bias, stats);
  at::Tensor out = at::empty_like(x);
  at::Tensor mean = at::empty({N, group}, x.options()), rstd = at::empty({N, group}, x.options());
  if (x.numel() > 0) {
    const kernels::BatchNormShape shape{N, C, HxW};
    const kernels::DType dtype = to_kernel_dtype(stats);
    const void *px = x.data_ptr(), *pw = ptr(w), *pb = ptr(b);
    void *po = out.data_ptr(), *pm = mean.data_ptr(), *pr = rstd.data_ptr();
    enqueue(out, "aten::native_group_norm", {&x, &w, &b},
            [=] { kernels::group_norm(dtype, shape, group, eps, px, pw, pb, po, pm, pr); });
  }
  return {out.to(input.scalar_type()), mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> group_norm_backward(const at::Tensor& grad_out, const at::Tensor& input,
                                                                   const at::Tensor& mean, const at::Tensor& rstd,
                                                                   const std::optional<at::Tensor>& weight_opt, int64_t N,
                                                                   int64_t C, int64_t HxW, int64_t group,
                                                                   std::array<bool, 3> output_mask) {
  const at::Tensor weight = defined_or_empty(weight_opt);
  check_same_device("aten::native_group_norm_backward", input.device(), {&grad_out, &mean, &rstd, &weight});
  TORCH_CHECK(floating(input), "group_norm_backward: expected a floating input, got ", input.scalar_type());
  const c10::ScalarType stats = stats_dtype(input, {&weight, &mean});
  const at::Tensor x = input.to(stats).contiguous(), go = grad_out.to(stats).contiguous();
  const at::Tensor m = param(mean, stats), r = param(rstd, stats), w = param(weight, stats);
  at::Tensor grad_x = output_mask[0] ? at::empty_like(x) : at::Tensor();
  at::Tensor grad_w = output_mask[1] ? at::empty({C}, x.options()) : at::Tensor();
  at::Tensor grad_b = output_mask[2] ? at::empty({C}, x.options()) : at::Tensor();
  if (x.numel() == 0) {
    if (grad_w.defined()) grad_w.zero_();
    if (grad_b.defined()) grad_b.zero_();
  } else if (grad_x.defined() || grad_w.defined() || grad_b.defined()) {
    const kernels::BatchNormShape shape{N, C, HxW};
    const kernels::DType dtype = to_kernel_dtype(stats);
    const void *pgo = go.data_ptr(), *px = x.data_ptr(), *pm = m.data_ptr(), *pr = r.data_ptr(), *pw = ptr(w);
    void *pgx = mutable_ptr(grad_x), *pgw = mutable_ptr(grad_w), *pgb = mutable_ptr(grad_b);
    enqueue(x, "aten::native_group_norm_backward", {&go, &x, &m, &r, &w}, [=] {
      kernels::group_norm_backward(dtype, shape, group, pgo, px, pm, pr, pw, pgx, pgw, pgb);
    });
  }
  if (grad_x.defined()) grad_x = grad_x.to(input.scalar_type());
  if (weight.defined()) {
    if (grad_w.defined()) grad_w = grad_w.to(weight.scalar_type());
    if (grad_b.defined()) grad_b = grad_b.to(weight.scalar_type());
  }
  return {grad_x, grad_w, grad_b};
}

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
  TORCH_CHECK(k.stride_d > 0 && k.stride_h > 0 && k.stride_w > 0, op, ": stride should be greater than zero, but got ",
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
  return like_input_format(out, input);
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
  return like_input_format(grad_in, input);
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

// The out= forms of the pair-returning max pools; the others go through OutForm.
template <auto functional>
std::tuple<at::Tensor&, at::Tensor&> max_pool_out(const at::Tensor& input, c10::IntArrayRef kernel,
                                                  c10::IntArrayRef stride, c10::IntArrayRef padding,
                                                  c10::IntArrayRef dilation, bool ceil_mode, at::Tensor& out,
                                                  at::Tensor& indices) {
  auto [values, positions] = functional(input, kernel, stride, padding, dilation, ceil_mode);
  write_out(values, out);
  write_out(positions, indices);
  return {out, indices};
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

at::Tensor adaptive_avg_pool2d_backward(const at::Tensor& grad_out, const at::Tensor& input) {
  check_same_device("aten::_adaptive_avg_pool2d_backward", input.device(), {&grad_out});
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

std::tuple<at::Tensor&, at::Tensor&> adaptive_max_pool2d_out(const at::Tensor& input, c10::IntArrayRef output_size,
                                                             at::Tensor& out, at::Tensor& indices) {
  auto [values, positions] = vision::adaptive_max_pool2d(input, output_size);
  write_out(values, out);
  write_out(positions, indices);
  return {out, indices};
}

// The gradient goes to the recorded positions, as max_pool2d's does.
at::Tensor adaptive_max_pool2d_backward(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& indices) {
  check_same_device("aten::adaptive_max_pool2d_backward", input.device(), {&grad_out, &indices});
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

}  // namespace vision

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", TORCH_FN(vision::batch_norm));
  m.impl("grid_sampler_2d", TORCH_FN(vision::grid_sampler_2d));
  m.impl("grid_sampler_2d_backward", TORCH_FN(vision::grid_sampler_2d_backward));
  m.impl("native_batch_norm_backward", TORCH_FN(vision::batch_norm_backward));
  m.impl("_native_batch_norm_legit", TORCH_FN(vision::batch_norm_legit));
  m.impl("_native_batch_norm_legit.no_stats", TORCH_FN(vision::batch_norm_legit_no_stats));
  m.impl("_native_batch_norm_legit_no_training", TORCH_FN(vision::batch_norm_legit_no_training));
  m.impl("native_group_norm", TORCH_FN(vision::group_norm));
  m.impl("native_group_norm_backward", TORCH_FN(vision::group_norm_backward));
  m.impl("max_pool2d_with_indices", TORCH_FN(vision::max_pool2d));
  m.impl("max_pool2d_with_indices.out", TORCH_FN(vision::max_pool_out<&vision::max_pool2d>));
  m.impl("max_pool2d_with_indices_backward", TORCH_FN(vision::max_pool2d_backward));
  m.impl("max_pool2d_with_indices_backward.grad_input", TORCH_FN(vision::OutForm<&vision::max_pool2d_backward>::call));
  m.impl("max_pool3d_with_indices", TORCH_FN(vision::max_pool3d));
  m.impl("max_pool3d_with_indices.out", TORCH_FN(vision::max_pool_out<&vision::max_pool3d>));
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
  m.impl("adaptive_max_pool2d.out", TORCH_FN(vision::adaptive_max_pool2d_out));
  m.impl("adaptive_max_pool2d_backward", TORCH_FN(vision::adaptive_max_pool2d_backward));
  m.impl("adaptive_max_pool2d_backward.grad_input", TORCH_FN(vision::adaptive_max_pool2d_backward_out));
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
