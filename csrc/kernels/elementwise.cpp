#include "kernels/elementwise.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/copy.h"
#include "kernels/dtype_dispatch.h"
#include "kernels/elementwise_map.h"
#include "kernels/half.h"
#include "kernels/parallel.h"
#include "kernels/special_functions.h"
#include "kernels/vector_math.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {
namespace {

using namespace elementwise_map;



bool is_floating(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16 || dtype == DType::kFloat32 ||
         dtype == DType::kFloat64;
}
bool is_integral_or_bool(DType dtype) { return !is_floating(dtype) && !is_complex(dtype); }

template <typename C>
inline C sigmoid(C x) {
  return C(1) / (C(1) + exp_of(-x));
}

// fmod of floats, exact and 14x faster than glibc's fmodf: in double, q = trunc(x / y) is the
// exact truncated quotient while it is below 2^28 (a quotient of floats that is not an integer
// is further than double rounding from one), q y is exact (28 + 24 bits) and so is x - q y (the
// remainder is a float). Larger quotients and zero, infinite or NaN operands take the C
// library's fmod. Bit for bit equal to it over 20 million random pairs of magnitudes 2^-30..2^30.
[[gnu::noinline, gnu::cold]] float library_fmod(float x, float y) { return std::fmod(x, y); }

template <typename C>
inline C fmod_of(C x, C y) {
  if constexpr (std::is_same_v<C, float>) {
    const double q = std::trunc(static_cast<double>(x) / static_cast<double>(y));
    const float r = static_cast<float>(static_cast<double>(x) - q * static_cast<double>(y));
    // A cold call: inlined, GCC computed the C library's fmod for every element.
    return std::fabs(q) < 268435456.0 && std::isfinite(r) ? std::copysign(r, x) : library_fmod(x, y);
  } else {
    return std::fmod(x, y);
  }
}

// sin (kCos: cos) of a float, branch-free so that loops vectorize (glibc's scalar sinf ran at a
// sixth of CPU PyTorch's speed). The argument is reduced by pi/2 in double, with pi/2 as two
// doubles and fused multiply-adds: r is then exact to double rounding for |x| below
// kSinCosReduceLimit. sin and cos of r on [-pi/4, pi/4] are their Taylor polynomials (through
// r^11 and r^12, truncation below 2e-9) in float; the quadrant picks one and its sign.
constexpr float kSinCosReduceLimit = 1e15f;

template <bool kCos>
inline float vector_sin_cos(float x) {
  const double xd = x;
  const double n = std::floor(xd * 0.63661977236758134308 + 0.5);  // nearest multiple of pi/2
  const double r = std::fma(-n, 6.123233995736766036e-17, std::fma(-n, 1.5707963267948966192, xd));
  const float rf = static_cast<float>(r);
  const float t = rf * rf;
  float sp = -2.5052108385441719e-08f;       // -1/11!
  sp = std::fma(sp, t, 2.7557319223985891e-06f);   // 1/9!
  sp = std::fma(sp, t, -1.9841269841269841e-04f);  // -1/7!
  sp = std::fma(sp, t, 8.3333333333333333e-03f);   // 1/5!
  sp = std::fma(sp, t, -1.6666666666666666e-01f);  // -1/3!
  const float abs_r = std::fabs(rf);
  const float sin_r = std::copysign(std::fma(abs_r * t, sp, abs_r), rf);  // odd; keeps sin(-0) = -0
  float cp = 2.0876756987868099e-09f;        // 1/12!
  cp = std::fma(cp, t, -2.7557319223985888e-07f);  // -1/10!
  cp = std::fma(cp, t, 2.4801587301587302e-05f);   // 1/8!
  cp = std::fma(cp, t, -1.3888888888888889e-03f);  // -1/6!
  cp = std::fma(cp, t, 4.1666666666666664e-02f);   // 1/4!
  cp = std::fma(cp, t, -0.5f);
  const float cos_r = std::fma(t, cp, 1.0f);
  const int64_t quadrant = static_cast<int64_t>(n) + (kCos ? 1 : 0);  // cos x = sin(x + pi/2)
  const float value = (quadrant & 1) ? cos_r : sin_r;
  return (quadrant & 2) ? -value : value;
}

// float32 sin / cos: dense runs take vector_sin_cos, unless an argument in the run is beyond its
// reduction range (or not finite, where the cast of n is undefined); those runs and strided
// ones take the C library's.
template <bool kCos>
void sin_cos_float(const ElementwiseArgs& a) {
  drive<2>(a, [](char* const* p, int64_t n, const int64_t* s) {
    auto* out = reinterpret_cast<float*>(p[0]);
    const auto* in = reinterpret_cast<const float*>(p[1]);
    if (s[0] == static_cast<int64_t>(sizeof(float)) && s[1] == static_cast<int64_t>(sizeof(float))) {
      int out_of_range = 0;  // checked first: in and out may be the same buffer
      for (int64_t i = 0; i < n; ++i) out_of_range |= !(std::fabs(in[i]) < kSinCosReduceLimit);
      if (!out_of_range) {
        for (int64_t i = 0; i < n; ++i) out[i] = vector_sin_cos<kCos>(in[i]);
        return;
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      float x;
      std::memcpy(&x, p[1] + i * s[1], sizeof(float));
      const float y = kCos ? std::cos(x) : std::sin(x);
      std::memcpy(p[0] + i * s[0], &y, sizeof(float));
    }
  });
}

constexpr double kGeluBeta = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kGeluKappa = 0.044715;

template <typename T>
void unary_typed(UnaryOp op, const ElementwiseArgs& a) {
  using C = Compute<T>;
  if constexpr (std::is_same_v<T, bool>) {
    if (op == UnaryOp::kBitwiseNot) return map<T, T, 1>(a, [](C x) { return !x; });
    throw runtime::KernelError("unary op is not supported for bool");
  } else {
  switch (op) {
    case UnaryOp::kAbs:
      return map<T, T, 1>(a, [](C x) -> C {
        if constexpr (std::is_floating_point_v<C>) return std::fabs(x);  // abs(-0.0) is +0.0
        else if constexpr (std::is_unsigned_v<C>) return x;
        else return x < C(0) ? C(-x) : x;
      });
    case UnaryOp::kNeg: return map<T, T, 1>(a, [](C x) { return C(-x); });
    case UnaryOp::kSign: return map<T, T, 1>(a, [](C x) { return C((C(0) < x) - (x < C(0))); });
    // As CPU PyTorch's clamp_min(x, 0): NaN and -0.0 pass through.
    case UnaryOp::kRelu: return map<T, T, 1>(a, [](C x) { return x < C(0) ? C(0) : x; });
    case UnaryOp::kBitwiseNot:
      if constexpr (std::is_integral_v<T>) return map<T, T, 1>(a, [](C x) { return C(~x); });
      break;
    case UnaryOp::kFloor:
    case UnaryOp::kCeil:
    case UnaryOp::kRound:
    case UnaryOp::kTrunc:
      if constexpr (std::is_integral_v<T>) return map<T, T, 1>(a, [](C x) { return x; });  // already whole
      break;
    default:
      break;
  }
  }
  if constexpr (std::is_floating_point_v<C>) {
    switch (op) {
      case UnaryOp::kReciprocal: return map<T, T, 1>(a, [](C x) { return C(1) / x; });
      case UnaryOp::kSqrt: return map<T, T, 1>(a, [](C x) { return std::sqrt(x); });
      case UnaryOp::kRsqrt: return map<T, T, 1>(a, [](C x) { return C(1) / std::sqrt(x); });
      case UnaryOp::kExp: return map<T, T, 1>(a, [](C x) { return exp_of(x); });
      case UnaryOp::kExp2: return map<T, T, 1>(a, [](C x) { return std::exp2(x); });
      case UnaryOp::kExpm1: return map<T, T, 1>(a, [](C x) { return std::expm1(x); });
      case UnaryOp::kLog: return map<T, T, 1>(a, [](C x) { return log_of(x); });
      case UnaryOp::kLog2: return map<T, T, 1>(a, [](C x) { return std::log2(x); });
      case UnaryOp::kLog10: return map<T, T, 1>(a, [](C x) { return std::log10(x); });
      case UnaryOp::kLog1p: return map<T, T, 1>(a, [](C x) { return log1p_of(x); });
      case UnaryOp::kSin:
        if constexpr (std::is_same_v<T, float>) return sin_cos_float<false>(a);
        return map<T, T, 1>(a, [](C x) { return std::sin(x); });
      case UnaryOp::kCos:
        if constexpr (std::is_same_v<T, float>) return sin_cos_float<true>(a);
        return map<T, T, 1>(a, [](C x) { return std::cos(x); });
      case UnaryOp::kTan: return map<T, T, 1>(a, [](C x) { return std::tan(x); });
      case UnaryOp::kAsin: return map<T, T, 1>(a, [](C x) { return std::asin(x); });
      case UnaryOp::kAcos: return map<T, T, 1>(a, [](C x) { return std::acos(x); });
      case UnaryOp::kAtan: return map<T, T, 1>(a, [](C x) { return std::atan(x); });
      case UnaryOp::kSinh: return map<T, T, 1>(a, [](C x) { return std::sinh(x); });
      case UnaryOp::kCosh: return map<T, T, 1>(a, [](C x) { return std::cosh(x); });
      case UnaryOp::kTanh: return map<T, T, 1>(a, [](C x) { return tanh_of(x); });
      case UnaryOp::kAsinh: return map<T, T, 1>(a, [](C x) { return std::asinh(x); });
      case UnaryOp::kAcosh: return map<T, T, 1>(a, [](C x) { return std::acosh(x); });
      case UnaryOp::kAtanh: return map<T, T, 1>(a, [](C x) { return std::atanh(x); });
      case UnaryOp::kSigmoid: return map<T, T, 1>(a, [](C x) { return sigmoid(x); });
      case UnaryOp::kErf: return map<T, T, 1>(a, [](C x) { return erf_of(x); });
      case UnaryOp::kErfc: return map<T, T, 1>(a, [](C x) { return std::erfc(x); });
      case UnaryOp::kLgamma: return map<T, T, 1>(a, [](C x) { return C(special::log_gamma(x)); });
      case UnaryOp::kI0: return map<T, T, 1>(a, [](C x) { return C(special::bessel_i(0, x, false)); });
      case UnaryOp::kI0e: return map<T, T, 1>(a, [](C x) { return C(special::bessel_i(0, x, true)); });
      case UnaryOp::kI1: return map<T, T, 1>(a, [](C x) { return C(special::bessel_i(1, x, false)); });
      case UnaryOp::kI1e: return map<T, T, 1>(a, [](C x) { return C(special::bessel_i(1, x, true)); });
      case UnaryOp::kDigamma: return map<T, T, 1>(a, [](C x) { return C(special::digamma(x)); });
      case UnaryOp::kErfinv:
        return map<T, T, 1>(a, [](C x) {
          if constexpr (std::is_same_v<C, float>) return vector_erfinv(x);
          else return special::erfinv(x);
        });
      case UnaryOp::kFrac: return map<T, T, 1>(a, [](C x) { return x - std::trunc(x); });
      case UnaryOp::kSinc:
        return map<T, T, 1>(a, [](C x) {
          const C product = C(3.14159265358979323846) * x;
          return x == C(0) ? C(1) : std::sin(product) / product;
        });
      case UnaryOp::kEntr:
        return map<T, T, 1>(a, [](C x) {
          if (x != x) return x;
          if (x > C(0)) return -x * log_of(x);
          return x == C(0) ? C(0) : -std::numeric_limits<C>::infinity();
        });
      case UnaryOp::kFloor: return map<T, T, 1>(a, [](C x) { return std::floor(x); });
      case UnaryOp::kCeil: return map<T, T, 1>(a, [](C x) { return std::ceil(x); });
      case UnaryOp::kRound: return map<T, T, 1>(a, [](C x) { return std::nearbyint(x); });
      case UnaryOp::kTrunc: return map<T, T, 1>(a, [](C x) { return std::trunc(x); });
      case UnaryOp::kSilu: return map<T, T, 1>(a, [](C x) { return x * sigmoid(x); });
      case UnaryOp::kGeluErf:
        return map<T, T, 1>(a, [](C x) { return x * gelu_cdf_of(x); });
      case UnaryOp::kGeluTanh:
        return map<T, T, 1>(a, [](C x) {
          // 0.5 x (1 + tanh(y)) written as x sigmoid(2y): no cancellation where tanh(y) is near
          // -1, and the vectorized exp instead of a scalar tanh (14x slower than CPU PyTorch).
          const C y = C(kGeluBeta) * (x + C(kGeluKappa) * x * x * x);
          return x / (C(1) + exp_of(C(-2) * y));
        });
      default:
        break;
    }
  }
  throw runtime::KernelError("unary op is not supported for this dtype");
}

template <typename T>
void predicate_typed(UnaryOp op, const ElementwiseArgs& a) {
  using C = Compute<T>;
  switch (op) {
    case UnaryOp::kLogicalNot: return map<bool, T, 1>(a, [](C x) { return x == C(0); });
    case UnaryOp::kIsNan:
      return map<bool, T, 1>(a, [](C x) { if constexpr (std::is_floating_point_v<C>) return std::isnan(x); else return false; });
    case UnaryOp::kIsInf:
      return map<bool, T, 1>(a, [](C x) { if constexpr (std::is_floating_point_v<C>) return std::isinf(x); else return false; });
    case UnaryOp::kIsFinite:
      return map<bool, T, 1>(a, [](C x) { if constexpr (std::is_floating_point_v<C>) return std::isfinite(x); else return true; });
    case UnaryOp::kSignbit:
      return map<bool, T, 1>(a, [](C x) {
        // The sign bit read as an integer: GCC 12 failed to compile std::signbit's vectorized
        // form for bfloat16 inputs (an internal compiler error).
        if constexpr (std::is_same_v<C, float>) return (std::bit_cast<uint32_t>(x) >> 31) != 0;
        else if constexpr (std::is_same_v<C, double>) return (std::bit_cast<uint64_t>(x) >> 63) != 0;
        else if constexpr (std::is_signed_v<C>) return x < C(0);
        else return false;
      });
    default:
      throw runtime::KernelError("not a predicate");
  }
}

bool is_predicate(UnaryOp op) {
  return op == UnaryOp::kLogicalNot || op == UnaryOp::kIsNan || op == UnaryOp::kIsInf ||
         op == UnaryOp::kIsFinite || op == UnaryOp::kSignbit;
}

}  // namespace

int64_t ElementwiseArgs::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= sizes[d];
  return n;
}

