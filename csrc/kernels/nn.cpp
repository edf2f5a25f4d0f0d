#include "kernels/nn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/dtype_dispatch.h"
#include "kernels/floating.h"
#include "kernels/half.h"
#include "kernels/parallel.h"
#include "kernels/vector_math.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {
bool nn_supported(DType dtype) { return is_floating_dtype(dtype); }

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

namespace {

// A row of T as floats: the row itself for float, else converted into `buffer`.
template <typename T>
inline const float* float_row(const T* row, int64_t n, std::vector<float>& buffer) {
  if constexpr (std::is_same_v<T, float>) {
    return row;
  } else {
    buffer.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) buffer[i] = static_cast<float>(row[i]);
    return buffer.data();
  }
}

// y = (x - mean) * rstd [* w] [+ b], with the optional operands decided outside the loop.
template <bool kWeight, bool kBias>
inline void layer_norm_affine(const float* x, const float* w, const float* b, float mean, float rstd, int64_t n,
                              float* y) {
  for (int64_t c = 0; c < n; ++c) {
    float value = (x[c] - mean) * rstd;
    if constexpr (kWeight) value *= w[c];
    if constexpr (kBias) value += b[c];
    y[c] = value;
  }
}

// Float and half types: rows in float, the row sums in float lanes.
template <typename T>
void layer_norm_float(int64_t rows, int64_t cols, double eps, const T* x, const T* w, const T* b, T* y, T* mean_out,
                      T* rstd_out) {
  constexpr bool kFloat = std::is_same_v<T, float>;
  const double n = static_cast<double>(std::max<int64_t>(cols, 1));
  std::vector<float> weight_buffer, bias_buffer;  // half types: weight and bias widened once
  const float* wf = w != nullptr ? float_row(w, cols, weight_buffer) : nullptr;
  const float* bf = b != nullptr ? float_row(b, cols, bias_buffer) : nullptr;
  parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(cols, 1)), [&](int64_t begin, int64_t end) {
    std::vector<float> in_row, out_row(kFloat ? 0 : cols);
    for (int64_t r = begin; r < end; ++r) {
      const float* row = float_row(x + r * cols, cols, in_row);
      const float mean = static_cast<float>(lane_sum(row, cols) / n);
      const double squares = lane_sum_of(cols, [&](int64_t c) { return (row[c] - mean) * (row[c] - mean); });
      const float var = static_cast<float>(squares / n);
      const float rstd = 1.0f / std::sqrt(var + static_cast<float>(eps));
      float* dst;
      if constexpr (kFloat) {
        dst = y + r * cols;
      } else {
        dst = out_row.data();
      }
      if (wf != nullptr && bf != nullptr) {
        layer_norm_affine<true, true>(row, wf, bf, mean, rstd, cols, dst);
      } else if (wf != nullptr) {
        layer_norm_affine<true, false>(row, wf, bf, mean, rstd, cols, dst);
      } else if (bf != nullptr) {
        layer_norm_affine<false, true>(row, wf, bf, mean, rstd, cols, dst);
      } else {
        layer_norm_affine<false, false>(row, wf, bf, mean, rstd, cols, dst);
      }
      if constexpr (!kFloat) {
        for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = T(dst[c]);
      }
      mean_out[r] = down<T>(mean);
      rstd_out[r] = down<T>(rstd);
    }
  });
}

// One row of the input gradient: g = grad_out [* w], xhat = (x - m) * s,
// gx = s * (g - mean(g) - xhat * mean(g * xhat)), the two row sums in float lanes.
template <bool kWeight>
inline void layer_norm_grad_row(const float* go, const float* x, const float* w, float m, float s, int64_t n,
                                float* gx) {
  auto grad = [&](int64_t c) { return kWeight ? go[c] * w[c] : go[c]; };
  const double sum_g = lane_sum_of(n, grad);
  const double sum_gx = lane_sum_of(n, [&](int64_t c) { return grad(c) * (x[c] - m) * s; });
  const float inv_n = 1.0f / static_cast<float>(std::max<int64_t>(n, 1));
  const float mean_g = inv_n * static_cast<float>(sum_g);
  const float sgx = static_cast<float>(sum_gx);
  for (int64_t c = 0; c < n; ++c) {
    const float g = grad(c);
    const float xhat = (x[c] - m) * s;
    gx[c] = s * (g - mean_g - xhat * inv_n * sgx);
  }
}

