// Adaptive eager's fusion region without torch: hazard checks, the plan's scratch values, the
// structure key, and block-wise runs against running each op over the whole range.
#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>
#include <vector>

#include "compiler/eager_region.h"

namespace tc = torchneuron::compiler;
namespace tk = torchneuron::kernels;
using Result = tc::EagerRegion::AddResult;

namespace {

// A 1-D float32 op over `n` elements: out = f(a, b) (b may be a host scalar).
tk::ElementwiseArgs args_of(int64_t n, float* out, const float* a, const float* b, int64_t b_stride = 4) {
  tk::ElementwiseArgs args;
  args.ndim = 1;
  args.sizes[0] = n;
  args.num_operands = b == nullptr ? 2 : 3;
  const float* operands[3] = {out, a, b};
  for (int k = 0; k < args.num_operands; ++k) {
    args.data[k] = const_cast<char*>(reinterpret_cast<const char*>(operands[k]));
    args.strides[k][0] = k == 2 ? b_stride : 4;
    args.dtypes[k] = tk::DType::kFloat32;
  }
  return args;
}

// out[i] = a[i] * 2 + b[i] (b read with its stride), over the args' range.
tc::ElementwiseKernel multiply_add() {
  return [](const tk::ElementwiseArgs& a) {
    for (int64_t i = 0; i < a.sizes[0]; ++i) {
      const float x = *reinterpret_cast<const float*>(a.data[1] + i * a.strides[1][0]);
      const float y = a.num_operands > 2 ? *reinterpret_cast<const float*>(a.data[2] + i * a.strides[2][0]) : 0.f;
      *reinterpret_cast<float*>(a.data[0] + i * a.strides[0][0]) = x * 2 + y;
    }
  };
}

torchneuron::runtime::LaunchInfo info(const char* op, const char* site = "model.py:7") {
  auto launch = torchneuron::runtime::LaunchInfo::named(op);
  launch.site = site;
  return launch;
}

}  // namespace

TEST(EagerRegion, ShiftedViewOfWrittenMemoryIsAHazardExactReuseIsNot) {
  std::vector<float> x(100, 1.f), y(100, 2.f), z(100);
  tc::EagerRegion region;
  auto k = multiply_add();
  ASSERT_EQ(region.add(k, args_of(99, x.data(), x.data(), y.data()), info("aten::mul_")), Result::kAdded);
  EXPECT_FALSE(region.accesses()[0].written_first);  // in place: read before written
  auto k2 = multiply_add();
  // Reading x one element over after writing it: block-wise order would read stale values.
  EXPECT_EQ(region.add(k2, args_of(99, z.data(), x.data() + 1, y.data()), info("aten::add")), Result::kHazard);
  EXPECT_TRUE(k2 != nullptr);  // not taken on a hazard
  // The same range again is the same access.
  EXPECT_EQ(region.add(k2, args_of(99, z.data(), x.data(), y.data()), info("aten::add")), Result::kAdded);
  EXPECT_EQ(region.accesses().size(), 3u);
  EXPECT_TRUE(region.accesses()[2].written_first);
  EXPECT_EQ(region.made_bytes(), 99 * 4);  // z; x was there before
  auto k3 = multiply_add();
  EXPECT_EQ(region.add(k3, args_of(50, z.data(), x.data(), y.data()), info("aten::add")), Result::kOtherShape);
  // An op whose output partially overlaps its own input cannot be split into blocks.
  tc::EagerRegion other;
  EXPECT_EQ(other.add(k3, args_of(50, x.data() + 1, x.data(), y.data()), info("aten::add")), Result::kUnsupported);
}

