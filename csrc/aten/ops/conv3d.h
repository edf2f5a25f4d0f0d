// 3-D convolutions (conv3d_ops.cpp) for conv_ops.cpp's convolution_overrideable: float32 or
// float64 operands of one dtype; results in `format`.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <tuple>

namespace torchneuron::aten::conv3d {

at::Tensor convolution_3d(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias, c10::IntArrayRef stride,
                          c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups, c10::MemoryFormat format);

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_3d(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups, std::array<bool, 3> output_mask,
    c10::MemoryFormat format);

at::Tensor convolution_transpose_3d(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                                    c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                    c10::IntArrayRef output_padding, int64_t groups, c10::MemoryFormat format);

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_transpose_backward_3d(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, c10::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask, c10::MemoryFormat format);

}  // namespace torchneuron::aten::conv3d
