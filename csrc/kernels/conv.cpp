#include "kernels/conv.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/gemm.h"

namespace torchneuron::kernels {
namespace {

// columns[(c * kh + i) * kw + j][y * out_w + x] = input[c][y*sh - ph + i*dh][x*sw - pw + j*dw]
void im2col(const Conv2dShape& s, const float* image, int64_t channels, float* columns) {
  const int64_t oh = s.out_h(), ow = s.out_w();
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t i = 0; i < s.kernel_h; ++i) {
      for (int64_t j = 0; j < s.kernel_w; ++j) {
        float* row = columns + ((c * s.kernel_h + i) * s.kernel_w + j) * oh * ow;
        for (int64_t y = 0; y < oh; ++y) {
          const int64_t in_y = y * s.stride_h - s.pad_h + i * s.dilation_h;
          for (int64_t x = 0; x < ow; ++x) {
            const int64_t in_x = x * s.stride_w - s.pad_w + j * s.dilation_w;
            const bool inside = in_y >= 0 && in_y < s.height && in_x >= 0 && in_x < s.width;
            row[y * ow + x] = inside ? image[(c * s.height + in_y) * s.width + in_x] : 0.0f;
          }
        }
      }
    }
  }
}

// The adjoint of im2col: accumulates columns back into an image (zeroed by the caller).
void col2im(const Conv2dShape& s, const float* columns, int64_t channels, float* image) {
  const int64_t oh = s.out_h(), ow = s.out_w();
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t i = 0; i < s.kernel_h; ++i) {
      for (int64_t j = 0; j < s.kernel_w; ++j) {
        const float* row = columns + ((c * s.kernel_h + i) * s.kernel_w + j) * oh * ow;
        for (int64_t y = 0; y < oh; ++y) {
          const int64_t in_y = y * s.stride_h - s.pad_h + i * s.dilation_h;
          if (in_y < 0 || in_y >= s.height) continue;
          for (int64_t x = 0; x < ow; ++x) {
            const int64_t in_x = x * s.stride_w - s.pad_w + j * s.dilation_w;
            if (in_x >= 0 && in_x < s.width) image[(c * s.height + in_y) * s.width + in_x] += row[y * ow + x];
          }
        }
      }
    }
  }
}

}  // namespace

void conv2d_forward(const Conv2dShape& s, const float* input, const float* weight, const float* bias, float* out) {
  configure_blas_threads();
  const int64_t cin_g = s.in_channels / s.groups, cout_g = s.out_channels / s.groups;
  const int64_t spatial = s.out_h() * s.out_w();
  const int64_t patch = cin_g * s.kernel_h * s.kernel_w;
  std::vector<float> columns(static_cast<size_t>(patch * spatial));
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t g = 0; g < s.groups; ++g) {
      const float* image = input + (n * s.in_channels + g * cin_g) * s.height * s.width;
      im2col(s, image, cin_g, columns.data());
      float* dst = out + (n * s.out_channels + g * cout_g) * spatial;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cout_g, spatial, patch, 1.0f,
                  weight + g * cout_g * patch, patch, columns.data(), spatial, 0.0f, dst, spatial);
    }
    if (bias != nullptr) {
      for (int64_t c = 0; c < s.out_channels; ++c) {
        float* plane = out + (n * s.out_channels + c) * spatial;
        for (int64_t k = 0; k < spatial; ++k) plane[k] += bias[c];
      }
    }
  }
}

void conv2d_backward(const Conv2dShape& s, const float* grad_out, const float* input, const float* weight,
                     float* grad_input, float* grad_weight, float* grad_bias) {
  configure_blas_threads();
  const int64_t cin_g = s.in_channels / s.groups, cout_g = s.out_channels / s.groups;
  const int64_t spatial = s.out_h() * s.out_w();
  const int64_t patch = cin_g * s.kernel_h * s.kernel_w;
  std::vector<float> columns(static_cast<size_t>(patch * spatial));
  if (grad_input != nullptr) std::fill(grad_input, grad_input + s.batch * s.in_channels * s.height * s.width, 0.0f);
  if (grad_weight != nullptr) std::fill(grad_weight, grad_weight + s.out_channels * patch, 0.0f);
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t g = 0; g < s.groups; ++g) {
      const float* go = grad_out + (n * s.out_channels + g * cout_g) * spatial;
      if (grad_weight != nullptr) {
        im2col(s, input + (n * s.in_channels + g * cin_g) * s.height * s.width, cin_g, columns.data());
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, cout_g, patch, spatial, 1.0f, go, spatial,
                    columns.data(), spatial, 1.0f, grad_weight + g * cout_g * patch, patch);
      }
      if (grad_input != nullptr) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, patch, spatial, cout_g, 1.0f, weight + g * cout_g * patch,
                    patch, go, spatial, 0.0f, columns.data(), spatial);
        col2im(s, columns.data(), cin_g, grad_input + (n * s.in_channels + g * cin_g) * s.height * s.width);
      }
    }
  }
  if (grad_bias != nullptr) {
    for (int64_t c = 0; c < s.out_channels; ++c) {
      double sum = 0;
      for (int64_t n = 0; n < s.batch; ++n) {
        const float* plane = grad_out + (n * s.out_channels + c) * spatial;
        for (int64_t k = 0; k < spatial; ++k) sum += plane[k];
      }
      grad_bias[c] = static_cast<float>(sum);
    }
  }
}

}  // namespace torchneuron::kernels
