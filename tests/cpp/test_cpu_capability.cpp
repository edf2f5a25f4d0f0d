// Tests for the choice of instruction-set level: what the CPU supports, what a process selects
// (TORCHNEURON_CPU_CAPABILITY, never above the CPU), and which kernel library copy is loaded.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "compiler/artifact.h"
#include "kernels/cpu_capability.h"
#include "runtime/cpu_features.h"

namespace {

int rank(const std::string& level) { return level == "avx512" ? 2 : level == "avx2" ? 1 : level == "default" ? 0 : -1; }

// Sets TORCHNEURON_CPU_CAPABILITY for one scope and puts back what was there.
class ScopedCapability {
 public:
  explicit ScopedCapability(const char* value) {
    const char* old = std::getenv(kName);
    had_old_ = old != nullptr;
    if (had_old_) old_ = old;
    if (value != nullptr) {
      ::setenv(kName, value, 1);
    } else {
      ::unsetenv(kName);
    }
  }
  ~ScopedCapability() {
    if (had_old_) {
      ::setenv(kName, old_.c_str(), 1);
    } else {
      ::unsetenv(kName);
    }
  }

 private:
  static constexpr const char* kName = "TORCHNEURON_CPU_CAPABILITY";
  bool had_old_ = false;
  std::string old_;
};

TEST(CpuCapability, LoadedLibraryIsTheLevelTheRunAskedFor) {
  const std::string loaded = torchneuron::kernels::cpu_capability();
  EXPECT_EQ(loaded, torchneuron_kernels_cpu_capability());
  EXPECT_GE(rank(loaded), 0) << loaded;
  EXPECT_LE(rank(loaded), rank(torchneuron::runtime::highest_cpu_capability()));
  const char* expected = std::getenv("TORCHNEURON_EXPECT_CPU_CAPABILITY");
  if (expected != nullptr) {
    EXPECT_EQ(loaded, expected);
  }
}

TEST(CpuCapability, SelectionNeverExceedsTheCpu) {
  const std::string highest = torchneuron::runtime::highest_cpu_capability();
  ASSERT_GE(rank(highest), 0) << highest;
  {
    ScopedCapability unset(nullptr);
    EXPECT_EQ(torchneuron::runtime::selected_cpu_capability(), highest);
  }
  {
    ScopedCapability lowest("default");
    EXPECT_STREQ(torchneuron::runtime::selected_cpu_capability(), "default");
  }
  {
    ScopedCapability above("avx512");
    EXPECT_EQ(torchneuron::runtime::selected_cpu_capability(), highest);
  }
  {
    ScopedCapability unknown("sse9");
    EXPECT_EQ(torchneuron::runtime::selected_cpu_capability(), highest);
  }
}

TEST(CpuCapability, GeneratedCodeTargetsTheLevel) {
  EXPECT_STREQ(torchneuron::runtime::march_for_cpu_capability("default"), "x86-64");
  EXPECT_STREQ(torchneuron::runtime::march_for_cpu_capability("avx2"), "x86-64-v3");
  EXPECT_STREQ(torchneuron::runtime::march_for_cpu_capability("avx512"), "x86-64-v4");
  ScopedCapability lowest("default");
  const std::string flags = torchneuron::compiler::compile_flags();
  EXPECT_NE(flags.find("-march=x86-64 "), std::string::npos) << flags;
  EXPECT_EQ(flags.find("-march=native"), std::string::npos) << flags;
}

}  // namespace
