// Iteration over one or two same-shaped strided views: dimensions are coalesced, then the
// innermost run is handed to a callback as (pointers, count, strides in bytes).
#pragma once

#include <cstdint>

#include "kernels/strided.h"

namespace torchneuron::kernels {

// Shapes and byte strides of up to two operands after merging dimensions that are
// contiguous with each other in every operand.
struct CoalescedShape {
  int ndim = 0;
  int64_t sizes[kMaxDims];
  int64_t strides[2][kMaxDims];  // bytes, per operand
};

CoalescedShape coalesce(const StridedView* views, int count);

// Calls inner(ptrs, n, byte_strides) for every innermost run of elements.
template <int kOperands, typename Inner>
void for_each_run(const CoalescedShape& shape, char* const (&base)[kOperands], Inner&& inner) {
  if (shape.ndim == 0) {
    const int64_t zero[kOperands] = {};
    inner(base, int64_t{1}, zero);
    return;
  }
  const int last = shape.ndim - 1;
  int64_t inner_strides[kOperands];
  for (int k = 0; k < kOperands; ++k) inner_strides[k] = shape.strides[k][last];
  int64_t index[kMaxDims] = {};
  char* ptrs[kOperands];
  for (int k = 0; k < kOperands; ++k) ptrs[k] = base[k];
  for (;;) {
    inner(ptrs, shape.sizes[last], inner_strides);
    int d = last - 1;
    for (; d >= 0; --d) {
      ++index[d];
      for (int k = 0; k < kOperands; ++k) ptrs[k] += shape.strides[k][d];
      if (index[d] < shape.sizes[d]) break;
      for (int k = 0; k < kOperands; ++k) ptrs[k] -= shape.strides[k][d] * shape.sizes[d];
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace torchneuron::kernels
