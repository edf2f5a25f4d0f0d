// Ternary pointwise operators on neuron (where, masked_fill, addcmul, addcdiv, lerp, PReLU and its
// gradients) and the clamp family (scalar and tensor bounds, clamp_min / clamp_max), plus logit
// and its backward.
// Built on TensorIterator and run by csrc/kernels/elementwise like the other pointwise ops.
#include <ATen/TensorIterator.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_prelu_kernel_backward_ops.h>
#include <ATen/ops/_prelu_kernel_ops.h>
#include <ATen/ops/addcdiv_ops.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/clamp_ops.h>
#include <ATen/ops/div.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/le.h>
#include <ATen/ops/lerp_ops.h>
#include <ATen/ops/log.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/masked_fill_ops.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/where.h>
#include <ATen/ops/where_ops.h>
#include <torch/library.h>

#include <array>
#include <limits>
#include <tuple>

#include "aten/fallback/cpu_fallback.h"
#include "aten/ops/elementwise_launch.h"

namespace torchneuron::aten {
namespace ternary {

using kernels::OpScalar;
using kernels::TernaryOp;

at::Tensor& where_out(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other,
                      at::Tensor& result) {
  const c10::ScalarType dtype = at::result_type(self, other);
  at::TensorBase out = result;
  at::Tensor cond = condition.scalar_type() == c10::kBool ? condition : condition.to(c10::kBool);
  auto iter = at::TensorIteratorConfig()
                  .check_all_same_dtype(false)
                  .allow_cpu_scalars(true)
                  .add_output(out)
                  .add_const_input(cond)
                  .add_owned_const_input(self.scalar_type() == dtype ? self : self.to(dtype))
                  .add_owned_const_input(other.scalar_type() == dtype ? other : other.to(dtype))
                  .build();
  if (!launch_ternary(iter, TernaryOp::kWhere, "aten::where", {})) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(where, self_out)>::call(
        condition, self, other, result);
  }
  return result;
}

at::Tensor where_functional(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  const c10::ScalarType dtype = at::result_type(self, other);
  // The result lives where the device operands are: self may be a 0-dim CPU tensor, which
  // TensorIterator takes as a scalar (torch.where(mask, torch.tensor(0.0), x)).
  c10::Device device = self.device();
  for (const at::Tensor* t : {&self, &other, &condition}) {
    if (!t->device().is_cpu()) {
      device = t->device();
      break;
    }
  }
  at::Tensor result = at::empty({0}, self.options().dtype(dtype).device(device));
  return ternary::where_out(condition, self, other, result);
}

at::Tensor& masked_fill_scalar_inplace(at::Tensor& self, const at::Tensor& mask, const c10::Scalar& value) {
  TORCH_CHECK(mask.scalar_type() == c10::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  at::TensorBase out = self;
  auto iter = at::TensorIteratorConfig()
                  .check_all_same_dtype(false)
                  .allow_cpu_scalars(true)
                  .resize_outputs(false)
                  .add_output(out)
                  .add_const_input(mask)
                  .add_owned_const_input(wrapped(value).to(self.scalar_type()))
                  .add_const_input(self)
                  .build();
  if (!launch_ternary(iter, TernaryOp::kWhere, "aten::masked_fill_", {})) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(masked_fill_, Scalar)>::call(self, mask, value);
  }
  return self;
}

at::Tensor& masked_fill_tensor_inplace(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  if (value.device().is_cpu()) return masked_fill_scalar_inplace(self, mask, value.item());
  TORCH_CHECK(mask.scalar_type() == c10::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  // A device value is read by the kernel: no synchronization for .item().
  at::TensorBase out = self;
  auto iter = at::TensorIteratorConfig()
                  .check_all_same_dtype(false)
                  .resize_outputs(false)
                  .add_output(out)
                  .add_const_input(mask)
                  .add_owned_const_input(value.scalar_type() == self.scalar_type() ? value : value.to(self.scalar_type()))
                  .add_const_input(self)
                  .build();
  if (!launch_ternary(iter, TernaryOp::kWhere, "aten::masked_fill_", {})) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(masked_fill_, Tensor)>::call(self, mask, value);
  }
  return self;
}

// PReLU: weight broadcasts over self (the caller shapes it to the channel dim); the weight's
// gradient is returned at self's shape, and autograd sums it down to the weight's.
at::Tensor prelu_kernel(const at::Tensor& self, const at::Tensor& weight) {
  at::Tensor result = at::empty({0}, self.options());
  at::TensorBase out = result;
  auto iter = at::TensorIteratorConfig().add_output(out).add_const_input(self).add_const_input(weight).build();
  if (!launch_binary(iter, kernels::BinaryOp::kPrelu, "aten::_prelu_kernel", false)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_prelu_kernel)>::call(self, weight);
  }
  return result;
}

