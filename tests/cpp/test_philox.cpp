// Tests for Philox 4x32-10 (Random123 known answers, stream positions, generator offsets) and
// for the uniform/normal kernels (word mapping, determinism, statistics, [from, to) range).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "kernels/half.h"
#include "kernels/random.h"
#include "runtime/errors.h"
#include "runtime/philox.h"
#include "strided_view_util.h"

namespace k = torchneuron::kernels;
namespace rt = torchneuron::runtime;

namespace {


k::StridedView flat(void* data, k::DType dtype, int64_t n) { return view(data, dtype, {n}, {1}); }

template <typename T>
void mean_and_std(const std::vector<T>& values, double* mean, double* std) {
  double sum = 0.0, sum_sq = 0.0;
  for (T v : values) sum += double(v);
  *mean = sum / double(values.size());
  for (T v : values) sum_sq += (double(v) - *mean) * (double(v) - *mean);
  *std = std::sqrt(sum_sq / double(values.size() - 1));
}

constexpr int kSamples = 100000;

}  // namespace

TEST(Philox, Random123KnownAnswers) {
  EXPECT_EQ(rt::philox4x32({0, 0, 0, 0}, 0),
            (rt::PhiloxBlock{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(rt::philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, 0xffffffffffffffffULL),
            (rt::PhiloxBlock{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  const uint64_t key = (uint64_t{0x299f31d0} << 32) | 0xa4093822;
  EXPECT_EQ(rt::philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, key),
            (rt::PhiloxBlock{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, StreamWordIndexesBlocksAndWordsFromTheOffset) {
  const rt::PhiloxStream stream{1234, 0xfffffffeULL * 4};  // offsets count words
  for (uint64_t i = 0; i < 16; ++i) {
    const uint64_t block = stream.offset / 4 + i / 4;
    const rt::PhiloxBlock expected = rt::philox4x32(
        {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0, 0}, 1234);
    EXPECT_EQ(stream.word(i), expected[i % 4]) << i;
  }
  // Crossing 2^32 blocks carries into the second counter word.
  EXPECT_EQ(stream.word(8), rt::philox4x32({0, 1, 0, 0}, 1234)[0]);
  EXPECT_NE(stream.word(0), (rt::PhiloxStream{1235, stream.offset}.word(0)));
}

TEST(Philox, BitsToUniformStayBelowOne) {
  EXPECT_EQ(rt::uint32_to_uniform_float(0), 0.0f);
  EXPECT_EQ(rt::uint32_to_uniform_float(0x80000000u), 0.5f);
  EXPECT_EQ(rt::uint32_to_uniform_float(0xffffffffu), 1.0f - std::ldexp(1.0f, -24));
  EXPECT_EQ(rt::uint64_to_uniform_double(0), 0.0);
  EXPECT_EQ(rt::uint64_to_uniform_double(~uint64_t{0}), 1.0 - std::ldexp(1.0, -53));
}

TEST(PhiloxGenerator, ReserveRoundsWordsUpToWholeBlocks) {
  rt::PhiloxGenerator gen;
  EXPECT_EQ(gen.seed(), 67280421310721ULL);
  EXPECT_EQ(gen.offset(), 0u);
  rt::PhiloxStream a = gen.reserve(5);
  EXPECT_EQ(a.seed, 67280421310721ULL);
  EXPECT_EQ(a.offset, 0u);
  EXPECT_EQ(gen.offset(), 8u);  // in words, rounded up to a whole block of 4
  EXPECT_EQ(gen.reserve(8).offset, 8u);
  EXPECT_EQ(gen.offset(), 16u);
  EXPECT_EQ(gen.reserve(0).offset, 16u);
  EXPECT_EQ(gen.offset(), 16u);
  gen.set_offset(100);
  EXPECT_EQ(gen.reserve(1).offset, 100u);
  EXPECT_EQ(gen.offset(), 104u);
  gen.set_seed(7);
  EXPECT_EQ(gen.seed(), 7u);
  EXPECT_EQ(gen.offset(), 0u);  // a new seed restarts the stream
}

TEST(PhiloxGenerator, ConcurrentReservationsNeverOverlap) {
  rt::PhiloxGenerator gen(1);
  std::vector<std::vector<uint64_t>> offsets(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&gen, &offsets, t] {
      for (int i = 0; i < 1000; ++i) offsets[t].push_back(gen.reserve(7).offset);
    });
  }
  for (auto& thread : threads) thread.join();
  std::set<uint64_t> all;
  for (const auto& list : offsets) all.insert(list.begin(), list.end());
  EXPECT_EQ(all.size(), 4000u);
  EXPECT_EQ(*all.rbegin(), 8u * 3999);
  EXPECT_EQ(gen.offset(), 32000u);
}

TEST(RandomKernels, WordsNeeded) {
  float f[5];
  double d[5];
  EXPECT_EQ(k::uniform_words_needed(flat(f, k::DType::kFloat32, 5)), 5u);
  EXPECT_EQ(k::uniform_words_needed(flat(d, k::DType::kFloat64, 5)), 10u);
  EXPECT_EQ(k::normal_words_needed(flat(f, k::DType::kFloat32, 5)), 6u);  // a whole pair
  EXPECT_EQ(k::normal_words_needed(flat(d, k::DType::kFloat64, 5)), 12u);
  EXPECT_EQ(k::normal_words_needed(flat(f, k::DType::kFloat32, 0)), 0u);
}

TEST(RandomKernels, UniformUsesWordIInRowMajorOrderOfAStridedView) {
  const rt::PhiloxStream stream{99, 20};
  std::vector<float> out(12, -1.0f);
  // A transposed [4, 3] view: element (i, j) sits at j * 4 + i and takes word i * 3 + j.
  k::uniform(view(out.data(), k::DType::kFloat32, {4, 3}, {1, 4}), stream, -1.0, 3.0);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 3; ++j) {
      const double unit = rt::uint32_to_uniform_float(stream.word(i * 3 + j));
      EXPECT_EQ(out[j * 4 + i], static_cast<float>(-1.0 + unit * 4.0)) << i << "," << j;
    }
  }
  std::vector<double> wide(3);
  k::uniform(flat(wide.data(), k::DType::kFloat64, 3), stream, 0.0, 1.0);
  for (uint64_t i = 0; i < 3; ++i) {
    const uint64_t bits = (uint64_t{stream.word(2 * i + 1)} << 32) | stream.word(2 * i);
    EXPECT_EQ(wide[i], rt::uint64_to_uniform_double(bits)) << i;
  }
}

TEST(RandomKernels, ConsecutiveReservationsContinueTheSameStream) {
  rt::PhiloxGenerator gen(2024);
  std::vector<float> first(5), second(5), whole(13);
  const k::StridedView first_view = flat(first.data(), k::DType::kFloat32, 5);
  const rt::PhiloxStream a = gen.reserve(k::uniform_words_needed(first_view));
  k::uniform(first_view, a, 0.0, 1.0);
  const rt::PhiloxStream b = gen.reserve(5);
  k::uniform(flat(second.data(), k::DType::kFloat32, 5), b, 0.0, 1.0);
  k::uniform(flat(whole.data(), k::DType::kFloat32, 13), a, 0.0, 1.0);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(first[i], whole[i]);
    EXPECT_EQ(second[i], whole[8 + i]);  // the second draw starts at the next whole block
  }
}

TEST(RandomKernels, UniformIsDeterministicAndDependsOnTheOffset) {
  std::vector<float> x(1000), y(1000), z(1000);
  k::uniform(flat(x.data(), k::DType::kFloat32, 1000), {5, 40}, 0.0, 1.0);
  k::uniform(flat(y.data(), k::DType::kFloat32, 1000), {5, 40}, 0.0, 1.0);
  k::uniform(flat(z.data(), k::DType::kFloat32, 1000), {5, 44}, 0.0, 1.0);
  EXPECT_EQ(x, y);
  int same = 0;
  for (int i = 0; i < 1000; ++i) same += x[i] == z[i];
  EXPECT_LT(same, 5);
}

TEST(RandomKernels, UniformStatisticsAndRange) {
  std::vector<float> f(kSamples);
  k::uniform(flat(f.data(), k::DType::kFloat32, kSamples), {1, 0}, -2.0, 3.0);
  double mean, std;
  mean_and_std(f, &mean, &std);
  EXPECT_NEAR(mean, 0.5, 0.025);
  EXPECT_NEAR(std, 5.0 / std::sqrt(12.0), 0.02);
  EXPECT_GE(*std::min_element(f.begin(), f.end()), -2.0f);
  EXPECT_LT(*std::max_element(f.begin(), f.end()), 3.0f);

  std::vector<double> d(kSamples);
  k::uniform(flat(d.data(), k::DType::kFloat64, kSamples), {2, 0}, 10.0, 11.0);
  mean_and_std(d, &mean, &std);
  EXPECT_NEAR(mean, 10.5, 0.005);
  EXPECT_GE(*std::min_element(d.begin(), d.end()), 10.0);
  EXPECT_LT(*std::max_element(d.begin(), d.end()), 11.0);
}

// float(from + u * (to - from)) can round up to `to` when u is within half an ulp of 1.
TEST(RandomKernels, UniformNeverReturnsTheUpperBound) {
  float f[4];
  // Seed 42, block 3135530: word 0 is 0xffffff23, the largest 24-bit uniform (1 - 2^-24).
  const rt::PhiloxStream stream{42, uint64_t{3135530} * 4};
  ASSERT_EQ(stream.word(0) >> 8, 0xffffffu);
  k::uniform(flat(f, k::DType::kFloat32, 4), stream, 1.0, 2.0);
  for (float x : f) EXPECT_LT(x, 2.0f);

  for (k::DType dtype : {k::DType::kFloat16, k::DType::kBFloat16}) {
    std::vector<uint16_t> bits(kSamples);
    k::uniform(flat(bits.data(), dtype, kSamples), {3, 0}, 0.0, 1.0);
    int at_upper_bound = 0;
    for (uint16_t b : bits) {
      const float x = dtype == k::DType::kFloat16 ? k::Half::to_float(b)
                                                  : k::bits_float(uint32_t{b} << 16);
      EXPECT_GE(x, 0.0f);
      at_upper_bound += x >= 1.0f;
    }
    EXPECT_EQ(at_upper_bound, 0) << k::dtype_name(dtype) << ": samples equal to `to`";
  }
}

TEST(RandomKernels, NormalStatisticsAndDeterminism) {
  std::vector<float> f(kSamples), g(kSamples);
  k::normal(flat(f.data(), k::DType::kFloat32, kSamples), {11, 0}, 1.5, 2.0);
  k::normal(flat(g.data(), k::DType::kFloat32, kSamples), {11, 0}, 1.5, 2.0);
  EXPECT_EQ(f, g);
  double mean, std;
  mean_and_std(f, &mean, &std);
  EXPECT_NEAR(mean, 1.5, 0.03);
  EXPECT_NEAR(std, 2.0, 0.03);
  int beyond_three_sigma = 0;
  for (float x : f) beyond_three_sigma += std::fabs(x - 1.5f) > 6.0f;
  EXPECT_NEAR(beyond_three_sigma, 0.0027 * kSamples, 80);  // about 270 expected

  std::vector<double> d(kSamples);
  k::normal(flat(d.data(), k::DType::kFloat64, kSamples), {12, 0}, -1.0, 0.5);
  mean_and_std(d, &mean, &std);
  EXPECT_NEAR(mean, -1.0, 0.008);
  EXPECT_NEAR(std, 0.5, 0.008);

  std::vector<float> shifted(1000);
  k::normal(flat(shifted.data(), k::DType::kFloat32, 1000), {11, 4}, 1.5, 2.0);
  int same = 0;
  for (int i = 0; i < 1000; ++i) same += shifted[i] == f[i];
  EXPECT_LT(same, 5);
}

TEST(RandomKernels, NormalDependsOnlyOnTheStreamNotTheLayout) {
  std::vector<float> contiguous(10), prefix(6), transposed(10);
  k::normal(flat(contiguous.data(), k::DType::kFloat32, 10), {8, 12}, 0.0, 1.0);
  k::normal(flat(prefix.data(), k::DType::kFloat32, 6), {8, 12}, 0.0, 1.0);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(prefix[i], contiguous[i]);
  // A [2, 5] view stored transposed gets the same values in row-major order.
  k::normal(view(transposed.data(), k::DType::kFloat32, {2, 5}, {1, 2}), {8, 12}, 0.0, 1.0);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 5; ++j) EXPECT_EQ(transposed[j * 2 + i], contiguous[i * 5 + j]);
  }
}

TEST(RandomKernels, NonFloatingDestinationIsAKernelError) {
  int32_t out[4];
  EXPECT_THROW(k::uniform(flat(out, k::DType::kInt32, 4), {0, 0}, 0.0, 1.0), rt::KernelError);
  EXPECT_THROW(k::normal(flat(out, k::DType::kInt32, 4), {0, 0}, 0.0, 1.0), rt::KernelError);
}