namespace {

// ---- complex -------------------------------------------------------------------------------
// The textbook formulas on (real, imaginary) pairs, as CPU PyTorch's vectorized complex kernels
// compute them: std::complex's operator* checks for infinities after every product.

// |z| without overflow: float in double (exact squares, one rounding), double as hypot; an
// infinite part gives inf even beside a NaN, as hypot does.
template <typename R>
inline R complex_abs(R re, R im) {
  if constexpr (std::is_same_v<R, float>) {
    const double sum = static_cast<double>(re) * re + static_cast<double>(im) * im;
    const float magnitude = static_cast<float>(std::sqrt(sum));
    return std::isinf(re) || std::isinf(im) ? std::numeric_limits<float>::infinity() : magnitude;
  } else {
    return std::hypot(re, im);
  }
}

// x / y by Smith's algorithm, as CPU PyTorch divides complex numbers: the ratio of y's smaller
// part to its larger keeps |y|^2 from overflowing or underflowing, and a finite x over an
// infinite y gives 0. A zero y gives x's parts over zero (inf or NaN).
template <typename R>
inline std::complex<R> complex_divide(std::complex<R> x, std::complex<R> y) {
  const R a = x.real(), b = x.imag(), c = y.real(), d = y.imag();
  if (std::fabs(c) >= std::fabs(d)) {
    if (c == R(0) && d == R(0)) return {a / std::fabs(c), b / std::fabs(d)};
    const R ratio = d / c, scale = R(1) / (c + d * ratio);
    return {(a + b * ratio) * scale, (b - a * ratio) * scale};
  }
  const R ratio = c / d, scale = R(1) / (d + c * ratio);
  return {(a * ratio + b) * scale, (b * ratio - a) * scale};
}

template <typename R>
void complex_unary_typed(UnaryOp op, const ElementwiseArgs& args) {
  using Z = std::complex<R>;
  switch (op) {
    case UnaryOp::kNeg: return map<Z, Z, 1>(args, [](Z z) { return Z(-z.real(), -z.imag()); });
    case UnaryOp::kConj: return map<Z, Z, 1>(args, [](Z z) { return Z(z.real(), -z.imag()); });
    case UnaryOp::kAbs: return map<R, Z, 1>(args, [](Z z) { return complex_abs(z.real(), z.imag()); });
    case UnaryOp::kAngle: return map<R, Z, 1>(args, [](Z z) { return std::atan2(z.imag(), z.real()); });
    // As CPU PyTorch's vectorized complex kernels, which map the C++ library's functions.
    case UnaryOp::kExp: return map<Z, Z, 1>(args, [](Z z) { return std::exp(z); });
    case UnaryOp::kLog: return map<Z, Z, 1>(args, [](Z z) { return std::log(z); });
    case UnaryOp::kSqrt: return map<Z, Z, 1>(args, [](Z z) { return std::sqrt(z); });
    case UnaryOp::kSin: return map<Z, Z, 1>(args, [](Z z) { return std::sin(z); });
    case UnaryOp::kCos: return map<Z, Z, 1>(args, [](Z z) { return std::cos(z); });
    case UnaryOp::kTanh: return map<Z, Z, 1>(args, [](Z z) { return std::tanh(z); });
    case UnaryOp::kSinh: return map<Z, Z, 1>(args, [](Z z) { return std::sinh(z); });
    case UnaryOp::kCosh: return map<Z, Z, 1>(args, [](Z z) { return std::cosh(z); });
    case UnaryOp::kReciprocal: return map<Z, Z, 1>(args, [](Z z) { return complex_divide(Z(1), z); });
    case UnaryOp::kIsNan:
      return map<bool, Z, 1>(args, [](Z z) { return std::isnan(z.real()) || std::isnan(z.imag()); });
    case UnaryOp::kIsInf:
      return map<bool, Z, 1>(args, [](Z z) { return std::isinf(z.real()) || std::isinf(z.imag()); });
    case UnaryOp::kIsFinite:
      return map<bool, Z, 1>(args, [](Z z) { return std::isfinite(z.real()) && std::isfinite(z.imag()); });
    case UnaryOp::kSign:  // sgn: z / |z|, 0 at 0
      return map<Z, Z, 1>(args, [](Z z) {
        const R magnitude = complex_abs(z.real(), z.imag());
        return magnitude == R(0) ? Z() : Z(z.real() / magnitude, z.imag() / magnitude);
      });
    default: throw runtime::KernelError("unary op is not supported for complex dtypes");
  }
}

template <typename R>
void complex_binary_typed(BinaryOp op, const ElementwiseArgs& args, OpScalar alpha) {
  using Z = std::complex<R>;
  const R scale = static_cast<R>(alpha.real);
  switch (op) {
    case BinaryOp::kAdd:
      return map<Z, Z, 2>(args, [scale](Z x, Z y) { return Z(x.real() + scale * y.real(), x.imag() + scale * y.imag()); });
    case BinaryOp::kSub:
      return map<Z, Z, 2>(args, [scale](Z x, Z y) { return Z(x.real() - scale * y.real(), x.imag() - scale * y.imag()); });
    case BinaryOp::kMul:
      return map<Z, Z, 2>(args, [](Z x, Z y) {
        return Z(x.real() * y.real() - x.imag() * y.imag(), x.real() * y.imag() + x.imag() * y.real());
      });
    case BinaryOp::kDiv: return map<Z, Z, 2>(args, [](Z x, Z y) { return complex_divide(x, y); });
    case BinaryOp::kPow:  // a square as a product, as CPU PyTorch computes it; other powers std::pow
      return map<Z, Z, 2>(args, [](Z x, Z y) {
        if (y.imag() == R(0) && y.real() == R(2)) {
          return Z(x.real() * x.real() - x.imag() * x.imag(), x.real() * x.imag() + x.imag() * x.real());
        }
        return std::pow(x, y);
      });
    case BinaryOp::kEq: return map<bool, Z, 2>(args, [](Z x, Z y) { return x.real() == y.real() && x.imag() == y.imag(); });
    case BinaryOp::kNe: return map<bool, Z, 2>(args, [](Z x, Z y) { return x.real() != y.real() || x.imag() != y.imag(); });
    default: throw runtime::KernelError("binary op is not supported for complex dtypes");
  }
}

bool complex_unary_supported(UnaryOp op) {
  switch (op) {
    case UnaryOp::kNeg: case UnaryOp::kConj: case UnaryOp::kAbs: case UnaryOp::kAngle: case UnaryOp::kSign:
    case UnaryOp::kExp: case UnaryOp::kLog: case UnaryOp::kSqrt: case UnaryOp::kReciprocal:
    case UnaryOp::kSin: case UnaryOp::kCos: case UnaryOp::kTanh: case UnaryOp::kSinh: case UnaryOp::kCosh:
    case UnaryOp::kIsNan: case UnaryOp::kIsInf: case UnaryOp::kIsFinite:
      return true;
    default:
      return false;
  }
}

bool complex_binary_supported(BinaryOp op) {
  return op == BinaryOp::kAdd || op == BinaryOp::kSub || op == BinaryOp::kMul || op == BinaryOp::kDiv ||
         op == BinaryOp::kPow || op == BinaryOp::kEq || op == BinaryOp::kNe;
}

}  // namespace

