// Neural-network operators on neuron: softmax / log_softmax and their backward, layer norm,
// NLL loss, index_select (embedding), embedding backward, embedding_bag, cat and arange. The host checks
// arguments, makes inputs contiguous and allocates outputs; csrc/kernels/nn runs on the queue.
// Kernels take raw pointers: a temporary freed here can only be reused by later commands,
// which the in-order queue runs after this one.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_embedding_bag_backward_ops.h>
#include <ATen/ops/_embedding_bag_dense_backward_ops.h>
#include <ATen/ops/_embedding_bag_ops.h>
#include <ATen/ops/_embedding_bag_per_sample_weights_backward_ops.h>
#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_ops.h>
#include <ATen/ops/arange_ops.h>
#include <ATen/ops/cat_ops.h>
#include <ATen/ops/cumprod_ops.h>
#include <ATen/ops/_cummax_helper_ops.h>
#include <ATen/ops/_cummin_helper_ops.h>
#include <ATen/ops/_logcumsumexp_ops.h>
#include <ATen/ops/cumsum_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/embedding_dense_backward_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/gather_ops.h>
#include <ATen/ops/index_reduce_ops.h>
#include <ATen/ops/index_select_ops.h>
#include <ATen/ops/masked_fill_ops.h>
#include <ATen/ops/native_layer_norm_backward_ops.h>
#include <ATen/ops/native_layer_norm_ops.h>
#include <ATen/ops/nll_loss2d_backward_ops.h>
#include <ATen/ops/nll_loss2d_forward_ops.h>
#include <ATen/ops/nll_loss_backward_ops.h>
#include <ATen/ops/nll_loss_forward_ops.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/scatter_add_ops.h>
#include <ATen/ops/scatter_ops.h>
#include <ATen/ops/scatter_reduce_ops.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "aten/cpu_fallback.h"
#include "aten/neuron_tensor.h"
#include "kernels/copy.h"
#include "kernels/nn.h"

namespace torchneuron::aten {
namespace {

bool floating_kernel_dtype(const at::Tensor& t) {
  return has_kernel_dtype(t.scalar_type()) && kernels::nn_supported(to_kernel_dtype(t.scalar_type()));
}

kernels::SoftmaxShape softmax_shape(const at::Tensor& t, int64_t dim) {
  kernels::SoftmaxShape shape;
  for (int64_t d = 0; d < dim; ++d) shape.outer *= t.size(d);
  shape.dim = t.dim() == 0 ? 1 : t.size(dim);
  for (int64_t d = dim + 1; d < t.dim(); ++d) shape.inner *= t.size(d);
  return shape;
}

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

// ---- indexing, cat, arange -----------------------------------------------------------------

at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& result) {
  TORCH_CHECK(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == c10::kLong || index.scalar_type() == c10::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  if (!has_kernel_dtype(self.scalar_type()) || result.scalar_type() != self.scalar_type() ||
      index.device() != self.device()) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(index_select, out)>::call(self, dim, index, result);
  }
  const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
  const at::Tensor src = self.contiguous();
  const at::Tensor idx = index.reshape({-1}).to(c10::kLong).contiguous();
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
  if (self.dim() > 0) shape[wrapped] = idx.numel();
  at::native::resize_output(result, shape);
  at::Tensor out = result.is_contiguous() ? result : at::empty(shape, src.options());
  int64_t outer = 1;
  for (int64_t d = 0; d < wrapped; ++d) outer *= src.size(d);
  int64_t row = static_cast<int64_t>(src.element_size());
  for (int64_t d = wrapped + 1; d < src.dim(); ++d) row *= src.size(d);
  const int64_t self_dim = src.dim() == 0 ? 1 : src.size(wrapped);
  if (out.numel() > 0) {
    const char* ps = static_cast<const char*>(src.data_ptr());
    const auto* pi = static_cast<const int64_t*>(idx.data_ptr());
    char* po = static_cast<char*>(out.data_ptr());
    const int64_t count = idx.numel();
    enqueue(out, "aten::index_select", {&src, &idx}, [=] { kernels::index_select(outer, self_dim, row, ps, pi, count, po); });
  }
  if (!out.is_same(result)) result.copy_(out);
  return result;
}

at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  at::Tensor result = at::empty({0}, self.options());
  return index_select_out(self, dim, index, result);
}

at::Tensor embedding_dense_backward(const at::Tensor& grad_output, const at::Tensor& indices, int64_t num_weights,
                                    int64_t padding_idx, bool scale_grad_by_freq) {
  if (scale_grad_by_freq || !floating_kernel_dtype(grad_output)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(embedding_dense_backward)>::call(
        grad_output, indices, num_weights, padding_idx, scale_grad_by_freq);
  }
  check_same_device("aten::embedding_dense_backward", grad_output.device(), {&indices});
  const at::Tensor idx = indices.reshape({-1}).to(c10::kLong).contiguous();
  const int64_t cols = grad_output.size(-1);
  const at::Tensor grad = grad_output.reshape({idx.numel(), cols}).contiguous();
  at::Tensor grad_weight = at::empty({num_weights, cols}, grad.options());
  if (grad_weight.numel() == 0) return grad_weight;
  const kernels::DType dtype = to_kernel_dtype(grad.scalar_type());
  const void* pg = grad.data_ptr();
  const auto* pi = static_cast<const int64_t*>(idx.data_ptr());
  void* pw = grad_weight.data_ptr();
  const int64_t count = idx.numel();
  enqueue(grad_weight, "aten::embedding_dense_backward", {&grad, &idx}, [=] {
    kernels::embedding_backward(dtype, count, cols, pg, pi, num_weights, padding_idx, pw);
  });
  return grad_weight;
}

// ---- embedding_bag ------------------------------------------------------------------------
// Outputs laid out as on CUDA (the meta functions' non-CPU shapes): offset2bag [count],
// bag_size [offsets], max_indices [bags, dim] for max, else empty; in the indices' dtype.

