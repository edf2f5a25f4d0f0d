#include "kernels/linalg.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/floating.h"
#include "kernels/gemm.h"
#include "kernels/parallel.h"
#include "runtime/errors.h"

// LAPACK (Fortran interface, from OpenBLAS).
extern "C" {
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void sgetrs_(const char* trans, const int* n, const int* nrhs, const float* a, const int* lda, const int* ipiv, float* b,
             const int* ldb, int* info, size_t trans_len);
void dgetrs_(const char* trans, const int* n, const int* nrhs, const double* a, const int* lda, const int* ipiv,
             double* b, const int* ldb, int* info, size_t trans_len);
void sgetri_(const int* n, float* a, const int* lda, const int* ipiv, float* work, const int* lwork, int* info);
void dgetri_(const int* n, double* a, const int* lda, const int* ipiv, double* work, const int* lwork, int* info);
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work, const int* lwork, int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work, const int* lwork,
             int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau, float* work,
             const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau, double* work,
             const int* lwork, int* info);
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info, size_t uplo_len);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t uplo_len);
}

namespace torchneuron::kernels {

// Tasks are (matrix, block of columns of B): columns are independent systems.
void triangular_solve(DType dtype, int64_t batch, int64_t n, int64_t k, bool upper, bool unitriangular, const void* a,
                      void* b) {
  dispatch_floating(dtype, "triangular_solve", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* matrices = static_cast<const T*>(a);
    T* rhs = static_cast<T*>(b);
    constexpr int64_t kColumns = 64;
    const int64_t blocks = (k + kColumns - 1) / kColumns;
    const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, n * n * std::min(k, kColumns)));
    parallel_for(batch * blocks, grain, [&](int64_t begin, int64_t end) {
      std::vector<A> solved(static_cast<size_t>(n * kColumns));  // X's rows for this block, in A's precision
      std::vector<A> row(kColumns);
      for (int64_t task = begin; task < end; ++task) {
        const int64_t m = task / blocks, c0 = (task % blocks) * kColumns, width = std::min(kColumns, k - c0);
        const T* mat = matrices + m * n * n;
        T* x = rhs + m * n * k + c0;
        for (int64_t step = 0; step < n; ++step) {
          const int64_t i = upper ? n - 1 - step : step;
          for (int64_t c = 0; c < width; ++c) row[c] = up(x[i * k + c]);
          // The solved rows j: below i when upper, above it when lower, taken in increasing j.
          const int64_t j0 = upper ? i + 1 : 0, j1 = upper ? n : i;
          for (int64_t j = j0; j < j1; ++j) {
            const A aij = up(mat[i * n + j]);
            const A* xj = solved.data() + j * kColumns;
            for (int64_t c = 0; c < width; ++c) row[c] -= aij * xj[c];
          }
          A* xi = solved.data() + i * kColumns;
          if (unitriangular) {
            for (int64_t c = 0; c < width; ++c) xi[c] = row[c];
          } else {
            const A diagonal = up(mat[i * n + i]);
            for (int64_t c = 0; c < width; ++c) xi[c] = row[c] / diagonal;
          }
          for (int64_t c = 0; c < width; ++c) x[i * k + c] = down<T>(xi[c]);
        }
      }
    });
  });
}

namespace {

// p's family: each sums a different function of |d| and finishes the sum differently.
enum class Norm { kZero, kOne, kTwo, kInf, kGeneral };

Norm norm_of(double p) {
  if (p == 0.0) return Norm::kZero;
  if (p == 1.0) return Norm::kOne;
  if (p == 2.0) return Norm::kTwo;
  if (std::isinf(p)) return Norm::kInf;
  return Norm::kGeneral;
}

}  // namespace