bool complex_to_real(UnaryOp op) { return op == UnaryOp::kAbs || op == UnaryOp::kAngle; }

bool unary_supported(UnaryOp op, DType dtype) {
  if (is_complex(dtype)) return complex_unary_supported(op);
  switch (op) {
    case UnaryOp::kConj:
    case UnaryOp::kAngle:
      return false;
    case UnaryOp::kAbs:
    case UnaryOp::kNeg:
    case UnaryOp::kSign:
    case UnaryOp::kRelu:
    case UnaryOp::kFloor:
    case UnaryOp::kCeil:
    case UnaryOp::kRound:
    case UnaryOp::kTrunc:
      return dtype != DType::kBool;
    case UnaryOp::kBitwiseNot:
      return is_integral_or_bool(dtype);
    case UnaryOp::kLogicalNot:
    case UnaryOp::kIsNan:
    case UnaryOp::kIsInf:
    case UnaryOp::kIsFinite:
    case UnaryOp::kSignbit:
      return true;
    default:
      return is_floating(dtype);
  }
}

void unary(UnaryOp op, const ElementwiseArgs& args) {
  if (args.numel() == 0) return;
  if (args.dtypes[1] == DType::kComplex64) return complex_unary_typed<float>(op, args);
  if (args.dtypes[1] == DType::kComplex128) return complex_unary_typed<double>(op, args);
  dispatch_real_dtype(args.dtypes[1], "elementwise kernel", [&](auto tag) {
    using T = decltype(tag);
    if (is_predicate(op)) {
      predicate_typed<T>(op, args);
    } else {
      unary_typed<T>(op, args);
    }
  });
}

