// The CPU's instruction-set levels, read at run time: which copies of the kernel library
// (default, avx2, avx512) this machine can run, and which one this process runs.
#pragma once

namespace torchneuron::runtime {

// The highest level the CPU and the operating system support: "avx512", "avx2" or "default".
const char* highest_cpu_capability();

// The level this process runs at: TORCHNEURON_CPU_CAPABILITY when it names a level no higher
// than highest_cpu_capability(), else the highest. The kernel library copy and generated code
// both follow it.
const char* selected_cpu_capability();

// GCC's -march for generated code at `level`.
const char* march_for_cpu_capability(const char* level);

}  // namespace torchneuron::runtime

// For ctypes, which picks the kernel library before the extension module loads.
extern "C" const char* torchneuron_highest_cpu_capability();
extern "C" const char* torchneuron_selected_cpu_capability();
