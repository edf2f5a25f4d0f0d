#include "kernels/nn.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "kernels/dtype_dispatch.h"
#include "kernels/floating.h"
#include "kernels/half.h"
#include "kernels/parallel.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {

void cumulative(ScanOp op, DType in_dtype, DType out_dtype, SoftmaxShape s, const void* in, void* out) {
  auto with_in = [&](auto in_tag) {
    using I = decltype(in_tag);
    using A = std::conditional_t<std::is_integral_v<I>, int64_t, double>;
    auto with_out = [&](auto out_tag) {
      using O = decltype(out_tag);
      const I* x = static_cast<const I*>(in);
      O* y = static_cast<O*>(out);
      auto load = [](I v) {
        if constexpr (std::is_same_v<I, Half> || std::is_same_v<I, BFloat16>) {
          return static_cast<A>(static_cast<float>(v));
        } else {
          return static_cast<A>(v);
        }
      };
      auto store = [](A v) {
        if constexpr (std::is_same_v<O, Half> || std::is_same_v<O, BFloat16>) {
          return O(static_cast<float>(v));
        } else {
          return static_cast<O>(v);
        }
      };
      const A identity = op == ScanOp::kProd ? 1 : 0;
      if (s.inner > 1) {
        // Scans along a dim with inner elements after it (cumsum over rows): blocks of kBlock
        // adjacent scans advance together a row at a time, reading memory in order; one scan
        // at a time strode through it. Each element's sum is taken in the same order.
        constexpr int64_t kBlock = 64;
        const int64_t blocks = (s.inner + kBlock - 1) / kBlock;
        parallel_for(s.outer * blocks, std::max<int64_t>(1, 4096 / std::max<int64_t>(s.dim * kBlock, 1)),
                     [&](int64_t begin, int64_t end) {
          for (int64_t task = begin; task < end; ++task) {
            const int64_t o = task / blocks, first = (task % blocks) * kBlock;
            const int64_t width = std::min(kBlock, s.inner - first);
            A acc[kBlock];
            std::fill(acc, acc + kBlock, identity);
            for (int64_t j = 0; j < s.dim; ++j) {
              const int64_t at = (o * s.dim + j) * s.inner + first;
              for (int64_t l = 0; l < width; ++l) {
                acc[l] = op == ScanOp::kProd ? static_cast<A>(acc[l] * load(x[at + l])) : static_cast<A>(acc[l] + load(x[at + l]));
                y[at + l] = store(acc[l]);
              }
            }
          }
        });
        return;
      }
      parallel_for(s.outer, std::max<int64_t>(1, 4096 / std::max<int64_t>(s.dim, 1)), [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          const int64_t base = row * s.dim;
          A acc = identity;
          for (int64_t j = 0; j < s.dim; ++j) {
            acc = op == ScanOp::kProd ? static_cast<A>(acc * load(x[base + j])) : static_cast<A>(acc + load(x[base + j]));
            y[base + j] = store(acc);
          }
        }
      });
    };
    switch (out_dtype) {
      case DType::kFloat32: return with_out(float{});
      case DType::kFloat64: return with_out(double{});
      case DType::kBFloat16: return with_out(BFloat16{});
      case DType::kFloat16: return with_out(Half{});
      case DType::kInt64: return with_out(int64_t{});
      case DType::kInt32: return with_out(int32_t{});
      default: throw runtime::KernelError(std::string("cumsum does not write ") + dtype_name(out_dtype));
    }
  };
  dispatch_real_dtype(in_dtype, "cumsum", with_in);
}

void cumulative_extremum(DType dtype, bool is_max, SoftmaxShape s, const void* in, void* values, int64_t* indices) {
  dispatch_real_dtype(dtype, is_max ? "cummax" : "cummin", [&](auto tag) {
    using T = decltype(tag);
    using C = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;
    const T* x = static_cast<const T*>(in);
    T* v = static_cast<T*>(values);
    parallel_for(s.outer * s.inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(s.dim, 1)), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t base = (row / s.inner) * s.dim * s.inner + row % s.inner;
        T best = x[base];
        int64_t best_index = 0;
        for (int64_t j = 0; j < s.dim; ++j) {
          const int64_t at = base + j * s.inner;
          const C current = static_cast<C>(x[at]), held = static_cast<C>(best);
          const bool current_nan = current != current, held_nan = held != held;
          if (current_nan || (!held_nan && (is_max ? current >= held : current <= held))) {
            best = x[at];
            best_index = j;
          }
          v[at] = best;
          indices[at] = best_index;
        }
      }
    });
  });
}

void log_cumulative_sum_exp(DType dtype, SoftmaxShape s, const void* in, void* out) {
  dispatch_floating(dtype, "logcumsumexp", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in);
    T* y = static_cast<T*>(out);
    // log(exp(a) + exp(b)); equal infinities give themselves, a NaN propagates.
    auto log_add_exp = [](double a, double b) {
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
      const double low = std::min(a, b), high = std::max(a, b);
      if (low == high && !std::isfinite(low)) return a;
      return std::log1p(std::exp(low - high)) + high;
    };
    parallel_for(s.outer * s.inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(s.dim, 1)), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t base = (row / s.inner) * s.dim * s.inner + row % s.inner;
        double total = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < s.dim; ++j) {
          const int64_t at = base + j * s.inner;
          total = log_add_exp(static_cast<double>(up(x[at])), total);
          y[at] = down<T>(static_cast<Acc<T>>(total));
        }
      }
    });
  });
}

}  // namespace torchneuron::kernels
