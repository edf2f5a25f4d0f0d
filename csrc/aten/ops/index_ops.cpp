// Advanced indexing on neuron: index (x[idx]) and index_put_ (x[idx] = v, x.index_put_(...,
// accumulate=True), the backward of indexing; complex tensors as (real, imaginary) pairs), take
// and put_ (flat indices, composed of those), writes along one dim (index_add, index_copy,
// index_fill, scatter with a value), masked_scatter and bincount. Boolean masks become coordinate
// lists (a sync, as on CUDA); the index tensors broadcast together and csrc/kernels/index turns
// them into one flat row number per element of the indexed dimensions, moved to the front. Rows
// are then gathered (index_select) or written (index_put_rows) on the queue.
#include <ATen/MemoryOverlap.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/_index_put_impl_ops.h>
#include <ATen/ops/bincount_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/max.h>
#include <ATen/ops/min.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/view_as_complex.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/full.h>
#include <ATen/ops/index_add_ops.h>
#include <ATen/ops/index_copy_ops.h>
#include <ATen/ops/index_fill_ops.h>
#include <ATen/ops/masked_scatter_ops.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/scatter.h>
#include <ATen/ops/index_ops.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/nonzero.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "aten/fallback/cpu_fallback.h"
#include "aten/device/neuron_tensor.h"
#include "aten/ops/unsigned_dtypes.h"
#include "aten/ops/index_checks.h"
#include "kernels/index.h"

namespace torchneuron::aten {
namespace indexing {
namespace {

using IndexList = c10::List<std::optional<at::Tensor>>;

// The indices resolved against `self`: one int64 index per indexed dimension, broadcast.
struct IndexPlan {
  std::vector<int64_t> dims;         // indexed dimensions of self, ascending
  std::vector<at::Tensor> indices;   // int64 on self's device, expanded to `broadcast`
  std::vector<int64_t> broadcast;    // the index tensors' common shape
  std::vector<int64_t> permutation;  // indexed dims first, then the others in order
  std::vector<int64_t> rest;         // sizes of the other dims
  bool in_place = false;             // indexed dims adjacent: the result keeps them in place
  int64_t first = 0;                 // first indexed dim

  // Shape of self[indices].
  std::vector<int64_t> result_shape() const {
    std::vector<int64_t> shape;
    if (!in_place) {
      shape = broadcast;
      shape.insert(shape.end(), rest.begin(), rest.end());
      return shape;
    }
    shape.assign(rest.begin(), rest.begin() + first);
    shape.insert(shape.end(), broadcast.begin(), broadcast.end());
    shape.insert(shape.end(), rest.begin() + first, rest.end());
    return shape;
  }

