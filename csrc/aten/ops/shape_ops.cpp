// Shape-building operators on neuron: eye, roll and narrow_copy's out= form composed on the
// host from native ops; cat (one copy command for every part) and arange (csrc/kernels/nn);
// constant, reflection and replication padding (1-D to 3-D) and the latter two's backward ops
// through the pad kernels, tril / triu through the triangle kernel (csrc/kernels/copy);
// Tensor.unfold's backward (csrc/kernels/patches). linspace / logspace: range_ops.cpp.
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/constant_pad_nd_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/unfold_backward_ops.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "aten/fallback/cpu_fallback.h"
#include "aten/device/neuron_tensor.h"
#include "kernels/copy.h"
#include "kernels/floating.h"
#include "kernels/nn.h"
#include "kernels/patches.h"

namespace torchneuron::aten {
namespace shapes {

at::Tensor& eye_m_out(int64_t n, int64_t m, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  out.resize_({n, m});
  out.zero_();
  if (n > 0 && m > 0) out.diagonal().fill_(1);
  return out;
}

at::Tensor& eye_out(int64_t n, at::Tensor& out) { return eye_m_out(n, n, out); }

at::Tensor roll(const at::Tensor& self, c10::IntArrayRef shifts, c10::IntArrayRef dims) {
  TORCH_CHECK(!shifts.empty(), "`shifts` required");
  if (dims.empty()) {
    TORCH_CHECK(shifts.size() == 1, "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:", dims.size());
    return shapes::roll(self.flatten(), shifts, {0}).view(self.sizes());
  }
  TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:", dims.size());
  at::Tensor result = self;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t dim = at::maybe_wrap_dim(dims[i], self.dim());
    const int64_t size = self.size(dim);
    if (size == 0) continue;
    const int64_t shift = ((shifts[i] % size) + size) % size;
    if (shift == 0) continue;
    result = at::cat({result.narrow(dim, size - shift, shift), result.narrow(dim, 0, size - shift)}, dim);
  }
  return result.is_same(self) ? self.clone() : result;
}

// narrow_copy's out= form (CPU's kernel; the functional form is ATen's composite): CPU's checks
// and messages, `output` resized as CPU resizes it (no warning), then the narrowed view copied.
at::Tensor& narrow_copy_out(const at::Tensor& self, int64_t dim, int64_t start, int64_t length, at::Tensor& output) {
  TORCH_CHECK(self.dim() > 0, "narrow() cannot be applied to a 0-dim tensor.");
  TORCH_CHECK(self.dtype() == output.dtype());
  const auto self_sizes = self.sizes();
  if (dim < 0) {
    dim = at::maybe_wrap_dim(dim, self_sizes.size());
  } else {
    TORCH_CHECK(dim < static_cast<int64_t>(self_sizes.size()));
  }
  const int64_t cur_size = self_sizes[dim];
  TORCH_CHECK_INDEX(-cur_size <= start && start <= cur_size, "start out of range (expected to be in range of [",
                    -cur_size, ", ", cur_size, "], but got ", start, ")");
  if (start < 0) start += cur_size;
  TORCH_CHECK(length >= 0 && start <= cur_size - length, "start (", start, ") + length (", length,
              ") exceeds dimension size (", cur_size, ").");
  std::vector<int64_t> output_sizes(self_sizes.begin(), self_sizes.end());
  output_sizes[dim] = length;
  output.resize_(output_sizes);
  return output.copy_(self.narrow(dim, start, length));
}

// ---- cat, arange ----------------------------------------------------------------------------

at::Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& result) {
  const auto inputs = tensors.materialize();
  TORCH_CHECK(!inputs.empty(), "torch.cat(): expected a non-empty list of Tensors");
  // Legacy rule: 1-D empty tensors are skipped whatever the other shapes are.
  const at::Tensor* reference = nullptr;
  for (const auto& t : inputs) {
    if (!(t.get().dim() == 1 && t.get().numel() == 0)) {
      reference = &t.get();
      break;
    }
  }
  if (reference == nullptr) {
    at::native::resize_output(result, {0});
    return result;
  }
  const int64_t wrapped = at::maybe_wrap_dim(dim, reference->dim());
  std::vector<int64_t> shape(reference->sizes().begin(), reference->sizes().end());
  int64_t total = 0;
  for (const auto& t : inputs) {
    const at::Tensor& tensor = t.get();
    if (tensor.dim() == 1 && tensor.numel() == 0) continue;
    TORCH_CHECK(tensor.dim() == reference->dim(), "Tensors must have same number of dimensions: got ",
                reference->dim(), " and ", tensor.dim());
    for (int64_t d = 0; d < tensor.dim(); ++d) {
      TORCH_CHECK(d == wrapped || tensor.size(d) == reference->size(d), "Sizes of tensors must match except in dimension ",
                  wrapped, ". Expected size ", reference->size(d), " but got size ", tensor.size(d),
                  " for tensor number ", &t - inputs.data(), " in the list.");
    }
    TORCH_CHECK(tensor.device() == result.device(), "Expected all tensors to be on the same device, but found at least two devices, ",
                result.device(), " and ", tensor.device(), "!");
    TORCH_CHECK_TYPE(c10::canCast(tensor.scalar_type(), result.scalar_type()),
                "torch.cat(): input types can't be cast to the desired output type ", result.scalar_type());
    total += tensor.size(wrapped);
  }
  shape[wrapped] = total;
  at::assert_no_internal_overlap(result);  // out= that overlaps itself or an input: CPU's error
  for (const auto& t : inputs) at::assert_no_overlap(result, t.get());
  // As CPU PyTorch: a result allocated here takes the inputs' memory format when all suggest the
  // same one (channels_last inputs give a channels_last result), else it is contiguous.
  std::optional<c10::MemoryFormat> format;
  for (const auto& t : inputs) {
    const c10::MemoryFormat f = t.get().suggest_memory_format();
    format = (f == c10::MemoryFormat::Contiguous || (format.has_value() && *format != f)) ? c10::MemoryFormat::Contiguous : f;
    if (*format == c10::MemoryFormat::Contiguous) break;
  }
  if (at::native::resize_output(result, shape) && *format != c10::MemoryFormat::Contiguous) {
    result.resize_(shape, *format);
  }
  bool one_command = has_kernel_dtype(result.scalar_type()) && result.dim() <= kernels::kMaxDims;
  for (const auto& t : inputs) {
    const at::Tensor& tensor = t.get();
    one_command = one_command && has_kernel_dtype(tensor.scalar_type());
  }
  int64_t offset = 0;
  if (!one_command) {
    for (const auto& t : inputs) {
      const at::Tensor& tensor = t.get();
      if (tensor.dim() == 1 && tensor.numel() == 0) continue;
      result.narrow(wrapped, offset, tensor.size(wrapped)).copy_(tensor);
      offset += tensor.size(wrapped);
    }
    return result;
  }
  // Every part is copied by one queue command: a stack of many small tensors (clip_grad_norm_
  // stacks one norm per parameter) costs one launch, not one per part.
  std::vector<std::pair<kernels::StridedView, kernels::StridedView>> parts;
  const kernels::StridedView whole = strided_view(result);
  const int64_t item = static_cast<int64_t>(result.element_size());
  for (const auto& t : inputs) {
    const at::Tensor& tensor = t.get();
    if (tensor.dim() == 1 && tensor.numel() == 0) continue;
    kernels::StridedView dst = whole;
    dst.data = static_cast<char*>(whole.data) + offset * whole.strides[wrapped] * item;
    dst.sizes[wrapped] = tensor.size(wrapped);
    offset += tensor.size(wrapped);
    if (tensor.numel() > 0) parts.emplace_back(dst, strided_view(tensor));
  }
  if (!parts.empty()) {
    enqueue(result, "aten::cat", {&inputs[0].get()}, [parts = std::move(parts)] {
      for (const auto& [dst, src] : parts) kernels::copy(dst, src);
    });
  }
  return result;
}

