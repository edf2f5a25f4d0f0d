// Fused optimizer steps over lists of contiguous device buffers: Adam and AdamW (amsgrad,
// maximize, gradient unscaling and skip-on-inf for mixed precision), one pass per element.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/strided.h"

namespace torchneuron::kernels {

struct AdamConfig {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, weight_decay = 0.0, eps = 1e-8;
  bool amsgrad = false, maximize = false;
  bool decoupled_weight_decay = false;  // AdamW
};

// One parameter: `numel` elements of the list's dtype; max_exp_avg_sq is used with amsgrad only.
// step is the parameter's float32 step count, already incremented for this step.
struct AdamTensors {
  void* param = nullptr;
  void* grad = nullptr;
  void* exp_avg = nullptr;
  void* exp_avg_sq = nullptr;
  void* max_exp_avg_sq = nullptr;
  const float* step = nullptr;
  int64_t numel = 0;
};

// grad_scale (may be null): gradients are divided by it, and written back unscaled. found_inf
// (may be null): when it holds 1, nothing is updated.
void fused_adam(DType dtype, const AdamConfig& config, const std::vector<AdamTensors>& tensors, const float* grad_scale,
                const float* found_inf);

}  // namespace torchneuron::kernels
