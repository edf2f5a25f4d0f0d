#include "kernels/grid_sample.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/floating.h"
#include "kernels/parallel.h"

namespace torchneuron::kernels {
namespace {

// A grid coordinate in pixels, and its derivative with respect to the grid value.
template <typename A>
struct Source {
  A at;
  A slope;
};

// Reflects x into [low, high] (given doubled, as ATen's convention lets align_corners=False
// reflect about -0.5 and size - 0.5); slope picks up the sign of each reflection.
template <typename A>
A reflect(A x, int64_t twice_low, int64_t twice_high, A& slope) {
  if (twice_low == twice_high) {
    slope = A(0);
    return A(0);
  }
  if (!std::isfinite(x)) return x;  // NaN or inf: no tap is read
  const A low = A(twice_low) / 2, span = A(twice_high - twice_low) / 2;
  x -= low;
  if (x < A(0)) {
    x = -x;
    slope = -slope;
  }
  const A extra = std::fmod(x, span);
  const bool odd = std::fmod(std::floor(x / span), A(2)) != A(0);
  if (odd) slope = -slope;
  return odd ? span - extra + low : extra + low;
}

// Clamps to [0, size - 1]; the slope is 0 where clamped.
template <typename A>
A clip(A x, int64_t size, A& slope) {
  if (x <= A(0)) {
    slope = A(0);
    return A(0);
  }
  if (x >= A(size - 1)) {
    slope = A(0);
    return A(size - 1);
  }
  return x;
}

template <typename A>
Source<A> source(A g, int64_t size, GridPadding padding, bool align_corners) {
  Source<A> s;
  if (align_corners) {
    s.at = (g + A(1)) / A(2) * A(size - 1);
    s.slope = A(size - 1) / A(2);
  } else {
    s.at = ((g + A(1)) * A(size) - A(1)) / A(2);
    s.slope = A(size) / A(2);
  }
  if (padding == GridPadding::kBorder) {
    s.at = clip(s.at, size, s.slope);
  } else if (padding == GridPadding::kReflection) {
    s.at = align_corners ? reflect(s.at, 0, 2 * (size - 1), s.slope) : reflect(s.at, -1, 2 * size - 1, s.slope);
    s.at = clip(s.at, size, s.slope);
  }
  return s;
}

// The four bilinear taps of (x, y): corners (x0 | x0 + 1, y0 | y0 + 1), their weights, and
// whether each lies inside the image (outside ones read and receive nothing: zeros padding, or
// a coordinate NaN made unusable).
template <typename A>
struct Bilinear {
  int64_t x0, y0;
  A x, y;
  bool valid;
  Bilinear(A xs, A ys) : x(xs), y(ys) {
    valid = std::isfinite(xs) && std::isfinite(ys);
    x0 = valid ? static_cast<int64_t>(std::floor(xs)) : 0;
    y0 = valid ? static_cast<int64_t>(std::floor(ys)) : 0;
  }
  A wx(int dx) const { return dx ? x - A(x0) : A(x0 + 1) - x; }
  A wy(int dy) const { return dy ? y - A(y0) : A(y0 + 1) - y; }
  bool inside(int dx, int dy, int64_t h, int64_t w) const {
    const int64_t xi = x0 + dx, yi = y0 + dy;
    return valid && xi >= 0 && xi < w && yi >= 0 && yi < h;
  }
};

template <typename A>
bool nearest(A xs, A ys, int64_t h, int64_t w, int64_t& offset) {
  if (!(std::isfinite(xs) && std::isfinite(ys))) return false;
  const int64_t xi = static_cast<int64_t>(std::nearbyint(xs)), yi = static_cast<int64_t>(std::nearbyint(ys));
  offset = yi * w + xi;
  return xi >= 0 && xi < w && yi >= 0 && yi < h;
}

}  // namespace

void grid_sample_2d(DType dtype, const GridSampleShape& s, GridInterpolation interpolation, GridPadding padding,
                    bool align_corners, const void* input, const void* grid, void* out) {
  dispatch_floating(dtype, "grid_sample", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* in = static_cast<const T*>(input);
    const T* g = static_cast<const T*>(grid);
    T* o = static_cast<T*>(out);
    const int64_t points = s.out_h * s.out_w, plane = s.in_h * s.in_w;
    parallel_for(s.batch * points, std::max<int64_t>(1, 4096 / std::max<int64_t>(s.channels, 1)), [&](int64_t begin, int64_t end) {
      for (int64_t job = begin; job < end; ++job) {
        const int64_t n = job / points, p = job % points;
        const Source<A> sx = source(up(g[2 * job]), s.in_w, padding, align_corners);
        const Source<A> sy = source(up(g[2 * job + 1]), s.in_h, padding, align_corners);
        const T* image = in + n * s.channels * plane;
        T* dst = o + n * s.channels * points + p;
        if (interpolation == GridInterpolation::kNearest) {
          int64_t offset = 0;
          const bool inside = nearest(sx.at, sy.at, s.in_h, s.in_w, offset);
          for (int64_t c = 0; c < s.channels; ++c) dst[c * points] = inside ? image[c * plane + offset] : T(0);
          continue;
        }
        const Bilinear<A> b(sx.at, sy.at);
        for (int64_t c = 0; c < s.channels; ++c) {
          const T* src = image + c * plane;
          A value = A(0);
          for (int dy = 0; dy < 2; ++dy) {
            for (int dx = 0; dx < 2; ++dx) {
              if (b.inside(dx, dy, s.in_h, s.in_w)) {
                value += up(src[(b.y0 + dy) * s.in_w + b.x0 + dx]) * b.wx(dx) * b.wy(dy);
              }
            }
          }
          dst[c * points] = down<T>(value);
        }
      }
    });
  });
}

