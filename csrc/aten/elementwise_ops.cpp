// Pointwise ATen operators on neuron: ATen's TensorIterator does broadcasting, type promotion
// and output allocation on the host, csrc/kernels/elementwise runs the loop on the queue.
// Cases the kernels do not cover (complex, odd output dtypes) take the counted CPU fallback.
// Registrations for these operators live at the end of this file, generated with the kernels.
#include <ATen/Dispatch.h>
#include <ATen/ScalarOps.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/abs_ops.h>
#include <ATen/ops/acos_ops.h>
#include <ATen/ops/acosh_ops.h>
#include <ATen/ops/angle_ops.h>
#include <ATen/ops/conj_physical_ops.h>
#include <ATen/ops/_conj_physical_ops.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/addcdiv_ops.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/asin_ops.h>
#include <ATen/ops/asinh_ops.h>
#include <ATen/ops/atan2_ops.h>
#include <ATen/ops/atan_ops.h>
#include <ATen/ops/atanh_ops.h>
#include <ATen/ops/bitwise_and_ops.h>
#include <ATen/ops/bitwise_not_ops.h>
#include <ATen/ops/bitwise_or_ops.h>
#include <ATen/ops/bitwise_xor_ops.h>
#include <ATen/ops/ceil_ops.h>
#include <ATen/ops/clamp_ops.h>
#include <ATen/ops/cos_ops.h>
#include <ATen/ops/cosh_ops.h>
#include <ATen/ops/digamma_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/eq_ops.h>
#include <ATen/ops/erf_ops.h>
#include <ATen/ops/erfc_ops.h>
#include <ATen/ops/erfinv_ops.h>
#include <ATen/ops/exp2_ops.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/expm1_ops.h>
#include <ATen/ops/floor_divide_ops.h>
#include <ATen/ops/fmod_ops.h>
#include <ATen/ops/remainder_ops.h>
#include <ATen/ops/floor_ops.h>
#include <ATen/ops/ge_ops.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/gt_ops.h>
#include <ATen/ops/isnan_ops.h>
#include <ATen/ops/le_ops.h>
#include <ATen/ops/i0_ops.h>
#include <ATen/ops/lgamma_ops.h>
#include <ATen/ops/lerp_ops.h>
#include <ATen/ops/log10_ops.h>
#include <ATen/ops/log1p_ops.h>
#include <ATen/ops/log2_ops.h>
#include <ATen/ops/log_ops.h>
#include <ATen/ops/logical_and_ops.h>
#include <ATen/ops/logical_not_ops.h>
#include <ATen/ops/logical_or_ops.h>
#include <ATen/ops/logical_xor_ops.h>
#include <ATen/ops/lt_ops.h>
#include <ATen/ops/masked_fill_ops.h>
#include <ATen/ops/maximum_ops.h>
#include <ATen/ops/minimum_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/ne_ops.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/polygamma_ops.h>
#include <ATen/ops/pow_ops.h>
#include <ATen/ops/reciprocal_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/round_ops.h>
#include <ATen/ops/rsqrt_ops.h>
#include <ATen/ops/sigmoid_backward_ops.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/sgn_ops.h>
#include <ATen/ops/sign_ops.h>
#include <ATen/ops/silu_backward_ops.h>
#include <ATen/ops/silu_ops.h>
#include <ATen/ops/sin_ops.h>
#include <ATen/ops/xlogy_ops.h>
#include <ATen/ops/sinh_ops.h>
#include <ATen/ops/sqrt_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/tan_ops.h>
#include <ATen/ops/tanh_backward_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/threshold_backward_ops.h>
#include <ATen/ops/trunc_ops.h>
#include <ATen/ops/where_ops.h>
#include <ATen/ops/copysign_ops.h>
#include <ATen/ops/fmax_ops.h>
#include <ATen/ops/fmin_ops.h>
#include <ATen/ops/frac_ops.h>
#include <ATen/ops/heaviside_ops.h>
#include <ATen/ops/hypot_ops.h>
#include <ATen/ops/logaddexp2_ops.h>
#include <ATen/ops/logaddexp_ops.h>
#include <ATen/ops/signbit_ops.h>
#include <ATen/ops/sinc_ops.h>
#include <ATen/ops/special_entr_ops.h>
#include <ATen/ops/special_i0e_ops.h>
#include <ATen/ops/special_i1_ops.h>
#include <ATen/ops/special_i1e_ops.h>
#include <ATen/ops/special_xlog1py_ops.h>
#include <torch/library.h>

