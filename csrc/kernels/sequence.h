// Sequence factories computed on the device: logspace, with CPU PyTorch's arithmetic (the two
// halves from start and from end, the power in double, C's conversion to the dtype).
#pragma once

#include <cstdint>

#include "kernels/strided.h"

namespace torchneuron::kernels {

// What the host has already converted as CPU PyTorch does: start and end in the dtype (read
// back as double, exactly), and the step between exponents. Complex dtypes use the _imag parts.
struct LogspaceArgs {
  int64_t steps = 0;  // at least 2
  double base = 10.0;
  double start = 0.0, start_imag = 0.0;
  double end = 0.0, end_imag = 0.0;
  double step = 0.0, step_imag = 0.0;
};

// out: `steps` contiguous elements of `dtype` (real dtypes but bool and uint16/32/64, and
// complex64 / complex128). Element i is base ** (start + step * i) in the first half and
// base ** (end - step * (steps - 1 - i)) in the second.
void logspace(DType dtype, const LogspaceArgs& args, void* out);

}  // namespace torchneuron::kernels
