// Sliding-window data movement over contiguous buffers: im2col and col2im (nn.Unfold and
// nn.Fold, each the other's backward) and the backward of Tensor.unfold.
#pragma once

#include <cstdint>

#include "kernels/strided.h"

namespace torchneuron::kernels {

struct PatchShape {
  int64_t batch = 1, channels = 1, height = 1, width = 1;  // the image
  int64_t kernel_h = 1, kernel_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1;
  int64_t blocks_h() const { return (height + 2 * pad_h - dilation_h * (kernel_h - 1) - 1) / stride_h + 1; }
  int64_t blocks_w() const { return (width + 2 * pad_w - dilation_w * (kernel_w - 1) - 1) / stride_w + 1; }
};

// image [batch, channels, height, width] -> columns [batch, channels * kernel_h * kernel_w,
// blocks_h * blocks_w], zeros where a window reads padding. Any dtype (a copy).
void im2col(DType dtype, const PatchShape& shape, const void* image, void* columns);
// The adjoint: each image element is the sum of the column entries that copied it (floating
// dtypes; half types sum in float).
void col2im(DType dtype, const PatchShape& shape, const void* columns, void* image);

// grad_in: [outer, windows, inner, size], window w's element j coming from position
// w * step + j of a dimension of `length`; grad [outer, length, inner] gets their sums.
struct UnfoldShape {
  int64_t outer = 1, length = 1, inner = 1, windows = 1, size = 1, step = 1;
};
void unfold_backward(DType dtype, const UnfoldShape& shape, const void* grad_in, void* grad);

}  // namespace torchneuron::kernels
