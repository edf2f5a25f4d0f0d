// Regression and binary classification losses on neuron (mse, smooth L1, Huber, binary cross
// entropy) and their backward ops, composed on the host from native pointwise ops and
// reductions; and the CTC loss, forward and backward, a kernel (csrc/kernels/ctc). NLL / cross
// entropy have their own kernels.
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_ctc_loss_backward_ops.h>
#include <ATen/ops/_ctc_loss_ops.h>
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
#include <ATen/ops/tensor.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include "aten/fallback/cpu_fallback.h"
#include "aten/ops/elementwise_launch.h"
#include "aten/device/neuron_tensor.h"
#include "kernels/ctc.h"

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

namespace {

// The elementwise smooth-L1 (beta) or Huber (delta) terms in one kernel; false when the
// kernels cannot take the operands' dtype (the callers then compose them from other ops).
bool pointwise_terms(kernels::BinaryOp op, const char* name, const at::Tensor& self, const at::Tensor& target,
                     double param, at::Tensor& terms) {
  at::TensorBase out;
  auto iter = at::TensorIterator::borrowing_binary_op(out, self, target);
  if (!launch_binary(iter, op, name, false, to_op_scalar(param))) return false;
  terms = iter.output();
  return true;
}

// Their gradients: grad times the slope at self - target, clipped to [-1, 1] (smooth L1) or
// [-delta, delta] (Huber), with the mean's 1 / numel folded into grad first.
bool pointwise_gradient(kernels::TernaryOp op, const char* name, const at::Tensor& grad, const at::Tensor& self,
                        const at::Tensor& target, int64_t reduction, double param, at::Tensor& result) {
  const double scale = reduction_scale(self, reduction);
  const at::Tensor scaled = scale == 1.0 ? grad : at::mul(grad, scale);
  at::Tensor out;
  auto iter = at::TensorIteratorConfig()
                  .add_output(out)
                  .add_const_input(self)
                  .add_const_input(target)
                  .add_const_input(scaled)
                  .promote_inputs_to_common_dtype(true)
                  .build();
  if (!launch_ternary(iter, op, name, to_op_scalar(param))) return false;
  result = iter.output();
  return true;
}

}  // namespace

