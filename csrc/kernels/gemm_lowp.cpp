#include "kernels/gemm_lowp.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/half.h"
#include "kernels/parallel.h"
#include "runtime/errors.h"

// Every level packs the operands into k-group panels and runs register-tiled micro-kernels over
// them: int8 with vpdpbusd (AVX512-VNNI) or 16-bit multiply-adds (pmaddwd: AVX-512, AVX2, SSE2),
// float8 as exact bfloat16 with vdpbf16ps (AVX512-BF16). VNNI and BF16 are checked on the CPU at
// run time inside the avx512 copy only; float8 without BF16 widens to float32 and runs our SGEMM.
#if defined(__x86_64__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop
#define TORCHNEURON_LOWP_SSE2 1
#else
#define TORCHNEURON_LOWP_SSE2 0
#endif
#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && \
    ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && __GNUC__ >= 11))
#define TORCHNEURON_LOWP_AVX512 1
#else
#define TORCHNEURON_LOWP_AVX512 0
#endif

namespace torchneuron::kernels {
namespace {

// ---- float8 values ----

float e4m3fn_to_float(uint8_t bits) {
  const int exponent = (bits >> 3) & 0xf, mantissa = bits & 7;
  float magnitude;
  if (exponent == 0xf && mantissa == 7) {
    magnitude = std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -9);
  } else {
    magnitude = std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
  }
  return (bits & 0x80) != 0 ? -magnitude : magnitude;
}

// Every float8 value as float32 (exact), per format.
const std::array<std::array<float, 256>, 2>& float8_table() {
  static const auto table = [] {
    std::array<std::array<float, 256>, 2> t{};
    for (int v = 0; v < 256; ++v) {
      t[0][v] = e4m3fn_to_float(static_cast<uint8_t>(v));
      t[1][v] = Half::to_float(static_cast<uint16_t>(v << 8));  // e5m2 is half's top byte
    }
    return t;
  }();
  return table;
}

// ---- blocked driver ----

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

// The calling thread's packing buffer, kept between calls (a fresh one costs a page fault per
// 4 KiB); freed after a call that needed more than kKeptBytes.
class PackBuffer {
 public:
  static constexpr size_t kKeptBytes = size_t{64} << 20;
  uint32_t* get(int64_t words) {
    const size_t bytes = (static_cast<size_t>(words) * sizeof(uint32_t) + 63) / 64 * 64 + 64;
    if (bytes > bytes_) {
      data_.reset();
      data_.reset(static_cast<uint32_t*>(std::aligned_alloc(64, bytes)));
      if (!data_) {
        bytes_ = 0;
        throw std::bad_alloc();
      }
      bytes_ = bytes;
    }
    return data_.get();
  }
  void trim() {
    if (bytes_ > kKeptBytes) {
      data_.reset();
      bytes_ = 0;
    }
  }

