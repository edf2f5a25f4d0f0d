#include "kernels/optim.h"

#include <algorithm>
#include <cmath>

#include "kernels/floating.h"
#include "kernels/parallel.h"

namespace torchneuron::kernels {
namespace {

// Elements per task: every parameter of a model splits into tasks of this size, and the tasks
// of all parameters share one parallel_for (a model's many small tensors kept one thread busy
// at a time when each tensor had its own).
constexpr int64_t kTaskElements = 8192;

// One parameter's constants for this step.
template <typename A>
struct AdamConstants {
  A step_size, bias_correction2_sqrt, lr, weight_decay, eps, beta2, avg_weight, sq_weight, scale, sign;
  bool lerp_from_start;
};

enum class Decay { kNone, kL2, kDecoupled };

// Elements [begin, end) of one parameter. The options are template arguments so that the loop
// has no branches and vectorizes.
template <typename T, bool kUnscale, Decay kDecay, bool kAmsgrad>
void adam_elements(const AdamConstants<Acc<T>>& k, const AdamTensors& t, int64_t begin, int64_t end) {
  using A = Acc<T>;
  T* __restrict param = static_cast<T*>(t.param);
  T* __restrict grad = static_cast<T*>(t.grad);
  T* __restrict exp_avg = static_cast<T*>(t.exp_avg);
  T* __restrict exp_avg_sq = static_cast<T*>(t.exp_avg_sq);
  T* __restrict max_sq = static_cast<T*>(t.max_exp_avg_sq);
  for (int64_t i = begin; i < end; ++i) {
    A g = up(grad[i]);
    if constexpr (kUnscale) {
      g /= k.scale;
      grad[i] = down<T>(g);
    }
    g = g * k.sign;  // maximize: an exact negation
    A p = up(param[i]);
    if constexpr (kDecay == Decay::kDecoupled) p -= k.lr * k.weight_decay * p;
    if constexpr (kDecay == Decay::kL2) g += p * k.weight_decay;
    A m = up(exp_avg[i]);
    m = k.lerp_from_start ? m + k.avg_weight * (g - m) : g - (g - m) * (A(1) - k.avg_weight);  // torch.lerp
    const A v = up(exp_avg_sq[i]) * k.beta2 + k.sq_weight * g * g;
    A denominator_sq = v;
    if constexpr (kAmsgrad) {
      const A stored = up(max_sq[i]);
      const A peak = stored < v ? v : stored;  // std::max(stored, v), which keeps `stored` when v is NaN
      max_sq[i] = down<T>(peak);
      denominator_sq = peak;
    }
    const A denominator = std::sqrt(denominator_sq) / k.bias_correction2_sqrt + k.eps;
    param[i] = down<T>(p - k.step_size * m / denominator);
    exp_avg[i] = down<T>(m);
    exp_avg_sq[i] = down<T>(v);
  }
}

template <typename T, bool kUnscale, Decay kDecay>
void adam_elements(bool amsgrad, const AdamConstants<Acc<T>>& k, const AdamTensors& t, int64_t begin, int64_t end) {
  if (amsgrad) {
    adam_elements<T, kUnscale, kDecay, true>(k, t, begin, end);
  } else {
    adam_elements<T, kUnscale, kDecay, false>(k, t, begin, end);
  }
}

template <typename T, bool kUnscale>
void adam_elements(Decay decay, bool amsgrad, const AdamConstants<Acc<T>>& k, const AdamTensors& t, int64_t begin,
                   int64_t end) {
  switch (decay) {
    case Decay::kNone: return adam_elements<T, kUnscale, Decay::kNone>(amsgrad, k, t, begin, end);
    case Decay::kL2: return adam_elements<T, kUnscale, Decay::kL2>(amsgrad, k, t, begin, end);
    case Decay::kDecoupled: return adam_elements<T, kUnscale, Decay::kDecoupled>(amsgrad, k, t, begin, end);
  }
}

struct Task {
  size_t tensor;
  int64_t begin, end;
};

}  // namespace

void fused_adam(DType dtype, const AdamConfig& c, const std::vector<AdamTensors>& tensors, const float* grad_scale,
                const float* found_inf) {
  if (found_inf != nullptr && *found_inf == 1.0f) return;
  dispatch_floating(dtype, "fused Adam", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    std::vector<AdamConstants<A>> constants;
    std::vector<Task> tasks;
    constants.reserve(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      const AdamTensors& t = tensors[i];
      const double step = static_cast<double>(*t.step);
      AdamConstants<A> k;
      k.step_size = static_cast<A>(c.lr / (1.0 - std::pow(c.beta1, step)));
      k.bias_correction2_sqrt = static_cast<A>(std::sqrt(1.0 - std::pow(c.beta2, step)));
      k.lr = static_cast<A>(c.lr);
      k.weight_decay = static_cast<A>(c.weight_decay);
      k.eps = static_cast<A>(c.eps);
      k.beta2 = static_cast<A>(c.beta2);
      k.avg_weight = static_cast<A>(1.0 - c.beta1);
      k.sq_weight = static_cast<A>(1.0 - c.beta2);
      k.scale = grad_scale != nullptr ? static_cast<A>(*grad_scale) : A(1);
      k.sign = c.maximize ? A(-1) : A(1);
      k.lerp_from_start = k.avg_weight < A(0.5);
      constants.push_back(k);
      for (int64_t begin = 0; begin < t.numel; begin += kTaskElements) {
        tasks.push_back({i, begin, std::min(t.numel, begin + kTaskElements)});
      }
    }
    const Decay decay = c.weight_decay == 0 ? Decay::kNone : c.decoupled_weight_decay ? Decay::kDecoupled : Decay::kL2;
    parallel_for(static_cast<int64_t>(tasks.size()), 1, [&](int64_t first, int64_t last) {
      for (int64_t n = first; n < last; ++n) {
        const Task& task = tasks[static_cast<size_t>(n)];
        const AdamConstants<A>& k = constants[task.tensor];
        if (grad_scale != nullptr) {
          adam_elements<T, true>(decay, c.amsgrad, k, tensors[task.tensor], task.begin, task.end);
        } else {
          adam_elements<T, false>(decay, c.amsgrad, k, tensors[task.tensor], task.begin, task.end);
        }
      }
    });
  });
}

}  // namespace torchneuron::kernels
