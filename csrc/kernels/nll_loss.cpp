#include "kernels/nn.h"

#include <algorithm>
#include <string>

#include "kernels/floating.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {

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

}  // namespace torchneuron::kernels
