// torch.autocast('neuron'): PyTorch's standard op lists (lower-precision, fp32, promote) bound
// to the AutocastPrivateUse1 key; every other op falls through to the regular kernels.
// autocast_mode.h pulls in all of ATen, so this is the one translation unit that includes it.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

#ifndef ADD_NS
#define ADD_NS(RAW_OP) at::RAW_OP
#endif

namespace torchneuron::aten {
namespace {

// The op-list macros name these types unqualified, as if written inside namespace at.
using at::IntArrayRef;
using at::Scalar;
using at::Tensor;
using c10::ScalarType;

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define NEURON_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define NEURON_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define NEURON_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define NEURON_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_LOWER_PRECISION_FP(NEURON_LOWER_PRECISION)
  AT_FORALL_FP32(NEURON_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(NEURON_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(NEURON_PROMOTE)
#undef NEURON_LOWER_PRECISION
#undef NEURON_FP32
#undef NEURON_FP32_SET_OPT_DTYPE
#undef NEURON_PROMOTE
}

}  // namespace
}  // namespace torchneuron::aten