  // Permutation from the [broadcast..., rest...] layout to result_shape().
  std::vector<int64_t> to_result() const {
    const int64_t b = static_cast<int64_t>(broadcast.size());
    std::vector<int64_t> perm;
    if (!in_place) {
      perm.resize(b + rest.size());
      std::iota(perm.begin(), perm.end(), int64_t{0});
      return perm;
    }
    for (int64_t d = 0; d < first; ++d) perm.push_back(b + d);
    for (int64_t d = 0; d < b; ++d) perm.push_back(d);
    for (int64_t d = first; d < static_cast<int64_t>(rest.size()); ++d) perm.push_back(b + d);
    return perm;
  }
};

// check_values: read the index values and raise CPU's IndexError for one out of range (see
// index_checks.h); false where they are known in range (the backward of indexing says `unsafe`).
IndexPlan plan_indexing(const at::Tensor& self, const IndexList& list, bool check_values = true) {
  IndexPlan plan;
  int64_t dim = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::optional<at::Tensor> entry = list.get(i);
    if (!entry.has_value() || !entry->defined()) {
      ++dim;
      continue;
    }
    const at::Tensor& index = *entry;
    const c10::ScalarType type = index.scalar_type();
    if (type == at::kBool || type == at::kByte) {
      if (type == at::kByte) {  // CPU PyTorch's deprecation warning, at every such index
        TORCH_WARN("indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead.");
      }
      TORCH_CHECK_INDEX(dim + index.dim() <= self.dim(), "too many indices for tensor of dimension ", self.dim());
      for (int64_t j = 0; j < index.dim(); ++j) {
        TORCH_CHECK_INDEX(index.size(j) == self.size(dim + j), "The shape of the mask ", index.sizes(), " at index ", j,
                          " does not match the shape of the indexed tensor ", self.sizes(), " at index ", dim + j);
      }
      const at::Tensor coords = at::nonzero(index.to(self.device()).to(at::kBool));  // reads the count back
      for (int64_t j = 0; j < index.dim(); ++j) {
        plan.dims.push_back(dim++);
        plan.indices.push_back(coords.select(1, j));
      }
      continue;
    }
    TORCH_CHECK_INDEX(type == at::kLong || type == at::kInt,
                      "tensors used as indices must be long, int, byte or bool tensors");
    TORCH_CHECK_INDEX(dim < self.dim(), "too many indices for tensor of dimension ", self.dim());
    // Checked at the call, as CPU PyTorch does (a neuron index waits for the queue up to it).
    const int64_t size = self.size(dim);
    if (size > 0 && check_values) {
      if (const std::optional<OutOfRange> bad = first_out_of_range(index, -size, size)) {
        // CPU PyTorch numbers the dimension among the index tensors, as its kernel does.
        TORCH_CHECK_INDEX(false, "index ", bad->value, " is out of bounds for dimension ", plan.indices.size(),
                          " with size ", size);
      }
    }
    plan.dims.push_back(dim++);
    plan.indices.push_back(index.to(self.device(), at::kLong));  // CPU indices are accepted, as on CUDA
  }
  TORCH_CHECK_INDEX(dim <= self.dim(), "too many indices for tensor of dimension ", self.dim(), " (got ", dim, ")");
  TORCH_CHECK(!plan.dims.empty(), "index: expected at least one index tensor");
  plan.broadcast = plan.indices.front().sizes().vec();
  for (const at::Tensor& t : plan.indices) {
    bool fits = true;
    for (int64_t i = 0; i < t.dim() && i < static_cast<int64_t>(plan.broadcast.size()); ++i) {
      const int64_t a = t.size(t.dim() - 1 - i), b = plan.broadcast[plan.broadcast.size() - 1 - i];
      fits = fits && (a == b || a == 1 || b == 1);
    }
    if (!fits) {  // CPU PyTorch's IndexError and words
      std::string shapes;
      for (const at::Tensor& u : plan.indices) shapes += (shapes.empty() ? "" : ", ") + c10::str(u.sizes());
      TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together with shapes ", shapes);
    }
    plan.broadcast = at::infer_size(plan.broadcast, t.sizes());
  }
  // As CPU PyTorch: a non-empty index into a dim of size 0 is out of bounds whatever its values.
  const bool empty_dim = std::any_of(plan.dims.begin(), plan.dims.end(), [&](int64_t d) { return self.size(d) == 0; });
  TORCH_CHECK_INDEX(!empty_dim || c10::multiply_integers(plan.broadcast) == 0,
                    "index is out of bounds for dimension with size 0");
  for (at::Tensor& t : plan.indices) t = t.expand(plan.broadcast).contiguous();
  plan.in_place = plan.dims.back() - plan.dims.front() + 1 == static_cast<int64_t>(plan.dims.size());
  plan.first = plan.dims.front();
  std::vector<bool> indexed(self.dim(), false);
  for (int64_t d : plan.dims) indexed[d] = true;
  plan.permutation = plan.dims;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (indexed[d]) continue;
    plan.permutation.push_back(d);
    plan.rest.push_back(self.size(d));
  }
  return plan;
}

// The flat row of self.permute(plan.permutation) that each index element addresses.
at::Tensor flat_rows(const at::Tensor& self, const IndexPlan& plan, const char* op) {
  at::Tensor rows = at::empty(plan.broadcast, self.options().dtype(at::kLong));
  if (rows.numel() == 0) return rows.reshape({-1});
  std::vector<kernels::IndexOperand> operands;
  for (size_t k = 0; k < plan.dims.size(); ++k) {
    operands.push_back({plan.indices[k].data_ptr<int64_t>(), self.size(plan.dims[k]), plan.dims[k]});
  }
  const int64_t count = rows.numel();
  int64_t* out = rows.data_ptr<int64_t>();
  enqueue(rows, op, {&plan.indices.front()}, [=] { kernels::linear_index(operands, count, out); });
  return rows.reshape({-1});
}

int64_t indexed_rows(const at::Tensor& self, const IndexPlan& plan) {
  int64_t rows = 1;
  for (int64_t d : plan.dims) rows *= self.size(d);
  return rows;
}

}  // namespace

