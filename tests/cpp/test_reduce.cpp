// Reduction kernels against plain loops: trailing-dimension sums, a single large output split
// across the compute pool, max with NaN, and integer sums accumulating in int64.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/reduce.h"
#include "strided_view_util.h"

namespace k = torchneuron::kernels;

namespace {

TEST(ReduceKernels, SumOverTrailingDimensionMatchesLoop) {
  const int64_t rows = 37, cols = 1000;
  std::vector<float> in(rows * cols);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 13) - 6.0f;
  std::vector<float> out(rows);
  // The reduced (last) dimension is contiguous; the kept one has stride `cols`.
  k::reduce(k::ReduceOp::kSum, view(out.data(), k::DType::kFloat32, {rows}, {1}),
            view(in.data(), k::DType::kFloat32, {rows, cols}, {cols, 1}), 1);
  for (int64_t r = 0; r < rows; ++r) {
    double expected = 0;
    for (int64_t c = 0; c < cols; ++c) expected += in[r * cols + c];
    EXPECT_EQ(out[r], static_cast<float>(expected)) << r;
  }
}

TEST(ReduceKernels, SingleOutputOverManyElementsIsSplitAndExact) {
  std::vector<int32_t> in(1 << 20);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>(i % 1000);
  int64_t out = 0;
  k::reduce(k::ReduceOp::kSum, view(&out, k::DType::kInt64, {}, {}),
            view(in.data(), k::DType::kInt32, {static_cast<int64_t>(in.size())}, {1}), 1);
  int64_t expected = 0;
  for (int32_t v : in) expected += v;
  EXPECT_EQ(out, expected);
}

TEST(ReduceKernels, MaxPropagatesNanAndHandlesAllNegativeInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> in = {1.0f, NAN, 3.0f, -inf, -inf, -inf};
  std::vector<float> out(2);
  k::reduce(k::ReduceOp::kMax, view(out.data(), k::DType::kFloat32, {2}, {1}),
            view(in.data(), k::DType::kFloat32, {2, 3}, {3, 1}), 1);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], -inf);
  EXPECT_FALSE(k::reduce_supported(k::ReduceOp::kMean, k::DType::kInt64, k::DType::kInt64));
}

}  // namespace
