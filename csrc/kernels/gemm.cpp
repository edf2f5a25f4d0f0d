#include "kernels/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <complex>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/gemm_bf16.h"
#include "kernels/half.h"
#include "kernels/parallel.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {
namespace {
thread_local int blas_errors_throw_depth = 0;
}  // namespace

BlasErrorsThrow::BlasErrorsThrow() { ++blas_errors_throw_depth; }
BlasErrorsThrow::~BlasErrorsThrow() { --blas_errors_throw_depth; }
}  // namespace torchneuron::kernels

// OpenBLAS reports an illegal argument (a leading dimension too small, a negative size) by
// calling xerbla_, whose own version prints a line on stderr and returns, leaving the result
// unwritten. This strong definition in the kernel library comes first in the lookup scope of the
// libopenblas it loads (OpenBLAS's xerbla_ is weak and every call goes through the PLT), so a
// kernel's failing call throws instead and the queue reports it. OpenBLAS checks arguments
// before it allocates or locks anything, so unwinding out of it leaks nothing. A call from
// another library sharing this OpenBLAS (no BlasErrorsThrow on its thread) is reported on
// stderr and returns, as with OpenBLAS's own: an exception there would abort its process.
extern "C" void xerbla_(const char* routine, const int* parameter, int routine_length);

extern "C" void xerbla_(const char* routine, const int* parameter, int routine_length) {
  // Fortran callers pass the name unterminated with its length; OpenBLAS's C interface passes
  // it NUL-terminated with the length counting the NUL. Either way: up to the NUL, spaces trimmed.
  std::string name;
  for (int i = 0; routine != nullptr && i < std::min(routine_length, 32) && routine[i] != '\0'; ++i) name += routine[i];
  while (!name.empty() && name.back() == ' ') name.pop_back();
  const std::string what = "BLAS/LAPACK routine " + name + " was called with an illegal value for parameter " +
                           std::to_string(parameter != nullptr ? *parameter : 0);
  if (torchneuron::kernels::blas_errors_throw_depth > 0) {
    throw torchneuron::runtime::KernelError(what + "; this is a bug in the torchneuron kernel that called it: please report it");
  }
  std::fprintf(stderr, "%s (reported by torchneuron's xerbla_; the call returned without a result)\n", what.c_str());
}

