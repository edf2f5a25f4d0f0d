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

// Reductions as CPU PyTorch computes them, so that float16 and bfloat16 losses round alike: in
// the storage type (every product and sum rounded to it), by a cascade of 8 partial sums where
// level j + 1 takes level j's sum after each run of 2^(4 (j + 1)) elements, ignored ones counted.
void nll_loss(DType dtype, int64_t batch, int64_t classes, int64_t spatial, const void* log_probs, const int64_t* target,
              const void* weight, Reduction reduction, int64_t ignore_index, void* out, void* total_weight) {
  dispatch_floating(dtype, "this kernel", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const auto round = [](A value) { return up(down<T>(value)); };  // to T's precision, held as A
    const T* lp = static_cast<const T*>(log_probs);
    const T* w = static_cast<const T*>(weight);
    T* o = static_cast<T*>(out);
    constexpr int kLevels = 8;
    constexpr int64_t kLevelPower = 4;  // CPU's max(4, ceil(log2 n) / 8): 4 below 2^32 elements
    constexpr int64_t kLevelMask = (int64_t{1} << kLevelPower) - 1;
    A loss_sums[kLevels] = {}, weight_sums[kLevels] = {};
    int64_t ignored = 0;
    for (int64_t i = 0; i < batch * spatial; ++i) {
      const int64_t t = target[i];
      check_target(t, classes, ignore_index);
      const int64_t n = i / spatial, s = i - n * spatial;
      if (reduction == Reduction::kNone) {
        const A wt = t == ignore_index ? A(0) : (w != nullptr ? up(w[t]) : A(1));
        o[i] = t == ignore_index ? down<T>(A(0)) : down<T>(-up(lp[(n * classes + t) * spatial + s]) * wt);
        continue;
      }
      if (t == ignore_index) {
        ++ignored;
        continue;
      }
      const A data = up(lp[(n * classes + t) * spatial + s]);
      if (w != nullptr) {
        loss_sums[0] = round(loss_sums[0] - round(data * up(w[t])));
        weight_sums[0] = round(weight_sums[0] + up(w[t]));
      } else {
        loss_sums[0] = round(loss_sums[0] - data);
      }
      for (int j = 0; j + 1 < kLevels; ++j) {
        if ((i & (kLevelMask << (j * kLevelPower))) != 0) break;
        weight_sums[j + 1] = round(weight_sums[j + 1] + weight_sums[j]);
        loss_sums[j + 1] = round(loss_sums[j + 1] + loss_sums[j]);
        weight_sums[j] = loss_sums[j] = A(0);
      }
    }
    if (reduction == Reduction::kNone) {
      *static_cast<T*>(total_weight) = down<T>(A(0));
      return;
    }
    A total = w != nullptr ? A(0) : round(static_cast<A>(batch * spatial - ignored)), sum = 0;
    for (int j = 0; j < kLevels; ++j) {
      if (w != nullptr) total = round(total + weight_sums[j]);
      sum = round(sum + loss_sums[j]);
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
