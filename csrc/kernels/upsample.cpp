#include "kernels/upsample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/dtype_dispatch.h"
#include "kernels/floating.h"
#include "kernels/parallel.h"

namespace torchneuron::kernels {
namespace {

constexpr int kMaxTaps = 4;

// The input positions and weights one output coordinate of an axis reads.
template <typename A>
struct Taps {
  int64_t index[kMaxTaps] = {0, 0, 0, 0};
  A weight[kMaxTaps] = {A(1), A(0), A(0), A(0)};
};

template <typename A>
struct Axis {
  int count = 1;
  std::vector<Taps<A>> taps;
};

// Keys' cubic convolution kernel with a = -0.75: near for |x| <= 1, far for 1 < |x| < 2.
template <typename A>
A cubic_near(A x) {
  constexpr A a = A(-0.75);
  return ((a + 2) * x - (a + 3)) * x * x + 1;
}
template <typename A>
A cubic_far(A x) {
  constexpr A a = A(-0.75);
  return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}

// Nearest modes compute their scale in float whatever the dtype, as CPU PyTorch does; the
// others in the accumulation type.
template <typename A>
Axis<A> make_axis(Interpolation mode, bool align_corners, int64_t in, int64_t out, double user_scale) {
  Axis<A> axis;
  axis.taps.resize(static_cast<size_t>(out));
  if (mode == Interpolation::kNearest || mode == Interpolation::kNearestExact) {
    const float scale = user_scale > 0 ? static_cast<float>(1.0 / user_scale) : static_cast<float>(in) / static_cast<float>(out);
    for (int64_t o = 0; o < out; ++o) {
      int64_t src;
      if (mode == Interpolation::kNearestExact) {
        src = std::min(static_cast<int64_t>(std::floor((static_cast<float>(o) + 0.5f) * scale)), in - 1);
      } else if (out == in) {
        src = o;
      } else if (out == 2 * in) {
        src = o >> 1;
      } else {
        src = std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * scale)), in - 1);
      }
      axis.taps[o].index[0] = src;
    }
    return axis;
  }
  const bool cubic = mode == Interpolation::kCubic;
  axis.count = cubic ? 4 : 2;
  A scale;
  if (align_corners) {
    scale = out > 1 ? static_cast<A>(in - 1) / static_cast<A>(out - 1) : A(0);
  } else {
    scale = user_scale > 0 ? static_cast<A>(1.0 / user_scale) : static_cast<A>(in) / static_cast<A>(out);
  }
  for (int64_t o = 0; o < out; ++o) {
    A src = align_corners ? scale * static_cast<A>(o) : scale * (static_cast<A>(o) + A(0.5)) - A(0.5);
    if (!cubic && src < A(0)) src = A(0);  // linear clamps at the first sample; cubic reads edges clamped
    const int64_t i0 = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
    const A t = std::min(std::max(src - static_cast<A>(i0), A(0)), A(1));
    Taps<A>& taps = axis.taps[o];
    if (cubic) {
      const A weights[4] = {cubic_far(t + A(1)), cubic_near(t), cubic_near(A(1) - t), cubic_far(A(2) - t)};
      for (int j = 0; j < 4; ++j) {
        taps.index[j] = std::min(std::max<int64_t>(i0 - 1 + j, 0), in - 1);
        taps.weight[j] = weights[j];
      }
    } else {
      taps.index[0] = i0;
      taps.index[1] = i0 + (i0 < in - 1 ? 1 : 0);
      taps.weight[0] = A(1) - t;
      taps.weight[1] = t;
    }
  }
  return axis;
}

// The shape as three axes (depth, height, width), missing leading ones of size 1.
struct Volume {
  int64_t in[3] = {1, 1, 1};
  int64_t out[3] = {1, 1, 1};
  double scale[3] = {0, 0, 0};
  int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  int64_t out_plane() const { return out[0] * out[1] * out[2]; }
};

Volume volume_of(const UpsampleShape& s) {
  if (s.dims < 1 || s.dims > 3) throw runtime::KernelError("upsample: 1 to 3 spatial dimensions, got " + std::to_string(s.dims));
  Volume v;
  for (int i = 0; i < s.dims; ++i) {
    v.in[3 - s.dims + i] = s.in[i];
    v.out[3 - s.dims + i] = s.out[i];
    v.scale[3 - s.dims + i] = s.scale[i];
  }
  return v;
}

template <typename A>
void make_axes(Interpolation mode, bool align_corners, const UpsampleShape& s, const Volume& v, Axis<A> axes[3]) {
  for (int i = 0; i < 3; ++i) {
    axes[i] = i < 3 - s.dims ? Axis<A>{1, std::vector<Taps<A>>(1)}
                             : make_axis<A>(mode, align_corners, v.in[i], v.out[i], v.scale[i]);
  }
}