std::tuple<at::Tensor, at::Tensor> prelu_kernel_backward(const at::Tensor& grad, const at::Tensor& self,
                                                         const at::Tensor& weight) {
  std::array<at::Tensor, 2> results;
  const std::array<TernaryOp, 2> ops{TernaryOp::kPreluGradInput, TernaryOp::kPreluGradWeight};
  for (size_t k = 0; k < 2; ++k) {
    results[k] = at::empty({0}, self.options());
    at::TensorBase out = results[k];
    auto iter = at::TensorIteratorConfig()
                    .add_output(out)
                    .add_const_input(self)
                    .add_const_input(weight)
                    .add_const_input(grad)
                    .build();
    if (!launch_ternary(iter, ops[k], "aten::_prelu_kernel_backward", {})) {
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_prelu_kernel_backward)>::call(grad, self,
                                                                                                         weight);
    }
  }
  return {results[0], results[1]};
}

#define NEURON_POINTWISE3(name, KOP)                                                            \
  at::Tensor& name##_out(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,    \
                         const c10::Scalar& value, at::Tensor& result) {                       \
    at::TensorBase out = result;                                                               \
    auto iter = at::TensorIteratorConfig()                                                     \
                    .add_output(out)                                                           \
                    .add_const_input(self)                                                     \
                    .add_const_input(t1)                                                       \
                    .add_const_input(t2)                                                       \
                    .allow_cpu_scalars(true)                                                   \
                    .promote_inputs_to_common_dtype(true)                                      \
                    .cast_common_dtype_to_outputs(true)                                        \
                    .enforce_safe_casting_to_output(true)                                      \
                    .build();                                                                  \
    /* the kernels take a real value; a complex one runs on the counted CPU route */            \
    if (value.isComplex() || !launch_ternary(iter, KOP, "aten::" #name, to_op_scalar(value))) { \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(name, out)>::call(self, t1, t2, value, result); \
    }                                                                                          \
    return result;                                                                             \
  }                                                                                            \
  at::Tensor name##_functional(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, \
                               const c10::Scalar& value) {                                     \
    const auto dtype = c10::promoteTypes(at::result_type(self, t1), at::result_type(self, t2)); \
    at::Tensor result = at::empty({0}, self.options().dtype(dtype));                            \
    return ternary::name##_out(self, t1, t2, value, result);                                            \
  }                                                                                            \
  at::Tensor& name##_inplace(at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,      \
                             const c10::Scalar& value) {                                       \
    return ternary::name##_out(self, t1, t2, value, self);                                              \
  }

NEURON_POINTWISE3(addcmul, TernaryOp::kAddcmul)
NEURON_POINTWISE3(addcdiv, TernaryOp::kAddcdiv)
#undef NEURON_POINTWISE3

namespace {

// The kernel takes a host-scalar weight as alpha: a Python weight unrounded to a half type, as
// CPU's opmath weight; `weight` holds it rounded to self's dtype for the iterator and the fallback.
bool launch_lerp(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight, const double* scalar,
                 at::Tensor& result) {
  at::TensorBase out = result;
  auto iter = at::TensorIteratorConfig()
                  .allow_cpu_scalars(true)
                  .add_output(out)
                  .add_const_input(self)
                  .add_const_input(end)
                  .add_const_input(weight)
                  .build();
  OpScalar alpha;
  if (iter.is_cpu_scalar(3) && !c10::isComplexType(iter.dtype(3))) {
    alpha.real = scalar != nullptr ? *scalar : iter.scalar_value<double>(3);
  }
  return launch_ternary(iter, TernaryOp::kLerp, "aten::lerp", alpha);
}

}  // namespace

at::Tensor& lerp_tensor_out(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight,
                            at::Tensor& result) {
  if (!launch_lerp(self, end, weight, nullptr, result)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(lerp, Tensor_out)>::call(self, end, weight, result);
  }
  return result;
}

