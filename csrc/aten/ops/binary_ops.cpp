// Binary pointwise ATen operators on neuron (arithmetic, division modes, remainder, pow,
// bitwise and logical ops, comparisons, and the activations' backward ops): ATen's
// TensorIterator does broadcasting, type promotion and output allocation on the host,
// csrc/kernels/elementwise runs the loop on the queue. Cases the kernels do not cover (complex,
// odd output dtypes) take the counted CPU fallback.
// Registrations for these operators live at the end of this file, generated with the kernels.
#include <ATen/TensorIterator.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/atan2_ops.h>
#include <ATen/ops/bitwise_and_ops.h>
#include <ATen/ops/bitwise_or_ops.h>
#include <ATen/ops/bitwise_xor_ops.h>
#include <ATen/ops/copysign_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/eq_ops.h>
#include <ATen/ops/fmax_ops.h>
#include <ATen/ops/fmin_ops.h>
#include <ATen/ops/fmod_ops.h>
#include <ATen/ops/ge_ops.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/gt_ops.h>
#include <ATen/ops/heaviside_ops.h>
#include <ATen/ops/hypot_ops.h>
#include <ATen/ops/le_ops.h>
#include <ATen/ops/logaddexp2_ops.h>
#include <ATen/ops/logaddexp_ops.h>
#include <ATen/ops/logical_and_ops.h>
#include <ATen/ops/logical_or_ops.h>
#include <ATen/ops/logical_xor_ops.h>
#include <ATen/ops/lt_ops.h>
#include <ATen/ops/maximum_ops.h>
#include <ATen/ops/minimum_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/ne_ops.h>
#include <ATen/ops/pow_ops.h>
#include <ATen/ops/remainder_ops.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/sigmoid_backward_ops.h>
#include <ATen/ops/silu_backward_ops.h>
#include <ATen/ops/special_xlog1py_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/tanh_backward_ops.h>
#include <ATen/ops/threshold_backward_ops.h>
#include <ATen/ops/xlogy_ops.h>
#include <torch/library.h>

#include <optional>

#include "aten/device/neuron_tensor.h"
#include "aten/fallback/cpu_fallback.h"
#include "aten/ops/elementwise_launch.h"
#include "kernels/elementwise.h"

namespace torchneuron::aten {
namespace {

using kernels::BinaryOp;

void check_alpha(c10::ScalarType dtype, const c10::Scalar& alpha) {
  TORCH_CHECK(!alpha.isBoolean() || dtype == c10::ScalarType::Bool,
              "Boolean alpha only supported for Boolean results.");
  TORCH_CHECK(at::isFloatingType(dtype) || at::isComplexType(dtype) || alpha.isIntegral(true),
              "For integral input tensors, argument alpha must not be a floating point number.");
}

void check_sub(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.scalar_type() != c10::kBool || other.scalar_type() != c10::kBool,
              "Subtraction, the `-` operator, with two bool tensors is not supported. "
              "Use the `^` or `logical_xor()` operator instead.");
  TORCH_CHECK(self.scalar_type() != c10::kBool && other.scalar_type() != c10::kBool,
              "Subtraction, the `-` operator, with a bool tensor is not supported. "
              "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
}

}  // namespace

// Qualified calls (eltwise::x_out) keep ADL from also finding at::x_out.
namespace eltwise {

// ---- binary --------------------------------------------------------------------------------

at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha,
                    at::Tensor& result) {
  at::TensorBase out = result;
  auto iter = at::TensorIterator::binary_op(out, self, other);
  check_alpha(iter.common_dtype(), alpha);
  if (alpha.isComplex() || !launch_binary(iter, BinaryOp::kAdd, "aten::add", false, to_op_scalar(alpha))) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(add, out)>::call(self, other, alpha, result);
  }
  return result;
}

at::Tensor add_functional(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  at::TensorBase out;
  auto iter = at::TensorIterator::binary_op(out, self, other);
  check_alpha(iter.common_dtype(), alpha);
  if (alpha.isComplex() || !launch_binary(iter, BinaryOp::kAdd, "aten::add", false, to_op_scalar(alpha))) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(add, Tensor)>::call(self, other, alpha);
  }
  return iter.output();
}

