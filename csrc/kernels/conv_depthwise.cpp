#include "kernels/conv_common.h"

#include <algorithm>
#include <vector>

#include "kernels/parallel.h"

namespace torchneuron::kernels::conv_detail {
namespace {

// Depthwise convolutions (one input and one output channel per group) computed directly: as
// im2col + GEMM every (image, channel) was a product of one row. The zero-padded plane is split
// into stride_h x stride_w phase planes (phase (r, q) holds padded rows r + stride_h * yy and
// columns q + stride_w * xx), so that each tap reads one phase plane at a fixed offset: output
// (y, x) of tap (i, j) reads phase ((i dh) % sh, (j dw) % sw) at row y + (i dh) / sh, column
// x + (j dw) / sw. Each tap is then one long loop over the output laid out in the phase width
// (rows of a small image, looped one by one, were too short to vectorize well); the columns past
// the output width are computed and dropped. Stride 1 is a single phase plane: the padded plane.
struct DepthwisePlan {
  int64_t oh, ow, phase_h, phase_w, phase_size, extended;

  explicit DepthwisePlan(const Conv2dShape& s)
      : oh(s.out_h()), ow(s.out_w()), phase_h(ceil_div(s.height + 2 * s.pad_h, s.stride_h)),
        phase_w(ceil_div(s.width + 2 * s.pad_w, s.stride_w)),
        // Reads run past the last phase row by up to the widest tap's column offset, into zeros.
        phase_size(phase_h * phase_w + (s.kernel_w - 1) * s.dilation_w / s.stride_w), extended(oh * phase_w) {}

  int64_t planes_size(const Conv2dShape& s) const { return s.stride_h * s.stride_w * phase_size; }

  // Tap (i, j)'s view of the phase planes: element k of the extended output reads view[k].
  template <typename F>
  F* tap(const Conv2dShape& s, F* phases, int64_t i, int64_t j) const {
    const int64_t row = i * s.dilation_h, col = j * s.dilation_w;
    const int64_t phase = (row % s.stride_h) * s.stride_w + col % s.stride_w;
    return phases + phase * phase_size + (row / s.stride_h) * phase_w + col / s.stride_w;
  }

  // Calls body(phase, yy, y, first, last) for each phase row yy and its image row y (-1 when
  // outside the image): phase columns [first, last) hold image columns q + sw xx - pad_w.
  template <typename Body>
  void for_each_phase_row(const Conv2dShape& s, Body body) const {
    for (int64_t r = 0; r < s.stride_h; ++r) {
      for (int64_t q = 0; q < s.stride_w; ++q) {
        const int64_t first = s.pad_w > q ? ceil_div(s.pad_w - q, s.stride_w) : 0;
        const int64_t last = std::clamp<int64_t>(ceil_div(s.width + s.pad_w - q, s.stride_w), first, phase_w);
        for (int64_t yy = 0; yy < phase_h; ++yy) {
          const int64_t y = r + s.stride_h * yy - s.pad_h;
          body(r * s.stride_w + q, q, yy, y >= 0 && y < s.height ? y : -1, first, last);
        }
      }
    }
  }

  // Splits one zero-padded image plane into `phases` (planes_size(s) floats, every one written).
  void split(const Conv2dShape& s, const float* image, float* phases) const {
    std::fill(phases, phases + planes_size(s), 0.0f);
    for_each_phase_row(s, [&](int64_t phase, int64_t q, int64_t yy, int64_t y, int64_t first, int64_t last) {
      if (y < 0 || last <= first) return;
      float* row = phases + phase * phase_size + yy * phase_w;
      const float* from = image + y * s.width + q - s.pad_w + s.stride_w * first;
      with_constant_step(s.stride_w, [&](auto step) {
        for (int64_t xx = 0; xx < last - first; ++xx) row[first + xx] = from[step() * xx];
      });
    });
  }

  // The adjoint of split: each image element takes the phase element it was copied to.
  void merge(const Conv2dShape& s, const float* phases, float* image) const {
    for_each_phase_row(s, [&](int64_t phase, int64_t q, int64_t yy, int64_t y, int64_t first, int64_t last) {
      if (y < 0 || last <= first) return;
      const float* row = phases + phase * phase_size + yy * phase_w;
      float* to = image + y * s.width + q - s.pad_w + s.stride_w * first;
      with_constant_step(s.stride_w, [&](auto step) {
        for (int64_t xx = 0; xx < last - first; ++xx) to[step() * xx] = row[first + xx];
      });
    });
  }

