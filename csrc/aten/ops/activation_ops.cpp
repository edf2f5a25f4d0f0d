// Parameterized activations on neuron (leaky_relu, elu, softplus, hardtanh, hardswish,
// hardsigmoid, mish, log_sigmoid, threshold, nan_to_num) and their backward ops, built on
// TensorIterator like the other pointwise ops and run by csrc/kernels/activation; glu composed
// from native ops.
#include <ATen/TensorIterator.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/elu_backward_ops.h>
#include <ATen/ops/elu_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/hardshrink_backward_ops.h>
#include <ATen/ops/hardshrink_ops.h>
#include <ATen/ops/hardsigmoid_backward_ops.h>
#include <ATen/ops/hardsigmoid_ops.h>
#include <ATen/ops/hardswish_backward_ops.h>
#include <ATen/ops/hardswish_ops.h>
#include <ATen/ops/hardtanh_backward_ops.h>
#include <ATen/ops/hardtanh_ops.h>
#include <ATen/ops/leaky_relu_backward_ops.h>
#include <ATen/ops/leaky_relu_ops.h>
#include <ATen/ops/log_sigmoid_backward_ops.h>
#include <ATen/ops/log_sigmoid_forward_ops.h>
#include <ATen/ops/mish_ops.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/nan_to_num_ops.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/round_ops.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/softshrink_backward_ops.h>
#include <ATen/ops/softshrink_ops.h>
#include <ATen/ops/softplus_backward_ops.h>
#include <ATen/ops/softplus_ops.h>
#include <ATen/ops/threshold_ops.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <tuple>

#include "aten/fallback/cpu_fallback.h"
#include "aten/ops/elementwise_launch.h"
#include "kernels/activation.h"