namespace {

struct BagInputs {
  at::Tensor indices, offsets;  // int64, contiguous
  kernels::EmbeddingBagShape shape;
};

// The host-side checks of CPU PyTorch, with its messages; false for what the kernels do not take.
bool bag_inputs(const char* op, const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets,
                int64_t mode, const std::optional<at::Tensor>& per_sample_weights, bool include_last_offset,
                BagInputs& in) {
  TORCH_CHECK(indices.dim() == 1, "input has to be a 1D or 2D Tensor, but got Tensor of dimension ", indices.dim());
  TORCH_CHECK(offsets.dim() == 1, "offsets has to be a 1D Tensor, but got Tensor of dimension ", offsets.dim());
  TORCH_CHECK(weight.dim() == 2, "weight has to be a 2D Tensor, but got Tensor of dimension ", weight.dim());
  for (const at::Tensor* t : {&indices, &offsets}) {
    TORCH_CHECK(t->scalar_type() == at::kLong || t->scalar_type() == at::kInt, op,
                ": expected indices and offsets to be long or int, got ", t->scalar_type());
  }
  TORCH_CHECK(mode >= 0 && mode <= 2, op, ": mode has to be 0 (sum), 1 (mean) or 2 (max), got ", mode);
  TORCH_CHECK(!include_last_offset || offsets.size(0) >= 1, "include_last_offset: number of offset should be at least 1");
  const at::Tensor* scale = per_sample_weights.has_value() && per_sample_weights->defined() ? &*per_sample_weights : nullptr;
  if (scale) {
    TORCH_CHECK(mode == 0, "embedding_bag: per_sample_weights only supported with mode='sum'");
    TORCH_CHECK(scale->dim() == 1 && scale->numel() == indices.numel(), "embedding_bag: expected per_sample_weights to be a 1D tensor of ",
                indices.numel(), " elements (as many as indices), got shape ", scale->sizes());
    TORCH_CHECK(scale->scalar_type() == weight.scalar_type(), "embedding_bag: expected per_sample_weights of dtype ",
                weight.scalar_type(), ", got ", scale->scalar_type());
  }
  check_same_device(op, weight.device(), {&indices, &offsets, scale});
  if (!floating_kernel_dtype(weight)) return false;
  in.indices = indices.to(at::kLong).contiguous();
  in.offsets = offsets.to(at::kLong).contiguous();
  in.shape.num_weights = weight.size(0);
  in.shape.dim = weight.size(1);
  in.shape.count = indices.numel();
  in.shape.num_offsets = offsets.numel();
  in.shape.num_bags = offsets.numel() - (include_last_offset ? 1 : 0);
  return true;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> embedding_bag(
    const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets, bool scale_grad_by_freq, int64_t mode,
    bool sparse, const std::optional<at::Tensor>& per_sample_weights, bool include_last_offset, int64_t padding_idx) {
  BagInputs in;
  if (!bag_inputs("embedding_bag", weight, indices, offsets, mode, per_sample_weights, include_last_offset, in)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_embedding_bag)>::call(
        weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights, include_last_offset, padding_idx);
  }
  const kernels::EmbeddingBagShape shape = in.shape;
  const at::Tensor w = weight.contiguous();
  const at::Tensor scale = per_sample_weights.has_value() && per_sample_weights->defined() ? per_sample_weights->contiguous() : at::Tensor();
  at::Tensor out = at::empty({shape.num_bags, shape.dim}, weight.options());
  const auto long_options = in.indices.options();
  at::Tensor offset2bag = at::empty({shape.count}, long_options);
  at::Tensor bag_size = at::empty({shape.num_offsets}, long_options);
  at::Tensor max_indices = mode == 2 ? at::empty({shape.num_bags, shape.dim}, long_options) : at::empty({0}, long_options);
  const kernels::DType dtype = to_kernel_dtype(weight.scalar_type());
  const auto bag_mode = static_cast<kernels::BagMode>(mode);
  const void* pw = w.data_ptr();
  const void* ps = scale.defined() ? scale.data_ptr() : nullptr;
  const auto* pi = in.indices.const_data_ptr<int64_t>();
  const auto* po = in.offsets.const_data_ptr<int64_t>();
  void* pout = out.data_ptr();
  auto* p2b = offset2bag.mutable_data_ptr<int64_t>();
  auto* psize = bag_size.mutable_data_ptr<int64_t>();
  auto* pmax = mode == 2 ? max_indices.mutable_data_ptr<int64_t>() : nullptr;
  enqueue(out, "aten::_embedding_bag", {&w, &in.indices, &in.offsets, &scale}, [=] {
    kernels::embedding_bag(dtype, bag_mode, shape, pw, pi, po, ps, padding_idx, pout, p2b, psize, pmax);
  });
  const auto index_dtype = indices.scalar_type();
  return {out, offset2bag.to(index_dtype), bag_size.to(index_dtype), max_indices.to(index_dtype)};
}

at::Tensor embedding_bag_dense_backward(const at::Tensor& grad, const at::Tensor& indices, const at::Tensor& offset2bag,
                                        const at::Tensor& bag_size, const at::Tensor& maximum_indices, c10::SymInt num_weights,
                                        bool scale_grad_by_freq, int64_t mode,
                                        const std::optional<at::Tensor>& per_sample_weights, int64_t padding_idx) {
  const at::Tensor* scale = per_sample_weights.has_value() && per_sample_weights->defined() ? &*per_sample_weights : nullptr;
  if (scale_grad_by_freq || !floating_kernel_dtype(grad) || grad.dim() != 2 || mode < 0 || mode > 2 ||
      (scale && scale->scalar_type() != grad.scalar_type())) {
    return at::native::call_fallback_fn_symint<&neuron_cpu_fallback, ATEN_OP(_embedding_bag_dense_backward)>::call(
        grad, indices, offset2bag, bag_size, maximum_indices, num_weights, scale_grad_by_freq, mode, per_sample_weights,
        padding_idx);
  }
  check_same_device("embedding_bag backward", grad.device(), {&indices, &offset2bag, &bag_size, &maximum_indices, scale});
  kernels::EmbeddingBagShape shape;
  shape.num_weights = num_weights.expect_int();
  shape.dim = grad.size(1);
  shape.count = indices.numel();
  shape.num_bags = grad.size(0);
  const at::Tensor g = grad.contiguous();
  const at::Tensor idx = indices.to(at::kLong).contiguous();
  const at::Tensor bags = offset2bag.to(at::kLong).contiguous();
  const at::Tensor sizes = bag_size.to(at::kLong).contiguous();
  const at::Tensor maxima = mode == 2 ? maximum_indices.to(at::kLong).contiguous() : at::Tensor();
  const at::Tensor s = scale ? scale->contiguous() : at::Tensor();
  TORCH_CHECK(bags.numel() == shape.count && (mode != 2 || maxima.numel() == shape.num_bags * shape.dim),
              "embedding_bag backward: offset2bag and max_indices must be those of the forward on this device");
  at::Tensor grad_weight = at::empty({shape.num_weights, shape.dim}, grad.options());
  if (grad_weight.numel() == 0) return grad_weight;
  const kernels::DType dtype = to_kernel_dtype(grad.scalar_type());
  const auto bag_mode = static_cast<kernels::BagMode>(mode);
  const void* pg = g.data_ptr();
  const auto* pi = idx.const_data_ptr<int64_t>();
  const auto* p2b = bags.const_data_ptr<int64_t>();
  const auto* psize = sizes.const_data_ptr<int64_t>();
  const int64_t* pmax = maxima.defined() ? maxima.const_data_ptr<int64_t>() : nullptr;
  const void* ps = s.defined() ? s.data_ptr() : nullptr;
  void* pgw = grad_weight.data_ptr();
  enqueue(grad_weight, "aten::_embedding_bag_dense_backward", {&g, &idx, &bags, &sizes, &maxima, &s}, [=] {
    kernels::embedding_bag_backward(dtype, bag_mode, shape, pg, pi, p2b, psize, pmax, ps, padding_idx, pgw);
  });
  return grad_weight;
}

at::Tensor embedding_bag_backward(const at::Tensor& grad, const at::Tensor& indices, const at::Tensor& offsets,
                                  const at::Tensor& offset2bag, const at::Tensor& bag_size, const at::Tensor& maximum_indices,
                                  c10::SymInt num_weights, bool scale_grad_by_freq, int64_t mode, bool sparse,
                                  const std::optional<at::Tensor>& per_sample_weights, int64_t padding_idx) {
  if (sparse) {  // a sparse gradient: no sparse layouts on neuron
    return at::native::call_fallback_fn_symint<&neuron_cpu_fallback, ATEN_OP(_embedding_bag_backward)>::call(
        grad, indices, offsets, offset2bag, bag_size, maximum_indices, num_weights, scale_grad_by_freq, mode, sparse,
        per_sample_weights, padding_idx);
  }
  return embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices, num_weights,
                                      scale_grad_by_freq, mode, per_sample_weights, padding_idx);
}

