// erfcx, log_ndtr, ndtri and the Hurwitz zeta function of real order in double.
#include <cmath>
#include <cstdint>

#include "kernels/special_functions.h"
#include "kernels/special_math.h"

namespace torchneuron::kernels::special {
namespace {

constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kSqrtTwoOverPi = 0.79788456080286535588;
constexpr double kSqrtPi = 1.77245385090551602730;

// exp(x^2) with x^2 = hi + lo split exactly (fma): exp(hi) (1 + lo). exp of the rounded square
// alone would be off by x^2 ulps (1e-13 relative at x = 26).
double exp_square(double x) {
  const double hi = x * x;
  const double lo = std::fma(x, x, -hi);
  return std::exp(hi) * (1 + lo);
}

// erfcx for x >= 26: the asymptotic series 1 / (x sqrt(pi)) sum (-1)^k (2k-1)!! / (2x^2)^k, cut
// at its first term under 1e-17 (k <= 8 here; it diverges only past k = x^2).
double erfcx_large(double x) {
  const double inverse = 1 / (2 * x * x);
  double term = 1, sum = 1;
  for (int k = 1; k < 30 && std::fabs(term) > 1e-17; ++k) {
    term *= -(2.0 * k - 1) * inverse;
    sum += term;
  }
  return sum / (x * kSqrtPi);
}

// zeta(s, a) for s > 1 and a > 0, both finite: the terms (a + k)^-s summed directly while a + k
// is under s + 20, or until the rest (at most term (a + k) / (s - 1)) is below 1e-17 of the sum;
// the remainder from b = a + N by Euler-Maclaurin,
//   b^(1-s) / (s-1) + b^-s / 2 + sum_j B_2j / (2j)! s (s+1) ... (s+2j-2) b^(-s-2j+1),
// with eight corrections (the ninth is under 1e-16 of the result for b >= s + 20).
double zeta_positive(double s, double a) {
  const double start = std::fmax(s, 1.0) + 20;
  double sum = 0;
  int64_t k = 0;
  for (; a + static_cast<double>(k) < start; ++k) {
    const double base = a + static_cast<double>(k);
    const double term = std::pow(base, -s);
    sum += term;
    if (term * std::fmax(base / (s - 1), 1.0) < 1e-17 * sum) return sum;
  }
  const double b = a + static_cast<double>(k);
  const double b_power = std::pow(b, -s);
  sum += std::pow(b, 1 - s) / (s - 1) + 0.5 * b_power;
  // B_2j / (2j)! for j = 1..8.
  static constexpr double kCorrections[] = {1.0 / 12,
                                            -1.0 / 720,
                                            1.0 / 30240,
                                            -1.0 / 1209600,
                                            1.0 / 47900160,
                                            -691.0 / 1307674368000,
                                            1.0 / 74724249600,
                                            -3617.0 / 10670622842880000};
  double factor = s * b_power / b;  // s (s+1) ... (s+2j-2) b^(-s-2j+1), j = 1
  for (int j = 0; j < 8; ++j) {
    sum += kCorrections[j] * factor;
    factor *= (s + 2 * j + 1) * (s + 2 * j + 2) / (b * b);
  }
  return sum;
}

}  // namespace

// exp(x^2) erfc(x): erfc(x) = 2 - erfc(-x) below 0 (inf once 2 exp(x^2) overflows), the product
// up to 26, the asymptotic series beyond (erfc underflows at 26.5).
double erfcx(double x) {
  if (std::isnan(x)) return x;
  if (x < -27) return kInf;  // 2 exp(x^2) overflows from -26.63
  if (x < 26) return exp_square(x) * std::erfc(x);
  return erfcx_large(x);
}

// log Phi(x), Phi(x) = erfc(-x / sqrt 2) / 2: log(erfcx(-x / sqrt 2) / 2) - x^2 / 2 below -1 (no
// underflow; -inf at -inf), log of erfc on [-1, 1], log1p(-Phi(-x)) above 1 (-0 at +inf, as
// CPU), with Phi(-x) = erfcx(x / sqrt 2) / 2 exp(-x^2 / 2): erfc(x / sqrt 2) would carry the
// rounding of x / sqrt 2 times x^2 (1e-13 relative at x = 35).
double log_ndtr(double x) {
  if (std::isnan(x)) return x;
  if (x < -1) return std::log(erfcx(-x * kSqrtHalf) / 2) - x * x / 2;
  if (x <= 1) return std::log(std::erfc(-x * kSqrtHalf) / 2);
  if (x > 40) return -0.0;  // Phi(-40) = 4e-350
  const double hi = x * x;
  const double lo = std::fma(x, x, -hi);
  const double tail = erfcx(x * kSqrtHalf) / 2 * (std::exp(-hi / 2) * (1 - lo / 2));
  return std::log1p(-tail);
}

// Phi^-1(p). With q = min(p, 1 - p) (exact), the result is -+z for Phi(-z) = q:
// z = sqrt(2) erfinv(1 - 2q) for q >= 1/4 (1 - 2q exact); below, Halley's method on
// g(z) = log Phi(-z) - log q = log(erfcx(z / sqrt 2) / 2) - z^2 / 2 - log q, with g' = -r,
// g'' = -r (r - z), r = phi(z) / Phi(-z) = sqrt(2/pi) / erfcx(z / sqrt 2); log space keeps
// subnormal q exact. Start: z^2 = -2 log q - 2 log(z sqrt(2 pi)) (Phi(-z) ~ phi(z) / z) solved
// once, within 20 % of the root; each step cubes the relative error.
double ndtri(double p) {
  if (!(p >= 0 && p <= 1)) return kNaN;
  if (p == 0) return -kInf;
  if (p == 1) return kInf;
  const bool lower = p < 0.5;
  const double q = lower ? p : 1 - p;
  double z;
  if (q >= 0.25) {
    z = erfinv(1 - 2 * q) / kSqrtHalf;
  } else {
    const double log_q = std::log(q);
    const double t = std::sqrt(-2 * log_q);
    z = t - std::log(t * std::sqrt(2 * kPi)) / t;
    for (int step = 0; step < 20; ++step) {
      const double scaled = erfcx(z * kSqrtHalf);
      const double g = std::log(scaled / 2) - z * z / 2 - log_q;
      const double r = kSqrtTwoOverPi / scaled;
      const double denominator = 2 * r + g * (r - z);
      // Newton's step (g is concave: it converges from anywhere) where Halley's would not shrink
      const double dz = denominator > r ? 2 * g / denominator : g / r;
      z += dz;
      if (std::fabs(dz) < 1e-6 * z) break;  // the next step would be under 1e-18
    }
  }
  return lower ? -z : z;
}

// zeta(x, q), with CPU's values outside the domain: +inf at x = 1 and at the poles q = 0, -1,
// -2, ... (and q = -inf); NaN for x < 1, and for q < 0 with a non-integer x (q^-x is complex);
// at x = +inf (1 at q = 1, +inf below, NaN above) and q = +inf (NaN) CPU's, not the limits.
// A negative q (integer x) splits into the terms below 0 and those above: with n = ceil(-q),
// f = q + n in (0, 1) and r = 1 - f, sum_{k<n} (q + k)^-x = (-1)^x (zeta(x, r) - zeta(x, r + n)),
// and the rest is zeta(x, f).
double hurwitz_zeta_real(double x, double q) {
  if (x == 1) return kInf;
  if (x < 1) return kNaN;
  if (q <= 0) {
    if (q == std::floor(q)) return kInf;
    if (x != std::floor(x)) return kNaN;
  }
  if (std::isnan(x) || std::isnan(q)) return kNaN;
  if (x == kInf) {
    if (q < 1) return kInf;
    return q == 1 ? 1.0 : kNaN;
  }
  if (q == kInf) return kNaN;
  if (q > 0) return zeta_positive(x, q);
  const double n = std::ceil(-q);
  const double f = q + n, r = 1 - f;
  const double tail = zeta_positive(x, r + n);
  if (std::fmod(x, 2.0) == 0) return zeta_positive(x, f) + zeta_positive(x, r) - tail;
  // Odd x: the terms at f + k and -(r + k) cancel; exactly so for f = r (q = -n + 1/2).
  return (f == r ? 0.0 : zeta_positive(x, f) - zeta_positive(x, r)) + tail;
}

}  // namespace torchneuron::kernels::special
