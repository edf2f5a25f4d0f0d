#include "kernels/gemm_bf16.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

#include "kernels/parallel.h"
#include "runtime/errors.h"

// The kernel needs a compiler that knows AVX512-BF16 (GCC 11+, Clang 12+) and is built into the
// avx512 copy of the library only, so that a lower level (forced or not) never runs it; its
// functions add AVX512-BF16 by their own target attribute, checked on the CPU at run time.
#if defined(__x86_64__) && defined(__AVX512F__) && \
    ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && __GNUC__ >= 11))
#define TORCHNEURON_BF16_GEMM 1
// GCC 12 flags the "undefined" source operand inside the unmasked AVX-512 intrinsics.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#define TORCHNEURON_BF16_GEMM 0
#endif

namespace torchneuron::kernels {

#if TORCHNEURON_BF16_GEMM
namespace {

#define TORCHNEURON_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// Micro-tile: kRows rows of C by kVectors 16-float vectors; 24 accumulators cover vdpbf16ps's
// latency at two per cycle and leave registers for B and the A broadcast.
constexpr int kRows = 12;
constexpr int kVectors = 2;
constexpr int kCols = 16 * kVectors;

// Packed layouts, in 32-bit words that each hold a k-pair (element 2p low, 2p+1 high; a missing
// 2p+1 for odd k is zero): A row panel ip is [pairs][kRows], B column panel jp is [pairs][kCols].
// Rows and columns past the matrix are zero.

// Panel q gets out[q * panel_words + p * width + j] = (x[w], y[w]), w = q * width + j, with
// x = src + 2p * step and y = src + (2p + 1) * step, for w < len and pairs p in [p0, p1); for
// runs contiguous across the panels (B row-major, A column-major). All panels in one pass read
// each row whole and in order, not a short piece per row and page.
TORCHNEURON_BF16_TARGET void pack_interleaved(const uint16_t* src, int64_t step, int64_t len, int64_t k,
                                              int64_t width, int64_t panel_words, uint32_t* out, int64_t p0,
                                              int64_t p1) {
  alignas(64) static constexpr uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,
                                                           21, 6,  22, 7, 23, 8, 24, 9, 25, 10, 26,
                                                           11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i index = _mm512_load_si512(kInterleave);
  const int64_t panels = (len + width - 1) / width;
  for (int64_t p = p0; p < p1; ++p) {
    const bool has_y = 2 * p + 1 < k;
    for (int64_t q = 0; q < panels; ++q) {
      const uint16_t* x = src + 2 * p * step + q * width;
      const uint16_t* y = x + step;
      uint32_t* to = out + q * panel_words + p * width;
      for (int64_t j = 0; j < width; j += 16) {
        const int64_t loaded = std::clamp<int64_t>(len - q * width - j, 0, 16);
        const __mmask16 load_mask = static_cast<__mmask16>((1u << loaded) - 1u);
        const __mmask16 store_mask = static_cast<__mmask16>((1u << std::min<int64_t>(16, width - j)) - 1u);
        const __m256i xv = _mm256_maskz_loadu_epi16(load_mask, x + j);
        const __m256i yv = has_y ? _mm256_maskz_loadu_epi16(load_mask, y + j) : _mm256_setzero_si256();
        const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(xv), yv, 1);
        _mm512_mask_storeu_epi32(to + j, store_mask, _mm512_permutexvar_epi16(index, both));
      }
    }
  }
}

// Transposes 16 rows of 16 words in place (rows[j] becomes column j).
TORCHNEURON_BF16_TARGET inline void transpose16(__m512i rows[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(rows[i], rows[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(rows[i], rows[i + 1]);
  }
  // Per 128-bit lane L, u[4g + c] holds column 4L + c of rows 4g..4g+3.
  __m512i u[16];
  for (int g = 0; g < 16; g += 4) {
    u[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
    u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
    u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
    u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i x0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44);
    const __m512i x1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xee);
    const __m512i y0 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
    const __m512i y1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xee);
    rows[c] = _mm512_shuffle_i32x4(x0, y0, 0x88);
    rows[4 + c] = _mm512_shuffle_i32x4(x0, y0, 0xdd);
    rows[8 + c] = _mm512_shuffle_i32x4(x1, y1, 0x88);
    rows[12 + c] = _mm512_shuffle_i32x4(x1, y1, 0xdd);
  }
}

// out[p * width + r] = pair p of run r (run r at src + r * step, contiguous along k), r < runs;
// for A row-major and B column-major, where each pair is already one word.
TORCHNEURON_BF16_TARGET void pack_transposed(const uint16_t* src, int64_t step, int64_t runs, int64_t k,
                                             int64_t width, uint32_t* out) {
  const int64_t pairs = (k + 1) / 2;
  for (int64_t p = 0; p < pairs; p += 16) {
    const int64_t elements = std::min<int64_t>(32, k - 2 * p);
    const __mmask32 load_mask = elements == 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << elements) - 1u);
    const int64_t words = std::min<int64_t>(16, pairs - p);
    for (int64_t r = 0; r < width; r += 16) {
      __m512i block[16];
      for (int i = 0; i < 16; ++i) {
        block[i] = r + i < runs ? _mm512_maskz_loadu_epi16(load_mask, src + (r + i) * step + 2 * p)
                                : _mm512_setzero_si512();
      }
      transpose16(block);
      const __mmask16 store_mask = static_cast<__mmask16>((1u << std::min<int64_t>(16, width - r)) - 1u);
      for (int64_t j = 0; j < words; ++j) _mm512_mask_storeu_epi32(out + (p + j) * width + r, store_mask, block[j]);
    }
  }
}

