// Sparse COO tensors on neuron (embedding(sparse=True) gradients, torch.sparse_coo_tensor): the
// tensor is ATen's own SparseTensorImpl over dense neuron indices and values, its metadata ops
// are ATen's device-generic ones, and every other sparse op is the counted CPU fallback.
#include <ATen/native/CPUFallback.h>
#include <ATen/native/SparseTensorUtils.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/zero_native.h>
#include <torch/library.h>

#include "aten/fallback/cpu_fallback.h"

namespace torchneuron::aten {
namespace {

// The fallback's write-back of an in-place sparse op (add_, mul_, zero_ on a sparse gradient):
// `dst` takes the CPU result's shape, indices and values, moved to its device.
at::Tensor sparse_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  TORCH_CHECK(self.is_sparse() && dst.is_sparse(), "neuron: a sparse tensor can take only a sparse result, got ",
              self.layout());
  at::sparse::get_sparse_impl(dst)->resize_(self.sparse_dim(), self.dense_dim(), self.sizes());
  at::sparse::alias_into_sparse(dst, self._indices().to(dst.device()),
                                self._values().to(dst.device(), dst.scalar_type()));
  at::sparse::get_sparse_impl(dst)->set_coalesced(self.is_coalesced());
  return dst;
}

// The counted CPU fallback, run by ATen's sparse CPU kernels (the dense fallback's would reject
// the sparse layout).
void sparse_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::OperatorName& name = op.schema().operator_name();
  note_cpu_fallback(name.overload_name.empty() ? name.name : name.name + "." + name.overload_name);
  at::native::cpu_fallback(op, stack, /*error_on_views=*/false, c10::DispatchKey::SparseCPU);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_sparse_coo_tensor_with_dims_and_tensors", TORCH_FN(at::native::new_with_dims_and_tensor_sparse_symint));
  m.impl("_sparse_coo_tensor_with_dims", TORCH_FN(at::native::new_with_dims_sparse));
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse_symint));
  m.impl("_indices", TORCH_FN(at::native::_indices_sparse));
  m.impl("_values", TORCH_FN(at::native::_values_sparse));
  m.impl("indices", TORCH_FN(at::native::indices_sparse));
  m.impl("values", TORCH_FN(at::native::values_sparse));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse));
  m.impl("is_coalesced", TORCH_FN(at::native::is_coalesced_sparse));
  m.impl("_coalesced_", TORCH_FN(at::native::_coalesced_sparse_));
  m.impl("sparse_resize_", TORCH_FN(at::native::sparse_resize_));
  m.impl("sparse_resize_and_clear_", TORCH_FN(at::native::sparse_resize_and_clear_));
  m.impl("clone", TORCH_FN(at::native::clone_sparse));
  m.impl("copy_", TORCH_FN(at::native::copy_sparse_wrapper_));
  m.impl("zero_", TORCH_FN(at::native::zero_sparse_));
  m.impl("_copy_from_and_resize", TORCH_FN(sparse_copy_from_and_resize));
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_cpu_fallback>());
}

}  // namespace torchneuron::aten