 private:
  std::unique_ptr<uint32_t[], AlignedFree> data_;
  size_t bytes_ = 0;
};

constexpr int64_t kSerialWork = int64_t{1} << 18;

// Writes a [groups][Width] panel of 32-bit words, each holding G consecutive k-elements (lane e
// in bits [e * 32 / G, (e + 1) * 32 / G)) of line first + r, r < count; lines past count and
// elements past k are zero. elem(line, kk) gives an element's lane bits. Lines that lie next to
// each other in memory (lines_adjacent: B row-major, A column-major) are read across, one k at a
// time, rather than along a stride.
template <int G, int Width, class Elem>
void pack_panel(int64_t first, int64_t count, int64_t k, bool lines_adjacent, const Elem& elem, uint32_t* out) {
  const int64_t groups = (k + G - 1) / G;
  if (lines_adjacent) {
    for (int64_t q = 0; q < groups; ++q) {
      uint32_t words[Width] = {};
      for (int e = 0; e < G && q * G + e < k; ++e) {
        for (int64_t r = 0; r < count; ++r) words[r] |= static_cast<uint32_t>(elem(first + r, q * G + e)) << (32 / G * e);
      }
      std::memcpy(out + q * Width, words, sizeof(words));
    }
    return;
  }
  const int64_t full = k / G;
  for (int64_t r = 0; r < Width; ++r) {
    uint32_t* to = out + r;
    if (r >= count) {
      for (int64_t q = 0; q < groups; ++q) to[q * Width] = 0;
      continue;
    }
    const int64_t line = first + r;
    for (int64_t q = 0; q < full; ++q) {
      uint32_t word = 0;
      for (int e = 0; e < G; ++e) word |= static_cast<uint32_t>(elem(line, q * G + e)) << (32 / G * e);
      to[q * Width] = word;
    }
    if (full < groups) {
      uint32_t word = 0;
      for (int e = 0; full * G + e < k; ++e) word |= static_cast<uint32_t>(elem(line, full * G + e)) << (32 / G * e);
      to[full * Width] = word;
    }
  }
}

// Whether A's rows (B's columns: transposed) lie closer together than each one's elements.
bool rows_adjacent(const LowpOperand& op) { return std::abs(op.row_stride) < std::abs(op.col_stride); }
bool cols_adjacent(const LowpOperand& op) { return std::abs(op.col_stride) < std::abs(op.row_stride); }

// C = A @ B by Isa's micro-kernel: pack_a(row, rows, panel) and pack_b(col, cols, panel) fill
// the panels (pack_panel layouts, Isa::kRows and Isa::kCols wide); store(row, rows, col, cols,
// tile, ld) takes each finished tile of accumulators.
template <class Isa, class PackA, class PackB, class Store>
void blocked_gemm(int64_t m, int64_t n, int64_t k, const PackA& pack_a, const PackB& pack_b, const Store& store) {
  constexpr int64_t R = Isa::kRows, C = Isa::kCols, G = Isa::kGroup;
  const int64_t groups = (k + G - 1) / G;
  const int64_t row_panels = (m + R - 1) / R, col_panels = (n + C - 1) / C;
  // One cache line more than the panel: 4 KiB-multiple strides would share cache sets.
  const int64_t a_panel = groups * R + 16, b_panel = groups * C + 16;
  const bool serial = m * n * k < kSerialWork;
  thread_local PackBuffer buffer;
  uint32_t* pa = buffer.get(row_panels * a_panel + col_panels * b_panel);
  uint32_t* pb = pa + row_panels * a_panel;
  struct Trim {
    PackBuffer& buffer;
    ~Trim() { buffer.trim(); }
  } trim{buffer};
  const auto grain = [&](int64_t words) {
    return serial ? std::numeric_limits<int64_t>::max() : std::max<int64_t>(1, 16384 / words);
  };
  parallel_for(row_panels, grain(a_panel), [&](int64_t begin, int64_t end) {
    for (int64_t ip = begin; ip < end; ++ip) pack_a(ip * R, std::min(R, m - ip * R), pa + ip * a_panel);
  });
  parallel_for(col_panels, grain(b_panel), [&](int64_t begin, int64_t end) {
    for (int64_t jp = begin; jp < end; ++jp) pack_b(jp * C, std::min(C, n - jp * C), pb + jp * b_panel);
  });
  // Blocks of up to 16 row panels by 8 column panels (kept in L2), halved until every thread
  // gets several.
  int64_t block_rows = std::min<int64_t>(row_panels, 16), block_cols = std::min<int64_t>(col_panels, 8);
  const auto blocks = [&] {
    return ((row_panels + block_rows - 1) / block_rows) * ((col_panels + block_cols - 1) / block_cols);
  };
  const int64_t wanted = serial ? 1 : 4 * compute_threads();
  while (blocks() < wanted && (block_rows > 1 || block_cols > 1)) {
    if (block_cols == 1 || (block_rows > 1 && block_rows * R >= block_cols * C)) {
      block_rows = (block_rows + 1) / 2;
    } else {
      block_cols = (block_cols + 1) / 2;
    }
  }
  const int64_t col_blocks = (col_panels + block_cols - 1) / block_cols;
  parallel_for(blocks(), serial ? std::numeric_limits<int64_t>::max() : 1, [&](int64_t begin, int64_t end) {
    alignas(64) typename Isa::Acc tile[R * C];
    for (int64_t block = begin; block < end; ++block) {
      const int64_t ip0 = block / col_blocks * block_rows, jp0 = block % col_blocks * block_cols;
      const int64_t ip1 = std::min(row_panels, ip0 + block_rows), jp1 = std::min(col_panels, jp0 + block_cols);
      for (int64_t ip = ip0; ip < ip1; ++ip) {
        for (int64_t jp = jp0; jp < jp1; ++jp) {
          Isa::tile(groups, pa + ip * a_panel, pb + jp * b_panel, tile);
          store(ip * R, std::min(R, m - ip * R), jp * C, std::min(C, n - jp * C), tile, C);
        }
      }
    }
  });
}

// ---- micro-kernels: tile[i * kCols + j] = sum over groups of A word (i) . B word (j) ----

#if TORCHNEURON_LOWP_SSE2
// 16-bit pairs by pmaddwd, 4 x 8 int32 accumulators; the baseline (SSE2) level.
struct Madd128 {
  using Acc = int32_t;
  static constexpr int kRows = 4, kVectors = 2, kCols = 4 * kVectors, kGroup = 2;
  static void tile(int64_t groups, const uint32_t* a, const uint32_t* b, Acc* out) {
    __m128i acc[kRows][kVectors];
    for (auto& row : acc) {
      for (auto& v : row) v = _mm_setzero_si128();
    }
    for (int64_t q = 0; q < groups; ++q, a += kRows, b += kCols) {
      __m128i bv[kVectors];
      for (int v = 0; v < kVectors; ++v) bv[v] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 4 * v));
      for (int i = 0; i < kRows; ++i) {
        const __m128i av = _mm_set1_epi32(static_cast<int>(a[i]));
        for (int v = 0; v < kVectors; ++v) acc[i][v] = _mm_add_epi32(acc[i][v], _mm_madd_epi16(av, bv[v]));
      }
    }
    for (int i = 0; i < kRows; ++i) {
      for (int v = 0; v < kVectors; ++v) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i * kCols + 4 * v), acc[i][v]);
      }
    }
  }
};
#endif

