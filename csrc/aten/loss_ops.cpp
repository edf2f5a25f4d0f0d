// Regression and binary classification losses on neuron (mse, smooth L1, Huber, binary cross
// entropy) and their backward ops, composed on the host from native pointwise ops and
// reductions: nothing here runs on the CPU. NLL / cross entropy have their own kernels.
#include <ATen/native/Resize.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/add.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/div.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/le.h>
#include <ATen/ops/log.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include "aten/neuron_tensor.h"

namespace torchneuron::aten {
namespace losses {
namespace {

enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

at::Tensor reduce(const at::Tensor& loss, int64_t reduction) {
  TORCH_CHECK(reduction >= kNone && reduction <= kSum, "loss: reduction must be 0 (none), 1 (mean) or 2 (sum), got ", reduction);
  if (reduction == kMean) return at::mean(loss);
  if (reduction == kSum) return at::sum(loss);
  return loss;
}

// The gradient of a reduced loss with respect to each element: 1 / numel for mean.
double reduction_scale(const at::Tensor& self, int64_t reduction) {
  return reduction == kMean && self.numel() > 0 ? 1.0 / static_cast<double>(self.numel()) : 1.0;
}

at::Tensor& write_out(const at::Tensor& value, at::Tensor& out) {
  at::native::resize_output(out, value.sizes());
  return out.copy_(value);
}

void check_inputs(const char* op, const at::Tensor& self, const at::Tensor& target) {
  check_same_device(op, self.device(), {&target});
}

}  // namespace

at::Tensor mse_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction) {
  check_inputs("aten::mse_loss", self, target);
  const at::Tensor diff = at::sub(self, target);
  return reduce(at::mul(diff, diff), reduction);
}

at::Tensor& mse_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction, at::Tensor& out) {
  return write_out(losses::mse_loss(self, target, reduction), out);
}

at::Tensor mse_loss_backward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target, int64_t reduction) {
  check_inputs("aten::mse_loss_backward", self, target);
  const double scale = 2.0 * reduction_scale(self, reduction);
  return at::mul(at::mul(at::sub(self, target), scale), grad);
}

at::Tensor& mse_loss_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                  int64_t reduction, at::Tensor& grad_input) {
  return write_out(losses::mse_loss_backward(grad, self, target, reduction), grad_input);
}

// smooth L1 (beta) and Huber (delta) share their shape: quadratic inside, linear outside.
at::Tensor smooth_l1_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double beta) {
  check_inputs("aten::smooth_l1_loss", self, target);
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  const at::Tensor diff = at::abs(at::sub(self, target));
  if (beta == 0.0) return reduce(diff, reduction);
  const at::Tensor quadratic = at::div(at::mul(at::mul(diff, diff), 0.5), beta);
  return reduce(at::where(at::lt(diff, beta), quadratic, at::sub(diff, 0.5 * beta)), reduction);
}

at::Tensor& smooth_l1_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double beta,
                               at::Tensor& out) {
  return write_out(losses::smooth_l1_loss(self, target, reduction, beta), out);
}

at::Tensor smooth_l1_loss_backward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                   int64_t reduction, double beta) {
  check_inputs("aten::smooth_l1_loss_backward", self, target);
  const double scale = reduction_scale(self, reduction);
  const at::Tensor x = at::sub(self, target);
  const at::Tensor inside = beta == 0.0 ? at::mul(x, 0.0) : at::div(at::mul(x, scale), beta);
  const at::Tensor slope = at::where(at::le(x, -beta), -scale, at::where(at::ge(x, beta), scale, inside));
  return at::mul(slope, grad);
}

at::Tensor& smooth_l1_loss_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                        int64_t reduction, double beta, at::Tensor& grad_input) {
  return write_out(losses::smooth_l1_loss_backward(grad, self, target, reduction, beta), grad_input);
}

at::Tensor huber_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double delta) {
  check_inputs("aten::huber_loss", self, target);
  TORCH_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
  const at::Tensor diff = at::abs(at::sub(self, target));
  const at::Tensor quadratic = at::mul(at::mul(diff, diff), 0.5);
  return reduce(at::where(at::lt(diff, delta), quadratic, at::mul(at::sub(diff, 0.5 * delta), delta)), reduction);
}

at::Tensor& huber_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double delta,
                           at::Tensor& out) {
  return write_out(losses::huber_loss(self, target, reduction, delta), out);
}

