// Tests for the bfloat16 GEMM (the AVX512-BF16 kernel where the CPU has it, and gemm()'s
// dispatch): against a double-precision reference from the same bfloat16 inputs.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"
#include "kernels/half.h"

namespace k = torchneuron::kernels;

namespace {

struct Shape {
  int64_t m, n, k;
};

struct Epilogue {
  double alpha, beta;
  int64_t c_pad;  // row_stride - n for C
};

// A bf16 matrix of rows x cols stored row-major (unit column stride) or transposed (unit row
// stride), with a leading dimension padded by 3 so that strides are not the dense ones.
struct Operand {
  std::vector<k::BFloat16> data;
  int64_t row_stride, col_stride;

  Operand(int64_t rows, int64_t cols, bool transposed, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    const int64_t ld = (transposed ? rows : cols) + 3;
    data.resize(static_cast<size_t>(ld * (transposed ? cols : rows)), k::BFloat16(std::nanf("")));
    row_stride = transposed ? 1 : ld;
    col_stride = transposed ? ld : 1;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) at(r, c) = k::BFloat16(dist(rng));
    }
  }
  k::BFloat16& at(int64_t r, int64_t c) { return data[static_cast<size_t>(r * row_stride + c * col_stride)]; }
  k::MatrixOperand operand() { return {reinterpret_cast<char*>(data.data()), 0, row_stride, col_stride}; }
};

// Runs one GEMM through `run` and checks every element of C against the double reference,
// within 1e-2 of the sum of the terms' magnitudes, and that C's row padding is untouched.
template <typename Run>
void check(Shape s, bool ta, bool tb, Epilogue e, uint32_t seed, Run run) {
  std::mt19937 rng(seed);
  Operand a(s.m, s.k, ta, rng), b(s.k, s.n, tb, rng);
  const int64_t ldc = s.n + e.c_pad;
  const k::BFloat16 sentinel = k::BFloat16(12345.0f);
  std::vector<k::BFloat16> c(static_cast<size_t>(s.m * ldc), sentinel);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      c[i * ldc + j] = e.beta == 0.0 ? k::BFloat16(std::nanf("")) : k::BFloat16(dist(rng));
    }
  }
  const std::vector<k::BFloat16> old = c;

  k::GemmArgs g;
  g.dtype = k::DType::kBFloat16;
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.a = a.operand();
  g.b = b.operand();
  g.c = {reinterpret_cast<char*>(c.data()), 0, ldc, 1};
  g.alpha = e.alpha;
  g.beta = e.beta;
  run(g);

  int failures = 0;
  for (int64_t i = 0; i < s.m && failures < 5; ++i) {
    for (int64_t j = 0; j < ldc && failures < 5; ++j) {
      const float got = static_cast<float>(c[i * ldc + j]);
      if (j >= s.n) {
        EXPECT_EQ(c[i * ldc + j].bits, sentinel.bits) << "padding overwritten at " << i << "," << j;
        continue;
      }
      double sum = 0.0, magnitude = 0.0;
      for (int64_t p = 0; p < s.k; ++p) {
        const double product = static_cast<double>(static_cast<float>(a.at(i, p))) *
                               static_cast<double>(static_cast<float>(b.at(p, j)));
        sum += product;
        magnitude += std::fabs(product);
      }
      double expected = e.alpha * sum;
      magnitude *= std::fabs(e.alpha);
      if (e.beta != 0.0) {
        const double previous = static_cast<float>(old[i * ldc + j]);
        expected += e.beta * previous;
        magnitude += std::fabs(e.beta * previous);
      }
      const double reference = static_cast<float>(k::BFloat16(static_cast<float>(expected)));
      if (!(std::fabs(got - reference) <= 1e-2 * magnitude + 1e-30)) {
        ++failures;
        ADD_FAILURE() << "C[" << i << "," << j << "] = " << got << ", expected " << reference << " (m=" << s.m
                      << " n=" << s.n << " k=" << s.k << " ta=" << ta << " tb=" << tb << " alpha=" << e.alpha
                      << " beta=" << e.beta << ")";
      }
    }
  }
}