// Rounds 16 floats to bfloat16 as BFloat16(float) does (nearest even, NaN to 0x7fc0) and stores
// the lanes in `mask`.
TORCHNEURON_BF16_TARGET inline void store_bf16(uint16_t* out, __mmask16 mask, __m512 value) {
  const __m512i bits = _mm512_castps_si512(value);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i biased = _mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
  __m512i rounded = _mm512_srli_epi32(biased, 16);
  rounded = _mm512_mask_mov_epi32(rounded, _mm512_cmp_ps_mask(value, value, _CMP_UNORD_Q), _mm512_set1_epi32(0x7fc0));
  _mm512_mask_cvtepi32_storeu_epi16(out, mask, rounded);
}

struct Epilogue {
  float alpha, beta;
};

// Where a micro-tile finds A: a packed row panel, or (row-major A) the matrix itself, whose
// k-pairs are already 32-bit words; `row` is the row stride in elements (direct only).
struct TileA {
  const uint16_t* data;
  int64_t row;
};

// One micro-tile: C[0:R, 0:cols] = alpha * (A rows @ B panel) + beta * C over k.
template <int R, int V, bool kDirect>
TORCHNEURON_BF16_TARGET void tile(int64_t k, TileA a, const uint32_t* b, uint16_t* c, int64_t ldc, int64_t cols,
                                  Epilogue e) {
  // Element offsets of A's row i and of pair p's first element.
  const int64_t row = kDirect ? a.row : 2, pair = kDirect ? 2 : 2 * kRows;
  __m512 acc[R][V];
  for (int i = 0; i < R; ++i) {
    for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_ps();
  }
  const uint16_t* pa = a.data;
  const int64_t pairs = k / 2;
  for (int64_t p = 0; p < pairs; ++p, pa += pair, b += kCols) {
    __m512bh bv[V];
    for (int v = 0; v < V; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + 16 * v);
    for (int i = 0; i < R; ++i) {
      uint32_t word;
      std::memcpy(&word, pa + i * row, sizeof(word));
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(word));
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, bv[v]);
    }
  }
  if (k % 2 != 0) {  // the last element alone: B's pad half is zero, and so is A's here
    __m512bh bv[V];
    for (int v = 0; v < V; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + 16 * v);
    for (int i = 0; i < R; ++i) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(pa[i * row]);
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, bv[v]);
    }
  }
  const __m512 alpha = _mm512_set1_ps(e.alpha), beta = _mm512_set1_ps(e.beta);
  for (int i = 0; i < R; ++i) {
    for (int v = 0; v < V; ++v) {
      const int64_t valid = std::min<int64_t>(16, cols - 16 * v);
      const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1u);
      uint16_t* out = c + i * ldc + 16 * v;
      __m512 value = _mm512_mul_ps(acc[i][v], alpha);
      if (e.beta != 0.0f) {  // beta 0 never reads C, so NaN there does not leak
        const __m512i old = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, out)), 16);
        value = _mm512_add_ps(value, _mm512_mul_ps(_mm512_castsi512_ps(old), beta));
      }
      store_bf16(out, mask, value);
    }
  }
}

