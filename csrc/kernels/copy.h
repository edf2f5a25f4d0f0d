// Data movement kernels: strided, dtype-converting copies and fills over device buffers.
// They run inside hardware-queue commands; arguments were validated on the host.
#pragma once

#include "kernels/strided.h"

namespace torchneuron::kernels {

// True when `copy` can convert from `src` to `dst` natively (all real and bool types among
// each other; complex only to complex).
bool copy_supported(DType dst, DType src);

// dst[i] = convert(src[i]) for every index; shapes must match (broadcast by stride 0 in src).
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