at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  const auto inputs = tensors.materialize();
  TORCH_CHECK(!inputs.empty(), "torch.cat(): expected a non-empty list of Tensors");
  c10::ScalarType dtype = inputs[0].get().scalar_type();
  for (const auto& t : inputs) dtype = c10::promoteTypes(dtype, t.get().scalar_type());
  at::Tensor result = at::empty({0}, inputs[0].get().options().dtype(dtype));
  return cat_out(tensors, dim, result);
}

at::Tensor& arange_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step, at::Tensor& result) {
  const double s = start.toDouble(), e = end.toDouble(), st = step.toDouble();
  TORCH_CHECK(st != 0, "step must be nonzero");
  TORCH_CHECK(std::isfinite(s) && std::isfinite(e), "unsupported range: ", s, " -> ", e);
  TORCH_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), "upper bound and larger bound inconsistent with step sign");
  if (!has_kernel_dtype(result.scalar_type()) || c10::isComplexType(result.scalar_type()) ||
      result.scalar_type() == c10::kBool) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(arange, start_out)>::call(start, end, step, result);
  }
  // As CPU PyTorch: an int64 result with integer bounds counts in int64 (exact past 2^53).
  const bool exact = result.scalar_type() == at::kLong && !start.isFloatingPoint() && !end.isFloatingPoint() &&
                     !step.isFloatingPoint();
  const int64_t sign = st > 0 ? 1 : -1;
  const double count_d = std::ceil((e - s) / st);
  TORCH_CHECK(exact || (count_d >= 0 && count_d <= static_cast<double>(std::numeric_limits<int64_t>::max())),
              "invalid size, possible overflow?");
  const auto count = exact ? (end.toLong() - start.toLong() + step.toLong() - sign) / step.toLong()
                           : static_cast<int64_t>(count_d);
  // As on the CPU, a `result` of `count` elements keeps its shape (and its strides): the values
  // fill it in its logical order, through a contiguous temporary when it is not contiguous.
  if (result.numel() != count) {  // CPU's warning and plain resize (not resize_output's deprecation)
    if (result.numel() > 0) {
      TORCH_WARN("The number of elements in the out tensor of shape ", result.sizes(), " is ", result.numel(),
                 " which does not match the computed number of elements ", count,
                 ". Note that this may occur as a result of rounding error. "
                 "The out tensor will be resized to a tensor of shape (", count, ",).");
    }
    result.resize_({count});
  }
  at::Tensor out = result.is_contiguous() ? result : at::empty(result.sizes(), result.options());
  if (count > 0) {
    const kernels::DType dtype = to_kernel_dtype(out.scalar_type());
    const int64_t int_start = start.isFloatingPoint() ? static_cast<int64_t>(s) : start.toLong();
    const int64_t int_step = step.isFloatingPoint() ? static_cast<int64_t>(st) : step.toLong();
    void* po = out.data_ptr();
    enqueue(out, "aten::arange", {&out}, [=] { kernels::arange(dtype, count, s, st, int_start, int_step, po); });
  }
  if (!out.is_same(result)) result.copy_(out);
  return result;
}

