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

// Enqueues product = a @ b (mm or bmm) and the generated kernel at `entry` (a reduction kernel
// when `reduce_dims` is not empty; its rows must then be the product's) as one device job, the
// kernel running on each block of the product's rows as soon as it is computed.
// inputs[product_input] reads the product (or a view of it) in its memory order. False, with
// nothing enqueued, when that does not hold or the product needs its op's general path: then
// the caller runs the two apart.
bool launch_fused_after_product(uintptr_t entry, const std::vector<at::Tensor>& outputs,
                                const std::vector<at::Tensor>& inputs, const std::vector<int64_t>& shape,
                                const std::vector<int64_t>& reduce_dims, int product_input, const at::Tensor& product,
                                const at::Tensor& a, const at::Tensor& b);

// Enqueues the generated reduction kernel at `entry` (a compiler::ReductionEntry) over
// `shape`, folding `reduce_dims`; outputs have the shape or the reduced shape (keepdim or not).
void launch_fused_reduction(uintptr_t entry, const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                            const std::vector<int64_t>& shape, const std::vector<int64_t>& reduce_dims);

}  // namespace torchneuron::aten
