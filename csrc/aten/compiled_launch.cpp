#include "aten/compiled_launch.h"

#include <torch/library.h>

#include <algorithm>

#include "aten/native_ops.h"
#include "aten/neuron_tensor.h"
#include "compiler/codegen.h"
#include "kernels/parallel.h"

namespace torchneuron::aten {

namespace {

// A group of dims reduced to as few as possible, the way TensorIterator does: size-1 dims go,
// dims are ordered by the `reference` operand's strides (outermost first, so a channels-last
// output iterates in memory order), and neighbours that every operand steps through as one
// (stride[d] == stride[d + 1] * size[d + 1]) merge. Generated kernels run their unit-stride loop
// over the innermost dim only, so a contiguous [8, 16, 32, 32] must become [131072].
struct Dims {
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides;  // [operand][dim]
};

Dims coalesce_dims(std::vector<int> dims, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                   int operands, int reference) {
  const int ndim = static_cast<int>(sizes.size());
  dims.erase(std::remove_if(dims.begin(), dims.end(), [&](int d) { return sizes[d] == 1; }), dims.end());
  std::stable_sort(dims.begin(), dims.end(),
                   [&](int a, int b) { return strides[reference * ndim + a] > strides[reference * ndim + b]; });
  Dims out;
  out.strides.resize(operands);
  for (int d : dims) {
    bool joins = !out.sizes.empty();
    for (int k = 0; k < operands && joins; ++k) {
      joins = out.strides[k].back() == strides[k * ndim + d] * sizes[d];
    }
    if (joins) {
      out.sizes.back() *= sizes[d];
      for (int k = 0; k < operands; ++k) out.strides[k].back() = strides[k * ndim + d];
    } else {
      out.sizes.push_back(sizes[d]);
      for (int k = 0; k < operands; ++k) out.strides[k].push_back(strides[k * ndim + d]);
    }
  }
  return out;
}

// Operand pointers and strides over `shape` ([operand][dim], flattened), inputs broadcast as
// ATen does: dims align at the right; size-1 and missing dims repeat. Outputs have the shape,
// or (reduction kernels) the shape with the `reduced` dims kept as size 1 or dropped.
void operand_strides(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                     const std::vector<int64_t>& shape, const std::vector<bool>& reduced, std::vector<char*>& data,
                     std::vector<int64_t>& strides) {
  const int ndim = static_cast<int>(shape.size());
  const int kept = static_cast<int>(std::count(reduced.begin(), reduced.end(), false));
  for (const at::Tensor& out : outputs) {
    check_same_device("torchneuron::compiled_kernel", outputs[0].device(), {&out});
    data.push_back(static_cast<char*>(out.data_ptr()));
    const bool squeezed = out.dim() == kept && kept != ndim;
    TORCH_CHECK(out.dim() == ndim || squeezed, "compiled kernel: output of size ", out.sizes(), " for shape ",
                at::IntArrayRef(shape));
    for (int d = 0, od = 0; d < ndim; ++d) {
      if (squeezed && reduced[d]) {
        strides.push_back(0);
        continue;
      }
      const int64_t size = out.size(od);
      TORCH_CHECK(size == shape[d] || (reduced[d] && size == 1), "compiled kernel: output of size ", out.sizes(),
                  " for shape ", at::IntArrayRef(shape));
      strides.push_back(size == shape[d] ? out.stride(od) : 0);
      ++od;
    }
  }
  for (const at::Tensor& in : inputs) {
    TORCH_CHECK(in.dim() <= ndim, "compiled kernel: input of size ", in.sizes(), " does not broadcast to ",
                at::IntArrayRef(shape));
    // Kernels read device memory when they run; a host tensor (even a 0-dim one) may be gone.
    TORCH_CHECK(in.device() == outputs[0].device(), "compiled kernel: expected every input on ", outputs[0].device(),
                ", got one on ", in.device());
    data.push_back(static_cast<char*>(const_cast<void*>(in.const_data_ptr())));
    const int offset = ndim - static_cast<int>(in.dim());
    for (int d = 0; d < ndim; ++d) {
      if (d < offset) {
        strides.push_back(0);
        continue;
      }
      const int64_t size = in.size(d - offset);
      TORCH_CHECK(size == shape[d] || size == 1, "compiled kernel: input of size ", in.sizes(), " does not broadcast to ",
                  at::IntArrayRef(shape));
      strides.push_back(size == shape[d] ? in.stride(d - offset) : 0);
    }
  }
}

}  // namespace

void launch_fused_kernel(uintptr_t entry, const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                         const std::vector<int64_t>& shape) {
  TORCH_CHECK(!outputs.empty(), "compiled kernel: expected at least one output");
  TORCH_CHECK(shape.size() <= 16, "compiled kernel: at most 16 dimensions, got ", shape.size());
  const int ndim = static_cast<int>(shape.size());
  const int operands = static_cast<int>(outputs.size() + inputs.size());
  std::vector<char*> data;
  std::vector<int64_t> strides;
  operand_strides(outputs, inputs, shape, std::vector<bool>(ndim, false), data, strides);
  int64_t numel = 1;
  for (int64_t size : shape) numel *= size;
  if (numel == 0) return;
  std::vector<int> all(ndim);
  for (int d = 0; d < ndim; ++d) all[d] = d;
  const Dims dims = coalesce_dims(all, shape, strides, operands, 0);
  std::vector<int64_t> flat;
  for (const auto& s : dims.strides) flat.insert(flat.end(), s.begin(), s.end());
  const auto kernel = reinterpret_cast<compiler::KernelEntry>(entry);
  enqueue_copy(outputs[0], "torchneuron::compiled_kernel", {&outputs[0]},
               [=, sizes = dims.sizes, strides = std::move(flat)] {
                 const int n = static_cast<int>(sizes.size());
                 kernels::parallel_for(numel, 32768, [&](int64_t begin, int64_t end) {
                   kernel(data.data(), strides.data(), sizes.data(), n, begin, end);
                 });
               });
}

bool launch_fused_after_mm(uintptr_t entry, const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                          const std::vector<int64_t>& shape, int product_input, const at::Tensor& product,
                          const at::Tensor& a, const at::Tensor& b) {
  if (outputs.empty() || shape.size() > 16 || product_input < 0 || product_input >= static_cast<int>(inputs.size()) ||
      product.dim() != 2 || !product.is_contiguous()) {
    return false;
  }
  const int ndim = static_cast<int>(shape.size());
  const int operands = static_cast<int>(outputs.size() + inputs.size());
  std::vector<char*> data;
  std::vector<int64_t> strides;
  operand_strides(outputs, inputs, shape, std::vector<bool>(ndim, false), data, strides);
  int64_t numel = 1;
  for (int64_t size : shape) numel *= size;
  const at::Tensor& view = inputs[product_input];
  if (numel != product.numel() || view.data_ptr() != product.data_ptr()) return false;
  for (size_t k = 0; k < inputs.size(); ++k) {  // another view could read rows not yet computed
    if (static_cast<int>(k) != product_input && inputs[k].storage().is_alias_of(product.storage())) return false;
  }
  std::vector<int> all(ndim);
  for (int d = 0; d < ndim; ++d) all[d] = d;
  const Dims dims = coalesce_dims(all, shape, strides, operands, 0);
  // Element e of the kernel's index space must be element e of the product, so that a block of
  // the product's rows is a range of the kernel's elements.
  const std::vector<int64_t>& reads = dims.strides[outputs.size() + product_input];
  int64_t step = 1;
  for (int d = static_cast<int>(dims.sizes.size()) - 1; d >= 0; --d) {
    if (reads[d] != step) return false;
    step *= dims.sizes[d];
  }
  std::vector<int64_t> flat;
  for (const auto& s : dims.strides) flat.insert(flat.end(), s.begin(), s.end());
  const auto kernel = reinterpret_cast<compiler::KernelEntry>(entry);
  const int64_t row = product.size(1);
  return mm_with_epilogue(product, a, b, [=, sizes = dims.sizes, strides = std::move(flat)](int64_t begin, int64_t end) {
    kernel(data.data(), strides.data(), sizes.data(), static_cast<int>(sizes.size()), begin * row, end * row);
  });
}

void launch_fused_reduction(uintptr_t entry, const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                            const std::vector<int64_t>& shape, const std::vector<int64_t>& reduce_dims) {
  TORCH_CHECK(!outputs.empty(), "compiled kernel: expected at least one output");
  TORCH_CHECK(shape.size() <= 16, "compiled kernel: at most 16 dimensions, got ", shape.size());
  const int ndim = static_cast<int>(shape.size());
  const int operands = static_cast<int>(outputs.size() + inputs.size());
  std::vector<bool> reduced(ndim, false);
  for (int64_t d : reduce_dims) {
    TORCH_CHECK(d >= 0 && d < ndim && !reduced[d], "compiled kernel: reduction dim ", d, " out of range for shape ",
                at::IntArrayRef(shape));
    reduced[d] = true;
  }
  std::vector<char*> data;
  std::vector<int64_t> strides;
  operand_strides(outputs, inputs, shape, reduced, data, strides);
  std::vector<int> outer, inner;
  int64_t rows = 1, row_size = 1;
  for (int d = 0; d < ndim; ++d) {
    (reduced[d] ? inner : outer).push_back(d);
    (reduced[d] ? row_size : rows) *= shape[d];
  }
  if (rows == 0) return;
  // The folded dims in the memory order of the first operand that steps through them.
  int reference = 0;
  for (int k = 0; k < operands; ++k) {
    if (std::any_of(inner.begin(), inner.end(), [&](int d) { return strides[k * ndim + d] != 0; })) {
      reference = k;
      break;
    }
  }
  const Dims outer_dims = coalesce_dims(outer, shape, strides, operands, 0);
  const Dims inner_dims = coalesce_dims(inner, shape, strides, operands, reference);
  std::vector<int64_t> sizes = outer_dims.sizes;
  sizes.insert(sizes.end(), inner_dims.sizes.begin(), inner_dims.sizes.end());
  std::vector<int64_t> flat;
  for (int k = 0; k < operands; ++k) {
    flat.insert(flat.end(), outer_dims.strides[k].begin(), outer_dims.strides[k].end());
    flat.insert(flat.end(), inner_dims.strides[k].begin(), inner_dims.strides[k].end());
  }
  const int inner_ndim = static_cast<int>(inner_dims.sizes.size());
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(row_size, 1));
  const auto kernel = reinterpret_cast<compiler::ReductionEntry>(entry);
  enqueue_copy(outputs[0], "torchneuron::compiled_kernel", {&outputs[0]},
               [=, sizes = std::move(sizes), strides = std::move(flat)] {
                 const int n = static_cast<int>(sizes.size());
                 kernels::parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
                   kernel(data.data(), strides.data(), sizes.data(), n, inner_ndim, begin, end);
                 });
               });
}

namespace {

void launch_fused_op(int64_t entry, at::TensorList outputs, at::TensorList inputs, at::IntArrayRef shape) {
  launch_fused_kernel(static_cast<uintptr_t>(entry), outputs.vec(), inputs.vec(), shape.vec());
}

void launch_fused_reduction_op(int64_t entry, at::TensorList outputs, at::TensorList inputs, at::IntArrayRef shape,
                               at::IntArrayRef reduce_dims) {
  launch_fused_reduction(static_cast<uintptr_t>(entry), outputs.vec(), inputs.vec(), shape.vec(), reduce_dims.vec());
}

}  // namespace

TORCH_LIBRARY(torchneuron, m) {
  m.def("launch_fused(int entry, Tensor(a!)[] outputs, Tensor[] inputs, int[] shape) -> ()");
  m.def("launch_fused_reduction(int entry, Tensor(a!)[] outputs, Tensor[] inputs, int[] shape, int[] reduce_dims) -> ()");
}

TORCH_LIBRARY_IMPL(torchneuron, PrivateUse1, m) { 
  m.impl("launch_fused", TORCH_FN(launch_fused_op));
  m.impl("launch_fused_reduction", TORCH_FN(launch_fused_reduction_op));
}

}  // namespace torchneuron::aten