int64_t row_grain(const Volume& v) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, v.out[1] * v.out[2])); }

// Nearest: a gather of whole elements, any dtype of this size.
template <typename E>
void gather_nearest(const UpsampleShape& s, const Volume& v, const Axis<float> axes[3], const void* in_data,
                    void* out_data) {
  const E* in = static_cast<const E*>(in_data);
  E* out = static_cast<E*>(out_data);
  parallel_for(s.planes * v.out[0], row_grain(v), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t p = row / v.out[0], od = row % v.out[0];
      const E* depth = in + p * v.in_plane() + axes[0].taps[od].index[0] * v.in[1] * v.in[2];
      E* o = out + row * v.out[1] * v.out[2];
      for (int64_t oh = 0; oh < v.out[1]; ++oh) {
        const E* line = depth + axes[1].taps[oh].index[0] * v.in[2];
        for (int64_t ow = 0; ow < v.out[2]; ++ow) o[oh * v.out[2] + ow] = line[axes[2].taps[ow].index[0]];
      }
    }
  });
}

// kDepth, kHeight, kWidth: taps per axis, fixed at compile time so that the loops unroll.
template <typename T, int kDepth, int kHeight, int kWidth>
void interpolate(const UpsampleShape& s, const Volume& v, const Axis<Acc<T>> axes[3], const T* in, T* out) {
  using A = Acc<T>;
  parallel_for(s.planes * v.out[0], row_grain(v), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t p = row / v.out[0], od = row % v.out[0];
      const T* plane = in + p * v.in_plane();
      const Taps<A>& td = axes[0].taps[od];
      T* o = out + row * v.out[1] * v.out[2];
      for (int64_t oh = 0; oh < v.out[1]; ++oh) {
        const Taps<A>& th = axes[1].taps[oh];
        for (int64_t ow = 0; ow < v.out[2]; ++ow) {
          const Taps<A>& tw = axes[2].taps[ow];
          // Each sum starts from its first product (0 + -0 would turn a -0 result into +0).
          A over_depth = A(0);
          for (int a = 0; a < kDepth; ++a) {
            A over_height = A(0);
            for (int b = 0; b < kHeight; ++b) {
              const T* line = plane + (td.index[a] * v.in[1] + th.index[b]) * v.in[2];
              A over_width = tw.weight[0] * up(line[tw.index[0]]);
              for (int c = 1; c < kWidth; ++c) over_width += tw.weight[c] * up(line[tw.index[c]]);
              over_height = b == 0 ? th.weight[0] * over_width : over_height + th.weight[b] * over_width;
            }
            over_depth = a == 0 ? td.weight[0] * over_height : over_depth + td.weight[a] * over_height;
          }
          o[oh * v.out[2] + ow] = down<T>(over_depth);
        }
      }
    }
  });
}

// ---- antialiased resampling (interpolate(..., antialias=True)) -----------------------------

// One axis of an antialiased resize: output o reads count[o] inputs from start[o], with
// weights weight[o * width + j] (a triangle or a = -0.5 cubic filter stretched by the scale when
// downsampling, normalized to sum 1). CPU PyTorch's arithmetic, including where it rounds.
template <typename A>
struct WideAxis {
  int64_t width = 1;
  std::vector<int64_t> start, count;
  std::vector<A> weight;
};

template <typename A>
A antialias_filter(bool cubic, A x) {
  x = std::abs(x);
  if (!cubic) return x < A(1) ? A(1) - x : A(0);
  constexpr A a = A(-0.5);
  if (x < A(1)) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < A(2)) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return A(0);
}

template <typename A>
WideAxis<A> make_wide_axis(bool cubic, bool align_corners, int64_t in, int64_t out, double user_scale) {
  A scale;
  if (align_corners) {
    scale = out > 1 ? static_cast<A>(in - 1) / static_cast<A>(out - 1) : A(0);
  } else {
    scale = user_scale > 0 ? static_cast<A>(1.0 / user_scale) : static_cast<A>(in) / static_cast<A>(out);
  }
  const A half_taps = cubic ? A(2) : A(1);
  const A support = scale >= A(1) ? half_taps * scale : half_taps;
  const A invscale = scale >= A(1) ? A(1) / scale : A(1);
  WideAxis<A> axis;
  axis.width = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  axis.start.resize(static_cast<size_t>(out));
  axis.count.resize(static_cast<size_t>(out));
  axis.weight.assign(static_cast<size_t>(out * axis.width), A(0));
  for (int64_t o = 0; o < out; ++o) {
    const A center = static_cast<A>(static_cast<double>(scale) * (static_cast<double>(o) + 0.5));
    const int64_t first = std::max<int64_t>(static_cast<int64_t>(static_cast<double>(center - support) + 0.5), 0);
    const int64_t size = std::clamp<int64_t>(
        std::min<int64_t>(static_cast<int64_t>(static_cast<double>(center + support) + 0.5), in) - first, 0, axis.width);
    A* w = axis.weight.data() + o * axis.width;
    A total = A(0);
    for (int64_t j = 0; j < size; ++j) {
      const A offset = static_cast<A>(j + first) - center;
      w[j] = antialias_filter(cubic, static_cast<A>((static_cast<double>(offset) + 0.5) * static_cast<double>(invscale)));
      total += w[j];
    }
    if (total != A(0)) {
      for (int64_t j = 0; j < size; ++j) w[j] /= total;
    }
    axis.start[o] = first;
    axis.count[o] = size;
  }
  return axis;
}

