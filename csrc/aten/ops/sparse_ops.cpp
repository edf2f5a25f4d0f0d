// Sparse COO and CSR tensors on neuron (embedding(sparse=True) gradients, torch.sparse_coo_tensor,
// to_sparse_csr): the tensor is ATen's own SparseTensorImpl / SparseCsrTensorImpl over dense
// neuron indices and values, its metadata ops are ATen's device-generic ones, 2-D CSR and all COO
// conversions from and to dense run on the device, and every other sparse op is the counted CPU
// fallback.
#include <ATen/native/CPUFallback.h>
#include <ATen/SparseCsrTensorImpl.h>
#include <ATen/SparseCsrTensorUtils.h>
#include <ATen/OpMathType.h>
#include <ATen/TensorOperators.h>
#include <ATen/TensorUtils.h>
#include <ATen/core/grad_mode.h>
#include <ATen/native/ReductionType.h>
#include <ATen/native/SparseTensorUtils.h>
#include <ATen/ops/_sparse_csr_tensor_unsafe.h>
#include <ATen/ops/_sparse_mm_reduce_impl_backward_ops.h>
#include <ATen/ops/_sparse_mm_reduce_impl_ops.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/sparse_mask_ops.h>
#include <ATen/ops/sparse_sampled_addmm_ops.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <ATen/ops/where.h>
#include <ATen/ops/_to_dense_ops.h>
#include <ATen/ops/_to_sparse_csr_ops.h>
#include <ATen/ops/_to_sparse_ops.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/_to_dense_native.h>
#include <ATen/ops/_to_sparse_csr_native.h>
#include <ATen/ops/ccol_indices_native.h>
#include <ATen/ops/col_indices_native.h>
#include <ATen/ops/crow_indices_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/resize_as_sparse_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/row_indices_native.h>
#include <ATen/ops/sum_native.h>
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

#include <limits>
#include <set>
#include <string>

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

at::Tensor dense_to_csr(const at::Tensor& self, std::optional<int64_t> dense_dim);

at::Tensor to_sparse(const at::Tensor& self, std::optional<c10::Layout> layout, at::OptionalIntArrayRef blocksize,
                     std::optional<int64_t> dense_dim) {
  const c10::Layout target = layout.value_or(c10::kSparse);
  if (target == c10::kSparseCsr && !blocksize.has_value()) return dense_to_csr(self, dense_dim);
  if (target != c10::kSparse || blocksize.has_value()) {  // CSC and the blocked layouts, CPU's checks
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_to_sparse)>::call(self, layout, blocksize,
                                                                                       dense_dim);
  }
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

// The CPU fallback for sparse compressed (CSR, CSC, BSR, BSC) tensors: counted, refusing what a
// device kernel refuses (tensors of two neuron devices, a CPU operand that is not a scalar), then
// run by ATen's SparseCsrCPU kernels.
void sparse_csr_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::OperatorName& name = op.schema().operator_name();
  const std::string full = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
  std::optional<c10::Device> neuron_device;
  bool cpu_operand = false;
  auto visit = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    if (t.device().type() != c10::DeviceType::PrivateUse1) {
      cpu_operand = cpu_operand || t.dim() > 0;
      return;
    }
    TORCH_CHECK(!neuron_device || *neuron_device == t.device(),
                "Expected all tensors to be on the same device, but found at least two devices, ", *neuron_device,
                " and ", t.device(), "! (when checking arguments for ", full, ")");
    neuron_device = t.device();
  };
  const size_t num_args = op.schema().arguments().size();
  for (size_t i = stack->size() - num_args; i < stack->size(); ++i) {
    const c10::IValue& value = (*stack)[i];
    if (value.isTensor()) visit(value.toTensor());
    if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorList().vec()) visit(t);
    }
  }
  TORCH_CHECK(!(neuron_device && cpu_operand), "Expected all tensors to be on the same device, but found at least "
              "two devices, ", *neuron_device, " and cpu! (when checking arguments for ", full,
              "). Move the CPU tensor with .to('neuron').");
  note_cpu_fallback(full);
  at::native::cpu_fallback(op, stack, /*error_on_views=*/false, c10::DispatchKey::SparseCsrCPU);
}

