#include "kernels/nn.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/floating.h"
#include "kernels/parallel.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {

void index_select(int64_t outer, int64_t self_dim, int64_t row_bytes, const char* self, const int64_t* index,
                  int64_t count, char* out) {
  for (int64_t i = 0; i < count; ++i) {
    if (index[i] < 0 || index[i] >= self_dim) {
      throw runtime::KernelError("index " + std::to_string(index[i]) + " is out of range for a dimension of size " +
                                 std::to_string(self_dim) + " (position " + std::to_string(i) + " of the index)");
    }
  }
  parallel_for(outer * count, std::max<int64_t>(1, 65536 / std::max<int64_t>(row_bytes, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t job = begin; job < end; ++job) {
      const int64_t o = job / count;
      const int64_t i = job % count;
      std::memcpy(out + job * row_bytes, self + (o * self_dim + index[i]) * row_bytes, static_cast<size_t>(row_bytes));
    }
  });
}

void embedding_backward(DType dtype, int64_t count, int64_t cols, const void* grad, const int64_t* index,
                        int64_t num_weights, int64_t padding_idx, void* grad_weight) {
  dispatch_floating(dtype, "this kernel", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* g = static_cast<const T*>(grad);
    T* gw = static_cast<T*>(grad_weight);
    for (int64_t i = 0; i < count; ++i) {
      if (index[i] < 0 || index[i] >= num_weights) {
        throw runtime::KernelError("embedding index " + std::to_string(index[i]) + " is out of range for " +
                                   std::to_string(num_weights) + " embeddings");
      }
    }
    // Each task owns a range of destination rows and adds into them, in index order, the
    // gradient rows that land there: deterministic, in a wider type for half types.
    parallel_for(num_weights, std::max<int64_t>(1, 65536 / std::max<int64_t>(cols, 1)), [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, A>) {
        std::fill(gw + begin * cols, gw + end * cols, T(0));
        for (int64_t i = 0; i < count; ++i) {
          const int64_t target = index[i];
          if (target < begin || target >= end || target == padding_idx) continue;
          T* row = gw + target * cols;
          const T* src = g + i * cols;
          for (int64_t c = 0; c < cols; ++c) row[c] += src[c];
        }
      } else {
        std::vector<int64_t> slot(static_cast<size_t>(end - begin), -1);  // row -> accumulator
        std::vector<A> acc;
        for (int64_t i = 0; i < count; ++i) {
          const int64_t target = index[i];
          if (target < begin || target >= end || target == padding_idx) continue;
          int64_t& at = slot[target - begin];
          if (at < 0) {
            at = static_cast<int64_t>(acc.size());
            acc.resize(acc.size() + static_cast<size_t>(cols), A(0));
          }
          A* row = acc.data() + at;
          const T* src = g + i * cols;
          for (int64_t c = 0; c < cols; ++c) row[c] += up(src[c]);
        }
        for (int64_t r = begin; r < end; ++r) {
          const int64_t at = slot[r - begin];
          T* dst = gw + r * cols;
          for (int64_t c = 0; c < cols; ++c) dst[c] = down<T>(at < 0 ? A(0) : acc[at + c]);
        }
      }
    });
  });
}

namespace {

// Bag b's entries: [offsets[b], end_b).
int64_t bag_end(const EmbeddingBagShape& shape, const int64_t* offsets, int64_t b) {
  return b + 1 < shape.num_offsets ? offsets[b + 1] : shape.count;
}

void check_bags(const EmbeddingBagShape& shape, const int64_t* indices, const int64_t* offsets) {
  if (shape.num_offsets > 0 && offsets[0] != 0) {
    throw runtime::KernelError("offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
                               "position 0. However, got " + std::to_string(offsets[0]));
  }
  for (int64_t b = 0; b < shape.num_offsets; ++b) {
    const int64_t next = b + 1 < shape.num_offsets ? offsets[b + 1] : shape.count;
    if (offsets[b] > shape.count) {
      throw runtime::KernelError("offsets[" + std::to_string(b) + "] can not be greater than input's length " +
                                 std::to_string(shape.count) + " but got " + std::to_string(offsets[b]));
    }
    if (b + 1 < shape.num_offsets && next < offsets[b]) {
      throw runtime::KernelError("offsets must be non-decreasing, but offsets[" + std::to_string(b + 1) + "] = " +
                                 std::to_string(next) + " < offsets[" + std::to_string(b) + "] = " +
                                 std::to_string(offsets[b]));
    }
  }
  for (int64_t i = 0; i < shape.count; ++i) {
    if (indices[i] < 0 || indices[i] >= shape.num_weights) {
      throw runtime::KernelError("Index " + std::to_string(i) + " of input takes value " + std::to_string(indices[i]) +
                                 " which is not in the valid range [0, " + std::to_string(shape.num_weights) + ")");
    }
  }
}

}  // namespace

