// Tests for the bfloat16 GEMM (the AVX512-BF16 kernel where the CPU has it, and gemm()'s
// dispatch): against a double-precision reference from the same bfloat16 inputs.
#include <cblas.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"
#include "kernels/half.h"
#include "runtime/errors.h"

extern "C" void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);

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

namespace {

// The message of the KernelError `call` throws, or "" (a failure) when it throws nothing.
template <typename Call>
std::string kernel_error_of(Call call) {
  try {
    call();
  } catch (const torchneuron::runtime::KernelError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no KernelError";
  return "";
}

}  // namespace

// OpenBLAS reports an illegal argument through xerbla_; the kernel library's own xerbla_ must be
// the one that runs (OpenBLAS's prints to stderr and returns): under a BlasErrorsThrow, as every
// kernel's call is, it throws, through the C interface and through LAPACK's Fortran routines
// alike; without one (another library's call) it prints and returns.
TEST(BlasErrors, IllegalLeadingDimensionThrows) {
  k::configure_blas_threads();
  std::vector<double> a(16, 1.0), b(16, 1.0), c(16, -1.0);
  const int rows = 4, cols = 4, lda = 2;
  std::vector<int> pivots(4);
  int info = 0;
  // C[4x3] = A^T B with A stored [1 x 4] (lda must be >= 4) and lda = 1: the call issue 43 saw.
  const auto bad_gemm = [&] {
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, 4, 3, 1, 1.0, a.data(), 1, b.data(), 3, 0.0, c.data(), 3);
  };
  {
    const k::BlasErrorsThrow errors_throw;
    const std::string gemm = kernel_error_of(bad_gemm);
    EXPECT_NE(gemm.find("DGEMM"), std::string::npos) << gemm;
    EXPECT_NE(gemm.find("parameter"), std::string::npos) << gemm;
    const std::string getrf = kernel_error_of([&] { dgetrf_(&rows, &cols, a.data(), &lda, pivots.data(), &info); });
    EXPECT_NE(getrf.find("DGETRF"), std::string::npos) << getrf;
    EXPECT_NE(getrf.find("parameter 4"), std::string::npos) << getrf;
  }
  testing::internal::CaptureStderr();
  EXPECT_NO_THROW(bad_gemm());
  const std::string printed = testing::internal::GetCapturedStderr();
  EXPECT_NE(printed.find("DGEMM was called with an illegal value"), std::string::npos) << printed;
  EXPECT_NE(printed.find("torchneuron's xerbla_"), std::string::npos) << printed;
}

namespace {

// One operand of a strided-GEMM case: sizes and strides (any, 0 included) and the batch stride.
struct Layout {
  int64_t row_stride, col_stride, batch_stride = 0;
};

struct StridedCase {
  int64_t batch, m, n, k;
  Layout a, b, c;
};

double to_double(float x) { return x; }
double to_double(double x) { return x; }
double to_double(k::BFloat16 x) { return static_cast<float>(x); }
double to_double(k::Half x) { return static_cast<float>(x); }

// The largest element offset of a layout, plus one.
int64_t extent(const Layout& l, int64_t batch, int64_t rows, int64_t cols) {
  return (batch - 1) * l.batch_stride + (rows - 1) * l.row_stride + (cols - 1) * l.col_stride + 1;
}

// Runs gemm() on one case and compares every element of C (and C's untouched storage) with a
// double-precision product of the same inputs. T is the storage type, V what the values go in as.
template <typename T, typename V>
void check_strided(k::DType dtype, const StridedCase& s, double tolerance) {
  std::mt19937 rng(static_cast<uint32_t>(s.m * 131 + s.n * 17 + s.k));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto fill = [&](int64_t size) {
    std::vector<T> v;
    for (int64_t i = 0; i < size; ++i) {
      if constexpr (std::is_same_v<T, std::complex<float>>) {
        v.emplace_back(dist(rng), dist(rng));
      } else {
        v.push_back(V(dist(rng)));
      }
    }
    return v;
  };
  std::vector<T> a = fill(extent(s.a, s.batch, s.m, s.k)), b = fill(extent(s.b, s.batch, s.k, s.n));
  std::vector<T> c = fill(extent(s.c, s.batch, s.m, s.n) + 3);
  const std::vector<T> before = c;
  k::GemmArgs g;
  g.dtype = dtype;
  g.batch = s.batch;
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.a = {reinterpret_cast<char*>(a.data()), s.a.batch_stride, s.a.row_stride, s.a.col_stride};
  g.b = {reinterpret_cast<char*>(b.data()), s.b.batch_stride, s.b.row_stride, s.b.col_stride};
  g.c = {reinterpret_cast<char*>(c.data()), s.c.batch_stride, s.c.row_stride, s.c.col_stride};
  g.alpha = 1.0;
  g.beta = 0.0;
  k::gemm(g);
  std::vector<bool> written(c.size(), false);
  for (int64_t e = 0; e < s.batch; ++e) {
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; ++j) {
        std::complex<double> sum = 0.0;
        double magnitude = 0.0;
        for (int64_t p = 0; p < s.k; ++p) {
          const T x = a[e * s.a.batch_stride + i * s.a.row_stride + p * s.a.col_stride];
          const T y = b[e * s.b.batch_stride + p * s.b.row_stride + j * s.b.col_stride];
          std::complex<double> product;
          if constexpr (std::is_same_v<T, std::complex<float>>) {
            product = std::complex<double>(x) * std::complex<double>(y);
          } else {
            product = to_double(x) * to_double(y);
          }
          sum += product;
          magnitude += std::abs(product);
        }
        const int64_t at = e * s.c.batch_stride + i * s.c.row_stride + j * s.c.col_stride;
        written[at] = true;
        std::complex<double> got;
        if constexpr (std::is_same_v<T, std::complex<float>>) {
          got = std::complex<double>(c[at]);
        } else {
          got = to_double(c[at]);
        }
        EXPECT_LE(std::abs(got - sum), tolerance * (magnitude + 1.0))
            << "C[" << e << "," << i << "," << j << "] = " << got << ", expected " << sum << " (case " << s.m << "x"
            << s.n << "x" << s.k << ")";
      }
    }
  }
  for (size_t i = 0; i < c.size(); ++i) {
    if (!written[i]) {
      EXPECT_TRUE(std::memcmp(&c[i], &before[i], sizeof(T)) == 0) << "C storage " << i << " overwritten";
    }
  }
}