// One task per (matrix, row of x1): the distances to every row of x2, accumulated in the
// accumulation type (double for double).
void pairwise_distance(DType dtype, int64_t batch, int64_t rows1, int64_t rows2, int64_t dim, double p, const void* x1,
                       const void* x2, void* out) {
  dispatch_floating(dtype, "cdist", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* a = static_cast<const T*>(x1);
    const T* b = static_cast<const T*>(x2);
    T* d = static_cast<T*>(out);
    const Norm norm = norm_of(p);
    const A power = static_cast<A>(p);
    parallel_for(batch * rows1, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, rows2 * dim)), [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t m = task / rows1;
        const T* u = a + task * dim;
        for (int64_t j = 0; j < rows2; ++j) {
          const T* v = b + (m * rows2 + j) * dim;
          A total = 0;
          for (int64_t k = 0; k < dim; ++k) {
            const A diff = std::abs(up(u[k]) - up(v[k]));
            switch (norm) {
              case Norm::kZero: total += diff != A(0) ? A(1) : A(0); break;
              case Norm::kOne: total += diff; break;
              case Norm::kTwo: total += diff * diff; break;
              case Norm::kInf: total = std::max(total, diff); break;
              case Norm::kGeneral: total += std::pow(diff, power); break;
            }
          }
          if (norm == Norm::kTwo) total = std::sqrt(total);
          if (norm == Norm::kGeneral) total = std::pow(total, A(1) / power);
          d[task * rows2 + j] = down<T>(total);
        }
      }
    });
  });
}

void pairwise_distance_backward(DType dtype, int64_t batch, int64_t rows1, int64_t rows2, int64_t dim, double p,
                                const void* grad, const void* x1, const void* x2, const void* dist, void* grad_x1) {
  dispatch_floating(dtype, "cdist_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* g = static_cast<const T*>(grad);
    const T* a = static_cast<const T*>(x1);
    const T* b = static_cast<const T*>(x2);
    const T* dd = static_cast<const T*>(dist);
    T* out = static_cast<T*>(grad_x1);
    const Norm norm = norm_of(p);
    const A power = static_cast<A>(p);
    parallel_for(batch * rows1, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, rows2 * dim)), [&](int64_t begin, int64_t end) {
      std::vector<A> sums(static_cast<size_t>(dim));
      for (int64_t task = begin; task < end; ++task) {
        const int64_t m = task / rows1;
        const T* u = a + task * dim;
        std::fill(sums.begin(), sums.end(), A(0));
        for (int64_t j = 0; j < rows2; ++j) {
          const A scale = up(g[task * rows2 + j]), distance = up(dd[task * rows2 + j]);
          if (norm == Norm::kZero || distance == A(0)) continue;
          const T* v = b + (m * rows2 + j) * dim;
          for (int64_t k = 0; k < dim; ++k) {
            const A diff = up(u[k]) - up(v[k]);
            const A sign = diff > A(0) ? A(1) : diff < A(0) ? A(-1) : A(0);
            switch (norm) {
              case Norm::kOne: sums[k] += sign * scale; break;
              case Norm::kTwo: sums[k] += diff * scale / distance; break;
              case Norm::kInf: sums[k] += std::abs(diff) == distance ? sign * scale : A(0); break;
              case Norm::kGeneral:
                if (power < A(1) && diff == A(0)) break;  // |d|^(p - 1) is infinite there; CPU gives 0
                sums[k] += sign * std::pow(std::abs(diff), power - A(1)) * scale / std::pow(distance, power - A(1));
                break;
              case Norm::kZero: break;
            }
          }
        }
        T* row = out + task * dim;
        for (int64_t k = 0; k < dim; ++k) row[k] = down<T>(sums[k]);
      }
    });
  });
}

namespace {

// LAPACK's dimensions are 32-bit.
int lapack_int(int64_t value, const char* what) {
  if (value > std::numeric_limits<int>::max()) {
    throw runtime::KernelError(std::string("linear algebra: ") + what + " is too large for LAPACK");
  }
  return static_cast<int>(value);
}

// Each LAPACK call runs on one thread (the compute pool splits the batch), so OpenBLAS's own
// threads stay off as for GEMMs.
template <typename F>
void dispatch_lapack(DType dtype, const char* name, F&& f) {
  configure_blas_threads();
  if (dtype == DType::kFloat32) return f(float{});
  if (dtype == DType::kFloat64) return f(double{});
  throw runtime::KernelError(std::string(name) + ": expected float32 or float64");
}

int64_t matrix_grain(int64_t n) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, n * n * n)); }

}  // namespace

