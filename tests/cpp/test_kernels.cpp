// Tests for the data-movement kernels (strided, broadcast and dtype-converting copy; fill) and
// for the 16-bit float types, against nested-loop references and known IEEE bit patterns.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/copy.h"
#include "kernels/half.h"
#include "kernels/strided.h"
#include "kernels/vector_math.h"
#include "strided_view_util.h"

namespace k = torchneuron::kernels;

namespace {


uint16_t half_bits(float value) { return k::Half(value).bits; }
uint16_t bf16_bits(float value) { return k::BFloat16(value).bits; }

// Copies one float through the copy kernel into a one-element view of `dtype`.
template <typename T>
T copy_one(float value, k::DType dtype) {
  T out{};
  k::copy(view(&out, dtype, {1}, {1}), view(&value, k::DType::kFloat32, {1}, {1}));
  return out;
}

}  // namespace

TEST(Copy, TransposedViewMatchesNestedLoopReference) {
  std::vector<float> src(3 * 4);
  for (size_t i = 0; i < src.size(); ++i) src[i] = 0.5f * static_cast<float>(i) - 2.0f;
  std::vector<double> dst(4 * 3, -1.0);
  // src viewed as its transpose: sizes [4, 3], strides [1, 4]; dst contiguous float64.
  k::copy(view(dst.data(), k::DType::kFloat64, {4, 3}, {3, 1}),
          view(src.data(), k::DType::kFloat32, {4, 3}, {1, 4}));
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 3; ++j) EXPECT_EQ(dst[i * 3 + j], double(src[j * 4 + i])) << i << "," << j;
  }
}

TEST(Copy, BroadcastStrideZeroIntoStridedDestinationLeavesGapsUntouched) {
  const int32_t row[5] = {1, -2, 3, -4, 2147483647};
  std::vector<int64_t> dst(4 * 10, 99);
  // dst: every other column of a [4, 10] buffer; src: one row broadcast over 4 rows.
  k::copy(view(dst.data(), k::DType::kInt64, {4, 5}, {10, 2}),
          view(const_cast<int32_t*>(row), k::DType::kInt32, {4, 5}, {0, 1}));
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 10; ++j) {
      const int64_t expected = j % 2 == 0 ? int64_t(row[j / 2]) : 99;
      EXPECT_EQ(dst[i * 10 + j], expected) << i << "," << j;
    }
  }
}

TEST(Copy, PermutedThreeDimensionalViewWithUnitDims) {
  // src storage [2, 3, 4]; view as [4, 1, 3, 2] with dims permuted (2, -, 1, 0).
  std::vector<int16_t> src(24);
  for (int i = 0; i < 24; ++i) src[i] = static_cast<int16_t>(i * 3 - 30);
  std::vector<float> dst(24, 0.0f);
  k::copy(view(dst.data(), k::DType::kFloat32, {4, 1, 3, 2}, {6, 999, 2, 1}),
          view(src.data(), k::DType::kInt16, {4, 1, 3, 2}, {1, 77, 4, 12}));
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 3; ++b) {
      for (int c = 0; c < 2; ++c) {
        EXPECT_EQ(dst[a * 6 + b * 2 + c], float(src[c * 12 + b * 4 + a])) << a << b << c;
      }
    }
  }
}

TEST(Copy, ScalarAndEmptyViews) {
  double in = 2.75;
  int32_t out = 0;
  k::copy(view(&out, k::DType::kInt32, {}, {}), view(&in, k::DType::kFloat64, {}, {}));
  EXPECT_EQ(out, 2);
  float untouched = 5.0f;
  k::copy(view(&untouched, k::DType::kFloat32, {0, 3}, {3, 1}),
          view(&in, k::DType::kFloat64, {0, 3}, {3, 1}));
  EXPECT_EQ(untouched, 5.0f);
}

