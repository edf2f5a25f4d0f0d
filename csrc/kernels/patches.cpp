#include "kernels/patches.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/dtype_dispatch.h"
#include "kernels/floating.h"
#include "kernels/parallel.h"

namespace torchneuron::kernels {
namespace {

// One row of columns per (image, channel, kernel tap): the tap's reads across all blocks.
template <typename E>
void im2col_typed(const PatchShape& s, const E* image, E* columns) {
  const int64_t blocks_h = s.blocks_h(), blocks_w = s.blocks_w(), blocks = blocks_h * blocks_w;
  const int64_t taps = s.kernel_h * s.kernel_w;
  parallel_for(s.batch * s.channels * taps, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, blocks)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t row = begin; row < end; ++row) {
                   const int64_t plane = row / taps, tap = row % taps;
                   const int64_t i = tap / s.kernel_w, j = tap % s.kernel_w;
                   const E* in = image + plane * s.height * s.width;
                   E* out = columns + row * blocks;
                   for (int64_t by = 0; by < blocks_h; ++by) {
                     const int64_t y = by * s.stride_h - s.pad_h + i * s.dilation_h;
                     E* line = out + by * blocks_w;
                     if (y < 0 || y >= s.height) {
                       std::fill(line, line + blocks_w, E{});
                       continue;
                     }
                     for (int64_t bx = 0; bx < blocks_w; ++bx) {
                       const int64_t x = bx * s.stride_w - s.pad_w + j * s.dilation_w;
                       line[bx] = x < 0 || x >= s.width ? E{} : in[y * s.width + x];
                     }
                   }
                 }
               });
}

}  // namespace

void im2col(DType dtype, const PatchShape& s, const void* image, void* columns) {
  dispatch_element_size(dtype, "im2col", [&](auto tag) {
    using E = decltype(tag);
    im2col_typed(s, static_cast<const E*>(image), static_cast<E*>(columns));
  });
}

// Each task owns whole (image, channel) planes and adds taps in order: deterministic.
void col2im(DType dtype, const PatchShape& s, const void* columns, void* image) {
  dispatch_floating(dtype, "col2im", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* cols = static_cast<const T*>(columns);
    T* img = static_cast<T*>(image);
    const int64_t blocks_h = s.blocks_h(), blocks_w = s.blocks_w(), blocks = blocks_h * blocks_w;
    const int64_t taps = s.kernel_h * s.kernel_w, area = s.height * s.width;
    parallel_for(s.batch * s.channels, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, taps * blocks)),
                 [&](int64_t begin, int64_t end) {
                   std::vector<A> sums(static_cast<size_t>(area));
                   for (int64_t plane = begin; plane < end; ++plane) {
                     std::fill(sums.begin(), sums.end(), A(0));
                     for (int64_t tap = 0; tap < taps; ++tap) {
                       const int64_t i = tap / s.kernel_w, j = tap % s.kernel_w;
                       const T* row = cols + (plane * taps + tap) * blocks;
                       for (int64_t by = 0; by < blocks_h; ++by) {
                         const int64_t y = by * s.stride_h - s.pad_h + i * s.dilation_h;
                         if (y < 0 || y >= s.height) continue;
                         for (int64_t bx = 0; bx < blocks_w; ++bx) {
                           const int64_t x = bx * s.stride_w - s.pad_w + j * s.dilation_w;
                           if (x >= 0 && x < s.width) sums[y * s.width + x] += up(row[by * blocks_w + bx]);
                         }
                       }
                     }
                     T* out = img + plane * area;
                     for (int64_t k = 0; k < area; ++k) out[k] = down<T>(sums[k]);
                   }
                 });
  });
}

// Position p of the unfolded dimension is element p - w * step of every window w that covers
// it; each output element sums those in window order (a gather: no two tasks write one element).
void unfold_backward(DType dtype, const UnfoldShape& s, const void* grad_in, void* grad) {
  dispatch_floating(dtype, "unfold_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* g = static_cast<const T*>(grad_in);
    T* out = static_cast<T*>(grad);
    parallel_for(s.outer * s.length, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, s.inner)),
                 [&](int64_t begin, int64_t end) {
                   std::vector<A> sums(static_cast<size_t>(s.inner));
                   for (int64_t row = begin; row < end; ++row) {
                     const int64_t o = row / s.length, p = row % s.length;
                     // Windows w with w * step <= p < w * step + size.
                     const int64_t first = p >= s.size ? (p - s.size) / s.step + 1 : 0;
                     const int64_t last = std::min(s.windows - 1, p / s.step);
                     std::fill(sums.begin(), sums.end(), A(0));
                     for (int64_t w = first; w <= last; ++w) {
                       const int64_t j = p - w * s.step;
                       const T* window = g + ((o * s.windows + w) * s.inner) * s.size + j;
                       for (int64_t k = 0; k < s.inner; ++k) sums[k] += up(window[k * s.size]);
                     }
                     T* line = out + row * s.inner;
                     for (int64_t k = 0; k < s.inner; ++k) line[k] = down<T>(sums[k]);
                   }
                 });
  });
}

}  // namespace torchneuron::kernels