at::Tensor index(const at::Tensor& self, const IndexList& indices) {
  if (self.is_complex() && has_kernel_dtype(self.scalar_type())) {
    // As (real, imaginary) pairs: the indices address the leading dims, the pair dim follows.
    return at::view_as_complex(indexing::index(at::view_as_real(self.resolve_conj()), indices));
  }
  // index_select below moves uint16/32/64 rows as bytes.
  if ((!has_kernel_dtype(self.scalar_type()) && !is_wide_unsigned(self.scalar_type())) || self.is_complex()) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(index, Tensor)>::call(self, indices);
  }
  const IndexPlan plan = plan_indexing(self, indices);
  const at::Tensor rows = flat_rows(self, plan, "aten::index");
  std::vector<int64_t> source_shape{indexed_rows(self, plan)};
  source_shape.insert(source_shape.end(), plan.rest.begin(), plan.rest.end());
  const at::Tensor source = self.permute(plan.permutation).reshape(source_shape);
  std::vector<int64_t> gathered_shape = plan.broadcast;
  gathered_shape.insert(gathered_shape.end(), plan.rest.begin(), plan.rest.end());
  const at::Tensor gathered = at::index_select(source, 0, rows).view(gathered_shape);
  return plan.in_place && plan.first > 0 ? gathered.permute(plan.to_result()).contiguous() : gathered;
}

at::Tensor& index_out(const at::Tensor& self, const IndexList& indices, at::Tensor& out) {
  const at::Tensor value = indexing::index(self, indices);
  at::native::resize_output(out, value.sizes());
  return out.copy_(value);
}

// take: elements of the flattened input at (possibly negative) flat indices.
at::Tensor take(const at::Tensor& self, const at::Tensor& index) {
  TORCH_CHECK(index.scalar_type() == at::kLong, "take(): Expected a long tensor for index, but got ", index.scalar_type());
  TORCH_CHECK(self.numel() > 0 || index.numel() == 0, "take(): tried to take from an empty tensor");
  // Advanced indexing takes negative indices and names the one out of range as the user gave it.
  const c10::List<std::optional<at::Tensor>> indices{std::optional<at::Tensor>(index.reshape({-1}))};
  return at::index(self.reshape({-1}), indices).view(index.sizes());
}

at::Tensor& take_out(const at::Tensor& self, const at::Tensor& index, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "take(): self and out expected to have the same dtype, but got "
              "self.dtype = ", self.scalar_type(), " and out.dtype = ", out.scalar_type());
  const at::Tensor taken = indexing::take(self, index);
  at::native::resize_output(out, taken.sizes());
  return out.copy_(taken);
}

