#include "kernels/nn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/dtype_dispatch.h"
#include "kernels/half.h"
#include "kernels/parallel.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {

namespace {

[[noreturn]] void throw_index_out_of_bounds(int64_t target, int dim, int64_t size) {
  throw runtime::KernelError("index " + std::to_string(target) + " is out of bounds for dimension " +
                             std::to_string(dim) + " with size " + std::to_string(size));
}

// Calls visit(position in index order, offset into data in elements) for every index entry,
// over the compute pool. The entries are taken as [outer, K, inner] (the index dims before, at
// and after `dim`), and work is split over outer positions and ranges of inner ones, never over
// K: entries that can reach the same data element (they differ only along dim) stay on one
// thread, in index order, so that scatter-adds sum in the order CPU PyTorch does.
// inner_broadcast: `index` holds one entry per [outer, K] position, the same for all inner ones
// (an index expanded over the dims after `dim`, not materialized). runs_independent: no two
// entries write one place (a gather), so with inner_broadcast work splits over K too.
template <typename Visit>
void for_each_indexed(int ndim, const int64_t* index_sizes, const int64_t* index, bool inner_broadcast, int dim,
                      const int64_t* data_sizes, bool runs_independent, Visit&& visit) {
  int64_t data_strides[kMaxDims];
  int64_t stride = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    data_strides[d] = stride;
    stride *= data_sizes[d];
  }
  int64_t outer = 1, inner = 1;
  bool inner_matches = true;  // the index's inner dims are the data's: inner position i is offset i
  for (int d = 0; d < dim; ++d) outer *= index_sizes[d];
  for (int d = dim + 1; d < ndim; ++d) {
    inner *= index_sizes[d];
    inner_matches = inner_matches && index_sizes[d] == data_sizes[d];
  }
  const int64_t K = index_sizes[dim], limit = data_sizes[dim], target_stride = data_strides[dim];
  if (outer == 0 || K == 0 || inner == 0) return;
  std::vector<int64_t> inner_offsets;
  if (!inner_matches) {
    inner_offsets.resize(static_cast<size_t>(inner));
    int64_t coord[kMaxDims] = {};
    for (int64_t i = 0; i < inner; ++i) {
      int64_t offset = 0;
      for (int d = dim + 1; d < ndim; ++d) offset += coord[d] * data_strides[d];
      inner_offsets[i] = offset;
      for (int d = ndim - 1; d > dim; --d) {
        if (++coord[d] < index_sizes[d]) break;
        coord[d] = 0;
      }
    }
  }
  constexpr int64_t kTaskEntries = 8192;
  const int64_t inner_chunks = std::clamp<int64_t>(K * inner / kTaskEntries, 1, inner);
  const int64_t chunk = (inner + inner_chunks - 1) / inner_chunks;
  const int64_t tasks = outer * inner_chunks;
  const int64_t grain = std::max<int64_t>(1, kTaskEntries / (K * chunk));
  auto base_of = [&](int64_t o) {  // the data offset of outer position o
    int64_t base = 0;
    for (int64_t d = dim - 1, rest = o; d >= 0; --d) {
      base += (rest % index_sizes[d]) * data_strides[d];
      rest /= index_sizes[d];
    }
    return base;
  };
  // Entries [i0, i1) of the inner run at (o, k).
  auto visit_run = [&](int64_t o, int64_t k, int64_t base, int64_t i0, int64_t i1) {
    const int64_t first = (o * K + k) * inner;
    if (inner_broadcast) {
      const int64_t target = index[o * K + k];
      if (static_cast<uint64_t>(target) >= static_cast<uint64_t>(limit)) throw_index_out_of_bounds(target, dim, limit);
      const int64_t row = base + target * target_stride;
      for (int64_t i = i0; i < i1; ++i) visit(first + i, row + (inner_matches ? i : inner_offsets[i]));
      return;
    }
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t target = index[first + i];
      if (static_cast<uint64_t>(target) >= static_cast<uint64_t>(limit)) throw_index_out_of_bounds(target, dim, limit);
      visit(first + i, base + target * target_stride + (inner_matches ? i : inner_offsets[i]));
    }
  };
  std::exception_ptr failure;
  try {
    if (runs_independent && inner_broadcast && inner > 1) {
      // Each entry written once (a gather) and each run one data row: whole runs per task, read
      // and written in order. (Random entries of a dense index read columns in chunks instead:
      // the chunk's cache lines of data serve the next chunks.)
      parallel_for(outer * K, std::max<int64_t>(1, kTaskEntries / inner), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) visit_run(r / K, r % K, base_of(r / K), 0, inner);
      });
    } else {
      parallel_for(tasks, grain, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const int64_t o = t / inner_chunks, i0 = (t % inner_chunks) * chunk, i1 = std::min(inner, i0 + chunk);
          const int64_t base = base_of(o);
          if (inner == 1) {  // one run of K entries, data offsets base + target * stride (the
                             // inner dims are the index's size-1 dims, offset 0; it read "+ target"
                             // alone, right only when dim is the data's last)
            const int64_t* targets = index + o * K;
            bool bad = false;
            for (int64_t k = 0; k < K; ++k) bad |= static_cast<uint64_t>(targets[k]) >= static_cast<uint64_t>(limit);
            if (bad) throw_index_out_of_bounds(-1, dim, limit);  // the caller reports the first bad entry
            for (int64_t k = 0; k < K; ++k) visit(o * K + k, base + targets[k] * target_stride);
            continue;
          }
          for (int64_t k = 0; k < K; ++k) visit_run(o, k, base, i0, i1);
        }
      });
    }
  } catch (const runtime::KernelError&) {
    failure = std::current_exception();
  }
  if (failure) {  // report the first bad entry in index order, whichever thread met one first
    const int64_t numel = outer * K * (inner_broadcast ? 1 : inner);
    for (int64_t i = 0; i < numel; ++i) {
      if (static_cast<uint64_t>(index[i]) >= static_cast<uint64_t>(limit)) throw_index_out_of_bounds(index[i], dim, limit);
    }
    std::rethrow_exception(failure);
  }
}

}  // namespace