// The fallback's write-back of a sparse compressed result (out=, in-place): `dst` takes the CPU
// result's shape and member tensors, moved to its device.
at::Tensor sparse_csr_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  TORCH_CHECK(self.layout() == dst.layout(), "neuron: a ", dst.layout(), " tensor cannot take a ", self.layout(),
              " result");
  auto [compressed, plain] = at::sparse_csr::getCompressedPlainIndices(self);
  at::sparse_csr::get_sparse_csr_impl(dst)->set_member_tensors(
      compressed.to(dst.device()), plain.to(dst.device()), self.values().to(dst.device(), dst.scalar_type()),
      self.sizes());
  return dst;
}

// Each stored element's row, from a 2-D CSR's crow_indices: a row starts where crow_indices
// says, so the count of row starts at or before position k is k's row.
at::Tensor csr_row_of_each_element(const at::Tensor& crow_indices, int64_t nnz) {
  const int64_t rows = crow_indices.size(0) - 1;
  at::Tensor starts = at::zeros({nnz + 1}, crow_indices.options().dtype(c10::kLong));
  if (rows > 1) {
    const TrustedIndices trusted;
    starts.index_add_(0, crow_indices.slice(0, 1, rows).to(c10::kLong), at::ones({rows - 1}, starts.options()));
  }
  return starts.cumsum(0).narrow(0, 0, nnz);
}

// Dense to CSR on the device for a 2-D tensor (what to_sparse_csr() makes most), as CPU converts:
// the nonzero elements in row-major order; batched, hybrid and other cases take the fallback.
at::Tensor dense_to_csr(const at::Tensor& self, std::optional<int64_t> dense_dim) {
  if (self.dim() != 2 || dense_dim.value_or(0) != 0) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_to_sparse_csr)>::call(self, dense_dim);
  }
  const at::Tensor present = self.scalar_type() == c10::kBool ? self : self.ne(0);
  const at::Tensor coordinates = at::nonzero(present);
  const at::Tensor rows = coordinates.select(1, 0);
  const at::Tensor cols = coordinates.select(1, 1).contiguous();
  const at::Tensor per_row = present.sum(1, /*keepdim=*/false, c10::kLong);
  const at::Tensor crow = at::cat({at::zeros({1}, per_row.options()), per_row.cumsum(0)});
  const TrustedIndices trusted;  // nonzero's own coordinates
  const at::Tensor values = self.index(c10::List<std::optional<at::Tensor>>({rows, cols}));
  return at::_sparse_csr_tensor_unsafe(crow, cols, values, self.sizes(), self.options().layout(c10::kSparseCsr));
}

// CSR to dense on the device for a 2-D, non-hybrid CSR (duplicate entries add up, as on CPU);
// CSC, blocked, batched and hybrid layouts, and CPU's dtype refusal, take the fallback.
at::Tensor sparse_compressed_to_dense(const at::Tensor& self, std::optional<c10::ScalarType> dtype,
                                      std::optional<bool> masked_grad) {
  if (self.layout() != c10::kSparseCsr || self.dim() != 2 || self.dense_dim() != 0 || dtype.has_value()) {
    return at::native::call_fallback_fn<&sparse_csr_cpu_fallback, ATEN_OP(_to_dense)>::call(self, dtype,
                                                                                             masked_grad);
  }
  at::Tensor out = at::zeros(self.sizes(), self.options().layout(c10::kStrided));
  const int64_t nnz = self._nnz();
  if (nnz == 0) return out;
  const at::Tensor rows = csr_row_of_each_element(self.crow_indices(), nnz);
  const TrustedIndices trusted;  // the device check still reports a column out of range
  const c10::List<std::optional<at::Tensor>> positions({rows, self.col_indices().to(c10::kLong)});
  return out.index_put_(positions, self.values(), /*accumulate=*/true);
}

// CPU's argument checks of torch.sparse.mm(csr, dense, reduce) and of its backward, same messages.
void check_mm_reduce_operands(bool backward, const at::Tensor& self, const at::Tensor& grad_out,
                              const at::Tensor& other) {
  const c10::ScalarType dtype = self.values().scalar_type();
  const at::CheckedFrom c = backward ? "sparse_mm_reduce_backward" : "sparse_mm_reduce";
  if (backward) {
    at::checkLayout(c, grad_out, c10::kStrided);
    at::checkScalarType(c, {grad_out, "grad_out", 1}, dtype);
    at::check_dim_size(grad_out, 2, 0, self.size(0));
    at::check_dim_size(grad_out, 2, 1, other.size(1));
  }
  at::checkLayout(c, other, c10::kStrided);
  at::checkScalarType(c, {other, "other", backward ? 2 : 1}, dtype);
  at::check_dim_size(other, 2, 0, self.size(1));
  for (const at::Tensor* t : {&grad_out, &other}) {
    TORCH_CHECK(!t->defined() || t->device() == self.device(), "Expected all tensors to be on the same device, but "
                "found at least two devices, ", self.device(), " and ", t->device(), "! (when checking arguments for ",
                c, ")");
  }
}