#include <cstring>

#include "aten/cpu_fallback.h"
#include "aten/neuron_tensor.h"
#include "aten/elementwise_launch.h"
#include "kernels/elementwise.h"

namespace torchneuron::aten {
namespace {

using kernels::BinaryOp;
using kernels::OpScalar;
using kernels::TernaryOp;
using kernels::UnaryOp;

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

// ---- unary ---------------------------------------------------------------------------------
// name: ATen op; KOP: kernel op; ITER: TensorIterator factory (unary_op keeps the dtype,
// unary_float_op promotes integers to float).
#define NEURON_UNARY_CHECKED(name, KOP, ITER, CHECK)                                           \
  at::Tensor name##_functional(const at::Tensor& self) {                                        \
    CHECK(self);                                                                               \
    at::TensorBase out;                                                                        \
    auto iter = at::TensorIterator::ITER(out, self);                                           \
    if (!launch_unary(iter, KOP, "aten::" #name, false)) {                                     \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(name)>::call(self);    \
    }                                                                                          \
    return iter.output();                                                                      \
  }                                                                                            \
  at::Tensor& name##_out(const at::Tensor& self, at::Tensor& result) {                         \
    CHECK(self);                                                                               \
    at::TensorBase out = result;                                                               \
    auto iter = at::TensorIterator::ITER(out, self);                                           \
    if (!launch_unary(iter, KOP, "aten::" #name ".out", false)) {                              \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(name, out)>::call(self, result); \
    }                                                                                          \
    return result;                                                                             \
  }                                                                                            \
  at::Tensor& name##_inplace(at::Tensor& self) { return eltwise::name##_out(self, self); }

#define NEURON_UNARY(name, KOP, ITER) NEURON_UNARY_CHECKED(name, KOP, ITER, any_dtype)

void any_dtype(const at::Tensor&) {}

// kSign of a complex input is sgn (z / |z|), which torch.sign refuses as CPU PyTorch does.
void real_sign_only(const at::Tensor& self) {
  TORCH_CHECK_NOT_IMPLEMENTED(!self.is_complex(), "Unlike NumPy, torch.sign is not intended to support complex numbers. "
                              "Please use torch.sgn instead.");
}

// abs and angle of a complex tensor into a real `result` (resized here), as CPU PyTorch returns
// them; false, with nothing enqueued, when the kernels cannot take it.
bool complex_to_real(const at::Tensor& self, at::Tensor& result, UnaryOp op, const char* name) {
  TORCH_CHECK(at::canCast(c10::toRealValueType(self.scalar_type()), result.scalar_type()), "result type ",
              c10::toRealValueType(self.scalar_type()), " can't be cast to the desired output type ", result.scalar_type());
  at::native::resize_output(result, self.sizes());
  auto iter = at::TensorIteratorConfig().add_output(result).add_const_input(self).check_all_same_dtype(false).build();
  return launch_unary(iter, op, name, false);
}

at::Tensor& abs_out(const at::Tensor& self, at::Tensor& result) {
  if (self.is_complex() && !result.is_complex()) {
    if (!complex_to_real(self, result, UnaryOp::kAbs, "aten::abs.out")) {
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(abs, out)>::call(self, result);
    }
    return result;
  }
  at::TensorBase out = result;
  auto iter = at::TensorIterator::unary_op(out, self);  // complex into complex: |z| + 0i, as on CPU
  if (!launch_unary(iter, UnaryOp::kAbs, "aten::abs.out", false)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(abs, out)>::call(self, result);
  }
  return result;
}

at::Tensor abs_functional(const at::Tensor& self) {
  if (self.is_complex()) {
    at::Tensor result = at::empty({0}, self.options().dtype(c10::toRealValueType(self.scalar_type())));
    return eltwise::abs_out(self, result);
  }
  at::Tensor result = at::empty({0}, self.options());
  return eltwise::abs_out(self, result);
}

at::Tensor& abs_inplace(at::Tensor& self) {
  TORCH_CHECK(!self.is_complex(), "In-place abs is not supported for complex tensors.");
  return eltwise::abs_out(self, self);
}

// angle has a kernel for complex inputs; real ones (0 or pi) take the counted fallback.
at::Tensor& angle_out(const at::Tensor& self, at::Tensor& result) {
  if (!self.is_complex() || result.is_complex() || !complex_to_real(self, result, UnaryOp::kAngle, "aten::angle.out")) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(angle, out)>::call(self, result);
  }
  return result;
}

at::Tensor angle_functional(const at::Tensor& self) {
  if (!self.is_complex()) return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(angle)>::call(self);
  at::Tensor result = at::empty({0}, self.options().dtype(c10::toRealValueType(self.scalar_type())));
  return eltwise::angle_out(self, result);
}

// conj_physical: the conjugate written out (lazy .conj() views resolve through it); a copy for
// real dtypes.
at::Tensor& conj_physical_out(const at::Tensor& self, at::Tensor& result) {
  if (!self.is_complex()) {
    at::native::resize_output(result, self.sizes());
    return result.copy_(self);
  }
  at::TensorBase out = result;
  auto iter = at::TensorIterator::unary_op(out, self);
  if (!launch_unary(iter, UnaryOp::kConj, "aten::conj_physical", false)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(conj_physical, out)>::call(self, result);
  }
  return result;
}

at::Tensor conj_physical_functional(const at::Tensor& self) {
  if (self.is_conj()) return self.conj().clone();  // the conjugate of a lazy conjugate is its data
  at::Tensor result = at::empty({0}, self.options());
  return eltwise::conj_physical_out(self, result);
}

at::Tensor& conj_physical_inplace(at::Tensor& self) {
  return self.is_complex() ? eltwise::conj_physical_out(self, self) : self;
}

NEURON_UNARY(neg, UnaryOp::kNeg, unary_op)
NEURON_UNARY_CHECKED(sign, UnaryOp::kSign, unary_op, real_sign_only)
NEURON_UNARY(sgn, UnaryOp::kSign, unary_op)
NEURON_UNARY(bitwise_not, UnaryOp::kBitwiseNot, unary_op)
NEURON_UNARY(floor, UnaryOp::kFloor, unary_op)
NEURON_UNARY(ceil, UnaryOp::kCeil, unary_op)
NEURON_UNARY(round, UnaryOp::kRound, unary_op)
NEURON_UNARY(trunc, UnaryOp::kTrunc, unary_op)
NEURON_UNARY(reciprocal, UnaryOp::kReciprocal, unary_float_op)
NEURON_UNARY(sqrt, UnaryOp::kSqrt, unary_float_op)
NEURON_UNARY(rsqrt, UnaryOp::kRsqrt, unary_float_op)
NEURON_UNARY(exp, UnaryOp::kExp, unary_float_op)
NEURON_UNARY(exp2, UnaryOp::kExp2, unary_float_op)
NEURON_UNARY(expm1, UnaryOp::kExpm1, unary_float_op)
NEURON_UNARY(log, UnaryOp::kLog, unary_float_op)
NEURON_UNARY(log2, UnaryOp::kLog2, unary_float_op)
NEURON_UNARY(log10, UnaryOp::kLog10, unary_float_op)
NEURON_UNARY(log1p, UnaryOp::kLog1p, unary_float_op)
NEURON_UNARY(sin, UnaryOp::kSin, unary_float_op)
NEURON_UNARY(cos, UnaryOp::kCos, unary_float_op)
NEURON_UNARY(tan, UnaryOp::kTan, unary_float_op)
NEURON_UNARY(asin, UnaryOp::kAsin, unary_float_op)
NEURON_UNARY(acos, UnaryOp::kAcos, unary_float_op)
NEURON_UNARY(atan, UnaryOp::kAtan, unary_float_op)
NEURON_UNARY(sinh, UnaryOp::kSinh, unary_float_op)
NEURON_UNARY(cosh, UnaryOp::kCosh, unary_float_op)
NEURON_UNARY(tanh, UnaryOp::kTanh, unary_float_op)
NEURON_UNARY(asinh, UnaryOp::kAsinh, unary_float_op)
NEURON_UNARY(acosh, UnaryOp::kAcosh, unary_float_op)
NEURON_UNARY(atanh, UnaryOp::kAtanh, unary_float_op)
NEURON_UNARY(sigmoid, UnaryOp::kSigmoid, unary_float_op)
NEURON_UNARY(erf, UnaryOp::kErf, unary_float_op)
NEURON_UNARY(erfc, UnaryOp::kErfc, unary_float_op)
NEURON_UNARY(silu, UnaryOp::kSilu, unary_op)
NEURON_UNARY(lgamma, UnaryOp::kLgamma, unary_float_op)
NEURON_UNARY(digamma, UnaryOp::kDigamma, unary_float_op)
NEURON_UNARY(erfinv, UnaryOp::kErfinv, unary_float_op)
NEURON_UNARY(i0, UnaryOp::kI0, unary_float_op)
NEURON_UNARY(special_i0e, UnaryOp::kI0e, unary_float_op)
NEURON_UNARY(special_i1, UnaryOp::kI1, unary_float_op)
NEURON_UNARY(special_i1e, UnaryOp::kI1e, unary_float_op)
NEURON_UNARY(frac, UnaryOp::kFrac, unary_op)
NEURON_UNARY(sinc, UnaryOp::kSinc, unary_float_op)
NEURON_UNARY(special_entr, UnaryOp::kEntr, unary_float_op)
#undef NEURON_UNARY

bool launch_polygamma(at::TensorIteratorBase& iter, int64_t n) {
  TORCH_CHECK(n >= 0, "polygamma(n, x) does not support negative n.");
  kernels::ElementwiseArgs args;
  if (!to_args(iter, args) || !kernels::unary_supported(UnaryOp::kDigamma, args.dtypes[0])) return false;
  const kernels::DType dtype = args.dtypes[0];
  launch(iter, "aten::polygamma", args, [n, dtype](const kernels::ElementwiseArgs& a) {
    kernels::with_dtypes(a, dtype, dtype, 1, [n](const kernels::ElementwiseArgs& b) { kernels::polygamma(n, b); });
  });
  return true;
}

at::Tensor polygamma_functional(int64_t n, const at::Tensor& self) {
  at::TensorBase out;
  auto iter = at::TensorIterator::unary_float_op(out, self);
  if (!launch_polygamma(iter, n)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(polygamma)>::call(n, self);
  }
  return iter.output();
}

at::Tensor& polygamma_out(int64_t n, const at::Tensor& self, at::Tensor& result) {
  at::TensorBase out = result;
  auto iter = at::TensorIterator::unary_float_op(out, self);
  if (!launch_polygamma(iter, n)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(polygamma, out)>::call(n, self, result);
  }
  return result;
}

at::Tensor relu_functional(const at::Tensor& self) {
  at::TensorBase out;
  auto iter = at::TensorIterator::unary_op(out, self);
  if (!launch_unary(iter, UnaryOp::kRelu, "aten::relu", false)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(relu)>::call(self);
  }
  return iter.output();
}

at::Tensor& relu_inplace(at::Tensor& self) {
  at::TensorBase out = self;
  auto iter = at::TensorIterator::unary_op(out, self);
  if (!launch_unary(iter, UnaryOp::kRelu, "aten::relu_", false)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(relu_)>::call(self);
  }
  return self;
}

at::Tensor& gelu_out(const at::Tensor& self, c10::string_view approximate, at::Tensor& result) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh",
              "approximate argument must be either none or tanh.");
  at::TensorBase out = result;
  auto iter = at::TensorIterator::unary_op(out, self);
  const UnaryOp op = approximate == "tanh" ? UnaryOp::kGeluTanh : UnaryOp::kGeluErf;
  if (!launch_unary(iter, op, "aten::gelu", false)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(gelu, out)>::call(self, approximate, result);
  }
  return result;
}