TEST(Copy, ConvertsBetweenTypesAsTorchDoes) {
  EXPECT_EQ(copy_one<int32_t>(-2.7f, k::DType::kInt32), -2);      // truncation toward zero
  EXPECT_EQ(copy_one<uint8_t>(-1.0f, k::DType::kUInt8), 255);     // wraps through int64
  EXPECT_EQ(copy_one<bool>(0.5f, k::DType::kBool), true);
  EXPECT_EQ(copy_one<bool>(-0.0f, k::DType::kBool), false);
  EXPECT_EQ(copy_one<uint16_t>(1.0f, k::DType::kFloat16), 0x3c00);
  EXPECT_EQ(copy_one<uint16_t>(1.0f, k::DType::kBFloat16), 0x3f80);
  const auto c = copy_one<std::complex<float>>(3.5f, k::DType::kComplex64);
  EXPECT_EQ(c, std::complex<float>(3.5f, 0.0f));

  const bool flags[3] = {true, false, true};
  double as_double[3];
  k::copy(view(as_double, k::DType::kFloat64, {3}, {1}),
          view(const_cast<bool*>(flags), k::DType::kBool, {3}, {1}));
  EXPECT_EQ(as_double[0], 1.0);
  EXPECT_EQ(as_double[1], 0.0);

  const uint16_t halves[2] = {0x3555, 0xfbff};  // 0.333251953125, -65504
  int32_t as_int[2];
  float as_float[2];
  k::copy(view(as_float, k::DType::kFloat32, {2}, {1}),
          view(const_cast<uint16_t*>(halves), k::DType::kFloat16, {2}, {1}));
  k::copy(view(as_int, k::DType::kInt32, {2}, {1}),
          view(const_cast<uint16_t*>(halves), k::DType::kFloat16, {2}, {1}));
  EXPECT_EQ(as_float[0], 0.333251953125f);
  EXPECT_EQ(as_float[1], -65504.0f);
  EXPECT_EQ(as_int[0], 0);
  EXPECT_EQ(as_int[1], -65504);

  const std::complex<double> z(1.25, -3.5);
  std::complex<float> zf;
  k::copy(view(&zf, k::DType::kComplex64, {1}, {1}), view(const_cast<std::complex<double>*>(&z),
                                                          k::DType::kComplex128, {1}, {1}));
  EXPECT_EQ(zf, std::complex<float>(1.25f, -3.5f));
  double real_part = 0.0;  // complex to real keeps the real part, as torch's casts do
  k::copy(view(&real_part, k::DType::kFloat64, {1}, {1}),
          view(const_cast<std::complex<double>*>(&z), k::DType::kComplex128, {1}, {1}));
  EXPECT_EQ(real_part, 1.25);
}

