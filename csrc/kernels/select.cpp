#include "kernels/select.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <type_traits>
#include <vector>

#include "kernels/dtype_dispatch.h"
#include "kernels/half.h"
#include "kernels/parallel.h"

namespace torchneuron::kernels {
namespace {

// The value a comparison sees: half types as float, others exactly.
template <typename T>
inline auto key(T value) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return static_cast<float>(value);
  } else {
    return value;
  }
}

template <typename K>
inline bool is_nan(K value) {
  if constexpr (std::is_floating_point_v<K>) {
    return std::isnan(value);
  } else {
    return false;
  }
}

// Strict "a sorts before b" in ascending order, NaN last.
template <typename K>
inline bool ascending(K a, K b) {
  return !is_nan(a) && (is_nan(b) || a < b);
}

int64_t line_grain(const SoftmaxShape& s) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(s.dim, 1)); }

// The elements of one line as (value, position) pairs, into `pairs` (reused across lines).
template <typename T, typename P>
void line_pairs(const SoftmaxShape& s, const T* x, int64_t base, std::vector<P>& pairs) {
  pairs.resize(static_cast<size_t>(s.dim));
  for (int64_t j = 0; j < s.dim; ++j) pairs[j] = {key(x[base + j * s.inner]), j};
}

// Calls f with a comparator object for the order, a type of its own so that the sort inlines
// it: through a function pointer, topk of 1024-element rows ran at a third of CPU speed.
template <typename F>
void with_order(bool descending, F&& f) {
  if (descending) {
    f([](const auto& a, const auto& b) { return ascending(b.first, a.first); });
  } else {
    f([](const auto& a, const auto& b) { return ascending(a.first, b.first); });
  }
}

inline int64_t line_base(const SoftmaxShape& s, int64_t line, int64_t dim) {
  return (line / s.inner) * dim * s.inner + line % s.inner;
}

}  // namespace

void arg_extremum(DType dtype, bool is_max, SoftmaxShape s, const void* in, void* values, int64_t* indices) {
  dispatch_real_dtype(dtype, "argmax/argmin", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in);
    T* v = static_cast<T*>(values);
    parallel_for(s.outer * s.inner, line_grain(s), [&](int64_t begin, int64_t end) {
      for (int64_t line = begin; line < end; ++line) {
        const int64_t base = (line / s.inner) * s.dim * s.inner + line % s.inner;
        int64_t best = 0;
        auto best_key = key(x[base]);
        for (int64_t j = 1; j < s.dim && !is_nan(best_key); ++j) {
          const auto candidate = key(x[base + j * s.inner]);
          if (is_nan(candidate) || (is_max ? best_key < candidate : candidate < best_key)) {
            best = j;
            best_key = candidate;
          }
        }
        indices[line] = best;
        if (v != nullptr) v[line] = x[base + best * s.inner];
      }
    });
  });
}

void sort(DType dtype, SoftmaxShape s, bool stable, bool descending, const void* in, void* values, int64_t* indices) {
  dispatch_real_dtype(dtype, "sort", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in);
    T* v = static_cast<T*>(values);
    with_order(descending, [&](auto before) {
      parallel_for(s.outer * s.inner, line_grain(s), [&](int64_t begin, int64_t end) {
        std::vector<std::pair<decltype(key(T{})), int64_t>> pairs;
        for (int64_t line = begin; line < end; ++line) {
          const int64_t base = line_base(s, line, s.dim);
          line_pairs(s, x, base, pairs);
          // Unstable sorts use std::sort as CPU PyTorch does, so ties come out in the same order.
          if (stable) {
            std::stable_sort(pairs.begin(), pairs.end(), before);
          } else {
            std::sort(pairs.begin(), pairs.end(), before);
          }
          for (int64_t j = 0; j < s.dim; ++j) {
            v[base + j * s.inner] = x[base + pairs[j].second * s.inner];
            indices[base + j * s.inner] = pairs[j].second;
          }
        }
      });
    });
  });
}

