#include "aten/compiled_launch.h"

#include <torch/library.h>

#include <algorithm>

#include "aten/neuron_tensor.h"
#include "compiler/codegen.h"
#include "kernels/parallel.h"

namespace torchneuron::aten {

namespace {

// Reduces the iteration space to as few dims as possible, the way TensorIterator does: size-1
// dims go, dims are ordered by the first output's strides (outermost first, so a channels-last
// output iterates in memory order), and neighbours that every operand steps through as one
// (stride[d] == stride[d + 1] * size[d + 1]) merge. Generated kernels run their unit-stride loop
// over the innermost dim only, so a contiguous [8, 16, 32, 32] must become [131072].
void coalesce_dims(std::vector<int64_t>& sizes, std::vector<int64_t>& strides, int operands) {
  const int ndim = static_cast<int>(sizes.size());
  std::vector<int> order;
  for (int d = 0; d < ndim; ++d) {
    if (sizes[d] != 1) order.push_back(d);
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return strides[a] > strides[b]; });
  std::vector<int64_t> merged_sizes;
  std::vector<std::vector<int64_t>> merged(operands);
  for (int d : order) {
    bool joins = !merged_sizes.empty();
    for (int k = 0; k < operands && joins; ++k) {
      joins = merged[k].back() == strides[k * ndim + d] * sizes[d];
    }
    if (joins) {
      merged_sizes.back() *= sizes[d];
      for (int k = 0; k < operands; ++k) merged[k].back() = strides[k * ndim + d];
    } else {
      merged_sizes.push_back(sizes[d]);
      for (int k = 0; k < operands; ++k) merged[k].push_back(strides[k * ndim + d]);
    }
  }
  sizes = merged_sizes;
  strides.clear();
  for (int k = 0; k < operands; ++k) strides.insert(strides.end(), merged[k].begin(), merged[k].end());
}

}  // namespace

void launch_fused_kernel(uintptr_t entry, const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                         const std::vector<int64_t>& shape) {
  TORCH_CHECK(!outputs.empty(), "compiled kernel: expected at least one output");
  TORCH_CHECK(shape.size() <= 16, "compiled kernel: at most 16 dimensions, got ", shape.size());
  const int ndim = static_cast<int>(shape.size());
  const int operands = static_cast<int>(outputs.size() + inputs.size());
  std::vector<char*> data;
  std::vector<int64_t> strides;
  data.reserve(operands);
  strides.reserve(static_cast<size_t>(operands) * ndim);
  int64_t numel = 1;
  for (int64_t size : shape) numel *= size;
  for (const at::Tensor& out : outputs) {
    TORCH_CHECK(out.sizes().equals(shape), "compiled kernel: output of size ", out.sizes(), " for shape ",
                at::IntArrayRef(shape));
    check_same_device("torchneuron::compiled_kernel", outputs[0].device(), {&out});
    data.push_back(static_cast<char*>(out.data_ptr()));
    for (int d = 0; d < ndim; ++d) strides.push_back(out.stride(d));
  }
  for (const at::Tensor& in : inputs) {
    // Broadcast as ATen does: dims align at the right; size-1 and missing dims repeat.
    TORCH_CHECK(in.dim() <= ndim, "compiled kernel: input of size ", in.sizes(), " does not broadcast to ",
                at::IntArrayRef(shape));
    // Kernels read device memory when they run; a host tensor (even a 0-dim one) may be gone.
    TORCH_CHECK(in.device() == outputs[0].device(), "compiled kernel: expected every input on ", outputs[0].device(),
                ", got one on ", in.device());
    data.push_back(static_cast<char*>(const_cast<void*>(in.const_data_ptr())));
    const int offset = ndim - static_cast<int>(in.dim());
    for (int d = 0; d < ndim; ++d) {
      if (d < offset) {
        strides.push_back(0);
        continue;
      }
      const int64_t size = in.size(d - offset);
      TORCH_CHECK(size == shape[d] || size == 1, "compiled kernel: input of size ", in.sizes(), " does not broadcast to ",
                  at::IntArrayRef(shape));
      strides.push_back(size == shape[d] ? in.stride(d - offset) : 0);
    }
  }
  if (numel == 0) return;
  std::vector<int64_t> sizes = shape;
  coalesce_dims(sizes, strides, operands);
  const int dims = static_cast<int>(sizes.size());
  const auto kernel = reinterpret_cast<compiler::KernelEntry>(entry);
  enqueue_copy(outputs[0], "torchneuron::compiled_kernel", {&outputs[0]}, [=] {
    kernels::parallel_for(numel, 32768, [&](int64_t begin, int64_t end) {
      kernel(data.data(), strides.data(), sizes.data(), dims, begin, end);
    });
  });
}

namespace {

void launch_fused_op(int64_t entry, at::TensorList outputs, at::TensorList inputs, at::IntArrayRef shape) {
  launch_fused_kernel(static_cast<uintptr_t>(entry), outputs.vec(), inputs.vec(), shape.vec());
}

}  // namespace

TORCH_LIBRARY(torchneuron, m) {
  m.def("launch_fused(int entry, Tensor(a!)[] outputs, Tensor[] inputs, int[] shape) -> ()");
}

TORCH_LIBRARY_IMPL(torchneuron, PrivateUse1, m) { m.impl("launch_fused", TORCH_FN(launch_fused_op)); }

}  // namespace torchneuron::aten