at::Tensor gelu_functional(const at::Tensor& self, c10::string_view approximate) {
  at::Tensor result = at::empty_like(self);
  return eltwise::gelu_out(self, approximate, result);
}

at::Tensor& gelu_inplace(at::Tensor& self, c10::string_view approximate) {
  return eltwise::gelu_out(self, approximate, self);
}

#define NEURON_PREDICATE(name, KOP)                                                             \
  at::Tensor& name##_out(const at::Tensor& self, at::Tensor& result) {                         \
    at::TensorBase out = result;                                                               \
    auto iter = at::TensorIteratorConfig()                                                     \
                    .add_output(out)                                                           \
                    .add_const_input(self)                                                     \
                    .check_all_same_dtype(false)                                               \
                    .allow_cpu_scalars(true)                                                   \
                    .build();                                                                  \
    if (!launch_unary(iter, KOP, "aten::" #name, true)) {                                      \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(name, out)>::call(self, result); \
    }                                                                                          \
    return result;                                                                             \
  }                                                                                            \
  at::Tensor name##_functional(const at::Tensor& self) {                                        \
    at::Tensor result = at::empty_like(self, self.options().dtype(at::kBool));                  \
    return eltwise::name##_out(self, result);                                                           \
  }

NEURON_PREDICATE(logical_not, UnaryOp::kLogicalNot)
NEURON_PREDICATE(signbit, UnaryOp::kSignbit)
#undef NEURON_PREDICATE