#if defined(__AVX2__)
// 16-bit pairs by vpmaddwd, 4 x 16 int32 accumulators (AVX2 has 16 registers).
struct Madd256 {
  using Acc = int32_t;
  static constexpr int kRows = 4, kVectors = 2, kCols = 8 * kVectors, kGroup = 2;
  static void tile(int64_t groups, const uint32_t* a, const uint32_t* b, Acc* out) {
    __m256i acc[kRows][kVectors];
    for (auto& row : acc) {
      for (auto& v : row) v = _mm256_setzero_si256();
    }
    for (int64_t q = 0; q < groups; ++q, a += kRows, b += kCols) {
      __m256i bv[kVectors];
      for (int v = 0; v < kVectors; ++v) bv[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 8 * v));
      for (int i = 0; i < kRows; ++i) {
        const __m256i av = _mm256_set1_epi32(static_cast<int>(a[i]));
        for (int v = 0; v < kVectors; ++v) acc[i][v] = _mm256_add_epi32(acc[i][v], _mm256_madd_epi16(av, bv[v]));
      }
    }
    for (int i = 0; i < kRows; ++i) {
      for (int v = 0; v < kVectors; ++v) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i * kCols + 8 * v), acc[i][v]);
      }
    }
  }
};
#endif

#if TORCHNEURON_LOWP_AVX512
// 12 x 32 accumulators: 24 registers cover the instructions' latency and leave room for B and
// the broadcast A word.
#define TORCHNEURON_AVX512_TILE(Name, Target, AccType, Zero, Step, Store)                       \
  struct Name {                                                                                \
    using Acc = AccType;                                                                       \
    static constexpr int kRows = 12, kVectors = 2, kCols = 16 * kVectors, kGroup = GroupOf##Name; \
    __attribute__((target(Target))) static void tile(int64_t groups, const uint32_t* a, const uint32_t* b, \
                                                     Acc* out) {                               \
      decltype(Zero) acc[kRows][kVectors];                                                     \
      for (int i = 0; i < kRows; ++i) {                                                        \
        for (int v = 0; v < kVectors; ++v) acc[i][v] = Zero;                                   \
      }                                                                                        \
      for (int64_t q = 0; q < groups; ++q, a += kRows, b += kCols) {                           \
        __m512i bv[kVectors];                                                                  \
        for (int v = 0; v < kVectors; ++v) bv[v] = _mm512_loadu_si512(b + 16 * v);             \
        for (int i = 0; i < kRows; ++i) {                                                      \
          const __m512i av = _mm512_set1_epi32(static_cast<int>(a[i]));                        \
          for (int v = 0; v < kVectors; ++v) acc[i][v] = Step(acc[i][v], av, bv[v]);           \
        }                                                                                      \
      }                                                                                        \
      for (int i = 0; i < kRows; ++i) {                                                        \
        for (int v = 0; v < kVectors; ++v) Store(out + i * kCols + 16 * v, acc[i][v]);         \
      }                                                                                        \
    }                                                                                          \
  };