namespace torchneuron::aten {
namespace activation {
namespace {

using kernels::ActivationOp;
using kernels::ActivationParams;

// Every operand in the output's floating dtype: what the kernels take.
bool launchable(const at::TensorIteratorBase& iter, kernels::ElementwiseArgs& args) {
  if (!to_args(iter, args, iter.dtype(0))) return false;
  if (!kernels::activation_supported(args.dtypes[0])) return false;
  for (int k = 1; k < args.num_operands; ++k) {
    if (args.dtypes[k] != args.dtypes[0]) return false;
  }
  return true;
}

bool run_forward(const at::Tensor& self, at::Tensor& result, ActivationOp op, const ActivationParams& params,
                 const char* name) {
  at::TensorBase out = result;
  auto iter = at::TensorIterator::unary_op(out, self);
  kernels::ElementwiseArgs args;
  if (!launchable(iter, args)) return false;
  launch(iter, name, args, [op, params](const kernels::ElementwiseArgs& a) { kernels::activation(op, a, params); });
  return true;
}

bool run_backward(const at::Tensor& grad, const at::Tensor& saved, at::Tensor& result, ActivationOp op,
                  const ActivationParams& params, const char* name) {
  at::TensorBase out = result;
  auto iter = at::TensorIterator::borrowing_binary_op(out, grad, saved);
  kernels::ElementwiseArgs args;
  if (!launchable(iter, args)) return false;
  launch(iter, name, args,
         [op, params](const kernels::ElementwiseArgs& a) { kernels::activation_backward(op, a, params); });
  return true;
}

at::Tensor empty_for(const at::Tensor& self) { return at::empty({0}, self.options()); }

// The result CPU allocates for a backward whose iterator takes the saved tensor before the
// gradient (leaky_relu_backward): where their layouts differ, the saved tensor's wins.
at::Tensor empty_saved_first(const at::Tensor& grad, const at::Tensor& saved) {
  at::TensorBase unset;
  return at::Tensor(at::TensorIterator::borrowing_binary_op(unset, saved, grad).output());
}

}  // namespace

// Forward ops: name(self, params...) with .out and in-place forms. FALLBACK_ARGS lists the
// op's arguments after self, for the counted CPU fallback.
#define NEURON_ACTIVATION(name, KOP, PARAMS, SIGNATURE, FALLBACK_ARGS)                                         \
  at::Tensor& name##_out(const at::Tensor& self SIGNATURE, at::Tensor& result) {                               \
    if (!run_forward(self, result, KOP, PARAMS, "aten::" #name)) {                                              \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(name, out)>::call(self FALLBACK_ARGS, result); \
    }                                                                                                           \
    return result;                                                                                              \
  }                                                                                                             \
  at::Tensor name(const at::Tensor& self SIGNATURE) {                                                           \
    at::Tensor result = empty_for(self);                                                                        \
    return activation::name##_out(self FALLBACK_ARGS, result);                                                  \
  }                                                                                                             \
  at::Tensor& name##_(at::Tensor& self SIGNATURE) { return activation::name##_out(self FALLBACK_ARGS, self); }

#define COMMA ,
NEURON_ACTIVATION(leaky_relu, ActivationOp::kLeakyRelu, (ActivationParams{slope.toDouble()}),
                  COMMA const c10::Scalar& slope, COMMA slope)
NEURON_ACTIVATION(elu, ActivationOp::kElu,
                  (ActivationParams{alpha.toDouble(), scale.toDouble(), input_scale.toDouble()}),
                  COMMA const c10::Scalar& alpha COMMA const c10::Scalar& scale COMMA const c10::Scalar& input_scale,
                  COMMA alpha COMMA scale COMMA input_scale)
NEURON_ACTIVATION(softplus, ActivationOp::kSoftplus, (ActivationParams{beta.toDouble(), threshold.toDouble()}),
                  COMMA const c10::Scalar& beta COMMA const c10::Scalar& threshold, COMMA beta COMMA threshold)
NEURON_ACTIVATION(hardtanh, ActivationOp::kHardtanh, (ActivationParams{lo.toDouble(), hi.toDouble()}),
                  COMMA const c10::Scalar& lo COMMA const c10::Scalar& hi, COMMA lo COMMA hi)
NEURON_ACTIVATION(hardswish, ActivationOp::kHardswish, ActivationParams{}, , )
NEURON_ACTIVATION(hardsigmoid, ActivationOp::kHardsigmoid, ActivationParams{}, , )
NEURON_ACTIVATION(mish, ActivationOp::kMish, ActivationParams{}, , )
NEURON_ACTIVATION(threshold, ActivationOp::kThreshold, (ActivationParams{threshold.toDouble(), value.toDouble()}),
                  COMMA const c10::Scalar& threshold COMMA const c10::Scalar& value, COMMA threshold COMMA value)
NEURON_ACTIVATION(softshrink, ActivationOp::kSoftshrink, (ActivationParams{lambd.toDouble()}),
                  COMMA const c10::Scalar& lambd, COMMA lambd)
NEURON_ACTIVATION(hardshrink, ActivationOp::kHardshrink, (ActivationParams{lambd.toDouble()}),
                  COMMA const c10::Scalar& lambd, COMMA lambd)
#undef NEURON_ACTIVATION

// Backward ops: name(grad, saved, params...) with their .grad_input form; SAVED_FIRST where CPU's
// iterator orders the saved tensor first (its layout decides the result's).
#define NEURON_ACTIVATION_BACKWARD(name, OUT_OVERLOAD, KOP, PARAMS, SIGNATURE, FALLBACK_ARGS, SAVED_FIRST)        \
  at::Tensor& name##_out(const at::Tensor& grad, const at::Tensor& self SIGNATURE, at::Tensor& result) {           \
    if (!run_backward(grad, self, result, KOP, PARAMS, "aten::" #name)) {                                           \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(name, OUT_OVERLOAD)>::call(                \
          grad, self FALLBACK_ARGS, result);                                                                        \
    }                                                                                                               \
    return result;                                                                                                  \
  }                                                                                                                 \
  at::Tensor name(const at::Tensor& grad, const at::Tensor& self SIGNATURE) {                                       \
    at::Tensor result = SAVED_FIRST ? empty_saved_first(grad, self) : empty_for(grad);                              \
    return activation::name##_out(grad, self FALLBACK_ARGS, result);                                                \
  }

NEURON_ACTIVATION_BACKWARD(leaky_relu_backward, grad_input, ActivationOp::kLeakyRelu, (ActivationParams{slope.toDouble()}),
                           COMMA const c10::Scalar& slope COMMA bool self_is_result, COMMA slope COMMA self_is_result, true)
NEURON_ACTIVATION_BACKWARD(softplus_backward, grad_input, ActivationOp::kSoftplus,
                           (ActivationParams{beta.toDouble(), threshold.toDouble()}),
                           COMMA const c10::Scalar& beta COMMA const c10::Scalar& threshold, COMMA beta COMMA threshold, false)
NEURON_ACTIVATION_BACKWARD(hardtanh_backward, grad_input, ActivationOp::kHardtanh,
                           (ActivationParams{lo.toDouble(), hi.toDouble()}),
                           COMMA const c10::Scalar& lo COMMA const c10::Scalar& hi, COMMA lo COMMA hi, false)
NEURON_ACTIVATION_BACKWARD(hardswish_backward, out, ActivationOp::kHardswish, ActivationParams{}, , , false)
NEURON_ACTIVATION_BACKWARD(hardsigmoid_backward, grad_input, ActivationOp::kHardsigmoid, ActivationParams{}, , , false)
NEURON_ACTIVATION_BACKWARD(softshrink_backward, grad_input, ActivationOp::kSoftshrink, (ActivationParams{lambd.toDouble()}),
                           COMMA const c10::Scalar& lambd, COMMA lambd, false)
NEURON_ACTIVATION_BACKWARD(hardshrink_backward, grad_input, ActivationOp::kHardshrink, (ActivationParams{lambd.toDouble()}),
                           COMMA const c10::Scalar& lambd, COMMA lambd, false)
#undef NEURON_ACTIVATION_BACKWARD
#undef COMMA

// round(x, decimals): CPU PyTorch scales by 10^|decimals| in the compute type.
at::Tensor& round_decimals_out(const at::Tensor& self, int64_t decimals, at::Tensor& result) {
  const ActivationParams params{std::pow(10.0, static_cast<double>(decimals < 0 ? -decimals : decimals)),
                                decimals < 0 ? 1.0 : 0.0};
  if (!run_forward(self, result, ActivationOp::kRoundDecimals, params, "aten::round.decimals")) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(round, decimals_out)>::call(self, decimals, result);
  }
  return result;
}