namespace torchneuron::kernels {
namespace {

// Row-major BLAS view of an operand: NoTrans when rows are contiguous runs, Trans when columns
// are. The operand must be canonical and representable (see blas_representable).
struct BlasMatrix {
  CBLAS_TRANSPOSE trans;
  int64_t ld;
};

// A size-1 dimension's stride is arbitrary in PyTorch (0 included) and never used to address
// anything; give it the value that makes the operand look dense in the other dimension, so that
// the layout tests below see the layout that matters. A single batch entry needs no batch stride,
// an empty matrix no strides at all.
MatrixOperand canonical(MatrixOperand op, int64_t batch, int64_t rows, int64_t cols) {
  if (batch <= 1) op.batch_stride = 0;
  if (rows == 0 || cols == 0) return {op.data, op.batch_stride, std::max<int64_t>(cols, 1), 1};  // nothing read
  if (cols <= 1) op.col_stride = 1;
  if (rows <= 1) op.row_stride = op.col_stride == 1 ? std::max<int64_t>(cols, 1) : 1;
  return op;
}

// Row-major NoTrans needs unit column stride and ld >= max(1, cols); Trans unit row stride and
// ld >= max(1, rows). Anything else (a stride-0 expanded dimension, two non-unit strides) is not
// a BLAS matrix and is copied first.
bool blas_representable(const MatrixOperand& op, int64_t rows, int64_t cols) {
  return (op.col_stride == 1 && op.row_stride >= std::max<int64_t>(cols, 1)) ||
         (op.row_stride == 1 && op.col_stride >= std::max<int64_t>(rows, 1));
}

BlasMatrix as_blas(const MatrixOperand& op, int64_t rows, int64_t cols) {
  if (op.col_stride == 1 && op.row_stride >= std::max<int64_t>(cols, 1)) return {CblasNoTrans, op.row_stride};
  if (op.row_stride == 1 && op.col_stride >= std::max<int64_t>(rows, 1)) return {CblasTrans, op.col_stride};
  throw runtime::KernelError("gemm: an operand with strides (" + std::to_string(op.row_stride) + ", " +
                             std::to_string(op.col_stride) + ") reached BLAS; copy it first (run_gemm does)");
}

// BLAS sizes are 32-bit here (OpenBLAS's default interface).
void check_blas_size(int64_t value, const char* what) {
  if (value > std::numeric_limits<int>::max()) {
    throw runtime::KernelError(std::string("gemm: ") + what + " of " + std::to_string(value) +
                               " is too large for BLAS's 32-bit sizes; split the product");
  }
}

// `op` (canonical) copied row-major into `storage`: one matrix when the batch stride is 0.
MatrixOperand dense_copy(const MatrixOperand& op, int64_t batch, int64_t rows, int64_t cols, size_t item,
                         std::vector<char>& storage) {
  const int64_t entries = op.batch_stride == 0 ? 1 : batch;
  storage.resize(static_cast<size_t>(entries * rows * cols) * item);
  const auto step = static_cast<int64_t>(item);
  parallel_for(entries * rows, std::max<int64_t>(1, 32768 / std::max<int64_t>(cols, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const char* from = op.data + ((i / rows) * op.batch_stride + (i % rows) * op.row_stride) * step;
      char* to = storage.data() + i * cols * step;
      for (int64_t c = 0; c < cols; ++c) std::memcpy(to + c * step, from + c * op.col_stride * step, item);
    }
  });
  return {storage.data(), entries == 1 ? 0 : rows * cols, cols, 1};
}

// Products under this many multiply-adds run as one BLAS call: splitting costs more than it saves.
bool too_small_to_split(int64_t m, int64_t n, int64_t k) { return m * n * std::max<int64_t>(k, 1) < (int64_t{1} << 18); }

// Whether split_gemm splits an m x n x k product by rows: for m >= n, and with row hooks also
// for a wide product when there are enough rows to keep the pool busy and B is small. Each
// block's BLAS call packs all of B again: a 256 x 1024 x 1024 product with a GELU epilogue ran
// at half the speed split by rows that it runs split by columns with the epilogue after it.
bool splits_by_rows(int64_t m, int64_t n, int64_t k, bool hooked) {
  if (too_small_to_split(m, n, k)) return false;
  constexpr int64_t kRepackedElements = int64_t{1} << 16;  // a 256 KiB float B
  return m >= n || (hooked && m >= 16 * compute_threads() && n * std::max<int64_t>(k, 1) <= kRepackedElements);
}

// Blocks that split_gemm cuts a product into. Each block is its own BLAS call and packs the
// operand the blocks share again, so a large product runs fastest in one block per thread (3 to
// 16% faster than four per thread at the tiny GPT's shapes). OpenBLAS multiplies products of up
// to about a million multiply-adds without packing, about 15% faster per flop: a product that
// four blocks per thread cut that small gets them, which also balances the threads better.
constexpr int64_t kUnpackedProduct = 1000000;

int64_t split_blocks(int64_t m, int64_t n, int64_t k) {
  const int64_t threads = compute_threads();
  return m * n * std::max<int64_t>(k, 1) <= kUnpackedProduct * 4 * threads ? 4 * threads : threads;
}

// C = alpha A B + beta C split into blocks of rows (or of columns when C is wide and short) over
// the compute pool, each block a single-threaded BLAS call. OpenBLAS's own threads wait for each
// other at barriers and crawl when the host thread takes one of the cores; pool chunks do not.
// a_row / b_col: element steps between consecutive rows of A and columns of B. The hooks (see
// gemm_with_row_hooks) run on each block of rows; pass them only when splits_by_rows says so.
// whole: one call on the calling thread instead (a batch entry run beside others).
template <typename T>
void split_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, T alpha, const T* A,
                int64_t lda, int64_t a_row, const T* B, int64_t ldb, int64_t b_col, T beta, T* C, int64_t ldc,
                const RowHook* prologue, const RowHook* epilogue, bool whole) {
  auto call = [&](int64_t rows, int64_t cols, const T* a, const T* b, T* c) {
    const BlasErrorsThrow errors_throw;
    if constexpr (std::is_same_v<T, float>) {
      cblas_sgemm(CblasRowMajor, ta, tb, rows, cols, k, alpha, a, lda, b, ldb, beta, c, ldc);
    } else {
      cblas_dgemm(CblasRowMajor, ta, tb, rows, cols, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
  };
  const bool hooked = prologue != nullptr || epilogue != nullptr;
  const int64_t blocks = split_blocks(m, n, k);
  if (whole) {
    call(m, n, A, B, C);
  } else if (splits_by_rows(m, n, k, hooked)) {
    parallel_for(m, (m + blocks - 1) / blocks, [&](int64_t begin, int64_t end) {
      if (prologue != nullptr) (*prologue)(begin, end);
      call(end - begin, n, A + begin * a_row, B, C + begin * ldc);
      if (epilogue != nullptr) (*epilogue)(begin, end);
    });
  } else if (too_small_to_split(m, n, k)) {
    call(m, n, A, B, C);
  } else {
    parallel_for(n, (n + blocks - 1) / blocks, [&](int64_t begin, int64_t end) {
      call(m, end - begin, A, B + begin * b_col, C + begin);
    });
  }
}

// A short product whose B is stored transposed (x @ w.t() of a linear layer's [out, in] weight),
// computed as C^T = B^T A^T into a scratch buffer and transposed into C: split by B's rows, each
// block packs only the small A. OpenBLAS's A x B^T path, split by columns, is the slower one.
constexpr int64_t kShortProductRows = 64;

bool runs_by_weight_rows(const GemmArgs& g, const BlasMatrix& bb, bool hooked, bool whole) {
  // Measured gains (alternating runs on a loaded machine) were clear from k = 1024 or n = 2048 on
  // (1.3-2x at 16 x 1024 x 1024, 4 x 1024 x 4096, 16 x 512 x 2048); smaller products were mixed.
  return !hooked && !whole && bb.trans == CblasTrans && g.m <= kShortProductRows && g.m < g.n && g.beta == 0.0 &&
         (g.k >= 1024 || g.n >= 2048) && g.m * g.n * g.k >= 2 * kUnpackedProduct;
}

template <typename T>
void gemm_by_weight_rows(const GemmArgs& g, const BlasMatrix& ba, const BlasMatrix& bb, const T* a, const T* b, T* c) {
  const int64_t m = g.m, n = g.n, k = g.k;
  // B^T is [n, k] row-major (ld bb.ld); A^T is copied to a dense [k, m] (A is short), so that the
  // product is OpenBLAS's A x B form, not its slower A x B^T one.
  std::vector<T> a_t(static_cast<size_t>(k * m)), transposed(static_cast<size_t>(m * n));
  const bool a_rows = ba.trans == CblasNoTrans;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t kk = 0; kk < k; ++kk) a_t[static_cast<size_t>(kk * m + i)] = a_rows ? a[i * ba.ld + kk] : a[kk * ba.ld + i];
  }
  split_gemm<T>(CblasNoTrans, CblasNoTrans, n, m, k, static_cast<T>(g.alpha), b, bb.ld, bb.ld, a_t.data(), m, 1,
                T(0), transposed.data(), m, nullptr, nullptr, false);
  const int64_t ldc = g.c.row_stride;
  parallel_for(m, std::max<int64_t>(1, 32768 / std::max<int64_t>(n, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = transposed[static_cast<size_t>(j * m + i)];
    }
  });
}

template <typename T>
void blas_gemm(const GemmArgs& g, const char* a, const char* b, char* c, const RowHook* prologue,
               const RowHook* epilogue, bool whole = false) {
  const BlasMatrix ba = as_blas(g.a, g.m, g.k);
  const BlasMatrix bb = as_blas(g.b, g.k, g.n);
  if (runs_by_weight_rows(g, bb, prologue != nullptr || epilogue != nullptr, whole)) {
    return gemm_by_weight_rows<T>(g, ba, bb, reinterpret_cast<const T*>(a), reinterpret_cast<const T*>(b),
                                  reinterpret_cast<T*>(c));
  }
  const int64_t ldc = g.c.row_stride;
  split_gemm<T>(ba.trans, bb.trans, g.m, g.n, g.k, static_cast<T>(g.alpha), reinterpret_cast<const T*>(a), ba.ld,
                g.a.row_stride, reinterpret_cast<const T*>(b), bb.ld, g.b.col_stride, static_cast<T>(g.beta),
                reinterpret_cast<T*>(c), ldc, prologue, epilogue, whole);
}

// One operand of a half-type GEMM widened to float: kept in its own orientation (rows or
// columns contiguous) so that the conversion reads memory in order, on the compute pool.
template <typename H>
struct WideMatrix {
  std::vector<float> data;
  CBLAS_TRANSPOSE trans = CblasNoTrans;
  int64_t ld = 1;

