// torch.special on neuron: the orthogonal polynomials' `.out` kernels of (x, n), and those of the
// Bessel, Airy, normal-distribution, Hurwitz zeta and incomplete gamma functions, which the
// functional and scalar forms reach through ATen's composites (TensorIterator promotes to the
// float result dtype; csrc/kernels/special_polynomials and special_pointwise evaluate in double);
// nextafter and frexp; mvlgamma composed of native ops.
#include <ATen/TensorIterator.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/add.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/frexp_ops.h>
#include <ATen/ops/igamma_ops.h>
#include <ATen/ops/igammac_ops.h>
#include <ATen/ops/nextafter_ops.h>
#include <ATen/ops/lgamma.h>
#include <ATen/ops/special_airy_ai_ops.h>
#include <ATen/ops/special_bessel_j0_ops.h>
#include <ATen/ops/special_bessel_j1_ops.h>
#include <ATen/ops/special_bessel_y0_ops.h>
#include <ATen/ops/special_bessel_y1_ops.h>
#include <ATen/ops/special_erfcx_ops.h>
#include <ATen/ops/special_log_ndtr_ops.h>
#include <ATen/ops/special_modified_bessel_i0_ops.h>
#include <ATen/ops/special_modified_bessel_i1_ops.h>
#include <ATen/ops/special_modified_bessel_k0_ops.h>
#include <ATen/ops/special_modified_bessel_k1_ops.h>
#include <ATen/ops/special_ndtri_ops.h>
#include <ATen/ops/special_scaled_modified_bessel_k0_ops.h>
#include <ATen/ops/special_scaled_modified_bessel_k1_ops.h>
#include <ATen/ops/special_spherical_bessel_j0_ops.h>
#include <ATen/ops/special_zeta_ops.h>
#include <ATen/ops/special_chebyshev_polynomial_t_ops.h>
#include <ATen/ops/special_chebyshev_polynomial_u_ops.h>
#include <ATen/ops/special_chebyshev_polynomial_v_ops.h>
#include <ATen/ops/special_chebyshev_polynomial_w_ops.h>
#include <ATen/ops/special_shifted_chebyshev_polynomial_t_ops.h>
#include <ATen/ops/special_shifted_chebyshev_polynomial_u_ops.h>
#include <ATen/ops/special_shifted_chebyshev_polynomial_v_ops.h>
#include <ATen/ops/special_shifted_chebyshev_polynomial_w_ops.h>
#include <ATen/ops/special_hermite_polynomial_h_ops.h>
#include <ATen/ops/special_hermite_polynomial_he_ops.h>
#include <ATen/ops/special_laguerre_polynomial_l_ops.h>
#include <ATen/ops/special_legendre_polynomial_p_ops.h>
#include <torch/library.h>

#include <cmath>
#include <tuple>

#include "aten/device/neuron_tensor.h"
#include "aten/fallback/cpu_fallback.h"
#include "aten/ops/elementwise_launch.h"
#include "kernels/special_pointwise.h"
#include "kernels/special_polynomials.h"

