#include "kernels/optim.h"

#include <algorithm>
#include <cmath>

#include "kernels/floating.h"
#include "kernels/parallel.h"

namespace torchneuron::kernels {

void fused_adam(DType dtype, const AdamConfig& c, const std::vector<AdamTensors>& tensors, const float* grad_scale,
                const float* found_inf) {
  if (found_inf != nullptr && *found_inf == 1.0f) return;
  dispatch_floating(dtype, "fused Adam", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    for (const AdamTensors& t : tensors) {
      const double step = static_cast<double>(*t.step);
      const A step_size = static_cast<A>(c.lr / (1.0 - std::pow(c.beta1, step)));
      const A bias_correction2_sqrt = static_cast<A>(std::sqrt(1.0 - std::pow(c.beta2, step)));
      const A lr = static_cast<A>(c.lr), weight_decay = static_cast<A>(c.weight_decay), eps = static_cast<A>(c.eps);
      const A beta2 = static_cast<A>(c.beta2), avg_weight = static_cast<A>(1.0 - c.beta1);
      const A sq_weight = static_cast<A>(1.0 - c.beta2);
      const A scale = grad_scale != nullptr ? static_cast<A>(*grad_scale) : A(1);
      T* param = static_cast<T*>(t.param);
      T* grad = static_cast<T*>(t.grad);
      T* exp_avg = static_cast<T*>(t.exp_avg);
      T* exp_avg_sq = static_cast<T*>(t.exp_avg_sq);
      T* max_sq = static_cast<T*>(t.max_exp_avg_sq);
      parallel_for(t.numel, 16384, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          A g = up(grad[i]);
          if (grad_scale != nullptr) {
            g /= scale;
            grad[i] = down<T>(g);
          }
          if (c.maximize) g = -g;
          A p = up(param[i]);
          if (c.weight_decay != 0) {
            if (c.decoupled_weight_decay) {
              p -= lr * weight_decay * p;
            } else {
              g += p * weight_decay;
            }
          }
          A m = up(exp_avg[i]);
          m = avg_weight < A(0.5) ? m + avg_weight * (g - m) : g - (g - m) * (A(1) - avg_weight);  // torch.lerp
          A v = up(exp_avg_sq[i]) * beta2 + sq_weight * g * g;
          A denominator_sq = v;
          if (c.amsgrad) {
            const A peak = std::max(up(max_sq[i]), v);
            max_sq[i] = down<T>(peak);
            denominator_sq = peak;
          }
          const A denominator = std::sqrt(denominator_sq) / bias_correction2_sqrt + eps;
          param[i] = down<T>(p - step_size * m / denominator);
          exp_avg[i] = down<T>(m);
          exp_avg_sq[i] = down<T>(v);
        }
      });
    }
  });
}

}  // namespace torchneuron::kernels
