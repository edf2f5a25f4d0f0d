// A small single-threaded matrix multiply-accumulate for the kernels' own blocks (attention
// blocks, convolution patches): C += A B with register tiles that the compiler vectorizes.
// Every element of C adds its products in increasing k, each product rounded then added (no
// fused multiply-add), whatever the tiling: results depend on the data only, never on block
// sizes or threads, and equal a plain triple loop's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu_capability.h"

namespace torchneuron::kernels {

namespace tile_gemm_detail {

// One vector register at this library copy's level (kVectorBytes). On AVX2 (16 registers)
// tiles of 64-byte vectors spilled their accumulators, and convolutions ran 1.3-1.5x slower than
// CPU PyTorch's. A tile's rows leave registers for the B vectors and the A broadcast; the tile
// shape changes only the order of independent sums, never one element's.
constexpr int64_t kTileRows = kVectorBytes == 64 ? 8 : 6;

// One register of A as a GCC / Clang vector type.
template <typename A>
struct Vector;
template <>
struct Vector<float> {
  typedef float type __attribute__((vector_size(kVectorBytes)));
};
template <>
struct Vector<double> {
  typedef double type __attribute__((vector_size(kVectorBytes)));
};

// c[i][j] (+)= sum over k of a[i * a_row + k * a_depth] * b[k * ldb + j], a kRows x kCols tile;
// without kAccumulate the sums start from zero instead of c (the same roundings as a zeroed c).
template <typename A, bool kAccumulate, int64_t kRows, int64_t kCols>
inline void tile(int64_t depth, const A* a, int64_t a_row, int64_t a_depth, const A* b, int64_t ldb, A* c,
                 int64_t ldc) {
  constexpr int64_t kVectors = kCols * static_cast<int64_t>(sizeof(A)) / kVectorBytes;
  // Plain loops make GCC vectorize these tiles across k instead (with shuffles, several times
  // slower), so they spell their vectors out.
  using V = typename Vector<A>::type;
  constexpr int64_t kLanes = kVectorBytes / static_cast<int64_t>(sizeof(A));
  V acc[kRows][kVectors] = {};
  if constexpr (kAccumulate) {
    for (int64_t i = 0; i < kRows; ++i) {
      for (int64_t v = 0; v < kVectors; ++v) std::memcpy(&acc[i][v], c + i * ldc + v * kLanes, sizeof(V));
    }
  }
  for (int64_t k = 0; k < depth; ++k) {
    V bv[kVectors];
    for (int64_t v = 0; v < kVectors; ++v) std::memcpy(&bv[v], b + k * ldb + v * kLanes, sizeof(V));
    for (int64_t i = 0; i < kRows; ++i) {
      const V av = a[i * a_row + k * a_depth] - V{};  // a broadcast (x - 0 is x, -0 included)
      for (int64_t v = 0; v < kVectors; ++v) acc[i][v] += av * bv[v];
    }
  }
  for (int64_t i = 0; i < kRows; ++i) {
    for (int64_t v = 0; v < kVectors; ++v) std::memcpy(c + i * ldc + v * kLanes, &acc[i][v], sizeof(V));
  }
}

// All rows of C for one strip of kCols columns (kCols 0: the columns [0, cols), any width).
template <typename A, bool kAccumulate, int64_t kCols>
inline void strip(int64_t rows, int64_t cols, int64_t depth, const A* a, int64_t a_row, int64_t a_depth, const A* b,
                  int64_t ldb, A* c, int64_t ldc) {
  if constexpr (kCols == 0) {
    for (int64_t i = 0; i < rows; ++i) {
      if constexpr (!kAccumulate) {
        for (int64_t j = 0; j < cols; ++j) c[i * ldc + j] = A(0);
      }
      for (int64_t k = 0; k < depth; ++k) {
        const A av = a[i * a_row + k * a_depth];
        for (int64_t j = 0; j < cols; ++j) c[i * ldc + j] += av * b[k * ldb + j];
      }
    }
  } else {
    int64_t i = 0;
    for (; i + kTileRows <= rows; i += kTileRows) {
      tile<A, kAccumulate, kTileRows, kCols>(depth, a + i * a_row, a_row, a_depth, b, ldb, c + i * ldc, ldc);
    }
    for (; i + 4 <= rows; i += 4) tile<A, kAccumulate, 4, kCols>(depth, a + i * a_row, a_row, a_depth, b, ldb, c + i * ldc, ldc);
    for (; i < rows; ++i) tile<A, kAccumulate, 1, kCols>(depth, a + i * a_row, a_row, a_depth, b, ldb, c + i * ldc, ldc);
  }
}

// Below this many row-depth products a remainder strip of columns runs scalar, not padded.
constexpr int64_t kPaddedStripWork = 256;

template <typename A, bool kAccumulate>
void multiply(int64_t rows, int64_t cols, int64_t depth, const A* a, int64_t a_row, int64_t a_depth, const A* b,
              int64_t ldb, A* c, int64_t ldc) {
  constexpr int64_t kVector = kVectorBytes / static_cast<int64_t>(sizeof(A));  // one register
  int64_t j = 0;
  for (; j + 2 * kVector <= cols; j += 2 * kVector) {
    strip<A, kAccumulate, 2 * kVector>(rows, 2 * kVector, depth, a, a_row, a_depth, b + j, ldb, c + j, ldc);
  }
  for (; j + kVector <= cols; j += kVector) {
    strip<A, kAccumulate, kVector>(rows, kVector, depth, a, a_row, a_depth, b + j, ldb, c + j, ldc);
  }
  if (j == cols) return;
  const int64_t rest = cols - j;
  if (rows * depth < kPaddedStripWork) {
    strip<A, kAccumulate, 0>(rows, rest, depth, a, a_row, a_depth, b + j, ldb, c + j, ldc);
    return;
  }
  // The last columns as one vector strip through zero-padded copies of B and C: the scalar
  // strip kept C in memory and made a 50-wide convolution output (conv1d) 8x slower than a
  // 64-wide one. The padding lanes are computed and dropped; the others round as before.
  std::vector<A> b_pad(static_cast<size_t>(depth * kVector)), c_pad(static_cast<size_t>(rows * kVector));
  for (int64_t k = 0; k < depth; ++k) std::copy(b + k * ldb + j, b + k * ldb + cols, b_pad.data() + k * kVector);
  if constexpr (kAccumulate) {
    for (int64_t i = 0; i < rows; ++i) std::copy(c + i * ldc + j, c + i * ldc + cols, c_pad.data() + i * kVector);
  }
  strip<A, kAccumulate, kVector>(rows, kVector, depth, a, a_row, a_depth, b_pad.data(), kVector, c_pad.data(), kVector);
  for (int64_t i = 0; i < rows; ++i) std::copy(c_pad.data() + i * kVector, c_pad.data() + i * kVector + rest, c + i * ldc + j);
}

}  // namespace tile_gemm_detail

// C[rows, cols] += A[rows, depth] B[depth, cols]. A has strides (a_row, a_depth), so that a
// transposed A is a stride swap; B and C are row-major with leading dimensions ldb and ldc.
// Column strips run outermost, so that a strip of B is reused from cache by every row tile.
template <typename A>
void multiply_add(int64_t rows, int64_t cols, int64_t depth, const A* a, int64_t a_row, int64_t a_depth, const A* b,
                  int64_t ldb, A* c, int64_t ldc) {
  tile_gemm_detail::multiply<A, true>(rows, cols, depth, a, a_row, a_depth, b, ldb, c, ldc);
}

// C = A B, as multiply_add into a zeroed C (the same roundings), without reading C.
template <typename A>
void multiply_into(int64_t rows, int64_t cols, int64_t depth, const A* a, int64_t a_row, int64_t a_depth, const A* b,
                   int64_t ldb, A* c, int64_t ldc) {
  tile_gemm_detail::multiply<A, false>(rows, cols, depth, a, a_row, a_depth, b, ldb, c, ldc);
}

}  // namespace torchneuron::kernels
