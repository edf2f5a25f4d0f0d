// Running a compiled program's fused kernels on the device queue: operand pointers and
// broadcast strides are resolved on the host, and the kernel runs over the compute pool.
// Python calls them as torch.ops.torchneuron.launch_fused(entry, outputs, inputs, shape) and
// launch_fused_reduction(entry, outputs, inputs, shape, reduce_dims).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace torchneuron::aten {

// Enqueues the generated kernel at `entry` (a compiler::KernelEntry) over `shape`, writing
// `outputs` (contiguous, of that shape) and reading `inputs` broadcast to it.
void launch_fused_kernel(uintptr_t entry, const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                         const std::vector<int64_t>& shape);

// Enqueues the generated reduction kernel at `entry` (a compiler::ReductionEntry) over
// `shape`, folding `reduce_dims`; outputs have the shape or the reduced shape (keepdim or not).
void launch_fused_reduction(uintptr_t entry, const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                            const std::vector<int64_t>& shape, const std::vector<int64_t>& reduce_dims);

}  // namespace torchneuron::aten
