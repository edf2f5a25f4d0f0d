#include "kernels/pool.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/floating.h"
#include "kernels/parallel.h"

namespace torchneuron::kernels {
namespace {

// Planes per task for `work` units per plane.
int64_t grain_for(int64_t work) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, work)); }

// The taps t in [lo, hi) of a window along one axis whose positions start + t * dilation fall
// inside [0, size): the max pool's loops then need no bounds test.
struct TapRange {
  int64_t start, lo, hi;
  TapRange(int64_t first, int64_t kernel, int64_t dilation, int64_t size)
      : start(first),
        lo(first < 0 ? (-first + dilation - 1) / dilation : 0),
        hi(first >= size ? 0 : std::min(kernel, (size - first + dilation - 1) / dilation)) {}
};

// Calls run(stride) with stride_w as a compile-time constant for the common strides 1 and 2,
// so that loops over a row of windows vectorize (a strided load becomes a few shuffles).
template <typename Run>
void with_constant_stride(int64_t stride_w, Run&& run) {
  if (stride_w == 1) {
    run(std::integral_constant<int64_t, 1>());
  } else if (stride_w == 2) {
    run(std::integral_constant<int64_t, 2>());
  } else {
    run(stride_w);
  }
}

// The tap ranges of each of `out` windows along one axis, computed once per call: their
// divisions cost more than a small window's compares.
std::vector<TapRange> tap_ranges(int64_t out, int64_t stride, int64_t pad, int64_t kernel, int64_t dilation,
                                 int64_t size) {
  std::vector<TapRange> ranges;
  ranges.reserve(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) ranges.emplace_back(o * stride - pad, kernel, dilation, size);
  return ranges;
}

// One window's maximum and its flat position, tap by tap in memory order. Selects without
// branches (random data mispredicts them): the first of equal maxima, and each NaN takes over,
// as on CPU. An empty window keeps -inf and -1.
template <typename T>
void max_window(const T* plane, const PoolShape& s, const PoolWindow& k, const TapRange& rd, const TapRange& rh,
                const TapRange& rw, T* out, int64_t* index) {
  int64_t best = -1;
  Acc<T> best_value = -std::numeric_limits<Acc<T>>::infinity();
  for (int64_t a = rd.lo; a < rd.hi; ++a) {
    const int64_t d = rd.start + a * k.dilation_d;
    for (int64_t i = rh.lo; i < rh.hi; ++i) {
      const int64_t h = rh.start + i * k.dilation_h;
      for (int64_t j = rw.lo; j < rw.hi; ++j) {
        const int64_t position = (d * s.in_h + h) * s.in_w + rw.start + j * k.dilation_w;
        const Acc<T> v = up(plane[position]);
        const bool take = (v > best_value) | (v != v) | (best < 0);
        best = take ? position : best;
        best_value = take ? v : best_value;
      }
    }
  }
  *out = down<T>(best_value);
  *index = best;
}

// kLanes adjacent windows of a row whose taps all lie inside the input, at once: values and
// positions in registers of the same lane count (positions as wide as the values).
template <typename A>
struct WindowLanes {
  static constexpr int kLanes = 32 / static_cast<int>(sizeof(A));
  using Position = std::conditional_t<sizeof(A) == 4, int32_t, int64_t>;
  typedef A Values __attribute__((vector_size(32)));
  typedef Position Positions __attribute__((vector_size(32)));
};

inline int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
inline int64_t adaptive_end(int64_t o, int64_t in, int64_t out) { return ((o + 1) * in + out - 1) / out; }

}  // namespace

