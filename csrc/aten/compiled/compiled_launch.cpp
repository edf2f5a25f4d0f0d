#include "aten/compiled/compiled_launch.h"

#include <ATen/ExpandUtils.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mm.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>

#include "aten/ops/native_ops.h"
#include "aten/device/neuron_tensor.h"
#include "compiler/artifact.h"
#include "compiler/codegen.h"
#include "compiler/passes.h"
#include "kernels/parallel.h"

namespace torchneuron::aten {

namespace {

std::atomic<int64_t> fused_prologues{0}, fused_epilogues{0}, foreach_in_place{0};  // see fused_launches

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
                     std::vector<int64_t>& strides, bool host_scalars) {
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
    // (A foreach launch copies 0-dim host tensors' values into the job: `host_scalars`.)
    TORCH_CHECK(in.device() == outputs[0].device() || (host_scalars && in.is_cpu() && in.dim() == 0),
                "compiled kernel: expected every input on ", outputs[0].device(), ", got one on ", in.device());
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
               const std::vector<int64_t>& shape, const std::vector<int64_t>& reduce_dims, bool host_scalars = false) {
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
  operand_strides(outputs, inputs, shape, reduced, launch.data, strides, host_scalars);
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

void check_kernel_entry(uintptr_t entry, const char* op) {
  TORCH_CHECK(compiler::is_artifact_entry(entry), op, ": ", entry,
              " is not the entry point of a loaded torch.compile or NKI artifact. These launch ops are "
              "torchneuron's own; call the compiled function or NKI kernel instead.");
}

void launch_fused_kernel(uintptr_t entry, const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                         const std::vector<int64_t>& shape) {
  check_kernel_entry(entry, "torchneuron::launch_fused");
  Launch launch = prepare(outputs, inputs, shape, {});
  if (launch.rows == 0) return;
  enqueue_copy(outputs[0], "torchneuron::compiled_kernel", {&outputs[0]}, [entry, launch = std::move(launch)] {
    kernels::parallel_for(launch.rows, 32768, [&](int64_t begin, int64_t end) { run_rows(entry, false, launch, begin, end); });
  });
}

void launch_fused_reduction(uintptr_t entry, const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                            const std::vector<int64_t>& shape, const std::vector<int64_t>& reduce_dims) {
  check_kernel_entry(entry, "torchneuron::launch_fused_reduction");
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

namespace {

// The bytes a strided tensor spans.
std::pair<uintptr_t, uintptr_t> byte_range(const at::Tensor& t) {
  const auto begin = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return {begin, begin + static_cast<uintptr_t>((last + 1) * static_cast<int64_t>(t.element_size()))};
}

bool same_view(const at::Tensor& a, const at::Tensor& b) {
  return a.const_data_ptr() == b.const_data_ptr() && a.sizes().equals(b.sizes()) && a.strides().equals(b.strides()) &&
         a.dtype() == b.dtype();
}

// Whether a foreach kernel can write targets[k][i] as its outputs: each is a dense tensor of its
// output's dtype, and its memory meets no operand of another index (the kernel runs index by
// index, where the ops it fuses ran list by list), nor one of its own index other than an input
// it is exactly (read and written element by element).
bool targets_usable(const std::vector<std::vector<at::Tensor>>& inputs,
                    const std::vector<std::vector<at::Tensor>>& targets, const std::vector<c10::ScalarType>& dtypes,
                    size_t count) {
  struct Range {
    uintptr_t begin, end;
    int64_t index;  // -1: read at every index
    const at::Tensor* tensor;
    bool written;
  };
  std::vector<Range> ranges;
  for (size_t k = 0; k < targets.size(); ++k) {
    if (targets[k].empty()) continue;
    if (targets[k].size() != count) return false;
    for (size_t i = 0; i < count; ++i) {
      const at::Tensor& t = targets[k][i];
      if (!t.defined() || t.scalar_type() != dtypes[k] || !t.is_non_overlapping_and_dense() || t.is_cpu()) return false;
      if (t.numel() == 0) continue;
      const auto [begin, end] = byte_range(t);
      ranges.push_back({begin, end, static_cast<int64_t>(i), &t, true});
    }
  }
  if (ranges.empty()) return false;
  for (const auto& list : inputs) {
    for (size_t i = 0; i < list.size(); ++i) {
      const at::Tensor& t = list[i];
      if (t.is_cpu() || t.numel() == 0) continue;  // host scalars travel by value
      const auto [begin, end] = byte_range(t);
      ranges.push_back({begin, end, list.size() == 1 ? -1 : static_cast<int64_t>(i), &t, false});
    }
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  std::vector<const Range*> open;  // ranges that may still meet later ones
  for (const Range& r : ranges) {
    open.erase(std::remove_if(open.begin(), open.end(), [&](const Range* o) { return o->end <= r.begin; }), open.end());
    for (const Range* o : open) {
      if (!o->written && !r.written) continue;
      const bool elementwise = o->index == r.index && o->index >= 0 && same_view(*o->tensor, *r.tensor) &&
                               !(o->written && r.written);
      if (!elementwise) return false;
    }
    open.push_back(&r);
  }
  return true;
}

}  // namespace

std::vector<std::vector<at::Tensor>> launch_fused_foreach(uintptr_t entry,
                                                          const std::vector<std::vector<at::Tensor>>& inputs,
                                                          const std::vector<c10::ScalarType>& dtypes,
                                                          const std::vector<std::vector<at::Tensor>>& targets) {
  TORCH_CHECK(!inputs.empty() && !dtypes.empty(), "compiled foreach kernel: expected inputs and outputs");
  check_kernel_entry(entry, "compiled foreach kernel");
  size_t count = 1;
  for (const auto& list : inputs) count = std::max(count, list.size());
  for (const auto& list : inputs) {
    TORCH_CHECK(list.size() == count || list.size() == 1, "compiled foreach kernel: lists of ", list.size(), " and ",
                count, " tensors");
  }
  // Each index's operands, result size and reference input (a dense one of the most dims).
  // A host vector (one 1-D CPU tensor of a value per index, as an optimizer's stacked step
  // counts) stands in as a 0-dim tensor; its values are copied below.
  std::vector<const at::Tensor*> host_vectors(inputs.size(), nullptr);
  std::vector<at::Tensor> stand_ins(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    const at::Tensor& t = inputs[k][0];
    if (inputs[k].size() == 1 && t.is_cpu() && t.dim() == 1) {
      TORCH_CHECK(t.numel() == static_cast<int64_t>(count), "compiled foreach kernel: ", t.numel(),
                  " host values for lists of ", count, " tensors");
      host_vectors[k] = &t;
      stand_ins[k] = t.select(0, 0);
    }
  }
  std::vector<std::vector<at::Tensor>> at_index(count, std::vector<at::Tensor>(inputs.size()));
  std::vector<std::vector<int64_t>> shapes(count);
  std::vector<const at::Tensor*> references(count, nullptr);
  for (size_t i = 0; i < count; ++i) {
    for (size_t k = 0; k < inputs.size(); ++k) {
      const at::Tensor& t = at_index[i][k] =
          host_vectors[k] ? stand_ins[k] : inputs[k].size() == 1 ? inputs[k][0] : inputs[k][i];
      if (t.is_cpu() && t.dim() == 0) continue;
      shapes[i] = at::infer_size(shapes[i], t.sizes());
      if (references[i] == nullptr || t.dim() > references[i]->dim()) references[i] = &t;
    }
    TORCH_CHECK(references[i] != nullptr, "compiled foreach kernel: index ", i, " has no device tensor");
  }
  bool in_place = !targets.empty() && targets_usable(inputs, targets, dtypes, count);
  for (size_t k = 0; k < targets.size() && in_place; ++k) {
    for (size_t i = 0; i < targets[k].size() && in_place; ++i) {
      in_place = targets[k][i].sizes().equals(shapes[i]) && targets[k][i].device() == references[i]->device();
    }
  }
  if (in_place) foreach_in_place.fetch_add(1, std::memory_order_relaxed);
  // Host scalars' values, copied now: the kernel runs later, and reads device memory only. Slots
  // of 8 bytes, reserved up front so that pointers into them stay valid.
  auto scalars = std::make_shared<std::vector<int64_t>>();
  scalars->reserve(count * inputs.size());
  std::vector<std::vector<at::Tensor>> outputs(dtypes.size());
  std::vector<Launch> launches;
  launches.reserve(count);
  std::vector<at::Tensor> out(dtypes.size());
  for (size_t i = 0; i < count; ++i) {
    const std::vector<at::Tensor>& in = at_index[i];
    const at::Tensor& reference = *references[i];
    for (size_t k = 0; k < dtypes.size(); ++k) {
      if (in_place && !targets[k].empty()) {
        out[k] = targets[k][i];
      } else {
        // Eager mode's results keep a dense input's layout (TensorIterator), others are row-major.
        out[k] = reference.sizes().equals(shapes[i]) && reference.is_non_overlapping_and_dense()
                     ? at::empty_like(reference, reference.options().dtype(dtypes[k]))
                     : at::empty(shapes[i], reference.options().dtype(dtypes[k]));
      }
      outputs[k].push_back(out[k]);
    }
    Launch launch = prepare(out, in, shapes[i], {}, /*host_scalars=*/true);
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (!in[k].is_cpu()) continue;
      const char* value = static_cast<const char*>(in[k].const_data_ptr());
      if (host_vectors[k]) value += static_cast<int64_t>(i) * host_vectors[k]->stride(0) * in[k].element_size();
      scalars->emplace_back(0);
      std::memcpy(&scalars->back(), value, in[k].element_size());
      launch.data[dtypes.size() + k] = reinterpret_cast<char*>(&scalars->back());
    }
    if (launch.rows > 0) launches.push_back(std::move(launch));
  }
  if (launches.empty()) return outputs;
  // Pieces of the index lists that one parallel loop shares out, as the eager foreach kernels do.
  struct Piece {
    size_t launch;
    int64_t begin, end;
  };
  constexpr int64_t kPiece = 32768;
  std::vector<Piece> pieces;
  for (size_t l = 0; l < launches.size(); ++l) {
    for (int64_t begin = 0; begin < launches[l].rows; begin += kPiece) {
      pieces.push_back({l, begin, std::min(begin + kPiece, launches[l].rows)});
    }
  }
  const at::Tensor& first = outputs[0][0];
  enqueue_copy(first, "torchneuron::compiled_foreach_kernel", {&first},
               [entry, scalars, launches = std::move(launches), pieces = std::move(pieces)] {
                 kernels::parallel_for(static_cast<int64_t>(pieces.size()), 1, [&](int64_t begin, int64_t end) {
                   for (int64_t p = begin; p < end; ++p) {
                     run_rows(entry, false, launches[pieces[p].launch], pieces[p].begin, pieces[p].end);
                   }
                 });
               });
  return outputs;
}

void launch_fused(const FusedKernel& kernel) {
  if (kernel.reduce_dims.empty()) {
    launch_fused_kernel(kernel.entry, kernel.outputs, kernel.inputs, kernel.shape);
  } else {
    launch_fused_reduction(kernel.entry, kernel.outputs, kernel.inputs, kernel.shape, kernel.reduce_dims);
  }
}

namespace {

using RowHook = std::function<void(int64_t, int64_t)>;

bool shares_memory(const at::Tensor& x, const std::vector<at::Tensor>& tensors) {
  return std::any_of(tensors.begin(), tensors.end(),
                     [&](const at::Tensor& t) { return t.defined() && x.storage().is_alias_of(t.storage()); });
}

bool any_shares_memory(const std::vector<at::Tensor>& xs, const std::vector<at::Tensor>& tensors) {
  return std::any_of(xs.begin(), xs.end(), [&](const at::Tensor& x) { return shares_memory(x, tensors); });
}

// Whether element e of the launch's index space is element e of operand `k`'s memory, over its
// first `dims` dims (the kept dims of a reduction's output, which steps 0 through the folded ones).
bool in_index_order(const Launch& launch, size_t k, int dims) {
  const int ndim = static_cast<int>(launch.sizes.size());
  const int64_t* strides = launch.strides.data() + k * ndim;
  int64_t step = 1;
  for (int d = dims - 1; d >= 0; --d) {
    if (strides[d] != step) return false;
    step *= launch.sizes[d];
  }
  return true;
}

// The kernel prepared to run on blocks of `matrix`'s rows, `matrix` being operand `k` of the
// launch (outputs, then inputs) in its memory order: a block of rows is then a range of the
// kernel's elements or, for a row kernel, of its rows, when they are the matrix's or when the
// matrix is the reduced output (a row of the kernel per element). Empty when that does not hold.
RowHook rows_of_matrix(const FusedKernel& kernel, size_t k, const at::Tensor& matrix) {
  const bool reduction = !kernel.reduce_dims.empty();
  if (reduction && compiler::folds_outer_dims(std::vector<int>(kernel.reduce_dims.begin(), kernel.reduce_dims.end()),
                                              static_cast<int>(kernel.shape.size()))) {
    return {};  // a column kernel needs every row before any column is done
  }
  Launch launch = prepare(kernel.outputs, kernel.inputs, kernel.shape, kernel.reduce_dims);
  const int ndim = static_cast<int>(launch.sizes.size());
  const int64_t row = matrix.size(-1);
  int64_t per_row = 0;  // kernel rows (or elements) per matrix row
  if (launch.rows * launch.row_size == matrix.numel() && (!reduction || launch.row_size == row) &&
      in_index_order(launch, k, ndim)) {
    per_row = reduction ? 1 : row;
  } else if (reduction && k < kernel.outputs.size() && launch.rows == matrix.numel() &&
             in_index_order(launch, k, ndim - launch.inner_ndim)) {
    per_row = row;
  } else {
    return {};
  }
  return [entry = kernel.entry, reduction, per_row, launch = std::move(launch)](int64_t begin, int64_t end) {
    run_rows(entry, reduction, launch, begin * per_row, end * per_row);
  };
}

// The prologue as a function of a's row blocks: one of its outputs must be `a` itself.
RowHook prologue_rows(const FusedKernel& kernel, const at::Tensor& a, const at::Tensor& b) {
  if (kernel.shape.size() > 16 || a.dim() < 2 || !a.is_contiguous() || any_shares_memory(kernel.outputs, {b})) {
    return {};  // b is read whole by every block
  }
  for (size_t k = 0; k < kernel.outputs.size(); ++k) {
    const at::Tensor& out = kernel.outputs[k];
    if (out.data_ptr() == a.data_ptr() && out.storage().is_alias_of(a.storage())) return rows_of_matrix(kernel, k, a);
  }
  return {};
}

// The epilogue as a function of the product's row blocks.
RowHook epilogue_rows(const FusedKernel& kernel, int product_input, const at::Tensor& product, const at::Tensor& a,
                      const at::Tensor& b) {
  if (kernel.shape.size() > 16 || product_input < 0 || product_input >= static_cast<int>(kernel.inputs.size()) ||
      product.dim() < 2 || !product.is_contiguous() || kernel.inputs[product_input].data_ptr() != product.data_ptr()) {
    return {};
  }
  for (size_t k = 0; k < kernel.inputs.size(); ++k) {  // another view could read rows not yet computed
    if (static_cast<int>(k) != product_input && kernel.inputs[k].storage().is_alias_of(product.storage())) return {};
  }
  if (any_shares_memory(kernel.outputs, {a, b})) return {};  // other blocks may still read them
  return rows_of_matrix(kernel, kernel.outputs.size() + product_input, product);
}


void product_out(const at::Tensor& product, const at::Tensor& a, const at::Tensor& b) {
  if (product.dim() == 2) {
    at::mm_out(const_cast<at::Tensor&>(product), a, b);
  } else {
    at::bmm_out(const_cast<at::Tensor&>(product), a, b);
  }
}

}  // namespace

int launch_product_with_kernels(const at::Tensor& product, const at::Tensor& a, const at::Tensor& b,
                                const FusedKernel* prologue, const FusedKernel* epilogue, int product_input) {
  RowHook before = prologue != nullptr ? prologue_rows(*prologue, a, b) : RowHook();
  RowHook after;
  // With both in one job, blocks of the two kernels run side by side: neither may read what
  // the other writes.
  if (epilogue != nullptr &&
      (!before || (!any_shares_memory(epilogue->inputs, prologue->outputs) &&
                   !any_shares_memory(epilogue->outputs, prologue->outputs) &&
                   !any_shares_memory(epilogue->outputs, prologue->inputs)))) {
    after = epilogue_rows(*epilogue, product_input, product, a, b);
  }
  if (prologue != nullptr && !before) launch_fused(*prologue);
  const int fused_kernels = static_cast<int>(static_cast<bool>(before)) + static_cast<int>(static_cast<bool>(after));
  const bool fused = fused_kernels > 0 && product_with_row_hooks(product, a, b, before, after);
  if (!fused) {
    if (before) launch_fused(*prologue);
    product_out(product, a, b);
  }
  if (epilogue != nullptr && !(fused && after)) launch_fused(*epilogue);
  if (!fused) return 0;
  if (before) fused_prologues.fetch_add(1, std::memory_order_relaxed);
  if (after) fused_epilogues.fetch_add(1, std::memory_order_relaxed);
  return fused_kernels;
}

FusedLaunches fused_launches() {
  return {fused_prologues.load(std::memory_order_relaxed), fused_epilogues.load(std::memory_order_relaxed),
          foreach_in_place.load(std::memory_order_relaxed)};
}

void reset_fused_launches() {
  fused_prologues = 0;
  fused_epilogues = 0;
  foreach_in_place = 0;
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
