#include "aten/compiled_launch.h"

#include <torch/library.h>

#include <algorithm>

#include "aten/native_ops.h"
#include "aten/neuron_tensor.h"
#include "compiler/codegen.h"
#include "compiler/passes.h"
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

namespace {

// A kernel's operands resolved for its entry point: pointers, dims merged as far as they go
// (for a reduction kernel, the kept dims then the folded ones), strides [operand][dim].
struct Launch {
  std::vector<char*> data;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int inner_ndim = 0;   // folded dims among `sizes` (the last ones)
  int64_t rows = 1;     // reduction kernels: rows; pointwise kernels: elements
  int64_t row_size = 1;
};

Launch prepare(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
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
  Launch launch;
  std::vector<int64_t> strides;
  operand_strides(outputs, inputs, shape, reduced, launch.data, strides);
  std::vector<int> outer, inner;
  for (int d = 0; d < ndim; ++d) {
    (reduced[d] ? inner : outer).push_back(d);
    (reduced[d] ? launch.row_size : launch.rows) *= shape[d];
  }
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
  launch.sizes = outer_dims.sizes;
  launch.sizes.insert(launch.sizes.end(), inner_dims.sizes.begin(), inner_dims.sizes.end());
  for (int k = 0; k < operands; ++k) {
    launch.strides.insert(launch.strides.end(), outer_dims.strides[k].begin(), outer_dims.strides[k].end());
    launch.strides.insert(launch.strides.end(), inner_dims.strides[k].begin(), inner_dims.strides[k].end());
  }
  launch.inner_ndim = static_cast<int>(inner_dims.sizes.size());
  return launch;
}

// Runs a prepared kernel on rows [begin, end) (elements, for a pointwise kernel).
void run_rows(uintptr_t entry, bool reduction, const Launch& launch, int64_t begin, int64_t end) {
  const int ndim = static_cast<int>(launch.sizes.size());
  if (reduction) {
    reinterpret_cast<compiler::ReductionEntry>(entry)(launch.data.data(), launch.strides.data(), launch.sizes.data(),
                                                      ndim, launch.inner_ndim, begin, end);
  } else {
    reinterpret_cast<compiler::KernelEntry>(entry)(launch.data.data(), launch.strides.data(), launch.sizes.data(), ndim,
                                                   begin, end);
  }
}

}  // namespace

void launch_fused_kernel(uintptr_t entry, const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                         const std::vector<int64_t>& shape) {
  Launch launch = prepare(outputs, inputs, shape, {});
  if (launch.rows == 0) return;
  enqueue_copy(outputs[0], "torchneuron::compiled_kernel", {&outputs[0]}, [entry, launch = std::move(launch)] {
    kernels::parallel_for(launch.rows, 32768, [&](int64_t begin, int64_t end) { run_rows(entry, false, launch, begin, end); });
  });
}

void launch_fused_reduction(uintptr_t entry, const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                            const std::vector<int64_t>& shape, const std::vector<int64_t>& reduce_dims) {
  Launch launch = prepare(outputs, inputs, shape, reduce_dims);
  if (launch.rows == 0) return;
  // A column kernel vectorizes across the kept elements of its block and pays a fixed cost per
  // folded index: one long block per thread, of at least 64.
  const bool columns = compiler::folds_outer_dims(std::vector<int>(reduce_dims.begin(), reduce_dims.end()),
                                                  static_cast<int>(shape.size()));
  const int64_t threads = kernels::compute_threads();
  const int64_t grain = columns ? std::max<int64_t>(64, (launch.rows + threads - 1) / threads)
                                : std::max<int64_t>(1, 32768 / std::max<int64_t>(launch.row_size, 1));
  enqueue_copy(outputs[0], "torchneuron::compiled_kernel", {&outputs[0]}, [entry, grain, launch = std::move(launch)] {
    kernels::parallel_for(launch.rows, grain, [&](int64_t begin, int64_t end) { run_rows(entry, true, launch, begin, end); });
  });
}

bool launch_fused_after_product(uintptr_t entry, const std::vector<at::Tensor>& outputs,
                                const std::vector<at::Tensor>& inputs, const std::vector<int64_t>& shape,
                                const std::vector<int64_t>& reduce_dims, int product_input, const at::Tensor& product,
                                const at::Tensor& a, const at::Tensor& b) {
  if (outputs.empty() || shape.size() > 16 || product_input < 0 || product_input >= static_cast<int>(inputs.size()) ||
      product.dim() < 2 || !product.is_contiguous()) {
    return false;
  }
  const at::Tensor& view = inputs[product_input];
  if (view.data_ptr() != product.data_ptr()) return false;
  for (size_t k = 0; k < inputs.size(); ++k) {  // another view could read rows not yet computed
    if (static_cast<int>(k) != product_input && inputs[k].storage().is_alias_of(product.storage())) return false;
  }
  Launch launch = prepare(outputs, inputs, shape, reduce_dims);
  // Element e of the kernel's index space must be element e of the product, and for a
  // reduction kernel a row must be one of the product's rows: then a block of the product's
  // rows is a range of the kernel's elements (or rows).
  const bool reduction = !reduce_dims.empty();
  if (reduction && compiler::folds_outer_dims(std::vector<int>(reduce_dims.begin(), reduce_dims.end()),
                                              static_cast<int>(shape.size()))) {
    return false;  // a column kernel needs every row of the product before any column is done
  }
  const int64_t row = product.size(-1);
  if (launch.rows * launch.row_size != product.numel() || (reduction && launch.row_size != row)) return false;
  const int ndim = static_cast<int>(launch.sizes.size());
  const int64_t* reads = launch.strides.data() + (outputs.size() + product_input) * ndim;
  int64_t step = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (reads[d] != step) return false;
    step *= launch.sizes[d];
  }
  const int64_t per_row = reduction ? 1 : row;  // kernel rows (or elements) per product row
  return product_with_epilogue(product, a, b, [entry, reduction, per_row, launch = std::move(launch)](int64_t begin, int64_t end) {
    run_rows(entry, reduction, launch, begin * per_row, end * per_row);
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
