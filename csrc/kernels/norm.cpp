#include "kernels/norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/floating.h"
#include "kernels/parallel.h"

namespace torchneuron::kernels {
namespace {

template <typename T>
inline double value_or(const T* p, int64_t i, double fallback) {
  return p == nullptr ? fallback : static_cast<double>(up(p[i]));
}

// Applies f(begin, count) to every contiguous run of channel c: one per batch entry.
template <typename F>
void for_channel_runs(const BatchNormShape& s, int64_t c, F&& f) {
  for (int64_t n = 0; n < s.batch; ++n) f((n * s.channels + c) * s.inner, s.inner);
}

// A sum of double terms in kLanes accumulators, chosen by a term's position in its run (a fixed
// order, whatever the threads): the compiler vectorizes them into four independent chains, where
// one running double sum waited on each add (batch norm ran 2-5x slower than CPU PyTorch).
class DoubleLanes {
 public:
  template <typename Term>
  void add_run(int64_t at, int64_t n, Term&& term) {
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      for (int64_t l = 0; l < kLanes; ++l) lanes_[l] += term(at + i + l);
    }
    for (; i < n; ++i) tail_ += term(at + i);
  }
  double total() const {
    double total = tail_;
    for (int64_t l = 0; l < kLanes; ++l) total += lanes_[l];
    return total;
  }

 private:
  static constexpr int64_t kLanes = 32;  // four vectors of 8 doubles
  double lanes_[kLanes] = {};
  double tail_ = 0;
};

// The sum of term(i) over [at, at + n).
template <typename Term>
double run_sum(int64_t at, int64_t n, Term&& term) {
  DoubleLanes sum;
  sum.add_run(at, n, term);
  return sum.total();
}

// The sum of term(i) over channel c's elements.
template <typename Term>
double channel_sum(const BatchNormShape& s, int64_t c, Term&& term) {
  DoubleLanes sum;
  for_channel_runs(s, c, [&](int64_t at, int64_t n) { sum.add_run(at, n, term); });
  return sum.total();
}

// ---- channels-last batch norm: x as [rows, channels] ----------------------------------------

// Per-channel sums of term(i, c) over the rows of a [rows, channels] buffer (i = r * channels +
// c): fixed chunks of rows summed in parallel, then added in chunk order, so the result does not
// depend on the thread count.
template <typename Term>
std::vector<double> row_channel_sums(int64_t rows, int64_t channels, Term&& term) {
  constexpr int64_t kChunk = 256;
  const int64_t chunks = (rows + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(chunks * channels), 0.0);
  parallel_for(chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      double* acc = partial.data() + k * channels;
      for (int64_t r = k * kChunk; r < std::min(rows, (k + 1) * kChunk); ++r) {
        for (int64_t c = 0; c < channels; ++c) acc[c] += term(r * channels + c, c);
      }
    }
  });
  std::vector<double> sums(static_cast<size_t>(channels), 0.0);
  for (int64_t k = 0; k < chunks; ++k) {
    for (int64_t c = 0; c < channels; ++c) sums[c] += partial[k * channels + c];
  }
  return sums;
}

// out[i] = f(i, c) over a [rows, channels] buffer, rows split across the engines.
template <typename F>
void for_each_row_element(int64_t rows, int64_t channels, F&& f) {
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(channels, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t c = 0; c < channels; ++c) f(r * channels + c, c);
    }
  });
}