TEST(EagerRegion, PlanKeepsOnlyDeadMadeValuesInScratch) {
  std::vector<float> a(10), b(10), t(10), out(10);
  tc::EagerRegion region;
  auto k1 = multiply_add(), k2 = multiply_add();
  float scalar = 3.f;
  ASSERT_EQ(region.add(k1, args_of(10, t.data(), a.data(), &scalar, 0), info("aten::mul")), Result::kAdded);
  ASSERT_EQ(region.add(k2, args_of(10, out.data(), t.data(), b.data()), info("aten::add")), Result::kAdded);
  // Accesses: a, the broadcast scalar, t, b, out.
  ASSERT_EQ(region.accesses().size(), 5u);
  std::vector<bool> dead(5, true);
  const tc::RegionPlan plan = region.plan(dead);
  EXPECT_EQ(plan.elided, 2);  // t and out are made here; a, b and the broadcast are not
  EXPECT_GE(plan.scratch_offset[2], 0);
  EXPECT_EQ(plan.scratch_offset[0], -1);
  EXPECT_EQ(plan.scratch_offset[1], -1);
  dead[4] = false;  // out is live
  EXPECT_EQ(region.plan(dead).elided, 1);
  EXPECT_NE(region.structure_key(dead), region.structure_key(std::vector<bool>(5, true)));
}

TEST(EagerRegion, StructureKeyIgnoresAddressesAndSizes) {
  std::vector<float> a(64), b(64), c(64), d(64);
  auto key_of = [](float* out, float* in, float* other, int64_t n) {
    tc::EagerRegion region;
    auto k = multiply_add();
    EXPECT_EQ(region.add(k, args_of(n, out, in, other), info("aten::add")), Result::kAdded);
    return region.structure_key(std::vector<bool>(region.accesses().size(), false));
  };
  EXPECT_EQ(key_of(a.data(), b.data(), c.data(), 64), key_of(d.data(), c.data(), a.data(), 32));
  EXPECT_NE(key_of(a.data(), b.data(), c.data(), 64), key_of(a.data(), b.data(), b.data(), 64));  // dataflow
}

TEST(EagerRegion, BlockWiseRunMatchesOpByOpWithScratchAndTail) {
  const int64_t n = 4096 * 3 + 5;
  std::vector<float> a(n), b(n), t(n, -1.f), out(n), expected(n);
  std::iota(a.begin(), a.end(), 0.f);
  std::iota(b.begin(), b.end(), 7.f);
  tc::EagerRegion region;
  auto k1 = multiply_add(), k2 = multiply_add();
  ASSERT_EQ(region.add(k1, args_of(n, t.data(), a.data(), b.data()), info("aten::mul")), Result::kAdded);
  ASSERT_EQ(region.add(k2, args_of(n, out.data(), t.data(), a.data()), info("aten::add")), Result::kAdded);
  std::vector<bool> dead(region.accesses().size(), false);
  dead[2] = true;  // t
  const tc::RegionPlan plan = region.plan(dead);
  ASSERT_EQ(plan.elided, 1);
  tc::run_region(region.take_ops(), plan, n);
  for (int64_t i = 0; i < n; ++i) expected[i] = (a[i] * 2 + b[i]) * 2 + a[i];
  EXPECT_EQ(out, expected);
  EXPECT_EQ(t[0], -1.f);  // the dead intermediate never reached memory
  EXPECT_TRUE(region.empty());
}

TEST(EagerRegion, KernelFailureNamesTheOpAndItsLine) {
  std::vector<float> a(10), out(10);
  tc::EagerRegion region;
  tc::ElementwiseKernel failing = [](const tk::ElementwiseArgs&) { throw std::runtime_error("division by zero"); };
  ASSERT_EQ(region.add(failing, args_of(10, out.data(), a.data(), nullptr), info("aten::div", "train.py:42")),
            Result::kAdded);
  const tc::RegionPlan plan = region.plan(std::vector<bool>(region.accesses().size(), false));
  try {
    tc::run_region(region.take_ops(), plan, 10);
    FAIL() << "expected a failure";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("aten::div"), std::string::npos) << what;
    EXPECT_NE(what.find("train.py:42"), std::string::npos) << what;
    EXPECT_NE(what.find("division by zero"), std::string::npos) << what;
  }
}