  void load(const MatrixOperand& op, const char* base, int64_t rows, int64_t cols) {
    data.resize(static_cast<size_t>(rows * cols));
    // Runs of `inner` elements `inner_stride` apart, `outer` of them `outer_stride` apart.
    const bool transposed = op.col_stride != 1 && op.row_stride == 1 && rows > 1;
    const int64_t outer = transposed ? cols : rows, inner = transposed ? rows : cols;
    const int64_t outer_stride = transposed ? op.col_stride : op.row_stride;
    const int64_t inner_stride = transposed ? op.row_stride : op.col_stride;
    trans = transposed ? CblasTrans : CblasNoTrans;
    ld = std::max<int64_t>(inner, 1);
    float* dense = data.data();
    parallel_for(outer, std::max<int64_t>(1, 32768 / std::max<int64_t>(inner, 1)), [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        const char* run = base + o * outer_stride * static_cast<int64_t>(sizeof(H));
        float* to = dense + o * inner;
        if (inner_stride == 1) {
          for (int64_t i = 0; i < inner; ++i) {
            H value;
            std::memcpy(&value, run + i * static_cast<int64_t>(sizeof(H)), sizeof(H));
            to[i] = static_cast<float>(value);
          }
        } else {
          for (int64_t i = 0; i < inner; ++i) {
            H value;
            std::memcpy(&value, run + i * inner_stride * static_cast<int64_t>(sizeof(H)), sizeof(H));
            to[i] = static_cast<float>(value);
          }
        }
      }
    });
  }
};

