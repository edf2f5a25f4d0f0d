#include "aten/device/neuron_tensor.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <optional>

#include "kernels/parallel.h"

namespace torchneuron::aten {

void rethrow_runtime_error() {
  try {
    throw;
  } catch (const runtime::OutOfMemoryError& e) {
    C10_THROW_ERROR(OutOfMemoryError, e.what());
  } catch (const runtime::DeviceFault& e) {
    throw c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, 1, e.what());
  } catch (const runtime::InvalidArgument& e) {
    C10_THROW_ERROR(ValueError, e.what());
  } catch (const runtime::Error& e) {
    C10_THROW_ERROR(Error, e.what());
  }
}

bool has_kernel_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::kBool:
    case c10::kByte:
    case c10::kChar:
    case c10::kShort:
    case c10::kInt:
    case c10::kLong:
    case c10::kHalf:
    case c10::kBFloat16:
    case c10::kFloat:
    case c10::kDouble:
    case c10::kComplexFloat:
    case c10::kComplexDouble:
      return true;
    default:
      return false;
  }
}

kernels::DType to_kernel_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::kBool: return kernels::DType::kBool;
    case c10::kByte: return kernels::DType::kUInt8;
    case c10::kChar: return kernels::DType::kInt8;
    case c10::kShort: return kernels::DType::kInt16;
    case c10::kInt: return kernels::DType::kInt32;
    case c10::kLong: return kernels::DType::kInt64;
    case c10::kHalf: return kernels::DType::kFloat16;
    case c10::kBFloat16: return kernels::DType::kBFloat16;
    case c10::kFloat: return kernels::DType::kFloat32;
    case c10::kDouble: return kernels::DType::kFloat64;
    case c10::kComplexFloat: return kernels::DType::kComplex64;
    case c10::kComplexDouble: return kernels::DType::kComplex128;
    // Only copies convert these (has_kernel_dtype is false for them).
    case c10::kUInt16: return kernels::DType::kUInt16;
    case c10::kUInt32: return kernels::DType::kUInt32;
    case c10::kUInt64: return kernels::DType::kUInt64;
    default:
      TORCH_CHECK(false, "neuron kernels do not handle dtype ", type,
                  "; convert the tensor to a supported dtype first.");
  }
}

namespace {

// The integer kernel dtype of a stored-only dtype's size (dtypes CPU PyTorch also mostly stores).
std::optional<kernels::DType> bits_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float8_e5m2:
    case c10::ScalarType::Float8_e4m3fn:
    case c10::ScalarType::Float8_e5m2fnuz:
    case c10::ScalarType::Float8_e4m3fnuz:
    case c10::ScalarType::Float8_e8m0fnu:
    case c10::ScalarType::Float4_e2m1fn_x2:
    case c10::ScalarType::Bits1x8:
    case c10::ScalarType::Bits2x4:
    case c10::ScalarType::Bits4x2:
    case c10::ScalarType::Bits8:
      return kernels::DType::kUInt8;
    case c10::ScalarType::UInt16:
    case c10::ScalarType::Bits16:
      return kernels::DType::kInt16;
    case c10::ScalarType::UInt32:
    case c10::ScalarType::ComplexHalf:
      return kernels::DType::kInt32;
    case c10::ScalarType::UInt64:
      return kernels::DType::kInt64;
    default:
      return std::nullopt;
  }
}

kernels::StridedView view_with_dtype(const at::Tensor& tensor, kernels::DType dtype) {
  TORCH_CHECK(tensor.dim() <= kernels::kMaxDims, "neuron kernels handle at most ",
              kernels::kMaxDims, " dimensions, got a tensor with ", tensor.dim());
  kernels::StridedView view;
  view.data = tensor.data_ptr();
  view.dtype = dtype;
  view.ndim = static_cast<int>(tensor.dim());
  for (int d = 0; d < view.ndim; ++d) {
    view.sizes[d] = tensor.size(d);
    view.strides[d] = tensor.stride(d);
  }
  return view;
}

}  // namespace

bool copies_as_bits(c10::ScalarType type) { return has_kernel_dtype(type) || bits_dtype(type).has_value(); }

kernels::StridedView bits_view(const at::Tensor& tensor) {
  if (has_kernel_dtype(tensor.scalar_type())) return strided_view(tensor);
  const std::optional<kernels::DType> bits = bits_dtype(tensor.scalar_type());
  TORCH_CHECK(bits.has_value(), "neuron copy: dtype ", tensor.scalar_type(), " is not supported on neuron.");
  return view_with_dtype(tensor, *bits);
}

kernels::FillValue fill_value(const c10::Scalar& value) {
  kernels::FillValue fill;
  if (value.isFloatingPoint()) {
    fill.real = value.toDouble();
  } else {
    fill.is_integer = true;
    fill.integer = value.isBoolean() ? static_cast<int64_t>(value.toBool()) : value.toLong();
  }
  return fill;
}

kernels::StridedView strided_view(const at::Tensor& tensor) {
  return view_with_dtype(tensor, to_kernel_dtype(tensor.scalar_type()));
}

runtime::TensorSummary summarize(const at::TensorBase& tensor) {
  runtime::TensorSummary summary;
  summary.dtype = c10::toString(tensor.scalar_type());
  summary.device = tensor.device().type() == c10::DeviceType::PrivateUse1 ? tensor.device().index() : -1;
  summary.ndim = static_cast<int>(tensor.dim());
  const int shown = std::min<int>(summary.ndim, static_cast<int>(summary.sizes.size()));
  for (int d = 0; d < shown; ++d) summary.sizes[d] = tensor.size(d);
  return summary;
}

void check_same_device(const char* op, const c10::Device& device, std::initializer_list<const at::Tensor*> tensors) {
  for (const at::Tensor* t : tensors) {
    if (t == nullptr || !t->defined() || t->device() == device) continue;
    if (t->device().is_cpu() && t->dim() == 0) continue;  // host scalars travel by value
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", device,
                " and ", t->device(), "! (when checking arguments for ", op, ")");
  }
}

uint64_t enqueue(const at::Tensor& tensor, const char* op,
                 std::initializer_list<const at::Tensor*> inputs,
                 runtime::HardwareQueue::Kernel&& kernel) {
  check_same_device(op, tensor.device(), inputs);
  return enqueue_copy(tensor, op, inputs, std::move(kernel));
}

void follow_torch_threads() {
  static std::atomic<int> seen{0};
  const int threads = at::get_num_threads();
  if (threads == seen.load(std::memory_order_relaxed)) return;
  // At first sight torch's default, which ignores a container's CPU quota: the pool's own
  // default caps it. Later, a change is torch.set_num_threads, followed as it is.
  const bool first = seen.exchange(threads) == 0;
  kernels::set_compute_threads(first ? std::min(threads, kernels::default_compute_threads()) : threads);
}

uint64_t enqueue_copy(const at::Tensor& tensor, const char* op,
                      std::initializer_list<const at::Tensor*> inputs,
                      runtime::HardwareQueue::Kernel&& kernel) {
  const int index = tensor.device().index();
  follow_torch_threads();
  runtime::LaunchInfo info;
  info.op = op;
  for (const at::Tensor* input : inputs) {
    if (input != nullptr && input->defined()) info.add_input(summarize(*input));
  }
  info.site = runtime::capture_launch_site();
  return runtime_call([&] {
    return runtime::device(index).queue().submit(runtime::current_stream(index), std::move(info),
                                                 std::move(kernel));
  });
}

void synchronize_device(int index) {
  runtime_call([&] { runtime::device(index).synchronize(); });
}

}  // namespace torchneuron::aten