at::Tensor embedding_bag_per_sample_weights_backward(const at::Tensor& grad, const at::Tensor& weight,
                                                     const at::Tensor& indices, const at::Tensor& offsets,
                                                     const at::Tensor& offset2bag, int64_t mode, int64_t padding_idx) {
  TORCH_CHECK(mode == 0, "embedding_bag_backward: per_sample_weights only supported for mode='sum'");
  if (!floating_kernel_dtype(grad) || grad.scalar_type() != weight.scalar_type() || grad.dim() != 2 || weight.dim() != 2) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_embedding_bag_per_sample_weights_backward)>::call(
        grad, weight, indices, offsets, offset2bag, mode, padding_idx);
  }
  check_same_device("embedding_bag backward", grad.device(), {&weight, &indices, &offset2bag});
  kernels::EmbeddingBagShape shape;
  shape.num_weights = weight.size(0);
  shape.dim = weight.size(1);
  shape.count = indices.numel();
  shape.num_bags = grad.size(0);
  const at::Tensor g = grad.contiguous();
  const at::Tensor w = weight.contiguous();
  const at::Tensor idx = indices.to(at::kLong).contiguous();
  const at::Tensor bags = offset2bag.to(at::kLong).contiguous();
  TORCH_CHECK(bags.numel() == shape.count, "embedding_bag backward: offset2bag must be that of the forward on this device");
  at::Tensor out = at::empty({shape.count}, grad.options());
  if (out.numel() == 0) return out;
  const kernels::DType dtype = to_kernel_dtype(grad.scalar_type());
  const void* pg = g.data_ptr();
  const void* pw = w.data_ptr();
  const auto* pi = idx.const_data_ptr<int64_t>();
  const auto* p2b = bags.const_data_ptr<int64_t>();
  void* po = out.data_ptr();
  enqueue(out, "aten::_embedding_bag_per_sample_weights_backward", {&g, &w, &idx, &bags}, [=] {
    kernels::embedding_bag_per_sample_weights_backward(dtype, shape, pg, pw, pi, p2b, padding_idx, po);
  });
  return out;
}

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
  at::native::resize_output(result, shape);
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
  const auto count = static_cast<int64_t>(std::ceil((e - s) / st));
  at::native::resize_output(result, {count});
  at::Tensor out = result.is_contiguous() ? result : at::empty({count}, result.options());
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

// ---- gather / scatter ----------------------------------------------------------------------

