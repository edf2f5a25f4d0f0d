#include "kernels/special_pointwise.h"

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "kernels/dtype_dispatch.h"
#include "kernels/elementwise_map.h"
#include "kernels/special_math.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {
namespace {

// Float inputs compute in double and round once: CPU's float kernels are within a few ulps of
// that, and OpInfo's tolerances are set against float64.
template <int K, typename F>
void map_float(const ElementwiseArgs& args, const char* what, F f) {
  if (args.numel() == 0) return;
  switch (args.dtypes[0]) {
    case DType::kFloat32:
      return elementwise_map::map<float, float, K>(args, f);
    case DType::kFloat64:
      return elementwise_map::map<double, double, K>(args, f);
    default:
      throw runtime::KernelError(std::string(what) + " takes float32 and float64 only");
  }
}

// Every floating dtype, computed in Compute<T> by f.
template <int K, typename F>
void map_any_float(const ElementwiseArgs& args, const char* what, F f) {
  if (args.numel() == 0) return;
  switch (args.dtypes[0]) {
    case DType::kFloat16: return elementwise_map::map<Half, Half, K>(args, f);
    case DType::kBFloat16: return elementwise_map::map<BFloat16, BFloat16, K>(args, f);
    default: return map_float<K>(args, what, f);
  }
}

// ---- incomplete gamma ----------------------------------------------------------------------
// P(a, x) = gamma(a, x) / Gamma(a) from its power series where x < a + 1, Q(a, x) from
// Legendre's continued fraction elsewhere, the other as the complement. Both are scaled by
// x^a e^-x / Gamma(a), taken through Stirling's form for a >= 10, where a log x and log Gamma(a)
// would cancel.

constexpr double kGammaEpsilon = 1e-17;
constexpr int kGammaMaxTerms = 1000000;

// log Gamma(a) - (a - 1/2) log a + a - log(2 pi) / 2, a >= 10, by its asymptotic series.
double stirling_correction(double a) {
  const double r = 1.0 / a, r2 = r * r;
  // B_2k / (2k (2k - 1)) for k = 8 down to 1.
  constexpr double kCoefficients[] = {-3617.0 / 122400.0, 1.0 / 156.0,     -691.0 / 360360.0, 1.0 / 1188.0,
                                      -1.0 / 1680.0,      1.0 / 1260.0,    -1.0 / 360.0,      1.0 / 12.0};
  double sum = 0.0;
  for (const double c : kCoefficients) sum = sum * r2 + c;
  return sum * r;
}

// x^a e^-x / Gamma(a), a > 0, x > 0 finite. For a >= 10: sqrt(a / 2 pi) (x / a)^a e^(a - x) over
// exp(stirling_correction(a)); near x = a through log1p of (x - a) / a, which keeps the small
// exponent accurate.
double gamma_scale(double a, double x) {
  if (a < 10.0) return std::exp(a * std::log(x) - x - std::lgamma(a));
  const double d = x - a, ratio = x / a;
  const double log_power = ratio > 0.5 && ratio < 2.0 ? a * std::log1p(d / a) - d : a * std::log(ratio) - d;
  return std::exp(log_power - stirling_correction(a)) * std::sqrt(a / (2.0 * 3.14159265358979323846));
}

// log Gamma(1 + a) for 0 <= a < 1: the Taylor series -euler a + sum over k >= 2 of
// (-1)^k zeta(k) a^k / k below a = 0.5, where lgamma(1 + a) would lose a's low bits.
double log_gamma_1p(double a) {
  if (a >= 0.5) return std::lgamma(1.0 + a);
  constexpr double kPi2 = 9.8696044010893586188;  // pi^2
  // zeta(2) ... zeta(9); larger k sum their series directly.
  constexpr double kZeta[] = {kPi2 / 6.0, 1.2020569031595942854, kPi2 * kPi2 / 90.0, 1.0369277551433699263,
                              kPi2 * kPi2 * kPi2 / 945.0, 1.0083492773819228268, kPi2 * kPi2 * kPi2 * kPi2 / 9450.0,
                              1.0020083928260822144};
  double sum = 0.0, power = -a;
  for (int k = 2; k < 64; ++k) {
    power *= -a;  // (-a)^k
    double zeta = 1.0;
    if (k <= 9) {
      zeta = kZeta[k - 2];
    } else {
      for (int n = 2; n <= 40; ++n) zeta += std::pow(static_cast<double>(n), -k);
    }
    const double term = power * zeta / k;
    sum += term;
    if (std::fabs(term) < 1e-18 * a) break;
  }
  return -0.57721566490153286061 * a + sum;
}

// Q(a, x) for a < 1, x < a + 1, where 1 - P would cancel: with u = log(x^a / Gamma(1 + a)) and
// P = e^u (1 + a S), S = sum over n >= 1 of (-x)^n / (n! (a + n)), Q = -expm1(u) - e^u a S.
double upper_small_a(double a, double x) {
  const double u = a * std::log(x) - log_gamma_1p(a);
  double power = 1.0, sum = 0.0;
  for (int n = 1; n < 200; ++n) {
    power *= -x / n;
    const double term = power / (a + n);
    sum += term;
    if (std::fabs(term) < std::fabs(sum) * kGammaEpsilon) break;
  }
  return -std::expm1(u) - std::exp(u) * a * sum;
}

// P(a, x) for x < a + 1: scale / a * sum over n of x^n / ((a + 1) ... (a + n)).
double lower_series(double a, double x) {
  double term = 1.0, sum = 1.0;
  for (int n = 1; n < kGammaMaxTerms; ++n) {
    term *= x / (a + n);
    sum += term;
    if (term < sum * kGammaEpsilon) break;
  }
  return gamma_scale(a, x) / a * sum;
}

// Q(a, x) for x >= a + 1: scale / (x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / ...)), by
// the modified Lentz method.
double upper_fraction(double a, double x) {
  constexpr double kTiny = 1e-300;
  double b = x + 1.0 - a;
  double c = 1.0 / kTiny, d = 1.0 / b, h = d;
  for (int n = 1; n < kGammaMaxTerms; ++n) {
    const double an = -n * (n - a);
    b += 2.0;
    d = an * d + b;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < kGammaEpsilon * 4) break;
  }
  return gamma_scale(a, x) * h;
}

