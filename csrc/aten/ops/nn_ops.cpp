// Neural-network operators on neuron: softmax / log_softmax and their backward, layer norm and
// NLL loss (nll_loss, nll_loss2d) with their backward ops. The host checks arguments, makes
// inputs contiguous and allocates outputs; csrc/kernels/nn runs on the queue.
// Kernels take raw pointers: a temporary freed here can only be reused by later commands,
// which the in-order queue runs after this one.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/native_layer_norm_backward_ops.h>
#include <ATen/ops/native_layer_norm_ops.h>
#include <ATen/ops/nll_loss2d_backward_ops.h>
#include <ATen/ops/nll_loss2d_forward_ops.h>
#include <ATen/ops/nll_loss_backward_ops.h>
#include <ATen/ops/nll_loss_forward_ops.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <vector>

#include "aten/device/neuron_tensor.h"
#include "aten/fallback/cpu_fallback.h"
#include "aten/ops/nn_common.h"
#include "kernels/nn.h"

namespace torchneuron::aten {
namespace {

// Optional tensors made contiguous, or undefined.
at::Tensor contiguous_or_undefined(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? t->contiguous() : at::Tensor();
}

const void* data_or_null(const at::Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

}  // namespace

namespace nn {

// ---- softmax -------------------------------------------------------------------------------

at::Tensor& softmax_out_impl(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& result, bool log) {
  const char* name = log ? "aten::_log_softmax" : "aten::_softmax";
  TORCH_CHECK(!half_to_float, "softmax with half to float conversion is not supported on neuron");
  if (!floating_kernel_dtype(self) || result.scalar_type() != self.scalar_type()) {
    if (log) {
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(_log_softmax, out)>::call(self, dim, half_to_float, result);
    }
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(_softmax, out)>::call(self, dim, half_to_float, result);
  }
  const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
  const at::Tensor input = self.contiguous();
  at::native::resize_output(result, self.sizes());
  at::Tensor out = result.is_contiguous() ? result : at::empty_like(input);
  if (input.numel() > 0) {
    const kernels::SoftmaxShape shape = softmax_shape(input, wrapped);
    const kernels::DType dtype = to_kernel_dtype(input.scalar_type());
    void* out_ptr = out.data_ptr();
    const void* in_ptr = input.data_ptr();
    enqueue(out, name, {&input}, [=] { kernels::softmax(dtype, shape, out_ptr, in_ptr, log); });
  }
  if (!out.is_same(result)) result.copy_(out);
  return result;
}

at::Tensor& softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& result) {
  return softmax_out_impl(self, dim, half_to_float, result, false);
}
at::Tensor& log_softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& result) {
  return softmax_out_impl(self, dim, half_to_float, result, true);
}
at::Tensor softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  at::Tensor result = at::empty({0}, self.options());
  return softmax_out_impl(self, dim, half_to_float, result, false);
}
at::Tensor log_softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  at::Tensor result = at::empty({0}, self.options());
  return softmax_out_impl(self, dim, half_to_float, result, true);
}

at::Tensor& softmax_backward_impl(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                  c10::ScalarType input_dtype, at::Tensor& grad_input, bool log) {
  if (!floating_kernel_dtype(grad_output) || output.scalar_type() != grad_output.scalar_type() ||
      input_dtype != grad_output.scalar_type() || grad_input.scalar_type() != grad_output.scalar_type()) {
    if (log) {
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(_log_softmax_backward_data, out)>::call(
          grad_output, output, dim, input_dtype, grad_input);
    }
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(_softmax_backward_data, out)>::call(
        grad_output, output, dim, input_dtype, grad_input);
  }
  const int64_t wrapped = at::maybe_wrap_dim(dim, output.dim());
  const at::Tensor go = grad_output.contiguous();
  const at::Tensor y = output.contiguous();
  at::native::resize_output(grad_input, output.sizes());
  at::Tensor gi = grad_input.is_contiguous() ? grad_input : at::empty_like(y);
  if (y.numel() > 0) {
    const kernels::SoftmaxShape shape = softmax_shape(y, wrapped);
    const kernels::DType dtype = to_kernel_dtype(y.scalar_type());
    void* gi_ptr = gi.data_ptr();
    const void* go_ptr = go.data_ptr();
    const void* y_ptr = y.data_ptr();
    enqueue(gi, log ? "aten::_log_softmax_backward_data" : "aten::_softmax_backward_data", {&go, &y},
            [=] { kernels::softmax_backward(dtype, shape, gi_ptr, go_ptr, y_ptr, log); });
  }
  if (!gi.is_same(grad_input)) grad_input.copy_(gi);
  return grad_input;
}

