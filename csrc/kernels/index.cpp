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
  index_put_rows(dtype, 1, rows, cols, index, count, values, 0, cols, data, accumulate);
}

void index_put_rows(DType dtype, int64_t outer, int64_t rows, int64_t cols, const int64_t* index, int64_t count,
                    const void* values, int64_t value_block_stride, int64_t value_row_stride, void* data,
                    bool accumulate, bool wrap_negative) {
  const int64_t lowest = wrap_negative ? -rows : 0;
  for (int64_t i = 0; i < count; ++i) {
    if (index[i] < lowest || index[i] >= rows) {
      throw runtime::KernelError("index " + std::to_string(index[i]) + " is out of bounds for a dimension of size " +
                                 std::to_string(rows));
    }
  }
  dispatch_real_dtype(dtype, "index_put", [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(values);
    T* dst = static_cast<T*>(data);
    // Tasks own (block, column range) pairs, so rows written more than once are written in index order.
    // Column ranges of at least 64 only where the blocks alone are too few to keep the pool busy.
    const int64_t wanted = (4 * compute_threads() + outer - 1) / outer;
    const int64_t col_chunks = std::clamp<int64_t>(std::min(wanted, cols / 64), 1, cols);
    const int64_t chunk = (cols + col_chunks - 1) / col_chunks;
    parallel_for(outer * col_chunks, std::max<int64_t>(1, 16384 / std::max<int64_t>(count * chunk, 1)),
                 [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t o = task / col_chunks, c0 = (task % col_chunks) * chunk, c1 = std::min(cols, c0 + chunk);
        T* block = dst + o * rows * cols;
        const T* block_values = src + o * value_block_stride;
        for (int64_t i = 0; i < count; ++i) {
          T* row = block + (index[i] < 0 ? index[i] + rows : index[i]) * cols;
          const T* from = block_values + i * value_row_stride;
          for (int64_t c = c0; c < c1; ++c) {
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
      }
    });
  });
}

}  // namespace torchneuron::kernels