// put_: writes (or adds) source at flat, possibly negative, indices of self.
at::Tensor& put_(at::Tensor& self, const at::Tensor& index, const at::Tensor& source, bool accumulate) {
  TORCH_CHECK(index.scalar_type() == at::kLong, "put_(): Expected a long tensor for index, but got ", index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "put_(): self and source expected to have the same dtype, ",
              "but got self.dtype = ", self.scalar_type(), " and source.dtype = ", source.scalar_type());
  TORCH_CHECK(index.numel() == source.numel(), "put_(): Expected source and index to have the same number of elements, ",
              "but got source.numel() = ", source.numel(), ", index.numel() = ", index.numel());
  at::assert_no_internal_overlap(self);  // CPU's checks
  at::assert_no_overlap(self, index);
  at::assert_no_overlap(self, source);
  // As on CPU: which of several writes to one index wins is unspecified.
  if (!accumulate) at::globalContext().alertNotDeterministic("put_");
  if (index.numel() == 0) return self;
  TORCH_CHECK(self.numel() > 0, "put_(): Tried to put elements into an empty tensor");
  const c10::List<std::optional<at::Tensor>> indices{std::optional<at::Tensor>(index.reshape({-1}))};
  if (self.is_contiguous()) {
    self.view({-1}).index_put_(indices, source.reshape({-1}), accumulate);
  } else {
    at::Tensor flat = self.reshape({-1}).clone();
    flat.index_put_(indices, source.reshape({-1}), accumulate);
    self.copy_(flat.view(self.sizes()));
  }
  return self;
}


at::Tensor& index_put_(at::Tensor& self, const IndexList& indices, const at::Tensor& values, bool accumulate,
                       bool unsafe) {
  // CPU's checks, before the fallback's copies hide the overlap.
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes) {
    TORCH_WARN("Use of index_put_ on expanded tensors is deprecated. Please clone() the tensor before performing this "
               "operation. This also applies to advanced indexing e.g. tensor[indices] = tensor");
  }
  at::assert_no_overlap(self, values);
  for (const std::optional<at::Tensor>& index : indices) {
    if (index.has_value() && index->defined()) at::assert_no_overlap(self, *index);
  }
  if (self.is_complex() && has_kernel_dtype(self.scalar_type()) && !self.is_conj() &&
      values.scalar_type() == self.scalar_type()) {
    at::Tensor pairs = at::view_as_real(self);
    index_put_(pairs, indices, at::view_as_real(values.to(self.device()).resolve_conj()), accumulate, unsafe);
    return self;
  }
  if (!has_kernel_dtype(self.scalar_type()) || self.is_complex()) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_index_put_impl_)>::call(self, indices, values,
                                                                                               accumulate, unsafe);
  }
  TORCH_CHECK(values.device() == self.device() || values.dim() == 0,
              "index_put_: expected values on ", self.device(), " (or a 0-dim CPU tensor), got ", values.device());
  const IndexPlan plan = plan_indexing(self, indices, /*check_values=*/!unsafe);
  const std::vector<int64_t> result_shape = plan.result_shape();
  TORCH_CHECK(at::is_expandable_to(values.sizes(), result_shape), "shape mismatch: value tensor of shape ", values.sizes(),
              " cannot be broadcast to indexing result of shape ", c10::IntArrayRef(result_shape));
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), "Index put requires the source and destination dtypes match, got ",
              self.scalar_type(), " for the destination and ", values.scalar_type(), " for the source.");
  const at::Tensor rows = flat_rows(self, plan, "aten::index_put_");
  if (rows.numel() == 0) return self;
  // Values in the [broadcast..., rest...] layout, one row per index element.
  std::vector<int64_t> back(result_shape.size());
  const std::vector<int64_t> forward = plan.to_result();
  for (size_t i = 0; i < forward.size(); ++i) back[forward[i]] = static_cast<int64_t>(i);
  int64_t cols = 1;
  for (int64_t s : plan.rest) cols *= s;
  const at::Tensor source = values.to(self.device()).expand(result_shape).permute(back).reshape({rows.numel(), cols}).contiguous();
  at::Tensor target_view = self.permute(plan.permutation);
  const int64_t num_rows = indexed_rows(self, plan);
  at::Tensor target = target_view.is_contiguous() ? target_view.view({num_rows, cols}) : target_view.contiguous().view({num_rows, cols});
  if (cols > 0) {
    const kernels::DType dtype = to_kernel_dtype(self.scalar_type());
    const int64_t* pr = rows.data_ptr<int64_t>();
    const int64_t count = rows.numel();
    const void* pv = source.data_ptr();
    void* pt = target.data_ptr();
    enqueue(target, "aten::index_put_", {&rows, &source}, [=] {
      kernels::index_put_rows(dtype, num_rows, cols, pr, count, pv, pt, accumulate);
    });
  }
  if (!target_view.is_contiguous()) target_view.copy_(target.view(target_view.sizes()));
  return self;
}