template <typename T>
void layer_norm_backward_float(int64_t rows, int64_t cols, const T* go, const T* x, const T* mean, const T* rstd,
                               const T* w, T* gx, T* grad_weight, T* grad_bias) {
  constexpr bool kFloat = std::is_same_v<T, float>;
  std::vector<float> weight_buffer;
  const float* wf = w != nullptr && gx != nullptr ? float_row(w, cols, weight_buffer) : nullptr;
  // grad_weight and grad_bias sum over the rows: each block of rows (a size that depends on
  // cols only, never on threads) adds its rows in order, kRun rows at a time in float and the
  // runs into its own double partial sums, and the partials are added in block order
  // afterwards. One pass over grad_out and x. (Adding each row in double cost three times the
  // rest of the kernel.)
  constexpr int64_t kRun = 16;
  const int64_t width = std::max<int64_t>(cols, 1);
  const bool partials = grad_weight != nullptr || grad_bias != nullptr;
  const int64_t block_rows =
      partials ? std::clamp<int64_t>(32768 / width, 8, 256) : std::max<int64_t>(1, 4096 / width);
  const int64_t blocks = (rows + block_rows - 1) / block_rows;
  std::vector<double> partial_w(grad_weight != nullptr ? blocks * cols : 0);
  std::vector<double> partial_b(grad_bias != nullptr ? blocks * cols : 0);
  parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> go_row, x_row, out_row(kFloat ? 0 : cols);
    std::vector<float> run_w(grad_weight != nullptr ? cols : 0), run_b(grad_bias != nullptr ? cols : 0);
    for (int64_t block = begin; block < end; ++block) {
      double* pw = grad_weight != nullptr ? partial_w.data() + block * cols : nullptr;
      double* pb = grad_bias != nullptr ? partial_b.data() + block * cols : nullptr;
      float* rw = run_w.data();
      float* rb = run_b.data();
      const int64_t block_end = std::min(rows, (block + 1) * block_rows);
      for (int64_t r = block * block_rows; r < block_end; ++r) {
        const float* g = float_row(go + r * cols, cols, go_row);
        const float* xr = float_row(x + r * cols, cols, x_row);
        const float m = up(mean[r]), s = up(rstd[r]);
        if (gx != nullptr) {
          float* dst;
          if constexpr (kFloat) {
            dst = gx + r * cols;
          } else {
            dst = out_row.data();
          }
          if (wf != nullptr) {
            layer_norm_grad_row<true>(g, xr, wf, m, s, cols, dst);
          } else {
            layer_norm_grad_row<false>(g, xr, wf, m, s, cols, dst);
          }
          if constexpr (!kFloat) {
            for (int64_t c = 0; c < cols; ++c) gx[r * cols + c] = T(dst[c]);
          }
        }
        const bool first = (r - block * block_rows) % kRun == 0;
        if (pw != nullptr) {
          for (int64_t c = 0; c < cols; ++c) rw[c] = (first ? 0.0f : rw[c]) + g[c] * (xr[c] - m) * s;
        }
        if (pb != nullptr) {
          for (int64_t c = 0; c < cols; ++c) rb[c] = (first ? 0.0f : rb[c]) + g[c];
        }
        if ((r + 1 - block * block_rows) % kRun == 0 || r + 1 == block_end) {
          if (pw != nullptr) {
            for (int64_t c = 0; c < cols; ++c) pw[c] += rw[c];
          }
          if (pb != nullptr) {
            for (int64_t c = 0; c < cols; ++c) pb[c] += rb[c];
          }
        }
      }
    }
  });
  if (!partials) return;
  parallel_for(cols, 256, [&](int64_t begin, int64_t end) {
    auto combine = [&](const std::vector<double>& partial, T* result) {
      std::vector<double> sum(static_cast<size_t>(end - begin), 0.0);
      for (int64_t block = 0; block < blocks; ++block) {
        const double* p = partial.data() + block * cols + begin;
        for (int64_t c = 0; c < end - begin; ++c) sum[c] += p[c];
      }
      for (int64_t c = 0; c < end - begin; ++c) result[begin + c] = down<T>(sum[c]);
    };
    if (grad_weight != nullptr) combine(partial_w, grad_weight);
    if (grad_bias != nullptr) combine(partial_b, grad_bias);
  });
}

}  // namespace

