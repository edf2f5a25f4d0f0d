// Fused optimizer ops on neuron: _fused_adam_ and _fused_adamw_ (torch.optim.Adam / AdamW with
// fused=True), one queue command per parameter group run by csrc/kernels/optim. (The default
// foreach optimizers need nothing here: PyTorch composes _foreach ops from native pointwise ops.)
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_fused_adam_ops.h>
#include <ATen/ops/_fused_adamw_ops.h>
#include <torch/library.h>

#include <vector>

#include "aten/fallback/cpu_fallback.h"
#include "aten/device/neuron_tensor.h"
#include "kernels/optim.h"

namespace torchneuron::aten {
namespace optim {
namespace {

// The kernel takes contiguous same-dtype floating tensors on one device with float32 steps.
bool kernel_can_take(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                     at::TensorList max_exp_avg_sqs, at::TensorList steps, bool amsgrad,
                     const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  if (params.empty()) return true;
  const c10::ScalarType dtype = params[0].scalar_type();
  if (!at::isFloatingType(dtype)) return false;
  for (const auto* scalar : {&grad_scale, &found_inf}) {
    if (scalar->has_value() && ((*scalar)->scalar_type() != at::kFloat || (*scalar)->device() != params[0].device())) {
      return false;
    }
  }
  for (size_t i = 0; i < params.size(); ++i) {
    for (const at::Tensor* t : {&params[i], &grads[i], &exp_avgs[i], &exp_avg_sqs[i]}) {
      if (t->scalar_type() != dtype || !t->is_contiguous() || t->device() != params[0].device() ||
          t->numel() != params[i].numel()) {
        return false;
      }
    }
    if (amsgrad && (max_exp_avg_sqs[i].scalar_type() != dtype || !max_exp_avg_sqs[i].is_contiguous() ||
                    max_exp_avg_sqs[i].numel() != params[i].numel())) {
      return false;
    }
    if (steps[i].scalar_type() != at::kFloat || steps[i].device() != params[0].device()) return false;
  }
  return true;
}

void check_lists(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                 at::TensorList max_exp_avg_sqs, at::TensorList steps, bool amsgrad) {
  const size_t n = params.size();
  TORCH_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n && steps.size() == n,
              "fused Adam: params, grads, exp_avgs, exp_avg_sqs and state_steps must have the same length, got ", n, ", ",
              grads.size(), ", ", exp_avgs.size(), ", ", exp_avg_sqs.size(), " and ", steps.size());
  TORCH_CHECK(!amsgrad || max_exp_avg_sqs.size() == n, "fused Adam with amsgrad needs one max_exp_avg_sq per param, got ",
              max_exp_avg_sqs.size(), " for ", n, " params");
}

void run(const char* op, bool decoupled, at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
         at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList steps, double lr, double beta1,
         double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
         const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  kernels::AdamConfig config{lr, beta1, beta2, weight_decay, eps, amsgrad, maximize, decoupled};
  std::vector<kernels::AdamTensors> tensors;
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].numel() == 0) continue;
    tensors.push_back({params[i].data_ptr(), grads[i].data_ptr(), exp_avgs[i].data_ptr(), exp_avg_sqs[i].data_ptr(),
                       amsgrad ? max_exp_avg_sqs[i].data_ptr() : nullptr, steps[i].data_ptr<float>(), params[i].numel()});
  }
  if (tensors.empty()) return;
  const kernels::DType dtype = to_kernel_dtype(params[0].scalar_type());
  const float* scale = grad_scale.has_value() ? grad_scale->data_ptr<float>() : nullptr;
  const float* inf = found_inf.has_value() ? found_inf->data_ptr<float>() : nullptr;
  enqueue(params[0], op, {&params[0], &grads[0]},
          [=] { kernels::fused_adam(dtype, config, tensors, scale, inf); });
}

}  // namespace

#define NEURON_FUSED_ADAM(name, DECOUPLED)                                                                          \
  void name(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,        \
            at::TensorList max_exp_avg_sqs, at::TensorList steps, double lr, double beta1, double beta2,             \
            double weight_decay, double eps, bool amsgrad, bool maximize, const std::optional<at::Tensor>& grad_scale, \
            const std::optional<at::Tensor>& found_inf) {                                                            \
    check_lists(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, amsgrad);                              \
    if (!kernel_can_take(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, amsgrad, grad_scale,          \
                         found_inf)) {                                                                               \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(name)>::call(                                \
          params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2, weight_decay, eps, amsgrad, \
          maximize, grad_scale, found_inf);                                                                          \
    }                                                                                                                \
    run("aten::" #name, DECOUPLED, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2,  \
        weight_decay, eps, amsgrad, maximize, grad_scale, found_inf);                                                \
  }                                                                                                                  \
  /* A tensor learning rate (LRScheduler with capturable / fused) is read on the host. */                            \
  void name##tensor_lr(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,                        \
                       at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList steps,             \
                       const at::Tensor& lr, double beta1, double beta2, double weight_decay, double eps,            \
                       bool amsgrad, bool maximize, const std::optional<at::Tensor>& grad_scale,                     \
                       const std::optional<at::Tensor>& found_inf) {                                                 \
    name(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr.item<double>(), beta1, beta2,             \
         weight_decay, eps, amsgrad, maximize, grad_scale, found_inf);                                               \
  }

NEURON_FUSED_ADAM(_fused_adam_, false)
NEURON_FUSED_ADAM(_fused_adamw_, true)
#undef NEURON_FUSED_ADAM

}  // namespace optim

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_adam_", TORCH_FN(optim::_fused_adam_));
  m.impl("_fused_adam_.tensor_lr", TORCH_FN(optim::_fused_adam_tensor_lr));
  m.impl("_fused_adamw_", TORCH_FN(optim::_fused_adamw_));
  m.impl("_fused_adamw_.tensor_lr", TORCH_FN(optim::_fused_adamw_tensor_lr));
}

}  // namespace torchneuron::aten