bool lapack_supported(DType dtype) { return dtype == DType::kFloat32 || dtype == DType::kFloat64; }

void lu_factor(DType dtype, int64_t batch, int64_t m, int64_t n, void* a, int32_t* pivots, int32_t* info) {
  const int rows = lapack_int(m, "a matrix"), cols = lapack_int(n, "a matrix"), lead = std::max(rows, 1);
  const int64_t k = std::min(m, n);
  dispatch_lapack(dtype, "lu_factor", [&](auto tag) {
    using T = decltype(tag);
    T* matrices = static_cast<T*>(a);
    parallel_for(batch, matrix_grain(std::max(m, n)), [&](int64_t begin, int64_t end) {
      const BlasErrorsThrow errors_throw;  // a LAPACK parameter error throws KernelError
      for (int64_t i = begin; i < end; ++i) {
        int status = 0;
        if constexpr (std::is_same_v<T, float>) {
          sgetrf_(&rows, &cols, matrices + i * m * n, &lead, pivots + i * k, &status);
        } else {
          dgetrf_(&rows, &cols, matrices + i * m * n, &lead, pivots + i * k, &status);
        }
        info[i] = status;
      }
    });
  });
}

void lu_solve(DType dtype, int64_t batch, int64_t lu_batch, int64_t n, int64_t k, const void* lu, const int32_t* pivots,
              bool transpose, void* b) {
  const int order = lapack_int(n, "a matrix"), columns = lapack_int(k, "the right-hand side"), lead = std::max(order, 1);
  const char trans = transpose ? 'T' : 'N';
  dispatch_lapack(dtype, "lu_solve", [&](auto tag) {
    using T = decltype(tag);
    const T* factors = static_cast<const T*>(lu);
    T* rhs = static_cast<T*>(b);
    parallel_for(batch, matrix_grain(n), [&](int64_t begin, int64_t end) {
      const BlasErrorsThrow errors_throw;  // a LAPACK parameter error throws KernelError
      for (int64_t i = begin; i < end; ++i) {
        const int64_t j = i % lu_batch;
        int status = 0;
        if constexpr (std::is_same_v<T, float>) {
          sgetrs_(&trans, &order, &columns, factors + j * n * n, &lead, pivots + j * n, rhs + i * n * k, &lead, &status, 1);
        } else {
          dgetrs_(&trans, &order, &columns, factors + j * n * n, &lead, pivots + j * n, rhs + i * n * k, &lead, &status, 1);
        }
      }
    });
  });
}

void lu_inverse(DType dtype, int64_t batch, int64_t n, void* lu, const int32_t* pivots, int32_t* info) {
  const int order = lapack_int(n, "a matrix"), lead = std::max(order, 1);
  dispatch_lapack(dtype, "lu_inverse", [&](auto tag) {
    using T = decltype(tag);
    T* matrices = static_cast<T*>(lu);
    parallel_for(batch, matrix_grain(n), [&](int64_t begin, int64_t end) {
      const BlasErrorsThrow errors_throw;  // a LAPACK parameter error throws KernelError
      const int work_size = std::max(1, order * 64);
      std::vector<T> work(static_cast<size_t>(work_size));
      for (int64_t i = begin; i < end; ++i) {
        if (info[i] != 0) continue;  // singular: getri would divide by zero
        int status = 0;
        if constexpr (std::is_same_v<T, float>) {
          sgetri_(&order, matrices + i * n * n, &lead, pivots + i * n, work.data(), &work_size, &status);
        } else {
          dgetri_(&order, matrices + i * n * n, &lead, pivots + i * n, work.data(), &work_size, &status);
        }
        info[i] = status;
      }
    });
  });
}

