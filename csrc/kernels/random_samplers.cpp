#include "kernels/random.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/floating.h"
#include "kernels/parallel.h"
#include "kernels/random_common.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {
namespace {

using runtime::PhiloxStream;
using namespace random_detail;

constexpr uint32_t kPerElementStream = 0x9e3779b9;

// Element `index`'s private stream (see per_element_words_needed).
class ElementStream {
 public:
  ElementStream(PhiloxStream stream, uint64_t index)
      : seed_(stream.resolved().seed), block_(stream.resolved().offset / 4 + index) {}

  // Uniform in [0, 1) with 53 random bits.
  double uniform() {
    const uint64_t lo = word();
    return runtime::uint64_to_uniform_double((static_cast<uint64_t>(word()) << 32) | lo);
  }
  // Standard normal by Box-Muller, the second of each pair kept for the next call.
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double radius = std::sqrt(-2.0 * std::log1p(-uniform()));
    const double angle = 2.0 * M_PI * uniform();
    spare_ = radius * std::sin(angle);
    has_spare_ = true;
    return radius * std::cos(angle);
  }

 private:
  uint32_t word() {
    if (used_ == 4) {
      words_ = runtime::philox4x32({static_cast<uint32_t>(block_), static_cast<uint32_t>(block_ >> 32), draw_++,
                                    kPerElementStream},
                                   seed_);
      used_ = 0;
    }
    return words_[used_++];
  }

  uint64_t seed_;
  uint64_t block_;
  uint32_t draw_ = 0;
  runtime::PhiloxBlock words_{};
  int used_ = 4;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

double log_gamma(double a) {
  int sign;
  return ::lgamma_r(a, &sign);  // lgamma writes a global sign; lgamma_r is thread-safe
}

double log_factorial(double k) { return log_gamma(k + 1.0); }

double gamma_sample(double alpha, ElementStream& rng) {
  if (!(alpha > 0.0)) return 0.0;  // clamped to the dtype's smallest normal by the caller
  if (std::isinf(alpha)) return alpha;
  double boost = 1.0;
  if (alpha < 1.0) {
    // Gamma(alpha) = Gamma(alpha + 1) u^(1 / alpha), in logs so that tiny alphas underflow to 0.
    boost = std::exp(std::log1p(-rng.uniform()) / alpha);
    alpha += 1.0;
  }
  const double d = alpha - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = rng.normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = 1.0 - rng.uniform();  // in (0, 1]
    const double x2 = x * x;
    if (u < 1.0 - 0.0331 * x2 * x2 || std::log(u) < 0.5 * x2 + d * (1.0 - v + std::log(v))) return boost * d * v;
  }
}

double poisson_sample(double rate, ElementStream& rng) {
  if (rate == 0.0) return 0.0;
  if (std::isinf(rate)) return rate;
  if (rate < 10.0) {
    const double limit = std::exp(-rate);
    double product = rng.uniform();
    double k = 0.0;
    while (product > limit) {
      product *= rng.uniform();
      k += 1.0;
    }
    return k;
  }
  // PTRS (Hormann 1993, "The transformed rejection method for generating Poisson random variables").
  const double root = std::sqrt(rate);
  const double log_rate = std::log(rate);
  const double b = 0.931 + 2.53 * root;
  const double a = -0.059 + 0.02483 * b;
  const double inverse_alpha = 1.1239 + 1.1328 / (b - 3.4);
  const double v_r = 0.9277 - 3.6224 / (b - 2.0);
  for (;;) {
    const double u = rng.uniform() - 0.5;
    const double v = rng.uniform();
    const double us = 0.5 - std::fabs(u);
    const double k = std::floor((2.0 * a / us + b) * u + rate + 0.43);
    if (us >= 0.07 && v <= v_r) return k;
    if (k < 0.0 || (us < 0.013 && v > us)) continue;
    if (std::log(v) + std::log(inverse_alpha) - std::log(a / (us * us) + b) <= -rate + k * log_rate - log_factorial(k)) {
      return k;
    }
  }
}

