#include "kernels/gemm.h"

#include <cblas.h>

#include <cstring>
#include <mutex>
#include <type_traits>
#include <vector>

#include "kernels/half.h"
#include "kernels/parallel.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {
namespace {

// Row-major BLAS view of an operand: NoTrans when rows are contiguous runs, Trans otherwise.
struct BlasMatrix {
  CBLAS_TRANSPOSE trans;
  int64_t ld;
};

BlasMatrix as_blas(const MatrixOperand& op, int64_t cols) {
  if (op.col_stride == 1) return {CblasNoTrans, std::max<int64_t>(op.row_stride, std::max<int64_t>(cols, 1))};
  return {CblasTrans, std::max<int64_t>(op.col_stride, 1)};
}

template <typename T>
void blas_gemm(const GemmArgs& g, const char* a, const char* b, char* c) {
  const BlasMatrix ba = as_blas(g.a, g.k);
  const BlasMatrix bb = as_blas(g.b, g.n);
  const auto* A = reinterpret_cast<const T*>(a);
  const auto* B = reinterpret_cast<const T*>(b);
  auto* C = reinterpret_cast<T*>(c);
  const int64_t ldc = std::max<int64_t>(g.c.row_stride, std::max<int64_t>(g.n, 1));
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ba.trans, bb.trans, g.m, g.n, g.k, static_cast<float>(g.alpha), A, ba.ld, B,
                bb.ld, static_cast<float>(g.beta), C, ldc);
  } else {
    cblas_dgemm(CblasRowMajor, ba.trans, bb.trans, g.m, g.n, g.k, g.alpha, A, ba.ld, B, bb.ld, g.beta, C, ldc);
  }
}

// Half types: widen A, B (and C when it is read) to float, multiply, round back.
template <typename H>
void half_gemm(const GemmArgs& g, const char* a, const char* b, char* c) {
  auto widen = [](const MatrixOperand& op, const char* base, int64_t rows, int64_t cols) {
    std::vector<float> dense(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t col = 0; col < cols; ++col) {
        H value;
        std::memcpy(&value, base + (r * op.row_stride + col * op.col_stride) * sizeof(H), sizeof(H));
        dense[r * cols + col] = static_cast<float>(value);
      }
    }
    return dense;
  };
  std::vector<float> A = widen(g.a, a, g.m, g.k);
  std::vector<float> B = widen(g.b, b, g.k, g.n);
  std::vector<float> C = g.beta != 0.0 ? widen(g.c, c, g.m, g.n) : std::vector<float>(g.m * g.n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g.m, g.n, g.k, static_cast<float>(g.alpha), A.data(),
              std::max<int64_t>(g.k, 1), B.data(), std::max<int64_t>(g.n, 1), static_cast<float>(g.beta), C.data(),
              std::max<int64_t>(g.n, 1));
  for (int64_t r = 0; r < g.m; ++r) {
    for (int64_t col = 0; col < g.n; ++col) {
      const H value(C[r * g.n + col]);
      std::memcpy(c + (r * g.c.row_stride + col) * sizeof(H), &value, sizeof(H));
    }
  }
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

}  // namespace

void configure_blas_threads() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(compute_threads()); });
}

bool gemm_supported(DType dtype) {
  return dtype != DType::kBool && !is_complex(dtype);
}

void gemm(const GemmArgs& g) {
  if (g.m == 0 || g.n == 0) return;
  configure_blas_threads();
  const size_t size = element_size(g.dtype);
  for (int64_t i = 0; i < g.batch; ++i) {
    const char* a = g.a.data + i * g.a.batch_stride * static_cast<int64_t>(size);
    const char* b = g.b.data + i * g.b.batch_stride * static_cast<int64_t>(size);
    char* c = g.c.data + i * g.c.batch_stride * static_cast<int64_t>(size);
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
      continue;
    }
    switch (g.dtype) {
      case DType::kFloat32: blas_gemm<float>(g, a, b, c); break;
      case DType::kFloat64: blas_gemm<double>(g, a, b, c); break;
      case DType::kBFloat16: half_gemm<BFloat16>(g, a, b, c); break;
      case DType::kFloat16: half_gemm<Half>(g, a, b, c); break;
      case DType::kInt64: integer_gemm<int64_t>(g, a, b, c); break;
      case DType::kInt32: integer_gemm<int32_t>(g, a, b, c); break;
      case DType::kInt16: integer_gemm<int16_t>(g, a, b, c); break;
      case DType::kInt8: integer_gemm<int8_t>(g, a, b, c); break;
      case DType::kUInt8: integer_gemm<uint8_t>(g, a, b, c); break;
      default: throw runtime::KernelError(std::string("gemm does not handle ") + dtype_name(g.dtype));
    }
  }
}

}  // namespace torchneuron::kernels
