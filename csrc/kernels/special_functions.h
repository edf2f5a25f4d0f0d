// Special functions in double precision: log-gamma, digamma, polygamma and the inverse error
// function (float erfinv is vector_math.h's vector_erfinv). Float and half inputs of the others
// are computed in double and rounded once (glibc's lgammaf was 2.2 ulp off near negative
// roots). Values at poles and outside the domain are those CPU PyTorch gives, except where noted.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace torchneuron::kernels::special {

constexpr double kPi = 3.14159265358979323846;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// lgamma_r rather than lgamma: lgamma writes the global signgam, a data race between the
// compute pool's threads.
inline double log_gamma(double x) {
  int sign;
  return ::lgamma_r(x, &sign);
}

// x - trunc(x): the reflection formulas evaluate sin and tan at pi times this, where pi x itself
// would lose the low bits of a large x.
inline double fractional_part(double x) { return x - std::trunc(x); }

// cot(pi r) for 0 < |r| < 1, exactly 0 at r = +-1/2: r moved into [-1/2, 1/2] (exact), and
// beyond 1/4 cot(pi r) = tan(pi (1/2 - |r|)) with the sign of r (1/2 - |r| exact there). As
// 1 / tan(pi r), r = -1/2 gave -6e-17, which polygamma's reflection raises to the power n + 1.
inline double cot_pi(double r) {
  if (r > 0.5) r -= 1;
  if (r < -0.5) r += 1;
  const double a = std::fabs(r);
  if (a <= 0.25) return 1 / std::tan(kPi * r);
  return std::copysign(std::tan(kPi * (0.5 - a)), r);
}

// psi(x) = Gamma'(x) / Gamma(x). psi(+-0) = -+inf and NaN at the negative integers, as CPU
// PyTorch; reflection psi(x) = psi(1 - x) - pi cot(pi x) below 0; the recurrence
// psi(x) = psi(x + 1) - 1 / x up to 10, then the asymptotic series through x^-14 (its
// truncation error there is under 5e-17).
inline double digamma(double x) {
  if (x == 0) return std::copysign(kInf, -x);
  if (x < 0) {
    if (x == std::trunc(x)) return kNaN;  // and -inf
    return digamma(1 - x) - kPi * cot_pi(fractional_part(x));
  }
  double shift = 0;
  while (x < 10) {
    shift -= 1 / x;
    x += 1;
  }
  const double z = 1 / (x * x);
  // Bernoulli numbers B_2k / 2k for k = 1..7, innermost last.
  double series = -1.0 / 12;
  series = series * z + 691.0 / 32760;
  series = series * z - 1.0 / 132;
  series = series * z + 1.0 / 240;
  series = series * z - 1.0 / 252;
  series = series * z + 1.0 / 120;
  series = series * z - 1.0 / 12;
  return shift + std::log(x) - 0.5 / x + series * z;
}

// psi'(x): +inf at 0 and the negative integers (the poles), reflection
// psi'(x) = pi^2 / sin^2(pi x) - psi'(1 - x) below 0, the recurrence psi'(x) = psi'(x + 1) + 1 / x^2
// up to 12, then the asymptotic series 1/x + 1/(2x^2) + sum B_2k / x^(2k+1) through x^-15.
inline double trigamma(double x) {
  if (x <= 0) {
    if (x == std::trunc(x)) return x == -kInf ? kNaN : kInf;
    const double s = std::sin(kPi * fractional_part(x));
    return kPi * kPi / (s * s) - trigamma(1 - x);
  }
  double shift = 0;
  while (x < 12) {
    shift += 1 / (x * x);
    x += 1;
  }
  const double u = 1 / x, z = u * u;
  double series = 7.0 / 6;  // B_14
  series = series * z - 691.0 / 2730;
  series = series * z + 5.0 / 66;
  series = series * z - 1.0 / 30;
  series = series * z + 1.0 / 42;
  series = series * z - 1.0 / 30;
  series = series * z + 1.0 / 6;
  return shift + u + 0.5 * z + series * z * u;
}

// Hurwitz zeta(s, a) = sum over k >= 0 of (a + k)^-s for an integer s >= 2 and any a: the terms
// summed directly until a + k reaches s + 20, the rest by Euler-Maclaurin with eight Bernoulli
// corrections (their truncation error is under 1e-16 of the result there). +inf at the
// non-positive integers (poles), as CPU PyTorch's zeta; summed, -0 to an odd power would give
// -inf. At +inf the limit 0 and at -inf NaN, where CPU PyTorch's gives NaN and +-inf.
inline double hurwitz_zeta(int64_t s, double a) {
  if (std::isnan(a) || a == -kInf) return kNaN;
  if (a == kInf) return 0;
  if (a <= 0 && a == std::trunc(a)) return kInf;
  const double start = static_cast<double>(s) + 20;
  const double ds = static_cast<double>(s);
  double sum = 0;
  while (a < start) {
    sum += std::pow(a, -ds);
    a += 1;
  }
  // B_2j / (2j)! for j = 1..8.
  static constexpr double kCorrections[] = {1.0 / 12, -1.0 / 720, 1.0 / 30240, -1.0 / 1209600,
                                            1.0 / 47900160, -691.0 / 1307674368000, 1.0 / 74724249600,
                                            -3617.0 / 10670622842880000};
  const double a_power = std::pow(a, -ds);  // a^-s
  sum += a * a_power / (ds - 1) + 0.5 * a_power;
  // j-th correction: B_2j / (2j)! * s (s+1) ... (s+2j-2) * a^(-s-2j+1).
  double rising = ds;            // s (s+1) ... (s+2j-2)
  double power = a_power / a;    // a^(-s-2j+1)
  const double inverse_square = 1 / (a * a);
  for (int j = 0; j < 8; ++j) {
    sum += kCorrections[j] * rising * power;
    rising *= (ds + 2 * j + 1) * (ds + 2 * j + 2);
    power *= inverse_square;
  }
  return sum;
}

