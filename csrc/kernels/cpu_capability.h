// The instruction-set level this copy of the kernel library is compiled for. The library is
// built once per level (default, avx2, avx512); torchneuron loads the one the CPU supports.
#pragma once

#include <cstdint>

namespace torchneuron::kernels {

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && defined(__AVX2__)
inline constexpr const char* kCpuCapability = "avx512";
inline constexpr int64_t kVectorBytes = 64;
#elif defined(__AVX2__) && defined(__FMA__)
inline constexpr const char* kCpuCapability = "avx2";
inline constexpr int64_t kVectorBytes = 32;
#else
inline constexpr const char* kCpuCapability = "default";
inline constexpr int64_t kVectorBytes = 16;
#endif

// The level of the loaded library: what actually runs, whatever was asked for.
const char* cpu_capability();

}  // namespace torchneuron::kernels

// For ctypes: the same, under a plain C name.
extern "C" const char* torchneuron_kernels_cpu_capability();