template <typename T>
void batch_norm_rows(const BatchNormShape& s, const T* x, const T* w, const T* b, T* rm, T* rv, bool training,
                     double momentum, double eps, T* y, T* save_mean, T* save_invstd) {
  using A = Acc<T>;
  const int64_t rows = s.batch * s.inner, channels = s.channels;
  if (training) {
    const std::vector<double> sums = row_channel_sums(rows, channels, [&](int64_t i, int64_t) {
      return static_cast<double>(up(x[i]));
    });
    std::vector<double> mean(static_cast<size_t>(channels));
    for (int64_t c = 0; c < channels; ++c) mean[c] = rows > 0 ? sums[c] / rows : 0.0;
    const std::vector<double> squares = row_channel_sums(rows, channels, [&](int64_t i, int64_t c) {
      const double d = up(x[i]) - mean[c];
      return d * d;
    });
    for (int64_t c = 0; c < channels; ++c) {
      const double invstd = 1.0 / std::sqrt((rows > 0 ? squares[c] / rows : 0.0) + eps);
      save_mean[c] = down<T>(static_cast<A>(mean[c]));
      save_invstd[c] = down<T>(static_cast<A>(invstd));
      if (rm != nullptr) rm[c] = down<T>(static_cast<A>((1 - momentum) * up(rm[c]) + momentum * mean[c]));
      if (rv != nullptr) {
        const double unbiased = rows > 1 ? squares[c] / (rows - 1) : NAN;
        rv[c] = down<T>(static_cast<A>((1 - momentum) * up(rv[c]) + momentum * unbiased));
      }
    }
  }
  // y = x * scale + shift from the stored statistics, as the [N, C, inner] kernel folds it.
  std::vector<A> scale(static_cast<size_t>(channels)), shift(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    const A stored_mean = training ? up(save_mean[c]) : static_cast<A>(value_or(rm, c, 0.0));
    const A stored_invstd =
        training ? up(save_invstd[c]) : static_cast<A>(1.0 / std::sqrt(value_or(rv, c, 1.0) + eps));
    scale[c] = stored_invstd * static_cast<A>(value_or(w, c, 1.0));
    shift[c] = static_cast<A>(value_or(b, c, 0.0)) - stored_mean * scale[c];
  }
  for_each_row_element(rows, channels, [&](int64_t i, int64_t c) { y[i] = down<T>(up(x[i]) * scale[c] + shift[c]); });
}

template <typename T>
void batch_norm_backward_rows(const BatchNormShape& s, const T* go, const T* x, const T* w, const T* running_mean,
                              const T* running_var, const T* save_mean, const T* save_invstd, bool training,
                              double eps, T* gx, T* grad_weight, T* grad_bias) {
  const int64_t rows = s.batch * s.inner, channels = s.channels;
  std::vector<double> mean(static_cast<size_t>(channels)), invstd(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    mean[c] = training ? up(save_mean[c]) : value_or(running_mean, c, 0.0);
    invstd[c] = training ? up(save_invstd[c]) : 1.0 / std::sqrt(value_or(running_var, c, 1.0) + eps);
  }
  const std::vector<double> sum_g = row_channel_sums(rows, channels, [&](int64_t i, int64_t) {
    return static_cast<double>(up(go[i]));
  });
  const std::vector<double> dot = row_channel_sums(rows, channels, [&](int64_t i, int64_t c) {
    return up(go[i]) * (up(x[i]) - mean[c]);
  });
  if (gx != nullptr) {
    std::vector<double> factor(static_cast<size_t>(channels)), grad_mean(static_cast<size_t>(channels), 0.0),
        proj(static_cast<size_t>(channels), 0.0);
    for (int64_t c = 0; c < channels; ++c) {
      factor[c] = invstd[c] * value_or(w, c, 1.0);
      if (training && rows > 0) {
        grad_mean[c] = sum_g[c] / rows;
        proj[c] = dot[c] * invstd[c] * invstd[c] / rows;
      }
    }
    if (training) {
      for_each_row_element(rows, channels, [&](int64_t i, int64_t c) {
        const double centered = up(x[i]) - mean[c];
        gx[i] = down<T>(static_cast<Acc<T>>((up(go[i]) - grad_mean[c] - centered * proj[c]) * factor[c]));
      });
    } else {
      std::vector<Acc<T>> scale(factor.begin(), factor.end());
      for_each_row_element(rows, channels, [&](int64_t i, int64_t c) { gx[i] = down<T>(up(go[i]) * scale[c]); });
    }
  }
  for (int64_t c = 0; c < channels; ++c) {
    if (grad_weight != nullptr) grad_weight[c] = down<T>(static_cast<Acc<T>>(dot[c] * invstd[c]));
    if (grad_bias != nullptr) grad_bias[c] = down<T>(static_cast<Acc<T>>(sum_g[c]));
  }
}

