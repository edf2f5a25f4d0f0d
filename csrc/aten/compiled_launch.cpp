#include "aten/compiled_launch.h"

#include <torch/library.h>

#include <algorithm>

#include "aten/neuron_tensor.h"
#include "compiler/codegen.h"
#include "kernels/parallel.h"

namespace torchneuron::aten {

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
  const auto kernel = reinterpret_cast<compiler::KernelEntry>(entry);
  std::vector<int64_t> sizes = shape;
  enqueue_copy(outputs[0], "torchneuron::compiled_kernel", {&outputs[0]}, [=] {
    kernels::parallel_for(numel, 32768, [&](int64_t begin, int64_t end) {
      kernel(data.data(), strides.data(), sizes.data(), ndim, begin, end);
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