void check_index_shape(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor* src,
                       const char* name) {
  TORCH_CHECK(index.scalar_type() == c10::kLong || index.scalar_type() == c10::kInt, name,
              "(): Expected dtype int32 or int64 for index");
  TORCH_CHECK(index.dim() == self.dim() || index.numel() == 0, "Index tensor must have the same number of dimensions as ",
              src ? "self tensor" : "input tensor");
  for (int64_t d = 0; d < index.dim(); ++d) {
    if (d == dim) continue;
    TORCH_CHECK(index.size(d) <= self.size(d), "Size does not match at dimension ", d, " expected index ",
                index.sizes(), " to be no larger than self ", self.sizes(), " apart from dimension ", dim);
    if (src != nullptr) {
      TORCH_CHECK(index.size(d) <= src->size(d), "Size does not match at dimension ", d, " expected index ",
                  index.sizes(), " to be no larger than src ", src->sizes());
    }
  }
}

// The index as the kernels read it, int64 and contiguous. An index broadcast (stride 0) over
// every dim after `dim`, as x.gather(1, i.unsqueeze(-1).expand(b, k, d)) writes it, keeps only
// its entries up to `dim` (the flag is true): the broadcast is never materialized.
std::pair<at::Tensor, bool> kernel_index(const at::Tensor& index, int64_t dim) {
  bool inner_broadcast = index.dim() > dim + 1;
  for (int64_t d = dim + 1; d < index.dim(); ++d) inner_broadcast = inner_broadcast && index.stride(d) == 0;
  at::Tensor entries = index;
  if (inner_broadcast) {
    for (int64_t d = dim + 1; d < index.dim(); ++d) entries = entries.narrow(d, 0, 1);
  }
  return {entries.to(c10::kLong).contiguous(), inner_broadcast};
}

at::Tensor& gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad,
                       at::Tensor& result) {
  if (self.dim() == 0 && index.dim() <= 1 && index.device() == self.device() && result.scalar_type() == self.scalar_type()) {
    at::Tensor line = at::empty({0}, self.options());  // as one-element 1-D tensors
    gather_out(self.view({1}), dim, index.reshape({-1}), sparse_grad, line);
    at::native::resize_output(result, index.sizes());
    return result.copy_(line.view(index.sizes()));
  }
  if (self.dim() == 0 || index.dim() == 0 || !has_kernel_dtype(self.scalar_type()) ||
      result.scalar_type() != self.scalar_type() || index.device() != self.device()) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(gather, out)>::call(self, dim, index, sparse_grad, result);
  }
  const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
  if (index.numel() == 0) {  // any index dtype is accepted when there is nothing to gather
    at::native::resize_output(result, index.sizes());
    return result;
  }
  check_index_shape(self, wrapped, index, nullptr, "gather");
  const at::Tensor data = self.contiguous();
  const auto [idx, inner_broadcast] = kernel_index(index, wrapped);
  at::native::resize_output(result, index.sizes());
  at::Tensor out = result.is_contiguous() ? result : at::empty(index.sizes(), data.options());
  if (idx.numel() > 0) {
    const int ndim = static_cast<int>(data.dim());
    std::array<int64_t, kernels::kMaxDims> index_sizes{}, data_sizes{};
    for (int d = 0; d < ndim; ++d) {
      index_sizes[d] = index.size(d);
      data_sizes[d] = data.size(d);
    }
    const auto* pi = idx.data_ptr<int64_t>();
    const char* pd = static_cast<const char*>(data.data_ptr());
    char* po = static_cast<char*>(out.data_ptr());
    const int64_t bytes = static_cast<int64_t>(data.element_size());
    const int d = static_cast<int>(wrapped);
    const bool broadcast = inner_broadcast;  // a plain local: the lambda copies it
    enqueue(out, "aten::gather", {&data, &idx}, [=] {
      kernels::gather(ndim, index_sizes.data(), pi, broadcast, d, data_sizes.data(), bytes, pd, po);
    });
  }
  if (!out.is_same(result)) result.copy_(out);
  return result;
}

at::Tensor gather(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad) {
  at::Tensor result = at::empty({0}, self.options());
  return gather_out(self, dim, index, sparse_grad, result);
}

// result = self with src scattered (add: accumulated; reduce: reduced by that op) along dim;
// result may be self.
bool scatter_into(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src, bool add,
                  at::Tensor& result, const char* name,
                  std::optional<kernels::ScatterReduceOp> reduce = std::nullopt) {
  if (self.dim() == 0 && index.dim() <= 1 && src.dim() <= 1) {  // as one-element 1-D tensors (autograd's 0-dim backward)
    if (!result.is_same(self)) at::native::resize_output(result, {});
    at::Tensor result_line = result.view({1});
    return scatter_into(self.view({1}), dim, index.reshape({-1}), src.reshape({-1}), add, result_line, name, reduce);
  }
  if (self.dim() == 0 || index.dim() == 0 || !has_kernel_dtype(self.scalar_type()) ||
      c10::isComplexType(self.scalar_type()) || src.scalar_type() != self.scalar_type() ||
      result.scalar_type() != self.scalar_type() || index.device() != self.device() || src.device() != self.device()) {
    return false;
  }
  const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
  if (index.numel() != 0) check_index_shape(self, wrapped, index, &src, name);
  if (!result.is_same(self)) {
    at::native::resize_output(result, self.sizes());
    result.copy_(self);
  }
  at::Tensor data = result.is_contiguous() ? result : result.contiguous();
  if (index.numel() == 0) return true;
  const auto [idx, inner_broadcast] = kernel_index(index, wrapped);
  const at::Tensor values = src.as_strided(index.sizes(), src.strides(), src.storage_offset()).contiguous();
  {
    const int ndim = static_cast<int>(data.dim());
    std::array<int64_t, kernels::kMaxDims> index_sizes{}, data_sizes{};
    for (int d = 0; d < ndim; ++d) {
      index_sizes[d] = index.size(d);
      data_sizes[d] = data.size(d);
    }
    const auto* pi = idx.data_ptr<int64_t>();
    const char* ps = static_cast<const char*>(values.data_ptr());
    char* pd = static_cast<char*>(data.data_ptr());
    const kernels::DType dtype = to_kernel_dtype(data.scalar_type());
    const int d = static_cast<int>(wrapped);
    const bool broadcast = inner_broadcast;  // a plain local: the lambda copies it
    enqueue(data, name, {&idx, &values}, [=] {
      if (reduce.has_value()) {
        kernels::scatter_reduce(dtype, *reduce, ndim, index_sizes.data(), pi, broadcast, d, data_sizes.data(), ps, pd);
      } else {
        kernels::scatter(dtype, add, ndim, index_sizes.data(), pi, broadcast, d, data_sizes.data(), ps, pd);
      }
    });
  }
  if (!data.is_same(result)) result.copy_(data);
  return true;
}