void layer_norm(DType dtype, int64_t rows, int64_t cols, double eps, const void* x_in, const void* weight,
                const void* bias, void* out, void* mean_out, void* rstd_out) {
  dispatch_floating(dtype, "this kernel", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* x = static_cast<const T*>(x_in);
    const T* w = static_cast<const T*>(weight);
    const T* b = static_cast<const T*>(bias);
    T* y = static_cast<T*>(out);
    if constexpr (!std::is_same_v<T, double>) {
      return layer_norm_float(rows, cols, eps, x, w, b, y, static_cast<T*>(mean_out), static_cast<T*>(rstd_out));
    }
    parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(cols, 1)), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* row = x + r * cols;
        A mean = 0;
        for (int64_t c = 0; c < cols; ++c) mean += up(row[c]);
        mean /= static_cast<A>(std::max<int64_t>(cols, 1));
        A var = 0;
        for (int64_t c = 0; c < cols; ++c) {
          const A d = up(row[c]) - mean;
          var += d * d;
        }
        var /= static_cast<A>(std::max<int64_t>(cols, 1));
        const A rstd = A(1) / std::sqrt(var + static_cast<A>(eps));
        for (int64_t c = 0; c < cols; ++c) {
          A value = (up(row[c]) - mean) * rstd;
          if (w != nullptr) value *= up(w[c]);
          if (b != nullptr) value += up(b[c]);
          y[r * cols + c] = down<T>(value);
        }
        static_cast<T*>(mean_out)[r] = down<T>(mean);
        static_cast<T*>(rstd_out)[r] = down<T>(rstd);
      }
    });
  });
}

void layer_norm_backward(DType dtype, int64_t rows, int64_t cols, const void* grad_out, const void* x_in,
                         const void* mean_in, const void* rstd_in, const void* weight, void* grad_x,
                         void* grad_weight, void* grad_bias) {
  dispatch_floating(dtype, "this kernel", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* go = static_cast<const T*>(grad_out);
    const T* x = static_cast<const T*>(x_in);
    const T* mean = static_cast<const T*>(mean_in);
    const T* rstd = static_cast<const T*>(rstd_in);
    const T* w = static_cast<const T*>(weight);
    if constexpr (!std::is_same_v<T, double>) {
      return layer_norm_backward_float(rows, cols, go, x, mean, rstd, w, static_cast<T*>(grad_x),
                                       static_cast<T*>(grad_weight), static_cast<T*>(grad_bias));
    }
    if (grad_x != nullptr) {
      T* gx = static_cast<T*>(grad_x);
      parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(cols, 1)), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const A m = up(mean[r]);
          const A s = up(rstd[r]);
          double sum_g = 0, sum_gx = 0;  // row sums in double: long rows lose less
          for (int64_t c = 0; c < cols; ++c) {
            const A g = up(go[r * cols + c]) * (w != nullptr ? up(w[c]) : A(1));
            sum_g += g;
            sum_gx += g * (up(x[r * cols + c]) - m) * s;
          }
          const A inv_n = A(1) / static_cast<A>(std::max<int64_t>(cols, 1));
          for (int64_t c = 0; c < cols; ++c) {
            const A g = up(go[r * cols + c]) * (w != nullptr ? up(w[c]) : A(1));
            const A xhat = (up(x[r * cols + c]) - m) * s;
            gx[r * cols + c] = down<T>(s * (g - inv_n * static_cast<A>(sum_g) - xhat * inv_n * static_cast<A>(sum_gx)));
          }
        }
      });
    }
    if (grad_weight == nullptr && grad_bias == nullptr) return;
    parallel_for(cols, 64, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        double gw = 0, gb = 0;  // column sums over many rows, in double
        for (int64_t r = 0; r < rows; ++r) {
          const A g = up(go[r * cols + c]);
          gw += g * (up(x[r * cols + c]) - up(mean[r])) * up(rstd[r]);
          gb += g;
        }
        if (grad_weight != nullptr) static_cast<T*>(grad_weight)[c] = down<T>(gw);
        if (grad_bias != nullptr) static_cast<T*>(grad_bias)[c] = down<T>(gb);
      }
    });
  });
}

namespace {

void check_target(int64_t t, int64_t classes, int64_t ignore_index) {
  if (t != ignore_index && (t < 0 || t >= classes)) {
    throw runtime::KernelError("Target " + std::to_string(t) + " is out of bounds: the input has " +
                               std::to_string(classes) + " classes (valid targets are 0.." +
                               std::to_string(classes - 1) + " or ignore_index " + std::to_string(ignore_index) + ")");
  }
}

}  // namespace

void nll_loss(DType dtype, int64_t batch, int64_t classes, int64_t spatial, const void* log_probs, const int64_t* target,
              const void* weight, Reduction reduction, int64_t ignore_index, void* out, void* total_weight) {
  dispatch_floating(dtype, "this kernel", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* lp = static_cast<const T*>(log_probs);
    const T* w = static_cast<const T*>(weight);
    T* o = static_cast<T*>(out);
    A total = 0, sum = 0;
    for (int64_t i = 0; i < batch * spatial; ++i) {
      const int64_t t = target[i];
      check_target(t, classes, ignore_index);
      const A wt = t == ignore_index ? A(0) : (w != nullptr ? up(w[t]) : A(1));
      const int64_t n = i / spatial, s = i - n * spatial;
      const A loss = t == ignore_index ? A(0) : -up(lp[(n * classes + t) * spatial + s]) * wt;
      if (reduction == Reduction::kNone) {
        o[i] = down<T>(loss);
      } else {
        sum += loss;
        total += wt;
      }
    }
    if (reduction == Reduction::kNone) {
      *static_cast<T*>(total_weight) = down<T>(A(0));
      return;
    }
    *static_cast<T*>(total_weight) = down<T>(total);
    *o = down<T>(reduction == Reduction::kMean ? sum / total : sum);  // 0/0 is NaN, as in torch
  });
}

