// Dense linear algebra over contiguous batches: triangular solves and pairwise distances
// (row-major), and LU, Cholesky and QR factorizations, LU solves and inverses through LAPACK
// (OpenBLAS's, column-major matrices; float32 and float64); singular value and symmetric
// eigenvalue decompositions (linalg_spectral.cpp; complex dtypes too).
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

// Whether the LAPACK kernels take this dtype.
bool lapack_supported(DType dtype);

// LU factorization with partial pivoting (getrf) of `batch` column-major m x n matrices in
// place: pivots [batch, min(m, n)] (1-based rows, LAPACK's and torch's convention), info
// [batch] (0, or k where U[k-1, k-1] is exactly zero). Matrices are split over the compute pool.
void lu_factor(DType dtype, int64_t batch, int64_t m, int64_t n, void* a, int32_t* pivots, int32_t* info);

// Solves A X = B (or A^T X = B when `transpose`) in place of B from getrf's factors: lu
// [lu_batch, n, n], B [batch, n, k], both column-major; matrix i of B uses LU i % lu_batch.
void lu_solve(DType dtype, int64_t batch, int64_t lu_batch, int64_t n, int64_t k, const void* lu, const int32_t* pivots,
              bool transpose, void* b);

// A^-1 from getrf's factors in place (getri); info as getrf's.
void lu_inverse(DType dtype, int64_t batch, int64_t n, void* lu, const int32_t* pivots, int32_t* info);

// Cholesky factorization (potrf) of `batch` column-major symmetric n x n matrices in place, from
// their lower (or upper) triangle; the other triangle is zeroed. info: 0, or k where the
// leading minor of order k is not positive-definite.
void cholesky(DType dtype, int64_t batch, int64_t n, bool upper, void* a, int32_t* info);

// Householder QR (geqrf) of `batch` column-major m x n matrices in place: R in the upper
// triangle. When q is not null, Q's first q_cols columns (k = min(m, n) for the reduced form,
// m for the complete one) are formed there (orgqr), column-major m x q_cols per matrix.
void qr(DType dtype, int64_t batch, int64_t m, int64_t n, void* a, void* q, int64_t q_cols);

// Singular value decomposition (gesdd) of `batch` column-major m x n matrices, destroyed: s
// [batch, k] (k = min(m, n), real, descending); with vectors, u [batch] column-major m x k (kFull:
// m x m) and vt [batch] column-major k x n (kFull: n x n), else u and vt unused. info [batch]: 0,
// > 0 where it did not converge, -4 where the matrix has a NaN or infinity (not decomposed).
// Float and complex dtypes; m, n > 0.
enum class SvdVectors { kNone, kReduced, kFull };
void svd(DType dtype, int64_t batch, int64_t m, int64_t n, SvdVectors vectors, void* a, void* s, void* u, void* vt,
         int32_t* info);

// Eigenvalues (ascending, real) of `batch` column-major symmetric / Hermitian n x n matrices
// (syevd / heevd) read from their lower (or upper) triangle, into w [batch, n]; with `vectors`, a
// is overwritten by the orthonormal eigenvectors (columns). info as svd's.
void eigh(DType dtype, int64_t batch, int64_t n, bool upper, bool vectors, void* a, void* w, int32_t* info);

// The row permutation getrf's pivots [batch, k] (1-based) describe, as permutation [batch, m]:
// A = P L U with P[permutation[i], i] = 1. Throws KernelError for a pivot outside [1, m].
void lu_permutation(int64_t batch, int64_t m, int64_t k, const int32_t* pivots, int64_t* permutation);

}  // namespace torchneuron::kernels
