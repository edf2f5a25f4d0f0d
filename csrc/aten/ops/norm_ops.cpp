// Batch norm (train and eval, with the _native_batch_norm_legit and _batch_norm_with_update forms
// and out= forms) and group norm on neuron, with their backward ops. The host checks arguments
// and picks the statistics' dtype (float for a half-type input with float parameters);
// csrc/kernels/norm runs on the queue over contiguous N x C x inner buffers.
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/native_batch_norm_backward_ops.h>
#include <ATen/ops/native_batch_norm_ops.h>
#include <torch/library.h>

#include <array>
#include <initializer_list>
#include <optional>
#include <tuple>

#include "aten/device/neuron_tensor.h"
#include "aten/fallback/cpu_fallback.h"
#include "aten/ops/vision_common.h"
#include "kernels/norm.h"

namespace torchneuron::aten {
namespace vision {
namespace {

at::Tensor defined_or_empty(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? *t : at::Tensor();
}

// Optional parameters in `dtype`, contiguous (a mixed-precision call computes in float).
at::Tensor param(const at::Tensor& t, c10::ScalarType dtype) {
  return t.defined() ? t.to(dtype).contiguous() : t;
}

const void* ptr(const at::Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
void* mutable_ptr(const at::Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

// A dense channels-last tensor: the norms run on it in place of an NCHW copy.
bool dense_channels_last(const at::Tensor& t) {
  const c10::MemoryFormat format = t.suggest_memory_format();
  return format != c10::MemoryFormat::Contiguous && t.is_contiguous(format);
}

kernels::BatchNormShape channel_shape(const at::Tensor& x) {
  kernels::BatchNormShape s;
  s.batch = x.size(0);
  s.channels = x.dim() > 1 ? x.size(1) : 1;
  for (int64_t d = 2; d < x.dim(); ++d) s.inner *= x.size(d);
  s.channels_last = dense_channels_last(x);
  return s;
}

// CPU PyTorch gives results (and input gradients) the input's suggested memory format; where
// the kernels write NCHW, one copy both casts back and relays them.
at::Tensor in_input_layout(const at::Tensor& result, const at::Tensor& input) {
  return result.to(input.scalar_type(), false, false, input.suggest_memory_format());
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
  // A channels-last input keeps its layout (.to keeps it): its kernel reads [N * spatial, C] rows.
  const at::Tensor x = shape.channels_last ? input.to(stats) : input.to(stats).contiguous();
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
  return {in_input_layout(out, input), save_mean, save_invstd};
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
  const c10::MemoryFormat layout = shape.channels_last ? input.suggest_memory_format() : c10::MemoryFormat::Contiguous;
  const at::Tensor x = input.to(stats).contiguous(layout), go = grad_out.to(stats).contiguous(layout);
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
  if (grad_x.defined()) grad_x = in_input_layout(grad_x, input);
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

// The out= forms: the functional results written into the given tensors.
using NormResults = std::tuple<at::Tensor&, at::Tensor&, at::Tensor&>;
NormResults write_norm_results(std::tuple<at::Tensor, at::Tensor, at::Tensor> results, at::Tensor& out,
                               at::Tensor& save_mean, at::Tensor& save_invstd) {
  write_out(std::get<0>(results), out);
  write_out(std::get<1>(results), save_mean);
  write_out(std::get<2>(results), save_invstd);
  return {out, save_mean, save_invstd};
}

NormResults batch_norm_out(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                           const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
                           const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps,
                           at::Tensor& out, at::Tensor& save_mean, at::Tensor& save_invstd) {
  return write_norm_results(batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps), out,
                            save_mean, save_invstd);
}

NormResults batch_norm_legit_out(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                 const std::optional<at::Tensor>& bias, at::Tensor& running_mean,
                                 at::Tensor& running_var, bool training, double momentum, double eps, at::Tensor& out,
                                 at::Tensor& save_mean, at::Tensor& save_invstd) {
  return write_norm_results(batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps), out,
                            save_mean, save_invstd);
}

NormResults batch_norm_legit_no_stats_out(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                          const std::optional<at::Tensor>& bias, bool training, double momentum,
                                          double eps, at::Tensor& out, at::Tensor& save_mean, at::Tensor& save_invstd) {
  return write_norm_results(batch_norm(input, weight, bias, std::nullopt, std::nullopt, training, momentum, eps), out,
                            save_mean, save_invstd);
}

// Training-mode batch norm that updates the running statistics; `reserve` is empty, as on CPU
// (cuDNN's workspace elsewhere).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> batch_norm_with_update(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    at::Tensor& running_mean, at::Tensor& running_var, double momentum, double eps) {
  auto [out, save_mean, save_invstd] = batch_norm(input, weight, bias, running_mean, running_var, true, momentum, eps);
  return {out, save_mean, save_invstd, at::empty({0}, input.options().dtype(c10::kByte))};
}

// _batch_norm_with_update's backward (`update` is training mode); `reserve` is unused.
std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_update_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd, bool update, double eps,
    std::array<bool, 3> output_mask, const at::Tensor& /*reserve*/) {
  return batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, update, eps,
                             output_mask);
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
  const kernels::BatchNormShape shape{N, C, HxW, dense_channels_last(input)};
  const at::Tensor x = shape.channels_last ? input.to(stats) : input.to(stats).contiguous();
  const at::Tensor w = param(weight, stats), b = param(bias, stats);
  at::Tensor out = at::empty_like(x);
  at::Tensor mean = at::empty({N, group}, x.options()), rstd = at::empty({N, group}, x.options());
  if (x.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(stats);
    const void *px = x.data_ptr(), *pw = ptr(w), *pb = ptr(b);
    void *po = out.data_ptr(), *pm = mean.data_ptr(), *pr = rstd.data_ptr();
    enqueue(out, "aten::native_group_norm", {&x, &w, &b},
            [=] { kernels::group_norm(dtype, shape, group, eps, px, pw, pb, po, pm, pr); });
  }
  return {in_input_layout(out, input), mean, rstd};
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
  const kernels::BatchNormShape shape{N, C, HxW, dense_channels_last(input)};
  const c10::MemoryFormat layout = shape.channels_last ? input.suggest_memory_format() : c10::MemoryFormat::Contiguous;
  const at::Tensor x = input.to(stats).contiguous(layout), go = grad_out.to(stats).contiguous(layout);
  const at::Tensor m = param(mean, stats), r = param(rstd, stats), w = param(weight, stats);
  at::Tensor grad_x = output_mask[0] ? at::empty_like(x) : at::Tensor();
  at::Tensor grad_w = output_mask[1] ? at::empty({C}, x.options()) : at::Tensor();
  at::Tensor grad_b = output_mask[2] ? at::empty({C}, x.options()) : at::Tensor();
  if (x.numel() == 0) {
    if (grad_w.defined()) grad_w.zero_();
    if (grad_b.defined()) grad_b.zero_();
  } else if (grad_x.defined() || grad_w.defined() || grad_b.defined()) {
    const kernels::DType dtype = to_kernel_dtype(stats);
    const void *pgo = go.data_ptr(), *px = x.data_ptr(), *pm = m.data_ptr(), *pr = r.data_ptr(), *pw = ptr(w);
    void *pgx = mutable_ptr(grad_x), *pgw = mutable_ptr(grad_w), *pgb = mutable_ptr(grad_b);
    enqueue(x, "aten::native_group_norm_backward", {&go, &x, &m, &r, &w}, [=] {
      kernels::group_norm_backward(dtype, shape, group, pgo, px, pm, pr, pw, pgx, pgw, pgb);
    });
  }
  if (grad_x.defined()) grad_x = in_input_layout(grad_x, input);
  if (weight.defined()) {
    if (grad_w.defined()) grad_w = grad_w.to(weight.scalar_type());
    if (grad_b.defined()) grad_b = grad_b.to(weight.scalar_type());
  }
  return {grad_x, grad_w, grad_b};
}

}  // namespace vision

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", TORCH_FN(vision::batch_norm));
  m.impl("native_batch_norm.out", TORCH_FN(vision::batch_norm_out));
  m.impl("_native_batch_norm_legit.out", TORCH_FN(vision::batch_norm_legit_out));
  m.impl("_native_batch_norm_legit.no_stats_out", TORCH_FN(vision::batch_norm_legit_no_stats_out));
  m.impl("_batch_norm_with_update", TORCH_FN(vision::batch_norm_with_update));
  m.impl("batch_norm_backward", TORCH_FN(vision::batch_norm_update_backward));
  m.impl("native_batch_norm_backward", TORCH_FN(vision::batch_norm_backward));
  m.impl("_native_batch_norm_legit", TORCH_FN(vision::batch_norm_legit));
  m.impl("_native_batch_norm_legit.no_stats", TORCH_FN(vision::batch_norm_legit_no_stats));
  m.impl("_native_batch_norm_legit_no_training", TORCH_FN(vision::batch_norm_legit_no_training));
  m.impl("native_group_norm", TORCH_FN(vision::group_norm));
  m.impl("native_group_norm_backward", TORCH_FN(vision::group_norm_backward));
}

}  // namespace torchneuron::aten