at::Tensor& lerp_scalar_out(const at::Tensor& self, const at::Tensor& end, const c10::Scalar& weight,
                            at::Tensor& result) {
  const at::Tensor rounded = wrapped(weight).to(self.scalar_type());
  const double scalar = weight.isComplex() ? 0.0 : weight.toDouble();
  if (!launch_lerp(self, end, rounded, weight.isComplex() ? nullptr : &scalar, result)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(lerp, Scalar_out)>::call(self, end, weight, result);
  }
  return result;
}

at::Tensor lerp_tensor_functional(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight) {
  at::Tensor result = at::empty({0}, self.options());
  return ternary::lerp_tensor_out(self, end, weight, result);
}

at::Tensor lerp_scalar_functional(const at::Tensor& self, const at::Tensor& end, const c10::Scalar& weight) {
  at::Tensor result = at::empty({0}, self.options());
  return ternary::lerp_scalar_out(self, end, weight, result);
}

at::Tensor& lerp_tensor_inplace(at::Tensor& self, const at::Tensor& end, const at::Tensor& weight) {
  return ternary::lerp_tensor_out(self, end, weight, self);
}

at::Tensor& lerp_scalar_inplace(at::Tensor& self, const at::Tensor& end, const c10::Scalar& weight) {
  return ternary::lerp_scalar_out(self, end, weight, self);
}

at::Tensor& clamp_out(const at::Tensor& self, const std::optional<c10::Scalar>& min,
                      const std::optional<c10::Scalar>& max, at::Tensor& result) {
  TORCH_CHECK(min.has_value() || max.has_value(), "torch.clamp: At least one of 'min' or 'max' must not be None");
  const bool promoted = at::isIntegralType(self.scalar_type(), true) &&
                        ((min && min->isFloatingPoint()) || (max && max->isFloatingPoint()));
  if (promoted || result.scalar_type() != self.scalar_type()) {  // the kernel keeps its input's dtype
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(clamp, out)>::call(self, min, max, result);
  }
  at::TensorBase out = result;
  auto iter = at::TensorIterator::unary_op(out, self);
  kernels::ElementwiseArgs args;
  const bool ok = to_args(iter, args) && args.dtypes[0] == args.dtypes[1] &&
                  args.dtypes[1] != kernels::DType::kBool && !kernels::is_complex(args.dtypes[1]);
  if (!ok) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(clamp, out)>::call(self, min, max, result);
  }
  const OpScalar lo = min ? to_op_scalar(*min) : OpScalar{};
  const OpScalar hi = max ? to_op_scalar(*max) : OpScalar{};
  const bool has_lo = min.has_value();
  const bool has_hi = max.has_value();
  launch(iter, "aten::clamp", args, [=](const kernels::ElementwiseArgs& a) { kernels::clamp(a, has_lo, lo, has_hi, hi); });
  return result;
}

at::Tensor clamp_functional(const at::Tensor& self, const std::optional<c10::Scalar>& min,
                            const std::optional<c10::Scalar>& max) {
  // As CPU PyTorch: an integer tensor clamped to floating bounds gives a floating result.
  c10::ScalarType dtype = self.scalar_type();
  if (!at::isFloatingType(dtype) && !at::isComplexType(dtype)) {
    at::native::ResultTypeState state = {};
    state = at::native::update_result_type_state(self, state);
    if (min) state = at::native::update_result_type_state(*min, state);
    if (max) state = at::native::update_result_type_state(*max, state);
    dtype = at::native::result_type(state);
  }
  at::Tensor result = at::empty({0}, self.options().dtype(dtype));
  return ternary::clamp_out(self, min, max, result);
}

at::Tensor& clamp_inplace(at::Tensor& self, const std::optional<c10::Scalar>& min,
                          const std::optional<c10::Scalar>& max) {
  return ternary::clamp_out(self, min, max, self);
}

// One-sided scalar clamps share clamp's kernel.
at::Tensor& clamp_min_out(const at::Tensor& self, const c10::Scalar& min, at::Tensor& result) {
  return ternary::clamp_out(self, min, std::nullopt, result);
}
at::Tensor clamp_min(const at::Tensor& self, const c10::Scalar& min) { return ternary::clamp_functional(self, min, std::nullopt); }
at::Tensor& clamp_min_(at::Tensor& self, const c10::Scalar& min) { return ternary::clamp_out(self, min, std::nullopt, self); }
at::Tensor& clamp_max_out(const at::Tensor& self, const c10::Scalar& max, at::Tensor& result) {
  return ternary::clamp_out(self, std::nullopt, max, result);
}
at::Tensor clamp_max(const at::Tensor& self, const c10::Scalar& max) { return ternary::clamp_functional(self, std::nullopt, max); }
at::Tensor& clamp_max_(at::Tensor& self, const c10::Scalar& max) { return ternary::clamp_out(self, std::nullopt, max, self); }