void embedding_bag(DType dtype, BagMode mode, const EmbeddingBagShape& shape, const void* weight,
                   const int64_t* indices, const int64_t* offsets, const void* per_sample_weights,
                   int64_t padding_idx, void* out, int64_t* offset2bag, int64_t* bag_size, int64_t* max_indices) {
  check_bags(shape, indices, offsets);
  const int64_t dim = shape.dim;
  std::fill(offset2bag, offset2bag + shape.count, shape.num_bags);  // entries past a closing offset
  for (int64_t b = 0; b < shape.num_bags; ++b) {
    for (int64_t i = offsets[b]; i < bag_end(shape, offsets, b); ++i) offset2bag[i] = b;
  }
  dispatch_floating(dtype, "embedding_bag", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* w = static_cast<const T*>(weight);
    const T* scale = static_cast<const T*>(per_sample_weights);
    T* o = static_cast<T*>(out);
    parallel_for(shape.num_bags, std::max<int64_t>(1, 16384 / std::max<int64_t>(dim, 1)), [&](int64_t begin, int64_t end) {
      std::vector<A> acc(static_cast<size_t>(dim));
      for (int64_t b = begin; b < end; ++b) {
        std::fill(acc.begin(), acc.end(), A(0));
        int64_t* arg = mode == BagMode::kMax ? max_indices + b * dim : nullptr;
        if (arg) std::fill(arg, arg + dim, int64_t{0});
        int64_t size = 0;
        for (int64_t i = offsets[b]; i < bag_end(shape, offsets, b); ++i) {
          const int64_t row = indices[i];
          if (row == padding_idx) continue;
          const T* src = w + row * dim;
          if (mode == BagMode::kMax) {
            for (int64_t d = 0; d < dim; ++d) {
              const A v = up(src[d]);
              if (size == 0 || v > acc[d]) {  // the first largest, as CPU PyTorch keeps it
                acc[d] = v;
                arg[d] = row;
              }
            }
          } else if (scale) {
            const A s = up(scale[i]);
            for (int64_t d = 0; d < dim; ++d) acc[d] += s * up(src[d]);
          } else {
            for (int64_t d = 0; d < dim; ++d) acc[d] += up(src[d]);
          }
          ++size;
        }
        bag_size[b] = size;
        const A divisor = mode == BagMode::kMean && size > 0 ? A(size) : A(1);
        for (int64_t d = 0; d < dim; ++d) o[b * dim + d] = down<T>(acc[d] / divisor);
      }
    });
  });
  for (int64_t b = shape.num_bags; b < shape.num_offsets; ++b) bag_size[b] = 0;
}

void embedding_bag_backward(DType dtype, BagMode mode, const EmbeddingBagShape& shape, const void* grad,
                            const int64_t* indices, const int64_t* offset2bag, const int64_t* bag_size,
                            const int64_t* max_indices, const void* per_sample_weights, int64_t padding_idx,
                            void* grad_weight) {
  const int64_t dim = shape.dim;
  dispatch_floating(dtype, "embedding_bag backward", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* g = static_cast<const T*>(grad);
    const T* scale = static_cast<const T*>(per_sample_weights);
    T* gw = static_cast<T*>(grad_weight);
    // Each task owns a range of destination rows and adds into them, in entry order, what lands
    // there: deterministic, accumulated in float for half types.
    parallel_for(shape.num_weights, std::max<int64_t>(1, 65536 / std::max<int64_t>(dim, 1)), [&](int64_t begin, int64_t end) {
      std::vector<A> acc(static_cast<size_t>((end - begin) * dim), A(0));
      if (mode == BagMode::kMax) {
        for (int64_t b = 0; b < shape.num_bags; ++b) {
          if (bag_size[b] == 0) continue;
          for (int64_t d = 0; d < dim; ++d) {
            const int64_t row = max_indices[b * dim + d];
            if (row >= begin && row < end) acc[(row - begin) * dim + d] += up(g[b * dim + d]);
          }
        }
      } else {
        for (int64_t i = 0; i < shape.count; ++i) {
          const int64_t row = indices[i];
          if (row < begin || row >= end || row == padding_idx) continue;
          const int64_t b = offset2bag[i];
          if (b >= shape.num_bags) continue;  // past a closing offset
          A s = scale ? up(scale[i]) : A(1);
          if (mode == BagMode::kMean) s /= A(bag_size[b]);
          A* dst = acc.data() + (row - begin) * dim;
          const T* src = g + b * dim;
          for (int64_t d = 0; d < dim; ++d) dst[d] += s * up(src[d]);
        }
      }
      for (int64_t k = 0; k < (end - begin) * dim; ++k) gw[begin * dim + k] = down<T>(acc[k]);
    });
  });
}

void embedding_bag_per_sample_weights_backward(DType dtype, const EmbeddingBagShape& shape, const void* grad,
                                               const void* weight, const int64_t* indices,
                                               const int64_t* offset2bag, int64_t padding_idx, void* out) {
  const int64_t dim = shape.dim;
  dispatch_floating(dtype, "embedding_bag per-sample-weights backward", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* g = static_cast<const T*>(grad);
    const T* w = static_cast<const T*>(weight);
    T* o = static_cast<T*>(out);
    parallel_for(shape.count, std::max<int64_t>(1, 16384 / std::max<int64_t>(dim, 1)), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t b = offset2bag[i];
        if (indices[i] == padding_idx || b >= shape.num_bags) {
          o[i] = T(0);
          continue;
        }
        A dot = 0;
        for (int64_t d = 0; d < dim; ++d) dot += up(g[b * dim + d]) * up(w[indices[i] * dim + d]);
        o[i] = down<T>(dot);
      }
    });
  });
}

}  // namespace torchneuron::kernels