using TileFn = void (*)(int64_t, TileA, const uint32_t*, uint16_t*, int64_t, int64_t, Epilogue);
using TileTable = std::array<std::array<TileFn, kVectors>, kRows>;

template <bool kDirect, int R, int... V>
constexpr std::array<TileFn, kVectors> tile_row(std::integer_sequence<int, V...>) {
  return {&tile<R, V + 1, kDirect>...};
}
template <bool kDirect, int... R>
constexpr TileTable tile_table(std::integer_sequence<int, R...>) {
  return {tile_row<kDirect, R + 1>(std::make_integer_sequence<int, kVectors>())...};
}
// [rows - 1][vectors - 1]: edge tiles skip the rows and vectors past the matrix.
constexpr TileTable kPackedTiles = tile_table<false>(std::make_integer_sequence<int, kRows>());
constexpr TileTable kDirectTiles = tile_table<true>(std::make_integer_sequence<int, kRows>());

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

// The calling thread's packing buffer, kept between calls: a fresh allocation of megabytes costs
// a page fault per 4 KiB on first touch, as much as the packing itself. Uninitialized: packing
// writes every word, padding included. Buffers above kKeptBytes are freed after their call.
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

// Below this many multiply-adds a GEMM runs on the calling thread only.
constexpr int64_t kSerialWork = int64_t{1} << 18;

}  // namespace

bool bf16_gemm_available() {
  static const bool available = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
  return available;
}