// ---- padding -------------------------------------------------------------------------------

namespace {

enum class PadMode { kReflect, kReplicate };

// The first padded dim of self and the kernel's plan for padding its last `spatial` dims by
// `padding` (pairs, the last dim's first), checked as CPU PyTorch checks them.
kernels::PadPlan plan_padding(const char* op, PadMode mode, const at::Tensor& self, c10::IntArrayRef padding, int64_t spatial) {
  TORCH_CHECK(static_cast<int64_t>(padding.size()) == 2 * spatial, op, ": padding size is expected to be ", 2 * spatial,
              ", but got: ", padding.size());
  TORCH_CHECK(self.dim() == spatial + 1 || self.dim() == spatial + 2, op, ": Expected ", spatial + 1, "D or ",
              spatial + 2, "D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for input, but got: ",
              self.sizes());
  kernels::PadPlan plan;
  const int64_t first = self.dim() - spatial;
  for (int64_t d = 0; d < first; ++d) plan.planes *= self.size(d);
  for (int64_t dim = first; dim < self.dim(); ++dim) {
    const int64_t k = self.dim() - 1 - dim;  // padding's pair for this dim
    const int64_t size = self.size(dim), before = padding[2 * k], after = padding[2 * k + 1];
    if (mode == PadMode::kReflect) {
      TORCH_CHECK(before < size && after < size, op, ": Padding size should be less than the corresponding input dimension, but got: padding (",
                  before, ", ", after, ") at dimension ", dim, " of input ", self.sizes());
    } else {
      TORCH_CHECK(size > 0, op, ": input dimension ", dim, " must be non-empty to replicate, got ", self.sizes());
    }
    const int64_t out_size = size + before + after;
    TORCH_CHECK(out_size > 0, op, ": input (", self.sizes(), ") is too small for the padding; the output size at dimension ",
                dim, " would be ", out_size);
    std::vector<int64_t> source(out_size);
    for (int64_t o = 0; o < out_size; ++o) {
      int64_t i = o - before;
      if (mode == PadMode::kReflect) {
        if (i < 0) i = -i;
        if (i >= size) i = 2 * (size - 1) - i;
      } else {
        i = std::min(std::max<int64_t>(i, 0), size - 1);
      }
      source[o] = i;
    }
    plan.in.push_back(size);
    plan.out.push_back(out_size);
    plan.before.push_back(before);
    plan.source.push_back(std::move(source));
  }
  return plan;
}

std::vector<int64_t> padded_shape(const at::Tensor& self, const kernels::PadPlan& plan) {
  std::vector<int64_t> shape = self.sizes().vec();
  const size_t first = shape.size() - plan.out.size();
  for (size_t a = 0; a < plan.out.size(); ++a) shape[first + a] = plan.out[a];
  return shape;
}

at::Tensor run_pad(const char* op, const at::Tensor& self, const kernels::PadPlan& plan, kernels::FillValue value) {
  const at::Tensor input = self.contiguous();
  at::Tensor out = at::empty(padded_shape(self, plan), input.options());
  if (out.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(input.scalar_type());
    const void* pi = input.data_ptr();
    void* po = out.data_ptr();
    enqueue(out, op, {&input}, [=] { kernels::pad(dtype, plan, value, pi, po); });
  }
  return out;
}

// CPU gives a padding's result (and input gradient) the input's suggested memory format. A dense
// channels-last input is padded in its memory order instead of relaid twice: self.permute(0, 2,
// ..., 1) is contiguous, with the channel dim last and unpadded, and the result permuted back is
// channels-last.
bool pads_in_memory_order(const at::Tensor& self, int64_t spatial) {
  const c10::MemoryFormat format = self.suggest_memory_format();
  return format != c10::MemoryFormat::Contiguous && self.is_contiguous(format) && spatial < self.dim() &&
         self.numel() > 0;
}

std::vector<int64_t> channels_last_order(int64_t ndim) {
  std::vector<int64_t> order{0};
  for (int64_t d = 2; d < ndim; ++d) order.push_back(d);
  order.push_back(1);
  return order;
}

std::vector<int64_t> inverse_order(const std::vector<int64_t>& order) {
  std::vector<int64_t> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) inverse[order[i]] = static_cast<int64_t>(i);
  return inverse;
}

