#include "kernels/nn.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/floating.h"
#include "kernels/parallel.h"
#include "kernels/vector_math.h"

namespace torchneuron::kernels {
namespace {

// Sum of exp(src[j] - shift) over a row, with each term also stored to dst when kStore: one pass
// instead of an exp pass and a sum pass. The lanes, their tree and the double tail are those of
// lane_sum, so the sum rounds the same as lane_sum over the stored terms. shift is the row's
// maximum, so the exps' arguments are <= 0 (or NaN): vector_exp_nonpositive, whose 0 below
// -87.3 is a probability under 1.2e-38 beside the row's largest, 1.
template <bool kStore>
double exp_sum_row(const float* src, int64_t dim, float shift, float* dst) {
  constexpr int kLanes = 64;
  float lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= dim; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const float e = vector_exp_nonpositive(src[j + l] - shift);
      if constexpr (kStore) dst[j + l] = e;
      lanes[l] += e;
    }
  }
  // The tail's exps in a loop of their own, which vectorizes (a row of 96 spent most of its
  // time on 32 scalar exps); then, as in lane_sum, its vector steps join the lanes before the
  // fold and only the last few terms are added one by one in double.
  float tail[kLanes];
  float* terms = kStore ? dst + j : tail;
  const int64_t rest = dim - j;
  for (int64_t t = 0; t < rest; ++t) terms[t] = vector_exp_nonpositive(src[j + t] - shift);
  int64_t t = 0;
  for (; t + kShortLanes <= rest; t += kShortLanes) {
    for (int l = 0; l < kShortLanes; ++l) lanes[l] += terms[t + l];
  }
  fold_lane_tree<kLanes / 2>(lanes, [](float a, float b) { return a + b; });
  double total = lanes[0];
  for (; t < rest; ++t) total += terms[t];
  return total;
}

// Softmax of contiguous float rows (the common case: the last dim) with vectorized exp and
// lane sums; half types go through a float row buffer.
template <typename T>
void softmax_rows(int64_t rows, int64_t dim, const T* x, T* y, bool log) {
  parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(dim, 1)), [&](int64_t begin, int64_t end) {
    constexpr bool kFloat = std::is_same_v<T, float>;
    std::vector<float> in_row(kFloat ? 0 : dim), out_row(kFloat ? 0 : dim);
    for (int64_t row = begin; row < end; ++row) {
      const float* src;
      if constexpr (std::is_same_v<T, float>) {
        src = x + row * dim;
      } else {
        for (int64_t j = 0; j < dim; ++j) in_row[j] = static_cast<float>(x[row * dim + j]);
        src = in_row.data();
      }
      const float max_value = lane_max(src, dim);
      float* dst;
      if constexpr (kFloat) {
        dst = y + row * dim;
      } else {
        dst = out_row.data();
      }
      const float sum = static_cast<float>(log ? exp_sum_row<false>(src, dim, max_value, dst)
                                               : exp_sum_row<true>(src, dim, max_value, dst));
      if (log) {
        const float shift = max_value + std::log(sum);
        for (int64_t j = 0; j < dim; ++j) dst[j] = src[j] - shift;
      } else {
        const float inverse = 1.0f / sum;
        for (int64_t j = 0; j < dim; ++j) dst[j] *= inverse;
      }
      if constexpr (!kFloat) {
        for (int64_t j = 0; j < dim; ++j) y[row * dim + j] = down<T>(dst[j]);
      }
    }
  });
}

}  // namespace

void softmax(DType dtype, SoftmaxShape s, void* out, const void* in, bool log) {
  dispatch_floating(dtype, "this kernel", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    if constexpr (!std::is_same_v<T, double>) {
      if (s.inner == 1) return softmax_rows(s.outer, s.dim, static_cast<const T*>(in), static_cast<T*>(out), log);
    }
    const T* x = static_cast<const T*>(in);
    T* y = static_cast<T*>(out);
    parallel_for(s.outer * s.inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(s.dim, 1)), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t base = (row / s.inner) * s.dim * s.inner + row % s.inner;
        A max_value = -std::numeric_limits<A>::infinity();
        for (int64_t j = 0; j < s.dim; ++j) max_value = std::max(max_value, up(x[base + j * s.inner]));
        A sum = 0;
        for (int64_t j = 0; j < s.dim; ++j) sum += std::exp(up(x[base + j * s.inner]) - max_value);
        if (log) {
          const A shift = max_value + std::log(sum);
          for (int64_t j = 0; j < s.dim; ++j) y[base + j * s.inner] = down<T>(up(x[base + j * s.inner]) - shift);
        } else {
          for (int64_t j = 0; j < s.dim; ++j) {
            y[base + j * s.inner] = down<T>(std::exp(up(x[base + j * s.inner]) - max_value) / sum);
          }
        }
      }
    });
  });
}

void softmax_backward(DType dtype, SoftmaxShape s, void* grad_in, const void* grad_out, const void* output,
                      bool log) {
  dispatch_floating(dtype, "this kernel", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* go = static_cast<const T*>(grad_out);
    const T* y = static_cast<const T*>(output);
    T* gi = static_cast<T*>(grad_in);
    const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(s.dim, 1));
    if constexpr (std::is_same_v<A, float>) {
      if (s.inner == 1) {
        // Contiguous rows: the dot product in 16 float lanes and exp_of vectorize (one running
        // sum and std::exp did not: [1024, 96] log-softmax backward took 270 us).
        parallel_for(s.outer, grain, [&](int64_t begin, int64_t end) {
          for (int64_t row = begin; row < end; ++row) {
            const T* g = go + row * s.dim;
            const T* out = y + row * s.dim;
            T* result = gi + row * s.dim;
            const A dot = static_cast<A>(log ? lane_sum_of(s.dim, [&](int64_t j) { return up(g[j]); })
                                             : lane_sum_of(s.dim, [&](int64_t j) { return up(g[j]) * up(out[j]); }));
            if (log) {
              for (int64_t j = 0; j < s.dim; ++j) result[j] = down<T>(up(g[j]) - exp_of(up(out[j])) * dot);
            } else {
              for (int64_t j = 0; j < s.dim; ++j) result[j] = down<T>(up(out[j]) * (up(g[j]) - dot));
            }
          }
        });
        return;
      }
    }
    parallel_for(s.outer * s.inner, grain, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t base = (row / s.inner) * s.dim * s.inner + row % s.inner;
        A dot = 0;
        for (int64_t j = 0; j < s.dim; ++j) {
          const int64_t at = base + j * s.inner;
          dot += log ? up(go[at]) : up(go[at]) * up(y[at]);
        }
        for (int64_t j = 0; j < s.dim; ++j) {
          const int64_t at = base + j * s.inner;
          gi[at] = log ? down<T>(up(go[at]) - std::exp(up(y[at])) * dot) : down<T>(up(y[at]) * (up(go[at]) - dot));
        }
      }
    });
  });
}

}  // namespace torchneuron::kernels
