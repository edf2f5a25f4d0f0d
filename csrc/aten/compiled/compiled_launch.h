// Running a compiled program's fused kernels on the device queue: operand pointers and
// broadcast strides are resolved on the host, and the kernel runs over the compute pool.
// Python calls them as torch.ops.torchneuron.launch_fused(entry, outputs, inputs, shape) and
// launch_fused_reduction(entry, outputs, inputs, shape, reduce_dims).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace torchneuron::aten {

// Raises unless `entry` is an exported function of a loaded artifact: entries arrive as
// integers from Python, and a wrong one must be an error, never a call through it.
void check_kernel_entry(uintptr_t entry, const char* op);

// Enqueues the generated kernel at `entry` (a compiler::KernelEntry) over `shape`, writing
// `outputs` (contiguous, of that shape) and reading `inputs` broadcast to it.
void launch_fused_kernel(uintptr_t entry, const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                         const std::vector<int64_t>& shape);

// Enqueues the generated pointwise kernel at `entry` once per index of its operand lists, all in
// one device job (a compiled chain of foreach ops). inputs[k] holds a tensor per index, or one
// tensor for every index; a 0-dim CPU tensor's value is copied into the job, and so is each
// value of a 1-D CPU tensor given as a list's only tensor (index i reads value i). Returns
// outputs[k][i] of dtypes[k], shaped as the inputs at index i broadcast: targets[k][i] where
// targets[k] is given (the tensors a compiled step writes the results back into) and every
// target can take its result in place, else new tensors.
std::vector<std::vector<at::Tensor>> launch_fused_foreach(uintptr_t entry,
                                                          const std::vector<std::vector<at::Tensor>>& inputs,
                                                          const std::vector<c10::ScalarType>& dtypes,
                                                          const std::vector<std::vector<at::Tensor>>& targets = {});

// A generated kernel with its operands resolved for one call.
struct FusedKernel {
  uintptr_t entry = 0;
  std::vector<at::Tensor> outputs, inputs;
  std::vector<int64_t> shape, reduce_dims;  // reduce_dims empty: a pointwise kernel
};

// Enqueues the kernel alone (launch_fused_kernel or launch_fused_reduction).
void launch_fused(const FusedKernel& kernel);

// Enqueues product = a @ b (mm or bmm, into the fresh row-major `product`) with up to two
// generated kernels run on each block of its rows (see product_with_row_hooks): `prologue`
// writes `a` (its index space must be a's memory order), and `epilogue`, whose input
// `product_input` reads the product (or a view of it) in its memory order, runs on the
// product's rows once they are final (a reduction epilogue's rows must be the product's). A
// kernel that cannot be fused runs as a job of its own, in order, and with neither fused the
// product runs as mm_out or bmm_out. Returns how many kernels were fused.
int launch_product_with_kernels(const at::Tensor& product, const at::Tensor& a, const at::Tensor& b,
                                const FusedKernel* prologue, const FusedKernel* epilogue, int product_input);

// Since start (or the last reset): how many prologue and epilogue kernels
// launch_product_with_kernels has fused, and how many foreach kernel launches wrote their
// results into their targets: what ran, where the compiler's counts are what it planned.
struct FusedLaunches {
  int64_t prologues = 0, epilogues = 0, foreach_in_place = 0;
};
FusedLaunches fused_launches();
void reset_fused_launches();

// Enqueues the generated reduction kernel at `entry` (a compiler::ReductionEntry) over
// `shape`, folding `reduce_dims`; outputs have the shape or the reduced shape (keepdim or not).
void launch_fused_reduction(uintptr_t entry, const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                            const std::vector<int64_t>& shape, const std::vector<int64_t>& reduce_dims);

}  // namespace torchneuron::aten
