#include "kernels/ctc.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/parallel.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {
namespace {

template <typename T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// log(exp(a) + exp(b) + exp(c)), -inf when all three are: the largest term factored out, and
// no exp for terms that are -inf (most cells have one or two).
inline double log_sum3(double a, double b, double c) {
  const double m = std::max(a, std::max(b, c));
  if (m == kNegInf<double>) return m;
  double rest = 0.0;  // the other two terms' exp(x - m)
  bool skipped_max = false;
  for (const double x : {a, b, c}) {
    if (x == m && !skipped_max) {
      skipped_max = true;
    } else if (x != kNegInf<double>) {
      rest += std::exp(x - m);
    }
  }
  return rest == 0.0 ? m : std::log1p(rest) + m;
}

// Sample b's extended target: blanks between and around its labels.
struct Lattice {
  const int64_t* labels;
  int64_t length;  // 2 * labels + 1
  int64_t blank;
  int64_t at(int64_t s) const { return s % 2 == 0 ? blank : labels[s / 2]; }
  // Whether position s may be reached from s - 2, skipping the blank between two labels.
  bool skips(int64_t s) const { return s > 1 && at(s) != blank && at(s - 2) != at(s); }
};

Lattice lattice(const CtcShape& s, const int64_t* targets, const int64_t* offsets, const int64_t* target_lengths,
                int64_t b) {
  return Lattice{targets + offsets[b], 2 * target_lengths[b] + 1, s.blank};
}

// Before any sample runs, so that the error names the first bad label whatever the threads do.
void check_labels(const CtcShape& s, const int64_t* targets, const int64_t* offsets, const int64_t* target_lengths) {
  for (int64_t b = 0; b < s.batch; ++b) {
    const int64_t* labels = targets + offsets[b];
    for (int64_t i = 0; i < target_lengths[b]; ++i) {
      if (labels[i] < 0 || labels[i] >= s.classes) {
        throw runtime::KernelError("ctc_loss: target label " + std::to_string(labels[i]) + " of sample " + std::to_string(b) +
                                   " is out of range [0, " + std::to_string(s.classes) + ")");
      }
    }
  }
}

// The forward variables of one sample in double: alpha[t * length + i], -inf where unreachable.
template <typename Prob>
void forward_variables(const Lattice& l, int64_t time, int64_t blank, Prob prob, std::vector<double>& alpha) {
  alpha.assign(static_cast<size_t>(time * l.length), kNegInf<double>);
  alpha[0] = prob(0, blank);
  if (l.length > 1) alpha[1] = prob(0, l.at(1));
  for (int64_t t = 1; t < time; ++t) {
    const double* prev = alpha.data() + (t - 1) * l.length;
    double* row = alpha.data() + t * l.length;
    for (int64_t i = 0; i < l.length; ++i) {
      const double from_prev = i > 0 ? prev[i - 1] : kNegInf<double>;
      const double from_skip = l.skips(i) ? prev[i - 2] : kNegInf<double>;
      row[i] = log_sum3(prev[i], from_prev, from_skip) + prob(t, l.at(i));
    }
  }
}

// Both directions compute in double whatever the dtype, and the backward recomputes the forward
// variables rather than read the stored log_alpha: the gradient subtracts two exponentials of
// sums over the lattice, and in float, or from float forward variables, it came out further from
// the exact value than CPU PyTorch's at some elements of an OpInfo sample (CPU's largest error
// there is 7.6e-5).
template <typename T>
void forward_typed(const CtcShape& s, const T* lp, const int64_t* targets, const int64_t* offsets,
                   const int64_t* input_lengths, const int64_t* target_lengths, T* nll, T* log_alpha) {
  check_labels(s, targets, offsets, target_lengths);
  const int64_t width = 2 * s.max_target + 1;
  parallel_for(s.batch, 1, [&](int64_t begin, int64_t end) {
    std::vector<double> alpha;
    for (int64_t b = begin; b < end; ++b) {
      const Lattice l = lattice(s, targets, offsets, target_lengths, b);
      T* stored = log_alpha + b * s.max_time * width;
      std::fill(stored, stored + s.max_time * width, kNegInf<T>);
      const int64_t time = input_lengths[b];
      if (time == 0) {
        nll[b] = l.length == 1 ? T(0) : std::numeric_limits<T>::infinity();
        continue;
      }
      auto prob = [&](int64_t t, int64_t c) { return static_cast<double>(lp[(t * s.batch + b) * s.classes + c]); };
      forward_variables(l, time, s.blank, prob, alpha);
      for (int64_t t = 0; t < time; ++t) {
        for (int64_t i = 0; i < l.length; ++i) stored[t * width + i] = static_cast<T>(alpha[t * l.length + i]);
      }
      const double* last = alpha.data() + (time - 1) * l.length;
      nll[b] = static_cast<T>(-log_sum3(last[l.length - 1], l.length > 1 ? last[l.length - 2] : kNegInf<double>,
                                        kNegInf<double>));
    }
  });
}

template <typename T>
void backward_typed(const CtcShape& s, const T* grad_out, int64_t grad_out_stride, const T* lp, const int64_t* targets,
                    const int64_t* offsets, const int64_t* input_lengths, const int64_t* target_lengths, const T* nll,
                    bool zero_infinity, T* grad) {
  check_labels(s, targets, offsets, target_lengths);
  parallel_for(s.batch, 1, [&](int64_t begin, int64_t end) {
    std::vector<double> log_alpha_b, log_beta, paths(static_cast<size_t>(s.classes));
    for (int64_t b = begin; b < end; ++b) {
      auto g = [&](int64_t t) { return grad + (t * s.batch + b) * s.classes; };
      auto prob = [&](int64_t t, int64_t c) { return static_cast<double>(lp[(t * s.batch + b) * s.classes + c]); };
      const int64_t time = input_lengths[b];
      const double loss = static_cast<double>(nll[b]);
      if (zero_infinity && loss == std::numeric_limits<double>::infinity()) {
        for (int64_t t = 0; t < s.max_time; ++t) std::fill(g(t), g(t) + s.classes, T(0));
        continue;
      }
      const Lattice l = lattice(s, targets, offsets, target_lengths, b);
      if (time > 0) forward_variables(l, time, s.blank, prob, log_alpha_b);
      log_beta.assign(static_cast<size_t>(std::max<int64_t>(time, 1) * l.length), kNegInf<double>);
      if (time > 0) {
        double* last = log_beta.data() + (time - 1) * l.length;
        last[l.length - 1] = prob(time - 1, s.blank);
        if (l.length > 1) last[l.length - 2] = prob(time - 1, l.at(l.length - 2));
      }
      for (int64_t t = time - 2; t >= 0; --t) {
        const double* next = log_beta.data() + (t + 1) * l.length;
        double* row = log_beta.data() + t * l.length;
        for (int64_t i = 0; i < l.length; ++i) {
          const double to_next = i + 1 < l.length ? next[i + 1] : kNegInf<double>;
          const double to_skip = i + 2 < l.length && l.skips(i + 2) ? next[i + 2] : kNegInf<double>;
          row[i] = log_sum3(next[i], to_next, to_skip) + prob(t, l.at(i));
        }
      }
      const double scale = static_cast<double>(grad_out[b * grad_out_stride]);
      for (int64_t t = 0; t < s.max_time; ++t) {
        T* out = g(t);
        if (t >= time) {
          std::fill(out, out + s.classes, T(0));
          continue;
        }
        // paths[c]: log of the summed probability of the alignments through class c at t.
        std::fill(paths.begin(), paths.end(), kNegInf<double>);
        const double* alpha = log_alpha_b.data() + t * l.length;
        const double* beta = log_beta.data() + t * l.length;
        for (int64_t i = 0; i < l.length; ++i) {
          double& p = paths[l.at(i)];
          const double through = alpha[i] + beta[i];
          p = p == kNegInf<double> ? through : log_sum3(p, through, kNegInf<double>);
        }
        for (int64_t c = 0; c < s.classes; ++c) {
          const double lpc = prob(t, c);
          out[c] = static_cast<T>((std::exp(lpc) - std::exp(paths[c] + loss - lpc)) * scale);
        }
      }
    }
  });
}

}  // namespace