void nll_loss_backward(DType dtype, int64_t batch, int64_t classes, int64_t spatial, const void* grad_out,
                       const int64_t* target, const void* weight, Reduction reduction, int64_t ignore_index,
                       const void* total_weight, void* grad_input) {
  dispatch_floating(dtype, "this kernel", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* go = static_cast<const T*>(grad_out);
    const T* w = static_cast<const T*>(weight);
    T* gi = static_cast<T*>(grad_input);
    std::fill(gi, gi + batch * classes * spatial, down<T>(A(0)));
    const A total = up(*static_cast<const T*>(total_weight));
    for (int64_t i = 0; i < batch * spatial; ++i) {
      const int64_t t = target[i];
      check_target(t, classes, ignore_index);
      if (t == ignore_index) continue;
      const A wt = w != nullptr ? up(w[t]) : A(1);
      A g = reduction == Reduction::kNone ? up(go[i]) : up(go[0]);
      if (reduction == Reduction::kMean) g /= total;
      const int64_t n = i / spatial, s = i - n * spatial;
      gi[(n * classes + t) * spatial + s] = down<T>(-wt * g);
    }
  });
}

void index_select(int64_t outer, int64_t self_dim, int64_t row_bytes, const char* self, const int64_t* index,
                  int64_t count, char* out) {
  for (int64_t i = 0; i < count; ++i) {
    if (index[i] < 0 || index[i] >= self_dim) {
      throw runtime::KernelError("index " + std::to_string(index[i]) + " is out of range for a dimension of size " +
                                 std::to_string(self_dim) + " (position " + std::to_string(i) + " of the index)");
    }
  }
  parallel_for(outer * count, std::max<int64_t>(1, 65536 / std::max<int64_t>(row_bytes, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t job = begin; job < end; ++job) {
      const int64_t o = job / count;
      const int64_t i = job % count;
      std::memcpy(out + job * row_bytes, self + (o * self_dim + index[i]) * row_bytes, static_cast<size_t>(row_bytes));
    }
  });
}

void embedding_backward(DType dtype, int64_t count, int64_t cols, const void* grad, const int64_t* index,
                        int64_t num_weights, int64_t padding_idx, void* grad_weight) {
  dispatch_floating(dtype, "this kernel", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* g = static_cast<const T*>(grad);
    T* gw = static_cast<T*>(grad_weight);
    for (int64_t i = 0; i < count; ++i) {
      if (index[i] < 0 || index[i] >= num_weights) {
        throw runtime::KernelError("embedding index " + std::to_string(index[i]) + " is out of range for " +
                                   std::to_string(num_weights) + " embeddings");
      }
    }
    // Each task owns a range of destination rows and adds into them, in index order, the
    // gradient rows that land there: deterministic, in a wider type for half types.
    parallel_for(num_weights, std::max<int64_t>(1, 65536 / std::max<int64_t>(cols, 1)), [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, A>) {
        std::fill(gw + begin * cols, gw + end * cols, T(0));
        for (int64_t i = 0; i < count; ++i) {
          const int64_t target = index[i];
          if (target < begin || target >= end || target == padding_idx) continue;
          T* row = gw + target * cols;
          const T* src = g + i * cols;
          for (int64_t c = 0; c < cols; ++c) row[c] += src[c];
        }
      } else {
        std::vector<int64_t> slot(static_cast<size_t>(end - begin), -1);  // row -> accumulator
        std::vector<A> acc;
        for (int64_t i = 0; i < count; ++i) {
          const int64_t target = index[i];
          if (target < begin || target >= end || target == padding_idx) continue;
          int64_t& at = slot[target - begin];
          if (at < 0) {
            at = static_cast<int64_t>(acc.size());
            acc.resize(acc.size() + static_cast<size_t>(cols), A(0));
          }
          A* row = acc.data() + at;
          const T* src = g + i * cols;
          for (int64_t c = 0; c < cols; ++c) row[c] += up(src[c]);
        }
        for (int64_t r = begin; r < end; ++r) {
          const int64_t at = slot[r - begin];
          T* dst = gw + r * cols;
          for (int64_t c = 0; c < cols; ++c) dst[c] = down<T>(at < 0 ? A(0) : acc[at + c]);
        }
      }
    });
  });
}