at::Tensor round_decimals(const at::Tensor& self, int64_t decimals) {
  at::Tensor result = empty_for(self);
  return activation::round_decimals_out(self, decimals, result);
}

at::Tensor& round_decimals_(at::Tensor& self, int64_t decimals) { return activation::round_decimals_out(self, decimals, self); }

// elu_backward takes its saved operand last, and it may be the result (is_result).
at::Tensor& elu_backward_out(const at::Tensor& grad, const c10::Scalar& alpha, const c10::Scalar& scale,
                             const c10::Scalar& input_scale, bool is_result, const at::Tensor& saved, at::Tensor& result) {
  TORCH_CHECK(!is_result || alpha.toDouble() >= 0.0, "In-place elu backward calculation is triggered with a negative slope which is not supported. "
              "This is caused by calling in-place forward function with a negative slope, please call out-of-place version instead.");
  const ActivationParams params{alpha.toDouble(), scale.toDouble(), input_scale.toDouble(), is_result ? 1.0 : 0.0};
  if (!run_backward(grad, saved, result, ActivationOp::kElu, params, "aten::elu_backward")) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(elu_backward, grad_input)>::call(
        grad, alpha, scale, input_scale, is_result, saved, result);
  }
  return result;
}

at::Tensor elu_backward(const at::Tensor& grad, const c10::Scalar& alpha, const c10::Scalar& scale,
                        const c10::Scalar& input_scale, bool is_result, const at::Tensor& saved) {
  at::Tensor result = empty_for(grad);
  return activation::elu_backward_out(grad, alpha, scale, input_scale, is_result, saved, result);
}