void max_pool(DType dtype, PoolShape s, PoolWindow k, const void* in_data, void* out_data, int64_t* indices) {
  dispatch_floating(dtype, "max_pool", [&](auto tag) {
    using T = decltype(tag);
    using Lanes = WindowLanes<Acc<T>>;
    using Position = typename Lanes::Position;
    using Values = typename Lanes::Values;
    using Positions = typename Lanes::Positions;
    constexpr int L = Lanes::kLanes;
    const T* in = static_cast<const T*>(in_data);
    T* out = static_cast<T*>(out_data);
    const int64_t in_plane = s.in_d * s.in_h * s.in_w, out_plane = s.out_d * s.out_h * s.out_w;
    const auto rds = tap_ranges(s.out_d, k.stride_d, k.pad_d, k.kernel_d, k.dilation_d, s.in_d);
    const auto rhs = tap_ranges(s.out_h, k.stride_h, k.pad_h, k.kernel_h, k.dilation_h, s.in_h);
    const auto rws = tap_ranges(s.out_w, k.stride_w, k.pad_w, k.kernel_w, k.dilation_w, s.in_w);
    // The outputs [inner_begin, inner_end) of a row have every tap along w inside the input.
    int64_t inner_begin = 0, inner_end = 0;
    while (inner_begin < s.out_w && rws[inner_begin].lo != 0) ++inner_begin;
    for (inner_end = inner_begin; inner_end < s.out_w && rws[inner_end].lo == 0 && rws[inner_end].hi == k.kernel_w;) ++inner_end;
    const bool lanes_fit = inner_end - inner_begin >= L && in_plane <= std::numeric_limits<Position>::max();
    Positions lane_steps;
    for (int l = 0; l < L; ++l) lane_steps[l] = static_cast<Position>(l * k.stride_w);

    // Windows [ow, ow + L) of the row (d taps rd, h taps rh), all inside along w.
    auto lane_windows = [&](auto stride_w, const T* plane, const TapRange& rd, const TapRange& rh, int64_t ow, int64_t at) {
      Values best{};
      Positions where{};
      bool first_tap = true;
      for (int64_t a = rd.lo; a < rd.hi; ++a) {
        const int64_t d = rd.start + a * k.dilation_d;
        for (int64_t i = rh.lo; i < rh.hi; ++i) {
          const int64_t row = (d * s.in_h + rh.start + i * k.dilation_h) * s.in_w;
          for (int64_t j = 0; j < k.kernel_w; ++j) {
            const int64_t start = row + ow * stride_w - k.pad_w + j * k.dilation_w;
            typename Lanes::Values v;
            for (int l = 0; l < L; ++l) v[l] = up(plane[start + l * stride_w]);
            const Positions position = static_cast<Position>(start) + lane_steps;
            if (first_tap) {
              best = v;
              where = position;
              first_tap = false;
              continue;
            }
            const Positions take = (v > best) | (v != v);
            best = take ? v : best;
            where = take ? position : where;
          }
        }
      }
      for (int l = 0; l < L; ++l) {
        out[at + l] = down<T>(best[l]);
        indices[at + l] = where[l];
      }
    };

    auto run = [&](auto stride_w) {
      parallel_for(s.planes, grain_for(out_plane * k.kernel_d * k.kernel_h * k.kernel_w), [&](int64_t begin, int64_t end) {
        for (int64_t p = begin; p < end; ++p) {
          const T* plane = in + p * in_plane;
          for (int64_t od = 0; od < s.out_d; ++od) {
            const TapRange& rd = rds[od];
            for (int64_t oh = 0; oh < s.out_h; ++oh) {
              const TapRange& rh = rhs[oh];
              const int64_t at = p * out_plane + (od * s.out_h + oh) * s.out_w;
              auto one = [&](int64_t ow) { max_window(plane, s, k, rd, rh, rws[ow], out + at + ow, indices + at + ow); };
              int64_t ow = 0;
              if (lanes_fit && rd.lo < rd.hi && rh.lo < rh.hi) {
                for (; ow < inner_begin; ++ow) one(ow);
                // The last block may overlap the one before it: its windows come out the same.
                for (; ow < inner_end; ow += L) {
                  const int64_t first = std::min(ow, inner_end - L);
                  lane_windows(stride_w, plane, rd, rh, first, at + first);
                }
                ow = inner_end;
              }
              for (; ow < s.out_w; ++ow) one(ow);
            }
          }
        }
      });
    };
    with_constant_stride(k.stride_w, run);
  });
}

