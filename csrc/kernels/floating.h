// Floating-point kernels' shared vocabulary: the accumulation type of each storage type
// (half types compute in float, as torch's CPU kernels do), conversions, and a dispatcher.
#pragma once

#include <string>
#include <type_traits>

#include "kernels/half.h"
#include "kernels/strided.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
inline Acc<T> up(T value) {
  return static_cast<Acc<T>>(static_cast<float>(value));
}
template <>
inline double up<double>(double value) {
  return value;
}

template <typename T, typename A>
inline T down(A value) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(value));
  } else {
    return static_cast<T>(value);
  }
}

inline bool is_floating_dtype(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kBFloat16 ||
         dtype == DType::kFloat16;
}

// f(T{}) for float, double, BFloat16 and Half; any other dtype raises KernelError naming `what`.
template <typename F>
void dispatch_floating(DType dtype, const char* what, F&& f) {
  switch (dtype) {
    case DType::kFloat32: return f(float{});
    case DType::kFloat64: return f(double{});
    case DType::kBFloat16: return f(BFloat16{});
    case DType::kFloat16: return f(Half{});
    default:
      throw runtime::KernelError(std::string(what) + " needs a floating dtype, got " + dtype_name(dtype));
  }
}

}  // namespace torchneuron::kernels