void ctc_loss(DType dtype, const CtcShape& shape, const void* log_probs, const int64_t* targets,
              const int64_t* target_offsets, const int64_t* input_lengths, const int64_t* target_lengths, void* nll,
              void* log_alpha) {
  if (dtype == DType::kFloat32) {
    forward_typed(shape, static_cast<const float*>(log_probs), targets, target_offsets, input_lengths, target_lengths,
                  static_cast<float*>(nll), static_cast<float*>(log_alpha));
  } else if (dtype == DType::kFloat64) {
    forward_typed(shape, static_cast<const double*>(log_probs), targets, target_offsets, input_lengths, target_lengths,
                  static_cast<double*>(nll), static_cast<double*>(log_alpha));
  } else {
    throw runtime::KernelError(std::string("ctc_loss: float32 or float64 log_probs, got ") + dtype_name(dtype));
  }
}

void ctc_loss_backward(DType dtype, const CtcShape& shape, const void* grad_out, int64_t grad_out_stride,
                       const void* log_probs, const int64_t* targets, const int64_t* target_offsets,
                       const int64_t* input_lengths, const int64_t* target_lengths, const void* nll,
                       bool zero_infinity, void* grad) {
  if (dtype == DType::kFloat32) {
    backward_typed(shape, static_cast<const float*>(grad_out), grad_out_stride, static_cast<const float*>(log_probs),
                   targets, target_offsets, input_lengths, target_lengths, static_cast<const float*>(nll), zero_infinity, static_cast<float*>(grad));
  } else if (dtype == DType::kFloat64) {
    backward_typed(shape, static_cast<const double*>(grad_out), grad_out_stride, static_cast<const double*>(log_probs),
                   targets, target_offsets, input_lengths, target_lengths, static_cast<const double*>(nll), zero_infinity, static_cast<double*>(grad));
  } else {
    throw runtime::KernelError(std::string("ctc_loss_backward: float32 or float64 log_probs, got ") + dtype_name(dtype));
  }
}

}  // namespace torchneuron::kernels
