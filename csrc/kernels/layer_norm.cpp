#include "kernels/nn.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/floating.h"
#include "kernels/parallel.h"
#include "kernels/vector_math.h"

namespace torchneuron::kernels {

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

}  // namespace torchneuron::kernels