namespace {

// Bag b's entries: [offsets[b], end_b).
int64_t bag_end(const EmbeddingBagShape& shape, const int64_t* offsets, int64_t b) {
  return b + 1 < shape.num_offsets ? offsets[b + 1] : shape.count;
}

void check_bags(const EmbeddingBagShape& shape, const int64_t* indices, const int64_t* offsets) {
  if (shape.num_offsets > 0 && offsets[0] != 0) {
    throw runtime::KernelError("offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
                               "position 0. However, got " + std::to_string(offsets[0]));
  }
  for (int64_t b = 0; b < shape.num_offsets; ++b) {
    const int64_t next = b + 1 < shape.num_offsets ? offsets[b + 1] : shape.count;
    if (offsets[b] > shape.count) {
      throw runtime::KernelError("offsets[" + std::to_string(b) + "] can not be greater than input's length " +
                                 std::to_string(shape.count) + " but got " + std::to_string(offsets[b]));
    }
    if (b + 1 < shape.num_offsets && next < offsets[b]) {
      throw runtime::KernelError("offsets must be non-decreasing, but offsets[" + std::to_string(b + 1) + "] = " +
                                 std::to_string(next) + " < offsets[" + std::to_string(b) + "] = " +
                                 std::to_string(offsets[b]));
    }
  }
  for (int64_t i = 0; i < shape.count; ++i) {
    if (indices[i] < 0 || indices[i] >= shape.num_weights) {
      throw runtime::KernelError("Index " + std::to_string(i) + " of input takes value " + std::to_string(indices[i]) +
                                 " which is not in the valid range [0, " + std::to_string(shape.num_weights) + ")");
    }
  }
}

}  // namespace

void embedding_bag(DType dtype, BagMode mode, const EmbeddingBagShape& shape, const void* weight,
                   const int64_t* indices, const int64_t* offsets, const void* per_sample_weights,
                   int64_t padding_idx, void* out, int64_t* offset2bag, int64_t* bag_size, int64_t* max_indices) {
  check_bags(shape, indices, offsets);
  const int64_t dim = shape.dim;
  std::fill(offset2bag, offset2bag + shape.count, shape.num_bags);  // entries past a closing offset
  for (int64_t b = 0; b < shape.num_bags; ++b) {
    for (int64_t i = offsets[b]; i < bag_end(shape, offsets, b); ++i) offset2bag[i] = b;
  }
  dispatch_floating(dtype, "embedding_bag", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* w = static_cast<const T*>(weight);
    const T* scale = static_cast<const T*>(per_sample_weights);
    T* o = static_cast<T*>(out);
    parallel_for(shape.num_bags, std::max<int64_t>(1, 16384 / std::max<int64_t>(dim, 1)), [&](int64_t begin, int64_t end) {
      std::vector<A> acc(static_cast<size_t>(dim));
      for (int64_t b = begin; b < end; ++b) {
        std::fill(acc.begin(), acc.end(), A(0));
        int64_t* arg = mode == BagMode::kMax ? max_indices + b * dim : nullptr;
        if (arg) std::fill(arg, arg + dim, int64_t{0});
        int64_t size = 0;
        for (int64_t i = offsets[b]; i < bag_end(shape, offsets, b); ++i) {
          const int64_t row = indices[i];
          if (row == padding_idx) continue;
          const T* src = w + row * dim;
          if (mode == BagMode::kMax) {
            for (int64_t d = 0; d < dim; ++d) {
              const A v = up(src[d]);
              if (size == 0 || v > acc[d]) {  // the first largest, as CPU PyTorch keeps it
                acc[d] = v;
                arg[d] = row;
              }
            }
          } else if (scale) {
            const A s = up(scale[i]);
            for (int64_t d = 0; d < dim; ++d) acc[d] += s * up(src[d]);
          } else {
            for (int64_t d = 0; d < dim; ++d) acc[d] += up(src[d]);
          }
          ++size;
        }
        bag_size[b] = size;
        const A divisor = mode == BagMode::kMean && size > 0 ? A(size) : A(1);
        for (int64_t d = 0; d < dim; ++d) o[b * dim + d] = down<T>(acc[d] / divisor);
      }
    });
  });
  for (int64_t b = shape.num_bags; b < shape.num_offsets; ++b) bag_size[b] = 0;
}

