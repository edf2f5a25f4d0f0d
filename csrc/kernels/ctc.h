// Connectionist temporal classification loss (Graves et al., 2006) in log space, forward and
// backward, for float and double log-probabilities laid out [time, batch, classes] contiguous.
#pragma once

#include <cstdint>

#include "kernels/strided.h"

namespace torchneuron::kernels {

struct CtcShape {
  int64_t max_time = 0, batch = 0, classes = 0;
  int64_t max_target = 0;  // the longest target: log_alpha is [batch, max_time, 2 * max_target + 1]
  int64_t blank = 0;
};

// targets: int64; sample b's labels start at target_offsets[b] (a stride of 1 between labels).
// input_lengths / target_lengths: per sample, checked by the caller. A label outside
// [0, classes) raises KernelError.
// nll [batch]: -log p(target | input), inf where no alignment exists. log_alpha: the forward
// variables (-inf outside each sample's lattice), the op's second output. Both directions
// compute in double.
void ctc_loss(DType dtype, const CtcShape& shape, const void* log_probs, const int64_t* targets,
              const int64_t* target_offsets, const int64_t* input_lengths, const int64_t* target_lengths, void* nll,
              void* log_alpha);

// grad [max_time, batch, classes]: CPU PyTorch's gradient, (exp(lp) - exp(log(sum over the
// lattice's paths through (t, c)) + nll - lp)) * grad_out[b] (that of the logits under a log
// softmax, as cuDNN defines it), 0 for t past a sample's length, and 0 for the whole sample when
// zero_infinity and its nll is infinite. The forward variables are recomputed in double.
void ctc_loss_backward(DType dtype, const CtcShape& shape, const void* grad_out, int64_t grad_out_stride,
                       const void* log_probs, const int64_t* targets, const int64_t* target_offsets,
                       const int64_t* input_lengths, const int64_t* target_lengths, const void* nll,
                       bool zero_infinity, void* grad);

}  // namespace torchneuron::kernels