at::Tensor& softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                 c10::ScalarType input_dtype, at::Tensor& grad_input) {
  return softmax_backward_impl(grad_output, output, dim, input_dtype, grad_input, false);
}
at::Tensor& log_softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                     c10::ScalarType input_dtype, at::Tensor& grad_input) {
  return softmax_backward_impl(grad_output, output, dim, input_dtype, grad_input, true);
}
at::Tensor softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                            c10::ScalarType input_dtype) {
  at::Tensor grad_input = at::empty({0}, grad_output.options());
  return softmax_backward_impl(grad_output, output, dim, input_dtype, grad_input, false);
}
at::Tensor log_softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                c10::ScalarType input_dtype) {
  at::Tensor grad_input = at::empty({0}, grad_output.options());
  return softmax_backward_impl(grad_output, output, dim, input_dtype, grad_input, true);
}

// ---- layer norm ----------------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                                                          const std::optional<at::Tensor>& weight,
                                                          const std::optional<at::Tensor>& bias, double eps) {
  const int64_t norm_dims = static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(norm_dims >= 1, "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, but got normalized_shape = ", normalized_shape);
  TORCH_CHECK(input.dim() >= norm_dims && input.sizes().slice(input.dim() - norm_dims).equals(normalized_shape),
              "Given normalized_shape=", normalized_shape, ", expected input with shape [*, ",
              normalized_shape, "], but got input of size", input.sizes());
  if (weight.has_value()) check_same_device("aten::native_layer_norm", input.device(), {&*weight});
  if (bias.has_value()) check_same_device("aten::native_layer_norm", input.device(), {&*bias});
  if (!floating_kernel_dtype(input)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(native_layer_norm)>::call(
        input, normalized_shape, weight, bias, eps);
  }
  const at::Tensor x = input.contiguous();
  const at::Tensor w = contiguous_or_undefined(weight);
  const at::Tensor b = contiguous_or_undefined(bias);
  int64_t cols = 1;
  for (int64_t s : normalized_shape) cols *= s;
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  std::vector<int64_t> stat_shape(input.sizes().begin(), input.sizes().end());
  for (int64_t d = input.dim() - norm_dims; d < input.dim(); ++d) stat_shape[d] = 1;
  at::Tensor out = at::empty_like(x);
  at::Tensor mean = at::empty(stat_shape, x.options());
  at::Tensor rstd = at::empty(stat_shape, x.options());
  if (rows > 0) {
    const kernels::DType dtype = to_kernel_dtype(x.scalar_type());
    const void* px = x.data_ptr();
    const void* pw = data_or_null(w);
    const void* pb = data_or_null(b);
    void* po = out.data_ptr();
    void* pm = mean.data_ptr();
    void* pr = rstd.data_ptr();
    enqueue(out, "aten::native_layer_norm", {&x, &w, &b}, [=] { kernels::layer_norm(dtype, rows, cols, eps, px, pw, pb, po, pm, pr); });
  }
  return {out, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 3> output_mask) {
  if (!floating_kernel_dtype(input) || grad_out.scalar_type() != input.scalar_type() ||
      mean.scalar_type() != input.scalar_type()) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(native_layer_norm_backward)>::call(
        grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask);
  }
  const at::Tensor go = grad_out.contiguous();
  const at::Tensor x = input.contiguous();
  const at::Tensor m = mean.contiguous();
  const at::Tensor r = rstd.contiguous();
  const at::Tensor w = contiguous_or_undefined(weight);
  int64_t cols = 1;
  for (int64_t s : normalized_shape) cols *= s;
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  at::Tensor grad_x = output_mask[0] ? at::empty_like(x) : at::Tensor();
  const bool has_weight = weight.has_value() && weight->defined();
  const bool has_bias = bias.has_value() && bias->defined();
  at::Tensor grad_w = output_mask[1] && has_weight ? at::empty_like(*weight, at::MemoryFormat::Contiguous) : at::Tensor();
  at::Tensor grad_b = output_mask[2] && has_bias ? at::empty_like(*bias, at::MemoryFormat::Contiguous) : at::Tensor();
  if (rows == 0) {
    if (grad_w.defined()) grad_w.zero_();
    if (grad_b.defined()) grad_b.zero_();
  } else if (grad_x.defined() || grad_w.defined() || grad_b.defined()) {
    const kernels::DType dtype = to_kernel_dtype(x.scalar_type());
    const void* pgo = go.data_ptr();
    const void* px = x.data_ptr();
    const void* pm = m.data_ptr();
    const void* pr = r.data_ptr();
    const void* pw = data_or_null(w);
    void* pgx = grad_x.defined() ? grad_x.data_ptr() : nullptr;
    void* pgw = grad_w.defined() ? grad_w.data_ptr() : nullptr;
    void* pgb = grad_b.defined() ? grad_b.data_ptr() : nullptr;
    check_same_device("aten::native_layer_norm_backward", x.device(), {&m, &r, &w});
    enqueue(x, "aten::native_layer_norm_backward", {&go, &x}, [=] {
      kernels::layer_norm_backward(dtype, rows, cols, pgo, px, pm, pr, pw, pgx, pgw, pgb);
    });
  }
  return {grad_x, grad_w, grad_b};
}