// Binomial(count, p) for p <= 1/2.
double binomial_sample_low(double count, double p, ElementStream& rng) {
  if (count * p < 10.0) {
    // Each success ends a geometric waiting time; count those that fit in `count` trials.
    const double log_q = std::log1p(-p);
    double trials = 0.0, successes = 0.0;
    for (;;) {
      trials += std::ceil(std::log1p(-rng.uniform()) / log_q);
      if (trials > count) return successes;
      successes += 1.0;
    }
  }
  // BTRS (Hormann 1993, "The generation of binomial random variates").
  const double q = 1.0 - p;
  const double spq = std::sqrt(count * p * q);
  const double b = 1.15 + 2.53 * spq;
  const double a = -0.0873 + 0.0248 * b + 0.01 * p;
  const double c = count * p + 0.5;
  const double v_r = 0.92 - 4.2 / b;
  const double alpha = (2.83 + 5.1 / b) * spq;
  const double log_odds = std::log(p / q);
  const double mode = std::floor((count + 1.0) * p);
  const double h = log_factorial(mode) + log_factorial(count - mode);
  for (;;) {
    const double u = rng.uniform() - 0.5;
    const double v = rng.uniform();
    const double us = 0.5 - std::fabs(u);
    const double k = std::floor((2.0 * a / us + b) * u + c);
    if (k < 0.0 || k > count) continue;
    if (us >= 0.07 && v <= v_r) return k;
    if (std::log(v * alpha / (a / (us * us) + b)) <= h - log_factorial(k) - log_factorial(count - k) + (k - mode) * log_odds) {
      return k;
    }
  }
}

double binomial_sample(double count, double p, ElementStream& rng) {
  if (std::isnan(p) || std::isnan(count)) return std::numeric_limits<double>::quiet_NaN();
  if (!(count > 0.0) || p <= 0.0) return 0.0;
  if (p >= 1.0) return count;
  return p <= 0.5 ? binomial_sample_low(count, p, rng) : count - binomial_sample_low(count, 1.0 - p, rng);
}

template <typename T>
double smallest_normal() {
  if constexpr (std::is_same_v<T, double>) return std::numeric_limits<double>::min();
  else if constexpr (std::is_same_v<T, float>) return std::numeric_limits<float>::min();
  else return static_cast<double>(std::numeric_limits<float>::min());  // half types: float's, rounded
}

// out[i] = sample(i, rng) over [0, n) in parallel, each element with its own stream.
template <typename Sample>
void per_element(int64_t n, PhiloxStream stream, Sample sample) {
  parallel_for(n, 256, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      ElementStream rng(stream, static_cast<uint64_t>(i));
      sample(i, rng);
    }
  });
}

}  // namespace

uint64_t per_element_words_needed(int64_t n) { return static_cast<uint64_t>(std::max<int64_t>(n, 0)) * 4; }

void standard_gamma(DType dtype, int64_t n, const void* alpha, void* out, PhiloxStream stream) {
  dispatch_floating(dtype, "_standard_gamma", [&](auto tag) {
    using T = decltype(tag);
    const T* a = static_cast<const T*>(alpha);
    char* o = static_cast<char*>(out);
    const double floor = smallest_normal<T>();
    per_element(n, stream, [&](int64_t i, ElementStream& rng) {
      store<T>(o + i * sizeof(T), std::max(gamma_sample(as_double(a[i]), rng), floor));
    });
  });
}

