// Tensors of more dims than the kernels take (kernels::kMaxDims), as views of the same elements
// in the same order with fewer dims, for the ops whose kernels see only elements, not dims.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/strided.h"

namespace torchneuron::aten {

// `tensors` (equal sizes) re-viewed with size-1 dims dropped and neighbouring dims merged where
// every tensor's memory allows it; the same tensors when they already fit the kernels. Element i
// of each view is element i of its tensor in row-major order, so elementwise kernels are unchanged.
inline std::vector<at::Tensor> fewer_dims(std::vector<at::Tensor> tensors) {
  const int64_t ndim = tensors.front().dim();
  if (ndim <= kernels::kMaxDims) return tensors;
  const c10::IntArrayRef shape = tensors.front().sizes();
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides(tensors.size());
  for (int64_t d = 0; d < ndim; ++d) {
    if (shape[d] == 1) continue;
    bool merges = !sizes.empty();
    for (size_t t = 0; merges && t < tensors.size(); ++t) {
      merges = strides[t].back() == tensors[t].stride(d) * shape[d];
    }
    if (merges) {
      sizes.back() *= shape[d];
      for (size_t t = 0; t < tensors.size(); ++t) strides[t].back() = tensors[t].stride(d);
      continue;
    }
    sizes.push_back(shape[d]);
    for (size_t t = 0; t < tensors.size(); ++t) strides[t].push_back(tensors[t].stride(d));
  }
  for (size_t t = 0; t < tensors.size(); ++t) {
    tensors[t] = tensors[t].as_strided(sizes, strides[t], tensors[t].storage_offset());
  }
  return tensors;
}

inline at::Tensor fewer_dims(const at::Tensor& tensor) { return fewer_dims(std::vector<at::Tensor>{tensor})[0]; }

inline std::pair<at::Tensor, at::Tensor> fewer_dims(const at::Tensor& a, const at::Tensor& b) {
  std::vector<at::Tensor> both = fewer_dims(std::vector<at::Tensor>{a, b});
  return {both[0], both[1]};
}

}  // namespace torchneuron::aten
