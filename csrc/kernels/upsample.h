// Upsampling over contiguous [planes, (depth,) (height,) width] buffers with 1 to 3 spatial
// dimensions (planes = batch * channels), forward and backward. Each axis maps its output
// coordinates to input taps as CPU PyTorch's upsample_* operators do; an output element is the
// weighted sum over the taps of all axes, the last axis innermost.
#pragma once

#include <cstdint>

#include "kernels/strided.h"

namespace torchneuron::kernels {

enum class Interpolation : uint8_t {
  kNearest,       // floor(o * scale)
  kNearestExact,  // floor((o + 0.5) * scale)
  kLinear,        // two taps per axis
  kCubic,         // four taps per axis, Keys' kernel with a = -0.75, edges clamped
  // antialias=True (2-D only): triangle and a = -0.5 cubic filters, widened by the scale when
  // downsampling and normalized; width then height, as CPU PyTorch resamples.
  kLinearAntialias,
  kCubicAntialias,
};

struct UpsampleShape {
  int64_t planes = 1;
  int dims = 2;  // spatial dimensions, 1 to 3
  int64_t in[3] = {1, 1, 1};
  int64_t out[3] = {1, 1, 1};
  double scale[3] = {0, 0, 0};  // the user's scale factors, or <= 0 where the sizes define them
};

// Nearest modes copy elements of any dtype; the others need a floating dtype.
void upsample(DType dtype, Interpolation mode, bool align_corners, const UpsampleShape& shape, const void* in,
              void* out);
// grad_in is written whole (floating dtypes; half types accumulate in float).
void upsample_backward(DType dtype, Interpolation mode, bool align_corners, const UpsampleShape& shape,
                       const void* grad_out, void* grad_in);

}  // namespace torchneuron::kernels
