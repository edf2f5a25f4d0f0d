#include "kernels/elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/dtype_dispatch.h"
#include "kernels/elementwise_common.h"
#include "kernels/elementwise_map.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {
namespace {

using namespace elementwise_map;
using namespace elementwise_detail;

}  // namespace

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
            // CPU PyTorch's vectorized lerp: base + coeff * (end - self) as one fused multiply-add
            // where the instruction set has it (its results differ from the unfused form's).
            const auto lerp = [](C self, C end, C weight) {
              const bool small = std::abs(weight) < C(0.5);
              const C coeff = small ? weight : weight - C(1), base = small ? self : end;
#if defined(__FMA__)
              return std::fma(coeff, end - self, base);
#else
              return C(coeff * (end - self) + base);
#endif
            };
            // A host-scalar weight comes as alpha, unrounded to a half type, as CPU's opmath weight.
            if (args.is_scalar[3]) return map<T, T, 3>(args, [value, lerp](C self, C end, C) { return lerp(self, end, value); });
            return map<T, T, 3>(args, lerp);
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
