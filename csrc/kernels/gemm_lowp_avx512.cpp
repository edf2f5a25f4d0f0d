// The avx512 copy's low-precision micro-kernels: int8 by vpdpbusd (AVX512-VNNI) or vpmaddwd,
// float8 as bfloat16 by vdpbf16ps (AVX512-BF16); lines contiguous along k packed 16 x 16 at once.
#include "kernels/gemm_lowp_common.h"

#include <vector>

#if TORCHNEURON_LOWP_AVX512
namespace torchneuron::kernels::lowp {
namespace {

#define TORCHNEURON_AVX512_TILE(Name, Target, AccType, Zero, Step, Store)                       \
  struct Name {                                                                                \
    using Acc = AccType;                                                                       \
    static constexpr int kRows = 12, kVectors = 2, kCols = 16 * kVectors, kGroup = GroupOf##Name; \
    template <int R>                                                                           \
    __attribute__((target(Target))) static void tile(int64_t groups, const uint32_t* a, const uint32_t* b, \
                                                     Acc* out) {                               \
      decltype(Zero) acc[R][kVectors];                                                         \
      for (int i = 0; i < R; ++i) {                                                            \
        for (int v = 0; v < kVectors; ++v) acc[i][v] = Zero;                                   \
      }                                                                                        \
      for (int64_t q = 0; q < groups; ++q, a += kRows, b += kCols) {                           \
        __m512i bv[kVectors];                                                                  \
        for (int v = 0; v < kVectors; ++v) bv[v] = _mm512_loadu_si512(b + 16 * v);             \
        for (int i = 0; i < R; ++i) {                                                          \
          const __m512i av = _mm512_set1_epi32(static_cast<int>(a[i]));                        \
          for (int v = 0; v < kVectors; ++v) acc[i][v] = Step(acc[i][v], av, bv[v]);           \
        }                                                                                      \
      }                                                                                        \
      for (int i = 0; i < R; ++i) {                                                            \
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

}  // namespace

bool cpu_has_vnni() {
  static const bool has = __builtin_cpu_supports("avx512vnni");
  return has;
}
bool cpu_has_bf16() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
}

namespace {

// ---- AVX-512 packing of lines contiguous along k (A row-major, B column-major) ----

// Transposes 16 rows of 16 words in place (rows[j] becomes column j).
inline void transpose16(__m512i rows[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(rows[i], rows[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(rows[i], rows[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // u[i + c]: 128-bit lane L holds word 4L + c of rows i..i+3
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int c = 0; c < 4; ++c) {  // gather lane L of the four row groups into row 4L + c
    const __m512i lo01 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44), hi01 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xee);
    const __m512i lo23 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
    const __m512i hi23 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xee);
    rows[c] = _mm512_shuffle_i32x4(lo01, lo23, 0x88);
    rows[4 + c] = _mm512_shuffle_i32x4(lo01, lo23, 0xdd);
    rows[8 + c] = _mm512_shuffle_i32x4(hi01, hi23, 0x88);
    rows[12 + c] = _mm512_shuffle_i32x4(hi01, hi23, 0xdd);
  }
}

// pack_panel's layout for lines of bytes contiguous along k (line r at base + r * stride):
// 16 words (16 k-groups) of 16 lines at a time, made by words(p, elements) from a line's bytes
// at p (elements of them valid; the rest read as zero) and transposed.
template <int G, int Width, class Words>
void pack_panel_k_contiguous(const uint8_t* base, int64_t stride, int64_t count, int64_t k, const Words& words,
                             uint32_t* out) {
  const int64_t groups = (k + G - 1) / G;
  for (int64_t q = 0; q < groups; q += 16) {
    const int64_t elements = std::min<int64_t>(16 * G, k - q * G), filled = std::min<int64_t>(16, groups - q);
    for (int r = 0; r < Width; r += 16) {
      __m512i block[16];
      for (int i = 0; i < 16; ++i) {
        block[i] = r + i < count ? words(base + (r + i) * stride + q * G, elements) : _mm512_setzero_si512();
      }
      transpose16(block);
      const auto mask = static_cast<__mmask16>((1u << std::min(16, Width - r)) - 1u);
      for (int64_t j = 0; j < filled; ++j) _mm512_mask_storeu_epi32(out + (q + j) * Width + r, mask, block[j]);
    }
  }
}

// Groups [q0, q1) of every 32-column panel (panel p at out + p * panel_words) of a B whose
// columns lie side by side (row-major), for vpdpbusd: word [q][c] holds rows 4q..4q+3 of column
// c, one byte each; columns past n and rows past k are zero.
void pack_quads_across_rows(const uint8_t* b, int64_t row_stride, int64_t n, int64_t k, int64_t q0, int64_t q1,
                            uint32_t* out, int64_t panel_words) {
  for (int64_t q = q0; q < q1; ++q) {
    for (int64_t c = 0; c < (n + 31) / 32 * 32; c += 16) {
      const auto mask = static_cast<__mmask16>((1u << std::clamp<int64_t>(n - c, 0, 16)) - 1u);
      __m128i x[4];
      for (int e = 0; e < 4; ++e) {
        x[e] = 4 * q + e < k ? _mm_maskz_loadu_epi8(mask, b + (4 * q + e) * row_stride + c) : _mm_setzero_si128();
      }
      const __m128i lo01 = _mm_unpacklo_epi8(x[0], x[1]), hi01 = _mm_unpackhi_epi8(x[0], x[1]);
      const __m128i lo23 = _mm_unpacklo_epi8(x[2], x[3]), hi23 = _mm_unpackhi_epi8(x[2], x[3]);
      auto* to = reinterpret_cast<__m128i*>(out + c / 32 * panel_words + q * 32 + c % 32);
      _mm_storeu_si128(to, _mm_unpacklo_epi16(lo01, lo23));
      _mm_storeu_si128(to + 1, _mm_unpackhi_epi16(lo01, lo23));
      _mm_storeu_si128(to + 2, _mm_unpacklo_epi16(hi01, hi23));
      _mm_storeu_si128(to + 3, _mm_unpackhi_epi16(hi01, hi23));
    }
  }
}

// pack_quads_across_rows for groups [0, groups) of a block of n <= 32 * panels columns, 64
// columns at a time: byte unpacks within 128-bit lanes, then a 4 x 4 transpose of the lanes.
void pack_quads_across_rows_64(const uint8_t* b, int64_t row_stride, int64_t n, int64_t k, int64_t groups,
                               uint32_t* out, int64_t panel_words) {
  for (int64_t q = 0; q < groups; ++q) {
    for (int64_t c = 0; c < n; c += 64) {
      const __mmask64 mask = n - c >= 64 ? ~__mmask64{0} : (__mmask64{1} << (n - c)) - 1;
      __m512i x[4];
      for (int e = 0; e < 4; ++e) {
        x[e] = 4 * q + e < k ? _mm512_maskz_loadu_epi8(mask, b + (4 * q + e) * row_stride + c) : _mm512_setzero_si512();
      }
      const __m512i lo01 = _mm512_unpacklo_epi8(x[0], x[1]), hi01 = _mm512_unpackhi_epi8(x[0], x[1]);
      const __m512i lo23 = _mm512_unpacklo_epi8(x[2], x[3]), hi23 = _mm512_unpackhi_epi8(x[2], x[3]);
      // w[i], 128-bit lane L: the quads of columns 16L + 4i .. 16L + 4i + 3.
      const __m512i w0 = _mm512_unpacklo_epi16(lo01, lo23), w1 = _mm512_unpackhi_epi16(lo01, lo23);
      const __m512i w2 = _mm512_unpacklo_epi16(hi01, hi23), w3 = _mm512_unpackhi_epi16(hi01, hi23);
      const __m512i t0 = _mm512_shuffle_i32x4(w0, w1, 0x44), t1 = _mm512_shuffle_i32x4(w2, w3, 0x44);
      const __m512i t2 = _mm512_shuffle_i32x4(w0, w1, 0xee), t3 = _mm512_shuffle_i32x4(w2, w3, 0xee);
      uint32_t* to = out + c / 32 * panel_words + q * 32;
      _mm512_storeu_si512(to, _mm512_shuffle_i32x4(t0, t1, 0x88));  // columns c .. c + 15
      _mm512_storeu_si512(to + 16, _mm512_shuffle_i32x4(t0, t1, 0xdd));
      if (c + 32 < n) {
        _mm512_storeu_si512(to + panel_words, _mm512_shuffle_i32x4(t2, t3, 0x88));
        _mm512_storeu_si512(to + panel_words + 16, _mm512_shuffle_i32x4(t2, t3, 0xdd));
      }
    }
  }
}

// 64 bytes from p, `count` of them (the rest zero), each xor-ed with flip.
inline __m512i load_bytes(const uint8_t* p, int64_t count, uint8_t flip) {
  const __mmask64 mask = count >= 64 ? ~__mmask64{0} : (__mmask64{1} << count) - 1;
  return _mm512_xor_si512(_mm512_maskz_loadu_epi8(mask, p), _mm512_maskz_set1_epi8(mask, static_cast<char>(flip)));
}

// 32 float8 values to bfloat16 by a 128-entry table of magnitudes (four registers), sign or-ed in.
struct Float8ToBf16 {
  __m512i table[4];
  explicit Float8ToBf16(const uint16_t* bf16) {
    for (int t = 0; t < 4; ++t) table[t] = _mm512_loadu_si512(bf16 + 32 * t);
  }
  __m512i operator()(const uint8_t* p, int64_t count) const {
    const __mmask32 mask = count >= 32 ? ~__mmask32{0} : (__mmask32{1} << count) - 1;
    const __m512i x = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(mask, p));
    const __m512i low = _mm512_permutex2var_epi16(table[0], x, table[1]);
    const __m512i high = _mm512_permutex2var_epi16(table[2], x, table[3]);
    const __m512i magnitude = _mm512_mask_blend_epi16(_mm512_test_epi16_mask(x, _mm512_set1_epi16(0x40)), low, high);
    return _mm512_or_si512(magnitude, _mm512_slli_epi16(_mm512_and_si512(x, _mm512_set1_epi16(0x80)), 8));
  }
};

// Groups [q0, q1) of every 32-column panel (panel p at out + p * panel_words) of a float8 B whose
// columns lie side by side (row-major), for vdpbf16ps: word [q][c] holds rows 2q, 2q+1 of column
// c as bfloat16; columns past n and rows past k are zero.
void pack_pairs_across_rows(const uint8_t* b, int64_t row_stride, int64_t n, int64_t k, int64_t q0, int64_t q1,
                            const Float8ToBf16& convert, uint32_t* out, int64_t panel_words) {
  for (int64_t q = q0; q < q1; ++q) {
    for (int64_t c = 0; c < n; c += 32) {
      const __m512i x = convert(b + 2 * q * row_stride + c, n - c);
      const __m512i y = 2 * q + 1 < k ? convert(b + (2 * q + 1) * row_stride + c, n - c) : _mm512_setzero_si512();
      // Per 128-bit lane L: low holds columns 8L..8L+3, high 8L+4..8L+7; put them in column order.
      const __m512i low = _mm512_unpacklo_epi16(x, y), high = _mm512_unpackhi_epi16(x, y);
      const __m512i first = _mm512_shuffle_i32x4(low, high, 0x44), second = _mm512_shuffle_i32x4(low, high, 0xee);
      uint32_t* to = out + c / 32 * panel_words + q * 32;
      _mm512_storeu_si512(to, _mm512_shuffle_i32x4(first, first, 0xd8));
      _mm512_storeu_si512(to + 16, _mm512_shuffle_i32x4(second, second, 0xd8));
    }
  }
}

// The sums of a packed 32-column VNNI panel's columns over `groups` k-groups (four signed bytes
// a word), by vpdpbusd with an all-ones unsigned operand: exact in int32.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void vnni_column_sums(const uint32_t* panel, int64_t groups,
                                                                             int32_t sums[32]) {
  const __m512i ones = _mm512_set1_epi8(1);
  __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
  for (int64_t q = 0; q < groups; ++q, panel += 32) {
    lo = vnni_step(lo, ones, _mm512_loadu_si512(panel));
    hi = vnni_step(hi, ones, _mm512_loadu_si512(panel + 16));
  }
  _mm512_storeu_si512(sums, lo);
  _mm512_storeu_si512(sums + 16, hi);
}

// Up to this many row panels of A (as for streamed B panels), a row-major B is read in blocks
// (below), not packed whole.
constexpr int64_t kBlockedBRowPanels = kStreamRowPanels;

// Few rows of A times a row-major B: packing all of B first writes and reads it again (three
// passes over memory where the product needs one). Instead each thread owns column blocks of
// kBlockCols and walks down k in chunks of kChunkGroups groups, packing each chunk (B read once,
// kBlockCols bytes of a row at a time) into a buffer that stays in cache and running the tiles
// over it; the chunks' int32 sums (exact, wrap-around) are added into C.
template <class PackA>
void int8_vnni_row_major_b_blocks(const Int8GemmArgs& g, const PackA& pack_a, uint8_t flip) {
  constexpr int64_t R = Vnni512::kRows, C = Vnni512::kCols;
  constexpr int64_t kBlockCols = 512, kChunkGroups = 128;  // a 256 KiB packed chunk
  static constexpr auto tiles = tile_table<Vnni512>(std::make_integer_sequence<int, Vnni512::kRows>());
  const int64_t groups = (g.k + 3) / 4, row_panels = (g.m + R - 1) / R;
  const int64_t a_panel = groups * R + 16, chunk_panel = kChunkGroups * C + 16;
  thread_local PackBuffer a_buffer;
  uint32_t* pa = a_buffer.get(row_panels * a_panel);
  struct Trim {
    PackBuffer& buffer;
    ~Trim() { buffer.trim(); }
  } trim{a_buffer};
  for (int64_t ip = 0; ip < row_panels; ++ip) pack_a(ip * R, std::min(R, g.m - ip * R), pa + ip * a_panel);
  const auto* b = static_cast<const uint8_t*>(g.b.data);
  const int64_t col_blocks = (g.n + kBlockCols - 1) / kBlockCols;
  parallel_for(col_blocks, 1, [&](int64_t begin, int64_t end) {
    thread_local PackBuffer chunk_buffer;
    uint32_t* chunk = chunk_buffer.get(kBlockCols / C * chunk_panel);
    alignas(64) int32_t tile[R * C];
    for (int64_t cb = begin; cb < end; ++cb) {
      const int64_t col0 = cb * kBlockCols, cols = std::min(kBlockCols, g.n - col0);
      for (int64_t q0 = 0; q0 < groups; q0 += kChunkGroups) {
        const int64_t q1 = std::min(groups, q0 + kChunkGroups);
        pack_quads_across_rows_64(b + 4 * q0 * g.b.row_stride + col0, g.b.row_stride, cols, g.k - 4 * q0, q1 - q0,
                                  chunk, chunk_panel);
        for (int64_t p = 0; p * C < cols; ++p) {
          const uint32_t* panel = chunk + p * chunk_panel;
          const int64_t j0 = col0 + p * C, width = std::min(C, cols - p * C);
          alignas(64) int32_t correction[C] = {};
          if (flip != 0) {  // 128 * this chunk's column sums of B
            vnni_column_sums(panel, q1 - q0, correction);
            for (int r = 0; r < C; ++r) correction[r] = static_cast<int32_t>(static_cast<uint32_t>(correction[r]) * 128u);
          }
          for (int64_t ip = 0; ip < row_panels; ++ip) {
            const int64_t rows = std::min(R, g.m - ip * R);
            tiles[rows - 1](q1 - q0, pa + ip * a_panel + q0 * R, panel, tile);
            for (int64_t r = 0; r < rows; ++r) {
              int32_t* to = g.c + (ip * R + r) * g.ldc + j0;
              const int32_t* from = tile + r * C;
              for (int64_t c = 0; c < width; ++c) {
                const uint32_t value = static_cast<uint32_t>(from[c]) - static_cast<uint32_t>(correction[c]);
                to[c] = static_cast<int32_t>(q0 == 0 ? value : static_cast<uint32_t>(to[c]) + value);
              }
            }
          }
        }
      }
    }
    chunk_buffer.trim();
  });
}

// vpdpbusd multiplies unsigned by signed bytes: a signed A is read as a + 128 (its bits ^ 0x80)
// and 128 * (column sum of B) taken off each result, in wrap-around int32.
void int8_gemm_vnni(const Int8GemmArgs& g) {
  std::vector<uint32_t> correction(g.a_unsigned ? 0 : g.n);
  const uint8_t flip = g.a_unsigned ? 0 : 0x80;
  const auto* a = static_cast<const uint8_t*>(g.a.data);
  const auto* b = static_cast<const uint8_t*>(g.b.data);
  const auto pack_a = [&](int64_t row, int64_t rows, uint32_t* out) {
    if (g.a.col_stride == 1) {
      pack_panel_k_contiguous<4, Vnni512::kRows>(
          a + row * g.a.row_stride, g.a.row_stride, rows, g.k,
          [&](const uint8_t* p, int64_t count) { return load_bytes(p, count, flip); }, out);
      return;
    }
    const auto element = [&](int64_t i, int64_t kk) { return static_cast<uint8_t>(load<uint8_t>(g.a, i, kk) ^ flip); };
    pack_panel<4, Vnni512::kRows>(row, rows, g.k, rows_adjacent(g.a), element, out);
  };
  // Column sums from a packed panel, where each column's bytes are one word per k-group.
  const auto column_sums = [&](int64_t col, int64_t cols, const uint32_t* panel) {
    if (g.a_unsigned) return;
    alignas(64) int32_t sums[Vnni512::kCols];
    vnni_column_sums(panel, (g.k + 3) / 4, sums);
    for (int64_t r = 0; r < cols; ++r) correction[col + r] = static_cast<uint32_t>(sums[r]) * 128u;
  };
  const auto pack_b = [&](int64_t col, int64_t cols, uint32_t* out) {
    if (g.b.row_stride == 1) {
      pack_panel_k_contiguous<4, Vnni512::kCols>(
          b + col * g.b.col_stride, g.b.col_stride, cols, g.k,
          [&](const uint8_t* p, int64_t count) { return load_bytes(p, count, 0); }, out);
    } else {
      pack_panel<4, Vnni512::kCols>(
          col, cols, g.k, cols_adjacent(g.b), [&](int64_t j, int64_t kk) { return load<uint8_t>(g.b, kk, j); }, out);
    }
    column_sums(col, cols, out);
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
  const PackBByGroups by_groups{[&](int64_t begin, int64_t end, uint32_t* out, int64_t panel_words) {
                                  pack_quads_across_rows(b, g.b.row_stride, g.n, g.k, begin, end, out, panel_words);
                                },
                                column_sums};
  const bool across_rows = g.b.row_stride != 1 && g.b.col_stride == 1;
  if (across_rows && g.k > 0 && (g.m + Vnni512::kRows - 1) / Vnni512::kRows <= kBlockedBRowPanels) {
    return int8_vnni_row_major_b_blocks(g, pack_a, flip);
  }
  blocked_gemm<Vnni512>(g.m, g.n, g.k, pack_a, pack_b, store, across_rows ? &by_groups : nullptr);
}

// float8 is exact in bfloat16: packed straight into bfloat16 k-pair panels.
void scaled_gemm_bf16(const ScaledGemmArgs& g) {
  const auto& table = float8_table();
  std::array<std::array<uint16_t, 256>, 2> bf16{};
  for (int f = 0; f < 2; ++f) {
    for (int v = 0; v < 256; ++v) bf16[f][v] = static_cast<uint16_t>(float_bits(table[f][v]) >> 16);
  }
  const uint16_t* ta = bf16[static_cast<int>(g.a_format)].data();
  const uint16_t* tb = bf16[static_cast<int>(g.b_format)].data();
  const Float8ToBf16 convert_a(ta), convert_b(tb);
  const auto* a = static_cast<const uint8_t*>(g.a.data);
  const auto* b = static_cast<const uint8_t*>(g.b.data);
  const auto pack_a = [&](int64_t row, int64_t rows, uint32_t* out) {
    if (g.a.col_stride == 1) {
      pack_panel_k_contiguous<2, Bf16x512::kRows>(a + row * g.a.row_stride, g.a.row_stride, rows, g.k, convert_a, out);
    } else {
      const auto element = [&](int64_t i, int64_t kk) { return ta[load<uint8_t>(g.a, i, kk)]; };
      pack_panel<2, Bf16x512::kRows>(row, rows, g.k, rows_adjacent(g.a), element, out);
    }
  };
  const auto pack_b = [&](int64_t col, int64_t cols, uint32_t* out) {
    if (g.b.row_stride == 1) {
      pack_panel_k_contiguous<2, Bf16x512::kCols>(b + col * g.b.col_stride, g.b.col_stride, cols, g.k, convert_b,
                                                  out);
    } else {
      const auto element = [&](int64_t j, int64_t kk) { return tb[load<uint8_t>(g.b, kk, j)]; };
      pack_panel<2, Bf16x512::kCols>(col, cols, g.k, cols_adjacent(g.b), element, out);
    }
  };
  const PackBByGroups by_groups{[&](int64_t begin, int64_t end, uint32_t* out, int64_t panel_words) {
    pack_pairs_across_rows(b, g.b.row_stride, g.n, g.k, begin, end, convert_b, out, panel_words);
  }, {}};
  const bool across_rows = g.b.row_stride != 1 && g.b.col_stride == 1;
  blocked_gemm<Bf16x512>(g.m, g.n, g.k, pack_a, pack_b, ScaledStore{g}, across_rows ? &by_groups : nullptr);
}

}  // namespace

void int8_gemm_avx512(const Int8GemmArgs& g) {
  if (cpu_has_vnni()) return int8_gemm_vnni(g);
  int8_gemm_madd<Madd512>(g);
}

void scaled_gemm_avx512_bf16(const ScaledGemmArgs& g) { scaled_gemm_bf16(g); }

}  // namespace torchneuron::kernels::lowp
#endif