void sample_dirichlet(DType dtype, int64_t rows, int64_t k, const void* alpha, void* out, PhiloxStream stream) {
  dispatch_floating(dtype, "_sample_dirichlet", [&](auto tag) {
    using T = decltype(tag);
    const T* a = static_cast<const T*>(alpha);
    char* o = static_cast<char*>(out);
    const double floor = smallest_normal<T>();
    parallel_for(rows, 16, [&](int64_t begin, int64_t end) {
      std::vector<double> draws(static_cast<size_t>(k));
      for (int64_t r = begin; r < end; ++r) {
        double total = 0.0;
        for (int64_t j = 0; j < k; ++j) {
          ElementStream rng(stream, static_cast<uint64_t>(r * k + j));
          draws[j] = std::max(gamma_sample(as_double(a[r * k + j]), rng), floor);
          total += draws[j];
        }
        for (int64_t j = 0; j < k; ++j) store<T>(o + (r * k + j) * sizeof(T), std::max(draws[j] / total, floor));
      }
    });
  });
}

void poisson(DType dtype, int64_t n, const void* rate, void* out, PhiloxStream stream) {
  dispatch_floating(dtype, "poisson", [&](auto tag) {
    using T = decltype(tag);
    const T* r = static_cast<const T*>(rate);
    for (int64_t i = 0; i < n; ++i) {
      if (!(as_double(r[i]) >= 0.0)) throw runtime::KernelError("invalid Poisson rate, expected rate to be non-negative");
    }
    char* o = static_cast<char*>(out);
    per_element(n, stream, [&](int64_t i, ElementStream& rng) {
      store<T>(o + i * sizeof(T), poisson_sample(as_double(r[i]), rng));
    });
  });
}

void binomial(DType dtype, int64_t n, const void* count, const void* prob, void* out, PhiloxStream stream) {
  dispatch_floating(dtype, "binomial", [&](auto tag) {
    using T = decltype(tag);
    const T* c = static_cast<const T*>(count);
    const T* p = static_cast<const T*>(prob);
    char* o = static_cast<char*>(out);
    per_element(n, stream, [&](int64_t i, ElementStream& rng) {
      store<T>(o + i * sizeof(T), binomial_sample(as_double(c[i]), as_double(p[i]), rng));
    });
  });
}

namespace {

// Keeps a modified-Lentz continued fraction's partial terms off zero.
double away_from_zero(double v) {
  constexpr double kTiny = 1e-300;
  return std::fabs(v) < kTiny ? kTiny : v;
}

// P(a, x) (lower) or 1 - P(a, x) (upper) divided by the Gamma(a0) density at x and by x:
// exp((a - a0) log x - lgamma(a) + lgamma(a0)) times the series sum_n x^n / (a (a+1) ... (a+n))
// or the continued fraction of the upper function (modified Lentz), so that no term underflows.
double scaled_incomplete_gamma(double a, double a0, double x, bool upper) {
  const double scale = std::exp((a - a0) * std::log(x) - log_gamma(a) + log_gamma(a0));
  if (!upper) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 1000000; ++n) {
      term *= x / (a + n);
      sum += term;
      if (term < sum * 1e-17) break;
    }
    return scale * sum;
  }
  double b = x + 1.0 - a, c = 1.0 / 1e-300, d = 1.0 / b, h = d;
  for (int i = 1; i < 1000000; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = 1.0 / away_from_zero(an * d + b);
    c = away_from_zero(b + an / c);
    const double step = d * c;
    h *= step;
    if (std::fabs(step - 1.0) < 1e-16) break;
  }
  return scale * h;
}

// d f / d alpha at alpha by a central difference. The incomplete gamma and beta functions vary
// over alpha on a scale of alpha below 1 and of sqrt(alpha) above; the step is 1e-5 of that.
template <typename F>
double slope_in_alpha(double alpha, F f) {
  const double h = 1e-5 * (alpha < 1.0 ? alpha : std::sqrt(alpha));
  return (f(alpha + h) - f(alpha - h)) / (2.0 * h);
}

