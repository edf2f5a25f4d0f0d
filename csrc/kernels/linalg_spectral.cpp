// Singular value and symmetric / Hermitian eigenvalue decompositions through LAPACK's
// divide-and-conquer drivers (gesdd, syevd / heevd; OpenBLAS's), on column-major matrices.
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/linalg.h"
#include "kernels/parallel.h"
#include "runtime/errors.h"

using complex64 = std::complex<float>;
using complex128 = std::complex<double>;

extern "C" {
void sgesdd_(const char* jobz, const int* m, const int* n, float* a, const int* lda, float* s, float* u, const int* ldu,
             float* vt, const int* ldvt, float* work, const int* lwork, int* iwork, int* info, size_t jobz_len);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s, double* u,
             const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork, int* iwork, int* info,
             size_t jobz_len);
void cgesdd_(const char* jobz, const int* m, const int* n, complex64* a, const int* lda, float* s, complex64* u,
             const int* ldu, complex64* vt, const int* ldvt, complex64* work, const int* lwork, float* rwork, int* iwork,
             int* info, size_t jobz_len);
void zgesdd_(const char* jobz, const int* m, const int* n, complex128* a, const int* lda, double* s, complex128* u,
             const int* ldu, complex128* vt, const int* ldvt, complex128* work, const int* lwork, double* rwork,
             int* iwork, int* info, size_t jobz_len);
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w, float* work,
             const int* lwork, int* iwork, const int* liwork, int* info, size_t jobz_len, size_t uplo_len);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
             const int* lwork, int* iwork, const int* liwork, int* info, size_t jobz_len, size_t uplo_len);
void cheevd_(const char* jobz, const char* uplo, const int* n, complex64* a, const int* lda, float* w, complex64* work,
             const int* lwork, float* rwork, const int* lrwork, int* iwork, const int* liwork, int* info,
             size_t jobz_len, size_t uplo_len);
void zheevd_(const char* jobz, const char* uplo, const int* n, complex128* a, const int* lda, double* w,
             complex128* work, const int* lwork, double* rwork, const int* lrwork, int* iwork, const int* liwork,
             int* info, size_t jobz_len, size_t uplo_len);
}

namespace torchneuron::kernels {
namespace {

int lapack_size(int64_t value) {
  if (value > std::numeric_limits<int>::max()) {
    throw runtime::KernelError("linear algebra: a matrix is too large for LAPACK");
  }
  return static_cast<int>(value);
}

template <typename F>
void dispatch_spectral(DType dtype, const char* name, F&& f) {
  configure_blas_threads();
  switch (dtype) {
    case DType::kFloat32: return f(float{});
    case DType::kFloat64: return f(double{});
    case DType::kComplex64: return f(complex64{});
    case DType::kComplex128: return f(complex128{});
    default: throw runtime::KernelError(std::string(name) + ": expected a float or complex dtype");
  }
}

template <typename T>
struct RealOf {
  using type = T;
};
template <typename T>
struct RealOf<std::complex<T>> {
  using type = T;
};

template <typename T>
constexpr bool kComplex = !std::is_same_v<T, typename RealOf<T>::type>;

// A workspace size LAPACK reported back in a work array's first element.
template <typename T>
int reported_size(const T& value) {
  if constexpr (kComplex<T>) {
    return static_cast<int>(value.real());
  } else {
    return static_cast<int>(value);
  }
}

// One gesdd call (lwork -1 asks for the workspace size).
template <typename T, typename R = typename RealOf<T>::type>
void gesdd(char jobz, int m, int n, T* a, int lda, R* s, T* u, int ldu, T* vt, int ldvt, T* work, int lwork, R* rwork,
           int* iwork, int* info) {
  if constexpr (std::is_same_v<T, float>) {
    sgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, info, 1);
  } else if constexpr (std::is_same_v<T, double>) {
    dgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, info, 1);
  } else if constexpr (std::is_same_v<T, complex64>) {
    cgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, rwork, iwork, info, 1);
  } else {
    zgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, rwork, iwork, info, 1);
  }
}

template <typename T, typename R = typename RealOf<T>::type>
void heevd(char jobz, char uplo, int n, T* a, int lda, R* w, T* work, int lwork, R* rwork, int lrwork, int* iwork,
           int liwork, int* info) {
  if constexpr (std::is_same_v<T, float>) {
    ssyevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, info, 1, 1);
  } else if constexpr (std::is_same_v<T, double>) {
    dsyevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, info, 1, 1);
  } else if constexpr (std::is_same_v<T, complex64>) {
    cheevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, rwork, &lrwork, iwork, &liwork, info, 1, 1);
  } else {
    zheevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, rwork, &lrwork, iwork, &liwork, info, 1, 1);
  }
}

// Whether every entry is finite: the drivers are not run on NaN or infinity (info -4, as
// gesdd reports for a non-finite A where LAPACK checks it).
template <typename T>
bool all_finite(const T* values, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    if constexpr (kComplex<T>) {
      if (!std::isfinite(values[i].real()) || !std::isfinite(values[i].imag())) return false;
    } else {
      if (!std::isfinite(values[i])) return false;
    }
  }
  return true;
}

