#include "kernels/conv.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/conv_common.h"
#include "kernels/parallel.h"
#include "kernels/tile_gemm.h"

namespace torchneuron::kernels {
namespace {

using namespace conv_detail;

// Output columns [x_begin, x_end) whose input column x * stride - pad + j * dilation is inside
// the image (x_begin <= x_end).
struct ColumnRange {
  int64_t offset, x_begin, x_end;
};
inline ColumnRange column_range(const Conv2dShape& s, int64_t j) {
  const int64_t offset = j * s.dilation_w - s.pad_w;  // input column of output column 0
  const int64_t ow = s.out_w();
  const int64_t begin = std::min(ow, offset >= 0 ? int64_t{0} : ceil_div(-offset, s.stride_w));
  const int64_t end = s.width - offset > 0 ? std::min(ow, ceil_div(s.width - offset, s.stride_w)) : int64_t{0};
  return {offset, begin, std::max(begin, end)};
}

// One row of the column matrix for output rows [y_begin, y_end):
// row[(y - y_begin) * out_w + x] = plane[y*sh - ph + i*dh][x*sw - pw + j*dw], zero outside the image.
void im2col_row(const Conv2dShape& s, const float* plane, int64_t i, int64_t j, int64_t y_begin, int64_t y_end,
                float* row) {
  const int64_t ow = s.out_w();
  const ColumnRange cr = column_range(s, j);
  for (int64_t y = y_begin; y < y_end; ++y) {
    float* dst = row + (y - y_begin) * ow;
    const int64_t in_y = y * s.stride_h - s.pad_h + i * s.dilation_h;
    if (in_y < 0 || in_y >= s.height) {
      std::fill(dst, dst + ow, 0.0f);
      continue;
    }
    const float* src = plane + in_y * s.width;  // input column x * stride_w + offset
    std::fill(dst, dst + cr.x_begin, 0.0f);
    if (s.stride_w == 1) {
      std::copy(src + cr.x_begin + cr.offset, src + cr.x_end + cr.offset, dst + cr.x_begin);
    } else {
      for (int64_t x = cr.x_begin; x < cr.x_end; ++x) dst[x] = src[x * s.stride_w + cr.offset];
    }
    std::fill(dst + cr.x_end, dst + ow, 0.0f);
  }
}

// columns[(c * kh + i) * kw + j][...] for the channels of `image` and output rows [y_begin, y_end).
void im2col(const Conv2dShape& s, const float* image, int64_t channels, int64_t y_begin, int64_t y_end,
            float* columns) {
  const int64_t width = (y_end - y_begin) * s.out_w();
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t i = 0; i < s.kernel_h; ++i) {
      for (int64_t j = 0; j < s.kernel_w; ++j) {
        im2col_row(s, image + c * s.height * s.width, i, j, y_begin, y_end,
                   columns + ((c * s.kernel_h + i) * s.kernel_w + j) * width);
      }
    }
  }
}

// The adjoint of im2col for one channel: adds its kh * kw column rows back into `plane`, in the
// order (i, j, y, x).
void col2im_channel(const Conv2dShape& s, const float* columns, float* plane) {
  const int64_t oh = s.out_h(), ow = s.out_w();
  for (int64_t i = 0; i < s.kernel_h; ++i) {
    for (int64_t j = 0; j < s.kernel_w; ++j) {
      const float* row = columns + (i * s.kernel_w + j) * oh * ow;
      const ColumnRange cr = column_range(s, j);
      for (int64_t y = 0; y < oh; ++y) {
        const int64_t in_y = y * s.stride_h - s.pad_h + i * s.dilation_h;
        if (in_y < 0 || in_y >= s.height) continue;
        float* dst = plane + in_y * s.width;  // input column x * stride_w + offset
        const float* src = row + y * ow;
        if (s.stride_w == 1) {
          for (int64_t x = cr.x_begin; x < cr.x_end; ++x) dst[x + cr.offset] += src[x];
        } else {
          for (int64_t x = cr.x_begin; x < cr.x_end; ++x) dst[x * s.stride_w + cr.offset] += src[x];
        }
      }
    }
  }
}

}  // namespace