// Tensor bounds: both through the clamp kernel; one through maximum / minimum, as CPU PyTorch.
at::Tensor& clamp_tensor_out(const at::Tensor& self, const std::optional<at::Tensor>& min,
                             const std::optional<at::Tensor>& max, at::Tensor& result) {
  const bool has_min = min.has_value() && min->defined(), has_max = max.has_value() && max->defined();
  TORCH_CHECK(has_min || has_max, "torch.clamp: At least one of 'min' or 'max' must not be None");
  if (!has_max) return at::maximum_out(result, self, *min);
  if (!has_min) return at::minimum_out(result, self, *max);
  at::TensorBase out = result;
  auto iter = at::TensorIteratorConfig()
                  .set_check_mem_overlap(true)
                  .add_output(out)
                  .add_const_input(self)
                  .add_const_input(*min)
                  .add_const_input(*max)
                  .promote_inputs_to_common_dtype(true)
                  .cast_common_dtype_to_outputs(true)
                  .enforce_safe_casting_to_output(true)
                  .allow_cpu_scalars(true)
                  .build();
  if (!launch_ternary(iter, TernaryOp::kClamp, "aten::clamp", {})) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(clamp, Tensor_out)>::call(self, min, max, result);
  }
  return result;
}

at::Tensor clamp_tensor(const at::Tensor& self, const std::optional<at::Tensor>& min, const std::optional<at::Tensor>& max) {
  // The result type of all three operands, as CPU PyTorch's clamp.Tensor gives it.
  std::vector<at::Tensor> operands{self};
  for (const auto& bound : {min, max}) {
    if (bound.has_value() && bound->defined()) operands.push_back(*bound);
  }
  at::Tensor result = at::empty({0}, self.options().dtype(at::native::result_type(operands)));
  return ternary::clamp_tensor_out(self, min, max, result);
}
at::Tensor& clamp_tensor_(at::Tensor& self, const std::optional<at::Tensor>& min, const std::optional<at::Tensor>& max) {
  return ternary::clamp_tensor_out(self, min, max, self);
}
at::Tensor& clamp_min_tensor_out(const at::Tensor& self, const at::Tensor& min, at::Tensor& result) {
  return at::maximum_out(result, self, min);
}
at::Tensor clamp_min_tensor(const at::Tensor& self, const at::Tensor& min) { return at::maximum(self, min); }
at::Tensor& clamp_min_tensor_(at::Tensor& self, const at::Tensor& min) { return at::maximum_out(self, self, min); }
at::Tensor& clamp_max_tensor_out(const at::Tensor& self, const at::Tensor& max, at::Tensor& result) {
  return at::minimum_out(result, self, max);
}
at::Tensor clamp_max_tensor(const at::Tensor& self, const at::Tensor& max) { return at::minimum(self, max); }
at::Tensor& clamp_max_tensor_(at::Tensor& self, const at::Tensor& max) { return at::minimum_out(self, self, max); }

// logit(x) = log(x / (1 - x)), x first clamped to [eps, 1 - eps] when eps is given.
at::Tensor logit(const at::Tensor& self, std::optional<double> eps) {
  const at::Tensor input = at::isIntegralType(self.scalar_type(), true) ? self.to(at::kFloat) : self;
  const at::Tensor x = eps.has_value() ? ternary::clamp_functional(input, *eps, 1.0 - *eps) : input;
  return at::log(at::div(x, at::rsub(x, 1)));
}
at::Tensor& logit_out(const at::Tensor& self, std::optional<double> eps, at::Tensor& out) {
  const at::Tensor value = ternary::logit(self, eps);
  at::native::resize_output(out, value.sizes());
  return out.copy_(value);
}
at::Tensor& logit_(at::Tensor& self, std::optional<double> eps) { return ternary::logit_out(self, eps, self); }