bool mm_reduce_dtype_is_native(c10::ScalarType dtype) {
  return dtype == c10::kFloat || dtype == c10::kDouble || dtype == c10::kHalf || dtype == c10::kBFloat16;
}

// Each row's stored elements per row, at least 1 (a mean over an empty row stays 0).
at::Tensor csr_row_counts(const at::Tensor& crow_indices) {
  const int64_t rows = crow_indices.size(0) - 1;
  const at::Tensor crow = crow_indices.to(c10::kLong);
  return (crow.slice(0, 1, rows + 1) - crow.slice(0, 0, rows)).clamp_min(1);
}

// torch.sparse.mm(csr, dense, reduce) on the device, as CPU computes it: each stored element
// times its column's row of `other`, in the op-math type (float for half types), reduced per row;
// rows with no element give 0. For amax / amin under autograd, arg_out holds each output's source
// element (the first extreme, the last NaN; nnz where none), which the backward routes through.
std::tuple<at::Tensor, at::Tensor> sparse_mm_reduce(const at::Tensor& self, const at::Tensor& other,
                                                    c10::string_view reduce) {
  TORCH_CHECK(self.layout() == c10::kSparseCsr, "sparse_mm_reduce: expect self to be SparseCsr, got ", self.layout());
  TORCH_CHECK(self.dense_dim() == 0, "sparse_mm_reduce: expected non-hybrid self tensor.");
  TORCH_CHECK(self.dim() == 2, "sparse_mm_reduce: expected self to be a 2-D tensor, got ", self.dim(), "-D tensor.");
  check_mm_reduce_operands(/*backward=*/false, self, at::Tensor(), other);
  const at::native::ReductionType op = at::native::get_reduction_enum(reduce);
  TORCH_CHECK(op != at::native::ReductionType::PROD, "sparse_mm_reduce: reduce type of prod has not been enabled.");
  if (!mm_reduce_dtype_is_native(other.scalar_type())) {  // CPU's own refusal
    return at::native::call_fallback_fn<&sparse_csr_cpu_fallback, ATEN_OP(_sparse_mm_reduce_impl)>::call(self, other,
                                                                                                       reduce);
  }
  const bool extreme = op == at::native::ReductionType::MAX || op == at::native::ReductionType::MIN;
  const at::Tensor col = self.col_indices();
  const int64_t rows = self.size(0), width = other.size(1), nnz = self._nnz();
  at::Tensor out = at::zeros({rows, width}, other.options());
  const bool need_arg = at::GradMode::is_enabled() && (self.requires_grad() || other.requires_grad()) && extreme;
  at::Tensor arg_out = need_arg ? at::full({rows, width}, nnz, col.options()) : at::empty({0}, col.options());
  if (nnz == 0 || rows == 0 || width == 0) return {out, arg_out};

  const c10::ScalarType math = at::toOpMathType(other.scalar_type());
  const at::Tensor row_of = csr_row_of_each_element(self.crow_indices(), nnz);
  const TrustedIndices trusted;  // the CSR's own coordinates
  const at::Tensor products =
      other.index_select(0, col.to(c10::kLong)).to(math) * self.values().to(math).unsqueeze(1);
  if (!extreme) {
    out = at::zeros({rows, width}, products.options()).index_add_(0, row_of, products).to(other.scalar_type());
    if (op == at::native::ReductionType::MEAN) out = out.div(csr_row_counts(self.crow_indices()).unsqueeze(1));
    return {out, arg_out};
  }
  const bool is_max = op == at::native::ReductionType::MAX;
  const double start = is_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  const at::Tensor slots = row_of.unsqueeze(1).expand({nnz, width});
  const at::Tensor best = at::full({rows, width}, start, products.options())
                              .scatter_reduce(0, slots, products, is_max ? "amax" : "amin", /*include_self=*/true);
  const at::Tensor filled = (self.crow_indices().to(c10::kLong).diff() > 0).unsqueeze(1);
  out = at::where(filled, best, at::zeros({}, best.options())).to(other.scalar_type());
  if (!need_arg) return {out, arg_out};
  // CPU takes an element only when it beats the current value strictly, or is NaN.
  const at::Tensor position = at::arange(nnz, col.options().dtype(c10::kLong)).unsqueeze(1).expand({nnz, width});
  const at::Tensor none = at::full({}, nnz, position.options());
  const at::Tensor first = at::full({rows, width}, nnz, position.options())
                               .scatter_reduce(0, slots, at::where(products == best.index_select(0, row_of), position,
                                                                   none), "amin", /*include_self=*/true);
  const at::Tensor last_nan = at::full({rows, width}, -1, position.options())
                                  .scatter_reduce(0, slots, at::where(products.isnan(), position,
                                                                      at::full({}, -1, position.options())),
                                                  "amax", /*include_self=*/true);
  at::Tensor arg = at::where(best.isnan(), last_nan, first);
  arg = at::where(best == start, none, arg);
  return {out, arg.to(col.scalar_type())};
}

