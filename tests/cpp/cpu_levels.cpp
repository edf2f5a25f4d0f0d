// Prints the kernel library's instruction-set levels this CPU can run, highest first, one a line:
// the Makefile runs the kernel tests once per level.
#include <cstdio>
#include <cstring>

#include "runtime/cpu_features.h"

int main() {
  static const char* const kLevels[] = {"avx512", "avx2", "default"};
  const char* highest = torchneuron::runtime::highest_cpu_capability();
  bool supported = false;
  for (const char* level : kLevels) {
    supported = supported || std::strcmp(level, highest) == 0;
    if (supported) std::printf("%s\n", level);
  }
  return 0;
}