void cholesky(DType dtype, int64_t batch, int64_t n, bool upper, void* a, int32_t* info) {
  const int order = lapack_int(n, "a matrix"), lead = std::max(order, 1);
  const char uplo = upper ? 'U' : 'L';
  dispatch_lapack(dtype, "cholesky", [&](auto tag) {
    using T = decltype(tag);
    T* matrices = static_cast<T*>(a);
    parallel_for(batch, matrix_grain(n), [&](int64_t begin, int64_t end) {
      const BlasErrorsThrow errors_throw;  // a LAPACK parameter error throws KernelError
      for (int64_t i = begin; i < end; ++i) {
        T* mat = matrices + i * n * n;
        int status = 0;
        if constexpr (std::is_same_v<T, float>) {
          spotrf_(&uplo, &order, mat, &lead, &status, 1);
        } else {
          dpotrf_(&uplo, &order, mat, &lead, &status, 1);
        }
        info[i] = status;
        // Column-major: element (r, c) at mat[c * n + r]; zero the triangle potrf leaves alone.
        for (int64_t c = 0; c < n; ++c) {
          for (int64_t r = 0; r < n; ++r) {
            if (upper ? r > c : r < c) mat[c * n + r] = T(0);
          }
        }
      }
    });
  });
}

void qr(DType dtype, int64_t batch, int64_t m, int64_t n, void* a, void* q, int64_t q_cols) {
  const int rows = lapack_int(m, "a matrix"), cols = lapack_int(n, "a matrix"), lead = std::max(rows, 1);
  const int reflectors = static_cast<int>(std::min(m, n)), q_columns = lapack_int(q_cols, "Q");
  dispatch_lapack(dtype, "qr", [&](auto tag) {
    using T = decltype(tag);
    T* matrices = static_cast<T*>(a);
    T* q_matrices = static_cast<T*>(q);
    parallel_for(batch, matrix_grain(std::max(m, n)), [&](int64_t begin, int64_t end) {
      const BlasErrorsThrow errors_throw;  // a LAPACK parameter error throws KernelError
      const int work_size = std::max(1, 64 * std::max(cols, q_columns));
      std::vector<T> tau(static_cast<size_t>(std::max(reflectors, 1))), work(static_cast<size_t>(work_size));
      for (int64_t i = begin; i < end; ++i) {
        T* mat = matrices + i * m * n;
        int status = 0;
        if constexpr (std::is_same_v<T, float>) {
          sgeqrf_(&rows, &cols, mat, &lead, tau.data(), work.data(), &work_size, &status);
        } else {
          dgeqrf_(&rows, &cols, mat, &lead, tau.data(), work.data(), &work_size, &status);
        }
        if (q_matrices == nullptr) continue;
        // The reflectors, then zero columns for the complete form's extra ones.
        T* qm = q_matrices + i * m * q_cols;
        const int64_t copied = std::min<int64_t>(n, q_cols);
        std::copy(mat, mat + copied * m, qm);
        std::fill(qm + copied * m, qm + q_cols * m, T(0));
        if constexpr (std::is_same_v<T, float>) {
          sorgqr_(&rows, &q_columns, &reflectors, qm, &lead, tau.data(), work.data(), &work_size, &status);
        } else {
          dorgqr_(&rows, &q_columns, &reflectors, qm, &lead, tau.data(), work.data(), &work_size, &status);
        }
      }
    });
  });
}

void lu_permutation(int64_t batch, int64_t m, int64_t k, const int32_t* pivots, int64_t* permutation) {
  for (int64_t b = 0; b < batch; ++b) {
    int64_t* rows = permutation + b * m;
    for (int64_t i = 0; i < m; ++i) rows[i] = i;
    for (int64_t i = 0; i < k; ++i) {
      const int64_t swap_with = static_cast<int64_t>(pivots[b * k + i]) - 1;
      if (swap_with < 0 || swap_with >= m) {
        throw runtime::KernelError("lu_unpack: pivots must be between 1 and LU.size(-2) = " + std::to_string(m) +
                                   " inclusive, got " + std::to_string(swap_with + 1));
      }
      std::swap(rows[i], rows[swap_with]);
    }
  }
}

}  // namespace torchneuron::kernels
