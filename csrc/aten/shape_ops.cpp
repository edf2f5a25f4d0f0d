// Shape-building operators on neuron, composed on the host from native ops: eye, linspace,
// roll, and reflection / replication padding (1-D to 3-D) with their backward ops. Padding
// gathers rows with index_select and scatters gradients back with index_add. Also
// Tensor.unfold's backward, a kernel (csrc/kernels/patches).
#include <ATen/WrapDimUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_add.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/unfold_backward_ops.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "aten/cpu_fallback.h"
#include "aten/neuron_tensor.h"
#include "kernels/floating.h"
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

// CPU PyTorch's formula: the first half counts up from start, the second half down from end.
at::Tensor& linspace_out(const c10::Scalar& start, const c10::Scalar& end, int64_t steps, at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  at::native::resize_output(out, {steps});
  if (steps == 0) return out;
  if (steps == 1) return out.fill_(start);
  const bool wide = out.scalar_type() == at::kDouble || at::isIntegralType(out.scalar_type(), true);
  const auto compute = out.options().dtype(wide ? at::kDouble : at::kFloat);
  const double lo = start.toDouble(), hi = end.toDouble();
  const double step = (hi - lo) / static_cast<double>(steps - 1);
  const at::Tensor index = at::arange(steps, compute);
  const at::Tensor rising = at::mul(index, step).add_(lo);
  const at::Tensor falling = at::mul(at::rsub(index, static_cast<double>(steps - 1)), -step).add_(hi);
  out.copy_(at::where(at::lt(index, static_cast<double>(steps / 2)), rising, falling));
  return out;
}

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

// ---- padding -------------------------------------------------------------------------------

namespace {

enum class PadMode { kReflect, kReplicate };

// For each padded spatial dim (last first in `padding`'s pairs): its index into the input.
struct PadPlan {
  std::vector<int64_t> dims;
  std::vector<at::Tensor> rows;  // int64 on the device
};

PadPlan plan_padding(const char* op, PadMode mode, const at::Tensor& self, c10::IntArrayRef padding, int64_t spatial) {
  TORCH_CHECK(static_cast<int64_t>(padding.size()) == 2 * spatial, op, ": padding size is expected to be ", 2 * spatial,
              ", but got: ", padding.size());
  TORCH_CHECK(self.dim() == spatial + 1 || self.dim() == spatial + 2, op, ": Expected ", spatial + 1, "D or ",
              spatial + 2, "D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for input, but got: ",
              self.sizes());
  PadPlan plan;
  for (int64_t k = 0; k < spatial; ++k) {
    const int64_t dim = self.dim() - 1 - k;
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
    std::vector<int64_t> rows(out_size);
    for (int64_t o = 0; o < out_size; ++o) {
      int64_t i = o - before;
      if (mode == PadMode::kReflect) {
        if (i < 0) i = -i;
        if (i >= size) i = 2 * (size - 1) - i;
      } else {
        i = std::min(std::max<int64_t>(i, 0), size - 1);
      }
      rows[o] = i;
    }
    plan.dims.push_back(dim);
    at::Tensor host = at::empty({out_size}, at::TensorOptions().dtype(at::kLong));
    std::copy(rows.begin(), rows.end(), host.data_ptr<int64_t>());
    plan.rows.push_back(host.to(self.device()));
  }
  return plan;
}

at::Tensor pad(const char* op, PadMode mode, const at::Tensor& self, c10::IntArrayRef padding, int64_t spatial) {
  const PadPlan plan = plan_padding(op, mode, self, padding, spatial);
  at::Tensor result = self;
  for (size_t k = 0; k < plan.dims.size(); ++k) result = at::index_select(result, plan.dims[k], plan.rows[k]);
  return result;
}

at::Tensor pad_backward(const char* op, PadMode mode, const at::Tensor& grad, const at::Tensor& self,
                        c10::IntArrayRef padding, int64_t spatial) {
  const PadPlan plan = plan_padding(op, mode, self, padding, spatial);
  // Undo the forward's gathers in reverse, summing the gradient of every copy of an element.
  std::vector<std::vector<int64_t>> shapes{self.sizes().vec()};
  for (size_t k = 0; k + 1 < plan.dims.size(); ++k) {
    std::vector<int64_t> next = shapes.back();
    next[plan.dims[k]] = plan.rows[k].numel();
    shapes.push_back(next);
  }
  at::Tensor result = grad;
  for (size_t k = plan.dims.size(); k-- > 0;) {
    result = at::zeros(shapes[k], grad.options()).index_add_(plan.dims[k], plan.rows[k], result);
  }
  return result;
}

at::Tensor& write_out(const at::Tensor& value, at::Tensor& out) {
  at::native::resize_output(out, value.sizes());
  return out.copy_(value);
}

}  // namespace

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

}  // namespace shapes

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("eye.out", TORCH_FN(shapes::eye_out));
  m.impl("eye.m_out", TORCH_FN(shapes::eye_m_out));
  m.impl("linspace.out", TORCH_FN(shapes::linspace_out));
  m.impl("roll", TORCH_FN(shapes::roll));
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