at::Tensor& scatter_src_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                            at::Tensor& result) {
  if (!scatter_into(self, dim, index, src, false, result, "aten::scatter")) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(scatter, src_out)>::call(self, dim, index, src, result);
  }
  return result;
}

at::Tensor scatter_src(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  at::Tensor result = at::empty({0}, self.options());
  return scatter_src_out(self, dim, index, src, result);
}

at::Tensor& scatter_src_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  return scatter_src_out(self, dim, index, src, self);
}

at::Tensor& scatter_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                            at::Tensor& result) {
  if (!scatter_into(self, dim, index, src, true, result, "aten::scatter_add")) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(scatter_add, out)>::call(self, dim, index, src, result);
  }
  return result;
}

at::Tensor scatter_add(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  at::Tensor result = at::empty({0}, self.options());
  return scatter_add_out(self, dim, index, src, result);
}

at::Tensor& scatter_add_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  return scatter_add_out(self, dim, index, src, self);
}

// The identity of amax (lowest: true) or amin in a dtype: -inf / inf for floats, the integer
// type's own limits (a Scalar beyond them would not convert).
c10::Scalar reduction_extreme(at::ScalarType type, bool lowest) {
  auto limit = [lowest](auto zero) -> c10::Scalar {
    using T = decltype(zero);
    return lowest ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  };
  switch (type) {
    case at::kByte: return limit(uint8_t{});
    case at::kChar: return limit(int8_t{});
    case at::kShort: return limit(int16_t{});
    case at::kInt: return limit(int32_t{});
    case at::kLong: return limit(int64_t{});
    default: return lowest ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
}

// scatter_reduce.two: as CPU PyTorch computes it. Without include_self, the written positions
// start from the reduction's identity; mean sums, then divides by the count of values each
// position reduced (floor division for integers).
// name: the op that device errors name (index_reduce comes through here too).
at::Tensor& scatter_reduce_into(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                c10::string_view reduce, bool include_self, at::Tensor& result, const char* name) {
  TORCH_CHECK(reduce == "sum" || reduce == "prod" || reduce == "mean" || reduce == "amax" || reduce == "amin",
              "reduce argument must be either sum, prod, mean, amax or amin, got ", reduce);
  const bool supported = self.dim() > 0 && index.dim() > 0 && has_kernel_dtype(self.scalar_type()) &&
                         !c10::isComplexType(self.scalar_type()) && self.scalar_type() != c10::kBool &&
                         src.scalar_type() == self.scalar_type() && result.scalar_type() == self.scalar_type() &&
                         index.device() == self.device() && src.device() == self.device();
  if (!supported) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(scatter_reduce, two_out)>::call(
        self, dim, index, src, reduce, include_self, result);
  }
  const bool mean = reduce == "mean";
  const kernels::ScatterReduceOp op = reduce == "prod"   ? kernels::ScatterReduceOp::kProd
                                      : reduce == "amax" ? kernels::ScatterReduceOp::kAmax
                                      : reduce == "amin" ? kernels::ScatterReduceOp::kAmin
                                                         : kernels::ScatterReduceOp::kSum;
  if (!result.is_same(self)) {
    at::native::resize_output(result, self.sizes());
    result.copy_(self);
  }
  if (index.numel() == 0) return result;
  if (!include_self) {
    c10::Scalar identity = op == kernels::ScatterReduceOp::kProd ? 1 : 0;
    if (op == kernels::ScatterReduceOp::kAmax || op == kernels::ScatterReduceOp::kAmin) {
      identity = reduction_extreme(self.scalar_type(), op == kernels::ScatterReduceOp::kAmax);
    }
    result.scatter_(dim, index, identity);
  }
  // `supported` above holds every condition scatter_into checks: it cannot decline here.
  const bool reduced = scatter_into(result, dim, index, src, false, result, name, op);
  TORCH_INTERNAL_ASSERT(reduced, name, ": scatter_into declined a reduction it was checked for");
  if (mean) {
    at::Tensor count = include_self ? at::ones_like(result) : at::zeros_like(result);
    count.scatter_add_(dim, index, at::ones_like(src));
    count.masked_fill_(at::eq(count, 0), 1);
    if (at::isFloatingType(result.scalar_type())) {
      result.div_(count);
    } else {
      result.div_(count, "floor");
    }
  }
  return result;
}

at::Tensor& scatter_reduce_two_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                   c10::string_view reduce, bool include_self, at::Tensor& result) {
  return scatter_reduce_into(self, dim, index, src, reduce, include_self, result, "aten::scatter_reduce");
}

at::Tensor scatter_reduce_two(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                              c10::string_view reduce, bool include_self) {
  at::Tensor result = at::empty({0}, self.options());
  return scatter_reduce_two_out(self, dim, index, src, reduce, include_self, result);
}

at::Tensor& scatter_reduce_two_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                c10::string_view reduce, bool include_self) {
  return scatter_reduce_two_out(self, dim, index, src, reduce, include_self, self);
}