// The row (height) and column (width) axes of a 2-D antialiased resize.
template <typename A>
struct WideAxes {
  WideAxis<A> rows, cols;
  WideAxes(const UpsampleShape& s, bool cubic, bool align_corners)
      : rows(make_wide_axis<A>(cubic, align_corners, s.in[0], s.out[0], s.scale[0])),
        cols(make_wide_axis<A>(cubic, align_corners, s.in[1], s.out[1], s.scale[1])) {}
};

bool is_antialias(Interpolation mode) {
  return mode == Interpolation::kLinearAntialias || mode == Interpolation::kCubicAntialias;
}

// Width first into a plane of in_h x out_w, rounded to T as CPU's intermediate tensor is, then
// height; a task per plane.
template <typename T>
void antialias_forward(const UpsampleShape& s, bool cubic, bool align_corners, const T* in, T* out) {
  using A = Acc<T>;
  const int64_t in_h = s.in[0], in_w = s.in[1], out_h = s.out[0], out_w = s.out[1];
  const WideAxes<A> axes(s, cubic, align_corners);
  const WideAxis<A>& rows = axes.rows;
  const WideAxis<A>& cols = axes.cols;
  parallel_for(s.planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, in_h * out_w)), [&](int64_t begin, int64_t end) {
    std::vector<T> across(static_cast<size_t>(in_h * out_w));
    for (int64_t p = begin; p < end; ++p) {
      const T* plane = in + p * in_h * in_w;
      for (int64_t h = 0; h < in_h; ++h) {
        const T* line = plane + h * in_w;
        for (int64_t ow = 0; ow < out_w; ++ow) {
          const A* w = cols.weight.data() + ow * cols.width;
          const T* x = line + cols.start[ow];
          A sum = cols.count[ow] > 0 ? w[0] * up(x[0]) : A(0);
          for (int64_t j = 1; j < cols.count[ow]; ++j) sum += w[j] * up(x[j]);
          across[h * out_w + ow] = down<T>(sum);
        }
      }
      T* o = out + p * out_h * out_w;
      for (int64_t oh = 0; oh < out_h; ++oh) {
        const A* w = rows.weight.data() + oh * rows.width;
        const T* first = across.data() + rows.start[oh] * out_w;
        for (int64_t ow = 0; ow < out_w; ++ow) {
          A sum = rows.count[oh] > 0 ? w[0] * up(first[ow]) : A(0);
          for (int64_t j = 1; j < rows.count[oh]; ++j) sum += w[j] * up(first[j * out_w + ow]);
          o[oh * out_w + ow] = down<T>(sum);
        }
      }
    }
  });
}

// Each output's gradient spread over its taps, x weight times y weight, in output order per
// plane (deterministic), summed in the accumulation type.
template <typename T>
void antialias_backward(const UpsampleShape& s, bool cubic, bool align_corners, const T* grad_out, T* grad_in) {
  using A = Acc<T>;
  const int64_t in_h = s.in[0], in_w = s.in[1], out_h = s.out[0], out_w = s.out[1];
  const WideAxes<A> axes(s, cubic, align_corners);
  const WideAxis<A>& rows = axes.rows;
  const WideAxis<A>& cols = axes.cols;
  parallel_for(s.planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, out_h * out_w)), [&](int64_t begin, int64_t end) {
    std::vector<A> sums(static_cast<size_t>(in_h * in_w));
    for (int64_t p = begin; p < end; ++p) {
      std::fill(sums.begin(), sums.end(), A(0));
      const T* g = grad_out + p * out_h * out_w;
      for (int64_t oh = 0; oh < out_h; ++oh) {
        const A* wy = rows.weight.data() + oh * rows.width;
        for (int64_t ow = 0; ow < out_w; ++ow) {
          const A* wx = cols.weight.data() + ow * cols.width;
          const A value = up(g[oh * out_w + ow]);
          for (int64_t y = 0; y < rows.count[oh]; ++y) {
            A* line = sums.data() + (rows.start[oh] + y) * in_w + cols.start[ow];
            for (int64_t x = 0; x < cols.count[ow]; ++x) line[x] += wx[x] * wy[y] * value;
          }
        }
      }
      T* plane = grad_in + p * in_h * in_w;
      for (int64_t i = 0; i < in_h * in_w; ++i) plane[i] = down<T>(sums[i]);
    }
  });
}

}  // namespace