// The backward of sparse_mm_reduce on the device: the input's gradient has its sparsity pattern.
std::tuple<at::Tensor, at::Tensor> sparse_mm_reduce_backward(const at::Tensor& self, const at::Tensor& grad_out,
                                                             const at::Tensor& other, c10::string_view reduce,
                                                             const at::Tensor& arg_out,
                                                             std::array<bool, 2> output_mask) {
  TORCH_CHECK(self.layout() == c10::kSparseCsr, "sparse_mm_reduce: expect self to be SparseCsr, got ", self.layout());
  check_mm_reduce_operands(/*backward=*/true, self, grad_out, other);
  const at::native::ReductionType op = at::native::get_reduction_enum(reduce);
  const bool extreme = op == at::native::ReductionType::MAX || op == at::native::ReductionType::MIN;
  if (!mm_reduce_dtype_is_native(other.scalar_type())) {
    return at::native::call_fallback_fn<&sparse_csr_cpu_fallback, ATEN_OP(_sparse_mm_reduce_impl_backward)>::call(
        self, grad_out, other, reduce, arg_out, output_mask);
  }
  const int64_t nnz = self._nnz(), width = other.size(1);
  const c10::ScalarType math = at::toOpMathType(other.scalar_type());
  const at::Tensor crow = self.crow_indices(), col = self.col_indices(), col_long = col.to(c10::kLong);
  const at::Tensor row_of = csr_row_of_each_element(crow, nnz);
  const at::Tensor grad = grad_out.to(math), weight = other.to(math), values = self.values().to(math);
  const TrustedIndices trusted;
  // Where each output element came from (amax / amin): its stored element, or nnz for none.
  at::Tensor source, valid, source_col;
  if (extreme && nnz > 0) {
    source = arg_out.to(c10::kLong);
    valid = source != nnz;
    source_col = at::cat({col_long, at::zeros({1}, col_long.options())}).index_select(0, source.flatten())
                     .view(source.sizes());
  }
  at::Tensor grad_self, grad_other;
  if (output_mask[0]) {
    at::Tensor grad_values = at::zeros({nnz}, values.options());
    if (nnz > 0 && extreme) {
      const at::Tensor picked = at::where(valid, weight.gather(0, source_col) * grad, at::zeros({}, grad.options()));
      grad_values = at::zeros({nnz + 1}, values.options()).index_add_(0, source.flatten(), picked.flatten())
                        .narrow(0, 0, nnz);
    } else if (nnz > 0) {
      grad_values = (weight.index_select(0, col_long) * grad.index_select(0, row_of)).sum(1);
      if (op == at::native::ReductionType::MEAN) {
        grad_values = grad_values.div(csr_row_counts(crow).index_select(0, row_of));
      }
    }
    grad_self = at::_sparse_csr_tensor_unsafe(crow.clone(), col.clone(), grad_values.to(self.scalar_type()),
                                              self.sizes(), self.options());
  }
  if (output_mask[1]) {
    at::Tensor acc = at::zeros(other.sizes(), weight.options());
    if (nnz > 0 && extreme) {
      const at::Tensor scale = at::cat({values, at::zeros({1}, values.options())}).index_select(0, source.flatten())
                                   .view(source.sizes());
      acc.scatter_add_(0, source_col, at::where(valid, scale * grad, at::zeros({}, grad.options())));
    } else if (nnz > 0 && width > 0) {
      at::Tensor scale = values;
      if (op == at::native::ReductionType::MEAN) scale = scale.div(csr_row_counts(crow).index_select(0, row_of));
      acc.index_add_(0, col_long, grad.index_select(0, row_of) * scale.unsqueeze(1));
    }
    grad_other = acc.to(other.scalar_type());
  }
  return {grad_self, grad_other};
}