TEST(Half, FloatToHalfKnownBitPatterns) {
  EXPECT_EQ(half_bits(1.0f), 0x3c00);
  EXPECT_EQ(half_bits(-2.0f), 0xc000);
  EXPECT_EQ(half_bits(0.0f), 0x0000);
  EXPECT_EQ(half_bits(-0.0f), 0x8000);
  EXPECT_EQ(half_bits(65504.0f), 0x7bff);               // largest finite
  EXPECT_EQ(half_bits(65519.99f), 0x7bff);              // just below the rounding boundary
  EXPECT_EQ(half_bits(65520.0f), 0x7c00);               // rounds to infinity
  EXPECT_EQ(half_bits(-1.0e6f), 0xfc00);
  EXPECT_EQ(half_bits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -25)), 0x0000);  // tie, rounds to even (zero)
  EXPECT_EQ(half_bits(std::ldexp(1.5f, -25)), 0x0001);  // above the tie
  EXPECT_EQ(half_bits(std::ldexp(3.0f, -25)), 0x0002);  // tie between 1 and 2 ulps -> even
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -24)), 0x03ff);
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25)), 0x0400);  // tie -> even
  EXPECT_EQ(half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);        // tie -> even (down)
  EXPECT_EQ(half_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);    // tie -> even (up)
  EXPECT_EQ(half_bits(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  EXPECT_EQ(half_bits(0.1f), 0x2e66);
  const uint16_t nan = half_bits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_TRUE(std::isnan(float(k::Half(-std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Half, HalfToFloatAndExhaustiveRoundTrip) {
  EXPECT_EQ(k::Half::to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(k::Half::to_float(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(k::Half::to_float(0x7bff), 65504.0f);
  EXPECT_EQ(k::Half::to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(k::Half::to_float(0x7e00)));
  EXPECT_TRUE(std::signbit(k::Half::to_float(0x8000)));
  EXPECT_EQ(k::Half::to_float(0x8001), -std::ldexp(1.0f, -24));
  int mismatches = 0;
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float value = k::Half::to_float(static_cast<uint16_t>(bits));
    if (std::isnan(value)) continue;
    if (k::Half::from_float(value) != static_cast<uint16_t>(bits)) ++mismatches;
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(BFloat16, KnownBitPatternsRoundingAndRoundTrip) {
  EXPECT_EQ(bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(bf16_bits(-2.0f), 0xc000);
  EXPECT_EQ(bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(bf16_bits(k::bits_float(0x3f808000u)), 0x3f80);  // tie -> even (down)
  EXPECT_EQ(bf16_bits(k::bits_float(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(bf16_bits(k::bits_float(0x3f808001u)), 0x3f81);  // above the tie
  EXPECT_EQ(bf16_bits(k::bits_float(0x3f807fffu)), 0x3f80);  // below the tie
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // rounds to infinity
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_TRUE(std::isnan(float(k::BFloat16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(float(k::BFloat16(k::bits_float(0xff800001u)))));  // signalling NaN
  EXPECT_EQ(float(k::BFloat16(3.140625f)), 3.140625f);
  int mismatches = 0;
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float value = k::bits_float(bits << 16);
    if (std::isnan(value)) continue;
    if (bf16_bits(value) != static_cast<uint16_t>(bits)) ++mismatches;
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(Fill, Int64IsExactAboveTwoToThe53) {
  const int64_t values[] = {(int64_t{1} << 53) + 1, std::numeric_limits<int64_t>::max(),
                            std::numeric_limits<int64_t>::min(), -((int64_t{1} << 60) + 3)};
  for (int64_t value : values) {
    std::vector<int64_t> buffer(12, 0);
    // Every third element of a [2, 2] view with strides [6, 3].
    k::fill(view(buffer.data(), k::DType::kInt64, {2, 2}, {6, 3}), {0.0, value, true});
    for (int i = 0; i < 12; ++i) EXPECT_EQ(buffer[i], i % 3 == 0 ? value : 0) << i;
  }
}

TEST(Fill, RealValuesConvertPerDtype) {
  std::vector<float> f(6, 0.0f);
  k::fill(view(f.data(), k::DType::kFloat32, {2, 3}, {3, 1}), {0.1, 0, false});
  for (float x : f) EXPECT_EQ(x, 0.1f);
  uint16_t h[4] = {};
  k::fill(view(h, k::DType::kFloat16, {4}, {1}), {65520.0, 0, false});
  for (uint16_t x : h) EXPECT_EQ(x, 0x7c00);
  uint16_t b[3] = {};
  k::fill(view(b, k::DType::kBFloat16, {3}, {1}), {1.0, 0, false});
  for (uint16_t x : b) EXPECT_EQ(x, 0x3f80);
  int32_t i32[3] = {};
  k::fill(view(i32, k::DType::kInt32, {3}, {1}), {-7.9, 0, false});
  for (int32_t x : i32) EXPECT_EQ(x, -7);
  int64_t i64 = 0;
  k::fill(view(&i64, k::DType::kInt64, {}, {}), {-3.0, 0, false});
  EXPECT_EQ(i64, -3);
  bool flags[2] = {false, false};
  k::fill(view(flags, k::DType::kBool, {2}, {1}), {0.0, 5, true});
  EXPECT_TRUE(flags[0] && flags[1]);
  double d[3] = {1, 1, 1};
  k::fill(view(d, k::DType::kFloat64, {3}, {0}), {2.5, 0, false});  // broadcast view
  EXPECT_EQ(d[0], 2.5);
  EXPECT_EQ(d[1], 1.0);
  std::complex<double> z[2];
  k::fill(view(z, k::DType::kComplex128, {2}, {1}), {-1.5, 0, false});
  EXPECT_EQ(z[1], std::complex<double>(-1.5, 0.0));
}

TEST(StridedView, SizesNamesAndContiguity) {
  EXPECT_EQ(k::element_size(k::DType::kBool), 1u);
  EXPECT_EQ(k::element_size(k::DType::kBFloat16), 2u);
  EXPECT_EQ(k::element_size(k::DType::kComplex64), 8u);
  EXPECT_EQ(k::element_size(k::DType::kComplex128), 16u);
  EXPECT_STREQ(k::dtype_name(k::DType::kBFloat16), "bfloat16");
  EXPECT_TRUE(k::is_complex(k::DType::kComplex128));
  EXPECT_FALSE(k::is_complex(k::DType::kFloat64));
  EXPECT_TRUE(view(nullptr, k::DType::kFloat32, {2, 3}, {3, 1}).is_contiguous());
  EXPECT_TRUE(view(nullptr, k::DType::kFloat32, {2, 1, 3}, {3, 42, 1}).is_contiguous());
  EXPECT_FALSE(view(nullptr, k::DType::kFloat32, {2, 3}, {1, 2}).is_contiguous());
  EXPECT_EQ(view(nullptr, k::DType::kFloat32, {2, 0, 3}, {0, 3, 1}).numel(), 0);
  EXPECT_EQ(view(nullptr, k::DType::kFloat32, {}, {}).numel(), 1);
}

// The vectorizable exp, erf and tanh stay within about one ulp of the C library's double results
// across their whole float range, and handle NaN and infinities.
TEST(VectorMath, ExpErfAndTanhWithinTheirUlpBounds) {
  double worst_exp = 0, worst_erf = 0, worst_tanh = 0;
  for (uint32_t bits = 0; bits < 0xffffff00u; bits += 9973) {
    float x;
    std::memcpy(&x, &bits, sizeof(x));
    if (!std::isfinite(x)) continue;
    const auto ulps = [](float got, double want) {
      const float rounded = static_cast<float>(want);
      const double ulp = std::fabs(std::nextafter(rounded, INFINITY) - rounded);
      return ulp > 0 ? std::fabs(got - want) / ulp : 0.0;
    };
    if (x > -87.0f && x < 88.0f) worst_exp = std::max(worst_exp, ulps(torchneuron::kernels::vector_exp(x), std::exp(double(x))));
    worst_tanh = std::max(worst_tanh, ulps(torchneuron::kernels::vector_tanh(x), std::tanh(double(x))));
    if (std::fabs(x) < 10.0f) {
      worst_erf = std::max(worst_erf, ulps(torchneuron::kernels::vector_erf(x), std::erf(double(x))));
    }
  }
  EXPECT_LT(worst_exp, 0.6);
  EXPECT_LT(worst_erf, 1.01);
  EXPECT_LT(worst_tanh, 1.1);
  EXPECT_TRUE(std::isnan(torchneuron::kernels::vector_exp(NAN)));
  EXPECT_EQ(torchneuron::kernels::vector_exp(-INFINITY), 0.0f);
  EXPECT_EQ(torchneuron::kernels::vector_exp(INFINITY), INFINITY);
  EXPECT_EQ(torchneuron::kernels::vector_erf(INFINITY), 1.0f);
  EXPECT_EQ(torchneuron::kernels::vector_erf(-INFINITY), -1.0f);
  EXPECT_TRUE(std::isnan(torchneuron::kernels::vector_erf(NAN)));
  EXPECT_EQ(torchneuron::kernels::vector_tanh(INFINITY), 1.0f);
  EXPECT_EQ(torchneuron::kernels::vector_tanh(-INFINITY), -1.0f);
  EXPECT_TRUE(std::signbit(torchneuron::kernels::vector_tanh(-0.0f)));
  EXPECT_TRUE(std::isnan(torchneuron::kernels::vector_tanh(NAN)));
}

// GELU's x Phi(x) and the density's exp(-x^2 / 2) against double references, over every 97th
// float in [-14, 14]: within 2.8 ulp from -0.5 up, 11 down to -2.8, and relatively within 2e-5
// in the far negative tail, where the 1 + erf form loses every digit.
TEST(VectorMath, NormalCdfForGelu) {
  double worst_above = 0, worst_below = 0, worst_tail = 0, worst_gauss = 0;
  const auto ulps = [](float got, double want) {
    const float rounded = static_cast<float>(want);
    const double ulp = std::fabs(std::nextafter(rounded, INFINITY) - rounded);
    return ulp > 0 ? std::fabs(got - want) / ulp : 0.0;
  };
  for (uint32_t bits = 0; bits < 0xffffffffu - 97; bits += 97) {
    float x;
    std::memcpy(&x, &bits, sizeof(x));
    if (!(std::fabs(x) < 14.0f) || std::fabs(x) < 1e-30f) continue;
    float gauss;
    const float gelu = x * torchneuron::kernels::vector_normal_cdf(x, gauss);
    const double xd = x, exact = xd * 0.5 * std::erfc(-xd / std::sqrt(2.0));
    const double error = ulps(gelu, exact);
    if (x >= -0.5f) worst_above = std::max(worst_above, error);
    else if (x > -2.8f) worst_below = std::max(worst_below, error);
    else if (std::fabs(exact) > 1e-37) worst_tail = std::max(worst_tail, std::fabs(gelu / exact - 1));
    if (std::fabs(x) < 13.0f) worst_gauss = std::max(worst_gauss, std::fabs(gauss / std::exp(-xd * xd / 2) - 1));
  }
  EXPECT_LT(worst_above, 2.8);
  EXPECT_LT(worst_below, 11.0);
  EXPECT_LT(worst_tail, 2e-5);
  EXPECT_LT(worst_gauss, 2e-5);
  float gauss;
  EXPECT_EQ(torchneuron::kernels::vector_normal_cdf(INFINITY, gauss), 1.0f);
  EXPECT_EQ(gauss, 0.0f);
  EXPECT_EQ(torchneuron::kernels::vector_normal_cdf(-INFINITY, gauss), 0.0f);
  EXPECT_EQ(torchneuron::kernels::vector_normal_cdf(3e38f, gauss), 1.0f);
  EXPECT_EQ(torchneuron::kernels::vector_normal_cdf(-3e38f, gauss), 0.0f);
  EXPECT_EQ(torchneuron::kernels::vector_normal_cdf(0.0f, gauss), 0.5f);
  EXPECT_EQ(gauss, 1.0f);
  EXPECT_TRUE(std::isnan(torchneuron::kernels::vector_normal_cdf(NAN, gauss)));
}

// lane_max against a plain fold: every length up to three 64-lane steps, the NaN at each place
// (64-lane steps, 16-lane steps, the last elements) and infinities.
TEST(VectorMath, LaneMaxMatchesAPlainFold) {
  std::vector<float> x(200);
  uint32_t state = 12345;
  for (float& v : x) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(static_cast<int32_t>(state >> 8) % 100000) / 1000.0f;
  }
  for (int64_t n = 0; n <= 200; ++n) {
    float want = -INFINITY;
    for (int64_t i = 0; i < n; ++i) want = std::max(want, x[i]);
    ASSERT_EQ(torchneuron::kernels::lane_max(x.data(), n), want) << "n=" << n;
  }
  for (int64_t at : {0, 37, 63, 64, 130, 150, 190, 199}) {
    std::vector<float> y = x;
    y[at] = NAN;
    EXPECT_TRUE(std::isnan(torchneuron::kernels::lane_max(y.data(), 200))) << "NaN at " << at;
    y[at] = INFINITY;
    EXPECT_EQ(torchneuron::kernels::lane_max(y.data(), 200), INFINITY) << "inf at " << at;
  }
  const std::vector<float> lowest(77, -INFINITY);
  EXPECT_EQ(torchneuron::kernels::lane_max(lowest.data(), 77), -INFINITY);
}