// `padding` (pairs, the last dim's first, for the last padding.size() / 2 dims of an ndim-dim
// tensor) for that tensor permuted by `order`: pairs for every dim but the first.
std::vector<int64_t> padding_in_order(c10::IntArrayRef padding, int64_t ndim, const std::vector<int64_t>& order) {
  const int64_t spatial = static_cast<int64_t>(padding.size()) / 2;
  std::vector<int64_t> result(2 * (ndim - 1), 0);
  for (int64_t k = 1; k < ndim; ++k) {
    const int64_t pair = ndim - 1 - order[k], target = ndim - 1 - k;
    if (pair < spatial) {
      result[2 * target] = padding[2 * pair];
      result[2 * target + 1] = padding[2 * pair + 1];
    }
  }
  return result;
}

at::Tensor pad(const char* op, PadMode mode, const at::Tensor& self, c10::IntArrayRef padding, int64_t spatial) {
  TORCH_CHECK(has_kernel_dtype(self.scalar_type()), op, ": not implemented on neuron for ", self.scalar_type());
  const kernels::PadPlan plan = plan_padding(op, mode, self, padding, spatial);  // CPU's checks, in self's dims
  if (pads_in_memory_order(self, spatial)) {
    const std::vector<int64_t> order = channels_last_order(self.dim());
    const at::Tensor x = self.permute(order);
    const kernels::PadPlan in_order = plan_padding(op, mode, x, padding_in_order(padding, self.dim(), order), self.dim() - 1);
    return run_pad(op, x, in_order, {}).permute(inverse_order(order));
  }
  return run_pad(op, self, plan, {}).contiguous(self.suggest_memory_format());
}

