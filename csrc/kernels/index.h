// Advanced-indexing kernels: the flat row number of each element of several broadcast index
// tensors (negative indices wrapped, out-of-range ones raised), and row writes by index
// (index_put with or without accumulation).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/strided.h"

namespace torchneuron::kernels {

// One index tensor of `count` contiguous int64 values addressing dimension `dim` (for error
// messages) of size `size`.
struct IndexOperand {
  const int64_t* data = nullptr;
  int64_t size = 0;
  int64_t dim = 0;
};

// out[i] = sum over k of wrap(operands[k].data[i]) * (product of the later operands' sizes).
// Throws KernelError naming the dimension for an index outside [-size, size).
void linear_index(const std::vector<IndexOperand>& operands, int64_t count, int64_t* out);

// data: [rows, cols] contiguous; values: [count, cols] contiguous; index: count rows in
// [0, rows). accumulate: data[index[i]] += values[i]; else data[index[i]] = values[i], the last
// write winning. Throws KernelError for an index outside [0, rows).
void index_put_rows(DType dtype, int64_t rows, int64_t cols, const int64_t* index, int64_t count, const void* values,
                    void* data, bool accumulate);

// The same for each of `outer` blocks: data [outer, rows, cols] contiguous, block o's value row
// i at values + o * value_block_stride + i * value_row_stride elements (strides of 0 broadcast
// one row of cols values, as index_fill does). wrap_negative: indices in [-rows, 0) count from
// the end (index_fill's rule; index_add and index_copy reject them).
void index_put_rows(DType dtype, int64_t outer, int64_t rows, int64_t cols, const int64_t* index, int64_t count,
                    const void* values, int64_t value_block_stride, int64_t value_row_stride, void* data,
                    bool accumulate, bool wrap_negative = false);

}  // namespace torchneuron::kernels
