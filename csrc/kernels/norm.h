// Batch norm and group norm over contiguous [N, C, inner] device buffers, forward and
// backward. Statistics are kept in the input's dtype and accumulated in double.
#pragma once

#include <cstdint>

#include "kernels/strided.h"

namespace torchneuron::kernels {

struct BatchNormShape {
  int64_t batch = 1, channels = 1, inner = 1;  // x viewed as [batch, channels, inner]
  // x is channels-last: [batch, inner, channels] in memory.
  bool channels_last = false;
};

// Training: save_mean / save_invstd get the batch statistics (biased variance) and running
// stats, when given, move by `momentum` (unbiased variance). Eval: normalizes with the running
// stats and leaves save_mean / save_invstd untouched (they may be null). Weight, bias and the
// running stats may be null.
void batch_norm(DType dtype, BatchNormShape shape, const void* x, const void* weight, const void* bias,
                void* running_mean, void* running_var, bool training, double momentum, double eps, void* out,
                void* save_mean, void* save_invstd);

// Training uses save_mean / save_invstd, eval the running stats. Any of grad_x, grad_weight,
// grad_bias may be null.
void batch_norm_backward(DType dtype, BatchNormShape shape, const void* grad_out, const void* x,
                         const void* weight, const void* running_mean, const void* running_var,
                         const void* save_mean, const void* save_invstd, bool training, double eps,
                         void* grad_x, void* grad_weight, void* grad_bias);

// x: [batch, channels, inner] in `groups` groups of channels; mean / rstd: [batch, groups].
void group_norm(DType dtype, BatchNormShape shape, int64_t groups, double eps, const void* x, const void* weight,
                const void* bias, void* out, void* mean, void* rstd);
void group_norm_backward(DType dtype, BatchNormShape shape, int64_t groups, const void* grad_out, const void* x,
                         const void* mean, const void* rstd, const void* weight, void* grad_x, void* grad_weight,
                         void* grad_bias);

}  // namespace torchneuron::kernels