// The legacy scatter(..., reduce="add" / "multiply"): scatter_reduce's sum / prod including self.
at::Tensor& scatter_legacy_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                      c10::string_view reduce, at::Tensor& result) {
  TORCH_CHECK(reduce == "add" || reduce == "multiply", "reduce argument must be either add or multiply.");
  return scatter_reduce_into(self, dim, index, src, reduce == "add" ? "sum" : "prod", true, result, "aten::scatter");
}

at::Tensor scatter_legacy_reduce(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                 c10::string_view reduce) {
  at::Tensor result = at::empty({0}, self.options());
  return scatter_legacy_reduce_out(self, dim, index, src, reduce, result);
}

at::Tensor& scatter_legacy_reduce_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                   c10::string_view reduce) {
  return scatter_legacy_reduce_out(self, dim, index, src, reduce, self);
}

// index_reduce: scatter_reduce with the 1-D index spread over source's shape along dim.
// Anything but a 1-D index whose length is source's size along dim, with source's other sizes
// those of self, goes to the CPU, which raises its own error for it.
at::Tensor& index_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                             c10::string_view reduce, bool include_self, at::Tensor& result) {
  TORCH_CHECK(reduce == "prod" || reduce == "mean" || reduce == "amax" || reduce == "amin",
              "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got ", reduce, ".");
  bool shaped = self.dim() > 0 && index.dim() == 1 && source.dim() == self.dim() &&
                (index.scalar_type() == c10::kLong || index.scalar_type() == c10::kInt);
  const int64_t wrapped = shaped ? at::maybe_wrap_dim(dim, self.dim()) : 0;
  for (int64_t d = 0; shaped && d < self.dim(); ++d) {
    shaped = d == wrapped ? source.size(d) == index.numel() : source.size(d) == self.size(d);
  }
  if (!shaped) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(index_reduce, out)>::call(
        self, dim, index, source, reduce, include_self, result);
  }
  std::vector<int64_t> along(static_cast<size_t>(source.dim()), 1);
  along[static_cast<size_t>(wrapped)] = -1;
  return scatter_reduce_into(self, wrapped, index.reshape(along).expand(source.sizes()), source, reduce, include_self,
                             result, "aten::index_reduce");
}

at::Tensor index_reduce(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                        c10::string_view reduce, bool include_self) {
  at::Tensor result = at::empty({0}, self.options());
  return index_reduce_out(self, dim, index, source, reduce, include_self, result);
}

at::Tensor& index_reduce_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                          c10::string_view reduce, bool include_self) {
  return index_reduce_out(self, dim, index, source, reduce, include_self, self);
}

// ---- cumulative sum ------------------------------------------------------------------------

bool cumulative_dtype_ok(c10::ScalarType t) {
  return t == c10::kFloat || t == c10::kDouble || t == c10::kBFloat16 || t == c10::kHalf || t == c10::kLong ||
         t == c10::kInt;
}

// Runs a scan along dim over a contiguous copy of self into result (resized; through a
// contiguous buffer when result is not contiguous). kernel(shape, in, out) makes the queue job.
template <typename Kernel>
void scan_into(const char* name, const at::Tensor& self, int64_t dim, at::Tensor& result, Kernel kernel) {
  const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
  const at::Tensor input = self.contiguous();
  at::native::resize_output(result, self.sizes());
  at::Tensor out = result.is_contiguous() ? result : at::empty(self.sizes(), result.options());
  if (input.numel() > 0) {
    const kernels::SoftmaxShape shape = softmax_shape(input, wrapped);
    enqueue(out, name, {&input}, kernel(shape, input.data_ptr(), out.data_ptr()));
  }
  if (!out.is_same(result)) result.copy_(out);
}

// Runs cumsum / cumprod into `result`; false when the kernel cannot take these dtypes.
bool cumulative_into(kernels::ScanOp op, const char* name, const at::Tensor& self, int64_t dim,
                     std::optional<c10::ScalarType> dtype, at::Tensor& result) {
  check_same_device(name, self.device(), {&result});
  if (!has_kernel_dtype(self.scalar_type()) || c10::isComplexType(self.scalar_type()) ||
      !cumulative_dtype_ok(result.scalar_type()) || (dtype.has_value() && *dtype != result.scalar_type())) {
    return false;
  }
  const kernels::DType in_dtype = to_kernel_dtype(self.scalar_type()), out_dtype = to_kernel_dtype(result.scalar_type());
  scan_into(name, self, dim, result, [=](kernels::SoftmaxShape shape, const void* pi, void* po) {
    return [=] { kernels::cumulative(op, in_dtype, out_dtype, shape, pi, po); };
  });
  return true;
}

// cummax / cummin's kernel: the composite cummax_out resizes values and indices and calls it.
void cumulative_extremum_into(bool is_max, const at::Tensor& self, at::Tensor& values, at::Tensor& indices,
                              int64_t dim) {
  const char* name = is_max ? "aten::_cummax_helper" : "aten::_cummin_helper";
  check_same_device(name, self.device(), {&values, &indices});
  const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
  const at::Tensor input = self.contiguous();
  const bool direct = values.is_contiguous() && indices.is_contiguous() && values.scalar_type() == self.scalar_type() &&
                      indices.scalar_type() == at::kLong;
  at::Tensor vals = direct ? values : at::empty(self.sizes(), self.options());
  at::Tensor idx = direct ? indices : at::empty(self.sizes(), self.options().dtype(at::kLong));
  if (input.numel() > 0) {
    const kernels::SoftmaxShape shape = softmax_shape(input, wrapped);
    const kernels::DType dtype = to_kernel_dtype(input.scalar_type());
    const void* pi = input.data_ptr();
    void* pv = vals.data_ptr();
    int64_t* px = idx.data_ptr<int64_t>();
    enqueue(vals, name, {&input, &idx}, [=] { kernels::cumulative_extremum(dtype, is_max, shape, pi, pv, px); });
  }
  if (!direct) {
    values.copy_(vals);
    indices.copy_(idx);
  }
}

