// The counted CPU fallback: operators without a native neuron kernel are copied to the CPU,
// run by ATen and copied back; each is counted and, by default, warned about once.
#pragma once

#include <ATen/core/stack.h>

#include <cstdint>
#include <map>
#include <string>

namespace c10 {
class OperatorHandle;
}

// The op structs that at::native::call_fallback_fn takes (ATen/Operators.h defines these too,
// but includes every operator's header).
#ifndef ATEN_OP
#define ATEN_OP(op_name) at::_ops::op_name
#define ATEN_OP2(op_name, overload) at::_ops::op_name##_##overload
#endif

namespace torchneuron::aten {

// The boxed fallback itself: counted, warned, device-checked, then run by ATen on the CPU.
// Native kernels call it (through at::native::call_fallback_fn) for cases they do not cover.
void neuron_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Accounts for one call of `name` run on the CPU by an explicit host route (an operator the
// boxed fallback cannot take): raises in error mode, counts it, warns once in warn mode.
void note_cpu_fallback(const std::string& name);

enum class FallbackMode { kWarn, kSilent, kError };

// From TORCHNEURON_FALLBACK=warn|silent|error at start-up; settable at run time.
FallbackMode fallback_mode();
void set_fallback_mode(FallbackMode mode);

// Operator name ("aten::add.Tensor") -> number of calls that fell back since the last reset.
std::map<std::string, int64_t> fallback_counts();
void reset_fallback_counts();

}  // namespace torchneuron::aten