namespace torchneuron::aten {
namespace special {
namespace {

bool launch_polynomial(at::TensorIteratorBase& iter, kernels::Polynomial kind) {
  kernels::ElementwiseArgs args;
  const c10::ScalarType type = iter.dtype(0);
  if (!at::isFloatingType(type) || !to_args_converting(iter, args, type)) return false;
  const kernels::DType dtype = args.dtypes[0];
  launch(iter, "aten::special_polynomial", args, [kind, dtype](const kernels::ElementwiseArgs& a) {
    kernels::with_dtypes(a, dtype, dtype, 1, [kind](const kernels::ElementwiseArgs& b) { kernels::polynomial(kind, b); });
  });
  return true;
}

// The Bessel, Airy, normal-distribution and zeta kernels compute in the iterator's common dtype
// (float32 or float64; an integer or bool input is already promoted to the default float);
// with_dtypes converts the inputs to it and the result to the out= dtype. Half types take the
// fallback, which raises CPU's "not implemented" error.
template <typename Kernel>
bool launch_special(at::TensorIteratorBase& iter, const char* name, Kernel kernel) {
  const c10::ScalarType type = iter.common_dtype();
  kernels::ElementwiseArgs args;
  if ((type != at::kFloat && type != at::kDouble) || !to_args_converting(iter, args, type)) return false;
  const kernels::DType dtype = type == at::kFloat ? kernels::DType::kFloat32 : kernels::DType::kFloat64;
  launch(iter, name, args, [kernel, dtype](const kernels::ElementwiseArgs& a) {
    kernels::with_dtypes(a, dtype, dtype, 1, kernel);
  });
  return true;
}

// igamma / igammac / nextafter: TensorIterator's binary_op promotion; CPU has them for floating
// common dtypes only and names the others in its "not implemented" error.
template <typename Kernel>
bool launch_float_binary(at::TensorIteratorBase& iter, const char* cpu_name, const char* name, Kernel kernel) {
  const c10::ScalarType type = iter.common_dtype();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(type), "\"", cpu_name, "\" not implemented for '", c10::toString(type), "'");
  kernels::ElementwiseArgs args;
  if (!has_kernel_dtype(type) || !to_args_converting(iter, args, type)) return false;
  const kernels::DType dtype = to_kernel_dtype(type);
  launch(iter, name, args, [kernel, dtype](const kernels::ElementwiseArgs& a) {
    kernels::with_dtypes(a, dtype, dtype, 1, kernel);
  });
  return true;
}

}  // namespace

#define NEURON_FLOAT_BINARY(name, CPU_NAME, KERNEL)                                                     \
  at::Tensor& name##_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& result) {        \
    at::TensorBase out = result;                                                                       \
    auto iter = at::TensorIterator::binary_op(out, self, other);                                       \
    if (!launch_float_binary(iter, CPU_NAME, "aten::" #name ".out", KERNEL)) {                         \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(name, out)>::call(self, other, result); \
    }                                                                                                  \
    return result;                                                                                     \
  }

NEURON_FLOAT_BINARY(igamma, "igamma_cpu", [](const kernels::ElementwiseArgs& a) { kernels::incomplete_gamma(false, a); })
NEURON_FLOAT_BINARY(igammac, "igammac_cpu", [](const kernels::ElementwiseArgs& a) { kernels::incomplete_gamma(true, a); })
NEURON_FLOAT_BINARY(nextafter, "nextafter_cpu", kernels::nextafter)
#undef NEURON_FLOAT_BINARY

// frexp's out= form (the functional one is ATen's composite over it), with CPU's checks; the
// kernel reads a contiguous input and writes contiguous results, copied into strided outputs.
std::tuple<at::Tensor&, at::Tensor&> frexp_out(const at::Tensor& self, at::Tensor& mantissa, at::Tensor& exponent) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "torch.frexp() only supports floating-point dtypes");
  TORCH_CHECK(mantissa.dtype() == self.dtype(), "torch.frexp() expects mantissa to have dtype ", self.dtype(),
              " but got ", mantissa.dtype());
  TORCH_CHECK(exponent.dtype() == at::kInt, "torch.frexp() expects exponent to have int dtype but got ",
              exponent.dtype());
  at::native::resize_output(mantissa, self.sizes());
  at::native::resize_output(exponent, self.sizes());
  const at::Tensor input = self.contiguous();
  at::Tensor m = mantissa.is_contiguous() ? mantissa : at::empty(self.sizes(), mantissa.options());
  at::Tensor e = exponent.is_contiguous() ? exponent : at::empty(self.sizes(), exponent.options());
  const int64_t n = input.numel();
  if (n > 0) {
    const kernels::DType dtype = to_kernel_dtype(self.scalar_type());
    const void* pi = input.data_ptr();
    void* pm = m.data_ptr();
    int32_t* pe = e.data_ptr<int32_t>();
    enqueue(m, "aten::frexp", {&input}, [=] { kernels::frexp(dtype, n, pi, pm, pe); });
  }
  if (!m.is_same(mantissa)) mantissa.copy_(m);
  if (!e.is_same(exponent)) exponent.copy_(e);
  return {mantissa, exponent};
}

#define NEURON_SPECIAL_UNARY(name, KIND)                                                             \
  at::Tensor& special_##name##_out(const at::Tensor& self, at::Tensor& result) {                     \
    at::TensorBase out = result;                                                                      \
    auto iter = at::TensorIterator::unary_float_op(out, self);                                        \
    const auto kernel = [](const kernels::ElementwiseArgs& a) {                                       \
      kernels::special_function(kernels::SpecialFunction::KIND, a);                                   \
    };                                                                                                \
    if (!launch_special(iter, "aten::special_" #name ".out", kernel)) {                               \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(special_##name, out)>::call(self, result); \
    }                                                                                                 \
    return result;                                                                                    \
  }

