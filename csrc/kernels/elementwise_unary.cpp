#include "kernels/elementwise.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/dtype_dispatch.h"
#include "kernels/elementwise_common.h"
#include "kernels/elementwise_map.h"
#include "kernels/special_functions.h"
#include "kernels/vector_math.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {
namespace {

using namespace elementwise_map;
using namespace elementwise_detail;

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
      // angle of a real number: pi below zero, NaN kept, else 0 (-0.0 included), as on CPU.
      case UnaryOp::kAngle:
        return map<T, T, 1>(a, [](C x) { return x != x ? x : (x < C(0) ? C(3.14159265358979323846) : C(0)); });
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

bool complex_to_real(UnaryOp op) { return op == UnaryOp::kAbs || op == UnaryOp::kAngle; }

bool unary_supported(UnaryOp op, DType dtype) {
  if (is_complex(dtype)) return complex_unary_supported(op);
  switch (op) {
    case UnaryOp::kConj:
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
