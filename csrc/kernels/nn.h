// Neural-network kernels over contiguous device buffers: softmax and log-softmax (forward and
// backward), layer norm (forward and backward), NLL loss (forward and backward), row gather
// (index_select / embedding) and its scatter-add backward, embedding_bag, and arange.
#pragma once

#include <cstdint>

#include "kernels/strided.h"

namespace torchneuron::kernels {

bool nn_supported(DType dtype);  // floating dtypes

// Tensors viewed as [outer, dim, inner], the softmax running along `dim`.
struct SoftmaxShape {
  int64_t outer = 1, dim = 1, inner = 1;
};
void softmax(DType dtype, SoftmaxShape shape, void* out, const void* in, bool log);
void softmax_backward(DType dtype, SoftmaxShape shape, void* grad_in, const void* grad_out,
                      const void* output, bool log);

// x: [rows, cols]; weight/bias: [cols] or null; mean/rstd: [rows]. All of `dtype`.
void layer_norm(DType dtype, int64_t rows, int64_t cols, double eps, const void* x, const void* weight,
                const void* bias, void* out, void* mean, void* rstd);
// Any of grad_x, grad_weight, grad_bias may be null when not wanted.
void layer_norm_backward(DType dtype, int64_t rows, int64_t cols, const void* grad_out, const void* x,
                         const void* mean, const void* rstd, const void* weight, void* grad_x,
                         void* grad_weight, void* grad_bias);

enum class Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };
// log_probs: [batch, classes, spatial] (spatial = 1 but for nll_loss2d's images); target: int64
// [batch, spatial]; weight: [classes] or null. Out: [batch, spatial] for kNone, else a scalar;
// total_weight: a scalar. Throws KernelError for a target that is neither a class nor
// ignore_index.
void nll_loss(DType dtype, int64_t batch, int64_t classes, int64_t spatial, const void* log_probs, const int64_t* target,
              const void* weight, Reduction reduction, int64_t ignore_index, void* out, void* total_weight);
void nll_loss_backward(DType dtype, int64_t batch, int64_t classes, int64_t spatial, const void* grad_out,
                       const int64_t* target, const void* weight, Reduction reduction, int64_t ignore_index,
                       const void* total_weight, void* grad_input);

// out[o, i, r] = self[o, index[i], r] for self [outer, self_dim, row] and out [outer, count, row],
// both contiguous, rows of `row_bytes`. Throws KernelError for an index outside [0, self_dim).
void index_select(int64_t outer, int64_t self_dim, int64_t row_bytes, const char* self, const int64_t* index,
                  int64_t count, char* out);
// grad_weight[index[i]] += grad[i] (rows of `cols`), skipping padding_idx; grad_weight zeroed first.
void embedding_backward(DType dtype, int64_t count, int64_t cols, const void* grad, const int64_t* index,
                        int64_t num_weights, int64_t padding_idx, void* grad_weight);

// embedding_bag: bag b reduces weight rows indices[offsets[b] .. end_b) (end_b the next offset,
// or count for the last bag when there is no closing offset) into out[b], skipping entries equal
// to padding_idx. kSum may scale each row by per_sample_weights[i]; kMean divides by the bag's
// non-padding count; kMax keeps, per column, the first largest value and its row in
// max_indices[b] (0 for an empty bag, whose output is 0). Writes offset2bag[i] (the bag of entry
// i; num_bags past a closing offset) and bag_size[b] (non-padding entries). weight [num_weights, dim] and out [num_bags, dim]
// contiguous; indices and offsets int64. Throws KernelError for offsets that do not start at 0,
// decrease or pass count, and for an index outside [0, num_weights).
enum class BagMode : int64_t { kSum = 0, kMean = 1, kMax = 2 };
struct EmbeddingBagShape {
  int64_t num_weights = 0, dim = 0;  // weight
  int64_t count = 0;                 // indices
  int64_t num_offsets = 0;           // offsets (num_bags, or num_bags + 1 with a closing offset)
  int64_t num_bags = 0;
};
void embedding_bag(DType dtype, BagMode mode, const EmbeddingBagShape& shape, const void* weight,
                   const int64_t* indices, const int64_t* offsets, const void* per_sample_weights,
                   int64_t padding_idx, void* out, int64_t* offset2bag, int64_t* bag_size, int64_t* max_indices);
