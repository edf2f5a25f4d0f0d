// Matrix multiplication over device buffers: batched C = alpha * A @ B + beta * C through
// OpenBLAS for float32/float64, AVX512-BF16 micro-kernels for bfloat16 (kernels/gemm_bf16.h;
// widened to float on other CPUs, as float16 always is), plain loops for integers, OpenBLAS's
// cgemm / zgemm for complex types (alpha and beta real).
#pragma once

#include <cstdint>
#include <functional>

#include "kernels/strided.h"

namespace torchneuron::kernels {

// One operand: a [rows, cols] matrix per batch entry, strides in elements. A and B take any
// strides (0 included: size-1 dimensions' strides are ignored, and an operand BLAS cannot read
// as it is, such as a stride-0 expanded dimension, is copied first); C must be row-major (unit
// column stride, row stride >= cols; a size-1 dimension's stride is ignored).
struct MatrixOperand {
  char* data = nullptr;
  int64_t batch_stride = 0;
  int64_t row_stride = 0;
  int64_t col_stride = 0;
};

struct GemmArgs {
  DType dtype = DType::kFloat32;
  int64_t batch = 1;
  int64_t m = 0, n = 0, k = 0;
  MatrixOperand a, b, c;
  double alpha = 1.0;
  double beta = 0.0;  // 0 ignores C's previous contents, NaN included
};

// While one is alive on a thread, a BLAS / LAPACK parameter error on that thread throws
// runtime::KernelError naming the routine and the parameter (the kernel library defines
// xerbla_); every BLAS / LAPACK call of the kernels is made under one. Elsewhere (another
// library calling the same OpenBLAS) the error is printed on stderr and the call returns.
class BlasErrorsThrow {
 public:
  BlasErrorsThrow();
  ~BlasErrorsThrow();
  BlasErrorsThrow(const BlasErrorsThrow&) = delete;
  BlasErrorsThrow& operator=(const BlasErrorsThrow&) = delete;
};

bool gemm_supported(DType dtype);
// Makes OpenBLAS single-threaded (once; the compute pool splits GEMMs); call before any cblas_*.
void configure_blas_threads();
void gemm(const GemmArgs& args);

// A GEMM with hooks on blocks of rows, each called exactly once per row, rows counted across the
// batch (entry i's are i * m + [0, m)). prologue(row_begin, row_end) writes those rows of A
// before any of C's rows that read them is computed; epilogue(row_begin, row_end) runs on C's
// rows once they hold their final values. When the product splits by rows (float32 and float64
// through BLAS), both run on the thread that computes the block, while it is in cache;
// otherwise the prologue runs over the compute pool before each batch entry's product and the
// epilogue after it. Either may be null.
using RowHook = std::function<void(int64_t, int64_t)>;
void gemm_with_row_hooks(const GemmArgs& args, const RowHook* prologue, const RowHook* epilogue);

}  // namespace torchneuron::kernels
