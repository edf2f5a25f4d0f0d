// Shared helpers of the aten layer: the bridge from at::Tensor to the kernel library's
// StridedView, enqueueing a kernel with launch information, and runtime error translation.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>

#include <string>
#include <utility>

#include "kernels/copy.h"
#include "kernels/strided.h"
#include "runtime/device.h"
#include "runtime/errors.h"

namespace torchneuron::aten {

// Throws the torch exception matching the runtime error being handled (call in a catch block).
[[noreturn]] void rethrow_runtime_error();

// Runs `body`, turning runtime errors into torch exceptions (torch.OutOfMemoryError,
// torch.AcceleratorError, RuntimeError).
template <typename F>
decltype(auto) runtime_call(F&& body) {
  try {
    return body();
  } catch (const runtime::Error&) {
    rethrow_runtime_error();
  }
}

kernels::DType to_kernel_dtype(c10::ScalarType type);
bool has_kernel_dtype(c10::ScalarType type);

// The view of a neuron (or CPU) tensor's memory that kernels take.
kernels::StridedView strided_view(const at::Tensor& tensor);

// A real or integer Scalar as a fill kernel's value (64-bit integers kept exact).
kernels::FillValue fill_value(const c10::Scalar& value);

// Whether copies can move `type` between memories as bits: a dtype the kernels compute on, or
// one of 1, 2, 4 or 8 bytes that they only store (unsigned 16/32/64-bit, float8, complex32).
bool copies_as_bits(c10::ScalarType type);

// strided_view, with a dtype the kernels do not compute on seen as the integer type of its size
// (for same-dtype copies only).
kernels::StridedView bits_view(const at::Tensor& tensor);

// A tensor as a failed command's message describes it.
runtime::TensorSummary summarize(const at::TensorBase& tensor);

// Raises, as CUDA does, when a defined tensor is not on `device` (0-dim CPU scalars excepted).
void check_same_device(const char* op, const c10::Device& device, std::initializer_list<const at::Tensor*> tensors);

// Enqueues `kernel` on the current stream of `tensor`'s device, recording the op (a static
// string), its tensor arguments and the launching Python line for error messages. Every input
// must be on that device: kernels read device memory only.
uint64_t enqueue(const at::Tensor& tensor, const char* op,
                 std::initializer_list<const at::Tensor*> inputs,
                 runtime::HardwareQueue::Kernel&& kernel);
// The same without the device check, for copies, whose inputs live on the host or another device.
uint64_t enqueue_copy(const at::Tensor& tensor, const char* op,
                      std::initializer_list<const at::Tensor*> inputs,
                      runtime::HardwareQueue::Kernel&& kernel);

// The device allocator for neuron memory (c10::DeviceAllocator) and the pinned host allocator.
c10::Allocator* neuron_allocator();
c10::Allocator* pinned_host_allocator();
bool is_pinned_host_pointer(const void* ptr);

// Sizes the compute engines (kernels::set_compute_threads) from torch.get_num_threads() when it
// changed since the last launch: torch.set_num_threads governs the device's engines too.
void follow_torch_threads();

// Waits for the device's queue to reach every command submitted so far and raises its fault.
void synchronize_device(int index);

}  // namespace torchneuron::aten