void gather(int ndim, const int64_t* index_sizes, const int64_t* index, bool inner_broadcast, int dim,
            const int64_t* data_sizes, int64_t element_bytes, const char* data, char* out) {
  // Fixed-size copies for the usual element sizes: a memcpy of a run-time size is a call.
  auto copy_as = [&](auto word) {
    using W = decltype(word);
    const W* from = reinterpret_cast<const W*>(data);
    W* to = reinterpret_cast<W*>(out);
    for_each_indexed(ndim, index_sizes, index, inner_broadcast, dim, data_sizes, true,
                     [&](int64_t i, int64_t offset) { to[i] = from[offset]; });
  };
  switch (element_bytes) {
    case 1: return copy_as(uint8_t{});
    case 2: return copy_as(uint16_t{});
    case 4: return copy_as(uint32_t{});
    case 8: return copy_as(uint64_t{});
    default:
      for_each_indexed(ndim, index_sizes, index, inner_broadcast, dim, data_sizes, true, [&](int64_t i, int64_t offset) {
        std::memcpy(out + i * element_bytes, data + offset * element_bytes, static_cast<size_t>(element_bytes));
      });
  }
}

void scatter(DType dtype, bool add, int ndim, const int64_t* index_sizes, const int64_t* index, bool inner_broadcast,
             int dim, const int64_t* data_sizes, const char* src, char* data) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* s = reinterpret_cast<const T*>(src);
    T* d = reinterpret_cast<T*>(data);
    for_each_indexed(ndim, index_sizes, index, inner_broadcast, dim, data_sizes, false, [&](int64_t i, int64_t offset) {
      if (!add) {
        d[offset] = s[i];
      } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        d[offset] = T(static_cast<float>(d[offset]) + static_cast<float>(s[i]));
      } else if constexpr (std::is_same_v<T, bool>) {
        d[offset] = d[offset] || s[i];
      } else {
        d[offset] = static_cast<T>(d[offset] + s[i]);
      }
    });
  };
  dispatch_real_dtype(dtype, "scatter", run);
}

void scatter_reduce(DType dtype, ScatterReduceOp op, int ndim, const int64_t* index_sizes, const int64_t* index,
                    bool inner_broadcast, int dim, const int64_t* data_sizes, const char* src, char* data) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      throw runtime::KernelError("scatter_reduce is not supported for bool");
    } else {
      using C = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;
      const T* s = reinterpret_cast<const T*>(src);
      T* d = reinterpret_cast<T*>(data);
      for_each_indexed(ndim, index_sizes, index, inner_broadcast, dim, data_sizes, false, [&](int64_t i, int64_t offset) {
        const C a = static_cast<C>(d[offset]);
        const C b = static_cast<C>(s[i]);
        C r = a;
        switch (op) {
          case ScatterReduceOp::kSum: r = static_cast<C>(a + b); break;
          case ScatterReduceOp::kProd: r = static_cast<C>(a * b); break;
          case ScatterReduceOp::kAmax:
          case ScatterReduceOp::kAmin:
            if constexpr (std::is_floating_point_v<C>) {
              if (std::isnan(b)) {
                r = b;
                break;
              }
            }
            r = op == ScatterReduceOp::kAmax ? std::max(a, b) : std::min(a, b);
            break;
        }
        d[offset] = static_cast<T>(r);
      });
    }
  };
  dispatch_real_dtype(dtype, "scatter_reduce", run);
}

}  // namespace torchneuron::kernels
