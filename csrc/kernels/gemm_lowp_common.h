// Internal to gemm_lowp*.cpp: the packed-panel GEMM driver every low-precision kernel runs on
// (packing, blocking, the calling thread's buffers) and the float8 epilogue.
#pragma once

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <utility>

#include "kernels/gemm_lowp.h"
#include "kernels/half.h"
#include "kernels/parallel.h"

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

namespace torchneuron::kernels::lowp {

// Every float8 value as float32 (exact), per Float8Format.
const std::array<std::array<float, 256>, 2>& float8_table();

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
// Up to this many row panels, B streams through a per-thread panel (blocked_gemm).
constexpr int64_t kStreamRowPanels = 4;

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
        for (int64_t r = 0; r < count; ++r) {
          words[r] |= static_cast<uint32_t>(elem(first + r, q * G + e)) << (32 / G * e);
        }
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
inline bool rows_adjacent(const LowpOperand& op) { return std::abs(op.row_stride) < std::abs(op.col_stride); }
inline bool cols_adjacent(const LowpOperand& op) { return std::abs(op.col_stride) < std::abs(op.row_stride); }


// Isa::tile<rows> for rows = 1 .. Isa::kRows: a panel's last rows run no more than they need.
template <class Isa, int... R>
constexpr auto tile_table(std::integer_sequence<int, R...>) {
  using Tile = void (*)(int64_t, const uint32_t*, const uint32_t*, typename Isa::Acc*);
  return std::array<Tile, sizeof...(R)>{&Isa::template tile<R + 1>...};
}

// Packing all of B at once, k-groups at a time, for a B whose columns lie side by side: a panel
// per column block would read a sliver of every row, a page apart. pack(begin, end, panels,
// panel_words) fills groups [begin, end) of every panel; finish(col, cols, panel), if set, then
// runs once per panel.
struct PackBByGroups {
  std::function<void(int64_t, int64_t, uint32_t*, int64_t)> pack;
  std::function<void(int64_t, int64_t, const uint32_t*)> finish;
};

// C = A @ B by Isa's micro-kernel: pack_a(row, rows, panel) and pack_b(col, cols, panel) fill
// the panels (pack_panel layouts, Isa::kRows and Isa::kCols wide), or by_groups packs B;
// store(row, rows, col, cols, tile, ld) takes each finished tile of accumulators.
template <class Isa, class PackA, class PackB, class Store>
void blocked_gemm(int64_t m, int64_t n, int64_t k, const PackA& pack_a, const PackB& pack_b, const Store& store,
                  const PackBByGroups* by_groups = nullptr) {
  constexpr int64_t R = Isa::kRows, C = Isa::kCols, G = Isa::kGroup;
  static constexpr auto tiles = tile_table<Isa>(std::make_integer_sequence<int, Isa::kRows>());
  const int64_t groups = (k + G - 1) / G;
  const int64_t row_panels = (m + R - 1) / R, col_panels = (n + C - 1) / C;
  // One cache line more than the panel: 4 KiB-multiple strides would share cache sets.
  const int64_t a_panel = groups * R + 16, b_panel = groups * C + 16;
  const bool serial = m * n * k < kSerialWork;
  // Few rows (decode-like products): each B panel is packed by the thread that uses it, right
  // before its tiles, and never goes out to memory: B is read once, in place.
  const bool stream_b = row_panels <= kStreamRowPanels && by_groups == nullptr;
  thread_local PackBuffer buffer;
  uint32_t* pa = buffer.get(row_panels * a_panel + (stream_b ? 0 : col_panels * b_panel));
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
  if (stream_b) {
    parallel_for(col_panels, grain(b_panel), [&](int64_t begin, int64_t end) {
      thread_local PackBuffer panel_buffer;
      uint32_t* panel = panel_buffer.get(b_panel);
      alignas(64) typename Isa::Acc tile[R * C];
      for (int64_t jp = begin; jp < end; ++jp) {
        pack_b(jp * C, std::min(C, n - jp * C), panel);
        for (int64_t ip = 0; ip < row_panels; ++ip) {
          tiles[std::min(R, m - ip * R) - 1](groups, pa + ip * a_panel, panel, tile);
          store(ip * R, std::min(R, m - ip * R), jp * C, std::min(C, n - jp * C), tile, C);
        }
      }
      panel_buffer.trim();
    });
    return;
  }
  if (by_groups != nullptr) {
    parallel_for(groups, grain(col_panels * C), [&](int64_t begin, int64_t end) {
      by_groups->pack(begin, end, pb, b_panel);
    });
    if (by_groups->finish) {
      parallel_for(col_panels, grain(b_panel), [&](int64_t begin, int64_t end) {
        for (int64_t jp = begin; jp < end; ++jp) by_groups->finish(jp * C, std::min(C, n - jp * C), pb + jp * b_panel);
      });
    }
  } else {
    parallel_for(col_panels, grain(b_panel), [&](int64_t begin, int64_t end) {
      for (int64_t jp = begin; jp < end; ++jp) pack_b(jp * C, std::min(C, n - jp * C), pb + jp * b_panel);
    });
  }
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
          tiles[std::min(R, m - ip * R) - 1](groups, pa + ip * a_panel, pb + jp * b_panel, tile);
          store(ip * R, std::min(R, m - ip * R), jp * C, std::min(C, n - jp * C), tile, C);
        }
      }
    }
  });
}

template <class T>
T load(const LowpOperand& op, int64_t row, int64_t col) {
  return static_cast<const T*>(op.data)[row * op.row_stride + col * op.col_stride];
}

// 16-bit pairs: A's element widened (zero- or sign-extended), B's sign-extended.
template <class Isa>
void int8_gemm_madd(const Int8GemmArgs& g) {
  const auto a_u8 = [&](int64_t i, int64_t kk) { return load<uint8_t>(g.a, i, kk); };
  const auto a_s8 = [&](int64_t i, int64_t kk) { return static_cast<uint16_t>(load<int8_t>(g.a, i, kk)); };
  const auto b_s8 = [&](int64_t j, int64_t kk) { return static_cast<uint16_t>(load<int8_t>(g.b, kk, j)); };
  const auto pack_a = [&](int64_t row, int64_t rows, uint32_t* out) {
    if (g.a_unsigned) {
      pack_panel<2, Isa::kRows>(row, rows, g.k, rows_adjacent(g.a), a_u8, out);
    } else {
      pack_panel<2, Isa::kRows>(row, rows, g.k, rows_adjacent(g.a), a_s8, out);
    }
  };
  const auto pack_b = [&](int64_t col, int64_t cols, uint32_t* out) {
    pack_panel<2, Isa::kCols>(col, cols, g.k, cols_adjacent(g.b), b_s8, out);
  };
  const auto store = [&](int64_t i0, int64_t rows, int64_t j0, int64_t cols, const int32_t* tile, int64_t ld) {
    for (int64_t r = 0; r < rows; ++r) std::memcpy(g.c + (i0 + r) * g.ldc + j0, tile + r * ld, cols * sizeof(int32_t));
  };
  blocked_gemm<Isa>(g.m, g.n, g.k, pack_a, pack_b, store);
}

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

#if TORCHNEURON_LOWP_AVX512
// gemm_lowp_avx512.cpp: whether the CPU has VNNI / BF16, and the kernels that use them (int8
// falls back to 16-bit multiply-adds there).
bool cpu_has_vnni();
bool cpu_has_bf16();
void int8_gemm_avx512(const Int8GemmArgs& args);
void scaled_gemm_avx512_bf16(const ScaledGemmArgs& args);
#endif

}  // namespace torchneuron::kernels::lowp