// ---- writes along one dim: index_add, index_copy, index_fill; masked_scatter; scatter value --

namespace {

// result[..., index[i], ...] = (or +=) source[..., i, ...] along dim, through index_put_rows on
// result as [outer, size(dim), inner] blocks. `source` has result's shape with index.numel()
// entries along dim; `fill`: source is a 0-dim value written at every indexed position, and
// negative indices count from the end, as CPU PyTorch's index_fill allows.
void put_along_dim(at::Tensor& result, int64_t dim, const at::Tensor& index, const at::Tensor& source, bool accumulate,
                   const char* op, bool fill = false) {
  check_same_device(op, result.device(), {&index, &source});
  TORCH_CHECK_INDEX(index.dim() <= 1, op, "(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt, op,
              "(): Expected dtype int32/int64 for index");
  TORCH_CHECK(source.scalar_type() == result.scalar_type(), op, "(): self (", result.scalar_type(), ") and source (",
              source.scalar_type(), ") must have the same scalar type");
  const int64_t d = at::maybe_wrap_dim(dim, result.dim());
  const int64_t count = index.numel();
  if (!fill && accumulate) {
    TORCH_CHECK(result.dim() == 0 ? source.numel() == count : (source.dim() == result.dim() && source.size(d) == count), op,
                "(): Number of indices (", count, ") should be equal to source.size(dim) (",
                source.dim() > 0 ? source.size(d) : source.numel(), ")");
    for (int64_t k = 0; k < result.dim(); ++k) {
      TORCH_CHECK(k == d || source.size(k) == result.size(k), op, "(): source ", source.sizes(), " and self ",
                  result.sizes(), " must match in every dimension but ", d);
    }
  } else if (!fill) {
    // index_copy as CPU: the shapes without `dim` match (a 0-dim tensor's is empty, so () and (1,) mix).
    std::vector<int64_t> result_slice = result.sizes().vec(), source_slice = source.sizes().vec();
    if (!result_slice.empty()) result_slice.erase(result_slice.begin() + d);
    if (!source_slice.empty()) source_slice.erase(source_slice.begin() + std::min<int64_t>(d, source.dim() - 1));
    TORCH_CHECK(result_slice == source_slice, op, "(): source ", source.sizes(), " and self ", result.sizes(),
                " must match in every dimension but ", d);
    const int64_t source_count = source.dim() == 0 ? 1 : source.size(std::min<int64_t>(d, source.dim() - 1));
    TORCH_CHECK_INDEX(source_count == count, op, "(): Number of indices (", count,
                      ") should be equal to source.size(dim) (", source_count, ")");
  }
  if (count == 0 || result.numel() == 0) return;
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < d; ++k) outer *= result.size(k);
  for (int64_t k = d + 1; k < result.dim(); ++k) inner *= result.size(k);
  const int64_t rows = result.dim() == 0 ? 1 : result.size(d);
  at::Tensor target = result.is_contiguous() ? result : result.contiguous();
  // A fill writes one row of `inner` copies of the value into every indexed position.
  const at::Tensor values = fill ? source.to(result.scalar_type()).expand({inner}).contiguous() : source.contiguous();
  const int64_t block_stride = fill ? 0 : count * inner, row_stride = fill ? 0 : inner;
  const at::Tensor idx = index.reshape({-1}).to(at::kLong).contiguous();
  if (inner > 0) {
    const kernels::DType dtype = to_kernel_dtype(result.scalar_type());
    const int64_t* pi = idx.data_ptr<int64_t>();
    const void* pv = values.data_ptr();
    void* pt = target.data_ptr();
    enqueue(target, op, {&idx, &values}, [=] {
      kernels::index_put_rows(dtype, outer, rows, inner, pi, count, pv, block_stride, row_stride, pt, accumulate,
                              /*wrap_negative=*/fill);
    });
  }
  if (!target.is_same(result)) result.copy_(target);
}