// ---- NLL loss ------------------------------------------------------------------------------

// The dtypes the NLL kernels take (the shapes are checked before).
bool nll_supported(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight) {
  return floating_kernel_dtype(self) && target.scalar_type() == c10::kLong &&
         (!weight.has_value() || !weight->defined() || weight->scalar_type() == self.scalar_type());
}

void check_nll_shapes(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight) {
  check_same_device("aten::nll_loss", self.device(), {&target});
  if (weight.has_value()) check_same_device("aten::nll_loss", self.device(), {&*weight});
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
  const int64_t batch = self.dim() == 1 ? 1 : self.size(0);
  TORCH_CHECK(self.dim() == 1 ? target.numel() == 1 : target.size(0) == batch,
              "size mismatch (got input: ", self.sizes(), ", target: ", target.sizes(), ")");
  const int64_t classes = self.size(-1);
  TORCH_CHECK(!weight.has_value() || !weight->defined() || weight->numel() == classes,
              "weight tensor should be defined either for all ", classes, " classes or no classes but got weight tensor of shape: ",
              weight->sizes());
}

// The loss's sizes: batch x classes x spatial positions (1 but for nll_loss2d).
struct NllShape {
  int64_t batch, classes, spatial;
};

NllShape nll_shape(const at::Tensor& self) {
  if (self.dim() == 4) return {self.size(0), self.size(1), self.size(2) * self.size(3)};
  return {self.dim() == 1 ? 1 : self.size(0), self.size(-1), 1};
}

void check_nll2d_shapes(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight) {
  check_same_device("aten::nll_loss2d", self.device(), {&target});
  if (weight.has_value()) check_same_device("aten::nll_loss2d", self.device(), {&*weight});
  TORCH_CHECK(target.dim() == 3, "only batches of spatial targets supported (3D tensors) but got targets of dimension: ",
              target.dim());
  TORCH_CHECK(self.dim() == 4, "only batches of spatial inputs supported (4D tensors), but got input of dimension: ",
              self.dim());
  TORCH_CHECK(!weight.has_value() || !weight->defined() || weight->numel() == self.size(1),
              "weight tensor should be defined either for all or no classes");
  TORCH_CHECK(self.size(0) == target.size(0) && self.size(2) == target.size(1) && self.size(3) == target.size(2),
              "size mismatch (got input: ", self.sizes(), " , target: ", target.sizes());
}