// ---- channels-last group norm: each batch entry's x as [inner rows, channels] -------------------

template <typename T>
void group_norm_rows(const BatchNormShape& s, int64_t groups, double eps, const T* x, const T* w, const T* b, T* y,
                     T* mean_out, T* rstd_out) {
  using A = Acc<T>;
  const int64_t channels = s.channels, per_group = channels / groups, span = per_group * s.inner;
  std::vector<double> channel_mean(static_cast<size_t>(channels)), rstd(static_cast<size_t>(groups));
  std::vector<A> scale(static_cast<size_t>(channels)), shift(static_cast<size_t>(channels));
  for (int64_t n = 0; n < s.batch; ++n) {
    const T* xn = x + n * s.inner * channels;
    const std::vector<double> sums = row_channel_sums(s.inner, channels, [&](int64_t i, int64_t) {
      return static_cast<double>(up(xn[i]));
    });
    for (int64_t g = 0; g < groups; ++g) {
      double sum = 0;
      for (int64_t k = 0; k < per_group; ++k) sum += sums[g * per_group + k];
      for (int64_t k = 0; k < per_group; ++k) channel_mean[g * per_group + k] = span > 0 ? sum / span : 0.0;
    }
    const std::vector<double> squares = row_channel_sums(s.inner, channels, [&](int64_t i, int64_t c) {
      const double d = up(xn[i]) - channel_mean[c];
      return d * d;
    });
    for (int64_t g = 0; g < groups; ++g) {
      double sum = 0;
      for (int64_t k = 0; k < per_group; ++k) sum += squares[g * per_group + k];
      const double mean = channel_mean[g * per_group];
      rstd[g] = 1.0 / std::sqrt((span > 0 ? sum / span : 0.0) + eps);
      mean_out[n * groups + g] = down<T>(static_cast<A>(mean));
      rstd_out[n * groups + g] = down<T>(static_cast<A>(rstd[g]));
      for (int64_t k = 0; k < per_group; ++k) {  // as the [N, C, inner] kernel folds them
        const int64_t c = g * per_group + k;
        scale[c] = static_cast<A>(rstd[g] * value_or(w, c, 1.0));
        shift[c] = static_cast<A>(value_or(b, c, 0.0) - mean * rstd[g] * value_or(w, c, 1.0));
      }
    }
    T* yn = y + n * s.inner * channels;
    for_each_row_element(s.inner, channels, [&](int64_t i, int64_t c) { yn[i] = down<T>(up(xn[i]) * scale[c] + shift[c]); });
  }
}

}  // namespace

void batch_norm(DType dtype, BatchNormShape s, const void* x_in, const void* weight, const void* bias,
                void* running_mean, void* running_var, bool training, double momentum, double eps, void* out,
                void* save_mean, void* save_invstd) {
  dispatch_floating(dtype, "batch_norm", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* x = static_cast<const T*>(x_in);
    const T* w = static_cast<const T*>(weight);
    const T* b = static_cast<const T*>(bias);
    T* rm = static_cast<T*>(running_mean);
    T* rv = static_cast<T*>(running_var);
    T* y = static_cast<T*>(out);
    if (s.channels_last) {
      return batch_norm_rows(s, x, w, b, rm, rv, training, momentum, eps, y, static_cast<T*>(save_mean),
                             static_cast<T*>(save_invstd));
    }
    const int64_t count = s.batch * s.inner;
    parallel_for(s.channels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        if (training) {
          const double sum = channel_sum(s, c, [&](int64_t i) { return static_cast<double>(up(x[i])); });
          const double mean = count > 0 ? sum / count : 0.0;
          const double squares = channel_sum(s, c, [&](int64_t i) {
            const double d = up(x[i]) - mean;
            return d * d;
          });
          const double var = count > 0 ? squares / count : 0.0;
          const double invstd = 1.0 / std::sqrt(var + eps);
          // Normalize with the statistics as stored, as CPU PyTorch does.
          static_cast<T*>(save_mean)[c] = down<T>(static_cast<A>(mean));
          static_cast<T*>(save_invstd)[c] = down<T>(static_cast<A>(invstd));
          if (rm != nullptr) rm[c] = down<T>(static_cast<A>((1 - momentum) * up(rm[c]) + momentum * mean));
          if (rv != nullptr) {
            const double unbiased = count > 1 ? squares / (count - 1) : NAN;
            rv[c] = down<T>(static_cast<A>((1 - momentum) * up(rv[c]) + momentum * unbiased));
          }
        }
        // y = x * scale + shift, as CPU PyTorch folds it, from the stored statistics.
        const A stored_mean = training ? up(static_cast<T*>(save_mean)[c]) : static_cast<A>(value_or(rm, c, 0.0));
        const A stored_invstd = training ? up(static_cast<T*>(save_invstd)[c])
                                         : static_cast<A>(1.0 / std::sqrt(value_or(rv, c, 1.0) + eps));
        const A scale = stored_invstd * static_cast<A>(value_or(w, c, 1.0));
        const A shift = static_cast<A>(value_or(b, c, 0.0)) - stored_mean * scale;
        for_channel_runs(s, c, [&](int64_t at, int64_t n) {
          for (int64_t i = 0; i < n; ++i) y[at + i] = down<T>(up(x[at + i]) * scale + shift);
        });
      }
    });
  });
}

