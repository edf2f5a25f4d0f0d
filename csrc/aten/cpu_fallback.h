// The counted CPU fallback: operators without a native neuron kernel are copied to the CPU,
// run by ATen and copied back; each is counted and, by default, warned about once.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace torchneuron::aten {

enum class FallbackMode { kWarn, kSilent, kError };

// From TORCHNEURON_FALLBACK=warn|silent|error at start-up; settable at run time.
FallbackMode fallback_mode();
void set_fallback_mode(FallbackMode mode);

// Operator name ("aten::add.Tensor") -> number of calls that fell back since the last reset.
std::map<std::string, int64_t> fallback_counts();
void reset_fallback_counts();

}  // namespace torchneuron::aten