// Half types: widen A, B (and C when it is read) to float, multiply, round back.
template <typename H>
void half_gemm(const GemmArgs& g, const char* a, const char* b, char* c) {
  WideMatrix<H> A, B, C;
  A.load(g.a, a, g.m, g.k);
  B.load(g.b, b, g.k, g.n);
  const MatrixOperand c_rows{g.c.data, g.c.batch_stride, g.c.row_stride, 1};  // C is row-major
  if (g.beta != 0.0) {
    C.load(c_rows, c, g.m, g.n);
  } else {
    C.data.resize(static_cast<size_t>(g.m * g.n));
    C.ld = std::max<int64_t>(g.n, 1);
  }
  const int64_t a_row = A.trans == CblasNoTrans ? A.ld : 1, b_col = B.trans == CblasNoTrans ? 1 : B.ld;
  split_gemm<float>(A.trans, B.trans, g.m, g.n, g.k, static_cast<float>(g.alpha), A.data.data(), A.ld, a_row,
                    B.data.data(), B.ld, b_col, static_cast<float>(g.beta), C.data.data(), C.ld, nullptr, nullptr, false);
  const float* result = C.data.data();
  parallel_for(g.m, std::max<int64_t>(1, 32768 / std::max<int64_t>(g.n, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      char* row = c + r * g.c.row_stride * static_cast<int64_t>(sizeof(H));
      for (int64_t col = 0; col < g.n; ++col) {
        const H value(result[r * g.n + col]);
        std::memcpy(row + col * static_cast<int64_t>(sizeof(H)), &value, sizeof(H));
      }
    }
  });
}