at::Tensor& add_inplace(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  return eltwise::add_out(self, other, alpha, self);
}

at::Tensor& sub_out(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha,
                    at::Tensor& result) {
  check_sub(self, other);
  at::TensorBase out = result;
  auto iter = at::TensorIterator::binary_op(out, self, other);
  check_alpha(iter.common_dtype(), alpha);
  if (alpha.isComplex() || !launch_binary(iter, BinaryOp::kSub, "aten::sub", false, to_op_scalar(alpha))) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(sub, out)>::call(self, other, alpha, result);
  }
  return result;
}

at::Tensor sub_functional(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  check_sub(self, other);
  at::TensorBase out;
  auto iter = at::TensorIterator::binary_op(out, self, other);
  check_alpha(iter.common_dtype(), alpha);
  if (alpha.isComplex() || !launch_binary(iter, BinaryOp::kSub, "aten::sub", false, to_op_scalar(alpha))) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(sub, Tensor)>::call(self, other, alpha);
  }
  return iter.output();
}

at::Tensor& sub_inplace(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  return eltwise::sub_out(self, other, alpha, self);
}

// rsub(self, other) = other - alpha * self.
at::Tensor rsub_functional(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  return eltwise::sub_functional(other, self, alpha);
}

// name: ATen op with overloads name.Tensor / name.out (OUT_OVERLOAD) / name_.Tensor; ITER:
// TensorIterator factory; BOOL_OUT: comparisons write bool.
#define NEURON_BINARY_WITH_OUT(name, KOP, ITER, BOOL_OUT, OUT_OVERLOAD, FUNCTIONAL_OVERLOAD)  \
  at::Tensor& name##_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& result) { \
    at::TensorBase out = result;                                                               \
    auto iter = at::TensorIterator::ITER(out, self, other);                                    \
    if (!launch_binary(iter, KOP, "aten::" #name, BOOL_OUT)) {                                 \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, OUT_OVERLOAD>::call(self, other, result); \
    }                                                                                          \
    return result;                                                                             \
  }                                                                                            \
  at::Tensor name##_functional(const at::Tensor& self, const at::Tensor& other) {              \
    at::TensorBase out;                                                                        \
    auto iter = at::TensorIterator::ITER(out, self, other);                                    \
    if (!launch_binary(iter, KOP, "aten::" #name, BOOL_OUT)) {                                 \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, FUNCTIONAL_OVERLOAD>::call(self, other); \
    }                                                                                          \
    return iter.output();                                                                      \
  }                                                                                            \
  at::Tensor& name##_inplace(at::Tensor& self, const at::Tensor& other) {                      \
    return eltwise::name##_out(self, other, self);                                                      \
  }
#define NEURON_BINARY(name, KOP, ITER, BOOL_OUT, FUNCTIONAL_OVERLOAD) \
  NEURON_BINARY_WITH_OUT(name, KOP, ITER, BOOL_OUT, ATEN_OP2(name, out), FUNCTIONAL_OVERLOAD)

