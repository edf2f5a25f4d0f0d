// int4 weight-only quantization over device buffers, in CPU PyTorch's packed layout: the pack of
// _convert_weight_to_int4pack_for_cpu and the product of _weight_int4pack_mm_for_cpu.
#pragma once

#include <cstdint>

#include "kernels/strided.h"

namespace torchneuron::kernels {

// CPU PyTorch's packed int4 layout, which follows ATen's instruction-set level. Weight rows go in
// blocks of 64 (avx512) or 32 (avx2, default) rows, the last block possibly smaller; a block of
// s rows stores, for each column k, s / 2 bytes. kPairs: byte j holds rows 2j (low nibble) and
// 2j + 1 (high), as every partial block does too. kHalves: byte j holds rows j and s / 2 + j.
enum class Int4PackLayout : uint8_t { kPairs32, kHalves32, kHalves64 };

int64_t int4_pack_block_rows(Int4PackLayout layout);

// Packs q [n, k] (int32, row-major, values 0..15) into n * k / 2 bytes; n % 16 == 0, k even.
void int4_pack(const int32_t* q, int64_t n, int64_t k, Int4PackLayout layout, uint8_t* packed);

// out [m, n] = x [m, k] @ w.T where w[r][c] = (q[r][c] - 8) * scale + zero, scale and zero from
// scales_zeros [k / group_size, n, 2] at [c / group_size][r]. x, scales_zeros and out share the
// dtype (float32, bfloat16, float16); the products and sums are float32, then one rounding.
struct Int4MatmulArgs {
  DType dtype = DType::kFloat32;
  int64_t m = 0, n = 0, k = 0, group_size = 0;
  const void* x = nullptr;
  const uint8_t* packed = nullptr;
  const void* scales_zeros = nullptr;
  void* out = nullptr;
  Int4PackLayout layout = Int4PackLayout::kPairs32;
};
void int4_weight_mm(const Int4MatmulArgs& args);

}  // namespace torchneuron::kernels
