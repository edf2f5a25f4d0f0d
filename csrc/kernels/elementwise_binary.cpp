#include "kernels/elementwise.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/dtype_dispatch.h"
#include "kernels/elementwise_common.h"
#include "kernels/elementwise_map.h"
#include "kernels/vector_math.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {
namespace {

using namespace elementwise_map;
using namespace elementwise_detail;

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

}  // namespace torchneuron::kernels