// Each job computes the output rows [y_begin, y_end) of one (image, group): im2col of those
// rows, then out = weight x columns. Every output element is the same sum in the same order
// however the jobs are cut.
void conv2d_forward(const Conv2dShape& s, const float* input, const float* weight, const float* bias, float* out) {
  if (use_winograd(s)) return conv2d_forward_winograd(s, input, weight, bias, out);
  if (is_depthwise(s)) return conv2d_forward_depthwise(s, input, weight, bias, out);
  const int64_t cin_g = s.in_channels / s.groups, cout_g = s.out_channels / s.groups;
  const int64_t oh = s.out_h(), ow = s.out_w(), spatial = oh * ow;
  const int64_t patch = cin_g * s.kernel_h * s.kernel_w;
  const int64_t planes = s.batch * s.groups;
  if (planes == 0 || spatial == 0 || cout_g == 0) return;
  const int64_t row_work = std::max<int64_t>(1, cout_g * patch * ow);
  const int64_t wanted_jobs = std::max<int64_t>(1, 4 * compute_threads() / planes);
  const int64_t y_block = std::clamp<int64_t>(std::max(ceil_div(oh, wanted_jobs), ceil_div(kMinJobWork, row_work)), 1, oh);
  const int64_t y_blocks = ceil_div(oh, y_block);
  parallel_for(planes * y_blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> columns;
    for (int64_t job = begin; job < end; ++job) {
      const int64_t plane = job / y_blocks, n = plane / s.groups, g = plane % s.groups;
      const int64_t y_begin = (job % y_blocks) * y_block, y_end = std::min(oh, y_begin + y_block);
      const int64_t width = (y_end - y_begin) * ow;
      columns.resize(static_cast<size_t>(patch * width));
      im2col(s, input + (n * s.in_channels + g * cin_g) * s.height * s.width, cin_g, y_begin, y_end, columns.data());
      float* dst = out + (n * s.out_channels + g * cout_g) * spatial + y_begin * ow;
      multiply_into(cout_g, width, patch, weight + g * cout_g * patch, patch, int64_t{1}, columns.data(), width, dst,
                    spatial);
      if (bias != nullptr) {
        for (int64_t c = 0; c < cout_g; ++c) {
          const float b = bias[g * cout_g + c];
          float* row = dst + c * spatial;
          for (int64_t k = 0; k < width; ++k) row[k] += b;
        }
      }
    }
  });
}

namespace {

// The shape of the convolution that computes a stride-1 convolution's input gradient: over
// grad_out, with padding dilation * (kernel - 1) - padding and the channel counts swapped; its
// output has the input's size. None when that padding would be negative.
std::optional<Conv2dShape> input_grad_convolution(const Conv2dShape& s) {
  const int64_t pad_h = s.dilation_h * (s.kernel_h - 1) - s.pad_h, pad_w = s.dilation_w * (s.kernel_w - 1) - s.pad_w;
  if (s.stride_h != 1 || s.stride_w != 1 || pad_h < 0 || pad_w < 0) return std::nullopt;
  Conv2dShape t = s;
  t.in_channels = s.out_channels;
  t.out_channels = s.in_channels;
  t.height = s.out_h();
  t.width = s.out_w();
  t.pad_h = pad_h;
  t.pad_w = pad_w;
  return t;
}

// grad_input = the convolution `t` of grad_out with each filter flipped and its input and output
// channels swapped: the forward's path (Winograd for 3x3 filters), rather than a product and a
// scatter-add of its columns (col2im), which ran at half the speed.
void input_grad_by_convolution(const Conv2dShape& s, const Conv2dShape& t, const float* grad_out, const float* weight,
                               float* grad_input) {
  const int64_t cin_g = s.in_channels / s.groups, cout_g = s.out_channels / s.groups;
  const int64_t kh = s.kernel_h, kw = s.kernel_w, taps = kh * kw;
  std::vector<float> flipped(static_cast<size_t>(s.out_channels * cin_g * taps));
  for (int64_t g = 0; g < s.groups; ++g) {
    for (int64_t ci = 0; ci < cin_g; ++ci) {
      for (int64_t co = 0; co < cout_g; ++co) {
        const float* from = weight + ((g * cout_g + co) * cin_g + ci) * taps;
        float* to = flipped.data() + ((g * cin_g + ci) * cout_g + co) * taps;
        for (int64_t tap = 0; tap < taps; ++tap) to[tap] = from[taps - 1 - tap];
      }
    }
  }
  conv2d_forward(t, grad_out, flipped.data(), nullptr, grad_input);
}

}  // namespace

