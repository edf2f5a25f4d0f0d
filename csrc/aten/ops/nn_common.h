// What the nn op files (nn_ops, gather_scatter_ops, scan_ops) share: which dtypes the
// csrc/kernels/nn kernels take, and the outer x dim x inner shape their dim-wise kernels read.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "aten/device/neuron_tensor.h"
#include "kernels/nn.h"

namespace torchneuron::aten::nn {

inline bool floating_kernel_dtype(const at::Tensor& t) {
  return has_kernel_dtype(t.scalar_type()) && kernels::nn_supported(to_kernel_dtype(t.scalar_type()));
}

inline kernels::SoftmaxShape softmax_shape(const at::Tensor& t, int64_t dim) {
  kernels::SoftmaxShape shape;
  for (int64_t d = 0; d < dim; ++d) shape.outer *= t.size(d);
  shape.dim = t.dim() == 0 ? 1 : t.size(dim);
  for (int64_t d = dim + 1; d < t.dim(); ++d) shape.inner *= t.size(d);
  return shape;
}

}  // namespace torchneuron::aten::nn
