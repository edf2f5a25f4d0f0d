#include "kernels/special_polynomials.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/dtype_dispatch.h"
#include "kernels/elementwise_map.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {
namespace {

// p(k+1) = step(k, p(k), p(k-1)) from p0 and p1, up to degree n; stops early once the value
// overflows (a degree in the billions at |x| > 1 would otherwise loop that long).
template <typename Step>
double recurrence(int64_t n, double p0, double p1, Step step) {
  if (n == 0) return p0;
  double previous = p0, current = p1;
  for (int64_t k = 1; k < n && std::isfinite(current); ++k) {
    const double next = step(k, current, previous);
    previous = current;
    current = next;
  }
  return current;
}

// The Chebyshev kinds: T, U, V and W share p(k+1) = 2x p(k) - p(k-1) and differ in p1. Inside
// (-1, 1) a high degree takes the closed form in theta = acos(x), which the recurrence loses
// accuracy against; at x = +-1 the values are exact integers.
double chebyshev(Polynomial kind, double x, int64_t n) {
  const bool even = n % 2 == 0;
  const double two_n_plus_1 = 2.0 * static_cast<double>(n) + 1.0;
  if (std::abs(x) == 1.0) {
    switch (kind) {
      case Polynomial::kChebyshevT: return x > 0 || even ? 1.0 : -1.0;
      case Polynomial::kChebyshevU: return (x > 0 || even ? 1.0 : -1.0) * static_cast<double>(n + 1);
      case Polynomial::kChebyshevV: return x > 0 ? 1.0 : (even ? two_n_plus_1 : -two_n_plus_1);
      default: return x > 0 ? two_n_plus_1 : (even ? 1.0 : -1.0);
    }
  }
  if (n > 6 && std::abs(x) < 1.0) {
    const double theta = std::acos(x), nd = static_cast<double>(n);
    switch (kind) {
      case Polynomial::kChebyshevT: return std::cos(nd * theta);
      case Polynomial::kChebyshevU: return std::sin((nd + 1.0) * theta) / std::sin(theta);
      case Polynomial::kChebyshevV: return std::cos((nd + 0.5) * theta) / std::cos(0.5 * theta);
      default: return std::sin((nd + 0.5) * theta) / std::sin(0.5 * theta);
    }
  }
  const double p1 = kind == Polynomial::kChebyshevT   ? x
                    : kind == Polynomial::kChebyshevU ? 2.0 * x
                    : kind == Polynomial::kChebyshevV ? 2.0 * x - 1.0
                                                      : 2.0 * x + 1.0;
  return recurrence(n, 1.0, p1, [x](int64_t, double p, double q) { return 2.0 * x * p - q; });
}

Polynomial unshifted(Polynomial kind) {
  return static_cast<Polynomial>(static_cast<int>(kind) - static_cast<int>(Polynomial::kShiftedChebyshevT) +
                                 static_cast<int>(Polynomial::kChebyshevT));
}

}  // namespace

double polynomial_value(Polynomial kind, double x, double degree) {
  if (std::isnan(degree) || degree <= -1.0) return 0.0;  // as an int64 cast: NaN is negative
  const auto n = static_cast<int64_t>(std::min(degree, 9.0e18));
  switch (kind) {
    case Polynomial::kChebyshevT:
    case Polynomial::kChebyshevU:
    case Polynomial::kChebyshevV:
    case Polynomial::kChebyshevW:
      return chebyshev(kind, x, n);
    case Polynomial::kShiftedChebyshevT:
    case Polynomial::kShiftedChebyshevU:
    case Polynomial::kShiftedChebyshevV:
    case Polynomial::kShiftedChebyshevW:
      return chebyshev(unshifted(kind), 2.0 * x - 1.0, n);
    case Polynomial::kHermiteH:
      return recurrence(n, 1.0, 2.0 * x,
                        [x](int64_t k, double p, double q) { return 2.0 * x * p - 2.0 * static_cast<double>(k) * q; });
    case Polynomial::kHermiteHe:
      return recurrence(n, 1.0, x, [x](int64_t k, double p, double q) { return x * p - static_cast<double>(k) * q; });
    case Polynomial::kLaguerreL:
      if (x == 0.0) return 1.0;
      return recurrence(n, 1.0, 1.0 - x, [x](int64_t k, double p, double q) {
        const double kd = static_cast<double>(k);
        return ((2.0 * kd + 1.0 - x) * p - kd * q) / (kd + 1.0);
      });
    case Polynomial::kLegendreP:
      if (std::abs(x) == 1.0) return x > 0 || n % 2 == 0 ? 1.0 : -1.0;
      return recurrence(n, 1.0, x, [x](int64_t k, double p, double q) {
        const double kd = static_cast<double>(k);
        return ((2.0 * kd + 1.0) * x * p - kd * q) / (kd + 1.0);
      });
  }
  return 0.0;
}

void polynomial(Polynomial kind, const ElementwiseArgs& args) {
  if (args.numel() == 0) return;
  dispatch_real_dtype(args.dtypes[1], "special polynomial", [&](auto tag) {
    using T = decltype(tag);
    using C = elementwise_map::Compute<T>;
    if constexpr (std::is_floating_point_v<C>) {
      elementwise_map::map<T, T, 2>(args, [kind](C x, C n) {
        return static_cast<C>(polynomial_value(kind, static_cast<double>(x), static_cast<double>(n)));
      });
    } else {
      throw runtime::KernelError("special polynomials take floating dtypes only");
    }
  });
}

}  // namespace torchneuron::kernels
