// int4 weight-only quantization: CPU PyTorch's packed layout, and the product as a dequantizing
// pass into a float32 weight followed by the float32 GEMM.
#include "kernels/int4_weight.h"

#include <algorithm>
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

// The dequantized weight, transposed: wt [k, n] in float32.
template <typename T>
void dequantize(const Int4MatmulArgs& a, float* wt) {
  const int64_t block = int4_pack_block_rows(a.layout);
  parallel_for(a.k, std::max<int64_t>(1, 16384 / std::max<int64_t>(a.n, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const int64_t group = c / a.group_size;
      float* row = wt + c * a.n;
      for (int64_t row0 = 0; row0 < a.n; row0 += block) {
        const int64_t size = std::min(block, a.n - row0);
        const uint8_t* bytes = a.packed + row0 * a.k / 2;
        for_block_column(a.layout, row0, size, c, [&](int64_t low, int64_t high, int64_t byte) {
          const uint8_t v = bytes[byte];
          const int64_t sl = (group * a.n + low) * 2, sh = (group * a.n + high) * 2;
          row[low] = static_cast<float>((v & 15) - 8) * widen<T>(a.scales_zeros, sl) + widen<T>(a.scales_zeros, sl + 1);
          row[high] = static_cast<float>((v >> 4) - 8) * widen<T>(a.scales_zeros, sh) + widen<T>(a.scales_zeros, sh + 1);
        });
      }
    }
  });
}

template <typename T>
void int4_weight_mm_typed(const Int4MatmulArgs& a) {
  if (a.k == 0) {  // an empty contraction: zeros
    std::fill_n(static_cast<T*>(a.out), a.m * a.n, T(0.0f));
    return;
  }
  std::vector<float> wt(static_cast<size_t>(a.k * a.n));
  dequantize<T>(a, wt.data());
  std::vector<float> x32, out32;
  const float* x = static_cast<const float*>(a.x);
  float* out = static_cast<float*>(a.out);
  if constexpr (!std::is_same_v<T, float>) {
    x32.resize(static_cast<size_t>(a.m * a.k));
    out32.resize(static_cast<size_t>(a.m * a.n));
    const T* xs = static_cast<const T*>(a.x);
    parallel_for(a.m * a.k, 65536, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) x32[i] = static_cast<float>(xs[i]);
    });
    x = x32.data();
    out = out32.data();
  }
  GemmArgs g;
  g.dtype = DType::kFloat32;
  g.m = a.m, g.n = a.n, g.k = a.k;
  g.a = {const_cast<char*>(reinterpret_cast<const char*>(x)), 0, a.k, 1};
  g.b = {reinterpret_cast<char*>(wt.data()), 0, a.n, 1};
  g.c = {reinterpret_cast<char*>(out), 0, a.n, 1};
  gemm(g);
  if constexpr (!std::is_same_v<T, float>) {
    T* dst = static_cast<T*>(a.out);
    parallel_for(a.m * a.n, 65536, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) dst[i] = T(out32[i]);
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