void batch_norm_backward(DType dtype, BatchNormShape s, const void* grad_out, const void* x_in, const void* weight,
                         const void* running_mean, const void* running_var, const void* save_mean,
                         const void* save_invstd, bool training, double eps, void* grad_x, void* grad_weight,
                         void* grad_bias) {
  dispatch_floating(dtype, "batch_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* go = static_cast<const T*>(grad_out);
    const T* x = static_cast<const T*>(x_in);
    const T* w = static_cast<const T*>(weight);
    T* gx = static_cast<T*>(grad_x);
    if (s.channels_last) {
      return batch_norm_backward_rows(s, go, x, w, static_cast<const T*>(running_mean),
                                      static_cast<const T*>(running_var), static_cast<const T*>(save_mean),
                                      static_cast<const T*>(save_invstd), training, eps, gx,
                                      static_cast<T*>(grad_weight), static_cast<T*>(grad_bias));
    }
    const int64_t count = s.batch * s.inner;
    parallel_for(s.channels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        double mean, invstd;
        if (training) {
          mean = up(static_cast<const T*>(save_mean)[c]);
          invstd = up(static_cast<const T*>(save_invstd)[c]);
        } else {
          mean = value_or(static_cast<const T*>(running_mean), c, 0.0);
          invstd = 1.0 / std::sqrt(value_or(static_cast<const T*>(running_var), c, 1.0) + eps);
        }
        // sum(grad) and sum(grad * (x - mean)), one pass each: GCC vectorizes one sum per loop.
        const double sum_g = channel_sum(s, c, [&](int64_t i) { return static_cast<double>(up(go[i])); });
        const double dot = channel_sum(s, c, [&](int64_t i) { return up(go[i]) * (up(x[i]) - mean); });
        const double wc = value_or(w, c, 1.0);
        if (gx != nullptr) {
          if (training) {
            const double grad_mean = count > 0 ? sum_g / count : 0.0;
            const double proj = count > 0 ? dot * invstd * invstd / count : 0.0;
            for_channel_runs(s, c, [&](int64_t at, int64_t n) {
              for (int64_t i = 0; i < n; ++i) {
                const double centered = up(x[at + i]) - mean;
                gx[at + i] = down<T>(static_cast<Acc<T>>((up(go[at + i]) - grad_mean - centered * proj) * invstd * wc));
              }
            });
          } else {
            const Acc<T> scale = static_cast<Acc<T>>(invstd * wc);
            for_channel_runs(s, c, [&](int64_t at, int64_t n) {
              for (int64_t i = 0; i < n; ++i) gx[at + i] = down<T>(up(go[at + i]) * scale);
            });
          }
        }
        if (grad_weight != nullptr) static_cast<T*>(grad_weight)[c] = down<T>(static_cast<Acc<T>>(dot * invstd));
        if (grad_bias != nullptr) static_cast<T*>(grad_bias)[c] = down<T>(static_cast<Acc<T>>(sum_g));
      }
    });
  });
}