void polygamma(int64_t n, const ElementwiseArgs& args) {
  if (args.numel() == 0) return;
  dispatch_real_dtype(args.dtypes[1], "polygamma", [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    if constexpr (std::is_floating_point_v<C>) {
      map<T, T, 1>(args, [n](C x) { return C(special::polygamma(n, x)); });
    } else {
      throw runtime::KernelError("polygamma is not supported for this dtype");
    }
  });
}

}  // namespace torchneuron::kernels

namespace torchneuron::kernels {
namespace {

template <typename T>
Compute<T> scalar_as(OpScalar s) {
  if constexpr (std::is_floating_point_v<Compute<T>>) {
    return static_cast<Compute<T>>(s.real);
  } else {
    return static_cast<Compute<T>>(s.integer);
  }
}

bool writes_bool(BinaryOp op) {
  switch (op) {
    case BinaryOp::kEq:
    case BinaryOp::kNe:
    case BinaryOp::kLt:
    case BinaryOp::kLe:
    case BinaryOp::kGt:
    case BinaryOp::kGe:
    case BinaryOp::kLogicalAnd:
    case BinaryOp::kLogicalOr:
    case BinaryOp::kLogicalXor:
      return true;
    default:
      return false;
  }
}

template <typename T>
void compare_typed(BinaryOp op, const ElementwiseArgs& a) {
  using C = Compute<T>;
  switch (op) {
    case BinaryOp::kEq: return map<bool, T, 2>(a, [](C x, C y) { return x == y; });
    case BinaryOp::kNe: return map<bool, T, 2>(a, [](C x, C y) { return x != y; });
    case BinaryOp::kLt: return map<bool, T, 2>(a, [](C x, C y) { return x < y; });
    case BinaryOp::kLe: return map<bool, T, 2>(a, [](C x, C y) { return x <= y; });
    case BinaryOp::kGt: return map<bool, T, 2>(a, [](C x, C y) { return x > y; });
    case BinaryOp::kGe: return map<bool, T, 2>(a, [](C x, C y) { return x >= y; });
    case BinaryOp::kLogicalAnd: return map<bool, T, 2>(a, [](C x, C y) { return x != C(0) && y != C(0); });
    case BinaryOp::kLogicalOr: return map<bool, T, 2>(a, [](C x, C y) { return x != C(0) || y != C(0); });
    case BinaryOp::kLogicalXor: return map<bool, T, 2>(a, [](C x, C y) { return (x != C(0)) != (y != C(0)); });
    default:
      throw runtime::KernelError("not a comparison");
  }
}

template <typename T>
void arithmetic_typed(BinaryOp op, const ElementwiseArgs& a, OpScalar alpha) {
  using C = Compute<T>;
  const C scale = scalar_as<T>(alpha);
  if constexpr (std::is_same_v<T, bool>) {
    switch (op) {
      case BinaryOp::kAdd: return map<T, T, 2>(a, [](C x, C y) { return x || y; });
      case BinaryOp::kMul: return map<T, T, 2>(a, [](C x, C y) { return x && y; });
      case BinaryOp::kMaximum: return map<T, T, 2>(a, [](C x, C y) { return x || y; });
      case BinaryOp::kMinimum: return map<T, T, 2>(a, [](C x, C y) { return x && y; });
      case BinaryOp::kBitwiseAnd: return map<T, T, 2>(a, [](C x, C y) { return x && y; });
      case BinaryOp::kBitwiseOr: return map<T, T, 2>(a, [](C x, C y) { return x || y; });
      case BinaryOp::kBitwiseXor: return map<T, T, 2>(a, [](C x, C y) { return x != y; });
      default:
        throw runtime::KernelError("binary op is not supported for bool");
    }
  } else {
    switch (op) {
      case BinaryOp::kAdd: return map<T, T, 2>(a, [scale](C x, C y) { return C(x + scale * y); });
      case BinaryOp::kSub: return map<T, T, 2>(a, [scale](C x, C y) { return C(x - scale * y); });
      case BinaryOp::kMul: return map<T, T, 2>(a, [](C x, C y) { return C(x * y); });
      case BinaryOp::kMaximum:
        return map<T, T, 2>(a, [](C x, C y) {
          if constexpr (std::is_floating_point_v<C>) {
            if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<C>::quiet_NaN();
          }
          return std::max(x, y);
        });
      case BinaryOp::kMinimum:
        return map<T, T, 2>(a, [](C x, C y) {
          if constexpr (std::is_floating_point_v<C>) {
            if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<C>::quiet_NaN();
          }
          return std::min(x, y);
        });
      case BinaryOp::kFmax:
        return map<T, T, 2>(a, [](C x, C y) {
          if constexpr (std::is_floating_point_v<C>) return std::fmax(x, y);
          else return std::max(x, y);
        });
      case BinaryOp::kFmin:
        return map<T, T, 2>(a, [](C x, C y) {
          if constexpr (std::is_floating_point_v<C>) return std::fmin(x, y);
          else return std::min(x, y);
        });
      case BinaryOp::kHeaviside: return map<T, T, 2>(a, [](C x, C y) { return x == C(0) ? y : C(x > C(0)); });
      default:
        break;
    }
    if constexpr (std::is_integral_v<C>) {
      switch (op) {
        case BinaryOp::kDivFloor:
          return map<T, T, 2>(a, [](C x, C y) {
            if (y == 0) throw runtime::KernelError("ZeroDivisionError: integer division by zero");
            if constexpr (std::is_signed_v<C>) {
              if (y == -1) return C(-x);  // avoids overflow of the minimum value / -1
              const C q = C(x / y);
              return (x % y != 0 && ((x < 0) != (y < 0))) ? C(q - 1) : q;
            } else {
              return C(x / y);
            }
          });
        case BinaryOp::kDivTrunc:
          return map<T, T, 2>(a, [](C x, C y) {
            if (y == 0) throw runtime::KernelError("ZeroDivisionError: integer division by zero");
            if constexpr (std::is_signed_v<C>) {
              if (y == -1) return C(-x);
            }
            return C(x / y);
          });
        case BinaryOp::kRemainder:
          return map<T, T, 2>(a, [](C x, C y) {
            if (y == 0) throw runtime::KernelError("ZeroDivisionError: integer modulo by zero");
            if constexpr (std::is_signed_v<C>) {
              if (y == -1) return C(0);  // the minimum value % -1 overflows
              const C r = C(x % y);
              return r != 0 && ((r < 0) != (y < 0)) ? C(r + y) : r;
            } else {
              return C(x % y);
            }
          });
        case BinaryOp::kFmod:
          return map<T, T, 2>(a, [](C x, C y) {
            if (y == 0) throw runtime::KernelError("ZeroDivisionError: integer modulo by zero");
            if constexpr (std::is_signed_v<C>) {
              if (y == -1) return C(0);
            }
            return C(x % y);
          });
        case BinaryOp::kBitwiseAnd: return map<T, T, 2>(a, [](C x, C y) { return C(x & y); });
        case BinaryOp::kBitwiseOr: return map<T, T, 2>(a, [](C x, C y) { return C(x | y); });
        case BinaryOp::kBitwiseXor: return map<T, T, 2>(a, [](C x, C y) { return C(x ^ y); });
        default:
          break;
      }
    } else {
      switch (op) {
        case BinaryOp::kDiv: return map<T, T, 2>(a, [](C x, C y) { return x / y; });
        case BinaryOp::kAtan2: return map<T, T, 2>(a, [](C x, C y) { return std::atan2(x, y); });
        case BinaryOp::kXlogy:
          return map<T, T, 2>(a, [](C x, C y) { return y != y ? y : (x == C(0) ? C(0) : x * log_of(y)); });
        case BinaryOp::kXlog1py:
          return map<T, T, 2>(a, [](C x, C y) { return y != y ? y : (x == C(0) ? C(0) : x * log1p_of(y)); });
        case BinaryOp::kLogaddexp:
        case BinaryOp::kLogaddexp2:
          // CPU PyTorch's form: equal infinities give themselves (their difference is NaN).
          if (op == BinaryOp::kLogaddexp) {
            return map<T, T, 2>(a, [](C x, C y) {
              if (std::isinf(x) && x == y) return x;
              return std::max(x, y) + log1p_of(exp_of(-std::abs(x - y)));
            });
          }
          return map<T, T, 2>(a, [](C x, C y) {
            if (std::isinf(x) && x == y) return x;
            return std::max(x, y) + log1p_of(std::exp2(-std::abs(x - y))) * C(1.44269504088896340736);
          });
        case BinaryOp::kCopysign: return map<T, T, 2>(a, [](C x, C y) { return std::copysign(x, y); });
        case BinaryOp::kHypot: return map<T, T, 2>(a, [](C x, C y) { return std::hypot(x, y); });
        case BinaryOp::kPrelu: return map<T, T, 2>(a, [](C x, C w) { return x > C(0) ? x : w * x; });
        case BinaryOp::kSmoothL1:  // CPU PyTorch's expression, so that the roundings match
          return map<T, T, 2>(a, [beta = scale](C x, C y) {
            const C z = std::abs(x - y);
            return z < beta ? C(0.5) * z * z / beta : z - C(0.5) * beta;
          });
        case BinaryOp::kHuber:
          return map<T, T, 2>(a, [delta = scale](C x, C y) {
            const C z = std::abs(x - y);
            return z < delta ? C(0.5) * z * z : delta * (z - C(0.5) * delta);
          });
        case BinaryOp::kDivTrunc: return map<T, T, 2>(a, [](C x, C y) { return std::trunc(x / y); });
        case BinaryOp::kRemainder:
          // fmod is exact; the divisor added where the signs differ, as CPU PyTorch computes it.
          return map<T, T, 2>(a, [](C x, C y) {
            const C mod = fmod_of(x, y);
            if constexpr (std::is_same_v<C, float>) {
              // In bits: the signs differ at random, and GCC made the select a branch that cost
              // 3x the op. A sign bit rather than < 0 for y only differs for -0 (mod is NaN then).
              const uint32_t m = std::bit_cast<uint32_t>(mod), sum = std::bit_cast<uint32_t>(mod + y);
              const uint32_t other_sign =
                  static_cast<uint32_t>(mod != 0.0f) & ((m ^ std::bit_cast<uint32_t>(y)) >> 31);
              return std::bit_cast<float>(m ^ ((m ^ sum) & (0u - other_sign)));
            } else {
              return mod != C(0) && ((y < C(0)) != (mod < C(0))) ? mod + y : mod;
            }
          });
        case BinaryOp::kFmod: return map<T, T, 2>(a, [](C x, C y) { return fmod_of(x, y); });
        case BinaryOp::kDivFloor:
          // Python's floor division for floats: exact through fmod, as torch computes it.
          return map<T, T, 2>(a, [](C x, C y) {
            if (y == C(0)) return x / y;
            const C mod = std::fmod(x, y);
            C div = (x - mod) / y;
            if (mod != C(0) && ((y < C(0)) != (mod < C(0)))) div -= C(1);
            if (div == C(0)) return std::copysign(C(0), x / y);
            C floordiv = std::floor(div);
            if (div - floordiv > C(0.5)) floordiv += C(1);
            return floordiv;
          });
        case BinaryOp::kPow:
          if constexpr (std::is_floating_point_v<C>) {
            if (a.is_scalar[2]) {
              // Exact forms for the common exponents (x.pow(2) is x * x on CPU too): std::pow per
              // element was 90x slower than CPU and does not vectorize.
              const C e = load<T>(reinterpret_cast<const char*>(a.scalar_bytes[2].data()));
              if (e == C(2)) return map<T, T, 2>(a, [](C x, C) { return x * x; });
              if (e == C(3)) return map<T, T, 2>(a, [](C x, C) { return x * x * x; });
              if (e == C(0.5)) return map<T, T, 2>(a, [](C x, C) { return std::sqrt(x); });
              if (e == C(-0.5)) return map<T, T, 2>(a, [](C x, C) { return C(1) / std::sqrt(x); });
              if (e == C(-1)) return map<T, T, 2>(a, [](C x, C) { return C(1) / x; });
              if (e == C(-2)) return map<T, T, 2>(a, [](C x, C) { return C(1) / (x * x); });
            }
          }
          return map<T, T, 2>(a, [](C x, C y) { return std::pow(x, y); });
        case BinaryOp::kThresholdBackward:
          return map<T, T, 2>(a, [scale](C grad, C x) { return x <= scale ? C(0) : grad; });
        case BinaryOp::kSigmoidBackward:
          return map<T, T, 2>(a, [](C grad, C y) { return grad * (C(1) - y) * y; });
        case BinaryOp::kTanhBackward:
          return map<T, T, 2>(a, [](C grad, C y) { return grad * (C(1) - y * y); });
        case BinaryOp::kSiluBackward:
          return map<T, T, 2>(a, [](C grad, C x) {
            const C s = sigmoid(x);
            return grad * s * (C(1) + x * (C(1) - s));
          });
        case BinaryOp::kGeluErfBackward:
          return map<T, T, 2>(a, [](C grad, C x) { return gelu_backward_of(grad, x); });
        case BinaryOp::kGeluTanhBackward:
          return map<T, T, 2>(a, [](C grad, C x) {
            const C x_sq = x * x;
            const C inner = C(kGeluBeta) * (x + C(kGeluKappa) * x_sq * x);
            // s = (1 + tanh(inner)) / 2 and 1 - tanh^2 = 4 s (1 - s), as in the forward.
            const C s = C(1) / (C(1) + exp_of(C(-2) * inner));
            const C right_derivative = C(2) * x * s * (C(1) - s) * C(kGeluBeta) * (C(1) + C(3 * kGeluKappa) * x_sq);
            return grad * (s + right_derivative);
          });
        default:
          break;
      }
    }
    throw runtime::KernelError("binary op is not supported for this dtype");
  }
}

}  // namespace

bool binary_supported(BinaryOp op, DType dtype) {
  if (is_complex(dtype)) return complex_binary_supported(op);
  if (writes_bool(op)) return true;
  switch (op) {
    case BinaryOp::kAdd:
    case BinaryOp::kMul:
    case BinaryOp::kMaximum:
    case BinaryOp::kMinimum:
      return true;
    case BinaryOp::kFmax:
    case BinaryOp::kFmin:
    case BinaryOp::kHeaviside:
    case BinaryOp::kSub:
    case BinaryOp::kDivFloor:
    case BinaryOp::kDivTrunc:
    case BinaryOp::kRemainder:
    case BinaryOp::kFmod:
      return dtype != DType::kBool;
    case BinaryOp::kBitwiseAnd:
    case BinaryOp::kBitwiseOr:
    case BinaryOp::kBitwiseXor:
      return is_integral_or_bool(dtype);
    default:
      return is_floating(dtype);
  }
}

void binary(BinaryOp op, const ElementwiseArgs& args, OpScalar alpha) {
  if (args.numel() == 0) return;
  if (args.dtypes[1] == DType::kComplex64) return complex_binary_typed<float>(op, args, alpha);
  if (args.dtypes[1] == DType::kComplex128) return complex_binary_typed<double>(op, args, alpha);
  dispatch_real_dtype(args.dtypes[1], "elementwise kernel", [&](auto tag) {
    using T = decltype(tag);
    if (writes_bool(op)) {
      compare_typed<T>(op, args);
    } else {
      arithmetic_typed<T>(op, args, alpha);
    }
  });
}

bool ternary_supported(TernaryOp op, DType dtype) {
  if (is_complex(dtype)) return op == TernaryOp::kWhere;
  switch (op) {
    case TernaryOp::kWhere:
      return true;
    case TernaryOp::kAddcmul:
    case TernaryOp::kClamp:
      return dtype != DType::kBool;
    default:
      return is_floating(dtype);
  }
}

void ternary(TernaryOp op, const ElementwiseArgs& args, OpScalar alpha) {
  if (args.numel() == 0) return;
  if (op == TernaryOp::kWhere) {
    // The condition is bool; the values share the output's dtype, copied bitwise.
    dispatch_dtype(args.dtypes[0], "elementwise kernel", [&](auto tag) {
      using T = decltype(tag);
      drive<4>(args, [](char* const* p, int64_t n, const int64_t* s) {
        for (int64_t i = 0; i < n; ++i) {
          bool cond;
          std::memcpy(&cond, p[1] + i * s[1], 1);
          std::memcpy(p[0] + i * s[0], (cond ? p[2] + i * s[2] : p[3] + i * s[3]), sizeof(T));
        }
      });
    });
    return;
  }
  dispatch_real_dtype(args.dtypes[1], "elementwise kernel", [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    if constexpr (!std::is_same_v<T, bool>) {
      const C value = scalar_as<T>(alpha);
      switch (op) {
        case TernaryOp::kClamp:
          // NaN inputs stay NaN; NaN bounds are ignored, as in CPU PyTorch's std::min/max.
          return map<T, T, 3>(args, [](C x, C lo, C hi) {
            if constexpr (std::is_floating_point_v<C>) {
              if (std::isnan(x)) return x;
            }
            return std::min(std::max(x, lo), hi);
          });
        case TernaryOp::kAddcmul:
          return map<T, T, 3>(args, [value](C self, C t1, C t2) { return C(self + value * t1 * t2); });
        case TernaryOp::kAddcdiv:
          if constexpr (std::is_floating_point_v<C>) {
            return map<T, T, 3>(args, [value](C self, C t1, C t2) { return self + value * t1 / t2; });
          }
          break;
        case TernaryOp::kLerp:
          if constexpr (std::is_floating_point_v<C>) {
            return map<T, T, 3>(args, [](C self, C end, C weight) {
              return std::abs(weight) < C(0.5) ? self + weight * (end - self)
                                               : end - (end - self) * (C(1) - weight);
            });
          }
          break;
        case TernaryOp::kPreluGradInput:
          return map<T, T, 3>(args, [](C x, C w, C grad) { return x > C(0) ? grad : C(w * grad); });
        case TernaryOp::kPreluGradWeight:
          return map<T, T, 3>(args, [](C x, C, C grad) { return x > C(0) ? C(0) : C(x * grad); });
        case TernaryOp::kSmoothL1Backward:
          if constexpr (std::is_floating_point_v<C>) {
            return map<T, T, 3>(args, [value](C a, C b, C grad) {
              const C x = a - b;
              return x <= -value ? -grad : (x >= value ? grad : x * grad / value);
            });
          }
          break;
        case TernaryOp::kHuberBackward:
          if constexpr (std::is_floating_point_v<C>) {
            return map<T, T, 3>(args, [value](C a, C b, C grad) {
              const C x = a - b;
              return x <= -value ? -grad * value : (x >= value ? grad * value : x * grad);
            });
          }
          break;
        default:
          break;
      }
    }
    throw runtime::KernelError("ternary op is not supported for this dtype");
  });
}

void clamp(const ElementwiseArgs& args, bool has_lo, OpScalar lo, bool has_hi, OpScalar hi) {
  if (args.numel() == 0) return;
  dispatch_real_dtype(args.dtypes[1], "elementwise kernel", [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    if constexpr (std::is_same_v<T, bool>) {
      throw runtime::KernelError("clamp is not supported for bool");
    } else {
      const C low = scalar_as<T>(lo);
      const C high = scalar_as<T>(hi);
      if constexpr (std::is_floating_point_v<C>) {
        if ((has_lo && std::isnan(low)) || (has_hi && std::isnan(high))) {  // a NaN bound: NaN, as on CPU
          map<T, T, 1>(args, [](C) { return std::numeric_limits<C>::quiet_NaN(); });
          return;
        }
      }
      // std::max(x, low) and std::min(x, high) return x when x is NaN; one loop per case so that
      // each vectorizes.
      if (has_lo && has_hi) {
        map<T, T, 1>(args, [=](C x) { return std::min(std::max(x, low), high); });
      } else if (has_lo) {
        map<T, T, 1>(args, [=](C x) { return std::max(x, low); });
      } else if (has_hi) {
        map<T, T, 1>(args, [=](C x) { return std::min(x, high); });
      } else {
        map<T, T, 1>(args, [](C x) { return x; });
      }
    }
  });
}

}  // namespace torchneuron::kernels

