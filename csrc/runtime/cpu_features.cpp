#include "runtime/cpu_features.h"

#include <cstdlib>
#include <cstring>

namespace torchneuron::runtime {
namespace {

// Lowest first.
constexpr const char* kLevels[] = {"default", "avx2", "avx512"};
constexpr const char* kMarch[] = {"x86-64", "x86-64-v3", "x86-64-v4"};

int level_index(const char* level) {
  for (int i = 0; i < 3; ++i) {
    if (level != nullptr && std::strcmp(level, kLevels[i]) == 0) return i;
  }
  return -1;
}

}  // namespace

const char* highest_cpu_capability() {
#if defined(__x86_64__)
  // The levels are the -march levels the library copies are built for (x86-64-v3 is AVX2, FMA,
  // BMI2, F16C and the rest; x86-64-v4 adds AVX-512 F/BW/CD/DQ/VL). GCC's CPU model checks the
  // operating system's XSAVE support too, so a level whose registers are not saved is not reported.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return "avx512";
  if (__builtin_cpu_supports("x86-64-v3")) return "avx2";
#endif
  return "default";
}

const char* selected_cpu_capability() {
  const int highest = level_index(highest_cpu_capability());
  const int requested = level_index(std::getenv("TORCHNEURON_CPU_CAPABILITY"));
  return kLevels[requested >= 0 && requested < highest ? requested : highest];
}

const char* march_for_cpu_capability(const char* level) {
  const int index = level_index(level);
  return kMarch[index < 0 ? 0 : index];
}

}  // namespace torchneuron::runtime

extern "C" const char* torchneuron_highest_cpu_capability() {
  return torchneuron::runtime::highest_cpu_capability();
}

extern "C" const char* torchneuron_selected_cpu_capability() {
  return torchneuron::runtime::selected_cpu_capability();
}