// log_sigmoid: the CPU kernel's buffer is unused by its backward; it is returned empty.
std::tuple<at::Tensor&, at::Tensor&> log_sigmoid_forward_out(const at::Tensor& self, at::Tensor& output, at::Tensor& buffer) {
  if (!run_forward(self, output, ActivationOp::kLogSigmoid, ActivationParams{}, "aten::log_sigmoid_forward")) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(log_sigmoid_forward, output)>::call(self, output, buffer);
  }
  buffer.resize_({0});
  return {output, buffer};
}

std::tuple<at::Tensor, at::Tensor> log_sigmoid_forward(const at::Tensor& self) {
  // CPU's output is contiguous whatever self's layout.
  at::Tensor output = at::empty(self.sizes(), self.options()), buffer = empty_for(self);
  activation::log_sigmoid_forward_out(self, output, buffer);
  return {output, buffer};
}

at::Tensor& log_sigmoid_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& buffer,
                                     at::Tensor& result) {
  if (!run_backward(grad, self, result, ActivationOp::kLogSigmoid, ActivationParams{}, "aten::log_sigmoid_backward")) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(log_sigmoid_backward, grad_input)>::call(
        grad, self, buffer, result);
  }
  return result;
}

at::Tensor log_sigmoid_backward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& buffer) {
  at::Tensor result = empty_for(grad);
  return activation::log_sigmoid_backward_out(grad, self, buffer, result);
}

// nan_to_num: the replacements default to the dtype's largest and lowest finite values.
at::Tensor& nan_to_num_out(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                           std::optional<double> neginf, at::Tensor& result) {
  TORCH_CHECK(self.scalar_type() == result.scalar_type(), "nan_to_num: dtype of out: ", result.scalar_type(),
              " should be same as input: ", self.scalar_type());
  if (at::isIntegralType(self.scalar_type(), /*includeBool=*/true)) {
    at::native::resize_output(result, self.sizes());
    return result.copy_(self);
  }
  double largest = std::numeric_limits<double>::max();
  switch (self.scalar_type()) {
    case at::kFloat: largest = std::numeric_limits<float>::max(); break;
    case at::kBFloat16: largest = static_cast<double>(std::numeric_limits<c10::BFloat16>::max()); break;
    case at::kHalf: largest = static_cast<double>(std::numeric_limits<c10::Half>::max()); break;
    default: break;
  }
  const ActivationParams params{nan.value_or(0.0), posinf.value_or(largest), neginf.value_or(-largest)};
  if (!run_forward(self, result, ActivationOp::kNanToNum, params, "aten::nan_to_num")) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(nan_to_num, out)>::call(self, nan, posinf, neginf, result);
  }
  return result;
}

at::Tensor nan_to_num(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                      std::optional<double> neginf) {
  at::Tensor result = empty_for(self);
  return activation::nan_to_num_out(self, nan, posinf, neginf, result);
}

at::Tensor& nan_to_num_(at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                        std::optional<double> neginf) {
  return activation::nan_to_num_out(self, nan, posinf, neginf, self);
}

// glu(x) = a * sigmoid(b) for the two halves a, b of x along dim, composed from native ops.
at::Tensor glu(const at::Tensor& self, int64_t dim) {
  TORCH_CHECK(self.dim() > 0, "glu does not support scalars because halving size must be even");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(self.size(d) % 2 == 0, "Halving dimension must be even, but dimension ", d, " is size ", self.size(d));
  const auto halves = self.chunk(2, d);
  return at::mul(halves[0], at::sigmoid(halves[1]));
}

at::Tensor& glu_out(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  const at::Tensor value = activation::glu(self, dim);
  at::native::resize_output(out, value.sizes());
  return out.copy_(value);
}

at::Tensor glu_backward(const at::Tensor& grad, const at::Tensor& self, int64_t dim) {
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  const auto halves = self.chunk(2, d);
  const at::Tensor gate = at::sigmoid(halves[1]);
  const at::Tensor grad_a = at::mul(grad, gate);
  const at::Tensor grad_b = at::mul(at::mul(grad_a, halves[0]), at::rsub(gate, 1));
  return at::cat({grad_a, grad_b}, d);
}

