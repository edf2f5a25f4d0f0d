// Unary pointwise ATen operators on neuron (math functions, rounding, abs / angle / conj of
// complex tensors, angle of real ones, relu, gelu, predicates such as isnan and signbit):
// ATen's TensorIterator does type promotion and output allocation on the host,
// csrc/kernels/elementwise runs the loop on the queue. Cases the kernels do not cover (complex,
// odd output dtypes) take the counted CPU fallback.
// Registrations for these operators live at the end of this file, generated with the kernels.
#include <ATen/TensorIterator.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/abs_ops.h>
#include <ATen/ops/acos_ops.h>
#include <ATen/ops/acosh_ops.h>
#include <ATen/ops/angle_ops.h>
#include <ATen/ops/asin_ops.h>
#include <ATen/ops/asinh_ops.h>
#include <ATen/ops/atan_ops.h>
#include <ATen/ops/atanh_ops.h>
#include <ATen/ops/bitwise_not_ops.h>
#include <ATen/ops/ceil_ops.h>
#include <ATen/ops/conj_physical_ops.h>
#include <ATen/ops/cos_ops.h>
#include <ATen/ops/cosh_ops.h>
#include <ATen/ops/digamma_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/erf_ops.h>
#include <ATen/ops/erfc_ops.h>
#include <ATen/ops/erfinv_ops.h>
#include <ATen/ops/exp2_ops.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/expm1_ops.h>
#include <ATen/ops/floor_ops.h>
#include <ATen/ops/frac_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/i0_ops.h>
#include <ATen/ops/isnan_ops.h>
#include <ATen/ops/lgamma_ops.h>
#include <ATen/ops/log10_ops.h>
#include <ATen/ops/log1p_ops.h>
#include <ATen/ops/log2_ops.h>
#include <ATen/ops/log_ops.h>
#include <ATen/ops/logical_not_ops.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/polygamma_ops.h>
#include <ATen/ops/reciprocal_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/round_ops.h>
#include <ATen/ops/rsqrt_ops.h>
#include <ATen/ops/sgn_ops.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/sign_ops.h>
#include <ATen/ops/signbit_ops.h>
#include <ATen/ops/silu_ops.h>
#include <ATen/ops/sin_ops.h>
#include <ATen/ops/sinc_ops.h>
#include <ATen/ops/sinh_ops.h>
#include <ATen/ops/special_entr_ops.h>
#include <ATen/ops/special_i0e_ops.h>
#include <ATen/ops/special_i1_ops.h>
#include <ATen/ops/special_i1e_ops.h>
#include <ATen/ops/sqrt_ops.h>
#include <ATen/ops/tan_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/trunc_ops.h>
#include <torch/library.h>

#include "aten/device/neuron_tensor.h"
#include "aten/fallback/cpu_fallback.h"
#include "aten/ops/elementwise_launch.h"
#include "kernels/elementwise.h"

namespace torchneuron::aten {
namespace {

using kernels::UnaryOp;

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

// angle: complex inputs write their real dtype; real ones (pi below zero, else 0, NaN kept) go
// through unary_float_op, integers and bool giving float, as on CPU.
at::Tensor angle_functional(const at::Tensor& self);

at::Tensor& angle_out(const at::Tensor& self, at::Tensor& result) {
  if (!self.is_complex()) {
    at::TensorBase out = result;
    auto iter = at::TensorIterator::unary_float_op(out, self);  // CPU's checks; resizes result
    if (iter.common_dtype() != result.scalar_type()) {
      return result.copy_(eltwise::angle_functional(self));  // pi in the common dtype, then cast
    }
    if (!launch_unary(iter, UnaryOp::kAngle, "aten::angle.out", false)) {
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(angle, out)>::call(self, result);
    }
    return result;
  }
  if (result.is_complex() || !complex_to_real(self, result, UnaryOp::kAngle, "aten::angle.out")) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(angle, out)>::call(self, result);
  }
  return result;
}

at::Tensor angle_functional(const at::Tensor& self) {
  if (!self.is_complex()) {
    at::TensorBase out;
    auto iter = at::TensorIterator::unary_float_op(out, self);
    if (!launch_unary(iter, UnaryOp::kAngle, "aten::angle", false)) {
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(angle)>::call(self);
    }
    return iter.output();
  }
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
  if (!to_args_converting(iter, args, c10::ScalarType::Undefined) ||
      !kernels::unary_supported(UnaryOp::kDigamma, args.dtypes[0])) {
    return false;
  }
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
}

}  // namespace torchneuron::aten