bool along_dim_native(const at::Tensor& self) { return has_kernel_dtype(self.scalar_type()) && !self.is_complex(); }

at::Tensor& start_from(const at::Tensor& self, at::Tensor& out) {
  if (!out.is_same(self)) {
    at::native::resize_output(out, self.sizes());
    out.copy_(self);
  }
  return out;
}

}  // namespace

at::Tensor& index_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                          const c10::Scalar& alpha, at::Tensor& out) {
  if (!along_dim_native(self)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(index_add, out)>::call(self, dim, index, source, alpha, out);
  }
  start_from(self, out);
  const bool unit = alpha.isBoolean() ? alpha.toBool() : alpha.toDouble() == 1.0;
  put_along_dim(out, dim, index, unit ? source : at::mul(source, alpha), /*accumulate=*/true, "index_add");
  return out;
}

at::Tensor& index_copy_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                           at::Tensor& out) {
  if (!along_dim_native(self)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(index_copy, out)>::call(self, dim, index, source, out);
  }
  start_from(self, out);
  put_along_dim(out, dim, index, source, /*accumulate=*/false, "index_copy");
  return out;
}

at::Tensor& index_fill_scalar_(at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& value) {
  at::assert_no_overlap(self, index);  // CPU's check, before the fallback's copies hide the overlap
  if (!along_dim_native(self)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(index_fill_, int_Scalar)>::call(self, dim, index, value);
  }
  TORCH_CHECK(!value.isComplex(), "index_fill_(): Converting complex Scalar to non-complex type is not supported");
  const at::Tensor source = at::scalar_tensor(value, self.options().dtype(self.scalar_type()));
  // A CPU index is taken, as CPU PyTorch's index_fill_ takes one beside a tensor of another device.
  put_along_dim(self, dim, index.is_cpu() ? index.to(self.device()) : index, source, /*accumulate=*/false,
                "index_fill_", /*fill=*/true);
  return self;
}

at::Tensor& index_fill_tensor_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "index_fill_ only supports a 0-dimensional value tensor, but got tensor with ", value.dim(),
              " dimension(s).");
  if (!along_dim_native(self)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(index_fill_, int_Tensor)>::call(self, dim, index, value);
  }
  put_along_dim(self, dim, index.is_cpu() ? index.to(self.device()) : index, value.to(self.device(), self.scalar_type()),
                /*accumulate=*/false, "index_fill_", /*fill=*/true);
  return self;
}

// Source elements fill the positions of the set mask entries in row-major order.
at::Tensor& masked_scatter_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_scatter_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "masked_scatter: expected self and source to have same dtypes but got ",
              self.scalar_type(), " and ", source.scalar_type());
  check_same_device("aten::masked_scatter_", self.device(), {&mask, &source});
  if (!along_dim_native(self)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(masked_scatter_)>::call(self, mask, source);
  }
  const at::Tensor coords = at::nonzero(mask.expand(self.sizes()));  // reads the count back
  const int64_t count = coords.size(0);
  TORCH_CHECK(count <= source.numel(), "masked_scatter: expected source to have at least as many elements as the ones in mask (",
              count, "), got ", source.numel());
  if (count == 0) return self;
  if (self.dim() == 0) return self.copy_(source.reshape({-1})[0]);
  IndexList indices;
  for (int64_t k = 0; k < self.dim(); ++k) indices.push_back(coords.select(1, k));
  const TrustedIndices trusted;  // nonzero's coordinates
  return indexing::index_put_(self, indices, source.reshape({-1}).narrow(0, 0, count), false, false);
}

