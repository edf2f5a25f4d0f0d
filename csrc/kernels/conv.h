// 2-D convolution over contiguous float32 NCHW buffers by im2col + GEMM (kernels/tile_gemm.h): forward,
// and the input, weight and bias gradients. Groups, stride, padding and dilation supported. The
// forward of a 3x3, stride-1 convolution with 8 or more channels per group uses Winograd
// F(2x2, 3x3) instead (2.25 times fewer multiplies).
#pragma once

#include <cstdint>

namespace torchneuron::kernels {

struct Conv2dShape {
  int64_t batch, in_channels, height, width;
  int64_t out_channels, kernel_h, kernel_w;
  int64_t stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  int64_t groups;
  int64_t out_h() const { return (height + 2 * pad_h - dilation_h * (kernel_h - 1) - 1) / stride_h + 1; }
  int64_t out_w() const { return (width + 2 * pad_w - dilation_w * (kernel_w - 1) - 1) / stride_w + 1; }
};

// out = conv(input, weight) + bias (bias may be null).
void conv2d_forward(const Conv2dShape& s, const float* input, const float* weight, const float* bias, float* out);
// Any of grad_input, grad_weight, grad_bias may be null.
void conv2d_backward(const Conv2dShape& s, const float* grad_out, const float* input, const float* weight,
                     float* grad_input, float* grad_weight, float* grad_bias);

}  // namespace torchneuron::kernels