NEURON_SPECIAL_UNARY(bessel_j0, kBesselJ0)
NEURON_SPECIAL_UNARY(bessel_j1, kBesselJ1)
NEURON_SPECIAL_UNARY(bessel_y0, kBesselY0)
NEURON_SPECIAL_UNARY(bessel_y1, kBesselY1)
NEURON_SPECIAL_UNARY(modified_bessel_i0, kModifiedBesselI0)
NEURON_SPECIAL_UNARY(modified_bessel_i1, kModifiedBesselI1)
NEURON_SPECIAL_UNARY(modified_bessel_k0, kModifiedBesselK0)
NEURON_SPECIAL_UNARY(modified_bessel_k1, kModifiedBesselK1)
NEURON_SPECIAL_UNARY(scaled_modified_bessel_k0, kScaledModifiedBesselK0)
NEURON_SPECIAL_UNARY(scaled_modified_bessel_k1, kScaledModifiedBesselK1)
NEURON_SPECIAL_UNARY(spherical_bessel_j0, kSphericalBesselJ0)
NEURON_SPECIAL_UNARY(airy_ai, kAiryAi)
NEURON_SPECIAL_UNARY(erfcx, kErfcx)
NEURON_SPECIAL_UNARY(log_ndtr, kLogNdtr)
NEURON_SPECIAL_UNARY(ndtri, kNdtri)
#undef NEURON_SPECIAL_UNARY

// Hurwitz zeta(x, q); the Scalar overloads reach this with a wrapped scalar.
at::Tensor& special_zeta_out(const at::Tensor& x, const at::Tensor& q, at::Tensor& result) {
  at::TensorBase out = result;
  auto iter = at::TensorIterator::binary_float_op(out, x, q);
  if (!launch_special(iter, "aten::special_zeta.out", kernels::hurwitz_zeta)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(special_zeta, out)>::call(x, q, result);
  }
  return result;
}

#define NEURON_POLYNOMIAL(name, KIND)                                                                  \
  at::Tensor& name##_out(const at::Tensor& x, const at::Tensor& n, at::Tensor& result) {             \
    at::TensorBase out = result;                                                                       \
    auto iter = at::TensorIterator::binary_float_op(out, x, n);                                        \
    if (!launch_polynomial(iter, kernels::Polynomial::KIND)) {                                          \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(name, out)>::call(x, n, result); \
    }                                                                                                  \
    return result;                                                                                     \
  }

NEURON_POLYNOMIAL(special_chebyshev_polynomial_t, kChebyshevT)
NEURON_POLYNOMIAL(special_chebyshev_polynomial_u, kChebyshevU)
NEURON_POLYNOMIAL(special_chebyshev_polynomial_v, kChebyshevV)
NEURON_POLYNOMIAL(special_chebyshev_polynomial_w, kChebyshevW)
NEURON_POLYNOMIAL(special_shifted_chebyshev_polynomial_t, kShiftedChebyshevT)
NEURON_POLYNOMIAL(special_shifted_chebyshev_polynomial_u, kShiftedChebyshevU)
NEURON_POLYNOMIAL(special_shifted_chebyshev_polynomial_v, kShiftedChebyshevV)
NEURON_POLYNOMIAL(special_shifted_chebyshev_polynomial_w, kShiftedChebyshevW)
NEURON_POLYNOMIAL(special_hermite_polynomial_h, kHermiteH)
NEURON_POLYNOMIAL(special_hermite_polynomial_he, kHermiteHe)
NEURON_POLYNOMIAL(special_laguerre_polynomial_l, kLaguerreL)
NEURON_POLYNOMIAL(special_legendre_polynomial_p, kLegendreP)
#undef NEURON_POLYNOMIAL