NEURON_BINARY(mul, BinaryOp::kMul, binary_op, false, ATEN_OP2(mul, Tensor))
NEURON_BINARY(div, BinaryOp::kDiv, binary_float_op, false, ATEN_OP2(div, Tensor))
NEURON_BINARY(maximum, BinaryOp::kMaximum, binary_op, false, ATEN_OP(maximum))
NEURON_BINARY(minimum, BinaryOp::kMinimum, binary_op, false, ATEN_OP(minimum))
NEURON_BINARY(atan2, BinaryOp::kAtan2, binary_float_op, false, ATEN_OP(atan2))
NEURON_BINARY_WITH_OUT(xlogy, BinaryOp::kXlogy, binary_float_op, false, ATEN_OP2(xlogy, OutTensor), ATEN_OP2(xlogy, Tensor))
NEURON_BINARY(logical_and, BinaryOp::kLogicalAnd, comparison_op, true, ATEN_OP(logical_and))
NEURON_BINARY(logical_or, BinaryOp::kLogicalOr, comparison_op, true, ATEN_OP(logical_or))
NEURON_BINARY(logical_xor, BinaryOp::kLogicalXor, comparison_op, true, ATEN_OP(logical_xor))
NEURON_BINARY(logaddexp, BinaryOp::kLogaddexp, binary_op, false, ATEN_OP(logaddexp))
NEURON_BINARY(logaddexp2, BinaryOp::kLogaddexp2, binary_op, false, ATEN_OP(logaddexp2))
NEURON_BINARY(copysign, BinaryOp::kCopysign, binary_float_op, false, ATEN_OP2(copysign, Tensor))
NEURON_BINARY(hypot, BinaryOp::kHypot, binary_op, false, ATEN_OP(hypot))
NEURON_BINARY(fmax, BinaryOp::kFmax, binary_op, false, ATEN_OP(fmax))
NEURON_BINARY(fmin, BinaryOp::kFmin, binary_op, false, ATEN_OP(fmin))
NEURON_BINARY(special_xlog1py, BinaryOp::kXlog1py, binary_float_op, false, ATEN_OP(special_xlog1py))
#undef NEURON_BINARY

// heaviside requires one dtype for both operands, as CPU PyTorch does.
at::Tensor& heaviside_out(const at::Tensor& self, const at::Tensor& values, at::Tensor& result) {
  TORCH_CHECK(!self.is_complex() && !values.is_complex() && !result.is_complex(),
              "heaviside is not yet implemented for complex tensors.");
  TORCH_CHECK(self.dtype() == values.dtype(), "heaviside is not yet implemented for tensors with different dtypes");
  at::TensorBase out = result;
  auto iter = at::TensorIterator::binary_op(out, self, values);
  if (!launch_binary(iter, BinaryOp::kHeaviside, "aten::heaviside", false)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(heaviside, out)>::call(self, values, result);
  }
  return result;
}

at::Tensor heaviside_functional(const at::Tensor& self, const at::Tensor& values) {
  at::Tensor result = at::empty({0}, self.options());
  return eltwise::heaviside_out(self, values, result);
}

at::Tensor& heaviside_inplace(at::Tensor& self, const at::Tensor& values) {
  return eltwise::heaviside_out(self, values, self);
}

// div with rounding_mode (None: true division, "trunc", "floor") and floor_divide.
at::Tensor& div_mode_out(const at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> mode,
                         at::Tensor& result) {
  TORCH_CHECK(!mode.has_value() || *mode == "trunc" || *mode == "floor",
              "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '", *mode, "'");
  if (!mode.has_value()) return eltwise::div_out(self, other, result);
  at::TensorBase out = result;
  auto iter = at::TensorIterator::binary_op(out, self, other);
  const BinaryOp op = *mode == "trunc" ? BinaryOp::kDivTrunc : BinaryOp::kDivFloor;
  if (!launch_binary(iter, op, "aten::div", false)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(div, out_mode)>::call(self, other, mode, result);
  }
  return result;
}

at::Tensor div_mode(const at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> mode) {
  if (!mode.has_value()) return eltwise::div_functional(self, other);
  at::Tensor result = at::empty({0}, self.options().dtype(at::result_type(self, other)));
  return eltwise::div_mode_out(self, other, mode, result);
}

at::Tensor& div_mode_(at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> mode) {
  return eltwise::div_mode_out(self, other, mode, self);
}

at::Tensor& floor_divide_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& result) {
  return eltwise::div_mode_out(self, other, c10::string_view("floor"), result);
}

at::Tensor floor_divide(const at::Tensor& self, const at::Tensor& other) {
  return eltwise::div_mode(self, other, c10::string_view("floor"));
}

at::Tensor& floor_divide_(at::Tensor& self, const at::Tensor& other) {
  return eltwise::div_mode_out(self, other, c10::string_view("floor"), self);
}

