// Matrix multiplication over device buffers: batched C = alpha * A @ B + beta * C through
// OpenBLAS for float32/float64, AVX512-BF16 micro-kernels for bfloat16 (kernels/gemm_bf16.h;
// widened to float on other CPUs, as float16 always is), plain loops for integers.
#pragma once

#include <cstdint>
#include <functional>

#include "kernels/strided.h"

namespace torchneuron::kernels {

// One operand: a [rows, cols] matrix per batch entry, strides in elements. A and B need a unit
// stride in one of their two dimensions; C must be row-major (unit column stride).
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

bool gemm_supported(DType dtype);
// Makes OpenBLAS single-threaded (once; the compute pool splits GEMMs); call before any cblas_*.
void configure_blas_threads();
void gemm(const GemmArgs& args);

// A GEMM followed by epilogue(row_begin, row_end) over blocks of C's rows once they hold their
// final values, each row exactly once, rows counted across the batch (entry i's are
// i * m + [0, m)): on the thread that computed each block, while it is in cache, when the
// product splits by rows (float32 and float64 through BLAS); otherwise over the compute pool
// after each batch entry's product.
using RowEpilogue = std::function<void(int64_t, int64_t)>;
void gemm_with_epilogue(const GemmArgs& args, const RowEpilogue& epilogue);

}  // namespace torchneuron::kernels
