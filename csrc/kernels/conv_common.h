// What the convolution translation units share (conv.cpp: im2col + GEMM; conv_winograd.cpp;
// conv_depthwise.cpp): job sizing constants and the entry points of the two special paths.
#pragma once

#include <cstdint>

#include "kernels/conv.h"

namespace torchneuron::kernels::conv_detail {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Jobs of about this many multiply-adds at least, and some per thread when there is work.
constexpr int64_t kMinJobWork = 1 << 18;
// Row blocks in multiples of the multiply's row tile where there is a choice.
constexpr int64_t kTileRows = 8;
// grad_weight sums this many products in float before adding them up in double.
constexpr int64_t kSumRun = 256;

// Winograd F(2x2, 3x3) (conv_winograd.cpp): whether it serves `s`'s forward, and that forward.
bool use_winograd(const Conv2dShape& s);
void conv2d_forward_winograd(const Conv2dShape& s, const float* input, const float* weight, const float* bias,
                             float* out);

// Depthwise convolutions (conv_depthwise.cpp): whether `s` is one, its forward, and its
// backward (grad_input may be null).
bool is_depthwise(const Conv2dShape& s);
void conv2d_forward_depthwise(const Conv2dShape& s, const float* input, const float* weight, const float* bias,
                              float* out);
void conv2d_backward_depthwise(const Conv2dShape& s, const float* grad_out, const float* input, const float* weight,
                               float* grad_input, float* grad_weight);

}  // namespace torchneuron::kernels::conv_detail