// grad_in (of `sizes`) from a contiguous gradient of the padding `plan` describes.
at::Tensor run_pad_backward(const char* op, const at::Tensor& g, const kernels::PadPlan& plan, c10::IntArrayRef sizes) {
  at::Tensor result = at::empty(sizes, g.options());
  if (result.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(g.scalar_type());
    const void* pg = g.data_ptr();
    void* pr = result.data_ptr();
    enqueue(result, op, {&g}, [=] { kernels::pad_backward(dtype, plan, pg, pr); });
  }
  return result;
}

at::Tensor pad_backward(const char* op, PadMode mode, const at::Tensor& grad, const at::Tensor& self,
                        c10::IntArrayRef padding, int64_t spatial) {
  const kernels::PadPlan plan = plan_padding(op, mode, self, padding, spatial);
  TORCH_CHECK(grad.sizes() == c10::IntArrayRef(padded_shape(self, plan)), op, ": expected grad_output of size ",
              c10::IntArrayRef(padded_shape(self, plan)), ", got ", grad.sizes());
  TORCH_CHECK(has_kernel_dtype(grad.scalar_type()) && kernels::is_floating_dtype(to_kernel_dtype(grad.scalar_type())), op,
              ": expected a floating-point gradient, got ", grad.scalar_type());
  const c10::MemoryFormat format = self.suggest_memory_format();
  if (pads_in_memory_order(self, spatial)) {
    const std::vector<int64_t> order = channels_last_order(self.dim());
    const at::Tensor x = self.permute(order), g = grad.contiguous(format).permute(order);
    const kernels::PadPlan in_order = plan_padding(op, mode, x, padding_in_order(padding, self.dim(), order), self.dim() - 1);
    return run_pad_backward(op, g, in_order, x.sizes()).permute(inverse_order(order));
  }
  return run_pad_backward(op, grad.contiguous(), plan, self.sizes()).contiguous(format);
}

at::Tensor& write_out(const at::Tensor& value, at::Tensor& out) {
  at::native::resize_output(out, value.sizes());
  return out.copy_(value);
}