// ---- nextafter of the 16-bit types, on their encodings ----------------------------------

template <typename T>
float next_after_16(float from_value, float to_value) {
  if (from_value != from_value || to_value != to_value) return from_value + to_value;  // NaN
  const uint16_t from = T(from_value).bits, to = T(to_value).bits;
  if (from == to) return from_value;
  constexpr uint16_t kSign = 0x8000;
  const uint16_t abs_from = from & ~kSign, abs_to = to & ~kSign;
  T result;
  if (abs_from == 0) {
    if (abs_to == 0) return to_value;
    result.bits = static_cast<uint16_t>((to & kSign) | 1u);  // the smallest subnormal towards `to`
  } else if (abs_from > abs_to || ((from ^ to) & kSign) != 0) {
    result.bits = static_cast<uint16_t>(from - 1);
  } else {
    result.bits = static_cast<uint16_t>(from + 1);
  }
  return static_cast<float>(result);
}

template <typename T>
void frexp_typed(int64_t n, const T* in, T* mantissa, int32_t* exponent) {
  constexpr bool kHalfType = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
  using C = std::conditional_t<kHalfType, float, T>;
  for (int64_t i = 0; i < n; ++i) {
    const C value = static_cast<C>(in[i]);
    int e = 0;
    const C m = std::frexp(value, &e);  // exact in T
    mantissa[i] = static_cast<T>(m);
    exponent[i] = std::isfinite(value) ? e : 0;  // 0 for inf and NaN
  }
}

}  // namespace