constexpr int GroupOfMadd512 = 2, GroupOfVnni512 = 4, GroupOfBf16x512 = 2;
#define TORCHNEURON_MADD_STEP(acc, a, b) _mm512_add_epi32(acc, _mm512_madd_epi16(a, b))
// GCC 12 copies and spills the accumulators around the vpdpbusd / vdpbf16ps intrinsics; these
// accumulate in place (AT&T order: B, then the unsigned / broadcast A, then the accumulator).
__attribute__((target("avx512f,avx512vnni"), always_inline)) inline __m512i vnni_step(__m512i acc, __m512i a,
                                                                                     __m512i b) {
  asm("vpdpbusd %[b], %[a], %[acc]" : [acc] "+v"(acc) : [a] "v"(a), [b] "v"(b));
  return acc;
}
__attribute__((target("avx512f,avx512bf16"), always_inline)) inline __m512 bf16_step(__m512 acc, __m512i a,
                                                                                    __m512i b) {
  asm("vdpbf16ps %[b], %[a], %[acc]" : [acc] "+v"(acc) : [a] "v"(a), [b] "v"(b));
  return acc;
}
#define TORCHNEURON_VNNI_STEP(acc, a, b) vnni_step(acc, a, b)
#define TORCHNEURON_BF16_STEP(acc, a, b) bf16_step(acc, a, b)
#define TORCHNEURON_STORE_I(p, v) _mm512_storeu_si512(p, v)
#define TORCHNEURON_STORE_F(p, v) _mm512_storeu_ps(p, v)
TORCHNEURON_AVX512_TILE(Madd512, "avx512f,avx512bw", int32_t, _mm512_setzero_si512(), TORCHNEURON_MADD_STEP,
                        TORCHNEURON_STORE_I)
TORCHNEURON_AVX512_TILE(Vnni512, "avx512f,avx512bw,avx512vnni", int32_t, _mm512_setzero_si512(),
                        TORCHNEURON_VNNI_STEP, TORCHNEURON_STORE_I)
TORCHNEURON_AVX512_TILE(Bf16x512, "avx512f,avx512bw,avx512vl,avx512bf16", float, _mm512_setzero_ps(),
                        TORCHNEURON_BF16_STEP, TORCHNEURON_STORE_F)

bool cpu_has_vnni() {
  static const bool has = __builtin_cpu_supports("avx512vnni");
  return has;
}
bool cpu_has_bf16() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
}
#endif

// ---- int8 ----

template <class T>
T load(const LowpOperand& op, int64_t row, int64_t col) {
  return static_cast<const T*>(op.data)[row * op.row_stride + col * op.col_stride];
}

// 16-bit pairs: A's element widened (zero- or sign-extended), B's sign-extended.
template <class Isa>
void int8_gemm_madd(const Int8GemmArgs& g) {
  const auto pack_a = [&](int64_t row, int64_t rows, uint32_t* out) {
    if (g.a_unsigned) {
      pack_panel<2, Isa::kRows>(row, rows, g.k, rows_adjacent(g.a), [&](int64_t i, int64_t kk) { return load<uint8_t>(g.a, i, kk); }, out);
    } else {
      pack_panel<2, Isa::kRows>(
          row, rows, g.k, rows_adjacent(g.a), [&](int64_t i, int64_t kk) { return static_cast<uint16_t>(load<int8_t>(g.a, i, kk)); }, out);
    }
  };
  const auto pack_b = [&](int64_t col, int64_t cols, uint32_t* out) {
    pack_panel<2, Isa::kCols>(
        col, cols, g.k, cols_adjacent(g.b), [&](int64_t j, int64_t kk) { return static_cast<uint16_t>(load<int8_t>(g.b, kk, j)); }, out);
  };
  const auto store = [&](int64_t i0, int64_t rows, int64_t j0, int64_t cols, const int32_t* tile, int64_t ld) {
    for (int64_t r = 0; r < rows; ++r) std::memcpy(g.c + (i0 + r) * g.ldc + j0, tile + r * ld, cols * sizeof(int32_t));
  };
  blocked_gemm<Isa>(g.m, g.n, g.k, pack_a, pack_b, store);
}

