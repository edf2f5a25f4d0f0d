// Pointwise kernels of torch.special's Bessel, Airy, normal-distribution, Hurwitz zeta and
// incomplete gamma functions (kernels/special_math.h), evaluated in double and rounded once to
// the dtype; nextafter and frexp, which work on the encodings.
#pragma once

#include <cstdint>

#include "kernels/elementwise.h"

namespace torchneuron::kernels {

enum class SpecialFunction : uint8_t {
  kBesselJ0, kBesselJ1, kBesselY0, kBesselY1,
  kModifiedBesselI0, kModifiedBesselI1, kModifiedBesselK0, kModifiedBesselK1,
  kScaledModifiedBesselK0, kScaledModifiedBesselK1, kSphericalBesselJ0, kAiryAi,
  kErfcx, kLogNdtr, kNdtri,
};

double special_function_value(SpecialFunction kind, double x);

// out = f(x) (operands: out, x), both float32 or both float64.
void special_function(SpecialFunction kind, const ElementwiseArgs& args);

// out = zeta(x, q) (operands: out, x, q), all float32 or all float64.
void hurwitz_zeta(const ElementwiseArgs& args);

// The regularized incomplete gamma functions P(a, x) (igamma) and Q(a, x) = 1 - P (igammac),
// in double.
double incomplete_gamma(double a, double x, bool upper);

// out = P(a, x) or Q(a, x) (operands: out, a, x), one floating dtype for all.
void incomplete_gamma(bool upper, const ElementwiseArgs& args);

// out = the next representable value after a towards b (operands: out, a, b), one floating
// dtype for all; float16 / bfloat16 step through their own encodings.
void nextafter(const ElementwiseArgs& args);

// frexp of n contiguous elements of a floating dtype: mantissa (that dtype, |m| in [0.5, 1) or
// 0 / inf / NaN as is) and int32 exponent, 0 for zeros, infinities and NaN.
void frexp(DType dtype, int64_t n, const void* in, void* mantissa, int32_t* exponent);

}  // namespace torchneuron::kernels