// remainder and fmod: out overload name.Tensor_out (the Scalar forms wrap the scalar and call these).
NEURON_BINARY_WITH_OUT(remainder, BinaryOp::kRemainder, binary_op, false, ATEN_OP2(remainder, Tensor_out),
                       ATEN_OP2(remainder, Tensor))
NEURON_BINARY_WITH_OUT(fmod, BinaryOp::kFmod, binary_op, false, ATEN_OP2(fmod, Tensor_out), ATEN_OP2(fmod, Tensor))
#undef NEURON_BINARY_WITH_OUT

// remainder(number, tensor): its own op, which ATen does not route through remainder.Tensor.
at::Tensor remainder_scalar_tensor(const c10::Scalar& self, const at::Tensor& other) {
  return eltwise::remainder_functional(wrapped(self), other);
}

#define NEURON_BITWISE(name, KOP)                                                               \
  at::Tensor& name##_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& result) { \
    at::TensorBase out = result;                                                               \
    auto iter = at::TensorIterator::binary_op(out, self, other);                               \
    if (!launch_binary(iter, KOP, "aten::" #name, false)) {                                    \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(name, Tensor_out)>::call(self, other, result); \
    }                                                                                          \
    return result;                                                                             \
  }                                                                                            \
  at::Tensor name##_functional(const at::Tensor& self, const at::Tensor& other) {              \
    at::TensorBase out;                                                                        \
    auto iter = at::TensorIterator::binary_op(out, self, other);                               \
    if (!launch_binary(iter, KOP, "aten::" #name, false)) {                                    \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(name, Tensor)>::call(self, other); \
    }                                                                                          \
    return iter.output();                                                                      \
  }                                                                                            \
  at::Tensor& name##_inplace(at::Tensor& self, const at::Tensor& other) {                      \
    return eltwise::name##_out(self, other, self);                                                      \
  }

NEURON_BITWISE(bitwise_and, BinaryOp::kBitwiseAnd)
NEURON_BITWISE(bitwise_or, BinaryOp::kBitwiseOr)
NEURON_BITWISE(bitwise_xor, BinaryOp::kBitwiseXor)
#undef NEURON_BITWISE

at::Tensor& pow_out(const at::Tensor& self, const at::Tensor& exponent, at::Tensor& result) {
  at::TensorBase out = result;
  auto iter = at::TensorIterator::binary_op(out, self, exponent);
  if (!launch_binary(iter, BinaryOp::kPow, "aten::pow", false)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(pow, Tensor_Tensor_out)>::call(self, exponent, result);
  }
  return result;
}

at::Tensor pow_functional(const at::Tensor& self, const at::Tensor& exponent) {
  at::TensorBase out;
  auto iter = at::TensorIterator::binary_op(out, self, exponent);
  if (!launch_binary(iter, BinaryOp::kPow, "aten::pow", false)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(pow, Tensor_Tensor)>::call(self, exponent);
  }
  return iter.output();
}

at::Tensor& pow_scalar_out(const at::Tensor& self, const c10::Scalar& exponent, at::Tensor& result) {
  at::TensorBase out = result;
  auto iter = at::TensorIterator::binary_op(out, self, wrapped(exponent));
  if (!launch_binary(iter, BinaryOp::kPow, "aten::pow", false)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(pow, Tensor_Scalar_out)>::call(self, exponent, result);
  }
  return result;
}

at::Tensor pow_scalar_functional(const at::Tensor& self, const c10::Scalar& exponent) {
  at::TensorBase out;
  auto iter = at::TensorIterator::binary_op(out, self, wrapped(exponent));
  if (!launch_binary(iter, BinaryOp::kPow, "aten::pow", false)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(pow, Tensor_Scalar)>::call(self, exponent);
  }
  return iter.output();
}

// pow with a scalar base: base ** exponent, the base a weak Python scalar.
at::Tensor& pow_scalar_base_out(const c10::Scalar& base, const at::Tensor& exponent, at::Tensor& result) {
  at::TensorBase out = result;
  auto iter = at::TensorIterator::binary_op(out, wrapped(base), exponent);
  if (!launch_binary(iter, BinaryOp::kPow, "aten::pow", false)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(pow, Scalar_out)>::call(base, exponent, result);
  }
  return result;
}

