// Allocating results in another tensor's dim order (as PyTorch's meta functions and eager ops
// keep their inputs' layout), shared by the ops and the compiled-program executor.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace torchneuron::aten {

// Dims from outermost to innermost in memory by `strides` (ties keep their order).
inline std::vector<int64_t> dim_order(c10::IntArrayRef strides) {
  std::vector<int64_t> order(strides.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  return order;
}

// An empty dense tensor of `sizes` whose dims lie in memory in `order` (outermost first).
inline at::Tensor empty_in_order(const std::vector<int64_t>& order, c10::IntArrayRef sizes,
                                 const at::TensorOptions& options) {
  std::vector<int64_t> physical, inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    physical.push_back(sizes[order[i]]);
    inverse[order[i]] = static_cast<int64_t>(i);
  }
  return at::empty(physical, options).permute(inverse);
}

}  // namespace torchneuron::aten
