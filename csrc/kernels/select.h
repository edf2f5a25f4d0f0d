// Selection kernels over contiguous [outer, dim, inner] buffers (a SoftmaxShape): the index of
// the maximum or minimum along dim, and stable sort / top-k with their source indices. NaN
// counts as larger than every number, as in PyTorch.
#pragma once

#include <cstdint>

#include "kernels/nn.h"
#include "kernels/strided.h"

namespace torchneuron::kernels {

// values ([outer, inner], may be null) and indices get the first maximum (minimum) along dim;
// a NaN wins either way.
void arg_extremum(DType dtype, bool is_max, SoftmaxShape shape, const void* in, void* values, int64_t* indices);

// values and indices have the input's shape; a stable sort keeps ties in their original order.
void sort(DType dtype, SoftmaxShape shape, bool stable, bool descending, const void* in, void* values,
          int64_t* indices);

// values and indices are [outer, k, inner], in sorted order (largest first when `largest`).
void topk(DType dtype, SoftmaxShape shape, int64_t k, bool largest, const void* in, void* values, int64_t* indices);

// searchsorted: each value's insertion index into its row of `sorted` (the first position whose
// entry is >= the value, or > it when `right`; a NaN value goes last, as on CPU). Row r of
// values ([rows, per_row]) searches row r of sorted ([rows, length]), or the one row of a shared
// sequence. sorter (may be null): int64 [rows or 1, length], the positions that sort each row;
// an entry outside [0, length) raises KernelError. out: int64, or int32 when out_int32.
struct SearchShape {
  int64_t rows = 1, length = 0, per_row = 0;
  bool shared = true;
};
void searchsorted(DType dtype, const SearchShape& shape, const void* sorted, const int64_t* sorter, const void* values,
                  bool right, bool out_int32, void* out);

// torch.mode over `rows` contiguous lines of n (n > 0): each line's most frequent value, and the
// index of it that CPU PyTorch returns (values: [rows] of dtype, a real or bool dtype).
void mode(DType dtype, int64_t rows, int64_t n, const void* in, void* values, int64_t* indices);

}  // namespace torchneuron::kernels