// Operands PyTorch can hand over: size-1 dimensions with any stride (0 included), stride-0
// expanded rows, columns and batches, two non-unit strides; C with a size-1 dimension's odd stride.
const StridedCase kStridedCases[] = {
    {1, 4, 3, 1, {1, 0}, {3, 1}, {3, 1}},             // issue 43: A [4,1] strides (1, 0)
    {1, 4, 3, 1, {0, 0}, {0, 5}, {3, 1}},             // A expanded rows, B a row with row stride 0
    {1, 4, 5, 3, {0, 1}, {1, 0}, {5, 1}},             // A rows expanded, B columns expanded
    {1, 4, 5, 3, {2, 9}, {7, 2}, {8, 1}},             // two non-unit strides each, C padded
    {1, 1, 5, 3, {0, 2}, {1, 3}, {0, 1}},             // a single row with row stride 0, C too
    {1, 6, 1, 4, {4, 1}, {0, 7}, {1, 0}},             // B [4,1] expanded, C [6,1] column stride 0
    {1, 6, 1, 4, {1, 6}, {1, 0}, {1, 5}},             // A column-major, B a column with stride 0
    {1, 100, 100, 40, {1, 0}, {0, 1}, {100, 1}},      // big enough to split: A columns expanded
    {3, 5, 4, 6, {6, 1, 0}, {1, 6, 24}, {4, 1, 20}},  // A's batch expanded, B column-major
    {2, 5, 4, 1, {1, 0, 5}, {0, 1, 0}, {4, 1, 20}},   // k = 1 everywhere odd
};

}  // namespace

TEST(GemmStrided, AnyLegalStridesGiveTheProduct) {
  for (const StridedCase& s : kStridedCases) {
    check_strided<float, float>(k::DType::kFloat32, s, 1e-5);
    check_strided<double, double>(k::DType::kFloat64, s, 1e-12);
    check_strided<std::complex<float>, std::complex<float>>(k::DType::kComplex64, s, 1e-5);
    check_strided<k::BFloat16, k::BFloat16>(k::DType::kBFloat16, s, 1e-2);
    check_strided<k::Half, k::Half>(k::DType::kFloat16, s, 2e-3);
  }
}

// C that is not row-major is refused, not written wrongly.
TEST(GemmStrided, ColumnMajorOutputIsRefused) {
  std::vector<float> a(6, 1.0f), b(6, 1.0f), c(4, 0.0f);
  k::GemmArgs g;
  g.m = 2;
  g.n = 2;
  g.k = 3;
  g.a = {reinterpret_cast<char*>(a.data()), 0, 3, 1};
  g.b = {reinterpret_cast<char*>(b.data()), 0, 2, 1};
  g.c = {reinterpret_cast<char*>(c.data()), 0, 1, 2};
  EXPECT_THROW(k::gemm(g), torchneuron::runtime::KernelError);
}
