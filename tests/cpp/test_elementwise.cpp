// The compute pool (parallel_for) and the pointwise kernels: every index covered exactly once,
// concurrent callers, exceptions, and kernel results against plain loops.
#include <gtest/gtest.h>

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <cstring>
#include <cmath>
#include <stdexcept>
#include <thread>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/half.h"
#include "kernels/parallel.h"

namespace k = torchneuron::kernels;

namespace {

TEST(ParallelFor, CoversEveryIndexExactlyOnce) {
  for (int64_t n : {0, 1, 7, 1000, 100003}) {
    for (int64_t grain : {1, 64, 1 << 20}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      k::parallel_for(n, grain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)] += 1;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << " " << i;
    }
  }
}

TEST(ParallelFor, ConcurrentCallersDoNotMixWork) {
  std::vector<int64_t> sums(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &sums] {
      std::atomic<int64_t> sum{0};
      k::parallel_for(50000, 100, [&](int64_t begin, int64_t end) {
        int64_t local = 0;
        for (int64_t i = begin; i < end; ++i) local += i * (t + 1);
        sum += local;
      });
      sums[t] = sum.load();
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(sums[t], int64_t{49999} * 50000 / 2 * (t + 1));
}

TEST(ParallelFor, RethrowsTheFirstException) {
  EXPECT_THROW(k::parallel_for(10000, 10,
                               [](int64_t begin, int64_t) {
                                 if (begin >= 5000) throw std::runtime_error("chunk failed");
                               }),
               std::runtime_error);
}

// The threads that ran a parallel_for's chunks (chunks sleep so that every thread takes some).
std::set<std::thread::id> threads_used(int64_t chunks) {
  std::mutex mutex;
  std::set<std::thread::id> ids;
  k::parallel_for(chunks, 1, [&](int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::lock_guard<std::mutex> lock(mutex);
    ids.insert(std::this_thread::get_id());
  });
  return ids;
}

TEST(ParallelFor, RunsOnAsManyThreadsAsSet) {
  const int before = k::compute_threads();
  k::set_compute_threads(1);
  EXPECT_EQ(k::compute_threads(), 1);
  EXPECT_EQ(threads_used(64), std::set<std::thread::id>{std::this_thread::get_id()});
  k::set_compute_threads(3);
  EXPECT_EQ(k::compute_threads(), 3);
  const size_t used = threads_used(64).size();
  EXPECT_GE(used, 2u);
  EXPECT_LE(used, 3u);
  k::set_compute_threads(0);  // at least the caller
  EXPECT_EQ(k::compute_threads(), 1);
  k::set_compute_threads(before);
}

TEST(ParallelFor, DefaultSizeFollowsOmpNumThreadsAndAffinity) {
  const char* saved = std::getenv("OMP_NUM_THREADS");
  const std::string saved_value = saved != nullptr ? saved : "";
  setenv("OMP_NUM_THREADS", "3", 1);
  EXPECT_EQ(k::default_compute_threads(), 3);
  unsetenv("OMP_NUM_THREADS");
  cpu_set_t all, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  const int from_affinity = k::default_compute_threads();
  EXPECT_LE(from_affinity, CPU_COUNT(&all));
  setenv("OMP_NUM_THREADS", "not a number", 1);  // ignored, as by OpenMP
  EXPECT_EQ(k::default_compute_threads(), from_affinity);
  unsetenv("OMP_NUM_THREADS");
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &all)) {
      CPU_SET(cpu, &one);
      break;
    }
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);  // as `taskset -c N` would
  EXPECT_EQ(k::default_compute_threads(), 1);
  ASSERT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
  if (saved != nullptr) setenv("OMP_NUM_THREADS", saved_value.c_str(), 1);
}

k::ElementwiseArgs args_2d(int64_t rows, int64_t cols) {
  k::ElementwiseArgs args;
  args.ndim = 2;
  args.sizes[0] = rows;
  args.sizes[1] = cols;
  return args;
}

