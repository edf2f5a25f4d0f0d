// Memory-efficient scaled dot-product attention over [batch, heads, len, dim] device buffers
// whose rows are contiguous, each operand with its own batch, head and row strides (a
// [batch, len, heads, dim] projection viewed per head needs no copy). The forward walks key
// blocks with an online softmax and keeps only the row log-sum-exp; the backward recomputes
// each block's probabilities from it. Neither ever holds a [len, len] score matrix. Half types
// compute in float.
#pragma once

#include <cstdint>

#include "kernels/strided.h"

namespace torchneuron::kernels {

struct AttentionShape {
  int64_t batch = 1, heads = 1, q_len = 0, kv_len = 0, head_dim = 0, value_dim = 0;
};

// Element strides of one operand's batch, head and row dims; a row's elements are contiguous.
struct HeadStrides {
  int64_t batch = 0, head = 0, row = 0;
};

struct AttentionLayout {
  HeadStrides q, k, v, out;                      // forward and backward
  HeadStrides grad_out, grad_q, grad_k, grad_v;  // backward only
};

// An additive float bias broadcast to [batch, heads, q_len, kv_len] (element strides, 0 for
// broadcast dims), in the inputs' dtype; data null means none.
struct AttentionBias {
  const void* data = nullptr;
  int64_t stride_b = 0, stride_h = 0, stride_q = 0, stride_k = 0;
};

// out: [B, H, L, Ev] in the inputs' dtype; logsumexp: [B, H, L] float32 (or float64 for double
// inputs). Causal masking is top-left aligned (key j is visible to query i when j <= i).
void attention_forward(DType dtype, AttentionShape shape, const AttentionLayout& layout, const void* q, const void* k,
                       const void* v, AttentionBias bias, bool causal, double scale, void* out, void* logsumexp);

// Any of grad_q, grad_k, grad_v, grad_bias may be null; grad_bias is a full [B, H, L, S] buffer.
void attention_backward(DType dtype, AttentionShape shape, const AttentionLayout& layout, const void* grad_out,
                        const void* q, const void* k, const void* v, AttentionBias bias, bool causal, double scale,
                        const void* out, const void* logsumexp, void* grad_q, void* grad_k, void* grad_v,
                        void* grad_bias);

}  // namespace torchneuron::kernels