bool extremum_scannable(const at::Tensor& self) {
  return has_kernel_dtype(self.scalar_type()) && !c10::isComplexType(self.scalar_type());
}

void cummax_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  if (!extremum_scannable(self)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_cummax_helper)>::call(self, values, indices, dim);
  }
  cumulative_extremum_into(true, self, values, indices, dim);
}

void cummin_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  if (!extremum_scannable(self)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_cummin_helper)>::call(self, values, indices, dim);
  }
  cumulative_extremum_into(false, self, values, indices, dim);
}

at::Tensor& logcumsumexp_out(const at::Tensor& self, int64_t dim, at::Tensor& result) {
  const bool native = has_kernel_dtype(self.scalar_type()) && at::isFloatingType(self.scalar_type()) &&
                      result.scalar_type() == self.scalar_type();
  if (!native) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(_logcumsumexp, out)>::call(self, dim, result);
  }
  check_same_device("aten::_logcumsumexp", self.device(), {&result});
  const kernels::DType dtype = to_kernel_dtype(self.scalar_type());
  scan_into("aten::_logcumsumexp", self, dim, result, [=](kernels::SoftmaxShape shape, const void* pi, void* po) {
    return [=] { kernels::log_cumulative_sum_exp(dtype, shape, pi, po); };
  });
  return result;
}

at::Tensor logcumsumexp(const at::Tensor& self, int64_t dim) {
  at::Tensor result = at::empty({0}, self.options());
  return logcumsumexp_out(self, dim, result);
}

c10::ScalarType scan_dtype(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  return dtype.value_or(at::isIntegralType(self.scalar_type(), true) ? c10::kLong : self.scalar_type());
}

at::Tensor& cumsum_out(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype, at::Tensor& result) {
  if (!cumulative_into(kernels::ScanOp::kSum, "aten::cumsum", self, dim, dtype, result)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(cumsum, out)>::call(self, dim, dtype, result);
  }
  return result;
}