double special_function_value(SpecialFunction kind, double x) {
  namespace s = special;
  switch (kind) {
    case SpecialFunction::kBesselJ0: return s::bessel_j0(x);
    case SpecialFunction::kBesselJ1: return s::bessel_j1(x);
    case SpecialFunction::kBesselY0: return s::bessel_y0(x);
    case SpecialFunction::kBesselY1: return s::bessel_y1(x);
    case SpecialFunction::kModifiedBesselI0: return s::modified_bessel_i(0, x);
    case SpecialFunction::kModifiedBesselI1: return s::modified_bessel_i(1, x);
    case SpecialFunction::kModifiedBesselK0: return s::modified_bessel_k(0, x, false);
    case SpecialFunction::kModifiedBesselK1: return s::modified_bessel_k(1, x, false);
    case SpecialFunction::kScaledModifiedBesselK0: return s::modified_bessel_k(0, x, true);
    case SpecialFunction::kScaledModifiedBesselK1: return s::modified_bessel_k(1, x, true);
    case SpecialFunction::kSphericalBesselJ0: return s::spherical_bessel_j0(x);
    case SpecialFunction::kAiryAi: return s::airy_ai(x);
    case SpecialFunction::kErfcx: return s::erfcx(x);
    case SpecialFunction::kLogNdtr: return s::log_ndtr(x);
    case SpecialFunction::kNdtri: return s::ndtri(x);
  }
  return std::numeric_limits<double>::quiet_NaN();
}

void special_function(SpecialFunction kind, const ElementwiseArgs& args) {
  map_float<1>(args, "special function", [kind](auto x) {
    return static_cast<decltype(x)>(special_function_value(kind, static_cast<double>(x)));
  });
}

void hurwitz_zeta(const ElementwiseArgs& args) {
  map_float<2>(args, "zeta", [](auto x, auto q) {
    return static_cast<decltype(x)>(special::hurwitz_zeta_real(static_cast<double>(x), static_cast<double>(q)));
  });
}

double incomplete_gamma(double a, double x, bool upper) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  if (std::isnan(a) || std::isnan(x) || x < 0.0 || a < 0.0) return kNaN;
  // The limits at the domain's edges, as CPU PyTorch returns them.
  if (a == 0.0) return x > 0.0 ? (upper ? 0.0 : 1.0) : kNaN;
  if (x == 0.0) return upper ? 1.0 : 0.0;
  if (std::isinf(a)) return std::isinf(x) ? kNaN : (upper ? 1.0 : 0.0);
  if (std::isinf(x)) return upper ? 0.0 : 1.0;
  if (x < a + 1.0) {
    if (upper && a < 1.0) return upper_small_a(a, x);
    const double p = lower_series(a, x);
    return upper ? 1.0 - p : p;
  }
  const double q = upper_fraction(a, x);
  return upper ? q : 1.0 - q;
}

void incomplete_gamma(bool upper, const ElementwiseArgs& args) {
  map_any_float<2>(args, "igamma", [upper](auto a, auto x) {
    return static_cast<decltype(a)>(incomplete_gamma(static_cast<double>(a), static_cast<double>(x), upper));
  });
}

void nextafter(const ElementwiseArgs& args) {
  if (args.numel() == 0) return;
  switch (args.dtypes[0]) {
    case DType::kFloat16:
      return elementwise_map::map<Half, Half, 2>(args, [](float a, float b) { return next_after_16<Half>(a, b); });
    case DType::kBFloat16:
      return elementwise_map::map<BFloat16, BFloat16, 2>(args,
                                                         [](float a, float b) { return next_after_16<BFloat16>(a, b); });
    default:
      return map_float<2>(args, "nextafter", [](auto a, auto b) { return std::nextafter(a, b); });
  }
}

void frexp(DType dtype, int64_t n, const void* in, void* mantissa, int32_t* exponent) {
  switch (dtype) {
    case DType::kFloat16:
      return frexp_typed(n, static_cast<const Half*>(in), static_cast<Half*>(mantissa), exponent);
    case DType::kBFloat16:
      return frexp_typed(n, static_cast<const BFloat16*>(in), static_cast<BFloat16*>(mantissa), exponent);
    case DType::kFloat32:
      return frexp_typed(n, static_cast<const float*>(in), static_cast<float*>(mantissa), exponent);
    case DType::kFloat64:
      return frexp_typed(n, static_cast<const double*>(in), static_cast<double*>(mantissa), exponent);
    default:
      throw runtime::KernelError("frexp takes floating dtypes only");
  }
}

}  // namespace torchneuron::kernels