// Comparisons: name.Tensor, name.Scalar and their out / in-place forms.
#define NEURON_COMPARE(name, KOP)                                                               \
  at::Tensor& name##_tensor_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& result) { \
    at::TensorBase out = result;                                                               \
    auto iter = at::TensorIterator::comparison_op(out, self, other);                           \
    if (!launch_binary(iter, KOP, "aten::" #name, true)) {                                     \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(name, Tensor_out)>::call(self, other, result); \
    }                                                                                          \
    return result;                                                                             \
  }                                                                                            \
  at::Tensor name##_tensor(const at::Tensor& self, const at::Tensor& other) {                  \
    at::TensorBase out;                                                                        \
    auto iter = at::TensorIterator::comparison_op(out, self, other);                           \
    if (!launch_binary(iter, KOP, "aten::" #name, true)) {                                     \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(name, Tensor)>::call(self, other); \
    }                                                                                          \
    return iter.output();                                                                      \
  }                                                                                            \
  at::Tensor& name##_scalar_out(const at::Tensor& self, const c10::Scalar& other, at::Tensor& result) { \
    return eltwise::name##_tensor_out(self, wrapped(other), result);                                     \
  }                                                                                            \
  at::Tensor name##_scalar(const at::Tensor& self, const c10::Scalar& other) {                 \
    return name##_tensor(self, wrapped(other));                                                \
  }                                                                                            \
  at::Tensor& name##_tensor_inplace(at::Tensor& self, const at::Tensor& other) {               \
    return eltwise::name##_tensor_out(self, other, self);                                               \
  }                                                                                            \
  at::Tensor& name##_scalar_inplace(at::Tensor& self, const c10::Scalar& other) {              \
    return eltwise::name##_tensor_out(self, wrapped(other), self);                                      \
  }

NEURON_COMPARE(eq, BinaryOp::kEq)
NEURON_COMPARE(ne, BinaryOp::kNe)
NEURON_COMPARE(lt, BinaryOp::kLt)
NEURON_COMPARE(le, BinaryOp::kLe)
NEURON_COMPARE(gt, BinaryOp::kGt)
NEURON_COMPARE(ge, BinaryOp::kGe)
#undef NEURON_COMPARE

// Backward ops: out = f(grad, saved), in the grad's dtype.
#define NEURON_BACKWARD(name, KOP, OUT_OVERLOAD)                                                \
  at::Tensor& name##_out(const at::Tensor& grad, const at::Tensor& saved, at::Tensor& result) { \
    at::TensorBase out = result;                                                               \
    auto iter = at::TensorIterator::binary_op(out, grad, saved);                               \
    if (!launch_binary(iter, KOP, "aten::" #name, false)) {                                    \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(name, OUT_OVERLOAD)>::call(grad, saved, result); \
    }                                                                                          \
    return result;                                                                             \
  }                                                                                            \
  at::Tensor name##_functional(const at::Tensor& grad, const at::Tensor& saved) {              \
    at::TensorBase out;                                                                        \
    auto iter = at::TensorIterator::binary_op(out, grad, saved);                               \
    if (!launch_binary(iter, KOP, "aten::" #name, false)) {                                    \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(name)>::call(grad, saved); \
    }                                                                                          \
    return iter.output();                                                                      \
  }

NEURON_BACKWARD(sigmoid_backward, BinaryOp::kSigmoidBackward, grad_input)
NEURON_BACKWARD(tanh_backward, BinaryOp::kTanhBackward, grad_input)
NEURON_BACKWARD(silu_backward, BinaryOp::kSiluBackward, grad_input)
#undef NEURON_BACKWARD

at::Tensor& threshold_backward_out(const at::Tensor& grad, const at::Tensor& self,
                                   const c10::Scalar& threshold, at::Tensor& result) {
  at::TensorBase out = result;
  auto iter = at::TensorIterator::binary_op(out, grad, self);
  if (!launch_binary(iter, BinaryOp::kThresholdBackward, "aten::threshold_backward", false,
                     to_op_scalar(threshold))) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(threshold_backward, grad_input)>::call(
        grad, self, threshold, result);
  }
  return result;
}

