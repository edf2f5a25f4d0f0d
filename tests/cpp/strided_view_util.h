// Test helper shared by the kernel and random-number tests: builds a StridedView over a
// caller-owned buffer from sizes and element strides.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/strided.h"

inline torchneuron::kernels::StridedView view(void* data, torchneuron::kernels::DType dtype,
                                              std::vector<int64_t> sizes,
                                              std::vector<int64_t> strides) {
  torchneuron::kernels::StridedView v;
  v.data = data;
  v.dtype = dtype;
  v.ndim = static_cast<int>(sizes.size());
  for (int d = 0; d < v.ndim; ++d) {
    v.sizes[d] = sizes[d];
    v.strides[d] = strides[d];
  }
  return v;
}