// d^n/dx^n cot(pi x) / pi^n = P_n(cot(pi x)), with P_0(c) = c and P_(k+1)(c) = -(1 + c^2) P_k'(c):
// P_n has degree n + 1.
inline double cot_derivative(int64_t n, double c) {
  constexpr int kCoefficients = 172;  // polygamma reflects for n <= 170
  double p[kCoefficients], next[kCoefficients];  // only the entries up to P's degree are read
  p[0] = 0;
  p[1] = 1;
  for (int64_t degree = 1; degree <= n; ++degree) {
    // -(1 + c^2) P' with P' = sum over i < degree of (i + 1) p[i + 1] c^i.
    for (int64_t i = 0; i <= degree + 1; ++i) {
      const double from_one = i < degree ? (i + 1) * p[i + 1] : 0;
      const double from_c2 = i >= 2 ? (i - 1) * p[i - 1] : 0;
      next[i] = -(from_one + from_c2);
    }
    std::copy(next, next + degree + 2, p);
  }
  double value = 0;
  for (int64_t i = n + 1; i >= 0; --i) value = value * c + p[i];
  return value;
}

// psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x) for n >= 2; n = 0 and 1 are digamma and trigamma.
// Below 0 by reflection, psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi^(n+1) P_n(cot(pi x)): summed
// directly, the terms of zeta cancel (polygamma(4, -5371.5) came out 7 times too large).
inline double polygamma(int64_t n, double x) {
  if (n == 0) return digamma(x);
  if (n == 1) return trigamma(x);
  const double sign = n % 2 ? 1.0 : -1.0;
  if (x < 0 && x != -kInf && x != std::trunc(x) && n <= 170) {
    const double c = cot_pi(fractional_part(x));
    return -sign * polygamma(n, 1 - x) - std::pow(kPi, static_cast<double>(n + 1)) * cot_derivative(n, c);
  }
  const double factorial = std::tgamma(static_cast<double>(n) + 1);
  return sign * factorial * hurwitz_zeta(n + 1, x);
}

// erfinv(y): NaN outside [-1, 1], +-inf at +-1, y's signed zero at 0. An initial guess within
// 0.2% (Winitzki's closed form; y sqrt(pi)/2 near 0, where that form cancels), then Halley steps
// on erf(x) = |y|, or on erfc(x) = 1 - |y| (exact) past 0.5, where erf(x) is too close to 1 to
// tell x's last bits apart. Each step cubes the relative error: three reach double precision.
inline double erfinv(double y) {
  const double a = std::fabs(y);
  if (!(a <= 1)) return kNaN;
  if (a == 1) return std::copysign(kInf, y);
  if (a == 0) return y;
  constexpr double kWinitzki = 0.147;
  constexpr double kTwoOverSqrtPi = 1.12837916709551257390;
  double x;
  if (a < 1e-4) {
    x = a / kTwoOverSqrtPi * (1 + kPi / 12 * a * a);
  } else {
    const double l = std::log1p(-a * a);
    const double b = 2 / (kPi * kWinitzki) + l / 2;
    x = std::sqrt(std::sqrt(b * b - l / kWinitzki) - b);
  }
  const bool tail = a > 0.5;
  const double complement = 1 - a;
  for (int step = 0; step < 3; ++step) {
    const double slope = kTwoOverSqrtPi * std::exp(-x * x);
    // Newton's step d = f / f'; f'' / f' = -2x for both erf and erfc.
    const double d = tail ? -(std::erfc(x) - complement) / slope : (std::erf(x) - a) / slope;
    x -= d / (1 + x * d);
  }
  return std::copysign(x, y);
}

// The modified Bessel functions of the first kind I0 and I1, times exp(-|x|) when `scaled`
// (torch.i0, special.i0e, special.i1, special.i1e). Up to |x| = 30 the power series
// (x/2)^n sum_k (x^2/4)^k / (k! (k+n)!), whose terms are all of one sign; beyond, the asymptotic
// series e^|x| / sqrt(2 pi |x|) sum_k (-1)^k prod_{j<=k} (4n^2 - (2j-1)^2) / (k! (8|x|)^k), cut at
// its first term under 1e-17 (by k = 17 from 30 on, long before it diverges near k = 2|x|).
inline double bessel_i(int order, double x, bool scaled) {
  if (std::isnan(x)) return x;
  const double a = std::fabs(x);
  const double sign = order == 1 && x < 0 ? -1.0 : 1.0;
  if (std::isinf(x)) return scaled ? sign * 0.0 : sign * kInf;
  if (a <= 30) {
    const double quarter_square = x * x / 4;
    double term = order == 0 ? 1.0 : a / 2;
    double sum = term;
    for (int k = 1; k < 200 && term > sum * 1e-17; ++k) {
      term *= quarter_square / (k * (k + order));
      sum += term;
    }
    return sign * (scaled ? sum * std::exp(-a) : sum);
  }
  const double mu = 4.0 * order * order;
  double term = 1.0, sum = 1.0;
  for (int k = 1; k < 60 && std::fabs(term) > 1e-17; ++k) {
    const double odd = 2.0 * k - 1;
    term *= -(mu - odd * odd) / (k * 8 * a);
    sum += term;
  }
  const double prefactor = 1 / std::sqrt(2 * kPi * a);
  // Unscaled, e^|x| in two halves: the product overflows only where I itself does.
  return sign * (scaled ? prefactor * sum : std::exp(a / 2) * (prefactor * sum) * std::exp(a / 2));
}

}  // namespace torchneuron::kernels::special
