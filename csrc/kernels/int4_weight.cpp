// int4 weight-only quantization: CPU PyTorch's packed layout, and the product: for a few rows of
// x, straight from the packed nibbles; for more, a float32 GEMM per dequantized slice of rows.
#include "kernels/int4_weight.h"

#include <algorithm>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/half.h"
#include "kernels/parallel.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {
namespace {

// Calls f(row_low, row_high, byte) for each byte of column `col` in the block starting at row
// `row0` with `size` rows: the two weight rows whose nibbles share that byte.
template <typename F>
inline void for_block_column(Int4PackLayout layout, int64_t row0, int64_t size, int64_t col, F&& f) {
  const int64_t half = size / 2;
  const bool halves = layout != Int4PackLayout::kPairs32 && size == int4_pack_block_rows(layout);
  for (int64_t j = 0; j < half; ++j) {
    const int64_t low = halves ? row0 + j : row0 + 2 * j;
    const int64_t high = halves ? row0 + half + j : row0 + 2 * j + 1;
    f(low, high, col * half + j);
  }
}

template <typename T>
float widen(const void* data, int64_t i) {
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<const float*>(data)[i];
  } else {
    return static_cast<float>(static_cast<const T*>(data)[i]);
  }
}

// One column of a block of `size` weight rows, dequantized into out[0, size): plain loops per
// nibble (for_block_column's order), which the compiler vectorizes.
inline void decode_column(bool halves, int64_t size, const uint8_t* col, const float* scale, const float* zero,
                          float* out) {
  const int64_t half = size / 2;
  if (halves) {
    for (int64_t j = 0; j < half; ++j) out[j] = static_cast<float>((col[j] & 15) - 8) * scale[j] + zero[j];
    for (int64_t j = 0; j < half; ++j) {
      out[half + j] = static_cast<float>((col[j] >> 4) - 8) * scale[half + j] + zero[half + j];
    }
  } else {
    for (int64_t j = 0; j < half; ++j) {
      out[2 * j] = static_cast<float>((col[j] & 15) - 8) * scale[2 * j] + zero[2 * j];
      out[2 * j + 1] = static_cast<float>((col[j] >> 4) - 8) * scale[2 * j + 1] + zero[2 * j + 1];
    }
  }
}

// The scales and zeros of `rows` weight rows from row0 in group `group`, widened to float.
template <typename T>
void load_group(const Int4MatmulArgs& a, int64_t group, int64_t row0, int64_t rows, float* scale, float* zero) {
  const int64_t base = (group * a.n + row0) * 2;
  for (int64_t r = 0; r < rows; ++r) {
    scale[r] = widen<T>(a.scales_zeros, base + 2 * r);
    zero[r] = widen<T>(a.scales_zeros, base + 2 * r + 1);
  }
}

inline bool halves_block(Int4PackLayout layout, int64_t size) {
  return layout != Int4PackLayout::kPairs32 && size == int4_pack_block_rows(layout);
}

// Rows [row0, row0 + rows) of the dequantized weight, transposed: wt [k, rows] in float32.
template <typename T>
void dequantize(const Int4MatmulArgs& a, int64_t row0, int64_t rows, float* wt) {
  const int64_t block = int4_pack_block_rows(a.layout);
  parallel_for(a.k, std::max<int64_t>(1, 16384 / std::max<int64_t>(rows, 1)), [&](int64_t begin, int64_t end) {
    std::vector<float> scale(static_cast<size_t>(rows)), zero(static_cast<size_t>(rows));
    for (int64_t c = begin; c < end; ++c) {
      if (c == begin || c % a.group_size == 0) {
        load_group<T>(a, c / a.group_size, row0, rows, scale.data(), zero.data());
      }
      for (int64_t b0 = row0; b0 < row0 + rows; b0 += block) {
        const int64_t size = std::min(block, a.n - b0);
        const uint8_t* col = a.packed + b0 * a.k / 2 + c * (size / 2);
        decode_column(halves_block(a.layout, size), size, col, scale.data() + (b0 - row0), zero.data() + (b0 - row0),
                      wt + c * rows + (b0 - row0));
      }
    }
  });
}

// Few rows of x (decoding): each block of weight rows is decoded column by column into
// registers and multiplied into per-row sums, so no dequantized weight is ever written.
constexpr int64_t kDirectRows = 16;

// A full block of S weight rows times R rows of x, the R x S sums held in registers (both sizes
// known at compile time); each column is decoded once per R rows.
template <typename T, int S, int R>
void block_rows(const Int4MatmulArgs& a, bool halves, const uint8_t* bytes, int64_t row0, const float* x,
                float* out) {
  float sums[R][S] = {}, column[S], scale[S], zero[S];
  for (int64_t c = 0; c < a.k; ++c) {
    if (c % a.group_size == 0) load_group<T>(a, c / a.group_size, row0, S, scale, zero);
    decode_column(halves, S, bytes + c * (S / 2), scale, zero, column);
    for (int i = 0; i < R; ++i) {
      const float xv = x[i * a.k + c];
      for (int r = 0; r < S; ++r) sums[i][r] += xv * column[r];
    }
  }
  for (int i = 0; i < R; ++i) std::copy_n(sums[i], S, out + i * a.n + row0);
}

template <typename T, int S>
void full_block(const Int4MatmulArgs& a, bool halves, const uint8_t* bytes, int64_t row0, const float* x, float* out) {
  int64_t i = 0;
  for (; i + 4 <= a.m; i += 4) block_rows<T, S, 4>(a, halves, bytes, row0, x + i * a.k, out + i * a.n);
  for (; i + 2 <= a.m; i += 2) block_rows<T, S, 2>(a, halves, bytes, row0, x + i * a.k, out + i * a.n);
  for (; i < a.m; ++i) block_rows<T, S, 1>(a, halves, bytes, row0, x + i * a.k, out + i * a.n);
}

