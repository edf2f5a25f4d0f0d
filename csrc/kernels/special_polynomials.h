// The orthogonal polynomials of torch.special (Chebyshev of four kinds and their shifted forms,
// Hermite, Laguerre, Legendre) as pointwise kernels of (x, n), computed in double.
#pragma once

#include <cstdint>

#include "kernels/elementwise.h"

namespace torchneuron::kernels {

enum class Polynomial : uint8_t {
  kChebyshevT, kChebyshevU, kChebyshevV, kChebyshevW,
  kShiftedChebyshevT, kShiftedChebyshevU, kShiftedChebyshevV, kShiftedChebyshevW,
  kHermiteH, kHermiteHe, kLaguerreL, kLegendreP,
};

// P_n(x) of one polynomial at a double x and degree n (truncated to an integer; 0 for n < 0).
double polynomial_value(Polynomial kind, double x, double n);

// out = P_n(x) (operands: out, x, n), all of one floating dtype.
void polynomial(Polynomial kind, const ElementwiseArgs& args);

}  // namespace torchneuron::kernels