void embedding_bag_backward(DType dtype, BagMode mode, const EmbeddingBagShape& shape, const void* grad,
                            const int64_t* indices, const int64_t* offset2bag, const int64_t* bag_size,
                            const int64_t* max_indices, const void* per_sample_weights, int64_t padding_idx,
                            void* grad_weight) {
  const int64_t dim = shape.dim;
  dispatch_floating(dtype, "embedding_bag backward", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* g = static_cast<const T*>(grad);
    const T* scale = static_cast<const T*>(per_sample_weights);
    T* gw = static_cast<T*>(grad_weight);
    // Each task owns a range of destination rows and adds into them, in entry order, what lands
    // there: deterministic, accumulated in float for half types.
    parallel_for(shape.num_weights, std::max<int64_t>(1, 65536 / std::max<int64_t>(dim, 1)), [&](int64_t begin, int64_t end) {
      std::vector<A> acc(static_cast<size_t>((end - begin) * dim), A(0));
      if (mode == BagMode::kMax) {
        for (int64_t b = 0; b < shape.num_bags; ++b) {
          if (bag_size[b] == 0) continue;
          for (int64_t d = 0; d < dim; ++d) {
            const int64_t row = max_indices[b * dim + d];
            if (row >= begin && row < end) acc[(row - begin) * dim + d] += up(g[b * dim + d]);
          }
        }
      } else {
        for (int64_t i = 0; i < shape.count; ++i) {
          const int64_t row = indices[i];
          if (row < begin || row >= end || row == padding_idx) continue;
          const int64_t b = offset2bag[i];
          if (b >= shape.num_bags) continue;  // past a closing offset
          A s = scale ? up(scale[i]) : A(1);
          if (mode == BagMode::kMean) s /= A(bag_size[b]);
          A* dst = acc.data() + (row - begin) * dim;
          const T* src = g + b * dim;
          for (int64_t d = 0; d < dim; ++d) dst[d] += s * up(src[d]);
        }
      }
      for (int64_t k = 0; k < (end - begin) * dim; ++k) gw[begin * dim + k] = down<T>(acc[k]);
    });
  });
}

void embedding_bag_per_sample_weights_backward(DType dtype, const EmbeddingBagShape& shape, const void* grad,
                                               const void* weight, const int64_t* indices,
                                               const int64_t* offset2bag, int64_t padding_idx, void* out) {
  const int64_t dim = shape.dim;
  dispatch_floating(dtype, "embedding_bag per-sample-weights backward", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* g = static_cast<const T*>(grad);
    const T* w = static_cast<const T*>(weight);
    T* o = static_cast<T*>(out);
    parallel_for(shape.count, std::max<int64_t>(1, 16384 / std::max<int64_t>(dim, 1)), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t b = offset2bag[i];
        if (indices[i] == padding_idx || b >= shape.num_bags) {
          o[i] = T(0);
          continue;
        }
        A dot = 0;
        for (int64_t d = 0; d < dim; ++d) dot += up(g[b * dim + d]) * up(w[indices[i] * dim + d]);
        o[i] = down<T>(dot);
      }
    });
  });
}