template <typename T>
void integer_gemm(const GemmArgs& g, const char* a, const char* b, char* c) {
  const auto alpha = static_cast<int64_t>(g.alpha);
  const auto beta = static_cast<int64_t>(g.beta);
  parallel_for(g.m, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t col = 0; col < g.n; ++col) {
        int64_t acc = 0;
        for (int64_t i = 0; i < g.k; ++i) {
          T x, y;
          std::memcpy(&x, a + (r * g.a.row_stride + i * g.a.col_stride) * sizeof(T), sizeof(T));
          std::memcpy(&y, b + (i * g.b.row_stride + col * g.b.col_stride) * sizeof(T), sizeof(T));
          acc += static_cast<int64_t>(x) * static_cast<int64_t>(y);
        }
        char* out = c + (r * g.c.row_stride + col) * sizeof(T);
        T previous;
        std::memcpy(&previous, out, sizeof(T));
        const T value = static_cast<T>(alpha * acc + (beta != 0 ? beta * static_cast<int64_t>(previous) : 0));
        std::memcpy(out, &value, sizeof(T));
      }
    }
  });
}

// An empty inner dimension: C = beta * C, and exact zeros when beta is 0 (BLAS libraries
// disagree on a K of 0, so it never reaches them).
template <typename T>
void scale_output(const GemmArgs& g, char* c) {
  for (int64_t r = 0; r < g.m; ++r) {
    char* row = c + r * g.c.row_stride * static_cast<int64_t>(sizeof(T));
    if (g.beta == 0.0) {
      std::memset(row, 0, static_cast<size_t>(g.n) * sizeof(T));
      continue;
    }
    for (int64_t col = 0; col < g.n; ++col) {
      T value;
      std::memcpy(&value, row + col * sizeof(T), sizeof(T));
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        value = T(static_cast<float>(value) * static_cast<float>(g.beta));
      } else {
        value = static_cast<T>(value * static_cast<T>(g.beta));
      }
      std::memcpy(row + col * sizeof(T), &value, sizeof(T));
    }
  }
}

// Complex products (cgemm / zgemm) with a real alpha and beta: entries side by side when the
// batch has one per thread, else each entry's rows split over the compute pool.
template <typename R>
void complex_gemm(const GemmArgs& g) {
  using Z = std::complex<R>;
  const Z alpha(static_cast<R>(g.alpha)), beta(static_cast<R>(g.beta));
  const BlasMatrix ba = as_blas(g.a, g.m, g.k), bb = as_blas(g.b, g.k, g.n);
  const int64_t ldc = g.c.row_stride;
  auto product = [&](int64_t entry, int64_t row_begin, int64_t row_end) {
    const Z* a = reinterpret_cast<const Z*>(g.a.data) + entry * g.a.batch_stride + row_begin * g.a.row_stride;
    const Z* b = reinterpret_cast<const Z*>(g.b.data) + entry * g.b.batch_stride;
    Z* c = reinterpret_cast<Z*>(g.c.data) + entry * g.c.batch_stride + row_begin * ldc;
    const int64_t rows = row_end - row_begin;
    const BlasErrorsThrow errors_throw;
    if (g.k == 0) {  // C = beta C, exact zeros for beta 0 (BLAS libraries disagree on a K of 0)
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t col = 0; col < g.n; ++col) c[r * ldc + col] = g.beta == 0.0 ? Z() : beta * c[r * ldc + col];
      }
    } else if constexpr (std::is_same_v<R, float>) {
      cblas_cgemm(CblasRowMajor, ba.trans, bb.trans, rows, g.n, g.k, &alpha, a, ba.ld, b, bb.ld, &beta, c, ldc);
    } else {
      cblas_zgemm(CblasRowMajor, ba.trans, bb.trans, rows, g.n, g.k, &alpha, a, ba.ld, b, bb.ld, &beta, c, ldc);
    }
  };
  if (g.batch >= compute_threads() || too_small_to_split(g.m, g.n, 4 * g.k)) {
    parallel_for(g.batch, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) product(i, 0, g.m);
    });
    return;
  }
  const int64_t block = (g.m + compute_threads() - 1) / compute_threads();
  for (int64_t i = 0; i < g.batch; ++i) {
    parallel_for(g.m, block, [&](int64_t begin, int64_t end) { product(i, begin, end); });
  }
}

}  // namespace

void configure_blas_threads() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });  // the compute pool splits the work
}