// The forward of nll_loss (1-D or 2-D self) and nll_loss2d (4-D), shapes already checked.
void nll_forward(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
                 int64_t reduction, int64_t ignore_index, at::Tensor& output, at::Tensor& total_weight, const char* name) {
  const at::Tensor lp = self.contiguous();
  const at::Tensor t = target.contiguous();
  const at::Tensor w = contiguous_or_undefined(weight);
  const NllShape shape = nll_shape(self);
  const auto mode = static_cast<kernels::Reduction>(reduction);
  if (mode == kernels::Reduction::kNone && self.dim() == 4) {
    at::native::resize_output(output, target.sizes());
  } else if (mode == kernels::Reduction::kNone && self.dim() == 2) {
    at::native::resize_output(output, {shape.batch});
  } else {
    at::native::resize_output(output, {});
  }
  at::native::resize_output(total_weight, {});
  at::Tensor out = output.is_contiguous() ? output : at::empty(output.sizes(), lp.options());
  const kernels::DType dtype = to_kernel_dtype(lp.scalar_type());
  const void* plp = lp.data_ptr();
  const auto* pt = static_cast<const int64_t*>(t.data_ptr());
  const void* pw = data_or_null(w);
  void* po = out.data_ptr();
  void* ptw = total_weight.data_ptr();
  enqueue(lp, name, {&lp, &t, &w}, [=] {
    kernels::nll_loss(dtype, shape.batch, shape.classes, shape.spatial, plp, pt, pw, mode, ignore_index, po, ptw);
  });
  if (!out.is_same(output)) output.copy_(out);
}

void nll_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                  const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                  const at::Tensor& total_weight, at::Tensor& grad_input, const char* name) {
  const at::Tensor go = grad_output.contiguous();
  const at::Tensor t = target.contiguous();
  const at::Tensor w = contiguous_or_undefined(weight);
  const at::Tensor tw = total_weight.contiguous();
  const NllShape shape = nll_shape(self);
  at::native::resize_output(grad_input, self.sizes());
  at::Tensor gi = grad_input.is_contiguous() ? grad_input : at::empty(self.sizes(), self.options());
  const kernels::DType dtype = to_kernel_dtype(self.scalar_type());
  const auto mode = static_cast<kernels::Reduction>(reduction);
  const void* pgo = go.data_ptr();
  const auto* pt = static_cast<const int64_t*>(t.data_ptr());
  const void* pw = data_or_null(w);
  const void* ptw = tw.data_ptr();
  void* pgi = gi.data_ptr();
  check_same_device(name, gi.device(), {&w, &tw});
  enqueue(gi, name, {&go, &t}, [=] {
    kernels::nll_loss_backward(dtype, shape.batch, shape.classes, shape.spatial, pgo, pt, pw, mode, ignore_index, ptw,
                               pgi);
  });
  if (!gi.is_same(grad_input)) grad_input.copy_(gi);
}

std::tuple<at::Tensor&, at::Tensor&> nll_loss_out(const at::Tensor& self, const at::Tensor& target,
                                                  const std::optional<at::Tensor>& weight, int64_t reduction,
                                                  int64_t ignore_index, at::Tensor& output, at::Tensor& total_weight) {
  check_nll_shapes(self, target, weight);
  if (!nll_supported(self, target, weight)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(nll_loss_forward, output)>::call(
        self, target, weight, reduction, ignore_index, output, total_weight);
  }
  nll_forward(self, target, weight, reduction, ignore_index, output, total_weight, "aten::nll_loss_forward");
  return {output, total_weight};
}

std::tuple<at::Tensor, at::Tensor> nll_loss(const at::Tensor& self, const at::Tensor& target,
                                            const std::optional<at::Tensor>& weight, int64_t reduction,
                                            int64_t ignore_index) {
  at::Tensor output = at::empty({0}, self.options());
  at::Tensor total_weight = at::empty({0}, self.options());
  nll_loss_out(self, target, weight, reduction, ignore_index, output, total_weight);
  return {output, total_weight};
}

at::Tensor& nll_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                  const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                                  const at::Tensor& total_weight, at::Tensor& grad_input) {
  check_nll_shapes(self, target, weight);
  if (!nll_supported(self, target, weight) || grad_output.scalar_type() != self.scalar_type()) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(nll_loss_backward, grad_input)>::call(
        grad_output, self, target, weight, reduction, ignore_index, total_weight, grad_input);
  }
  nll_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight, grad_input,
               "aten::nll_loss_backward");
  return grad_input;
}

at::Tensor nll_loss_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                             const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                             const at::Tensor& total_weight) {
  at::Tensor grad_input = at::empty({0}, self.options());
  return nll_loss_backward_out(grad_output, self, target, weight, reduction, ignore_index, total_weight, grad_input);
}

