// Data movement kernels: strided, dtype-converting copies and fills over device buffers.
// They run inside hardware-queue commands; arguments were validated on the host.
#pragma once

#include <vector>

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

// Padding (or cropping) of the trailing axes of a contiguous [planes, in...] tensor into a
// contiguous [planes, out...] one. Along axis a, output position o reads input position
// source[a][o], or takes `value` where that is -1; the positions [before[a], before[a] + in[a])
// (clipped to the output) are the input's own, read as one run along the last axis.
struct PadPlan {
  int64_t planes = 1;
  std::vector<int64_t> in, out, before;
  std::vector<std::vector<int64_t>> source;
};
void pad(DType dtype, const PadPlan& plan, FillValue value, const void* in, void* out);
// The adjoint of a pad with no -1 sources (reflection, replication): grad_in, written here,
// sums grad_out over every output position that reads each input position.
void pad_backward(DType dtype, const PadPlan& plan, const void* grad_out, void* grad_in);

// out = in with the elements above (lower: tril) or below (triu) diagonal `diagonal` of each of
// `batch` contiguous [rows, cols] matrices set to zero; out may be in.
void triangle(DType dtype, int64_t batch, int64_t rows, int64_t cols, int64_t diagonal, bool lower, const void* in,
              void* out);

}  // namespace torchneuron::kernels