void conv2d_backward(const Conv2dShape& s, const float* grad_out, const float* input, const float* weight,
                     float* grad_input, float* grad_weight, float* grad_bias) {
  const int64_t cin_g = s.in_channels / s.groups, cout_g = s.out_channels / s.groups;
  const int64_t oh = s.out_h(), ow = s.out_w(), spatial = oh * ow;
  const int64_t taps = s.kernel_h * s.kernel_w;
  const int64_t patch = cin_g * taps;
  const int64_t image_size = s.height * s.width;
  const std::optional<Conv2dShape> by_convolution = input_grad_convolution(s);
  const bool depthwise = is_depthwise(s);
  if (depthwise) {
    conv2d_backward_depthwise(s, grad_out, input, weight, by_convolution.has_value() ? nullptr : grad_input, grad_weight);
  }
  if (grad_input != nullptr && by_convolution.has_value()) {
    input_grad_by_convolution(s, *by_convolution, grad_out, weight, grad_input);
  } else if (grad_input != nullptr && !depthwise) {
    // Jobs own (image, group, block of input channels): columns = weight^T x grad_out for those
    // channels' rows, added back into their own planes.
    const int64_t planes = s.batch * s.groups;
    const int64_t channel_work = std::max<int64_t>(1, taps * spatial * cout_g);
    const int64_t wanted_jobs = std::max<int64_t>(1, 4 * compute_threads() / std::max<int64_t>(planes, 1));
    const int64_t c_block = std::clamp<int64_t>(
        std::max({ceil_div(cin_g, wanted_jobs), ceil_div(kMinJobWork, channel_work), ceil_div(kTileRows, taps)}), 1,
        std::max<int64_t>(cin_g, 1));
    const int64_t c_blocks = ceil_div(cin_g, c_block);
    parallel_for(planes * c_blocks, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> columns;
      for (int64_t job = begin; job < end; ++job) {
        const int64_t plane = job / c_blocks, n = plane / s.groups, g = plane % s.groups;
        const int64_t c_begin = (job % c_blocks) * c_block, c_end = std::min(cin_g, c_begin + c_block);
        float* image = grad_input + (n * s.in_channels + g * cin_g) * image_size;
        std::fill(image + c_begin * image_size, image + c_end * image_size, 0.0f);
        const int64_t rows = (c_end - c_begin) * taps;
        if (rows == 0 || spatial == 0) continue;
        columns.resize(static_cast<size_t>(rows * spatial));
        multiply_into(rows, spatial, cout_g, weight + g * cout_g * patch + c_begin * taps, int64_t{1}, patch,
                      grad_out + (n * s.out_channels + g * cout_g) * spatial, spatial, columns.data(), spatial);
        for (int64_t c = c_begin; c < c_end; ++c) {
          col2im_channel(s, columns.data() + (c - c_begin) * taps * spatial, image + c * image_size);
        }
      }
    });
  }
  if (grad_weight != nullptr && !depthwise) {
    // grad_weight^T [patch, cout_g] = sum over images of columns [patch, spatial] x grad_out^T
    // [spatial, cout_g]; jobs own blocks of patch rows and walk the images in order.
    // [n][g][spatial][cout_g], every element written below: left uninitialized, as zero-filling
    // it took 6% of this kernel's time on the launching thread alone.
    std::unique_ptr<float[]> grad_t(new float[static_cast<size_t>(s.batch * s.out_channels * spatial)]);
    parallel_for(s.batch * s.groups, 1, [&](int64_t begin, int64_t end) {
      for (int64_t plane = begin; plane < end; ++plane) {
        const float* from = grad_out + plane * cout_g * spatial;
        float* to = grad_t.get() + plane * cout_g * spatial;
        for (int64_t k0 = 0; k0 < spatial; k0 += 64) {
          for (int64_t c = 0; c < cout_g; ++c) {
            for (int64_t k = k0; k < std::min(spatial, k0 + 64); ++k) to[k * cout_g + c] = from[c * spatial + k];
          }
        }
      }
    });
    const int64_t row_work = std::max<int64_t>(1, s.batch * spatial * cout_g);
    const int64_t wanted_jobs = std::max<int64_t>(1, 4 * compute_threads() / std::max<int64_t>(s.groups, 1));
    const int64_t p_block = std::clamp<int64_t>(
        ceil_div(std::max(ceil_div(patch, wanted_jobs), ceil_div(kMinJobWork, row_work)), kTileRows) * kTileRows, 1,
        std::max<int64_t>(patch, 1));
    const int64_t p_blocks = ceil_div(patch, p_block);
    parallel_for(s.groups * p_blocks, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> columns, partial;
      std::vector<double> sum_t;
      for (int64_t job = begin; job < end; ++job) {
        const int64_t g = job / p_blocks;
        const int64_t p_begin = (job % p_blocks) * p_block, p_end = std::min(patch, p_begin + p_block);
        const int64_t rows = p_end - p_begin;
        columns.resize(static_cast<size_t>(rows * spatial));
        sum_t.assign(static_cast<size_t>(rows * cout_g), 0.0);
        for (int64_t n = 0; n < s.batch; ++n) {
          const float* image = input + (n * s.in_channels + g * cin_g) * image_size;
          for (int64_t p = p_begin; p < p_end; ++p) {
            const int64_t c = p / taps, i = (p % taps) / s.kernel_w, j = p % s.kernel_w;
            im2col_row(s, image + c * image_size, i, j, 0, oh, columns.data() + (p - p_begin) * spatial);
          }
          // Float sums over runs of kSumRun output positions, added up in double.
          const float* grad = grad_t.get() + (n * s.groups + g) * cout_g * spatial;
          for (int64_t k0 = 0; k0 < spatial; k0 += kSumRun) {
            partial.resize(static_cast<size_t>(rows * cout_g));
            multiply_into(rows, cout_g, std::min(kSumRun, spatial - k0), columns.data() + k0, spatial, int64_t{1},
                          grad + k0 * cout_g, cout_g, partial.data(), cout_g);
            for (int64_t x = 0; x < rows * cout_g; ++x) sum_t[x] += partial[x];
          }
        }
        for (int64_t p = p_begin; p < p_end; ++p) {
          for (int64_t c = 0; c < cout_g; ++c) {
            grad_weight[(g * cout_g + c) * patch + p] = static_cast<float>(sum_t[(p - p_begin) * cout_g + c]);
          }
        }
      }
    });
  }
  if (grad_bias != nullptr) {
    parallel_for(s.out_channels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        constexpr int kLanes = 8;
        double lanes[kLanes] = {};
        double sum = 0;
        for (int64_t n = 0; n < s.batch; ++n) {
          const float* plane = grad_out + (n * s.out_channels + c) * spatial;
          int64_t k = 0;
          for (; k + kLanes <= spatial; k += kLanes) {
            for (int l = 0; l < kLanes; ++l) lanes[l] += plane[k + l];
          }
          for (; k < spatial; ++k) sum += plane[k];
        }
        for (int l = 0; l < kLanes; ++l) sum += lanes[l];
        grad_bias[c] = static_cast<float>(sum);
      }
    });
  }
}

}  // namespace torchneuron::kernels