// d logit / dx = 1 / (x (1 - x)). As on CPU: without eps, NaN outside [0, 1] (where logit
// itself is NaN); with eps, zero outside [eps, 1 - eps] and at a NaN input.
at::Tensor logit_backward(const at::Tensor& grad, const at::Tensor& self, std::optional<double> eps) {
  const at::Tensor slope = at::div(grad, at::mul(self, at::rsub(self, 1)));
  if (!eps.has_value()) {
    const at::Tensor outside = at::logical_or(at::lt(self, 0), at::gt(self, 1));
    return at::where(outside, std::numeric_limits<double>::quiet_NaN(), slope);
  }
  const at::Tensor inside = at::logical_and(at::ge(self, *eps), at::le(self, 1.0 - *eps));
  return at::where(inside, slope, 0.0);
}
at::Tensor& logit_backward_out(const at::Tensor& grad, const at::Tensor& self, std::optional<double> eps, at::Tensor& out) {
  const at::Tensor value = ternary::logit_backward(grad, self, eps);
  at::native::resize_output(out, value.sizes());
  return out.copy_(value);
}

}  // namespace ternary

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("where.self", TORCH_FN(ternary::where_functional));
  m.impl("where.self_out", TORCH_FN(ternary::where_out));
  m.impl("masked_fill_.Scalar", TORCH_FN(ternary::masked_fill_scalar_inplace));
  m.impl("masked_fill_.Tensor", TORCH_FN(ternary::masked_fill_tensor_inplace));
  m.impl("_prelu_kernel", TORCH_FN(ternary::prelu_kernel));
  m.impl("_prelu_kernel_backward", TORCH_FN(ternary::prelu_kernel_backward));
  m.impl("addcmul", TORCH_FN(ternary::addcmul_functional));
  m.impl("addcmul.out", TORCH_FN(ternary::addcmul_out));
  m.impl("addcmul_", TORCH_FN(ternary::addcmul_inplace));
  m.impl("addcdiv", TORCH_FN(ternary::addcdiv_functional));
  m.impl("addcdiv.out", TORCH_FN(ternary::addcdiv_out));
  m.impl("addcdiv_", TORCH_FN(ternary::addcdiv_inplace));
  m.impl("lerp.Scalar", TORCH_FN(ternary::lerp_scalar_functional));
  m.impl("lerp.Scalar_out", TORCH_FN(ternary::lerp_scalar_out));
  m.impl("lerp_.Scalar", TORCH_FN(ternary::lerp_scalar_inplace));
  m.impl("lerp.Tensor", TORCH_FN(ternary::lerp_tensor_functional));
  m.impl("lerp.Tensor_out", TORCH_FN(ternary::lerp_tensor_out));
  m.impl("lerp_.Tensor", TORCH_FN(ternary::lerp_tensor_inplace));
  m.impl("clamp", TORCH_FN(ternary::clamp_functional));
  m.impl("clamp.out", TORCH_FN(ternary::clamp_out));
  m.impl("clamp_", TORCH_FN(ternary::clamp_inplace));
  m.impl("clamp_min", TORCH_FN(ternary::clamp_min));
  m.impl("clamp_min.out", TORCH_FN(ternary::clamp_min_out));
  m.impl("clamp_min_", TORCH_FN(ternary::clamp_min_));
  m.impl("clamp_max", TORCH_FN(ternary::clamp_max));
  m.impl("clamp_max.out", TORCH_FN(ternary::clamp_max_out));
  m.impl("clamp_max_", TORCH_FN(ternary::clamp_max_));
  m.impl("clamp.Tensor", TORCH_FN(ternary::clamp_tensor));
  m.impl("clamp.Tensor_out", TORCH_FN(ternary::clamp_tensor_out));
  m.impl("clamp_.Tensor", TORCH_FN(ternary::clamp_tensor_));
  m.impl("clamp_min.Tensor", TORCH_FN(ternary::clamp_min_tensor));
  m.impl("clamp_min.Tensor_out", TORCH_FN(ternary::clamp_min_tensor_out));
  m.impl("clamp_min_.Tensor", TORCH_FN(ternary::clamp_min_tensor_));
  m.impl("clamp_max.Tensor", TORCH_FN(ternary::clamp_max_tensor));
  m.impl("clamp_max.Tensor_out", TORCH_FN(ternary::clamp_max_tensor_out));
  m.impl("clamp_max_.Tensor", TORCH_FN(ternary::clamp_max_tensor_));
  m.impl("logit", TORCH_FN(ternary::logit));
  m.impl("logit.out", TORCH_FN(ternary::logit_out));
  m.impl("logit_", TORCH_FN(ternary::logit_));
  m.impl("logit_backward", TORCH_FN(ternary::logit_backward));
  m.impl("logit_backward.grad_input", TORCH_FN(ternary::logit_backward_out));
}

}  // namespace torchneuron::aten
