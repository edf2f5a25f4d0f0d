// Bessel and Airy functions in double. J0 / J1 / Y0 / Y1 below 25 by Miller's recurrence, K up
// to 30 by the trapezoidal rule on its integral, J and Y of order 1/3 (Ai below -1) from
// libstdc++'s C++17 special math functions (std::cyl_bessel_j / cyl_neumann); large arguments by
// Hankel's asymptotic expansions: libstdc++ loses digits there (J0 4e-13 absolute off between 100
// and 1000, K_{1/3} 3e-5 relative) and its K underflows where exp(x) K(x) is still representable.
#include <cmath>
#include <initializer_list>
#include <stdexcept>

#include "kernels/special_functions.h"
#include "kernels/special_math.h"

namespace torchneuron::kernels::special {
namespace {

constexpr double kSqrtHalf = 0.70710678118654752440;
// From here on the Hankel series' smallest term is under e^-2x, far below double precision.
constexpr double kHankelFrom = 25.0;

// Hankel's series for order nu at x >= kHankelFrom: the terms t_k = prod_{j<=k} (mu - (2j-1)^2) /
// (k! (8x)^k), mu = 4 nu^2. The oscillating functions take P = t0 - t2 + t4 ..., Q = t1 - t3 ...;
// K takes the plain sum.
struct Hankel {
  double p = 0, q = 0, sum = 0;
};

Hankel hankel_series(double nu, double x) {
  const double mu = 4 * nu * nu;
  Hankel h;
  double term = 1;
  h.p = 1;
  h.sum = 1;
  for (int k = 1; k < 100; ++k) {
    const double odd = 2.0 * k - 1;
    term *= (mu - odd * odd) / (8.0 * k * x);
    h.sum += term;
    (k % 2 == 1 ? h.q : h.p) += (k / 2) % 2 == 0 ? term : -term;  // sign (-1)^floor(k/2)
    if (std::fabs(term) < 1e-18) break;
  }
  return h;
}

// J_n and Y_n (n = 0, 1) for x >= kHankelFrom: sqrt(2 / (pi x)) (P cos chi - Q sin chi) and
// (P sin chi + Q cos chi), chi = x - (2n + 1) pi / 4. cos chi and sin chi come from sin x and
// cos x (glibc reduces a large x exactly), not from x - pi/4, which rounds off its phase.
void bessel_large(int order, double x, double* j, double* y) {
  const Hankel h = hankel_series(order, x);
  const double s = std::sin(x), c = std::cos(x);
  double cos_chi, sin_chi;
  if (order == 0) {
    cos_chi = (c + s) * kSqrtHalf;
    sin_chi = (s - c) * kSqrtHalf;
  } else {
    cos_chi = (s - c) * kSqrtHalf;
    sin_chi = -(c + s) * kSqrtHalf;
  }
  const double amplitude = std::sqrt(2 / (kPi * x));
  if (j) *j = amplitude * (h.p * cos_chi - h.q * sin_chi);
  if (y) *y = amplitude * (h.p * sin_chi + h.q * cos_chi);
}

// libstdc++ throws std::domain_error outside its domain; no exception may leave a kernel.
template <typename F>
double guarded(F f) {
  try {
    return f();
  } catch (const std::exception&) {
    return kNaN;
  }
}

// Below this the series' first terms are exact to double precision (the next are under
// x^2 |log x| < 2e-17 relative); libstdc++ gives NaN for subnormal x.
constexpr double kTiny = 1e-9;
constexpr double kEulerGamma = 0.57721566490153286061;
constexpr double kLn2 = 0.69314718055994530942;  // log(x / 2) would round a subnormal x / 2 to 0

// J0, J1, Y0 and Y1 for kTiny <= x < kHankelFrom by Miller's backward recurrence
// J_(m-1) = (2m / x) J_m - J_(m+1) from J_(N+1) = 0, J_N = tiny at an even N past x (stable
// downwards; the start's error dies out), normalized by J0 + 2 sum J_2k = 1, with Neumann's
// series Y0 = (2/pi) (log(x/2) + gamma) J0 - (4/pi) sum (-1)^k J_2k / k and its derivative
// Y1 = -Y0' = (2/pi) ((log(x/2) + gamma) J1 - J0 / x + sum (-1)^k (J_(2k-1) - J_(2k+1)) / k).
// About 2e-15 of the envelope, against libstdc++'s 1e-14 (and 10 times its speed).
struct BesselSmall {
  double j0, j1, y0, y1;
};

BesselSmall bessel_by_recurrence(double x) {
  const int start = 2 * static_cast<int>((1.2 * x + 36) / 2);
  const double two_over_x = 2 / x;
  double next = 0, current = 1e-30;  // J_(m+1), J_m up to a common factor
  double even_sum = 0, y0_sum = 0, y1_sum = 0, j1 = 0;
  for (int m = start; m > 0; --m) {
    const double previous = m * two_over_x * current - next;
    if (m % 2 == 0) {
      const double k = m / 2;
      const double sign = (m / 2) % 2 == 0 ? 1.0 : -1.0;
      even_sum += current;
      y0_sum += sign * current / k;
      y1_sum += sign * (previous - next) / k;
    }
    next = current;
    current = previous;
    if (m == 2) j1 = current;
    if (std::fabs(current) > 1e250) {  // rescale all: the values grow like (2m / x)^m for small x
      for (double* v : {&current, &next, &even_sum, &y0_sum, &y1_sum, &j1}) *v *= 1e-250;
    }
  }
  const double norm = current + 2 * even_sum;
  BesselSmall r;
  r.j0 = current / norm;
  r.j1 = j1 / norm;
  const double log_term = std::log(x / 2) + kEulerGamma;
  r.y0 = 2 / kPi * (log_term * r.j0 - 2 * y0_sum / norm);
  r.y1 = 2 / kPi * (log_term * r.j1 - r.j0 / x + y1_sum / norm);
  return r;
}

double bessel_j(int order, double x) {
  if (std::isnan(x) || std::isinf(x)) return kNaN;
  const double a = std::fabs(x);
  const double sign = order == 1 && x < 0 ? -1.0 : 1.0;
  if (a < kTiny) return order == 0 ? 1.0 : x / 2;  // J1(-0) = -0
  double value;
  if (a >= kHankelFrom) {
    bessel_large(order, a, &value, nullptr);
  } else {
    const BesselSmall r = bessel_by_recurrence(a);
    value = order == 0 ? r.j0 : r.j1;
  }
  return sign * value;
}

double bessel_y(int order, double x) {
  if (std::isnan(x) || x < 0 || x == kInf) return kNaN;
  if (x == 0) return -kInf;
  if (x < kTiny) return order == 0 ? 2 / kPi * (std::log(x) - kLn2 + kEulerGamma) : -2 / (kPi * x);
  if (x >= kHankelFrom) {
    double value;
    bessel_large(order, x, nullptr, &value);
    return value;
  }
  const BesselSmall r = bessel_by_recurrence(x);
  return order == 0 ? r.y0 : r.y1;
}

// exp(x) K_nu(x) for x > 30: sqrt(pi / (2x)) times the plain sum of the Hankel terms.
double scaled_bessel_k_large(double nu, double x) {
  return std::sqrt(kPi / (2 * x)) * hankel_series(nu, x).sum;
}

constexpr double kBesselKAsymptoticFrom = 30.0;

// exp(x) K_nu(x) = integral over t >= 0 of exp(-x (cosh t - 1)) cosh(nu t), cosh t - 1 =
// 2 sinh^2(t/2), by the trapezoidal rule: the integrand is analytic in |Im t| < pi/2 and decays
// doubly exponentially, so step h errs by about exp(-pi^2 / h) (1e-21 at h = 0.2) relative; for
// larger x the peak at 0, about exp(-x t^2 / 2), wants h^2 x under 0.36 (error exp(-2 pi^2 /
// (h^2 x)) < 1e-23). Summed until the terms, past the peak of cosh(nu t) exp(...), fall under
// 1e-18 of the sum.
double scaled_bessel_k_integral(double nu, double x) {
  const double step = std::fmin(0.2, 0.6 / std::sqrt(x));
  double sum = 0.5;  // the t = 0 term, halved
  for (int j = 1; j < 100000; ++j) {
    const double t = j * step;
    const double e = std::expm1(t / 2);
    const double half_sinh = (e + e / (e + 1)) / 2;  // sinh(t / 2), exact near 0
    const double cosh_minus_1 = 2 * half_sinh * half_sinh;
    const double exponent = x * cosh_minus_1;
    const double weight = nu == 0 ? 1.0 : nu == 1 ? 1 + cosh_minus_1 : std::cosh(nu * t);
    const double term = std::exp(-exponent) * weight;
    sum += term;
    if (exponent > 1 + nu * t && term < 1e-18 * sum) break;
  }
  return step * sum;
}

// K_nu(x) or exp(x) K_nu(x) for x > 0. Unscaled beyond 30, exp(-x) in two halves, so the result
// underflows gradually only where K itself does.
double bessel_k_positive(double nu, double x, bool scaled) {
  if (x > kBesselKAsymptoticFrom) {
    const double s = scaled_bessel_k_large(nu, x);
    if (scaled) return s;
    const double half = std::exp(-x / 2);
    return half * s * half;
  }
  if (x < kTiny && (nu == 0 || nu == 1)) {  // K0 = -log(x / 2) - gamma, K1 = 1 / x
    const double k = nu == 0 ? kLn2 - kEulerGamma - std::log(x) : 1 / x;
    return scaled ? std::exp(x) * k : k;
  }
  const double s = scaled_bessel_k_integral(nu, x);
  return scaled ? s : std::exp(-x) * s;
}

// Ai(0) = 1 / (3^(2/3) Gamma(2/3)) and -Ai'(0) = 1 / (3^(1/3) Gamma(1/3)).
constexpr double kAiryAtZero = 0.355028053887817239260;
constexpr double kAiryMinusSlopeAtZero = 0.258819403792806798405;

// Ai(x) = Ai(0) f(x) + Ai'(0) g(x) with f = sum 1*4*...*(3k-2) x^3k / (3k)! and
// g = sum 2*5*...*(3k-1) x^(3k+1) / (3k+1)!, for |x| <= 1 (the two terms cancel beyond).
double airy_series(double x) {
  const double cube = x * x * x;
  double f_term = 1, g_term = x, f = 1, g = x;
  for (int k = 1; k < 40; ++k) {
    f_term *= cube / ((3.0 * k - 1) * (3.0 * k));
    g_term *= cube / ((3.0 * k) * (3.0 * k + 1));
    f += f_term;
    g += g_term;
    if (std::fabs(f_term) < 1e-18 * std::fabs(f) && std::fabs(g_term) < 1e-18 * std::fabs(g)) break;
  }
  return kAiryAtZero * f - kAiryMinusSlopeAtZero * g;
}

// Ai(-t) for t > 1, zeta = 2/3 t^(3/2): (sqrt(t) / 2) (J_{1/3}(zeta) - Y_{1/3}(zeta) / sqrt(3))
// (J_{-1/3} = J_{1/3} / 2 - sqrt(3) / 2 Y_{1/3}); for zeta >= kHankelFrom that combination of
// Hankel's forms is pi^-1/2 t^-1/4 (P cos(zeta - pi/4) - Q sin(zeta - pi/4)), order 1/3.
double airy_negative(double t) {
  const double zeta = 2.0 / 3.0 * t * std::sqrt(t);
  if (zeta >= kHankelFrom) {
    const Hankel h = hankel_series(1.0 / 3.0, zeta);
    const double s = std::sin(zeta), c = std::cos(zeta);
    const double cos_phase = (c + s) * kSqrtHalf, sin_phase = (s - c) * kSqrtHalf;
    return (h.p * cos_phase - h.q * sin_phase) / (std::sqrt(kPi) * std::sqrt(std::sqrt(t)));
  }
  return guarded([&] {
    const double j = std::cyl_bessel_j(1.0 / 3.0, zeta), y = std::cyl_neumann(1.0 / 3.0, zeta);
    return std::sqrt(t) / 2 * (j - y / std::sqrt(3.0));
  });
}

}  // namespace

double bessel_j0(double x) { return bessel_j(0, x); }
double bessel_j1(double x) { return bessel_j(1, x); }
double bessel_y0(double x) { return bessel_y(0, x); }
double bessel_y1(double x) { return bessel_y(1, x); }

// CPU gives NaN at +-inf (the limits are +inf and +-inf).
double modified_bessel_i(int order, double x) {
  if (std::isinf(x)) return kNaN;
  return bessel_i(order, x, false);
}

double modified_bessel_k(int order, double x, bool scaled) {
  if (std::isnan(x) || x < 0) return kNaN;
  if (x == 0) return kInf;
  if (x == kInf) return 0;
  return bessel_k_positive(order, x, scaled);
}

// sin(x) / x; 1 at 0 and 0 at +-inf, as CPU.
double spherical_bessel_j0(double x) {
  if (std::isinf(x)) return 0;
  if (x == 0) return 1;
  return std::sin(x) / x;
}

// Ai(x): the Maclaurin series for |x| <= 1; beyond, (1 / pi) sqrt(x / 3) K_{1/3}(2/3 x^(3/2)) for
// x > 1 and J / Y of order 1/3 for x < -1. NaN at +-inf, as CPU (the limits are 0).
double airy_ai(double x) {
  if (std::isnan(x) || std::isinf(x)) return kNaN;
  if (std::fabs(x) <= 1) return airy_series(x);
  if (x < 0) return airy_negative(-x);
  const double zeta = 2.0 / 3.0 * x * std::sqrt(x);
  return std::sqrt(x / 3) / kPi * bessel_k_positive(1.0 / 3.0, zeta, false);
}

}  // namespace torchneuron::kernels::special