at::Tensor huber_loss_backward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                               int64_t reduction, double delta) {
  check_inputs("aten::huber_loss_backward", self, target);
  const double scale = reduction_scale(self, reduction);
  const at::Tensor x = at::sub(self, target);
  const at::Tensor slope =
      at::where(at::le(x, -delta), -scale * delta, at::where(at::ge(x, delta), scale * delta, at::mul(x, scale)));
  return at::mul(slope, grad);
}

at::Tensor& huber_loss_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                    int64_t reduction, double delta, at::Tensor& grad_input) {
  return write_out(losses::huber_loss_backward(grad, self, target, reduction, delta), grad_input);
}

// Binary cross entropy clamps each log term at -100, as PyTorch does. Unlike CPU PyTorch it does
// not read the input back to check that it lies in [0, 1] (CUDA checks on the device).
at::Tensor binary_cross_entropy(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
                                int64_t reduction) {
  check_inputs("aten::binary_cross_entropy", self, target);
  TORCH_CHECK(self.sizes() == target.sizes(), "Using a target size (", target.sizes(), ") that is different to the input size (",
              self.sizes(), ") is deprecated. Please ensure they have the same size.");
  const at::Tensor log_x = at::clamp_min(at::log(self), -100);
  const at::Tensor log_1mx = at::clamp_min(at::log(at::rsub(self, 1)), -100);
  at::Tensor loss = at::neg(at::add(at::mul(target, log_x), at::mul(at::rsub(target, 1), log_1mx)));
  if (weight.has_value() && weight->defined()) loss = at::mul(loss, *weight);
  return reduce(loss, reduction);
}

at::Tensor& binary_cross_entropy_out(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
                                     int64_t reduction, at::Tensor& out) {
  return write_out(losses::binary_cross_entropy(self, target, weight, reduction), out);
}

at::Tensor binary_cross_entropy_backward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                         const std::optional<at::Tensor>& weight, int64_t reduction) {
  check_inputs("aten::binary_cross_entropy_backward", self, target);
  constexpr double kEpsilon = 1e-12;  // PyTorch's floor on x * (1 - x)
  const at::Tensor denominator = at::clamp_min(at::mul(at::rsub(self, 1), self), kEpsilon);
  at::Tensor result = at::mul(at::div(at::sub(self, target), denominator), grad);
  if (weight.has_value() && weight->defined()) result = at::mul(result, *weight);
  const double scale = reduction_scale(self, reduction);
  return scale == 1.0 ? result : at::mul(result, scale);
}

at::Tensor& binary_cross_entropy_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                              const std::optional<at::Tensor>& weight, int64_t reduction,
                                              at::Tensor& grad_input) {
  return write_out(losses::binary_cross_entropy_backward(grad, self, target, weight, reduction), grad_input);
}

}  // namespace losses

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mse_loss", TORCH_FN(losses::mse_loss));
  m.impl("mse_loss.out", TORCH_FN(losses::mse_loss_out));
  m.impl("mse_loss_backward", TORCH_FN(losses::mse_loss_backward));
  m.impl("mse_loss_backward.grad_input", TORCH_FN(losses::mse_loss_backward_out));
  m.impl("smooth_l1_loss", TORCH_FN(losses::smooth_l1_loss));
  m.impl("smooth_l1_loss.out", TORCH_FN(losses::smooth_l1_loss_out));
  m.impl("smooth_l1_loss_backward", TORCH_FN(losses::smooth_l1_loss_backward));
  m.impl("smooth_l1_loss_backward.grad_input", TORCH_FN(losses::smooth_l1_loss_backward_out));
  m.impl("huber_loss", TORCH_FN(losses::huber_loss));
  m.impl("huber_loss.out", TORCH_FN(losses::huber_loss_out));
  m.impl("huber_loss_backward", TORCH_FN(losses::huber_loss_backward));
  m.impl("huber_loss_backward.out", TORCH_FN(losses::huber_loss_backward_out));
  m.impl("binary_cross_entropy", TORCH_FN(losses::binary_cross_entropy));
  m.impl("binary_cross_entropy.out", TORCH_FN(losses::binary_cross_entropy_out));
  m.impl("binary_cross_entropy_backward", TORCH_FN(losses::binary_cross_entropy_backward));
  m.impl("binary_cross_entropy_backward.grad_input", TORCH_FN(losses::binary_cross_entropy_backward_out));
}

}  // namespace torchneuron::aten