at::Tensor threshold_backward_functional(const at::Tensor& grad, const at::Tensor& self,
                                         const c10::Scalar& threshold) {
  // CPU's iterator takes self before grad: where their layouts differ, self's lays out the result.
  at::TensorBase unset;
  at::TensorBase out = at::TensorIterator::binary_op(unset, self, grad).output();
  auto iter = at::TensorIterator::binary_op(out, grad, self);
  if (!launch_binary(iter, BinaryOp::kThresholdBackward, "aten::threshold_backward", false,
                     to_op_scalar(threshold))) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(threshold_backward)>::call(grad, self, threshold);
  }
  return iter.output();
}

at::Tensor& gelu_backward_out(const at::Tensor& grad, const at::Tensor& self, c10::string_view approximate,
                              at::Tensor& result) {
  at::TensorBase out = result;
  auto iter = at::TensorIterator::binary_op(out, grad, self);
  const BinaryOp op = approximate == "tanh" ? BinaryOp::kGeluTanhBackward : BinaryOp::kGeluErfBackward;
  if (!launch_binary(iter, op, "aten::gelu_backward", false)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(gelu_backward, grad_input)>::call(
        grad, self, approximate, result);
  }
  return result;
}

at::Tensor gelu_backward_functional(const at::Tensor& grad, const at::Tensor& self, c10::string_view approximate) {
  at::Tensor result = at::empty_like(grad);
  return eltwise::gelu_backward_out(grad, self, approximate, result);
}

}  // namespace eltwise

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace eltwise;
  m.impl("add.Tensor", TORCH_FN(add_functional));
  m.impl("add.out", TORCH_FN(add_out));
  m.impl("add_.Tensor", TORCH_FN(add_inplace));
  m.impl("sub.Tensor", TORCH_FN(sub_functional));
  m.impl("sub.out", TORCH_FN(sub_out));
  m.impl("sub_.Tensor", TORCH_FN(sub_inplace));
  m.impl("rsub.Tensor", TORCH_FN(rsub_functional));
  m.impl("mul.Tensor", TORCH_FN(mul_functional));
  m.impl("mul.out", TORCH_FN(mul_out));
  m.impl("mul_.Tensor", TORCH_FN(mul_inplace));
  m.impl("div.Tensor", TORCH_FN(div_functional));
  m.impl("div.out", TORCH_FN(div_out));
  m.impl("div_.Tensor", TORCH_FN(div_inplace));
  m.impl("div.Tensor_mode", TORCH_FN(div_mode));
  m.impl("div.out_mode", TORCH_FN(div_mode_out));
  m.impl("div_.Tensor_mode", TORCH_FN(div_mode_));
  m.impl("floor_divide", TORCH_FN(floor_divide));
  m.impl("floor_divide.out", TORCH_FN(floor_divide_out));
  m.impl("floor_divide_.Tensor", TORCH_FN(floor_divide_));
  m.impl("remainder.Tensor", TORCH_FN(remainder_functional));
  m.impl("remainder.Tensor_out", TORCH_FN(remainder_out));
  m.impl("remainder_.Tensor", TORCH_FN(remainder_inplace));
  m.impl("remainder.Scalar_Tensor", TORCH_FN(remainder_scalar_tensor));
  m.impl("xlogy.Tensor", TORCH_FN(xlogy_functional));
  m.impl("xlogy.OutTensor", TORCH_FN(xlogy_out));
  m.impl("xlogy_.Tensor", TORCH_FN(xlogy_inplace));
  m.impl("fmod.Tensor", TORCH_FN(fmod_functional));
  m.impl("fmod.Tensor_out", TORCH_FN(fmod_out));
  m.impl("fmod_.Tensor", TORCH_FN(fmod_inplace));
