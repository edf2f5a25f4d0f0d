// The pause a polling thread takes between checks (the device queue's worker and the compute
// pool poll briefly before they sleep).
#pragma once

#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace torchneuron::runtime {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace torchneuron::runtime
