// Pointwise kernels of torch.special's Bessel, Airy, normal-distribution and Hurwitz zeta
// functions (kernels/special_math.h), evaluated in double and rounded once to the dtype.
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

}  // namespace torchneuron::kernels