#define REGISTER_BINARY_PLAIN(name)                  \
  m.impl(#name, TORCH_FN(name##_functional));        \
  m.impl(#name ".out", TORCH_FN(name##_out));
  REGISTER_BINARY_PLAIN(maximum) REGISTER_BINARY_PLAIN(minimum) REGISTER_BINARY_PLAIN(logaddexp)
  REGISTER_BINARY_PLAIN(logaddexp2) REGISTER_BINARY_PLAIN(fmax) REGISTER_BINARY_PLAIN(fmin)
  REGISTER_BINARY_PLAIN(special_xlog1py)
#undef REGISTER_BINARY_PLAIN
  m.impl("copysign.Tensor", TORCH_FN(copysign_functional));
  m.impl("copysign.out", TORCH_FN(copysign_out));
  m.impl("copysign_.Tensor", TORCH_FN(copysign_inplace));
#define REGISTER_BINARY(name)                        \
  m.impl(#name, TORCH_FN(name##_functional));        \
  m.impl(#name ".out", TORCH_FN(name##_out));        \
  m.impl(#name "_", TORCH_FN(name##_inplace));
  REGISTER_BINARY(atan2) REGISTER_BINARY(logical_and) REGISTER_BINARY(logical_or)
  REGISTER_BINARY(logical_xor) REGISTER_BINARY(hypot) REGISTER_BINARY(heaviside)
#undef REGISTER_BINARY
#define REGISTER_BITWISE(name)                               \
  m.impl(#name ".Tensor", TORCH_FN(name##_functional));      \
  m.impl(#name ".Tensor_out", TORCH_FN(name##_out));         \
  m.impl(#name "_.Tensor", TORCH_FN(name##_inplace));
  REGISTER_BITWISE(bitwise_and) REGISTER_BITWISE(bitwise_or) REGISTER_BITWISE(bitwise_xor)
#undef REGISTER_BITWISE
  m.impl("pow.Tensor_Tensor", TORCH_FN(pow_functional));
  m.impl("pow.Tensor_Tensor_out", TORCH_FN(pow_out));
  m.impl("pow.Tensor_Scalar", TORCH_FN(pow_scalar_functional));
  m.impl("pow.Tensor_Scalar_out", TORCH_FN(pow_scalar_out));
  m.impl("pow.Scalar_out", TORCH_FN(pow_scalar_base_out));
#define REGISTER_COMPARE(name)                                    \
  m.impl(#name ".Tensor", TORCH_FN(name##_tensor));               \
  m.impl(#name ".Tensor_out", TORCH_FN(name##_tensor_out));       \
  m.impl(#name ".Scalar", TORCH_FN(name##_scalar));               \
  m.impl(#name ".Scalar_out", TORCH_FN(name##_scalar_out));       \
  m.impl(#name "_.Tensor", TORCH_FN(name##_tensor_inplace));      \
  m.impl(#name "_.Scalar", TORCH_FN(name##_scalar_inplace));
  REGISTER_COMPARE(eq) REGISTER_COMPARE(ne) REGISTER_COMPARE(lt) REGISTER_COMPARE(le)
  REGISTER_COMPARE(gt) REGISTER_COMPARE(ge)
#undef REGISTER_COMPARE
  m.impl("sigmoid_backward", TORCH_FN(sigmoid_backward_functional));
  m.impl("sigmoid_backward.grad_input", TORCH_FN(sigmoid_backward_out));
  m.impl("tanh_backward", TORCH_FN(tanh_backward_functional));
  m.impl("tanh_backward.grad_input", TORCH_FN(tanh_backward_out));
  m.impl("silu_backward", TORCH_FN(silu_backward_functional));
  m.impl("silu_backward.grad_input", TORCH_FN(silu_backward_out));
  m.impl("threshold_backward", TORCH_FN(threshold_backward_functional));
  m.impl("threshold_backward.grad_input", TORCH_FN(threshold_backward_out));
  m.impl("gelu_backward", TORCH_FN(gelu_backward_functional));
  m.impl("gelu_backward.grad_input", TORCH_FN(gelu_backward_out));
}

}  // namespace torchneuron::aten