void group_norm(DType dtype, BatchNormShape s, int64_t groups, double eps, const void* x_in, const void* weight,
                const void* bias, void* out, void* mean_out, void* rstd_out) {
  dispatch_floating(dtype, "group_norm", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* x = static_cast<const T*>(x_in);
    const T* w = static_cast<const T*>(weight);
    const T* b = static_cast<const T*>(bias);
    T* y = static_cast<T*>(out);
    if (s.channels_last) {
      return group_norm_rows(s, groups, eps, x, w, b, y, static_cast<T*>(mean_out), static_cast<T*>(rstd_out));
    }
    const int64_t per_group = s.channels / groups;
    const int64_t span = per_group * s.inner;  // a group's elements are contiguous
    parallel_for(s.batch * groups, 1, [&](int64_t begin, int64_t end) {
      for (int64_t ng = begin; ng < end; ++ng) {
        const int64_t base = ng * span;
        const double sum = run_sum(base, span, [&](int64_t i) { return static_cast<double>(up(x[i])); });
        const double mean = span > 0 ? sum / span : 0.0;
        const double squares = run_sum(base, span, [&](int64_t i) {
          const double d = up(x[i]) - mean;
          return d * d;
        });
        const double rstd = 1.0 / std::sqrt((span > 0 ? squares / span : 0.0) + eps);
        static_cast<T*>(mean_out)[ng] = down<T>(static_cast<A>(mean));
        static_cast<T*>(rstd_out)[ng] = down<T>(static_cast<A>(rstd));
        const int64_t first_channel = (ng % groups) * per_group;
        for (int64_t k = 0; k < per_group; ++k) {
          const int64_t c = first_channel + k;
          const A scale = static_cast<A>(rstd * value_or(w, c, 1.0));
          const A shift = static_cast<A>(value_or(b, c, 0.0) - mean * rstd * value_or(w, c, 1.0));
          const int64_t at = base + k * s.inner;
          for (int64_t i = 0; i < s.inner; ++i) y[at + i] = down<T>(up(x[at + i]) * scale + shift);
        }
      }
    });
  });
}

