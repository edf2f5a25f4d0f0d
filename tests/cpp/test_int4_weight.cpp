// Tests for the int4 weight-only kernels (kernels/int4_weight.h) at the loaded library's level:
// the packed layouts' nibble placement, and the product against a double-precision reference
// from the unpacked weights, through both paths (few rows, dequantized slices).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/half.h"
#include "kernels/int4_weight.h"

namespace k = torchneuron::kernels;

namespace {

const k::Int4PackLayout kLayouts[] = {k::Int4PackLayout::kPairs32, k::Int4PackLayout::kHalves32,
                                      k::Int4PackLayout::kHalves64};

std::vector<int32_t> random_weights(int64_t n, int64_t kk, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> nibble(0, 15);
  std::vector<int32_t> q(static_cast<size_t>(n * kk));
  for (auto& v : q) v = nibble(gen);
  return q;
}

TEST(Int4Weight, HalvesPutRowsJAndHalfPlusJInOneByte) {
  // 64 rows x 2 columns, each value its row's low 4 bits; one full 64-row block at kHalves64.
  std::vector<int32_t> q(64 * 2);
  for (int64_t r = 0; r < 64; ++r) q[r * 2] = q[r * 2 + 1] = static_cast<int32_t>(r % 16);
  std::vector<uint8_t> packed(64);
  k::int4_pack(q.data(), 64, 2, k::Int4PackLayout::kHalves64, packed.data());
  for (int64_t j = 0; j < 32; ++j) {  // column 0's 32 bytes, then column 1's
    EXPECT_EQ(packed[j] & 15, j % 16);
    EXPECT_EQ(packed[j] >> 4, (32 + j) % 16);
    EXPECT_EQ(packed[32 + j], packed[j]);
  }
  // The same weights in pairs (default level): byte j holds rows 2j and 2j + 1, blocks of 32.
  k::int4_pack(q.data(), 64, 2, k::Int4PackLayout::kPairs32, packed.data());
  for (int64_t j = 0; j < 16; ++j) {
    EXPECT_EQ(packed[j] & 15, (2 * j) % 16);
    EXPECT_EQ(packed[j] >> 4, (2 * j + 1) % 16);
  }
  EXPECT_EQ(packed[32] & 15, 0);  // the second block starts at row 32, column 0
  EXPECT_EQ(packed[32] >> 4, 1);
}

TEST(Int4Weight, ProductMatchesDequantizedReferenceAtEveryLayout) {
  const int64_t kk = 128, group = 32;
  for (const auto layout : kLayouts) {
    for (const int64_t n : {16, 48, 80, 96, 592}) {
      for (const int64_t m : {1, 3, 7, 20}) {
        const auto q = random_weights(n, kk, static_cast<unsigned>(n + m));
        std::vector<uint8_t> packed(static_cast<size_t>(n * kk / 2));
        k::int4_pack(q.data(), n, kk, layout, packed.data());
        std::mt19937 gen(static_cast<unsigned>(7 * n + m));
        std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
        std::vector<float> x(static_cast<size_t>(m * kk)), sz(static_cast<size_t>(kk / group * n * 2));
        for (auto& v : x) v = uniform(gen);
        for (auto& v : sz) v = 0.1f * uniform(gen);
        std::vector<float> out(static_cast<size_t>(m * n));
        k::Int4MatmulArgs args;
        args.dtype = k::DType::kFloat32;
        args.m = m, args.n = n, args.k = kk, args.group_size = group;
        args.x = x.data(), args.packed = packed.data(), args.scales_zeros = sz.data(), args.out = out.data();
        args.layout = layout;
        k::int4_weight_mm(args);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t r = 0; r < n; ++r) {
            double expected = 0;
            for (int64_t c = 0; c < kk; ++c) {
              const int64_t s = ((c / group) * n + r) * 2;
              const double w = (q[r * kk + c] - 8) * static_cast<double>(sz[s]) + sz[s + 1];
              expected += static_cast<double>(x[i * kk + c]) * w;
            }
            ASSERT_NEAR(out[i * n + r], expected, 1e-4) << "layout " << static_cast<int>(layout) << " n " << n
                                                        << " m " << m << " at " << i << ", " << r;
          }
        }
      }
    }
  }
}

TEST(Int4Weight, BFloat16ResultIsTheFloat32ResultRoundedOnce) {
  const int64_t n = 64, kk = 64, m = 2;
  const auto q = random_weights(n, kk, 3);
  std::vector<uint8_t> packed(static_cast<size_t>(n * kk / 2));
  k::int4_pack(q.data(), n, kk, k::Int4PackLayout::kHalves64, packed.data());
  std::vector<k::BFloat16> x(static_cast<size_t>(m * kk)), sz(static_cast<size_t>(2 * n * 2)), out(m * n);
  std::vector<float> x32(x.size()), sz32(sz.size()), out32(out.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x32[i] = static_cast<float>(x[i] = k::BFloat16(0.03f * static_cast<float>(i % 17) - 0.2f));
  }
  for (size_t i = 0; i < sz.size(); ++i) {
    sz32[i] = static_cast<float>(sz[i] = k::BFloat16(0.01f * static_cast<float>(i % 11)));
  }
  k::Int4MatmulArgs args;
  args.m = m, args.n = n, args.k = kk, args.group_size = 32, args.packed = packed.data();
  args.layout = k::Int4PackLayout::kHalves64;
  args.dtype = k::DType::kBFloat16, args.x = x.data(), args.scales_zeros = sz.data(), args.out = out.data();
  k::int4_weight_mm(args);
  args.dtype = k::DType::kFloat32, args.x = x32.data(), args.scales_zeros = sz32.data(), args.out = out32.data();
  k::int4_weight_mm(args);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].bits, k::BFloat16(out32[i]).bits) << i;
}

}  // namespace
