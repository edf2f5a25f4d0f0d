// Low-precision matrix products over device buffers: float8 x float8 with float32 scales into
// float32 / bfloat16 / float16, and int8 (or uint8) x int8 into int32, exactly.
#pragma once

#include <cstdint>

#include "kernels/strided.h"

namespace torchneuron::kernels {

enum class Float8Format : uint8_t { kE4M3FN, kE5M2 };

// A [rows, cols] matrix of one-byte elements; any strides (in elements), 0 included.
struct LowpOperand {
  const void* data = nullptr;
  int64_t row_stride = 0;
  int64_t col_stride = 0;
};

// C[m, n] = (A @ B) * scale + bias, rounded once to c_dtype (kFloat32, kBFloat16 or kFloat16).
// The products of the float8 values are summed in float32; scale is scale_a[0] * scale_b[0]
// (tensor-wise) or scale_a[i] * scale_b[j] (row-wise: m and n floats); bias is n floats or null.
// C is row-major with row stride ldc.
struct ScaledGemmArgs {
  int64_t m = 0, n = 0, k = 0;
  LowpOperand a, b;
  Float8Format a_format = Float8Format::kE4M3FN, b_format = Float8Format::kE4M3FN;
  const float* scale_a = nullptr;
  const float* scale_b = nullptr;
  bool rowwise = false;
  const float* bias = nullptr;
  void* c = nullptr;
  int64_t ldc = 0;
  DType c_dtype = DType::kFloat32;
};
void scaled_gemm(const ScaledGemmArgs& args);

// C[m, n] = A @ B in int32 with wrap-around (exact while the sums fit), A int8 or (a_unsigned)
// uint8, B int8; C row-major with row stride ldc.
struct Int8GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  LowpOperand a, b;
  bool a_unsigned = false;
  int32_t* c = nullptr;
  int64_t ldc = 0;
};
void int8_gemm(const Int8GemmArgs& args);

// Which micro-kernels this library and CPU run, e.g. "float8: avx512-bf16, int8: avx512-vnni".
const char* lowp_gemm_kernels();

}  // namespace torchneuron::kernels