at::Tensor cumsum(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {
  at::Tensor result = at::empty({0}, self.options().dtype(scan_dtype(self, dtype)));
  return cumsum_out(self, dim, dtype, result);
}

at::Tensor& cumsum_(at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {
  return cumsum_out(self.clone(), dim, dtype, self);
}

at::Tensor& cumprod_out(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype, at::Tensor& result) {
  if (!cumulative_into(kernels::ScanOp::kProd, "aten::cumprod", self, dim, dtype, result)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(cumprod, out)>::call(self, dim, dtype, result);
  }
  return result;
}

at::Tensor cumprod(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {
  at::Tensor result = at::empty({0}, self.options().dtype(scan_dtype(self, dtype)));
  return cumprod_out(self, dim, dtype, result);
}

at::Tensor& cumprod_(at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {
  return cumprod_out(self.clone(), dim, dtype, self);
}

// ---- histogram -----------------------------------------------------------------------------

// As on CUDA, integer inputs are counted too (CPU PyTorch supports floating inputs only).
at::Tensor& histc_out(const at::Tensor& self, int64_t bins, const c10::Scalar& min, const c10::Scalar& max,
                      at::Tensor& result) {
  TORCH_CHECK(bins > 0, "torch.histc: bins must be > 0, but got ", bins, " for bins");
  TORCH_CHECK(!self.is_complex() && self.scalar_type() != c10::kBool, "torch.histc: input dtype ", self.scalar_type(),
              " is not supported");
  TORCH_CHECK(result.scalar_type() == self.scalar_type(), "torch.histc: input tensor and out tensor should have the same dtype");
  check_same_device("aten::histc", self.device(), {&result});
  double lo = min.toDouble(), hi = max.toDouble();
  TORCH_CHECK(!(std::isinf(lo) || std::isinf(hi) || std::isnan(lo) || std::isnan(hi)),
              "torch.histc: range of [", lo, ", ", hi, "] is not finite");
  TORCH_CHECK(lo <= hi, "torch.histc: max must be larger than min");
  const at::Tensor values = self.contiguous();
  if (lo == hi && values.numel() > 0) {  // the data's own range, read back (a sync)
    lo = values.min().item<double>();
    hi = values.max().item<double>();
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  at::native::resize_output(result, {bins});
  at::Tensor out = result.is_contiguous() ? result : at::empty({bins}, values.options());
  const kernels::DType dtype = to_kernel_dtype(values.scalar_type());
  const int64_t numel = values.numel();
  const void* pv = values.data_ptr();
  void* po = out.data_ptr();
  enqueue(out, "aten::histc", {&values}, [=] { kernels::histc(dtype, numel, pv, bins, lo, hi, po); });
  if (!out.is_same(result)) result.copy_(out);
  return result;
}

at::Tensor histc(const at::Tensor& self, int64_t bins, const c10::Scalar& min, const c10::Scalar& max) {
  at::Tensor result = at::empty({0}, self.options());
  return histc_out(self, bins, min, max, result);
}

// ---- data-dependent shapes: the count is read back (a sync), then the kernel compacts ------

at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& result) {
  TORCH_CHECK(mask.scalar_type() == c10::kBool, "masked_select: expected BoolTensor for mask");
  check_same_device("aten::masked_select", self.device(), {&mask, &result});
  TORCH_CHECK(result.scalar_type() == self.scalar_type(), "masked_select(): self and result must have the same scalar type");
  const std::vector<int64_t> shape = at::infer_size(self.sizes(), mask.sizes());
  const at::Tensor values = self.expand(shape).contiguous();
  const at::Tensor flags = mask.expand(shape).contiguous();
  const int64_t count = flags.sum().item<int64_t>();
  at::native::resize_output(result, {count});
  at::Tensor out = result.is_contiguous() ? result : at::empty({count}, values.options());
  if (count > 0) {
    const int64_t numel = values.numel();
    const int64_t bytes = static_cast<int64_t>(values.element_size());
    const char* pv = static_cast<const char*>(values.data_ptr());
    const bool* pm = flags.data_ptr<bool>();
    char* po = static_cast<char*>(out.data_ptr());
    enqueue(out, "aten::masked_select", {&values, &flags}, [=] { kernels::masked_compact(numel, bytes, pv, pm, po); });
  }
  if (!out.is_same(result)) result.copy_(out);
  return result;
}

at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask) {
  at::Tensor result = at::empty({0}, self.options());
  return masked_select_out(self, mask, result);
}

at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& result) {
  TORCH_CHECK(result.scalar_type() == c10::kLong, "nonzero: Expected out tensor to have scalar type Long but got scalar type",
              result.scalar_type());
  TORCH_CHECK(self.dim() <= kernels::kMaxDims, "nonzero is not supported for tensors with more than ",
              kernels::kMaxDims, " dimensions");
  const at::Tensor flags = (self.scalar_type() == c10::kBool ? self : self.ne(0)).contiguous();
  const int64_t count = flags.sum().item<int64_t>();
  const int ndim = static_cast<int>(self.dim());
  at::native::resize_output(result, {count, ndim});
  at::Tensor out = result.is_contiguous() ? result : at::empty({count, ndim}, result.options());
  if (count > 0 && ndim > 0) {
    std::array<int64_t, kernels::kMaxDims> sizes{};
    for (int d = 0; d < ndim; ++d) sizes[d] = self.size(d);
    const bool* pm = flags.data_ptr<bool>();
    auto* po = out.data_ptr<int64_t>();
    enqueue(out, "aten::nonzero", {&flags}, [=] { kernels::nonzero_coordinates(ndim, sizes.data(), pm, po); });
  }
  if (!out.is_same(result)) result.copy_(out);
  return result;
}

at::Tensor nonzero(const at::Tensor& self) {
  at::Tensor result = at::empty({0}, self.options().dtype(c10::kLong));
  return nonzero_out(self, result);
}

}  // namespace nn

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("gather", TORCH_FN(nn::gather));
  m.impl("gather.out", TORCH_FN(nn::gather_out));
  m.impl("scatter.src", TORCH_FN(nn::scatter_src));
  m.impl("scatter.src_out", TORCH_FN(nn::scatter_src_out));
  m.impl("scatter_.src", TORCH_FN(nn::scatter_src_));
  m.impl("scatter.reduce", TORCH_FN(nn::scatter_legacy_reduce));
  m.impl("scatter.reduce_out", TORCH_FN(nn::scatter_legacy_reduce_out));
  m.impl("scatter_.reduce", TORCH_FN(nn::scatter_legacy_reduce_));
  m.impl("scatter_add", TORCH_FN(nn::scatter_add));
  m.impl("scatter_add.out", TORCH_FN(nn::scatter_add_out));
  m.impl("scatter_add_", TORCH_FN(nn::scatter_add_));
  m.impl("scatter_reduce.two", TORCH_FN(nn::scatter_reduce_two));
  m.impl("scatter_reduce.two_out", TORCH_FN(nn::scatter_reduce_two_out));
  m.impl("scatter_reduce_.two", TORCH_FN(nn::scatter_reduce_two_));
  m.impl("index_reduce", TORCH_FN(nn::index_reduce));
  m.impl("index_reduce.out", TORCH_FN(nn::index_reduce_out));
  m.impl("index_reduce_", TORCH_FN(nn::index_reduce_));
  m.impl("_cummax_helper", TORCH_FN(nn::cummax_helper));
  m.impl("_cummin_helper", TORCH_FN(nn::cummin_helper));
  m.impl("_logcumsumexp", TORCH_FN(nn::logcumsumexp));
  m.impl("_logcumsumexp.out", TORCH_FN(nn::logcumsumexp_out));
  m.impl("cumsum", TORCH_FN(nn::cumsum));
  m.impl("cumsum.out", TORCH_FN(nn::cumsum_out));
  m.impl("cumsum_", TORCH_FN(nn::cumsum_));
  m.impl("cumprod", TORCH_FN(nn::cumprod));
  m.impl("cumprod.out", TORCH_FN(nn::cumprod_out));
  m.impl("cumprod_", TORCH_FN(nn::cumprod_));
  m.impl("histc", TORCH_FN(nn::histc));
  m.impl("histc.out", TORCH_FN(nn::histc_out));
  m.impl("masked_select", TORCH_FN(nn::masked_select));
  m.impl("masked_select.out", TORCH_FN(nn::masked_select_out));
  m.impl("nonzero", TORCH_FN(nn::nonzero));
  m.impl("nonzero.out", TORCH_FN(nn::nonzero_out));
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
  m.impl("index_select", TORCH_FN(nn::index_select));
  m.impl("index_select.out", TORCH_FN(nn::index_select_out));
  m.impl("embedding_dense_backward", TORCH_FN(nn::embedding_dense_backward));
  m.impl("_embedding_bag", TORCH_FN(nn::embedding_bag));
  m.impl("_embedding_bag_forward_only", TORCH_FN(nn::embedding_bag));
  m.impl("_embedding_bag_backward", TORCH_FN(nn::embedding_bag_backward));
  m.impl("_embedding_bag_dense_backward", TORCH_FN(nn::embedding_bag_dense_backward));
  m.impl("_embedding_bag_per_sample_weights_backward", TORCH_FN(nn::embedding_bag_per_sample_weights_backward));
  m.impl("cat", TORCH_FN(nn::cat));
  m.impl("cat.out", TORCH_FN(nn::cat_out));
  m.impl("arange.start_out", TORCH_FN(nn::arange_out));
}

}  // namespace torchneuron::aten