// constant_pad_nd's result, contiguous, for a pad with some positive part.
at::Tensor constant_pad_contiguous(const at::Tensor& self, c10::IntArrayRef pad, const c10::Scalar& value) {
  const int64_t spatial = static_cast<int64_t>(pad.size()) / 2, first = self.dim() - spatial;
  kernels::PadPlan plan;
  for (int64_t d = 0; d < first; ++d) plan.planes *= self.size(d);
  for (int64_t dim = first; dim < self.dim(); ++dim) {
    const int64_t k = self.dim() - 1 - dim;
    const int64_t size = self.size(dim), before = pad[2 * k], after = pad[2 * k + 1];
    const int64_t out_size = size + before + after;
    TORCH_CHECK(out_size >= 0, "The input size ", size, ", plus negative padding ", before, " and ", after,
                " resulted in a negative output size, which is invalid. Check dimension ", dim, " of your input.");
    std::vector<int64_t> source(out_size);
    for (int64_t o = 0; o < out_size; ++o) source[o] = o - before >= 0 && o - before < size ? o - before : -1;
    plan.in.push_back(size);
    plan.out.push_back(out_size);
    plan.before.push_back(before);
    plan.source.push_back(std::move(source));
  }
  return run_pad("aten::constant_pad_nd", self, plan, fill_value(value));
}

}  // namespace

// F.pad's constant mode: pads (or, with negative padding, crops) the last pad.size() / 2 dims.
at::Tensor constant_pad_nd(const at::Tensor& self, c10::IntArrayRef pad, const c10::Scalar& value) {
  TORCH_CHECK(pad.size() % 2 == 0, "Length of pad must be even but instead it equals ", pad.size());
  const int64_t spatial = static_cast<int64_t>(pad.size()) / 2;
  TORCH_CHECK(spatial <= self.dim(), "Length of pad should be no more than twice the number of dimensions of the input. ",
              "Pad length is ", pad.size(), " while the input has ", self.dim(), " dimensions.");
  if (spatial == 0 || !has_kernel_dtype(self.scalar_type()) || value.isComplex()) {
    return at::native::constant_pad_nd(self, pad, value);  // composed of fill and copy
  }
  const int64_t first = self.dim() - spatial;
  if (std::all_of(pad.begin(), pad.end(), [](int64_t p) { return p <= 0; })) {
    // Only crops: a copy of the narrowed input in its layout, as CPU gives (later views rely on it).
    at::Tensor cropped = self;
    for (int64_t dim = first; dim < self.dim(); ++dim) {
      const int64_t k = self.dim() - 1 - dim, size = self.size(dim), before = pad[2 * k], after = pad[2 * k + 1];
      TORCH_CHECK(size + before + after >= 0, "The input size ", size, ", plus negative padding ", before, " and ", after,
                  " resulted in a negative output size, which is invalid. Check dimension ", dim, " of your input.");
      cropped = cropped.narrow(dim, -before, size + before + after);
    }
    return cropped.clone();
  }
  if (pads_in_memory_order(self, spatial)) {
    for (int64_t k = 0; k < spatial; ++k) {  // CPU's check, in self's dims
      const int64_t dim = self.dim() - 1 - k;
      TORCH_CHECK(self.size(dim) + pad[2 * k] + pad[2 * k + 1] >= 0, "The input size ", self.size(dim),
                  ", plus negative padding ", pad[2 * k], " and ", pad[2 * k + 1],
                  " resulted in a negative output size, which is invalid. Check dimension ", dim, " of your input.");
    }
    const std::vector<int64_t> order = channels_last_order(self.dim());
    const at::Tensor x = self.permute(order);
    return constant_pad_contiguous(x, padding_in_order(pad, self.dim(), order), value).permute(inverse_order(order));
  }
  // CPU allocates the result in the input's suggested memory format (channels_last stays so).
  return constant_pad_contiguous(self, pad, value).contiguous(self.suggest_memory_format());
}