at::Tensor& glu_backward_out(const at::Tensor& grad, const at::Tensor& self, int64_t dim, at::Tensor& grad_input) {
  const at::Tensor value = activation::glu_backward(grad, self, dim);
  at::native::resize_output(grad_input, value.sizes());
  return grad_input.copy_(value);
}

}  // namespace activation

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define REGISTER_FORWARD(name)                          \
  m.impl(#name, TORCH_FN(activation::name));            \
  m.impl(#name ".out", TORCH_FN(activation::name##_out)); \
  m.impl(#name "_", TORCH_FN(activation::name##_));
  REGISTER_FORWARD(leaky_relu)
  REGISTER_FORWARD(elu)
  REGISTER_FORWARD(hardtanh)
  REGISTER_FORWARD(hardswish)
  REGISTER_FORWARD(hardsigmoid)
  REGISTER_FORWARD(mish)
  REGISTER_FORWARD(threshold)
  REGISTER_FORWARD(nan_to_num)
#undef REGISTER_FORWARD
  m.impl("softshrink", TORCH_FN(activation::softshrink));
  m.impl("softshrink.out", TORCH_FN(activation::softshrink_out));
  m.impl("hardshrink", TORCH_FN(activation::hardshrink));
  m.impl("hardshrink.out", TORCH_FN(activation::hardshrink_out));
  m.impl("softshrink_backward", TORCH_FN(activation::softshrink_backward));
  m.impl("softshrink_backward.grad_input", TORCH_FN(activation::softshrink_backward_out));
  m.impl("hardshrink_backward", TORCH_FN(activation::hardshrink_backward));
  m.impl("hardshrink_backward.grad_input", TORCH_FN(activation::hardshrink_backward_out));
  m.impl("round.decimals", TORCH_FN(activation::round_decimals));
  m.impl("round.decimals_out", TORCH_FN(activation::round_decimals_out));
  m.impl("round_.decimals", TORCH_FN(activation::round_decimals_));
  m.impl("softplus", TORCH_FN(activation::softplus));
  m.impl("softplus.out", TORCH_FN(activation::softplus_out));
  m.impl("leaky_relu_backward", TORCH_FN(activation::leaky_relu_backward));
  m.impl("leaky_relu_backward.grad_input", TORCH_FN(activation::leaky_relu_backward_out));
  m.impl("softplus_backward", TORCH_FN(activation::softplus_backward));
  m.impl("softplus_backward.grad_input", TORCH_FN(activation::softplus_backward_out));
  m.impl("hardtanh_backward", TORCH_FN(activation::hardtanh_backward));
  m.impl("hardtanh_backward.grad_input", TORCH_FN(activation::hardtanh_backward_out));
  m.impl("hardswish_backward", TORCH_FN(activation::hardswish_backward));
  m.impl("hardswish_backward.out", TORCH_FN(activation::hardswish_backward_out));
  m.impl("hardsigmoid_backward", TORCH_FN(activation::hardsigmoid_backward));
  m.impl("hardsigmoid_backward.grad_input", TORCH_FN(activation::hardsigmoid_backward_out));
  m.impl("elu_backward", TORCH_FN(activation::elu_backward));
  m.impl("elu_backward.grad_input", TORCH_FN(activation::elu_backward_out));
  m.impl("log_sigmoid_forward", TORCH_FN(activation::log_sigmoid_forward));
  m.impl("log_sigmoid_forward.output", TORCH_FN(activation::log_sigmoid_forward_out));
  m.impl("log_sigmoid_backward", TORCH_FN(activation::log_sigmoid_backward));
  m.impl("log_sigmoid_backward.grad_input", TORCH_FN(activation::log_sigmoid_backward_out));
  m.impl("glu", TORCH_FN(activation::glu));
  m.impl("glu.out", TORCH_FN(activation::glu_out));
  m.impl("glu_backward", TORCH_FN(activation::glu_backward));
  m.impl("glu_backward.grad_input", TORCH_FN(activation::glu_backward_out));
}

}  // namespace torchneuron::aten