namespace {

[[noreturn]] void throw_index_out_of_bounds(int64_t target, int dim, int64_t size) {
  throw runtime::KernelError("index " + std::to_string(target) + " is out of bounds for dimension " +
                             std::to_string(dim) + " with size " + std::to_string(size));
}

// Calls visit(position in index order, offset into data in elements) for every index entry,
// over the compute pool. The entries are taken as [outer, K, inner] (the index dims before, at
// and after `dim`), and work is split over outer positions and ranges of inner ones, never over
// K: entries that can reach the same data element (they differ only along dim) stay on one
// thread, in index order, so that scatter-adds sum in the order CPU PyTorch does.
// inner_broadcast: `index` holds one entry per [outer, K] position, the same for all inner ones
// (an index expanded over the dims after `dim`, not materialized). runs_independent: no two
// entries write one place (a gather), so with inner_broadcast work splits over K too.
template <typename Visit>
void for_each_indexed(int ndim, const int64_t* index_sizes, const int64_t* index, bool inner_broadcast, int dim,
                      const int64_t* data_sizes, bool runs_independent, Visit&& visit) {
  int64_t data_strides[kMaxDims];
  int64_t stride = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    data_strides[d] = stride;
    stride *= data_sizes[d];
  }
  int64_t outer = 1, inner = 1;
  bool inner_matches = true;  // the index's inner dims are the data's: inner position i is offset i
  for (int d = 0; d < dim; ++d) outer *= index_sizes[d];
  for (int d = dim + 1; d < ndim; ++d) {
    inner *= index_sizes[d];
    inner_matches = inner_matches && index_sizes[d] == data_sizes[d];
  }
  const int64_t K = index_sizes[dim], limit = data_sizes[dim], target_stride = data_strides[dim];
  if (outer == 0 || K == 0 || inner == 0) return;
  std::vector<int64_t> inner_offsets;
  if (!inner_matches) {
    inner_offsets.resize(static_cast<size_t>(inner));
    int64_t coord[kMaxDims] = {};
    for (int64_t i = 0; i < inner; ++i) {
      int64_t offset = 0;
      for (int d = dim + 1; d < ndim; ++d) offset += coord[d] * data_strides[d];
      inner_offsets[i] = offset;
      for (int d = ndim - 1; d > dim; --d) {
        if (++coord[d] < index_sizes[d]) break;
        coord[d] = 0;
      }
    }
  }
  constexpr int64_t kTaskEntries = 8192;
  const int64_t inner_chunks = std::clamp<int64_t>(K * inner / kTaskEntries, 1, inner);
  const int64_t chunk = (inner + inner_chunks - 1) / inner_chunks;
  const int64_t tasks = outer * inner_chunks;
  const int64_t grain = std::max<int64_t>(1, kTaskEntries / (K * chunk));
  auto base_of = [&](int64_t o) {  // the data offset of outer position o
    int64_t base = 0;
    for (int64_t d = dim - 1, rest = o; d >= 0; --d) {
      base += (rest % index_sizes[d]) * data_strides[d];
      rest /= index_sizes[d];
    }
    return base;
  };
  // Entries [i0, i1) of the inner run at (o, k).
  auto visit_run = [&](int64_t o, int64_t k, int64_t base, int64_t i0, int64_t i1) {
    const int64_t first = (o * K + k) * inner;
    if (inner_broadcast) {
      const int64_t target = index[o * K + k];
      if (static_cast<uint64_t>(target) >= static_cast<uint64_t>(limit)) throw_index_out_of_bounds(target, dim, limit);
      const int64_t row = base + target * target_stride;
      for (int64_t i = i0; i < i1; ++i) visit(first + i, row + (inner_matches ? i : inner_offsets[i]));
      return;
    }
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t target = index[first + i];
      if (static_cast<uint64_t>(target) >= static_cast<uint64_t>(limit)) throw_index_out_of_bounds(target, dim, limit);
      visit(first + i, base + target * target_stride + (inner_matches ? i : inner_offsets[i]));
    }
  };
  std::exception_ptr failure;
  try {
    if (runs_independent && inner_broadcast && inner > 1) {
      // Each entry written once (a gather) and each run one data row: whole runs per task, read
      // and written in order. (Random entries of a dense index read columns in chunks instead:
      // the chunk's cache lines of data serve the next chunks.)
      parallel_for(outer * K, std::max<int64_t>(1, kTaskEntries / inner), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) visit_run(r / K, r % K, base_of(r / K), 0, inner);
      });
    } else {
      parallel_for(tasks, grain, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const int64_t o = t / inner_chunks, i0 = (t % inner_chunks) * chunk, i1 = std::min(inner, i0 + chunk);
          const int64_t base = base_of(o);
          if (inner == 1) {  // dim is the last: one run of K entries, data offsets base + target
            const int64_t* targets = index + o * K;
            bool bad = false;
            for (int64_t k = 0; k < K; ++k) bad |= static_cast<uint64_t>(targets[k]) >= static_cast<uint64_t>(limit);
            if (bad) throw_index_out_of_bounds(-1, dim, limit);  // the caller reports the first bad entry
            for (int64_t k = 0; k < K; ++k) visit(o * K + k, base + targets[k]);
            continue;
          }
          for (int64_t k = 0; k < K; ++k) visit_run(o, k, base, i0, i1);
        }
      });
    }
  } catch (const runtime::KernelError&) {
    failure = std::current_exception();
  }
  if (failure) {  // report the first bad entry in index order, whichever thread met one first
    const int64_t numel = outer * K * (inner_broadcast ? 1 : inner);
    for (int64_t i = 0; i < numel; ++i) {
      if (static_cast<uint64_t>(index[i]) >= static_cast<uint64_t>(limit)) throw_index_out_of_bounds(index[i], dim, limit);
    }
    std::rethrow_exception(failure);
  }
}

}  // namespace

void gather(int ndim, const int64_t* index_sizes, const int64_t* index, bool inner_broadcast, int dim,
            const int64_t* data_sizes, int64_t element_bytes, const char* data, char* out) {
  // Fixed-size copies for the usual element sizes: a memcpy of a run-time size is a call.
  auto copy_as = [&](auto word) {
    using W = decltype(word);
    const W* from = reinterpret_cast<const W*>(data);
    W* to = reinterpret_cast<W*>(out);
    for_each_indexed(ndim, index_sizes, index, inner_broadcast, dim, data_sizes, true,
                     [&](int64_t i, int64_t offset) { to[i] = from[offset]; });
  };
  switch (element_bytes) {
    case 1: return copy_as(uint8_t{});
    case 2: return copy_as(uint16_t{});
    case 4: return copy_as(uint32_t{});
    case 8: return copy_as(uint64_t{});
    default:
      for_each_indexed(ndim, index_sizes, index, inner_broadcast, dim, data_sizes, true, [&](int64_t i, int64_t offset) {
        std::memcpy(out + i * element_bytes, data + offset * element_bytes, static_cast<size_t>(element_bytes));
      });
  }
}