// grad_weight [num_weights, dim] from grad [num_bags, dim] and the forward's offset2bag,
// bag_size and (kMax) max_indices: in index order per destination row, as embedding_backward.
void embedding_bag_backward(DType dtype, BagMode mode, const EmbeddingBagShape& shape, const void* grad,
                            const int64_t* indices, const int64_t* offset2bag, const int64_t* bag_size,
                            const int64_t* max_indices, const void* per_sample_weights, int64_t padding_idx,
                            void* grad_weight);
// grad_per_sample_weights[i] = grad[offset2bag[i]] . weight[indices[i]], 0 at padding entries.
void embedding_bag_per_sample_weights_backward(DType dtype, const EmbeddingBagShape& shape, const void* grad,
                                               const void* weight, const int64_t* indices,
                                               const int64_t* offset2bag, int64_t padding_idx, void* out);

// gather / scatter along `dim` over contiguous buffers. `index` (int64) has `index_sizes`, or
// with inner_broadcast only its entries up to `dim` (index_sizes[0..dim], the same for every
// position in the dims after dim); `data` (the gather source, the scatter destination) has
// `data_sizes`; the other side (gather output, scatter source) has index_sizes. Throw
// KernelError for an index outside the dim.
void gather(int ndim, const int64_t* index_sizes, const int64_t* index, bool inner_broadcast, int dim,
            const int64_t* data_sizes, int64_t element_bytes, const char* data, char* out);
// add = false: data[...index...] = src; add = true: data[...index...] += src (in index order).
void scatter(DType dtype, bool add, int ndim, const int64_t* index_sizes, const int64_t* index, bool inner_broadcast,
             int dim, const int64_t* data_sizes, const char* src, char* data);
// scatter_reduce's reductions of src into data[...index...], in index order as CPU PyTorch's
// loop: kSum (also mean's sums), kProd, kAmax and kAmin (a NaN in src wins, as on CPU).
enum class ScatterReduceOp : uint8_t { kSum, kProd, kAmax, kAmin };
void scatter_reduce(DType dtype, ScatterReduceOp op, int ndim, const int64_t* index_sizes, const int64_t* index,
                    bool inner_broadcast, int dim, const int64_t* data_sizes, const char* src, char* data);

// Inclusive cumulative sum or product along the middle axis of contiguous [outer, dim, inner]
// buffers; input and output dtypes may differ (integers accumulate in int64, floats in double).
enum class ScanOp : uint8_t { kSum, kProd };
void cumulative(ScanOp op, DType in_dtype, DType out_dtype, SoftmaxShape shape, const void* in, void* out);

// cummax / cummin along the middle axis: values and int64 indices of the running extremum, a
// later equal value taking over the index and a NaN taking over from anything (as on CPU).
void cumulative_extremum(DType dtype, bool is_max, SoftmaxShape shape, const void* in, void* values, int64_t* indices);

// logcumsumexp along the middle axis, accumulated in double (floating dtypes).
void log_cumulative_sum_exp(DType dtype, SoftmaxShape shape, const void* in, void* out);

// Counts of a contiguous `self` in `bins` equal bins over [min, max] (values outside are
// ignored, max falls in the last bin), written as `dtype` (the input's dtype) into out[bins].
void histc(DType dtype, int64_t numel, const void* self, int64_t bins, double min, double max, void* out);

// Copies the elements of a contiguous `self` whose contiguous bool `mask` is set, in order.
void masked_compact(int64_t numel, int64_t element_bytes, const char* self, const bool* mask, char* out);
// Writes the coordinates (int64, [count, ndim]) of the set entries of a contiguous bool mask.
void nonzero_coordinates(int ndim, const int64_t* sizes, const bool* mask, int64_t* out);

// out[i] = start + i * step, for a contiguous out of any real dtype.
void arange(DType dtype, int64_t count, double start, double step, int64_t int_start, int64_t int_step,
            void* out);

}  // namespace torchneuron::kernels