// Tensor.unfold's backward: the kernel gathers, for each position, the window elements that
// copied it.
at::Tensor unfold_backward(const at::Tensor& grad_in, c10::IntArrayRef input_sizes, int64_t dim, int64_t size,
                           int64_t step) {
  const bool floating = has_kernel_dtype(grad_in.scalar_type()) && kernels::is_floating_dtype(to_kernel_dtype(grad_in.scalar_type()));
  if (!floating || input_sizes.empty()) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(unfold_backward)>::call(grad_in, input_sizes, dim,
                                                                                              size, step);
  }
  dim = at::maybe_wrap_dim(dim, static_cast<int64_t>(input_sizes.size()));
  TORCH_CHECK(size > 0 && step > 0 && input_sizes[dim] >= size, "aten::unfold_backward: expected 0 < size <= ",
              input_sizes[dim], " and step > 0, got size ", size, " and step ", step);
  kernels::UnfoldShape shape;
  shape.length = input_sizes[dim];
  shape.windows = (shape.length - size) / step + 1;
  shape.size = size;
  shape.step = step;
  std::vector<int64_t> expected(input_sizes.begin(), input_sizes.end());
  expected[dim] = shape.windows;
  expected.push_back(size);
  TORCH_CHECK(grad_in.sizes() == c10::IntArrayRef(expected), "aten::unfold_backward: expected grad_in of sizes ",
              c10::IntArrayRef(expected), ", got ", grad_in.sizes());
  for (int64_t d = 0; d < dim; ++d) shape.outer *= input_sizes[d];
  for (size_t d = dim + 1; d < input_sizes.size(); ++d) shape.inner *= input_sizes[d];
  const at::Tensor g = grad_in.contiguous();
  at::Tensor grad = at::empty(input_sizes, g.options());
  if (grad.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(g.scalar_type());
    const void* pg = g.data_ptr();
    void* out = grad.data_ptr();
    enqueue(grad, "aten::unfold_backward", {&g}, [=] { kernels::unfold_backward(dtype, shape, pg, out); });
  }
  return grad;
}

at::Tensor& unfold_backward_out(const at::Tensor& grad_in, c10::IntArrayRef input_sizes, int64_t dim, int64_t size,
                                int64_t step, at::Tensor& out) {
  return write_out(shapes::unfold_backward(grad_in, input_sizes, dim, size, step), out);
}

