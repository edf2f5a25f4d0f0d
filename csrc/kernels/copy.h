// Data movement kernels: strided, dtype-converting copies and fills over device buffers.
// They run inside hardware-queue commands; arguments were validated on the host.
#pragma once

#include "kernels/strided.h"

namespace torchneuron::kernels {

// dst[i] = convert(src[i]) for every index; shapes must match (broadcast by stride 0 in src).
// Complex to real keeps the real part, as torch does.
void copy(const StridedView& dst, const StridedView& src);

// Sets every element of dst to `value`, given as a double (real types) or its bit pattern
// for 64-bit integers, which a double cannot hold exactly.
struct FillValue {
  double real = 0.0;
  int64_t integer = 0;
  bool is_integer = false;
};
void fill(const StridedView& dst, FillValue value);

}  // namespace torchneuron::kernels