void group_norm_backward(DType dtype, BatchNormShape s, int64_t groups, const void* grad_out, const void* x_in,
                         const void* mean_in, const void* rstd_in, const void* weight, void* grad_x, void* grad_weight,
                         void* grad_bias) {
  dispatch_floating(dtype, "group_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* go = static_cast<const T*>(grad_out);
    const T* x = static_cast<const T*>(x_in);
    const T* w = static_cast<const T*>(weight);
    const T* mean = static_cast<const T*>(mean_in);
    const T* rstd = static_cast<const T*>(rstd_in);
    // Per (n, c): sum(grad * x) and sum(grad).
    std::vector<double> ds(s.batch * s.channels), db(s.batch * s.channels);
    if (s.channels_last) {
      for (int64_t n = 0; n < s.batch; ++n) {
        const int64_t at = n * s.inner * s.channels;
        const std::vector<double> dsn = row_channel_sums(s.inner, s.channels, [&](int64_t i, int64_t) {
          return static_cast<double>(up(go[at + i])) * up(x[at + i]);
        });
        const std::vector<double> dbn = row_channel_sums(s.inner, s.channels, [&](int64_t i, int64_t) {
          return static_cast<double>(up(go[at + i]));
        });
        std::copy(dsn.begin(), dsn.end(), ds.begin() + n * s.channels);
        std::copy(dbn.begin(), dbn.end(), db.begin() + n * s.channels);
      }
    } else {
      parallel_for(s.batch * s.channels, 1, [&](int64_t begin, int64_t end) {
        for (int64_t nc = begin; nc < end; ++nc) {
          const int64_t at = nc * s.inner;
          ds[nc] = run_sum(at, s.inner, [&](int64_t i) { return static_cast<double>(up(go[i])) * up(x[i]); });
          db[nc] = run_sum(at, s.inner, [&](int64_t i) { return static_cast<double>(up(go[i])); });
        }
      });
    }
    const int64_t per_group = s.channels / groups;
    const double inv_span = 1.0 / static_cast<double>(per_group * s.inner);
    if (grad_x != nullptr && s.channels_last) {
      // dx = r * w * g + c2 * x + c3 per (n, group), as below, over each entry's rows.
      T* gx = static_cast<T*>(grad_x);
      std::vector<A> scale(static_cast<size_t>(s.channels));
      std::vector<double> c2(static_cast<size_t>(s.channels)), c3(static_cast<size_t>(s.channels));
      for (int64_t n = 0; n < s.batch; ++n) {
        for (int64_t g = 0; g < groups; ++g) {
          const double m = up(mean[n * groups + g]), r = up(rstd[n * groups + g]);
          double dsw = 0, dbw = 0;
          for (int64_t k = 0; k < per_group; ++k) {
            const int64_t c = g * per_group + k;
            dsw += ds[n * s.channels + c] * value_or(w, c, 1.0);
            dbw += db[n * s.channels + c] * value_or(w, c, 1.0);
          }
          const double group_c2 = (dbw * m - dsw) * r * r * r * inv_span;
          for (int64_t k = 0; k < per_group; ++k) {
            const int64_t c = g * per_group + k;
            scale[c] = static_cast<A>(r * value_or(w, c, 1.0));
            c2[c] = group_c2;
            c3[c] = -group_c2 * m - dbw * r * inv_span;
          }
        }
        const int64_t at = n * s.inner * s.channels;
        for_each_row_element(s.inner, s.channels, [&](int64_t i, int64_t c) {
          gx[at + i] = down<T>(static_cast<A>(scale[c] * up(go[at + i]) + c2[c] * up(x[at + i]) + c3[c]));
        });
      }
    } else if (grad_x != nullptr) {
      T* gx = static_cast<T*>(grad_x);
      parallel_for(s.batch * groups, 1, [&](int64_t begin, int64_t end) {
        for (int64_t ng = begin; ng < end; ++ng) {
          const int64_t n = ng / groups, first_channel = (ng % groups) * per_group;
          const double m = up(mean[ng]), r = up(rstd[ng]);
          double dsw = 0, dbw = 0;
          for (int64_t k = 0; k < per_group; ++k) {
            const int64_t c = first_channel + k;
            dsw += ds[n * s.channels + c] * value_or(w, c, 1.0);
            dbw += db[n * s.channels + c] * value_or(w, c, 1.0);
          }
          // dx = r * w * g + c2 * x + c3, from differentiating (x - mean) * rstd.
          const double c2 = (dbw * m - dsw) * r * r * r * inv_span;
          const double c3 = -c2 * m - dbw * r * inv_span;
          for (int64_t k = 0; k < per_group; ++k) {
            const int64_t c = first_channel + k;
            const A scale = static_cast<A>(r * value_or(w, c, 1.0));
            const int64_t at = (n * s.channels + c) * s.inner;
            for (int64_t i = 0; i < s.inner; ++i) {
              gx[at + i] = down<T>(static_cast<A>(scale * up(go[at + i]) + c2 * up(x[at + i]) + c3));
            }
          }
        }
      });
    }
    if (grad_weight == nullptr && grad_bias == nullptr) return;
    for (int64_t c = 0; c < s.channels; ++c) {
      double gw = 0, gb = 0;
      for (int64_t n = 0; n < s.batch; ++n) {
        const int64_t ng = n * groups + c / per_group;
        gw += (ds[n * s.channels + c] - db[n * s.channels + c] * up(mean[ng])) * up(rstd[ng]);
        gb += db[n * s.channels + c];
      }
      if (grad_weight != nullptr) static_cast<T*>(grad_weight)[c] = down<T>(static_cast<A>(gw));
      if (grad_bias != nullptr) static_cast<T*>(grad_bias)[c] = down<T>(static_cast<A>(gb));
    }
  });
}

}  // namespace torchneuron::kernels