at::Tensor isnan_functional(const at::Tensor& self) {
  at::Tensor result = at::empty_like(self, self.options().dtype(at::kBool));
  at::TensorBase out = result;
  auto iter = at::TensorIteratorConfig().add_output(out).add_const_input(self).check_all_same_dtype(false)
                  .allow_cpu_scalars(true).build();
  if (!launch_unary(iter, UnaryOp::kIsNan, "aten::isnan", true)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(isnan)>::call(self);
  }
  return result;
}

at::Tensor& logical_not_inplace(at::Tensor& self) { return eltwise::logical_not_out(self, self); }

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
  TORCH_CHECK(!self.is_complex() && !values.is_complex(), "heaviside is not yet implemented for complex tensors.");
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
  at::TensorBase out;
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
#define REGISTER_UNARY(name)                           \
  m.impl(#name, TORCH_FN(name##_functional));          \
  m.impl(#name ".out", TORCH_FN(name##_out));          \
  m.impl(#name "_", TORCH_FN(name##_inplace));
  m.impl("angle", TORCH_FN(angle_functional));
  m.impl("angle.out", TORCH_FN(angle_out));
  m.impl("_conj_physical", TORCH_FN(conj_physical_functional));
  m.impl("conj_physical.out", TORCH_FN(conj_physical_out));
  m.impl("conj_physical_", TORCH_FN(conj_physical_inplace));
  REGISTER_UNARY(abs) REGISTER_UNARY(neg) REGISTER_UNARY(sign) REGISTER_UNARY(bitwise_not)
  REGISTER_UNARY(floor) REGISTER_UNARY(ceil) REGISTER_UNARY(round) REGISTER_UNARY(trunc)
  REGISTER_UNARY(reciprocal) REGISTER_UNARY(sqrt) REGISTER_UNARY(rsqrt) REGISTER_UNARY(exp)
  REGISTER_UNARY(exp2) REGISTER_UNARY(expm1) REGISTER_UNARY(log) REGISTER_UNARY(log2)
  REGISTER_UNARY(log10) REGISTER_UNARY(log1p) REGISTER_UNARY(sin) REGISTER_UNARY(cos)
  REGISTER_UNARY(tan) REGISTER_UNARY(asin) REGISTER_UNARY(acos) REGISTER_UNARY(atan)
  REGISTER_UNARY(sinh) REGISTER_UNARY(cosh) REGISTER_UNARY(tanh) REGISTER_UNARY(asinh)
  REGISTER_UNARY(acosh) REGISTER_UNARY(atanh) REGISTER_UNARY(sigmoid) REGISTER_UNARY(erf)
  REGISTER_UNARY(erfc) REGISTER_UNARY(sgn) REGISTER_UNARY(silu) REGISTER_UNARY(gelu) REGISTER_UNARY(logical_not)
  REGISTER_UNARY(lgamma) REGISTER_UNARY(digamma) REGISTER_UNARY(erfinv) REGISTER_UNARY(frac)
  REGISTER_UNARY(sinc)
#undef REGISTER_UNARY
  m.impl("special_entr", TORCH_FN(special_entr_functional));
  m.impl("special_entr.out", TORCH_FN(special_entr_out));
  m.impl("i0", TORCH_FN(i0_functional));
  m.impl("i0.out", TORCH_FN(i0_out));
  m.impl("i0_", TORCH_FN(i0_inplace));
  m.impl("special_i0e", TORCH_FN(special_i0e_functional));
  m.impl("special_i0e.out", TORCH_FN(special_i0e_out));
  m.impl("special_i1", TORCH_FN(special_i1_functional));
  m.impl("special_i1.out", TORCH_FN(special_i1_out));
  m.impl("special_i1e", TORCH_FN(special_i1e_functional));
  m.impl("special_i1e.out", TORCH_FN(special_i1e_out));
  m.impl("signbit", TORCH_FN(signbit_functional));
  m.impl("signbit.out", TORCH_FN(signbit_out));
  m.impl("polygamma", TORCH_FN(polygamma_functional));
  m.impl("polygamma.out", TORCH_FN(polygamma_out));
  m.impl("relu", TORCH_FN(relu_functional));
  m.impl("relu_", TORCH_FN(relu_inplace));
  m.impl("isnan", TORCH_FN(isnan_functional));

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