TEST(ElementwiseKernels, BroadcastAddWithAlphaMatchesLoop) {
  const int64_t rows = 300, cols = 257;  // large enough to split across the pool
  std::vector<float> a(rows * cols), b(cols), out(rows * cols);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 97) * 0.25f;
  for (size_t j = 0; j < b.size(); ++j) b[j] = static_cast<float>(j) - 100.0f;
  k::ElementwiseArgs args = args_2d(rows, cols);
  args.num_operands = 3;
  char* data[3] = {reinterpret_cast<char*>(out.data()), reinterpret_cast<char*>(a.data()),
                   reinterpret_cast<char*>(b.data())};
  for (int op = 0; op < 3; ++op) {
    args.data[op] = data[op];
    args.dtypes[op] = k::DType::kFloat32;
  }
  args.strides[0] = {cols * 4, 4};
  args.strides[1] = {cols * 4, 4};
  args.strides[2] = {0, 4};  // b broadcast over rows
  k::binary(k::BinaryOp::kAdd, args, {2.0, 2});
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_EQ(out[r * cols + c], a[r * cols + c] + 2.0f * b[c]) << r << " " << c;
    }
  }
}

TEST(ElementwiseKernels, WithDtypesConvertsMixedInputsAndOutput) {
  // int32 input compared as float32, written into a float64 output through staging.
  std::vector<int32_t> ints = {1, -2, 3, 40};
  std::vector<float> floats = {0.5f, 0.5f, 0.5f, 0.5f};
  std::vector<double> out(4);
  k::ElementwiseArgs args;
  args.ndim = 1;
  args.sizes[0] = 4;
  args.num_operands = 3;
  args.data = {reinterpret_cast<char*>(out.data()), reinterpret_cast<char*>(ints.data()),
               reinterpret_cast<char*>(floats.data()), nullptr};
  args.dtypes = {k::DType::kFloat64, k::DType::kInt32, k::DType::kFloat32, k::DType::kFloat32};
  args.strides[0][0] = 8;
  args.strides[1][0] = 4;
  args.strides[2][0] = 4;
  k::with_dtypes(args, k::DType::kFloat32, k::DType::kFloat32, 1,
                 [](const k::ElementwiseArgs& a) { k::binary(k::BinaryOp::kMul, a, {1.0, 1}); });
  EXPECT_EQ(out, (std::vector<double>{0.5, -1.0, 1.5, 20.0}));
}

TEST(ElementwiseKernels, HostScalarOperandIsReadFromTheArgs) {
  std::vector<float> x = {1.0f, 4.0f, 9.0f};
  std::vector<unsigned char> out(3);
  k::ElementwiseArgs args;
  args.ndim = 1;
  args.sizes[0] = 3;
  args.num_operands = 3;
  args.data = {reinterpret_cast<char*>(out.data()), reinterpret_cast<char*>(x.data()), nullptr, nullptr};
  args.dtypes = {k::DType::kBool, k::DType::kFloat32, k::DType::kFloat32, k::DType::kFloat32};
  args.strides[0][0] = 1;
  args.strides[1][0] = 4;
  args.is_scalar[2] = true;
  const float threshold = 4.0f;
  std::memcpy(args.scalar_bytes[2].data(), &threshold, sizeof(threshold));
  k::binary(k::BinaryOp::kGe, args, {});
  EXPECT_EQ(out, (std::vector<unsigned char>{0, 1, 1}));
}

TEST(ElementwiseKernels, UnaryOnBfloat16ComputesInFloat) {
  std::vector<k::BFloat16> in = {k::BFloat16(0.5f), k::BFloat16(-1.0f), k::BFloat16(2.0f)};
  std::vector<k::BFloat16> out(3);
  k::ElementwiseArgs args;
  args.ndim = 1;
  args.sizes[0] = 3;
  args.num_operands = 2;
  args.data = {reinterpret_cast<char*>(out.data()), reinterpret_cast<char*>(in.data()), nullptr, nullptr};
  args.dtypes = {k::DType::kBFloat16, k::DType::kBFloat16, k::DType::kFloat32, k::DType::kFloat32};
  args.strides[0][0] = 2;
  args.strides[1][0] = 2;
  k::unary(k::UnaryOp::kExp, args);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].bits, k::BFloat16(std::exp(static_cast<float>(in[i]))).bits) << i;
  }
  EXPECT_FALSE(k::unary_supported(k::UnaryOp::kExp, k::DType::kInt64));
  EXPECT_TRUE(k::unary_supported(k::UnaryOp::kAbs, k::DType::kInt64));
}

}  // namespace