#if TORCHNEURON_LOWP_AVX512
// vpdpbusd multiplies unsigned by signed bytes: a signed A is read as a + 128 (its bits ^ 0x80)
// and 128 * (column sum of B) taken off each result, in wrap-around int32.
void int8_gemm_vnni(const Int8GemmArgs& g) {
  std::vector<uint32_t> correction(g.a_unsigned ? 0 : g.n);
  const uint8_t flip = g.a_unsigned ? 0 : 0x80;
  const auto pack_a = [&](int64_t row, int64_t rows, uint32_t* out) {
    pack_panel<4, Vnni512::kRows>(
        row, rows, g.k, rows_adjacent(g.a), [&](int64_t i, int64_t kk) { return static_cast<uint8_t>(load<uint8_t>(g.a, i, kk) ^ flip); },
        out);
  };
  const auto pack_b = [&](int64_t col, int64_t cols, uint32_t* out) {
    pack_panel<4, Vnni512::kCols>(
        col, cols, g.k, cols_adjacent(g.b), [&](int64_t j, int64_t kk) { return load<uint8_t>(g.b, kk, j); }, out);
    if (g.a_unsigned) return;
    // Column sums from the packed panel, where each column's bytes are one word per k-group.
    int32_t sums[Vnni512::kCols] = {};
    for (int64_t q = 0; q < (g.k + 3) / 4; ++q) {
      const auto* bytes = reinterpret_cast<const int8_t*>(out + q * Vnni512::kCols);
      for (int r = 0; r < Vnni512::kCols; ++r) sums[r] += bytes[4 * r] + bytes[4 * r + 1] + bytes[4 * r + 2] + bytes[4 * r + 3];
    }
    for (int64_t r = 0; r < cols; ++r) correction[col + r] = static_cast<uint32_t>(sums[r]) * 128u;
  };
  const auto store = [&](int64_t i0, int64_t rows, int64_t j0, int64_t cols, const int32_t* tile, int64_t ld) {
    for (int64_t r = 0; r < rows; ++r) {
      int32_t* to = g.c + (i0 + r) * g.ldc + j0;
      const int32_t* from = tile + r * ld;
      if (g.a_unsigned) {
        std::memcpy(to, from, cols * sizeof(int32_t));
      } else {
        for (int64_t c = 0; c < cols; ++c) {
          to[c] = static_cast<int32_t>(static_cast<uint32_t>(from[c]) - correction[j0 + c]);
        }
      }
    }
  };
  blocked_gemm<Vnni512>(g.m, g.n, g.k, pack_a, pack_b, store);
}
#endif

// ---- float8 ----

// Stores tile rows with the epilogue: value * scale (+ bias), rounded once to C's dtype.
struct ScaledStore {
  const ScaledGemmArgs& g;
  void operator()(int64_t i0, int64_t rows, int64_t j0, int64_t cols, const float* tile, int64_t ld) const {
    constexpr int64_t kChunk = 256;
    float values[kChunk];
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = i0 + r;
      for (int64_t c0 = 0; c0 < cols; c0 += kChunk) {
        const int64_t count = std::min(kChunk, cols - c0), j = j0 + c0;
        const float* from = tile + r * ld + c0;
        if (g.rowwise) {
          const float sa = g.scale_a[i];
          for (int64_t c = 0; c < count; ++c) values[c] = from[c] * (sa * g.scale_b[j + c]);
        } else {
          const float s = g.scale_a[0] * g.scale_b[0];
          for (int64_t c = 0; c < count; ++c) values[c] = from[c] * s;
        }
        if (g.bias != nullptr) {
          for (int64_t c = 0; c < count; ++c) values[c] += g.bias[j + c];
        }
        write(i, j, count, values);
      }
    }
  }
  void write(int64_t i, int64_t j, int64_t count, const float* values) const {
    char* row = static_cast<char*>(g.c) + (i * g.ldc + j) * static_cast<int64_t>(element_size(g.c_dtype));
    if (g.c_dtype == DType::kFloat32) {
      std::memcpy(row, values, count * sizeof(float));
    } else if (g.c_dtype == DType::kBFloat16) {
      auto* to = reinterpret_cast<uint16_t*>(row);
      for (int64_t c = 0; c < count; ++c) to[c] = BFloat16(values[c]).bits;
    } else {
      auto* to = reinterpret_cast<uint16_t*>(row);
      for (int64_t c = 0; c < count; ++c) to[c] = Half::from_float(values[c]);
    }
  }
};

