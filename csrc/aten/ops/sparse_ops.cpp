// Sparse COO tensors on neuron (embedding(sparse=True) gradients, torch.sparse_coo_tensor): the
// tensor is ATen's own SparseTensorImpl over dense neuron indices and values, its metadata ops
// are ATen's device-generic ones, conversions from and to dense run on the device, and every
// other sparse op is the counted CPU fallback.
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
#include <ATen/ops/cat_native.h>
#include <ATen/ops/narrow_copy_native.h>
#include <ATen/ops/permute_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/_sparse_coo_tensor_unsafe.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "aten/fallback/cpu_fallback.h"
#include "aten/ops/index_checks.h"

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

// Dense to sparse COO on the device, as CPU converts: the positions over the first sparse_dim
// dims where some element is nonzero (in row-major order, so the result is coalesced) and the
// values there, each with the dense dims' elements.
at::Tensor dense_to_sparse_coo(const at::Tensor& self, int64_t sparse_dim) {
  const int64_t dims = self.dim();
  TORCH_CHECK(sparse_dim >= 0 && sparse_dim <= dims, "dense_to_sparse: sparse_dim argument must be in [0,", dims,
              "] range, but ", sparse_dim, " is given");
  TORCH_CHECK(sparse_dim > 0 || dims == 0, "dense_to_sparse: sparse_dim argument must be in >0 when self.dim()>0");
  const auto index_options = self.options().dtype(c10::kLong);
  if (dims == 0) {  // a scalar: no index rows, one value
    return at::_sparse_coo_tensor_unsafe(at::empty({0, 1}, index_options), self.unsqueeze(0).clone(), self.sizes(),
                                         self.options().layout(c10::kSparse), /*is_coalesced=*/true);
  }
  at::Tensor present = self.scalar_type() == c10::kBool ? self : self.ne(0);
  if (sparse_dim < dims) present = present.flatten(sparse_dim).any(-1);
  const at::Tensor indices = at::nonzero(present).t().contiguous();
  c10::List<std::optional<at::Tensor>> positions;
  for (int64_t d = 0; d < sparse_dim; ++d) positions.push_back(indices[d]);
  const at::Tensor values = self.index(positions);
  return at::_sparse_coo_tensor_unsafe(indices, values, self.sizes(), self.options().layout(c10::kSparse),
                                       /*is_coalesced=*/true);
}

at::Tensor to_sparse(const at::Tensor& self, std::optional<c10::Layout> layout, at::OptionalIntArrayRef blocksize,
                     std::optional<int64_t> dense_dim) {
  const c10::Layout target = layout.value_or(c10::kSparse);
  TORCH_CHECK(target == c10::kSparse && !blocksize.has_value(), "neuron: to_sparse(layout=", target,
              ") is not supported on neuron (sparse COO is); convert on the CPU");
  if (dense_dim.has_value()) {
    const int64_t dims = self.dim();
    TORCH_CHECK(*dense_dim >= 0 && *dense_dim <= dims, "dense_to_sparse: dense_dim argument must be in [0,", dims,
                "] range, but ", *dense_dim, " is given");
    TORCH_CHECK(dims == 0 || *dense_dim != dims, "dense_to_sparse: dense_dim argument must be !=self.dim() when "
                                                 "self.dim()>0");
    return dense_to_sparse_coo(self, dims - *dense_dim);
  }
  return dense_to_sparse_coo(self, self.dim());
}

// Sparse COO to dense on the device: the values summed into zeros at their indices (duplicate
// indices of an uncoalesced tensor add up, as CPU's to_dense does).
at::Tensor sparse_to_dense(const at::Tensor& self, std::optional<c10::ScalarType> dtype,
                           std::optional<bool> /*masked_grad*/) {
  TORCH_CHECK(!dtype.has_value(), "dtype argument is not supported by sparse_to_dense");  // CPU's refusal
  at::Tensor out = at::zeros(self.sizes(), self.options().layout(c10::kStrided));
  if (self._nnz() == 0) return out;
  const at::Tensor indices = self._indices();
  if (self.sparse_dim() == 0) return out.add_(self._values().sum(0));
  c10::List<std::optional<at::Tensor>> positions;
  for (int64_t d = 0; d < self.sparse_dim(); ++d) positions.push_back(indices[d]);
  const TrustedIndices trusted;  // the device check still reports a coordinate out of range
  return out.index_put_(positions, self._values(), /*accumulate=*/true);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_to_sparse", TORCH_FN(to_sparse));
  m.impl("_to_sparse.sparse_dim", TORCH_FN(dense_to_sparse_coo));
}

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_to_dense", TORCH_FN(sparse_to_dense));
  // Shape ops whose CompositeExplicit kernel would take strides of a sparse tensor: ATen's
  // device-generic sparse versions (stack is cat of unsqueezed tensors), and cat's.
  m.impl("cat", TORCH_FN(at::native::cat_sparse));
  m.impl("unsqueeze", TORCH_FN(at::native::unsqueeze_sparse));
  m.impl("permute", TORCH_FN(at::native::permute_sparse_coo));
  m.impl("narrow_copy", TORCH_FN(at::native::narrow_copy_sparse));
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