void bf16_gemm(const GemmArgs& g, const char* a_bytes, const char* b_bytes, char* c_bytes) {
  if (g.m == 1 && g.n > 1 && g.b.row_stride == 1 && g.b.col_stride != 1) {
    // A row times column-major B (a vector times a linear layer's weight): C^T = B^T A^T reads B
    // in place as a row-major A instead of packing all of it for a single use.
    GemmArgs t = g;
    t.m = g.n;
    t.n = 1;
    t.a = {nullptr, 0, g.b.col_stride, 1};
    t.b = {nullptr, 0, g.a.col_stride, g.a.row_stride};
    t.c = {nullptr, 0, 1, 1};
    return bf16_gemm(t, b_bytes, a_bytes, c_bytes);
  }
  const int64_t m = g.m, n = g.n, k = g.k, pairs = (k + 1) / 2;
  const auto* a = reinterpret_cast<const uint16_t*>(a_bytes);
  const auto* b = reinterpret_cast<const uint16_t*>(b_bytes);
  auto* c = reinterpret_cast<uint16_t*>(c_bytes);
  const int64_t row_panels = (m + kRows - 1) / kRows, col_panels = (n + kCols - 1) / kCols;
  const bool serial = m * n * k < kSerialWork;

  // Row-major A is read in place: its k-pairs are already words. Other A is packed.
  const bool direct_a = g.a.col_stride == 1;
  // Panels one cache line apart more than their size: strides of a multiple of 4 KiB would put
  // the writes of a multi-panel pass (and the reads of a block's panels) into one cache set.
  const int64_t a_panel = pairs * kRows + 16, b_panel = pairs * kCols + 16;
  thread_local PackBuffer buffer;
  const int64_t a_words = direct_a ? 0 : row_panels * a_panel;
  uint32_t* pa = buffer.get(a_words + col_panels * b_panel);
  uint32_t* pb = pa + a_words;
  struct Trim {
    PackBuffer& buffer;
    ~Trim() { buffer.trim(); }
  } trim{buffer};
  // Interleaved packing splits k over the threads (each pass covers every panel); transposed
  // packing splits the panels.
  const auto grain = [&](int64_t words_per_step) {
    return serial ? std::numeric_limits<int64_t>::max() : std::max<int64_t>(1, 16384 / words_per_step);
  };
  if (!direct_a) {
    parallel_for(pairs, grain(row_panels * kRows), [&](int64_t begin, int64_t end) {
      pack_interleaved(a, g.a.col_stride, m, k, kRows, a_panel, pa, begin, end);
    });
  }
  if (g.b.col_stride == 1) {
    parallel_for(pairs, grain(col_panels * kCols), [&](int64_t begin, int64_t end) {
      pack_interleaved(b, g.b.row_stride, n, k, kCols, b_panel, pb, begin, end);
    });
  } else {
    parallel_for(col_panels, grain(b_panel), [&](int64_t begin, int64_t end) {
      for (int64_t jp = begin; jp < end; ++jp) {
        const int64_t j = jp * kCols;
        pack_transposed(b + j * g.b.col_stride, g.b.col_stride, std::min<int64_t>(kCols, n - j), k, kCols,
                        pb + jp * b_panel);
      }
    });
  }

  // Blocks of C: up to 16 row panels by 8 column panels (A block and B slivers stay in L2),
  // halved until every thread gets several blocks.
  int64_t block_rows = std::min<int64_t>(row_panels, 16), block_cols = std::min<int64_t>(col_panels, 8);
  const auto blocks = [&] {
    return ((row_panels + block_rows - 1) / block_rows) * ((col_panels + block_cols - 1) / block_cols);
  };
  const int64_t wanted = serial ? 1 : 4 * compute_threads();
  while (blocks() < wanted && (block_rows > 1 || block_cols > 1)) {
    if (block_cols == 1 || (block_rows > 1 && block_rows * kRows >= block_cols * kCols)) {
      block_rows = (block_rows + 1) / 2;
    } else {
      block_cols = (block_cols + 1) / 2;
    }
  }
  const int64_t col_blocks = (col_panels + block_cols - 1) / block_cols;
  const Epilogue epilogue{static_cast<float>(g.alpha), static_cast<float>(g.beta)};
  const int64_t ldc = g.c.row_stride;
  const TileTable& tiles = direct_a ? kDirectTiles : kPackedTiles;
  parallel_for(blocks(), serial ? std::numeric_limits<int64_t>::max() : 1, [&](int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; ++block) {
      const int64_t ip0 = block / col_blocks * block_rows, jp0 = block % col_blocks * block_cols;
      const int64_t ip1 = std::min(row_panels, ip0 + block_rows), jp1 = std::min(col_panels, jp0 + block_cols);
      for (int64_t ip = ip0; ip < ip1; ++ip) {
        const int64_t i = ip * kRows, rows = std::min<int64_t>(kRows, m - i);
        const TileA tile_a = direct_a ? TileA{a + i * g.a.row_stride, g.a.row_stride}
                                      : TileA{reinterpret_cast<const uint16_t*>(pa + ip * a_panel), 0};
        for (int64_t jp = jp0; jp < jp1; ++jp) {
          const int64_t j = jp * kCols, cols = std::min<int64_t>(kCols, n - j);
          tiles[rows - 1][(cols + 15) / 16 - 1](k, tile_a, pb + jp * b_panel, c + i * ldc + j, ldc, cols,
                                                epilogue);
        }
      }
    }
  });
}

bool bf16_gemm_suits(const GemmArgs& g) {
  if (!bf16_gemm_available() || g.dtype != DType::kBFloat16 || g.k < 1) return false;
  return (g.a.col_stride == 1 || g.a.row_stride == 1) && (g.b.col_stride == 1 || g.b.row_stride == 1);
}

#else  // not the avx512 copy, or no AVX512-BF16 compiler support

bool bf16_gemm_available() { return false; }
bool bf16_gemm_suits(const GemmArgs&) { return false; }
void bf16_gemm(const GemmArgs&, const char*, const char*, char*) {
  throw runtime::KernelError("bf16_gemm is not built for this target; check bf16_gemm_suits() first");
}

#endif

}  // namespace torchneuron::kernels