void scatter(DType dtype, bool add, int ndim, const int64_t* index_sizes, const int64_t* index, bool inner_broadcast,
             int dim, const int64_t* data_sizes, const char* src, char* data) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* s = reinterpret_cast<const T*>(src);
    T* d = reinterpret_cast<T*>(data);
    for_each_indexed(ndim, index_sizes, index, inner_broadcast, dim, data_sizes, false, [&](int64_t i, int64_t offset) {
      if (!add) {
        d[offset] = s[i];
      } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        d[offset] = T(static_cast<float>(d[offset]) + static_cast<float>(s[i]));
      } else if constexpr (std::is_same_v<T, bool>) {
        d[offset] = d[offset] || s[i];
      } else {
        d[offset] = static_cast<T>(d[offset] + s[i]);
      }
    });
  };
  dispatch_real_dtype(dtype, "scatter", run);
}

void scatter_reduce(DType dtype, ScatterReduceOp op, int ndim, const int64_t* index_sizes, const int64_t* index,
                    bool inner_broadcast, int dim, const int64_t* data_sizes, const char* src, char* data) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      throw runtime::KernelError("scatter_reduce is not supported for bool");
    } else {
      using C = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;
      const T* s = reinterpret_cast<const T*>(src);
      T* d = reinterpret_cast<T*>(data);
      for_each_indexed(ndim, index_sizes, index, inner_broadcast, dim, data_sizes, false, [&](int64_t i, int64_t offset) {
        const C a = static_cast<C>(d[offset]);
        const C b = static_cast<C>(s[i]);
        C r = a;
        switch (op) {
          case ScatterReduceOp::kSum: r = static_cast<C>(a + b); break;
          case ScatterReduceOp::kProd: r = static_cast<C>(a * b); break;
          case ScatterReduceOp::kAmax:
          case ScatterReduceOp::kAmin:
            if constexpr (std::is_floating_point_v<C>) {
              if (std::isnan(b)) {
                r = b;
                break;
              }
            }
            r = op == ScatterReduceOp::kAmax ? std::max(a, b) : std::min(a, b);
            break;
        }
        d[offset] = static_cast<T>(r);
      });
    }
  };
  dispatch_real_dtype(dtype, "scatter_reduce", run);
}

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

void histc(DType dtype, int64_t numel, const void* self, int64_t bins, double min, double max, void* out) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(self);
    std::vector<int64_t> counts(static_cast<size_t>(bins), 0);
    for (int64_t i = 0; i < numel; ++i) {
      double value;
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        value = static_cast<double>(static_cast<float>(x[i]));
      } else {
        value = static_cast<double>(x[i]);
      }
      if (!(value >= min && value <= max)) continue;  // also skips NaN
      auto bin = static_cast<int64_t>((value - min) * static_cast<double>(bins) / (max - min));
      counts[static_cast<size_t>(std::min(bin, bins - 1))] += 1;
    }
    T* o = static_cast<T*>(out);
    for (int64_t b = 0; b < bins; ++b) {
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        o[b] = T(static_cast<float>(counts[b]));
      } else {
        o[b] = static_cast<T>(counts[b]);
      }
    }
  };
  dispatch_real_dtype(dtype, "histc", run);
}

void masked_compact(int64_t numel, int64_t element_bytes, const char* self, const bool* mask, char* out) {
  for (int64_t i = 0; i < numel; ++i) {
    if (!mask[i]) continue;
    std::memcpy(out, self + i * element_bytes, static_cast<size_t>(element_bytes));
    out += element_bytes;
  }
}

void nonzero_coordinates(int ndim, const int64_t* sizes, const bool* mask, int64_t* out) {
  int64_t numel = 1;
  for (int d = 0; d < ndim; ++d) numel *= sizes[d];
  std::vector<int64_t> index(static_cast<size_t>(ndim), 0);
  for (int64_t i = 0; i < numel; ++i) {
    if (mask[i]) {
      for (int d = 0; d < ndim; ++d) *out++ = index[d];
    }
    for (int d = ndim - 1; d >= 0; --d) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
  }
}

void arange(DType dtype, int64_t count, double start, double step, int64_t int_start, int64_t int_step, void* out) {
  auto fill = [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out);
    for (int64_t i = 0; i < count; ++i) {
      if constexpr (std::is_integral_v<T>) {
        o[i] = static_cast<T>(int_start + i * int_step);
      } else {
        o[i] = down<T>(start + static_cast<double>(i) * step);
      }
    }
  };
  dispatch_real_dtype(dtype, "arange", fill);
}

}  // namespace torchneuron::kernels
