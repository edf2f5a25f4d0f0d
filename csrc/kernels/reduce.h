// Reductions over the trailing dimensions of a strided view: sum, mean, prod, max, min and the
// vector norms (p = 0, 1, 2, +-inf).
// The aten layer permutes the reduced dimensions to the end; the leading ones match the output.
#pragma once

#include "kernels/strided.h"

namespace torchneuron::kernels {

enum class ReduceOp : uint8_t {
  kSum, kMean, kProd, kMax, kMin,
  kNorm0,       // count of nonzeros
  kNorm1,       // sum of |x|
  kNorm2,       // sqrt of the sum of squares
  kNormInf,     // max |x|
  kNormNegInf,  // min |x|
};

bool reduce_supported(ReduceOp op, DType in, DType out);

// out[i...] = op over in[i..., r...] for the last `reduced_dims` dimensions of `in`. Floating
// inputs accumulate in double, integers in int64; max/min propagate NaN.
void reduce(ReduceOp op, const StridedView& out, const StridedView& in, int reduced_dims);

}  // namespace torchneuron::kernels
