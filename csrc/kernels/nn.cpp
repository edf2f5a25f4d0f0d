#include "kernels/nn.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/dtype_dispatch.h"
#include "kernels/floating.h"
#include "kernels/half.h"

namespace torchneuron::kernels {
bool nn_supported(DType dtype) { return is_floating_dtype(dtype); }

void histc(DType dtype, int64_t numel, const void* self, int64_t bins, double min, double max, void* out) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(self);
    std::vector<int64_t> counts(static_cast<size_t>(bins), 0);
    for (int64_t i = 0; i < numel; ++i) {
      double value;
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        value = static_cast<double>(static_cast<float>(x[i]));
      } else {
        value = static_cast<double>(x[i]);
      }
      if (!(value >= min && value <= max)) continue;  // also skips NaN
      auto bin = static_cast<int64_t>((value - min) * static_cast<double>(bins) / (max - min));
      counts[static_cast<size_t>(std::min(bin, bins - 1))] += 1;
    }
    T* o = static_cast<T*>(out);
    for (int64_t b = 0; b < bins; ++b) {
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        o[b] = T(static_cast<float>(counts[b]));
      } else {
        o[b] = static_cast<T>(counts[b]);
      }
    }
  };
  dispatch_real_dtype(dtype, "histc", run);
}

void masked_compact(int64_t numel, int64_t element_bytes, const char* self, const bool* mask, char* out) {
  for (int64_t i = 0; i < numel; ++i) {
    if (!mask[i]) continue;
    std::memcpy(out, self + i * element_bytes, static_cast<size_t>(element_bytes));
    out += element_bytes;
  }
}

void nonzero_coordinates(int ndim, const int64_t* sizes, const bool* mask, int64_t* out) {
  int64_t numel = 1;
  for (int d = 0; d < ndim; ++d) numel *= sizes[d];
  std::vector<int64_t> index(static_cast<size_t>(ndim), 0);
  for (int64_t i = 0; i < numel; ++i) {
    if (mask[i]) {
      for (int d = 0; d < ndim; ++d) *out++ = index[d];
    }
    for (int d = ndim - 1; d >= 0; --d) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
  }
}

void arange(DType dtype, int64_t count, double start, double step, int64_t int_start, int64_t int_step, void* out) {
  auto fill = [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out);
    for (int64_t i = 0; i < count; ++i) {
      if constexpr (std::is_integral_v<T>) {
        o[i] = static_cast<T>(int_start + i * int_step);
      } else {
        o[i] = down<T>(start + static_cast<double>(i) * step);
      }
    }
  };
  dispatch_real_dtype(dtype, "arange", fill);
}

}  // namespace torchneuron::kernels