bool is_plain_csr_matrix(const at::Tensor& t) {
  return t.layout() == c10::kSparseCsr && t.dim() == 2 && t.dense_dim() == 0;
}

bool is_strided_matrix(const at::Tensor& t) { return t.layout() == c10::kStrided && t.dim() == 2; }

// The dtypes whose CSR products run on the device; others take the fallback (CPU's answer or error).
bool csr_product_dtype_is_native(c10::ScalarType dtype) {
  return dtype == c10::kFloat || dtype == c10::kDouble || dtype == c10::kComplexFloat ||
         dtype == c10::kComplexDouble;
}

// CSR @ dense and dense @ CSR on the device: each stored element scales a row (a column) of the
// dense operand into its output row (column). Anything else, and bad input, takes the fallback.
at::Tensor sparse_compressed_mm(const at::Tensor& a, const at::Tensor& b) {
  const bool sparse_left = is_plain_csr_matrix(a) && is_strided_matrix(b);
  const bool sparse_right = is_strided_matrix(a) && is_plain_csr_matrix(b);
  if (!(sparse_left || sparse_right) || a.scalar_type() != b.scalar_type() ||
      !csr_product_dtype_is_native(a.scalar_type()) || a.size(1) != b.size(0) || a.device() != b.device()) {
    return at::native::call_fallback_fn<&sparse_csr_cpu_fallback, ATEN_OP(mm)>::call(a, b);
  }
  const at::Tensor& csr = sparse_left ? a : b;
  const at::Tensor& dense = sparse_left ? b : a;
  at::Tensor out = at::zeros({a.size(0), b.size(1)}, dense.options());
  const int64_t nnz = csr._nnz();
  if (nnz == 0 || out.numel() == 0) return out;
  const at::Tensor row_of = csr_row_of_each_element(csr.crow_indices(), nnz);
  const at::Tensor col = csr.col_indices().to(c10::kLong);
  const TrustedIndices trusted;
  if (sparse_left) return out.index_add_(0, row_of, dense.index_select(0, col) * csr.values().unsqueeze(1));
  return out.index_add_(1, col, dense.index_select(1, row_of) * csr.values().unsqueeze(0));
}

// dense.sparse_mask(csr) on the device: the dense elements at the mask's stored positions.
at::Tensor sparse_mask_compressed(const at::Tensor& self, const at::Tensor& mask) {
  if (!is_strided_matrix(self) || !is_plain_csr_matrix(mask) || self.sizes() != mask.sizes() ||
      self.device() != mask.device()) {
    return at::native::call_fallback_fn<&sparse_csr_cpu_fallback, ATEN_OP(sparse_mask)>::call(self, mask);
  }
  const int64_t nnz = mask._nnz();
  at::Tensor values = at::empty({0}, self.options());
  if (nnz > 0) {
    const at::Tensor row_of = csr_row_of_each_element(mask.crow_indices(), nnz);
    const TrustedIndices trusted;
    values = self.index(c10::List<std::optional<at::Tensor>>({row_of, mask.col_indices().to(c10::kLong)}));
  }
  return at::_sparse_csr_tensor_unsafe(mask.crow_indices().clone(), mask.col_indices().clone(), values, mask.sizes(),
                                       self.options().layout(c10::kSparseCsr));
}

// torch.sparse.sampled_addmm on the device for a 2-D CSR: beta * self + alpha * (mat1 @ mat2) at
// self's stored positions only. Batched input and bad input take the fallback (CPU's errors).
at::Tensor sparse_sampled_addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                                const c10::Scalar& beta, const c10::Scalar& alpha) {
  const c10::ScalarType dtype = self.scalar_type();
  const bool native = is_plain_csr_matrix(self) && is_strided_matrix(mat1) && is_strided_matrix(mat2) &&
                      mat1.scalar_type() == dtype && mat2.scalar_type() == dtype &&
                      csr_product_dtype_is_native(dtype) && mat1.size(1) == mat2.size(0) &&
                      self.size(0) == mat1.size(0) && self.size(1) == mat2.size(1) &&
                      mat1.device() == self.device() && mat2.device() == self.device();
  if (!native) {
    return at::native::call_fallback_fn<&sparse_csr_cpu_fallback, ATEN_OP(sparse_sampled_addmm)>::call(
        self, mat1, mat2, beta, alpha);
  }
  const int64_t nnz = self._nnz();
  at::Tensor values = self.values().mul(beta);
  if (nnz > 0 && mat1.size(1) > 0) {
    const at::Tensor row_of = csr_row_of_each_element(self.crow_indices(), nnz);
    const TrustedIndices trusted;
    const at::Tensor dots =
        (mat1.index_select(0, row_of) * mat2.t().index_select(0, self.col_indices().to(c10::kLong))).sum(1);
    values = dots.mul(alpha).add_(values);
  }
  return at::_sparse_csr_tensor_unsafe(self.crow_indices().clone(), self.col_indices().clone(), values, self.sizes(),
                                       self.options());
}