namespace torchneuron::kernels {
namespace {

StridedView view_of(const ElementwiseArgs& a, char* data, DType dtype,
                    const std::array<int64_t, kMaxDims>& byte_strides) {
  StridedView view;
  view.data = data;
  view.dtype = dtype;
  view.ndim = a.ndim;
  const auto size = static_cast<int64_t>(element_size(dtype));
  for (int d = 0; d < a.ndim; ++d) {
    view.sizes[d] = a.sizes[d];
    view.strides[d] = byte_strides[d] / size;
  }
  return view;
}

std::array<int64_t, kMaxDims> dense_byte_strides(const ElementwiseArgs& a, DType dtype) {
  std::array<int64_t, kMaxDims> strides{};
  int64_t stride = static_cast<int64_t>(element_size(dtype));
  for (int d = a.ndim - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= a.sizes[d];
  }
  return strides;
}

}  // namespace

void with_dtypes(const ElementwiseArgs& args, DType input_dtype, DType output_dtype, int first_input,
                 const std::function<void(const ElementwiseArgs&)>& body) {
  ElementwiseArgs a = args;
  const auto numel = static_cast<size_t>(a.numel());
  std::vector<std::vector<char>> buffers;
  for (int k = first_input; k < a.num_operands; ++k) {
    if (a.dtypes[k] == input_dtype || a.is_scalar[k]) continue;
    buffers.emplace_back(numel * element_size(input_dtype));
    const auto strides = dense_byte_strides(a, input_dtype);
    copy(view_of(a, buffers.back().data(), input_dtype, strides), view_of(a, a.data[k], a.dtypes[k], a.strides[k]));
    a.data[k] = buffers.back().data();
    a.strides[k] = strides;
    a.dtypes[k] = input_dtype;
  }
  if (a.dtypes[0] == output_dtype) {
    body(a);
    return;
  }
  const StridedView output = view_of(a, a.data[0], a.dtypes[0], a.strides[0]);
  std::vector<char> staging(numel * element_size(output_dtype));
  a.data[0] = staging.data();
  a.strides[0] = dense_byte_strides(a, output_dtype);
  a.dtypes[0] = output_dtype;
  body(a);
  copy(output, view_of(a, staging.data(), output_dtype, a.strides[0]));
}

}  // namespace torchneuron::kernels