bool gemm_supported(DType dtype) { return dtype != DType::kBool; }

namespace {

// Whether a batch's entries run side by side, each one BLAS call, rather than one after another,
// each split: for a batch of small products (attention written as matmuls), when together they
// are worth splitting, and for a batch of mid-sized products with entries enough to share out
// evenly: split, a 128 x 128 x 256 entry ran as 8 blocks at 90-100 GFLOP/s, against 135-150 whole.
// Entries of 1-2 million multiply-adds measured faster split, those above 8 million the same.
bool runs_entries_side_by_side(const GemmArgs& g) {
  const int64_t entry = g.m * g.n * std::max<int64_t>(g.k, 1);
  if (g.batch < 2 || too_small_to_split(g.batch * g.m, g.n, g.k)) return false;
  const int64_t threads = compute_threads();
  if (too_small_to_split(g.m, g.n, g.k) || (g.batch >= threads && entry <= kUnpackedProduct)) return true;
  return g.batch >= 4 * threads && entry > 2 * kUnpackedProduct && entry <= 8 * kUnpackedProduct;
}

// The product with canonical operands: A and B copied row-major where BLAS cannot take them as
// they are (float, double and complex; the other dtypes' kernels read any strides), C checked
// row-major. Throws KernelError for a C that is not, or for sizes past BLAS's.
GemmArgs blas_ready(const GemmArgs& args, bool a_is_written, std::vector<char>& a_copy, std::vector<char>& b_copy) {
  GemmArgs g = args;
  g.a = canonical(g.a, g.batch, g.m, g.k);
  g.b = canonical(g.b, g.batch, g.k, g.n);
  g.c = canonical(g.c, g.batch, g.m, g.n);
  if (g.n > 0 && (g.c.col_stride != 1 || g.c.row_stride < g.n)) {
    throw runtime::KernelError("gemm: C must be row-major (unit column stride, row stride >= n), got strides (" +
                               std::to_string(g.c.row_stride) + ", " + std::to_string(g.c.col_stride) + ") for n = " +
                               std::to_string(g.n) + "; pass a row-major C");
  }
  const bool blas = g.dtype == DType::kFloat32 || g.dtype == DType::kFloat64 || g.dtype == DType::kComplex64 ||
                    g.dtype == DType::kComplex128;
  if (!blas) return g;
  const size_t item = element_size(g.dtype);
  if (!blas_representable(g.a, g.m, g.k)) {
    if (a_is_written) throw runtime::KernelError("gemm: a prologue writes A, so A must be row- or column-major");
    g.a = dense_copy(g.a, g.batch, g.m, g.k, item, a_copy);
  }
  if (!blas_representable(g.b, g.k, g.n)) g.b = dense_copy(g.b, g.batch, g.k, g.n, item, b_copy);
  for (const int64_t value : {g.m, g.n, g.k}) check_blas_size(value, "a matrix dimension");
  for (const int64_t ld : {g.a.row_stride, g.a.col_stride, g.b.row_stride, g.b.col_stride, g.c.row_stride}) {
    check_blas_size(ld, "a leading dimension");
  }
  return g;
}

// Runs the hooks (when given) exactly once on every row, counting rows across the batch: entry
// i's rows are i * m + [0, m).
void run_gemm(const GemmArgs& args, const RowHook* prologue, const RowHook* epilogue) {
  if (args.m == 0) return;
  std::vector<char> a_copy, b_copy;
  const GemmArgs g = blas_ready(args, prologue != nullptr, a_copy, b_copy);
  if (g.n == 0) {  // no product, but A's rows are still written
    if (prologue != nullptr) parallel_for(g.batch * g.m, 1, *prologue);
    if (epilogue != nullptr) parallel_for(g.batch * g.m, g.batch * g.m, *epilogue);
    return;
  }
  configure_blas_threads();
  if (g.dtype == DType::kComplex64) return complex_gemm<float>(g);
  if (g.dtype == DType::kComplex128) return complex_gemm<double>(g);
  const size_t size = element_size(g.dtype);
  const bool blas = g.k != 0 && (g.dtype == DType::kFloat32 || g.dtype == DType::kFloat64);
  // BLAS products split by rows run the hooks block by block; others run them around the product.
  const bool per_block = blas && splits_by_rows(g.m, g.n, g.k, prologue != nullptr || epilogue != nullptr);
  auto entry = [&](const MatrixOperand& op, int64_t i) { return op.data + i * op.batch_stride * static_cast<int64_t>(size); };
  if (blas && prologue == nullptr && epilogue == nullptr && runs_entries_side_by_side(g)) {
    parallel_for(g.batch, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        if (g.dtype == DType::kFloat32) {
          blas_gemm<float>(g, entry(g.a, i), entry(g.b, i), entry(g.c, i), nullptr, nullptr, true);
        } else {
          blas_gemm<double>(g, entry(g.a, i), entry(g.b, i), entry(g.c, i), nullptr, nullptr, true);
        }
      }
    });
    return;
  }
  const int64_t prologue_grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(g.k, 1));
  const int64_t epilogue_grain = std::max<int64_t>(1, 32768 / g.n);
  for (int64_t i = 0; i < g.batch; ++i) {
    const char* a = entry(g.a, i);
    const char* b = entry(g.b, i);
    char* c = entry(g.c, i);
    auto shift = [first = i * g.m](const RowHook* hook) {
      return hook == nullptr ? RowHook() : RowHook([hook, first](int64_t begin, int64_t end) { (*hook)(first + begin, first + end); });
    };
    const RowHook entry_prologue = shift(prologue), entry_epilogue = shift(epilogue);
    if (prologue != nullptr && !per_block) parallel_for(g.m, prologue_grain, entry_prologue);
    if (g.k == 0) {
      switch (g.dtype) {
        case DType::kFloat32: scale_output<float>(g, c); break;
        case DType::kFloat64: scale_output<double>(g, c); break;
        case DType::kBFloat16: scale_output<BFloat16>(g, c); break;
        case DType::kFloat16: scale_output<Half>(g, c); break;
        case DType::kInt64: scale_output<int64_t>(g, c); break;
        case DType::kInt32: scale_output<int32_t>(g, c); break;
        case DType::kInt16: scale_output<int16_t>(g, c); break;
        case DType::kInt8: scale_output<int8_t>(g, c); break;
        case DType::kUInt8: scale_output<uint8_t>(g, c); break;
        default: throw runtime::KernelError(std::string("gemm does not handle ") + dtype_name(g.dtype));
      }
    } else {
      const RowHook* block_prologue = per_block && prologue != nullptr ? &entry_prologue : nullptr;
      const RowHook* block_epilogue = per_block && epilogue != nullptr ? &entry_epilogue : nullptr;
      switch (g.dtype) {
        case DType::kFloat32: blas_gemm<float>(g, a, b, c, block_prologue, block_epilogue); break;
        case DType::kFloat64: blas_gemm<double>(g, a, b, c, block_prologue, block_epilogue); break;
        case DType::kBFloat16:
          if (bf16_gemm_suits(g)) {
            bf16_gemm(g, a, b, c);
          } else {
            half_gemm<BFloat16>(g, a, b, c);
          }
          break;
        case DType::kFloat16: half_gemm<Half>(g, a, b, c); break;
        case DType::kInt64: integer_gemm<int64_t>(g, a, b, c); break;
        case DType::kInt32: integer_gemm<int32_t>(g, a, b, c); break;
        case DType::kInt16: integer_gemm<int16_t>(g, a, b, c); break;
        case DType::kInt8: integer_gemm<int8_t>(g, a, b, c); break;
        case DType::kUInt8: integer_gemm<uint8_t>(g, a, b, c); break;
        default: throw runtime::KernelError(std::string("gemm does not handle ") + dtype_name(g.dtype));
      }
    }
    if (epilogue != nullptr && !per_block) parallel_for(g.m, epilogue_grain, entry_epilogue);
  }
}

}  // namespace

void gemm(const GemmArgs& g) { run_gemm(g, nullptr, nullptr); }

void gemm_with_row_hooks(const GemmArgs& g, const RowHook* prologue, const RowHook* epilogue) {
  run_gemm(g, prologue, epilogue);
}

}  // namespace torchneuron::kernels
