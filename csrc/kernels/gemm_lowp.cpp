#include "kernels/gemm_lowp.h"

#include <cmath>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/gemm_lowp_common.h"
#include "runtime/errors.h"

// Every level packs the operands into k-group panels and runs register-tiled micro-kernels over
// them: int8 with vpdpbusd (AVX512-VNNI) or 16-bit multiply-adds (pmaddwd: AVX-512, AVX2, SSE2),
// float8 as exact bfloat16 with vdpbf16ps (AVX512-BF16). VNNI and BF16 are checked on the CPU at
// run time inside the avx512 copy only; float8 without BF16 widens to float32 and runs our SGEMM.

namespace torchneuron::kernels {
namespace lowp {
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

}  // namespace

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

namespace {

// ---- micro-kernels: tile[i * kCols + j] = sum over groups of A word (i) . B word (j) ----

#if TORCHNEURON_LOWP_SSE2
// 16-bit pairs by pmaddwd, 4 x 8 int32 accumulators; the baseline (SSE2) level.
struct Madd128 {
  using Acc = int32_t;
  static constexpr int kRows = 4, kVectors = 2, kCols = 4 * kVectors, kGroup = 2;
  template <int R>
  static void tile(int64_t groups, const uint32_t* a, const uint32_t* b, Acc* out) {
    __m128i acc[R][kVectors];
    for (auto& row : acc) {
      for (auto& v : row) v = _mm_setzero_si128();
    }
    for (int64_t q = 0; q < groups; ++q, a += kRows, b += kCols) {
      __m128i bv[kVectors];
      for (int v = 0; v < kVectors; ++v) bv[v] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 4 * v));
      for (int i = 0; i < R; ++i) {
        const __m128i av = _mm_set1_epi32(static_cast<int>(a[i]));
        for (int v = 0; v < kVectors; ++v) acc[i][v] = _mm_add_epi32(acc[i][v], _mm_madd_epi16(av, bv[v]));
      }
    }
    for (int i = 0; i < R; ++i) {
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
  template <int R>
  static void tile(int64_t groups, const uint32_t* a, const uint32_t* b, Acc* out) {
    __m256i acc[R][kVectors];
    for (auto& row : acc) {
      for (auto& v : row) v = _mm256_setzero_si256();
    }
    for (int64_t q = 0; q < groups; ++q, a += kRows, b += kCols) {
      __m256i bv[kVectors];
      for (int v = 0; v < kVectors; ++v) bv[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 8 * v));
      for (int i = 0; i < R; ++i) {
        const __m256i av = _mm256_set1_epi32(static_cast<int>(a[i]));
        for (int v = 0; v < kVectors; ++v) acc[i][v] = _mm256_add_epi32(acc[i][v], _mm256_madd_epi16(av, bv[v]));
      }
    }
    for (int i = 0; i < R; ++i) {
      for (int v = 0; v < kVectors; ++v) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i * kCols + 8 * v), acc[i][v]);
      }
    }
  }
};
#endif

// The operands widened to float32 (exact), our SGEMM, then the epilogue.
void scaled_gemm_widened(const ScaledGemmArgs& g) {
  const auto& table = float8_table();
  const float* ta = table[static_cast<int>(g.a_format)].data();
  const float* tb = table[static_cast<int>(g.b_format)].data();
  // B goes through in blocks of columns (about 4 MiB as float32, cache-resident), each widened
  // into [columns, k] rows and multiplied on its own; buffers are kept, never zero-filled.
  const int64_t k = std::max<int64_t>(g.k, 1);
  const int64_t block = std::clamp<int64_t>((int64_t{1} << 20) / k, 64, g.n);
  thread_local PackBuffer buffer;
  auto* a = reinterpret_cast<float*>(buffer.get(g.m * g.k + block * g.k + g.m * g.n));
  float* b = a + g.m * g.k;
  float* c = b + block * g.k;
  struct Trim {
    PackBuffer& buffer;
    ~Trim() { buffer.trim(); }
  } trim{buffer};
  parallel_for(g.m, std::max<int64_t>(1, 65536 / k), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      for (int64_t kk = 0; kk < g.k; ++kk) a[i * g.k + kk] = ta[load<uint8_t>(g.a, i, kk)];
    }
  });
  for (int64_t j0 = 0; j0 < g.n; j0 += block) {
    const int64_t cols = std::min(block, g.n - j0);
    if (g.k == 0) {
      for (int64_t i = 0; i < g.m; ++i) std::fill_n(c + i * g.n + j0, cols, 0.0f);
      continue;
    }
    parallel_for(cols, std::max<int64_t>(1, 65536 / k), [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) {
        for (int64_t kk = 0; kk < g.k; ++kk) b[j * g.k + kk] = tb[load<uint8_t>(g.b, kk, j0 + j)];
      }
    });
    GemmArgs s;
    s.dtype = DType::kFloat32;
    s.m = g.m, s.n = cols, s.k = g.k;
    s.a = {reinterpret_cast<char*>(a), 0, g.k, 1};
    s.b = {reinterpret_cast<char*>(b), 0, 1, g.k};
    s.c = {reinterpret_cast<char*>(c + j0), 0, g.n, 1};
    gemm(s);
  }
  const ScaledStore store{g};
  parallel_for(g.m, std::max<int64_t>(1, 16384 / std::max<int64_t>(g.n, 1)), [&](int64_t begin, int64_t end) {
    store(begin, end - begin, 0, g.n, c + begin * g.n, g.n);
  });
}

}  // namespace
}  // namespace lowp

void scaled_gemm(const ScaledGemmArgs& g) {
  if (g.m == 0 || g.n == 0) return;
#if TORCHNEURON_LOWP_AVX512
  if (lowp::cpu_has_bf16()) return lowp::scaled_gemm_avx512_bf16(g);
#endif
  lowp::scaled_gemm_widened(g);
}

void int8_gemm(const Int8GemmArgs& g) {
  if (g.m == 0 || g.n == 0) return;
#if TORCHNEURON_LOWP_AVX512
  return lowp::int8_gemm_avx512(g);
#elif defined(__AVX2__)
  return lowp::int8_gemm_madd<lowp::Madd256>(g);
#elif TORCHNEURON_LOWP_SSE2
  return lowp::int8_gemm_madd<lowp::Madd128>(g);
#else
  throw runtime::KernelError("int8_gemm is not built for this target");
#endif
}

const char* lowp_gemm_kernels() {
#if TORCHNEURON_LOWP_AVX512
  if (lowp::cpu_has_bf16() && lowp::cpu_has_vnni()) return "float8: avx512-bf16, int8: avx512-vnni";
  if (lowp::cpu_has_vnni()) return "float8: float32 sgemm, int8: avx512-vnni";
  if (lowp::cpu_has_bf16()) return "float8: avx512-bf16, int8: avx512 pmaddwd";
  return "float8: float32 sgemm, int8: avx512 pmaddwd";
#elif defined(__AVX2__)
  return "float8: float32 sgemm, int8: avx2 pmaddwd";
#else
  return "float8: float32 sgemm, int8: sse2 pmaddwd";
#endif
}

}  // namespace torchneuron::kernels