void topk(DType dtype, SoftmaxShape s, int64_t k, bool largest, const void* in, void* values, int64_t* indices) {
  dispatch_real_dtype(dtype, "topk", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in);
    T* v = static_cast<T*>(values);
    with_order(largest, [&](auto before) {
      parallel_for(s.outer * s.inner, line_grain(s), [&](int64_t begin, int64_t end) {
        std::vector<std::pair<decltype(key(T{})), int64_t>> pairs;
        for (int64_t line = begin; line < end; ++line) {
          const int64_t in_base = line_base(s, line, s.dim);
          line_pairs(s, x, in_base, pairs);
          // The selection strategy of CPU PyTorch (partial sort for small k, else nth_element
          // and a sort of the rest), so that ties are reported in the same order.
          if (k * 64 <= s.dim) {
            std::partial_sort(pairs.begin(), pairs.begin() + k, pairs.end(), before);
          } else if (k > 0) {
            std::nth_element(pairs.begin(), pairs.begin() + k - 1, pairs.end(), before);
            std::sort(pairs.begin(), pairs.begin() + k - 1, before);
          }
          const int64_t out_base = line_base(s, line, k);
          for (int64_t j = 0; j < k; ++j) {
            v[out_base + j * s.inner] = x[in_base + pairs[j].second * s.inner];
            indices[out_base + j * s.inner] = pairs[j].second;
          }
        }
      });
    });
  });
}

void searchsorted(DType dtype, const SearchShape& s, const void* sorted, const int64_t* sorter, const void* values,
                  bool right, bool out_int32, void* out) {
  if (sorter != nullptr) {
    const int64_t entries = (s.shared ? 1 : s.rows) * s.length;
    for (int64_t i = 0; i < entries; ++i) {
      if (sorter[i] < 0 || sorter[i] >= s.length) throw runtime::KernelError("torch.searchsorted(): sorter index out of range");
    }
  }
  dispatch_real_dtype(dtype, "searchsorted", [&](auto tag) {
    using T = decltype(tag);
    // Half types compare as float; the comparisons are CPU PyTorch's (!(entry >= v) moves right).
    using C = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;
    const T* seq = static_cast<const T*>(sorted);
    const T* vals = static_cast<const T*>(values);
    parallel_for(s.rows * s.per_row, 4096, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t row = s.shared ? 0 : i / s.per_row;
        const T* line = seq + row * s.length;
        const int64_t* order = sorter == nullptr ? nullptr : sorter + row * s.length;
        const C v = static_cast<C>(vals[i]);
        int64_t lo = 0, hi = s.length;
        while (lo < hi) {
          const int64_t mid = lo + ((hi - lo) >> 1);
          const C entry = static_cast<C>(line[order == nullptr ? mid : order[mid]]);
          if (right ? !(entry > v) : !(entry >= v)) {
            lo = mid + 1;
          } else {
            hi = mid;
          }
        }
        if (out_int32) {
          static_cast<int32_t*>(out)[i] = static_cast<int32_t>(lo);
        } else {
          static_cast<int64_t*>(out)[i] = lo;
        }
      }
    });
  });
}

// CPU PyTorch's mode: (value, index) pairs of a line put in order by value alone with
// std::sort (not stable: which index ends a run of equal values is std::sort's), runs counted
// in order, and the first longest run's last pair returned. NaNs never compare equal, so each
// is a run of one.
void mode(DType dtype, int64_t rows, int64_t n, const void* in, void* values, int64_t* indices) {
  if (rows == 0 || n == 0) return;
  dispatch_real_dtype(dtype, "mode", [&](auto tag) {
    using T = decltype(tag);
    using K = decltype(key(T{}));
    const T* src = static_cast<const T*>(in);
    T* dst = static_cast<T*>(values);
    parallel_for(rows, std::max<int64_t>(1, 16384 / n), [&](int64_t begin, int64_t end) {
      std::vector<std::pair<K, int64_t>> elements(static_cast<size_t>(n));
      for (int64_t r = begin; r < end; ++r) {
        const T* line = src + r * n;
        for (int64_t i = 0; i < n; ++i) elements[i] = {key(line[i]), i};
        std::sort(elements.begin(), elements.begin() + n, [](const auto& a, const auto& b) { return a.first < b.first; });
        int64_t best = 0, best_count = 0, count = 0;
        for (int64_t i = 0; i < n; ++i) {
          ++count;
          if (i == n - 1 || elements[i].first != elements[i + 1].first) {
            if (count > best_count) {
              best = elements[i].second;
              best_count = count;
            }
            count = 0;
          }
        }
        dst[r] = line[best];
        indices[r] = best;
      }
    });
  });
}

}  // namespace torchneuron::kernels