#define NEURON_PAD(name, MODE, SPATIAL)                                                                          \
  at::Tensor name(const at::Tensor& self, c10::IntArrayRef padding) {                                            \
    return pad("aten::" #name, MODE, self, padding, SPATIAL);                                                     \
  }                                                                                                              \
  at::Tensor& name##_out(const at::Tensor& self, c10::IntArrayRef padding, at::Tensor& out) {                   \
    return write_out(shapes::name(self, padding), out);                                                          \
  }                                                                                                              \
  at::Tensor name##_backward(const at::Tensor& grad, const at::Tensor& self, c10::IntArrayRef padding) {         \
    return pad_backward("aten::" #name "_backward", MODE, grad, self, padding, SPATIAL);                          \
  }                                                                                                              \
  at::Tensor& name##_backward_out(const at::Tensor& grad, const at::Tensor& self, c10::IntArrayRef padding,      \
                                  at::Tensor& grad_input) {                                                      \
    return write_out(shapes::name##_backward(grad, self, padding), grad_input);                                  \
  }

NEURON_PAD(reflection_pad1d, PadMode::kReflect, 1)
NEURON_PAD(reflection_pad2d, PadMode::kReflect, 2)
NEURON_PAD(reflection_pad3d, PadMode::kReflect, 3)
NEURON_PAD(replication_pad1d, PadMode::kReplicate, 1)
NEURON_PAD(replication_pad2d, PadMode::kReplicate, 2)
NEURON_PAD(replication_pad3d, PadMode::kReplicate, 3)
#undef NEURON_PAD

// tril / triu: elements with column - row > diagonal (tril) or < diagonal (triu) of the last
// two dims zeroed, by the triangle kernel (in place when result is self and contiguous).
at::Tensor& triangle_out(const at::Tensor& self, int64_t diagonal, bool lower, at::Tensor& result) {
  const char* name = lower ? "aten::tril" : "aten::triu";
  TORCH_CHECK(self.dim() >= 2, lower ? "tril" : "triu", ": input tensor must have at least 2 dimensions");
  TORCH_CHECK(has_kernel_dtype(self.scalar_type()), name, ": not implemented on neuron for ", self.scalar_type());
  const at::Tensor input = self.contiguous();
  if (!result.is_same(self)) at::native::resize_output(result, self.sizes());
  at::Tensor out = result.is_contiguous() ? result : at::empty(self.sizes(), input.options());
  const int64_t rows = self.size(-2), cols = self.size(-1);
  if (out.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(input.scalar_type());
    const int64_t batch = out.numel() / (rows * cols);
    const void* pi = input.data_ptr();
    void* po = out.data_ptr();
    enqueue(out, name, {&input}, [=] { kernels::triangle(dtype, batch, rows, cols, diagonal, lower, pi, po); });
  }
  if (!out.is_same(result)) result.copy_(out);
  return result;
}

at::Tensor& tril_out(const at::Tensor& self, int64_t diagonal, at::Tensor& result) {
  return triangle_out(self, diagonal, true, result);
}

at::Tensor& triu_out(const at::Tensor& self, int64_t diagonal, at::Tensor& result) {
  return triangle_out(self, diagonal, false, result);
}

at::Tensor tril(const at::Tensor& self, int64_t diagonal) {
  at::Tensor result = at::empty({0}, self.options());
  return tril_out(self, diagonal, result);
}

at::Tensor triu(const at::Tensor& self, int64_t diagonal) {
  at::Tensor result = at::empty({0}, self.options());
  return triu_out(self, diagonal, result);
}

at::Tensor& tril_inplace(at::Tensor& self, int64_t diagonal) { return tril_out(self, diagonal, self); }
at::Tensor& triu_inplace(at::Tensor& self, int64_t diagonal) { return triu_out(self, diagonal, self); }

}  // namespace shapes

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("eye.out", TORCH_FN(shapes::eye_out));
  m.impl("eye.m_out", TORCH_FN(shapes::eye_m_out));
  m.impl("roll", TORCH_FN(shapes::roll));
  m.impl("narrow_copy.out", TORCH_FN(shapes::narrow_copy_out));
  m.impl("cat", TORCH_FN(shapes::cat));
  m.impl("cat.out", TORCH_FN(shapes::cat_out));
  m.impl("arange.start_out", TORCH_FN(shapes::arange_out));
  m.impl("constant_pad_nd", TORCH_FN(shapes::constant_pad_nd));
  m.impl("tril", TORCH_FN(shapes::tril));
  m.impl("tril.out", TORCH_FN(shapes::tril_out));
  m.impl("tril_", TORCH_FN(shapes::tril_inplace));
  m.impl("triu", TORCH_FN(shapes::triu));
  m.impl("triu.out", TORCH_FN(shapes::triu_out));
  m.impl("triu_", TORCH_FN(shapes::triu_inplace));
  m.impl("unfold_backward", TORCH_FN(shapes::unfold_backward));
  m.impl("unfold_backward.out", TORCH_FN(shapes::unfold_backward_out));
#define REGISTER_PAD(name)                                              \
  m.impl(#name, TORCH_FN(shapes::name));                                \
  m.impl(#name ".out", TORCH_FN(shapes::name##_out));                   \
  m.impl(#name "_backward", TORCH_FN(shapes::name##_backward));         \
  m.impl(#name "_backward.grad_input", TORCH_FN(shapes::name##_backward_out));
  REGISTER_PAD(reflection_pad1d)
  REGISTER_PAD(reflection_pad2d)
  REGISTER_PAD(reflection_pad3d)
  REGISTER_PAD(replication_pad1d)
  REGISTER_PAD(replication_pad2d)
  REGISTER_PAD(replication_pad3d)
#undef REGISTER_PAD
}

}  // namespace torchneuron::aten