at::Tensor& scatter_value_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& value,
                              at::Tensor& out) {
  const at::Tensor source = at::full(index.sizes(), value, self.options());
  return at::scatter_out(out, self, dim, index, source);
}

at::Tensor scatter_value(const at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& value) {
  at::Tensor out = at::empty({0}, self.options());
  return scatter_value_out(self, dim, index, value, out);
}

at::Tensor& scatter_value_(at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& value) {
  return scatter_value_out(self, dim, index, value, self);
}

// bincount: one sync for the smallest and largest value (the output size depends on them, as on
// CUDA), then index_add of ones or of the weights into zeros.
at::Tensor bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights_arg, int64_t minlength) {
  const at::Tensor weights = weights_arg.has_value() ? *weights_arg : at::Tensor();
  const bool native_weights = !weights.defined() || (has_kernel_dtype(weights.scalar_type()) &&
                                                     !c10::isComplexType(weights.scalar_type()) &&
                                                     !c10::isReducedFloatingType(weights.scalar_type()));
  if (!has_kernel_dtype(self.scalar_type()) || !c10::isIntegralType(self.scalar_type(), false) || !native_weights) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(bincount)>::call(self, weights_arg, minlength);
  }
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  TORCH_CHECK(self.dim() == 1, "bincount only supports 1-d non-negative integral inputs.");
  if (weights.defined()) {
    TORCH_CHECK(weights.dim() == 1 && weights.size(0) == self.size(0), "weights should be 1-d and have the same length as input");
    check_same_device("aten::bincount", self.device(), {&weights});
  }
  // CPU PyTorch's result types: counts in int64, float32 weights summed in float32, others in float64.
  const c10::ScalarType dtype = !weights.defined() ? at::kLong : weights.scalar_type() == at::kFloat ? at::kFloat : at::kDouble;
  int64_t bins = minlength;
  if (self.numel() > 0) {
    const at::Tensor range = at::stack({at::min(self), at::max(self)}).to(at::kLong).cpu();
    TORCH_CHECK(range[0].item<int64_t>() >= 0, "bincount only supports 1-d non-negative integral inputs.");
    bins = std::max(bins, range[1].item<int64_t>() + 1);
  }
  at::Tensor counts = at::zeros({bins}, self.options().dtype(dtype));
  if (self.numel() == 0) return counts;
  const at::Tensor added = weights.defined() ? weights.to(dtype) : at::ones({self.size(0)}, counts.options());
  const bool index_dtype = self.scalar_type() == at::kLong || self.scalar_type() == at::kInt;  // as index_add takes
  return counts.index_add_(0, index_dtype ? self : self.to(at::kLong), added);
}

}  // namespace indexing

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("bincount", TORCH_FN(indexing::bincount));
  m.impl("index.Tensor", TORCH_FN(indexing::index));
  m.impl("index.Tensor_out", TORCH_FN(indexing::index_out));
  m.impl("take", TORCH_FN(indexing::take));
  m.impl("take.out", TORCH_FN(indexing::take_out));
  m.impl("put_", TORCH_FN(indexing::put_));
  m.impl("_index_put_impl_", TORCH_FN(indexing::index_put_));
  m.impl("index_add.out", TORCH_FN(indexing::index_add_out));
  m.impl("index_copy.out", TORCH_FN(indexing::index_copy_out));
  m.impl("index_fill_.int_Scalar", TORCH_FN(indexing::index_fill_scalar_));
  m.impl("index_fill_.int_Tensor", TORCH_FN(indexing::index_fill_tensor_));
  m.impl("masked_scatter_", TORCH_FN(indexing::masked_scatter_));
  m.impl("scatter.value", TORCH_FN(indexing::scatter_value));
  m.impl("scatter.value_out", TORCH_FN(indexing::scatter_value_out));
  m.impl("scatter_.value", TORCH_FN(indexing::scatter_value_));
}

}  // namespace torchneuron::aten
