#include "kernels/index.h"

#include <algorithm>
#include <string>
#include <type_traits>

#include "kernels/dtype_dispatch.h"
#include "kernels/floating.h"
#include "kernels/parallel.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {

void linear_index(const std::vector<IndexOperand>& operands, int64_t count, int64_t* out) {
  std::vector<int64_t> multipliers(operands.size(), 1);
  for (size_t k = operands.size(); k-- > 1;) multipliers[k - 1] = multipliers[k] * operands[k].size;
  parallel_for(count, 16384, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t flat = 0;
      for (size_t k = 0; k < operands.size(); ++k) {
        const IndexOperand& op = operands[k];
        int64_t value = op.data[i];
        if (value < -op.size || value >= op.size) {
          throw runtime::KernelError("index " + std::to_string(value) + " is out of bounds for dimension " +
                                     std::to_string(op.dim) + " with size " + std::to_string(op.size));
        }
        if (value < 0) value += op.size;
        flat += value * multipliers[k];
      }
      out[i] = flat;
    }
  });
}

void index_put_rows(DType dtype, int64_t rows, int64_t cols, const int64_t* index, int64_t count, const void* values,
                    void* data, bool accumulate) {
  for (int64_t i = 0; i < count; ++i) {
    if (index[i] < 0 || index[i] >= rows) {
      throw runtime::KernelError("index " + std::to_string(index[i]) + " is out of bounds for a dimension of size " +
                                 std::to_string(rows));
    }
  }
  dispatch_real_dtype(dtype, "index_put", [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(values);
    T* dst = static_cast<T*>(data);
    // Threads own column ranges, so rows written more than once are written in index order.
    parallel_for(cols, std::max<int64_t>(1, 16384 / std::max<int64_t>(count, 1)), [&](int64_t begin, int64_t end) {
      for (int64_t i = 0; i < count; ++i) {
        T* row = dst + index[i] * cols;
        const T* from = src + i * cols;
        for (int64_t c = begin; c < end; ++c) {
          if (!accumulate) {
            row[c] = from[c];
          } else if constexpr (std::is_same_v<T, bool>) {
            row[c] = row[c] || from[c];
          } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
            row[c] = T(static_cast<float>(row[c]) + static_cast<float>(from[c]));
          } else {
            row[c] = static_cast<T>(row[c] + from[c]);
          }
        }
      }
    });
  });
}

}  // namespace torchneuron::kernels