void upsample(DType dtype, Interpolation mode, bool align_corners, const UpsampleShape& s, const void* in, void* out) {
  if (is_antialias(mode)) {
    if (s.dims != 2) throw runtime::KernelError("upsample: antialiased interpolation is 2-D");
    return dispatch_floating(dtype, "upsample", [&](auto tag) {
      using T = decltype(tag);
      antialias_forward<T>(s, mode == Interpolation::kCubicAntialias, align_corners, static_cast<const T*>(in),
                           static_cast<T*>(out));
    });
  }
  const Volume v = volume_of(s);
  if (mode == Interpolation::kNearest || mode == Interpolation::kNearestExact) {
    Axis<float> axes[3];
    make_axes(mode, align_corners, s, v, axes);
    return dispatch_element_size(dtype, "upsample", [&](auto tag) {
      gather_nearest<decltype(tag)>(s, v, axes, in, out);
    });
  }
  dispatch_floating(dtype, "upsample", [&](auto tag) {
    using T = decltype(tag);
    Axis<Acc<T>> axes[3];
    make_axes(mode, align_corners, s, v, axes);
    const T* x = static_cast<const T*>(in);
    T* y = static_cast<T*>(out);
    if (mode == Interpolation::kCubic) {
      if (s.dims != 2) throw runtime::KernelError("upsample: cubic interpolation is 2-D");
      interpolate<T, 1, 4, 4>(s, v, axes, x, y);
    } else if (s.dims == 1) {
      interpolate<T, 1, 1, 2>(s, v, axes, x, y);
    } else if (s.dims == 2) {
      interpolate<T, 1, 2, 2>(s, v, axes, x, y);
    } else {
      interpolate<T, 2, 2, 2>(s, v, axes, x, y);
    }
  });
}

// Each task owns whole planes of grad_in and sums into them in output order: deterministic.
void upsample_backward(DType dtype, Interpolation mode, bool align_corners, const UpsampleShape& s,
                       const void* grad_out, void* grad_in) {
  if (is_antialias(mode)) {
    if (s.dims != 2) throw runtime::KernelError("upsample: antialiased interpolation is 2-D");
    return dispatch_floating(dtype, "upsample_backward", [&](auto tag) {
      using T = decltype(tag);
      antialias_backward<T>(s, mode == Interpolation::kCubicAntialias, align_corners, static_cast<const T*>(grad_out),
                            static_cast<T*>(grad_in));
    });
  }
  const Volume v = volume_of(s);
  dispatch_floating(dtype, "upsample_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    Axis<A> axes[3];
    make_axes(mode, align_corners, s, v, axes);
    const T* go = static_cast<const T*>(grad_out);
    T* gi = static_cast<T*>(grad_in);
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, v.out_plane()));
    parallel_for(s.planes, grain, [&](int64_t begin, int64_t end) {
      std::vector<A> sums(static_cast<size_t>(v.in_plane()));
      for (int64_t p = begin; p < end; ++p) {
        std::fill(sums.begin(), sums.end(), A(0));
        const T* g_plane = go + p * v.out_plane();
        for (int64_t od = 0; od < v.out[0]; ++od) {
          const Taps<A>& td = axes[0].taps[od];
          for (int64_t oh = 0; oh < v.out[1]; ++oh) {
            const Taps<A>& th = axes[1].taps[oh];
            const T* g_line = g_plane + (od * v.out[1] + oh) * v.out[2];
            for (int64_t ow = 0; ow < v.out[2]; ++ow) {
              const Taps<A>& tw = axes[2].taps[ow];
              const A g = up(g_line[ow]);
              for (int a = 0; a < axes[0].count; ++a) {
                for (int b = 0; b < axes[1].count; ++b) {
                  const A w = td.weight[a] * th.weight[b];
                  A* line = sums.data() + (td.index[a] * v.in[1] + th.index[b]) * v.in[2];
                  for (int c = 0; c < axes[2].count; ++c) line[tw.index[c]] += w * tw.weight[c] * g;
                }
              }
            }
          }
        }
        T* plane = gi + p * v.in_plane();
        for (int64_t i = 0; i < v.in_plane(); ++i) plane[i] = down<T>(sums[i]);
      }
    });
  });
}

}  // namespace torchneuron::kernels