  // Calls body with the step as a compile-time constant for strides 1 and 2: the strided copies
  // through a run-time step were scalar loops, most of a stride-2 forward's time.
  template <typename Body>
  static void with_constant_step(int64_t step, Body body) {
    if (step == 1) return body([] { return int64_t{1}; });
    if (step == 2) return body([] { return int64_t{2}; });
    body([step] { return step; });
  }
};

}  // namespace

bool is_depthwise(const Conv2dShape& s) {
  return s.groups == s.in_channels && s.groups == s.out_channels && s.batch * s.out_channels > 0 && s.out_h() > 0 &&
         s.out_w() > 0;
}

// Each output sums its taps in the GEMM's k order, from zero, then adds the bias, so the results
// equal the GEMM path's.
void conv2d_forward_depthwise(const Conv2dShape& s, const float* input, const float* weight, const float* bias,
                              float* out) {
  const DepthwisePlan plan(s);
  const int64_t taps = s.kernel_h * s.kernel_w, planes = s.batch * s.out_channels;
  parallel_for(planes, std::max<int64_t>(1, kMinJobWork / std::max<int64_t>(1, plan.extended * taps)), [&](int64_t begin, int64_t end) {
    std::vector<float> phases(static_cast<size_t>(plan.planes_size(s))), sums(static_cast<size_t>(plan.extended));
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t c = plane % s.out_channels;
      plan.split(s, input + plane * s.height * s.width, phases.data());
      float* __restrict acc = sums.data();
      std::fill(acc, acc + plan.extended, 0.0f);
      for (int64_t i = 0; i < s.kernel_h; ++i) {
        for (int64_t j = 0; j < s.kernel_w; ++j) {
          const float w = weight[c * taps + i * s.kernel_w + j];
          const float* __restrict shifted = plan.tap(s, static_cast<const float*>(phases.data()), i, j);
          for (int64_t k = 0; k < plan.extended; ++k) acc[k] += w * shifted[k];
        }
      }
      const float b = bias != nullptr ? bias[c] : 0.0f;
      for (int64_t y = 0; y < plan.oh; ++y) {
        float* row = out + (plane * plan.oh + y) * plan.ow;
        const float* from = acc + y * plan.phase_w;
        if (bias != nullptr) {
          for (int64_t x = 0; x < plan.ow; ++x) row[x] = from[x] + b;
        } else {
          std::copy(from, from + plan.ow, row);
        }
      }
    }
  });
}

// The depthwise backward over DepthwisePlan's phase planes, one job per channel (its images in
// order). grad_weight's tap (i, j) is the dot product of grad_out, laid out in the phase width
// with zeros past the output width, with the tap's view of the input's phase planes: float sums
// of 16 lanes over runs of kSumRun positions, added up in double. grad_input (may be null):
// each tap adds w times that grad_out to its view of zeroed phase planes, merged back into the
// image (the columns past the output width add zeros).
void conv2d_backward_depthwise(const Conv2dShape& s, const float* grad_out, const float* input, const float* weight,
                               float* grad_input, float* grad_weight) {
  const DepthwisePlan plan(s);
  const int64_t taps = s.kernel_h * s.kernel_w, image_size = s.height * s.width;
  parallel_for(s.out_channels, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> phases(static_cast<size_t>(plan.planes_size(s))), grad(static_cast<size_t>(plan.extended));
    std::vector<double> sums(static_cast<size_t>(taps));
    for (int64_t c = begin; c < end; ++c) {
      std::fill(sums.begin(), sums.end(), 0.0);
      for (int64_t n = 0; n < s.batch; ++n) {
        const int64_t plane = n * s.out_channels + c;
        for (int64_t y = 0; y < plan.oh; ++y) {
          const float* from = grad_out + (plane * plan.oh + y) * plan.ow;
          float* to = grad.data() + y * plan.phase_w;
          std::copy(from, from + plan.ow, to);
          std::fill(to + plan.ow, to + plan.phase_w, 0.0f);
        }
        const float* __restrict g = grad.data();
        if (grad_weight != nullptr) {
          plan.split(s, input + plane * image_size, phases.data());
          for (int64_t t = 0; t < taps; ++t) {
            const float* __restrict v = plan.tap(s, static_cast<const float*>(phases.data()), t / s.kernel_w, t % s.kernel_w);
            for (int64_t k0 = 0; k0 < plan.extended; k0 += kSumRun) {
              constexpr int kLanes = 16;
              float lanes[kLanes] = {};
              const int64_t k1 = std::min(plan.extended, k0 + kSumRun);
              int64_t k = k0;
              for (; k + kLanes <= k1; k += kLanes) {
                for (int l = 0; l < kLanes; ++l) lanes[l] += g[k + l] * v[k + l];
              }
              double run = 0.0;
              for (; k < k1; ++k) run += g[k] * v[k];
              for (int l = 0; l < kLanes; ++l) run += lanes[l];
              sums[t] += run;
            }
          }
        }
        if (grad_input != nullptr) {
          std::fill(phases.begin(), phases.end(), 0.0f);
          for (int64_t t = 0; t < taps; ++t) {
            const float w = weight[c * taps + t];
            float* __restrict v = plan.tap(s, phases.data(), t / s.kernel_w, t % s.kernel_w);
            for (int64_t k = 0; k < plan.extended; ++k) v[k] += w * g[k];
          }
          plan.merge(s, phases.data(), grad_input + plane * image_size);  // writes every element
        }
      }
      if (grad_weight != nullptr) {
        for (int64_t t = 0; t < taps; ++t) grad_weight[c * taps + t] = static_cast<float>(sums[t]);
      }
    }
  });
}

}  // namespace torchneuron::kernels::conv_detail