void max_pool_backward(DType dtype, PoolShape s, const void* grad_out, const int64_t* indices, void* grad_in) {
  dispatch_floating(dtype, "max_pool_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* go = static_cast<const T*>(grad_out);
    T* gi = static_cast<T*>(grad_in);
    const int64_t in_plane = s.in_d * s.in_h * s.in_w, out_plane = s.out_d * s.out_h * s.out_w;
    parallel_for(s.planes, grain_for(out_plane), [&](int64_t begin, int64_t end) {
      std::vector<Acc<T>> sums(static_cast<size_t>(in_plane));
      for (int64_t p = begin; p < end; ++p) {
        std::fill(sums.begin(), sums.end(), Acc<T>(0));
        for (int64_t o = 0; o < out_plane; ++o) {
          const int64_t at = p * out_plane + o;
          if (indices[at] >= 0) sums[indices[at]] += up(go[at]);
        }
        T* plane = gi + p * in_plane;
        for (int64_t i = 0; i < in_plane; ++i) plane[i] = down<T>(sums[i]);
      }
    });
  });
}

namespace {

// Along one axis, output o's averaging window clipped to the input, [begin, end), and its
// length clipped only to the padded input (what count_include_pad divides by).
struct AvgSpan {
  int64_t begin, end, padded;
};

std::vector<AvgSpan> avg_spans(int64_t out, int64_t in, int64_t kernel, int64_t stride, int64_t pad) {
  std::vector<AvgSpan> spans;
  spans.reserve(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * stride - pad, stop = std::min(start + kernel, in + pad);
    spans.push_back({std::max<int64_t>(start, 0), std::min(stop, in), stop - start});
  }
  return spans;
}

// The spans of each axis, the divisor of every window of a row along w, and per tap j of a
// window along w, the outputs [lo[j], hi[j]) of a row whose tap lies inside the input (at
// column first[j] + ow * stride_w): rows of windows then sum (or spread) tap by tap in loops
// over the row that vectorize.
template <typename A>
struct AvgPlan {
  std::vector<AvgSpan> d, h, w;
  std::vector<int64_t> first, lo, hi;
  bool count_include_pad;
  int64_t divisor_override;

  AvgPlan(const PoolShape& s, const PoolWindow& k, bool include_pad, int64_t override_divisor)
      : d(avg_spans(s.out_d, s.in_d, k.kernel_d, k.stride_d, k.pad_d)),
        h(avg_spans(s.out_h, s.in_h, k.kernel_h, k.stride_h, k.pad_h)),
        w(avg_spans(s.out_w, s.in_w, k.kernel_w, k.stride_w, k.pad_w)),
        count_include_pad(include_pad),
        divisor_override(override_divisor) {
    for (int64_t j = 0; j < k.kernel_w; ++j) {
      const int64_t offset = j - k.pad_w;
      const int64_t begin = std::min(s.out_w, offset < 0 ? (-offset + k.stride_w - 1) / k.stride_w : 0);
      const int64_t end = offset >= s.in_w ? 0 : (s.in_w - offset + k.stride_w - 1) / k.stride_w;
      first.push_back(offset);
      lo.push_back(begin);
      hi.push_back(std::max(begin, std::min(s.out_w, end)));
    }
  }

  // Divisors of the row (od, oh)'s windows.
  void row_divisors(int64_t od, int64_t oh, A* divisors) const {
    const AvgSpan &sd = d[od], &sh = h[oh];
    for (size_t ow = 0; ow < w.size(); ++ow) {
      const AvgSpan& sw = w[ow];
      double divisor;
      if (divisor_override != 0) {
        divisor = static_cast<double>(divisor_override);
      } else if (count_include_pad) {
        divisor = static_cast<double>(sd.padded * sh.padded * sw.padded);
      } else {
        divisor = static_cast<double>((sd.end - sd.begin) * (sh.end - sh.begin) * (sw.end - sw.begin));
      }
      divisors[ow] = static_cast<A>(divisor);
    }
  }
};

}  // namespace