int64_t decomposition_grain(int64_t n) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n * n * n)); }

}  // namespace

void svd(DType dtype, int64_t batch, int64_t m, int64_t n, SvdVectors vectors, void* a, void* s, void* u, void* vt,
         int32_t* info) {
  const int rows = lapack_size(m), cols = lapack_size(n), k = std::min(rows, cols);
  const char jobz = vectors == SvdVectors::kNone ? 'N' : vectors == SvdVectors::kReduced ? 'S' : 'A';
  const int u_cols = vectors == SvdVectors::kFull ? rows : k, vt_rows = vectors == SvdVectors::kFull ? cols : k;
  const int lda = std::max(rows, 1), ldu = std::max(rows, 1), ldvt = std::max(vt_rows, 1);
  dispatch_spectral(dtype, "svd", [&](auto tag) {
    using T = decltype(tag);
    using R = typename RealOf<T>::type;
    T* matrices = static_cast<T*>(a);
    R* values = static_cast<R*>(s);
    T* left = static_cast<T*>(u);
    T* right = static_cast<T*>(vt);
    parallel_for(batch, decomposition_grain(std::max(m, n)), [&](int64_t begin, int64_t end) {
      const BlasErrorsThrow errors_throw;  // a LAPACK parameter error throws KernelError
      std::vector<int> iwork(static_cast<size_t>(std::max(8 * k, 1)));
      // LAPACK 3.x's bounds for the complex drivers' real workspace.
      const int64_t big = std::max(rows, cols);
      const int64_t rwork_size = !kComplex<T>              ? 1
                                 : vectors == SvdVectors::kNone ? std::max<int64_t>(7 * k, 1)
                                                                : std::max<int64_t>(
                                                                      1, k * std::max<int64_t>(5 * k + 7, 2 * big + 2 * k + 1));
      std::vector<R> rwork(static_cast<size_t>(rwork_size));
      T* no_vectors = nullptr;
      T query{};
      int status = 0;
      gesdd<T>(jobz, rows, cols, matrices, lda, values, left != nullptr ? left : no_vectors, ldu,
               right != nullptr ? right : no_vectors, ldvt, &query, -1, rwork.data(), iwork.data(), &status);
      const int lwork = std::max(reported_size(query), 1);
      std::vector<T> work(static_cast<size_t>(lwork));
      std::vector<T> scratch(vectors == SvdVectors::kNone ? 1 : 0);
      for (int64_t i = begin; i < end; ++i) {
        T* ui = vectors == SvdVectors::kNone ? scratch.data() : left + i * m * u_cols;
        T* vti = vectors == SvdVectors::kNone ? scratch.data() : right + i * vt_rows * n;
        if (!all_finite(matrices + i * m * n, m * n)) {
          info[i] = -4;
          continue;
        }
        gesdd<T>(jobz, rows, cols, matrices + i * m * n, lda, values + i * k, ui, ldu, vti, ldvt, work.data(), lwork,
                 rwork.data(), iwork.data(), &status);
        info[i] = status;
      }
    });
  });
}

void eigh(DType dtype, int64_t batch, int64_t n, bool upper, bool vectors, void* a, void* w, int32_t* info) {
  const int order = lapack_size(n), lda = std::max(order, 1);
  const char jobz = vectors ? 'V' : 'N', uplo = upper ? 'U' : 'L';
  dispatch_spectral(dtype, "eigh", [&](auto tag) {
    using T = decltype(tag);
    using R = typename RealOf<T>::type;
    T* matrices = static_cast<T*>(a);
    R* values = static_cast<R*>(w);
    parallel_for(batch, decomposition_grain(n), [&](int64_t begin, int64_t end) {
      const BlasErrorsThrow errors_throw;  // a LAPACK parameter error throws KernelError
      T work_query{};
      R rwork_query{};
      int iwork_query = 0, status = 0;
      heevd<T>(jobz, uplo, order, matrices, lda, values, &work_query, -1, &rwork_query, -1, &iwork_query, -1, &status);
      const int lwork = std::max(reported_size(work_query), 1), liwork = std::max(iwork_query, 1);
      const int lrwork = kComplex<T> ? std::max(static_cast<int>(rwork_query), 1) : 1;
      std::vector<T> work(static_cast<size_t>(lwork));
      std::vector<R> rwork(static_cast<size_t>(lrwork));
      std::vector<int> iwork(static_cast<size_t>(liwork));
      for (int64_t i = begin; i < end; ++i) {
        if (!all_finite(matrices + i * n * n, n * n)) {
          info[i] = -4;
          continue;
        }
        heevd<T>(jobz, uplo, order, matrices + i * n * n, lda, values + i * n, work.data(), lwork, rwork.data(), lrwork,
                 iwork.data(), liwork, &status);
        info[i] = status;
      }
    });
  });
}

}  // namespace torchneuron::kernels
