#include "kernels/sequence.h"

#include <cmath>
#include <complex>
#include <limits>
#include <type_traits>

#include "kernels/dtype_dispatch.h"
#include "kernels/half.h"
#include "kernels/parallel.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {
namespace {

constexpr int64_t kGrain = 32768;

// C's double -> integer conversion as x86-64 performs it, which CPU PyTorch's results show: a
// 64-bit truncation for int64 and a 32-bit one for narrower types, kept to the low bits; a
// value out of range (or NaN) gives the "integer indefinite" (the minimum of the width).
template <typename T>
T truncate_to(double value) {
  if constexpr (std::is_same_v<T, int64_t>) {
    if (!(value >= -9223372036854775808.0 && value < 9223372036854775808.0)) return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(value);
  } else {
    int32_t wide = std::numeric_limits<int32_t>::min();
    if (value >= -2147483648.0 && value < 2147483648.0) wide = static_cast<int32_t>(value);
    return static_cast<T>(wide);  // modulo 2^bits (C++20)
  }
}

template <typename T>
T from_double(double value) {
  if constexpr (std::is_integral_v<T>) {
    return truncate_to<T>(value);
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(value));  // through float, as c10's types convert
  } else {
    return static_cast<T>(value);
  }
}

template <typename T>
void logspace_real(const LogspaceArgs& a, T* out) {
  const int64_t steps = a.steps, halfway = steps / 2;
  parallel_for(steps, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const double exponent = i < halfway ? a.start + a.step * static_cast<double>(i)
                                          : a.end - a.step * static_cast<double>(steps - i - 1);
      out[i] = from_double<T>(std::pow(a.base, exponent));
    }
  });
}

// In the complex dtype's own precision, with complex products written out (a (i + 0j)
// multiplier keeps its zero terms, as c10::complex's product does) and std::pow of two complex
// numbers.
template <typename R>
void logspace_complex(const LogspaceArgs& a, std::complex<R>* out) {
  const int64_t steps = a.steps, halfway = steps / 2;
  const std::complex<R> base(static_cast<R>(a.base), R(0));
  const R start_re = static_cast<R>(a.start), start_im = static_cast<R>(a.start_imag);
  const R end_re = static_cast<R>(a.end), end_im = static_cast<R>(a.end_imag);
  const R step_re = static_cast<R>(a.step), step_im = static_cast<R>(a.step_imag);
  parallel_for(steps, kGrain, [&](int64_t begin, int64_t end) {
    R count = static_cast<R>(begin);  // counted in R, as CPU's loop counts
    for (int64_t i = begin; i < end; ++i, count += R(1)) {
      std::complex<R> exponent;
      if (i < halfway) {
        const R re = step_re * count - step_im * R(0), im = step_re * R(0) + step_im * count;
        exponent = std::complex<R>(start_re + re, start_im + im);
      } else {
        const R k = static_cast<R>(steps - i - 1);
        const R re = step_re * k - step_im * R(0), im = step_re * R(0) + step_im * k;
        exponent = std::complex<R>(end_re - re, end_im - im);
      }
      out[i] = std::pow(base, exponent);
    }
  });
}

}  // namespace

void logspace(DType dtype, const LogspaceArgs& args, void* out) {
  if (args.steps <= 0) return;
  if (dtype == DType::kComplex64) return logspace_complex<float>(args, static_cast<std::complex<float>*>(out));
  if (dtype == DType::kComplex128) return logspace_complex<double>(args, static_cast<std::complex<double>*>(out));
  dispatch_real_dtype(dtype, "logspace", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      throw runtime::KernelError("logspace does not handle bool");
    } else {
      logspace_real<T>(args, static_cast<T*>(out));
    }
  });
}

}  // namespace torchneuron::kernels