const Shape kShapes[] = {{1, 1, 1},    {1, 1, 2},     {3, 5, 7},     {12, 32, 2},   {13, 33, 3},
                         {25, 47, 31}, {64, 64, 64},  {100, 17, 129}, {1, 300, 65}, {300, 1, 65},
                         {37, 200, 511}, {130, 70, 1}, {200, 300, 257}};
const Epilogue kEpilogues[] = {{1.0, 0.0, 0}, {0.75, 0.5, 5}, {-1.5, 0.0, 2}};

template <typename Run>
void check_all(Run run) {
  uint32_t seed = 1;
  for (const Shape& s : kShapes) {
    for (int orientation = 0; orientation < 4; ++orientation) {
      for (const Epilogue& e : kEpilogues) check(s, orientation & 1, orientation & 2, e, seed++, run);
    }
  }
}

}  // namespace

TEST(GemmBFloat16, DispatchMatchesDoubleReference) {
  check_all([](const k::GemmArgs& g) { k::gemm(g); });
}

TEST(GemmBFloat16, KernelMatchesDoubleReferenceForAllShapes) {
  if (!k::bf16_gemm_available()) GTEST_SKIP() << "no AVX512-BF16 kernel: not the avx512 library, or no AVX512-BF16 on this CPU";
  check_all([](const k::GemmArgs& g) {
    ASSERT_TRUE(k::bf16_gemm_suits(g));
    k::bf16_gemm(g, g.a.data, g.b.data, g.c.data);
  });
}

// Small integers make every product and sum exact in float, so the result must be the
// epilogue's float value rounded to nearest even, bit for bit.
TEST(GemmBFloat16, ExactSumsRoundOnceToNearestEven) {
  const int64_t m = 19, n = 37, kk = 9;
  std::vector<k::BFloat16> a(m * kk), b(kk * n), c(m * n);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> dist(-3, 3);
  for (auto& x : a) x = k::BFloat16(static_cast<float>(dist(rng)));
  for (auto& x : b) x = k::BFloat16(static_cast<float>(dist(rng)));
  for (auto& x : c) x = k::BFloat16(static_cast<float>(dist(rng)) * 0.125f);
  const std::vector<k::BFloat16> old = c;
  k::GemmArgs g;
  g.dtype = k::DType::kBFloat16;
  g.m = m;
  g.n = n;
  g.k = kk;
  g.a = {reinterpret_cast<char*>(a.data()), 0, kk, 1};
  g.b = {reinterpret_cast<char*>(b.data()), 0, n, 1};
  g.c = {reinterpret_cast<char*>(c.data()), 0, n, 1};
  g.alpha = 0.3;
  g.beta = 0.7;
  k::gemm(g);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int64_t p = 0; p < kk; ++p) sum += static_cast<float>(a[i * kk + p]) * static_cast<float>(b[p * n + j]);
      const float expected = 0.3f * sum + 0.7f * static_cast<float>(old[i * n + j]);
      ASSERT_EQ(c[i * n + j].bits, k::BFloat16(expected).bits) << i << "," << j;
    }
  }
}

TEST(GemmBFloat16, BatchedNaNInputAndEmptyInnerDimension) {
  // Two batch entries of 40x50x33; a NaN in A's first row spreads along C's first row only.
  const int64_t m = 40, n = 50, kk = 33;
  std::vector<k::BFloat16> a(2 * m * kk, k::BFloat16(1.0f)), b(2 * kk * n, k::BFloat16(0.5f)), c(2 * m * n);
  a[m * kk + 3] = k::BFloat16(std::nanf(""));
  k::GemmArgs g;
  g.dtype = k::DType::kBFloat16;
  g.batch = 2;
  g.m = m;
  g.n = n;
  g.k = kk;
  g.a = {reinterpret_cast<char*>(a.data()), m * kk, kk, 1};
  g.b = {reinterpret_cast<char*>(b.data()), kk * n, n, 1};
  g.c = {reinterpret_cast<char*>(c.data()), m * n, n, 1};
  k::gemm(g);
  for (int64_t batch = 0; batch < 2; ++batch) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const float value = static_cast<float>(c[batch * m * n + i * n + j]);
        if (batch == 1 && i == 0) {
          EXPECT_TRUE(std::isnan(value));
        } else {
          EXPECT_EQ(value, 16.5f);
        }
      }
    }
  }
  g.k = 0;
  g.beta = 0.0;
  k::gemm(g);
  for (const auto& x : c) EXPECT_EQ(x.bits, 0);
}