// The operands widened to float32 (exact), our SGEMM, then the epilogue.
void scaled_gemm_widened(const ScaledGemmArgs& g) {
  const auto& table = float8_table();
  const float* ta = table[static_cast<int>(g.a_format)].data();
  const float* tb = table[static_cast<int>(g.b_format)].data();
  std::vector<float> a(g.m * g.k), b(g.k * g.n), c(g.m * g.n);
  parallel_for(g.m, std::max<int64_t>(1, 65536 / std::max<int64_t>(g.k, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      for (int64_t kk = 0; kk < g.k; ++kk) a[i * g.k + kk] = ta[load<uint8_t>(g.a, i, kk)];
    }
  });
  // B as [n, k] rows (B transposed, row-major): one contiguous run per column of B.
  parallel_for(g.n, std::max<int64_t>(1, 65536 / std::max<int64_t>(g.k, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      for (int64_t kk = 0; kk < g.k; ++kk) b[j * g.k + kk] = tb[load<uint8_t>(g.b, kk, j)];
    }
  });
  if (g.k > 0) {
    GemmArgs s;
    s.dtype = DType::kFloat32;
    s.m = g.m, s.n = g.n, s.k = g.k;
    s.a = {reinterpret_cast<char*>(a.data()), 0, g.k, 1};
    s.b = {reinterpret_cast<char*>(b.data()), 0, 1, g.k};
    s.c = {reinterpret_cast<char*>(c.data()), 0, g.n, 1};
    gemm(s);
  }
  const ScaledStore store{g};
  parallel_for(g.m, std::max<int64_t>(1, 16384 / std::max<int64_t>(g.n, 1)), [&](int64_t begin, int64_t end) {
    store(begin, end - begin, 0, g.n, c.data() + begin * g.n, g.n);
  });
}

#if TORCHNEURON_LOWP_AVX512
// float8 is exact in bfloat16: packed straight into bfloat16 k-pair panels.
void scaled_gemm_bf16(const ScaledGemmArgs& g) {
  const auto& table = float8_table();
  std::array<std::array<uint16_t, 256>, 2> bf16{};
  for (int f = 0; f < 2; ++f) {
    for (int v = 0; v < 256; ++v) bf16[f][v] = static_cast<uint16_t>(float_bits(table[f][v]) >> 16);
  }
  const uint16_t* ta = bf16[static_cast<int>(g.a_format)].data();
  const uint16_t* tb = bf16[static_cast<int>(g.b_format)].data();
  const auto pack_a = [&](int64_t row, int64_t rows, uint32_t* out) {
    pack_panel<2, Bf16x512::kRows>(row, rows, g.k, rows_adjacent(g.a), [&](int64_t i, int64_t kk) { return ta[load<uint8_t>(g.a, i, kk)]; },
                                   out);
  };
  const auto pack_b = [&](int64_t col, int64_t cols, uint32_t* out) {
    pack_panel<2, Bf16x512::kCols>(col, cols, g.k, cols_adjacent(g.b), [&](int64_t j, int64_t kk) { return tb[load<uint8_t>(g.b, kk, j)]; },
                                   out);
  };
  blocked_gemm<Bf16x512>(g.m, g.n, g.k, pack_a, pack_b, ScaledStore{g});
}
#endif

}  // namespace

void scaled_gemm(const ScaledGemmArgs& g) {
  if (g.m == 0 || g.n == 0) return;
#if TORCHNEURON_LOWP_AVX512
  if (cpu_has_bf16()) return scaled_gemm_bf16(g);
#endif
  scaled_gemm_widened(g);
}

void int8_gemm(const Int8GemmArgs& g) {
  if (g.m == 0 || g.n == 0) return;
#if TORCHNEURON_LOWP_AVX512
  if (cpu_has_vnni()) return int8_gemm_vnni(g);
  return int8_gemm_madd<Madd512>(g);
#elif defined(__AVX2__)
  return int8_gemm_madd<Madd256>(g);
#elif TORCHNEURON_LOWP_SSE2
  return int8_gemm_madd<Madd128>(g);
#else
  throw runtime::KernelError("int8_gemm is not built for this target");
#endif
}

const char* lowp_gemm_kernels() {
#if TORCHNEURON_LOWP_AVX512
  if (cpu_has_bf16() && cpu_has_vnni()) return "float8: avx512-bf16, int8: avx512-vnni";
  if (cpu_has_vnni()) return "float8: float32 sgemm, int8: avx512-vnni";
  if (cpu_has_bf16()) return "float8: avx512-bf16, int8: avx512 pmaddwd";
  return "float8: float32 sgemm, int8: avx512 pmaddwd";
#elif defined(__AVX2__)
  return "float8: float32 sgemm, int8: avx2 pmaddwd";
#else
  return "float8: float32 sgemm, int8: sse2 pmaddwd";
#endif
}

}  // namespace torchneuron::kernels