template <typename T>
void product_direct(const Int4MatmulArgs& a, const float* x, float* out) {
  const int64_t block = int4_pack_block_rows(a.layout);
  parallel_for((a.n + block - 1) / block, 1, [&](int64_t begin, int64_t end) {
    float sums[kDirectRows * 64], column[64], scale[64], zero[64];
    for (int64_t b = begin; b < end; ++b) {
      const int64_t row0 = b * block, size = std::min(block, a.n - row0);
      const uint8_t* bytes = a.packed + row0 * a.k / 2;
      const bool halves = halves_block(a.layout, size);
      if (size == 64) {
        full_block<T, 64>(a, halves, bytes, row0, x, out);
        continue;
      }
      if (size == 32) {
        full_block<T, 32>(a, halves, bytes, row0, x, out);
        continue;
      }
      std::fill_n(sums, a.m * size, 0.0f);  // a partial last block
      for (int64_t c = 0; c < a.k; ++c) {
        if (c % a.group_size == 0) load_group<T>(a, c / a.group_size, row0, size, scale, zero);
        decode_column(halves, size, bytes + c * (size / 2), scale, zero, column);
        for (int64_t i = 0; i < a.m; ++i) {
          const float xv = x[i * a.k + c];
          float* sum = sums + i * size;
          for (int64_t r = 0; r < size; ++r) sum[r] += xv * column[r];
        }
      }
      for (int64_t i = 0; i < a.m; ++i) std::copy_n(sums + i * size, size, out + i * a.n + row0);
    }
  });
}

// More rows: the weight dequantized a slice of rows at a time, each slice one float32 GEMM.
template <typename T>
void product_by_slices(const Int4MatmulArgs& a, const float* x, float* out) {
  const int64_t slice = 8 * int4_pack_block_rows(a.layout);
  std::unique_ptr<float[]> wt(new float[static_cast<size_t>(a.k * std::min(slice, a.n))]);
  for (int64_t row0 = 0; row0 < a.n; row0 += slice) {
    const int64_t rows = std::min(slice, a.n - row0);
    dequantize<T>(a, row0, rows, wt.get());
    GemmArgs g;
    g.dtype = DType::kFloat32;
    g.m = a.m, g.n = rows, g.k = a.k;
    g.a = {const_cast<char*>(reinterpret_cast<const char*>(x)), 0, a.k, 1};
    g.b = {reinterpret_cast<char*>(wt.get()), 0, rows, 1};
    g.c = {reinterpret_cast<char*>(out + row0), 0, a.n, 1};
    gemm(g);
  }
}

template <typename T>
void int4_weight_mm_typed(const Int4MatmulArgs& a) {
  if (a.k == 0) {  // an empty contraction: zeros
    std::fill_n(static_cast<T*>(a.out), a.m * a.n, T(0.0f));
    return;
  }
  std::unique_ptr<float[]> x32, out32;
  const float* x = static_cast<const float*>(a.x);
  float* out = static_cast<float*>(a.out);
  if constexpr (!std::is_same_v<T, float>) {
    x32.reset(new float[static_cast<size_t>(a.m * a.k)]);
    out32.reset(new float[static_cast<size_t>(a.m * a.n)]);
    const T* xs = static_cast<const T*>(a.x);
    float* xd = x32.get();
    parallel_for(a.m * a.k, 65536, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) xd[i] = static_cast<float>(xs[i]);
    });
    x = xd;
    out = out32.get();
  }
  if (a.m <= kDirectRows) {
    product_direct<T>(a, x, out);
  } else {
    product_by_slices<T>(a, x, out);
  }
  if constexpr (!std::is_same_v<T, float>) {
    T* dst = static_cast<T*>(a.out);
    parallel_for(a.m * a.n, 65536, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) dst[i] = T(out[i]);
    });
  }
}

}  // namespace

int64_t int4_pack_block_rows(Int4PackLayout layout) { return layout == Int4PackLayout::kHalves64 ? 64 : 32; }

void int4_pack(const int32_t* q, int64_t n, int64_t k, Int4PackLayout layout, uint8_t* packed) {
  const int64_t block = int4_pack_block_rows(layout);
  const int64_t blocks = (n + block - 1) / block;
  parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const int64_t row0 = b * block, size = std::min(block, n - row0);
      uint8_t* bytes = packed + row0 * k / 2;
      for (int64_t c = 0; c < k; ++c) {
        for_block_column(layout, row0, size, c, [&](int64_t low, int64_t high, int64_t byte) {
          // As CPU does: each value cast to a byte, the high one shifted into the top nibble.
          const auto lo = static_cast<uint8_t>(q[low * k + c]), hi = static_cast<uint8_t>(q[high * k + c]);
          bytes[byte] = static_cast<uint8_t>((hi << 4) | lo);
        });
      }
    }
  });
}

void int4_weight_mm(const Int4MatmulArgs& args) {
  if (args.m == 0 || args.n == 0) return;
  switch (args.dtype) {
    case DType::kFloat32: return int4_weight_mm_typed<float>(args);
    case DType::kBFloat16: return int4_weight_mm_typed<BFloat16>(args);
    case DType::kFloat16: return int4_weight_mm_typed<Half>(args);
    default: throw runtime::KernelError(std::string("int4_weight_mm: unsupported dtype ") + dtype_name(args.dtype));
  }
}

}  // namespace torchneuron::kernels