// gemm_with_row_hooks: the epilogue sees every row exactly once, and only after its final values
// are in C (here it doubles them in place), whether the product splits by rows, by columns or
// not at all, in float32 (BLAS) and bfloat16, and across batch entries.
TEST(GemmEpilogue, RunsOncePerRowAfterTheRowIsFinal) {
  const Shape shapes[] = {{7, 5, 3}, {512, 96, 64}, {48, 640, 32}, {20, 2048, 16}, {300, 300, 17}};
  for (const Shape s : shapes) {
    for (const bool bf16 : {false, true}) {
      std::mt19937 rng(static_cast<uint32_t>(s.m * 31 + s.n));
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      std::vector<float> a(s.m * s.k), b(s.k * s.n), c(s.m * s.n, std::nanf(""));
      for (float& x : a) x = bf16 ? static_cast<float>(k::BFloat16(dist(rng))) : dist(rng);
      for (float& x : b) x = bf16 ? static_cast<float>(k::BFloat16(dist(rng))) : dist(rng);
      std::vector<k::BFloat16> a16(a.begin(), a.end()), b16(b.begin(), b.end()), c16(c.size());
      k::GemmArgs args;
      args.dtype = bf16 ? k::DType::kBFloat16 : k::DType::kFloat32;
      args.m = s.m;
      args.n = s.n;
      args.k = s.k;
      auto data = [&](auto& f32, auto& h) { return bf16 ? reinterpret_cast<char*>(h.data()) : reinterpret_cast<char*>(f32.data()); };
      args.a = {data(a, a16), 0, s.k, 1};
      args.b = {data(b, b16), 0, s.n, 1};
      args.c = {data(c, c16), 0, s.n, 1};
      std::vector<std::atomic<int>> visits(s.m);
      const k::RowHook doubles = [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          visits[i]++;
          for (int64_t j = 0; j < s.n; ++j) {
            if (bf16) c16[i * s.n + j] = k::BFloat16(2.0f * static_cast<float>(c16[i * s.n + j]));
            else c[i * s.n + j] *= 2.0f;
          }
        }
      };
      k::gemm_with_row_hooks(args, nullptr, &doubles);
      for (int64_t i = 0; i < s.m; ++i) {
        ASSERT_EQ(visits[i].load(), 1) << "row " << i << " of " << s.m << "x" << s.n;
        for (int64_t j = 0; j < s.n; ++j) {
          double expected = 0;
          for (int64_t p = 0; p < s.k; ++p) expected += double(a[i * s.k + p]) * b[p * s.n + j];
          const double got = bf16 ? static_cast<float>(c16[i * s.n + j]) : c[i * s.n + j];
          ASSERT_NEAR(got, 2 * expected, bf16 ? 2e-2 * (1 + std::fabs(2 * expected)) : 1e-4) << i << "," << j;
        }
      }
    }
  }
  // A batch of 3: rows are numbered across the batch entries.
  const int64_t batch = 3, m = 40, n = 24, kk = 8;
  std::vector<float> a(batch * m * kk, 1.0f), b(batch * kk * n, 0.5f), c(batch * m * n, std::nanf(""));
  k::GemmArgs args;
  args.batch = batch;
  args.m = m;
  args.n = n;
  args.k = kk;
  args.a = {reinterpret_cast<char*>(a.data()), m * kk, kk, 1};
  args.b = {reinterpret_cast<char*>(b.data()), kk * n, n, 1};
  args.c = {reinterpret_cast<char*>(c.data()), m * n, n, 1};
  std::vector<std::atomic<int>> visits(batch * m);
  const k::RowHook checks = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      visits[r]++;
      for (int64_t j = 0; j < n; ++j) EXPECT_EQ(c[r * n + j], 4.0f) << "row " << r << " not final";
    }
  };
  k::gemm_with_row_hooks(args, nullptr, &checks);
  for (int64_t r = 0; r < batch * m; ++r) EXPECT_EQ(visits[r].load(), 1) << r;
}