void grid_sample_2d_backward(DType dtype, const GridSampleShape& s, GridInterpolation interpolation,
                             GridPadding padding, bool align_corners, const void* grad_out, const void* input,
                             const void* grid, void* grad_input, void* grad_grid) {
  dispatch_floating(dtype, "grid_sample backward", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* go = static_cast<const T*>(grad_out);
    const T* in = static_cast<const T*>(input);
    const T* g = static_cast<const T*>(grid);
    const int64_t points = s.out_h * s.out_w, plane = s.in_h * s.in_w;
    if (grad_grid != nullptr) {
      T* gg = static_cast<T*>(grad_grid);
      parallel_for(s.batch * points, std::max<int64_t>(1, 4096 / std::max<int64_t>(s.channels, 1)), [&](int64_t begin, int64_t end) {
        for (int64_t job = begin; job < end; ++job) {
          const int64_t n = job / points, p = job % points;
          A gx = A(0), gy = A(0);
          const Source<A> sx = source(up(g[2 * job]), s.in_w, padding, align_corners);
          const Source<A> sy = source(up(g[2 * job + 1]), s.in_h, padding, align_corners);
          if (interpolation == GridInterpolation::kBilinear) {  // nearest: piecewise constant, 0
            const Bilinear<A> b(sx.at, sy.at);
            for (int64_t c = 0; c < s.channels; ++c) {
              const T* src = in + (n * s.channels + c) * plane;
              const A gout = up(go[(n * s.channels + c) * points + p]);
              for (int dy = 0; dy < 2; ++dy) {
                for (int dx = 0; dx < 2; ++dx) {
                  if (!b.inside(dx, dy, s.in_h, s.in_w)) continue;
                  const A v = up(src[(b.y0 + dy) * s.in_w + b.x0 + dx]) * gout;
                  gx += v * (dx ? A(1) : A(-1)) * b.wy(dy);
                  gy += v * (dy ? A(1) : A(-1)) * b.wx(dx);
                }
              }
            }
          }
          gg[2 * job] = down<T>(gx * sx.slope);
          gg[2 * job + 1] = down<T>(gy * sy.slope);
        }
      });
    }
    if (grad_input != nullptr) {
      T* gi = static_cast<T*>(grad_input);
      // Each task owns whole (n, c) input planes and adds into them in point order.
      parallel_for(s.batch * s.channels, 1, [&](int64_t begin, int64_t end) {
        std::vector<A> acc(static_cast<size_t>(plane));
        for (int64_t nc = begin; nc < end; ++nc) {
          const int64_t n = nc / s.channels;
          std::fill(acc.begin(), acc.end(), A(0));
          for (int64_t p = 0; p < points; ++p) {
            const int64_t job = n * points + p;
            const A gout = up(go[nc * points + p]);
            const A xs = source(up(g[2 * job]), s.in_w, padding, align_corners).at;
            const A ys = source(up(g[2 * job + 1]), s.in_h, padding, align_corners).at;
            if (interpolation == GridInterpolation::kNearest) {
              int64_t offset = 0;
              if (nearest(xs, ys, s.in_h, s.in_w, offset)) acc[offset] += gout;
              continue;
            }
            const Bilinear<A> b(xs, ys);
            for (int dy = 0; dy < 2; ++dy) {
              for (int dx = 0; dx < 2; ++dx) {
                if (b.inside(dx, dy, s.in_h, s.in_w)) acc[(b.y0 + dy) * s.in_w + b.x0 + dx] += gout * b.wx(dx) * b.wy(dy);
              }
            }
          }
          for (int64_t k = 0; k < plane; ++k) gi[nc * plane + k] = down<T>(acc[k]);
        }
      });
    }
  });
}

}  // namespace torchneuron::kernels
