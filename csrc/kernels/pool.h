// Pooling over contiguous [planes, (depth,) height, width] device buffers (planes = batch *
// channels), forward and backward. Output sizes are computed by the caller.
#pragma once

#include <cstdint>

#include "kernels/strided.h"

namespace torchneuron::kernels {

// Adaptive pooling's planes.
struct PlaneShape {
  int64_t planes = 1, in_h = 1, in_w = 1, out_h = 1, out_w = 1;
};

// Windowed pooling: 3-D, with depth 1 (and a window of depth 1) for the 2-D ops.
struct PoolShape {
  int64_t planes = 1, in_d = 1, in_h = 1, in_w = 1, out_d = 1, out_h = 1, out_w = 1;
};

struct PoolWindow {
  int64_t kernel_d = 1, kernel_h = 1, kernel_w = 1, stride_d = 1, stride_h = 1, stride_w = 1;
  int64_t pad_d = 0, pad_h = 0, pad_w = 0, dilation_d = 1, dilation_h = 1, dilation_w = 1;
};

// indices: int64, the flat (d * in_h + h) * in_w + w position of each maximum in its plane: the
// first of equal maxima, the last NaN of a window (CPU PyTorch's picks).
void max_pool(DType dtype, PoolShape shape, PoolWindow window, const void* in, void* out, int64_t* indices);
// grad_in (zeroed here) gets grad_out summed at the recorded indices.
void max_pool_backward(DType dtype, PoolShape shape, const void* grad_out, const int64_t* indices, void* grad_in);

// divisor_override == 0 means none (ATen rejects a zero divisor).
void avg_pool(DType dtype, PoolShape shape, PoolWindow window, bool count_include_pad, int64_t divisor_override,
              const void* in, void* out);
void avg_pool_backward(DType dtype, PoolShape shape, PoolWindow window, bool count_include_pad, int64_t divisor_override,
                       const void* grad_out, void* grad_in);

// Output cell o covers input [floor(o * in / out), ceil((o + 1) * in / out)).
void adaptive_avg_pool2d(DType dtype, PlaneShape shape, const void* in, void* out);
void adaptive_avg_pool2d_backward(DType dtype, PlaneShape shape, const void* grad_out, void* grad_in);
// The same cells' maxima and their flat positions (as max_pool's indices; max_pool_backward is
// its backward): the first of equal maxima, the last NaN of a cell (CPU PyTorch's picks).
void adaptive_max_pool2d(DType dtype, PlaneShape shape, const void* in, void* out, int64_t* indices);

}  // namespace torchneuron::kernels