std::tuple<at::Tensor&, at::Tensor&> nll_loss2d_out(const at::Tensor& self, const at::Tensor& target,
                                                    const std::optional<at::Tensor>& weight, int64_t reduction,
                                                    int64_t ignore_index, at::Tensor& output, at::Tensor& total_weight) {
  check_nll2d_shapes(self, target, weight);
  if (!nll_supported(self, target, weight)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(nll_loss2d_forward, output)>::call(
        self, target, weight, reduction, ignore_index, output, total_weight);
  }
  nll_forward(self, target, weight, reduction, ignore_index, output, total_weight, "aten::nll_loss2d_forward");
  return {output, total_weight};
}

std::tuple<at::Tensor, at::Tensor> nll_loss2d(const at::Tensor& self, const at::Tensor& target,
                                              const std::optional<at::Tensor>& weight, int64_t reduction,
                                              int64_t ignore_index) {
  at::Tensor output = at::empty({0}, self.options());
  at::Tensor total_weight = at::empty({0}, self.options());
  nll_loss2d_out(self, target, weight, reduction, ignore_index, output, total_weight);
  return {output, total_weight};
}

at::Tensor& nll_loss2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                    const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                                    const at::Tensor& total_weight, at::Tensor& grad_input) {
  check_nll2d_shapes(self, target, weight);
  if (static_cast<kernels::Reduction>(reduction) == kernels::Reduction::kNone) {
    TORCH_CHECK(grad_output.sizes() == target.sizes(), "nll_loss2d: expected grad_output of size ", target.sizes(),
                " but got ", grad_output.sizes());
  } else {
    TORCH_CHECK(grad_output.numel() == 1, "nll_loss2d: expected a single-element grad_output for a reduced loss, got ",
                grad_output.sizes());
  }
  if (!nll_supported(self, target, weight) || grad_output.scalar_type() != self.scalar_type()) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(nll_loss2d_backward, grad_input)>::call(
        grad_output, self, target, weight, reduction, ignore_index, total_weight, grad_input);
  }
  nll_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight, grad_input,
               "aten::nll_loss2d_backward");
  return grad_input;
}

at::Tensor nll_loss2d_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                               const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                               const at::Tensor& total_weight) {
  at::Tensor grad_input = at::empty({0}, self.options());
  return nll_loss2d_backward_out(grad_output, self, target, weight, reduction, ignore_index, total_weight, grad_input);
}

}  // namespace nn

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_softmax", TORCH_FN(nn::softmax));
  m.impl("_softmax.out", TORCH_FN(nn::softmax_out));
  m.impl("_log_softmax", TORCH_FN(nn::log_softmax));
  m.impl("_log_softmax.out", TORCH_FN(nn::log_softmax_out));
  m.impl("_softmax_backward_data", TORCH_FN(nn::softmax_backward));
  m.impl("_softmax_backward_data.out", TORCH_FN(nn::softmax_backward_out));
  m.impl("_log_softmax_backward_data", TORCH_FN(nn::log_softmax_backward));
  m.impl("_log_softmax_backward_data.out", TORCH_FN(nn::log_softmax_backward_out));
  m.impl("native_layer_norm", TORCH_FN(nn::layer_norm));
  m.impl("native_layer_norm_backward", TORCH_FN(nn::layer_norm_backward));
  m.impl("nll_loss_forward", TORCH_FN(nn::nll_loss));
  m.impl("nll_loss_forward.output", TORCH_FN(nn::nll_loss_out));
  m.impl("nll_loss_backward", TORCH_FN(nn::nll_loss_backward));
  m.impl("nll_loss_backward.grad_input", TORCH_FN(nn::nll_loss_backward_out));
  m.impl("nll_loss2d_forward", TORCH_FN(nn::nll_loss2d));
  m.impl("nll_loss2d_forward.output", TORCH_FN(nn::nll_loss2d_out));
  m.impl("nll_loss2d_backward", TORCH_FN(nn::nll_loss2d_backward));
  m.impl("nll_loss2d_backward.grad_input", TORCH_FN(nn::nll_loss2d_backward_out));
}

}  // namespace torchneuron::aten
