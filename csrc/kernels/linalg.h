// Dense linear algebra over contiguous row-major batches: triangular solves and pairwise
// distances.
#pragma once

#include <cstdint>

#include "kernels/strided.h"

namespace torchneuron::kernels {

// Solves A X = B in place of B for each of `batch` pairs: A [batch, n, n] lower (or upper)
// triangular, only that triangle read (its diagonal taken as ones when `unitriangular`);
// B / X [batch, n, k]. Substitution row by row, each row's sums over the earlier solved rows
// in order of j; floating dtypes (half types compute in float).
void triangular_solve(DType dtype, int64_t batch, int64_t n, int64_t k, bool upper, bool unitriangular,
                      const void* a, void* b);

// cdist: out[b, i, j] = the p-norm of x1[b, i, :] - x2[b, j, :] (x1 [batch, rows1, dim], x2
// [batch, rows2, dim], out [batch, rows1, rows2]); p = 0 counts the differing coordinates, p =
// inf takes the largest difference. Floating dtypes, half types in float.
void pairwise_distance(DType dtype, int64_t batch, int64_t rows1, int64_t rows2, int64_t dim, double p, const void* x1,
                       const void* x2, void* out);
// The gradient for x1 ([batch, rows1, dim]) from grad and dist ([batch, rows1, rows2]): CPU
// PyTorch's formulas, 0 where a distance is 0.
void pairwise_distance_backward(DType dtype, int64_t batch, int64_t rows1, int64_t rows2, int64_t dim, double p,
                                const void* grad, const void* x1, const void* x2, const void* dist, void* grad_x1);

}  // namespace torchneuron::kernels
