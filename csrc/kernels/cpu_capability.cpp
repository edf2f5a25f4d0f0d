#include "kernels/cpu_capability.h"

namespace torchneuron::kernels {

const char* cpu_capability() { return kCpuCapability; }

}  // namespace torchneuron::kernels

extern "C" const char* torchneuron_kernels_cpu_capability() { return torchneuron::kernels::kCpuCapability; }
