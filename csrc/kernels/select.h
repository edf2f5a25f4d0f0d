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

}  // namespace torchneuron::kernels