double gamma_sample_grad(double alpha, double x) {
  if (x == 0.0 && alpha > 0.0) return 0.0;
  if (!(alpha > 0.0) || !(x > 0.0) || std::isinf(alpha) || std::isinf(x)) return std::numeric_limits<double>::quiet_NaN();
  const bool upper = x >= alpha + 1.0;  // the smaller of P and 1 - P, computed directly
  const double slope = slope_in_alpha(alpha, [&](double a) { return scaled_incomplete_gamma(a, alpha, x, upper); });
  return (upper ? x : -x) * slope;
}

// The continued fraction of the regularized incomplete beta function I_x(a, b) (modified Lentz):
// I_x(a, b) = x^a (1 - x)^b / (a B(a, b)) times it.
double beta_fraction(double a, double b, double x) {
  double c = 1.0, d = 1.0 / away_from_zero(1.0 - (a + b) * x / (a + 1.0)), h = d;
  for (int m = 1; m < 1000000; ++m) {
    const double m2 = 2.0 * m;
    double term = m * (b - m) * x / ((a - 1.0 + m2) * (a + m2));
    d = 1.0 / away_from_zero(1.0 + term * d);
    c = away_from_zero(1.0 + term / c);
    h *= d * c;
    term = -(a + m) * (a + b + m) * x / ((a + m2) * (a + 1.0 + m2));
    d = 1.0 / away_from_zero(1.0 + term * d);
    c = away_from_zero(1.0 + term / c);
    const double step = d * c;
    h *= step;
    if (std::fabs(step - 1.0) < 1e-16) break;
  }
  return h;
}

// I_x(a, b) (lower) or 1 - I_x(a, b) (upper) over the Beta(a0, b) density at x and over 1 - x;
// the (1 - x) factors cancel, so that x = 1 (a float sample next to 1) is no 0 / 0.
double scaled_incomplete_beta(double a, double a0, double b, double x, bool upper) {
  const double log_ratio = log_gamma(a0) - log_gamma(a0 + b) - log_gamma(a) + log_gamma(a + b);  // B(a0, b) / B(a, b)
  const double scale = x * std::exp((a - a0) * std::log(x) + log_ratio);
  return upper ? scale / b * beta_fraction(b, a, 1.0 - x) : scale / a * beta_fraction(a, b, x);
}

double dirichlet_component_grad(double x, double alpha, double total) {
  const double beta = total - alpha;
  if (x == 0.0 && alpha > 0.0 && beta > 0.0) return 0.0;
  if (!(alpha > 0.0) || !(beta > 0.0) || !(x > 0.0) || !(x <= 1.0)) return std::numeric_limits<double>::quiet_NaN();
  const bool upper = x >= (alpha + 1.0) / (total + 2.0);
  const double slope =
      slope_in_alpha(alpha, [&](double a) { return scaled_incomplete_beta(a, alpha, beta, x, upper); });
  return upper ? slope : -slope;
}

}  // namespace

void dirichlet_grad(DType dtype, int64_t n, const void* sample, const void* alpha, const void* total, void* out) {
  dispatch_floating(dtype, "_dirichlet_grad", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(sample);
    const T* a = static_cast<const T*>(alpha);
    const T* t = static_cast<const T*>(total);
    char* o = static_cast<char*>(out);
    parallel_for(n, 64, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        store<T>(o + i * sizeof(T), dirichlet_component_grad(as_double(x[i]), as_double(a[i]), as_double(t[i])));
      }
    });
  });
}

void standard_gamma_grad(DType dtype, int64_t n, const void* alpha, const void* sample, void* out) {
  dispatch_floating(dtype, "_standard_gamma_grad", [&](auto tag) {
    using T = decltype(tag);
    const T* a = static_cast<const T*>(alpha);
    const T* x = static_cast<const T*>(sample);
    char* o = static_cast<char*>(out);
    parallel_for(n, 64, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) store<T>(o + i * sizeof(T), gamma_sample_grad(as_double(a[i]), as_double(x[i])));
    });
  });
}

}  // namespace torchneuron::kernels