void avg_pool(DType dtype, PoolShape s, PoolWindow k, bool count_include_pad, int64_t divisor_override,
              const void* in_data, void* out_data) {
  dispatch_floating(dtype, "avg_pool", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* in = static_cast<const T*>(in_data);
    T* out = static_cast<T*>(out_data);
    const int64_t in_plane = s.in_d * s.in_h * s.in_w, out_plane = s.out_d * s.out_h * s.out_w;
    const AvgPlan<A> plan(s, k, count_include_pad, divisor_override);
    auto run = [&](auto stride_w) {
      parallel_for(s.planes, grain_for(out_plane * k.kernel_d * k.kernel_h * k.kernel_w), [&](int64_t begin, int64_t end) {
        std::vector<A> sums(static_cast<size_t>(s.out_w)), divisors(sums.size());
        A* sum = sums.data();
        for (int64_t p = begin; p < end; ++p) {
          const T* plane = in + p * in_plane;
          for (int64_t od = 0; od < s.out_d; ++od) {
            for (int64_t oh = 0; oh < s.out_h; ++oh) {
              std::fill(sums.begin(), sums.end(), A(0));
              for (int64_t d = plan.d[od].begin; d < plan.d[od].end; ++d) {
                for (int64_t h = plan.h[oh].begin; h < plan.h[oh].end; ++h) {
                  const T* row = plane + (d * s.in_h + h) * s.in_w;
                  for (int64_t j = 0; j < k.kernel_w; ++j) {
                    const T* tap = row + plan.first[j];
                    const int64_t ow_end = plan.hi[j];
                    for (int64_t ow = plan.lo[j]; ow < ow_end; ++ow) sum[ow] += up(tap[ow * stride_w]);
                  }
                }
              }
              plan.row_divisors(od, oh, divisors.data());
              T* out_row = out + p * out_plane + (od * s.out_h + oh) * s.out_w;
              for (int64_t ow = 0; ow < s.out_w; ++ow) out_row[ow] = down<T>(sum[ow] / divisors[ow]);
            }
          }
        }
      });
    };
    with_constant_stride(k.stride_w, run);
  });
}

void avg_pool_backward(DType dtype, PoolShape s, PoolWindow k, bool count_include_pad, int64_t divisor_override,
                       const void* grad_out, void* grad_in) {
  dispatch_floating(dtype, "avg_pool_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* go = static_cast<const T*>(grad_out);
    T* gi = static_cast<T*>(grad_in);
    const int64_t in_plane = s.in_d * s.in_h * s.in_w, out_plane = s.out_d * s.out_h * s.out_w;
    const AvgPlan<A> plan(s, k, count_include_pad, divisor_override);
    auto run = [&](auto stride_w) {
      parallel_for(s.planes, grain_for(out_plane * k.kernel_d * k.kernel_h * k.kernel_w), [&](int64_t begin, int64_t end) {
        std::vector<A> sums(static_cast<size_t>(in_plane)), shares(static_cast<size_t>(s.out_w));
        A* share = shares.data();
        for (int64_t p = begin; p < end; ++p) {
          std::fill(sums.begin(), sums.end(), A(0));
          for (int64_t od = 0; od < s.out_d; ++od) {
            for (int64_t oh = 0; oh < s.out_h; ++oh) {
              const T* go_row = go + p * out_plane + (od * s.out_h + oh) * s.out_w;
              plan.row_divisors(od, oh, share);
              for (int64_t ow = 0; ow < s.out_w; ++ow) share[ow] = up(go_row[ow]) / share[ow];
              for (int64_t d = plan.d[od].begin; d < plan.d[od].end; ++d) {
                for (int64_t h = plan.h[oh].begin; h < plan.h[oh].end; ++h) {
                  A* row = sums.data() + (d * s.in_h + h) * s.in_w;
                  for (int64_t j = 0; j < k.kernel_w; ++j) {
                    // One tap of distinct windows: distinct elements, so the loop vectorizes.
                    A* tap = row + plan.first[j];
                    const int64_t ow_end = plan.hi[j];
                    for (int64_t ow = plan.lo[j]; ow < ow_end; ++ow) tap[ow * stride_w] += share[ow];
                  }
                }
              }
            }
          }
          T* plane = gi + p * in_plane;
          for (int64_t i = 0; i < in_plane; ++i) plane[i] = down<T>(sums[i]);
        }
      });
    };
    with_constant_stride(k.stride_w, run);
  });
}

namespace {

// Adaptive pooling's cells along one axis: output o covers input [starts[o], ends[o]),
// computed once per call (two divisions per output cost as much as a small cell).
struct AdaptiveSpans {
  std::vector<int64_t> starts, ends;
  AdaptiveSpans(int64_t in, int64_t out) {
    for (int64_t o = 0; o < out; ++o) {
      starts.push_back(adaptive_start(o, in, out));
      ends.push_back(adaptive_end(o, in, out));
    }
  }
};

}  // namespace

