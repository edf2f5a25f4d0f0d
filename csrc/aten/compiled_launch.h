// Running a compiled program's fused kernels on the device queue: operand pointers and
// broadcast strides are resolved on the host, and the kernel runs over the compute pool.
// Python calls it as torch.ops.torchneuron.launch_fused(entry, outputs, inputs, shape).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace torchneuron::aten {

// Enqueues the generated kernel at `entry` (a compiler::KernelEntry) over `shape`, writing
// `outputs` (contiguous, of that shape) and reading `inputs` broadcast to it.
void launch_fused_kernel(uintptr_t entry, const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                         const std::vector<int64_t>& shape);

}  // namespace torchneuron::aten
