// grid_sample over 2-D images: bilinear and nearest interpolation with zeros, border and
// reflection padding, either align_corners, and the input and grid gradients. Contiguous NCHW
// input, [N, H_out, W_out, 2] grid (x, y in [-1, 1]) and NCHW output, of one floating dtype;
// half types compute in float.
#pragma once

#include <cstdint>

#include "kernels/strided.h"

namespace torchneuron::kernels {

struct GridSampleShape {
  int64_t batch = 0, channels = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
};
enum class GridInterpolation : int64_t { kBilinear = 0, kNearest = 1 };  // ATen's codes (2: bicubic)
enum class GridPadding : int64_t { kZeros = 0, kBorder = 1, kReflection = 2 };

void grid_sample_2d(DType dtype, const GridSampleShape& shape, GridInterpolation interpolation, GridPadding padding,
                    bool align_corners, const void* input, const void* grid, void* out);
// Either gradient may be null when not wanted. Deterministic: each task owns whole input planes.
void grid_sample_2d_backward(DType dtype, const GridSampleShape& shape, GridInterpolation interpolation,
                             GridPadding padding, bool align_corners, const void* grad_out, const void* input,
                             const void* grid, void* grad_input, void* grad_grid);

}  // namespace torchneuron::kernels