void adaptive_avg_pool2d(DType dtype, PlaneShape s, const void* in_data, void* out_data) {
  dispatch_floating(dtype, "adaptive_avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* in = static_cast<const T*>(in_data);
    T* out = static_cast<T*>(out_data);
    const AdaptiveSpans hs(s.in_h, s.out_h), ws(s.in_w, s.out_w);
    parallel_for(s.planes, grain_for(s.in_h * s.in_w), [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const T* plane = in + p * s.in_h * s.in_w;
        for (int64_t oh = 0; oh < s.out_h; ++oh) {
          const int64_t h0 = hs.starts[oh], h1 = hs.ends[oh];
          for (int64_t ow = 0; ow < s.out_w; ++ow) {
            const int64_t w0 = ws.starts[ow], w1 = ws.ends[ow];
            A sum = 0;
            for (int64_t h = h0; h < h1; ++h) {
              for (int64_t w = w0; w < w1; ++w) sum += up(plane[h * s.in_w + w]);
            }
            out[(p * s.out_h + oh) * s.out_w + ow] = down<T>(sum / static_cast<A>((h1 - h0) * (w1 - w0)));
          }
        }
      }
    });
  });
}

void adaptive_max_pool2d(DType dtype, PlaneShape s, const void* in_data, void* out_data, int64_t* indices) {
  dispatch_floating(dtype, "adaptive_max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* in = static_cast<const T*>(in_data);
    T* out = static_cast<T*>(out_data);
    const AdaptiveSpans hs(s.in_h, s.out_h), ws(s.in_w, s.out_w);
    parallel_for(s.planes, grain_for(s.in_h * s.in_w), [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const T* plane = in + p * s.in_h * s.in_w;
        for (int64_t oh = 0; oh < s.out_h; ++oh) {
          const int64_t h0 = hs.starts[oh], h1 = hs.ends[oh];
          for (int64_t ow = 0; ow < s.out_w; ++ow) {
            const int64_t w0 = ws.starts[ow], w1 = ws.ends[ow];
            // Selects, not branches (as max_window): the first maximum; each NaN takes over.
            int64_t best = h0 * s.in_w + w0;
            A best_value = -std::numeric_limits<A>::infinity();
            for (int64_t h = h0; h < h1; ++h) {
              for (int64_t w = w0; w < w1; ++w) {
                const A v = up(plane[h * s.in_w + w]);
                const bool take = (v > best_value) | (v != v);
                best = take ? h * s.in_w + w : best;
                best_value = take ? v : best_value;
              }
            }
            const int64_t at = (p * s.out_h + oh) * s.out_w + ow;
            out[at] = plane[best];
            indices[at] = best;
          }
        }
      }
    });
  });
}

void adaptive_avg_pool2d_backward(DType dtype, PlaneShape s, const void* grad_out, void* grad_in) {
  dispatch_floating(dtype, "adaptive_avg_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* go = static_cast<const T*>(grad_out);
    T* gi = static_cast<T*>(grad_in);
    const AdaptiveSpans hs(s.in_h, s.out_h), ws(s.in_w, s.out_w);
    parallel_for(s.planes, grain_for(s.in_h * s.in_w), [&](int64_t begin, int64_t end) {
      std::vector<A> sums(static_cast<size_t>(s.in_h * s.in_w));
      for (int64_t p = begin; p < end; ++p) {
        std::fill(sums.begin(), sums.end(), A(0));
        for (int64_t oh = 0; oh < s.out_h; ++oh) {
          const int64_t h0 = hs.starts[oh], h1 = hs.ends[oh];
          for (int64_t ow = 0; ow < s.out_w; ++ow) {
            const int64_t w0 = ws.starts[ow], w1 = ws.ends[ow];
            const A share = up(go[(p * s.out_h + oh) * s.out_w + ow]) / static_cast<A>((h1 - h0) * (w1 - w0));
            for (int64_t h = h0; h < h1; ++h) {
              for (int64_t w = w0; w < w1; ++w) sums[h * s.in_w + w] += share;
            }
          }
        }
        T* plane = gi + p * s.in_h * s.in_w;
        for (int64_t i = 0; i < s.in_h * s.in_w; ++i) plane[i] = down<T>(sums[i]);
      }
    });
  });
}

}  // namespace torchneuron::kernels