// The multivariate log-gamma: sum over i < p of lgamma(x - i / 2), plus p (p - 1) / 4 log(pi),
// with CPU's check of p and its int-to-default-float promotion (CPU checks no domain either).
at::Tensor& mvlgamma_out(const at::Tensor& self, int64_t p, at::Tensor& result) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isIntegralType(self.scalar_type(), true),
              "mvlgamma is not implemented for ", self.scalar_type());
  TORCH_CHECK(p >= 1, "p has to be greater than or equal to 1");
  const c10::ScalarType type = at::isIntegralType(self.scalar_type(), true)
                                   ? c10::typeMetaToScalarType(c10::get_default_dtype())
                                   : self.scalar_type();
  const at::Tensor offsets = at::arange(-0.5 * static_cast<double>(p - 1), 0.5, 0.5, self.options().dtype(type));
  at::Tensor value = at::lgamma(at::add(self.to(type).unsqueeze(-1), offsets)).sum(-1);
  value.add_(static_cast<double>(p * (p - 1)) * std::log(M_PI) * 0.25);
  TORCH_CHECK(at::can_cast(value.scalar_type(), result.scalar_type()), "mvlgamma: result type ", value.scalar_type(),
              " can't be cast to the desired output type ", result.scalar_type());
  at::native::resize_output(result, value.sizes());
  return result.copy_(value);
}

}  // namespace special

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mvlgamma.out", TORCH_FN(special::mvlgamma_out));
  m.impl("igamma.out", TORCH_FN(special::igamma_out));
  m.impl("igammac.out", TORCH_FN(special::igammac_out));
  m.impl("nextafter.out", TORCH_FN(special::nextafter_out));
  m.impl("frexp.Tensor_out", TORCH_FN(special::frexp_out));
  m.impl("special_bessel_j0.out", TORCH_FN(special::special_bessel_j0_out));
  m.impl("special_bessel_j1.out", TORCH_FN(special::special_bessel_j1_out));
  m.impl("special_bessel_y0.out", TORCH_FN(special::special_bessel_y0_out));
  m.impl("special_bessel_y1.out", TORCH_FN(special::special_bessel_y1_out));
  m.impl("special_modified_bessel_i0.out", TORCH_FN(special::special_modified_bessel_i0_out));
  m.impl("special_modified_bessel_i1.out", TORCH_FN(special::special_modified_bessel_i1_out));
  m.impl("special_modified_bessel_k0.out", TORCH_FN(special::special_modified_bessel_k0_out));
  m.impl("special_modified_bessel_k1.out", TORCH_FN(special::special_modified_bessel_k1_out));
  m.impl("special_scaled_modified_bessel_k0.out", TORCH_FN(special::special_scaled_modified_bessel_k0_out));
  m.impl("special_scaled_modified_bessel_k1.out", TORCH_FN(special::special_scaled_modified_bessel_k1_out));
  m.impl("special_spherical_bessel_j0.out", TORCH_FN(special::special_spherical_bessel_j0_out));
  m.impl("special_airy_ai.out", TORCH_FN(special::special_airy_ai_out));
  m.impl("special_erfcx.out", TORCH_FN(special::special_erfcx_out));
  m.impl("special_log_ndtr.out", TORCH_FN(special::special_log_ndtr_out));
  m.impl("special_ndtri.out", TORCH_FN(special::special_ndtri_out));
  m.impl("special_zeta.out", TORCH_FN(special::special_zeta_out));
  m.impl("special_chebyshev_polynomial_t.out", TORCH_FN(special::special_chebyshev_polynomial_t_out));
  m.impl("special_chebyshev_polynomial_u.out", TORCH_FN(special::special_chebyshev_polynomial_u_out));
  m.impl("special_chebyshev_polynomial_v.out", TORCH_FN(special::special_chebyshev_polynomial_v_out));
  m.impl("special_chebyshev_polynomial_w.out", TORCH_FN(special::special_chebyshev_polynomial_w_out));
  m.impl("special_shifted_chebyshev_polynomial_t.out", TORCH_FN(special::special_shifted_chebyshev_polynomial_t_out));
  m.impl("special_shifted_chebyshev_polynomial_u.out", TORCH_FN(special::special_shifted_chebyshev_polynomial_u_out));
  m.impl("special_shifted_chebyshev_polynomial_v.out", TORCH_FN(special::special_shifted_chebyshev_polynomial_v_out));
  m.impl("special_shifted_chebyshev_polynomial_w.out", TORCH_FN(special::special_shifted_chebyshev_polynomial_w_out));
  m.impl("special_hermite_polynomial_h.out", TORCH_FN(special::special_hermite_polynomial_h_out));
  m.impl("special_hermite_polynomial_he.out", TORCH_FN(special::special_hermite_polynomial_he_out));
  m.impl("special_laguerre_polynomial_l.out", TORCH_FN(special::special_laguerre_polynomial_l_out));
  m.impl("special_legendre_polynomial_p.out", TORCH_FN(special::special_legendre_polynomial_p_out));
}

}  // namespace torchneuron::aten