// The ops ATen's CPU build gives sparse compressed tensors: each runs on the CPU through the
// counted fallback unless registered natively below. A boxed fallback alone would not reach them
// where the op also has a composite kernel (mm's structured one would take a CSR operand).
void register_cpu_sparse_compressed_ops(torch::Library& m, const std::set<std::string>& native) {
  for (const c10::OperatorName& op :
       c10::Dispatcher::singleton().getRegistrationsForDispatchKey(c10::DispatchKey::SparseCsrCPU)) {
    if (op.name.rfind("aten::", 0) != 0) continue;
    const std::string name = op.name.substr(6) + (op.overload_name.empty() ? "" : "." + op.overload_name);
    if (native.count(name) != 0) continue;
    m.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&sparse_csr_cpu_fallback>());
  }
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_to_sparse", TORCH_FN(to_sparse));
  m.impl("_to_sparse.sparse_dim", TORCH_FN(dense_to_sparse_coo));
  m.impl("_to_sparse_csr", TORCH_FN(dense_to_csr));
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
  // The CompositeExplicit sum reduces over no dims, which a sparse kernel takes as none at all.
  m.impl("sum", TORCH_FN(at::native::sum_coo));
}

TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  m.impl("_to_dense", TORCH_FN(sparse_compressed_to_dense));
  m.impl("_sparse_mm_reduce_impl", TORCH_FN(sparse_mm_reduce));
  m.impl("_sparse_mm_reduce_impl_backward", TORCH_FN(sparse_mm_reduce_backward));
  m.impl("mm", TORCH_FN(sparse_compressed_mm));
  m.impl("sparse_mask", TORCH_FN(sparse_mask_compressed));
  m.impl("sparse_sampled_addmm", TORCH_FN(sparse_sampled_addmm));
  // ATen's device-generic kernels: metadata, construction, copies.
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse_csr));
  m.impl("crow_indices", TORCH_FN(at::native::crow_indices_sparse_csr));
  m.impl("col_indices", TORCH_FN(at::native::col_indices_sparse_csr));
  m.impl("ccol_indices", TORCH_FN(at::native::ccol_indices_sparse_csr));
  m.impl("row_indices", TORCH_FN(at::native::row_indices_sparse_csr));
  m.impl("values", TORCH_FN(at::native::values_sparse_csr));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse_csr));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse_csr));
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse_compressed_symint));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_sparse_csr));
  m.impl("clone", TORCH_FN(at::native::clone_sparse_compressed));
  m.impl("copy_", TORCH_FN(at::native::copy_sparse_compressed_));
  m.impl("resize_", TORCH_FN(at::native::resize_sparse_csr_));
  m.impl("resize_as_sparse_", TORCH_FN(at::native::resize_as_sparse_compressed_));
  m.impl("zero_", TORCH_FN(at::native::zero_sparse_csr_));
  m.impl("sum", TORCH_FN(at::native::sum_csr));
  m.impl("_copy_from_and_resize", TORCH_FN(sparse_csr_copy_from_and_resize));
  register_cpu_sparse_compressed_ops(
      m, {"_to_dense", "_sparse_mm_reduce_impl", "_sparse_mm_reduce_impl_backward", "mm", "sparse_mask",
          "sparse_sampled_addmm", "_nnz", "crow_indices",
          "col_indices", "ccol_indices", "row_indices", "values", "sparse_dim", "dense_dim", "empty.memory_format",
          "empty_like", "clone", "copy_", "resize_", "resize_as_sparse_", "zero_", "sum", "_copy_from_and_resize"});
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_csr_cpu_fallback>());
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_cpu_fallback>());
}

}  // namespace torchneuron::aten