// The prologue writes each row of A exactly once, before any row of C that reads it is computed
// (A starts as NaN, so a row read early poisons C), whether the product splits by rows, by
// columns or not at all, in float32 and bfloat16, with an epilogue beside it, and across batch
// entries; every row is visited when A's rows are empty (k = 0) and when C is (n = 0).
TEST(GemmPrologue, WritesEachRowOfABeforeItIsRead) {
  struct Case {
    int64_t batch, m, n, k;
  };
  const Case cases[] = {{1, 7, 5, 3}, {1, 512, 96, 64}, {1, 48, 640, 32}, {1, 20, 2048, 16},
                        {1, 300, 300, 17}, {3, 40, 24, 8}, {2, 256, 64, 96}, {1, 9, 4, 0}, {2, 6, 0, 5}};
  for (const Case s : cases) {
    for (const bool bf16 : {false, true}) {
      const int64_t rows = s.batch * s.m;
      std::mt19937 rng(static_cast<uint32_t>(s.m * 7 + s.n + s.k));
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      std::vector<float> source(rows * s.k), b(s.batch * s.k * s.n);
      for (float& x : source) x = bf16 ? static_cast<float>(k::BFloat16(dist(rng))) : dist(rng);
      for (float& x : b) x = bf16 ? static_cast<float>(k::BFloat16(dist(rng))) : dist(rng);
      std::vector<float> a(source.size(), std::nanf("")), c(rows * s.n, std::nanf(""));
      std::vector<k::BFloat16> a16(a.begin(), a.end()), b16(b.begin(), b.end()), c16(c.begin(), c.end());
      auto data = [&](auto& f32, auto& h) { return bf16 ? reinterpret_cast<char*>(h.data()) : reinterpret_cast<char*>(f32.data()); };
      k::GemmArgs args;
      args.dtype = bf16 ? k::DType::kBFloat16 : k::DType::kFloat32;
      args.batch = s.batch;
      args.m = s.m;
      args.n = s.n;
      args.k = s.k;
      args.a = {data(a, a16), s.m * s.k, s.k, 1};
      args.b = {data(b, b16), s.k * s.n, s.n, 1};
      args.c = {data(c, c16), s.m * s.n, s.n, 1};
      std::vector<std::atomic<int>> written(rows), finished(rows);
      const k::RowHook writes_a = [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          written[r]++;
          for (int64_t p = 0; p < s.k; ++p) {
            if (bf16) a16[r * s.k + p] = k::BFloat16(source[r * s.k + p]);
            else a[r * s.k + p] = source[r * s.k + p];
          }
        }
      };
      const k::RowHook counts = [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) finished[r]++;
      };
      k::gemm_with_row_hooks(args, &writes_a, &counts);
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(written[r].load(), 1) << "row " << r << " of " << s.batch << "x" << s.m << "x" << s.n << "x" << s.k;
        ASSERT_EQ(finished[r].load(), 1) << "row " << r;
        const int64_t entry = r / s.m;
        for (int64_t j = 0; j < s.n; ++j) {
          double expected = 0;
          for (int64_t p = 0; p < s.k; ++p) expected += double(source[r * s.k + p]) * b[(entry * s.k + p) * s.n + j];
          const double got = bf16 ? static_cast<float>(c16[r * s.n + j]) : c[r * s.n + j];
          ASSERT_NEAR(got, expected, bf16 ? 2e-2 * (1 + std::fabs(expected)) : 1e-4) << r << "," << j;
        }
      }
    }
  }
}