// smooth L1 (beta) and Huber (delta) share their shape: quadratic inside, linear outside.
at::Tensor smooth_l1_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double beta) {
  check_inputs("aten::smooth_l1_loss", self, target);
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  at::Tensor terms;
  if (pointwise_terms(kernels::BinaryOp::kSmoothL1, "aten::smooth_l1_loss", self, target, beta, terms)) {
    return reduce(terms, reduction);
  }
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
  at::Tensor result;
  if (pointwise_gradient(kernels::TernaryOp::kSmoothL1Backward, "aten::smooth_l1_loss_backward", grad, self, target,
                         reduction, beta, result)) {
    return result;
  }
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
  at::Tensor terms;
  if (pointwise_terms(kernels::BinaryOp::kHuber, "aten::huber_loss", self, target, delta, terms)) {
    return reduce(terms, reduction);
  }
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
  at::Tensor result;
  if (pointwise_gradient(kernels::TernaryOp::kHuberBackward, "aten::huber_loss_backward", grad, self, target,
                         reduction, delta, result)) {
    return result;
  }
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

// ---- CTC loss ----------------------------------------------------------------------------------

namespace {

// The checks and layout CPU PyTorch's ctc_loss_allocate_outputs applies; offsets: where each
// sample's labels start in the contiguous int64 targets.
struct CtcPlan {
  kernels::CtcShape shape;
  at::Tensor targets, offsets, input_lengths, target_lengths;  // int64, on the device
};

CtcPlan plan_ctc(const at::Tensor& log_probs, const at::Tensor& targets, c10::IntArrayRef input_lengths,
                 c10::IntArrayRef target_lengths, int64_t blank) {
  constexpr const char* where = " (while checking arguments for ctc_loss_allocate_outputs)";
  TORCH_CHECK(log_probs.dim() == 3, "ctc_loss: expected log_probs of shape [time, batch, classes], got ", log_probs.sizes());
  TORCH_CHECK(log_probs.numel() > 0, "log_probs tensor must not be empty");
  CtcPlan plan;
  kernels::CtcShape& s = plan.shape;
  s.max_time = log_probs.size(0);
  s.batch = log_probs.size(1);
  s.classes = log_probs.size(2);
  s.blank = blank;
  TORCH_CHECK(blank < s.classes && blank >= 0, "blank must be in label range");
  TORCH_CHECK(static_cast<int64_t>(input_lengths.size()) == s.batch, "input_lengths must be of size batch_size");
  TORCH_CHECK(static_cast<int64_t>(target_lengths.size()) == s.batch, "target_lengths must be of size batch_size");
  std::vector<int64_t> offsets(static_cast<size_t>(s.batch));
  int64_t total = 0;
  for (int64_t b = 0; b < s.batch; ++b) {
    TORCH_CHECK(target_lengths[b] >= 0, "Expected target_lengths to have value at least 0, but got value ", target_lengths[b], where);
    TORCH_CHECK(input_lengths[b] >= 0, "Expected input_lengths to have value at least 0, but got value ", input_lengths[b], where);
    TORCH_CHECK(input_lengths[b] <= s.max_time, "Expected input_lengths to have value at most ", s.max_time,
                ", but got value ", input_lengths[b], where);
    s.max_target = std::max(s.max_target, target_lengths[b]);
    offsets[b] = targets.dim() == 1 ? total : b * (targets.dim() == 2 ? targets.size(1) : 0);
    total += target_lengths[b];
  }
  if (targets.dim() == 1) {
    TORCH_CHECK(targets.size(0) == total, "Expected tensor to have size ", total, " at dimension 0, but got size ",
                targets.size(0), " for argument #2 'targets'", where);
  } else {
    TORCH_CHECK(targets.dim() == 2, "ctc_loss: expected 1-D (concatenated) or 2-D (padded) targets, got ", targets.sizes());
    TORCH_CHECK(targets.size(0) == s.batch, "Expected tensor to have size ", s.batch, " at dimension 0, but got size ",
                targets.size(0), " for argument #2 'targets'", where);
    TORCH_CHECK(targets.size(1) >= s.max_target, "Expected tensor to have size at least ", s.max_target,
                " at dimension 1, but got size ", targets.size(1), " for argument #2 'targets'", where);
  }
  plan.targets = targets.to(log_probs.device(), at::kLong).contiguous();
  plan.offsets = at::tensor(offsets, at::kLong).to(log_probs.device());
  plan.input_lengths = at::tensor(input_lengths.vec(), at::kLong).to(log_probs.device());
  plan.target_lengths = at::tensor(target_lengths.vec(), at::kLong).to(log_probs.device());
  return plan;
}

bool ctc_native(const at::Tensor& log_probs, const at::Tensor& targets) {
  return (log_probs.scalar_type() == at::kFloat || log_probs.scalar_type() == at::kDouble) &&
         c10::isIntegralType(targets.scalar_type(), false);
}

std::vector<int64_t> lengths_of(const at::Tensor& lengths, const char* name) {
  TORCH_CHECK(c10::isIntegralType(lengths.scalar_type(), false), name, " must be integral");
  const at::Tensor host = lengths.to(at::kCPU, at::kLong).contiguous();
  return {host.const_data_ptr<int64_t>(), host.const_data_ptr<int64_t>() + host.numel()};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> ctc_loss(const at::Tensor& log_probs, const at::Tensor& targets,
                                            c10::IntArrayRef input_lengths, c10::IntArrayRef target_lengths, int64_t blank,
                                            bool zero_infinity) {
  if (!ctc_native(log_probs, targets)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_ctc_loss)>::call(
        log_probs, targets, input_lengths, target_lengths, blank, zero_infinity);
  }
  check_same_device("aten::_ctc_loss", log_probs.device(), {&targets});
  const CtcPlan plan = plan_ctc(log_probs, targets, input_lengths, target_lengths, blank);
  const kernels::CtcShape s = plan.shape;
  const at::Tensor lp = log_probs.contiguous();
  at::Tensor nll = at::empty({s.batch}, lp.options());
  at::Tensor log_alpha = at::empty({s.batch, s.max_time, 2 * s.max_target + 1}, lp.options());
  if (s.batch > 0) {
    const kernels::DType dtype = to_kernel_dtype(lp.scalar_type());
    const void* plp = lp.data_ptr();
    const int64_t* pt = plan.targets.const_data_ptr<int64_t>();
    const int64_t* po = plan.offsets.const_data_ptr<int64_t>();
    const int64_t* pil = plan.input_lengths.const_data_ptr<int64_t>();
    const int64_t* ptl = plan.target_lengths.const_data_ptr<int64_t>();
    void* pn = nll.data_ptr();
    void* pa = log_alpha.data_ptr();
    enqueue(nll, "aten::_ctc_loss", {&lp, &plan.targets, &plan.offsets, &plan.input_lengths, &plan.target_lengths},
            [=] { kernels::ctc_loss(dtype, s, plp, pt, po, pil, ptl, pn, pa); });
  }
  return {nll, log_alpha};
}

std::tuple<at::Tensor, at::Tensor> ctc_loss_tensor(const at::Tensor& log_probs, const at::Tensor& targets,
                                                   const at::Tensor& input_lengths, const at::Tensor& target_lengths,
                                                   int64_t blank, bool zero_infinity) {
  return losses::ctc_loss(log_probs, targets, lengths_of(input_lengths, "input_lengths"),
                          lengths_of(target_lengths, "target_lengths"), blank, zero_infinity);
}

at::Tensor ctc_loss_backward(const at::Tensor& grad, const at::Tensor& log_probs, const at::Tensor& targets,
                             c10::IntArrayRef input_lengths, c10::IntArrayRef target_lengths, const at::Tensor& nll,
                             const at::Tensor& log_alpha, int64_t blank, bool zero_infinity) {
  if (!ctc_native(log_probs, targets)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_ctc_loss_backward)>::call(
        grad, log_probs, targets, input_lengths, target_lengths, nll, log_alpha, blank, zero_infinity);
  }
  check_same_device("aten::_ctc_loss_backward", log_probs.device(), {&grad, &targets, &nll, &log_alpha});
  const CtcPlan plan = plan_ctc(log_probs, targets, input_lengths, target_lengths, blank);
  const kernels::CtcShape s = plan.shape;
  TORCH_CHECK(grad.numel() == s.batch && nll.numel() == s.batch &&
                  log_alpha.sizes() == c10::IntArrayRef({s.batch, s.max_time, 2 * s.max_target + 1}),
              "_ctc_loss_backward: expected grad and neg_log_likelihood of ", s.batch, " elements and log_alpha of sizes ",
              c10::IntArrayRef({s.batch, s.max_time, 2 * s.max_target + 1}), ", got ", grad.sizes(), ", ", nll.sizes(),
              " and ", log_alpha.sizes());
  const at::Tensor lp = log_probs.contiguous(), g = grad.to(lp.scalar_type()).contiguous();
  const at::Tensor loss = nll.to(lp.scalar_type()).contiguous();  // log_alpha: the kernel recomputes it in double
  at::Tensor grad_in = at::empty(lp.sizes(), lp.options());
  if (grad_in.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(lp.scalar_type());
    const void* pg = g.data_ptr();
    const void* plp = lp.data_ptr();
    const int64_t* pt = plan.targets.const_data_ptr<int64_t>();
    const int64_t* po = plan.offsets.const_data_ptr<int64_t>();
    const int64_t* pil = plan.input_lengths.const_data_ptr<int64_t>();
    const int64_t* ptl = plan.target_lengths.const_data_ptr<int64_t>();
    const void* pn = loss.data_ptr();
    void* pgi = grad_in.data_ptr();
    enqueue(grad_in, "aten::_ctc_loss_backward",
            {&g, &lp, &plan.targets, &plan.offsets, &plan.input_lengths, &plan.target_lengths, &loss}, [=] {
              kernels::ctc_loss_backward(dtype, s, pg, 1, plp, pt, po, pil, ptl, pn, zero_infinity, pgi);
            });
  }
  return grad_in;
}

at::Tensor ctc_loss_backward_tensor(const at::Tensor& grad, const at::Tensor& log_probs, const at::Tensor& targets,
                                    const at::Tensor& input_lengths, const at::Tensor& target_lengths, const at::Tensor& nll,
                                    const at::Tensor& log_alpha, int64_t blank, bool zero_infinity) {
  return losses::ctc_loss_backward(grad, log_probs, targets, lengths_of(input_lengths, "input_lengths"),
                                   lengths_of(target_lengths, "target_lengths"), nll, log_alpha, blank, zero_infinity);
}

}  // namespace losses

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_ctc_loss", TORCH_FN(losses::ctc_loss));
  m.impl("_ctc_loss.Tensor", TORCH_FN(losses::ctc_loss_tensor));
  m.impl("_ctc_loss_backward", TORCH_FN(losses::ctc_loss_backward));
  m.impl("_ctc_loss_backward.Tensor", TORCH_FN(losses::ctc_loss_backward_tensor));
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
