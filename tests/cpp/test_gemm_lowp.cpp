// Tests for the low-precision GEMMs (kernels/gemm_lowp.h) at the loaded library's level: int8
// against exact int64 sums, float8 against a double-precision reference from the same values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu_capability.h"
#include "kernels/gemm_lowp.h"
#include "kernels/half.h"

namespace k = torchneuron::kernels;

namespace {

struct Shape {
  int64_t m, n, k;
};

// Shapes off every kernel's tiles (rows, columns, k-groups of 2 and 4), few rows (B streamed per
// panel) and many (B packed whole), k = 0.
const std::vector<Shape> kShapes = {{1, 1, 1}, {3, 5, 0}, {13, 33, 7}, {37, 65, 130}, {5, 3, 1027}, {64, 70, 64},
                                    {100, 17, 515}};

// A rows x cols byte matrix, row-major or transposed (column-major), its leading dimension padded
// by 3 so that the strides are not the dense ones.
struct Bytes {
  std::vector<uint8_t> data;
  int64_t row_stride, col_stride;
  Bytes(int64_t rows, int64_t cols, bool column_major) {
    const int64_t ld = (column_major ? rows : cols) + 3;
    data.assign(static_cast<size_t>(ld * (column_major ? cols : rows) + 1), 0);
    row_stride = column_major ? 1 : ld;
    col_stride = column_major ? ld : 1;
  }
  uint8_t& at(int64_t r, int64_t c) { return data[static_cast<size_t>(r * row_stride + c * col_stride)]; }
  k::LowpOperand operand() const { return {data.data(), row_stride, col_stride}; }
};

double e4m3fn(uint8_t v) {
  const int exponent = (v >> 3) & 15, mantissa = v & 7;
  const double magnitude = exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(1 + mantissa / 8.0, exponent - 7);
  return (v & 0x80) != 0 ? -magnitude : magnitude;
}
double e5m2(uint8_t v) { return k::Half::to_float(static_cast<uint16_t>(v << 8)); }

TEST(GemmLowp, RunsTheKernelsOfItsLevel) {
  const std::string kernels = k::lowp_gemm_kernels();
  const std::string level = k::cpu_capability();
  EXPECT_NE(kernels.find(level == "default" ? "sse2" : level), std::string::npos) << kernels;
}

TEST(GemmLowp, Int8IsExactForEveryLayoutAndSign) {
  std::mt19937 rng(7);
  for (const Shape& s : kShapes) {
    for (int layout = 0; layout < 4; ++layout) {
      for (bool a_unsigned : {false, true}) {
        Bytes a(s.m, s.k, layout & 1), b(s.k, s.n, layout & 2);
        for (int64_t i = 0; i < s.m; ++i) {
          for (int64_t kk = 0; kk < s.k; ++kk) a.at(i, kk) = static_cast<uint8_t>(rng());
        }
        for (int64_t kk = 0; kk < s.k; ++kk) {
          for (int64_t j = 0; j < s.n; ++j) b.at(kk, j) = static_cast<uint8_t>(rng());
        }
        std::vector<int32_t> c(static_cast<size_t>(s.m * (s.n + 2)), 12345);
        k::Int8GemmArgs g;
        g.m = s.m, g.n = s.n, g.k = s.k, g.a = a.operand(), g.b = b.operand(), g.a_unsigned = a_unsigned;
        g.c = c.data(), g.ldc = s.n + 2;
        k::int8_gemm(g);
        for (int64_t i = 0; i < s.m; ++i) {
          for (int64_t j = 0; j < s.n; ++j) {
            int64_t sum = 0;
            for (int64_t kk = 0; kk < s.k; ++kk) {
              const int64_t x = a_unsigned ? a.at(i, kk) : static_cast<int8_t>(a.at(i, kk));
              sum += x * static_cast<int8_t>(b.at(kk, j));
            }
            ASSERT_EQ(c[static_cast<size_t>(i * (s.n + 2) + j)], sum)
                << s.m << "x" << s.n << "x" << s.k << " layout " << layout << " unsigned " << a_unsigned;
          }
          ASSERT_EQ(c[static_cast<size_t>(i * (s.n + 2) + s.n)], 12345);  // the padding is not written
        }
      }
    }
  }
}

TEST(GemmLowp, Int8ExtremesAreExact) {
  const int64_t m = 53, n = 19, kk = 4099;
  for (const auto& [a_value, b_value, a_unsigned] :
       std::vector<std::tuple<int, int, bool>>{{-128, -128, false}, {127, -128, false}, {255, -128, true}}) {
    Bytes a(m, kk, false), b(kk, n, true);
    std::fill(a.data.begin(), a.data.end(), static_cast<uint8_t>(a_value));
    std::fill(b.data.begin(), b.data.end(), static_cast<uint8_t>(b_value));
    std::vector<int32_t> c(static_cast<size_t>(m * n));
    k::Int8GemmArgs g;
    g.m = m, g.n = n, g.k = kk, g.a = a.operand(), g.b = b.operand(), g.a_unsigned = a_unsigned;
    g.c = c.data(), g.ldc = n;
    k::int8_gemm(g);
    for (int32_t v : c) ASSERT_EQ(v, static_cast<int64_t>(a_value) * b_value * kk);
  }
}

TEST(GemmLowp, Float8MatchesADoubleReference) {
  std::mt19937 rng(3);
  const auto value = [&](bool e5) {  // a random value of the format, at most 15 in magnitude
    while (true) {                    // (float16 results must not overflow), subnormals included
      const auto v = static_cast<uint8_t>(rng());
      if (e5 ? ((v >> 2) & 31) <= 18 : ((v >> 3) & 15) <= 10) return v;
    }
  };
  for (const Shape& s : kShapes) {
    for (int layout = 0; layout < 4; ++layout) {
      const bool a_e5 = layout == 1, b_e5 = layout >= 2, rowwise = layout % 2 == 0;
      const k::DType dtype = layout < 2 ? k::DType::kFloat32 : (layout == 2 ? k::DType::kBFloat16 : k::DType::kFloat16);
      Bytes a(s.m, s.k, layout & 1), b(s.k, s.n, layout & 2);
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t kk = 0; kk < s.k; ++kk) a.at(i, kk) = value(a_e5);
      }
      for (int64_t kk = 0; kk < s.k; ++kk) {
        for (int64_t j = 0; j < s.n; ++j) b.at(kk, j) = value(b_e5);
      }
      std::vector<float> sa(static_cast<size_t>(std::max<int64_t>(s.m, 1))), sb(static_cast<size_t>(s.n)),
          bias(static_cast<size_t>(s.n));
      for (float& x : sa) x = 0.5f + static_cast<float>(rng() % 100) / 400.0f;
      for (float& x : sb) x = 0.5f + static_cast<float>(rng() % 100) / 400.0f;
      for (float& x : bias) x = static_cast<float>(static_cast<int>(rng() % 200) - 100) / 8.0f;
      std::vector<uint32_t> c(static_cast<size_t>(s.m * s.n));  // room for float32
      k::ScaledGemmArgs g;
      g.m = s.m, g.n = s.n, g.k = s.k, g.a = a.operand(), g.b = b.operand();
      g.a_format = a_e5 ? k::Float8Format::kE5M2 : k::Float8Format::kE4M3FN;
      g.b_format = b_e5 ? k::Float8Format::kE5M2 : k::Float8Format::kE4M3FN;
      g.scale_a = sa.data(), g.scale_b = sb.data(), g.rowwise = rowwise, g.bias = layout == 3 ? nullptr : bias.data();
      g.c = c.data(), g.ldc = s.n, g.c_dtype = dtype;
      k::scaled_gemm(g);
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t j = 0; j < s.n; ++j) {
          double sum = 0, magnitude = 0;
          for (int64_t kk = 0; kk < s.k; ++kk) {
            const double p = (a_e5 ? e5m2(a.at(i, kk)) : e4m3fn(a.at(i, kk))) *
                             (b_e5 ? e5m2(b.at(kk, j)) : e4m3fn(b.at(kk, j)));
            sum += p, magnitude += std::fabs(p);
          }
          const double scale = rowwise ? double{sa[i]} * sb[j] : double{sa[0]} * sb[0];
          const double want = sum * scale + (g.bias != nullptr ? bias[j] : 0.0);
          const size_t at = static_cast<size_t>(i * s.n + j);
          double got;
          if (dtype == k::DType::kFloat32) {
            got = k::bits_float(c[at]);
          } else {
            uint16_t h;
            std::memcpy(&h, reinterpret_cast<const uint16_t*>(c.data()) + at, sizeof(h));
            got = dtype == k::DType::kBFloat16 ? k::bits_float(static_cast<uint32_t>(h) << 16) : k::Half::to_float(h);
          }
          // float32 sums: k roundings of at most the running magnitude; then one output rounding.
          const double output_ulp =
              dtype == k::DType::kFloat32 ? 0x1p-23 : (dtype == k::DType::kBFloat16 ? 0x1p-8 : 0x1p-11);
          const double bound =
              (s.k + 2) * 0x1p-24 * (magnitude * scale + std::fabs(bias[j])) + output_ulp * std::fabs(want) + 0x1p-24;
          ASSERT_LE(std::fabs(got - want), bound) << s.m << "x" << s.n << "x" << s.k << " layout " << layout;
        }
      }
    }
  }
}

}  // namespace
