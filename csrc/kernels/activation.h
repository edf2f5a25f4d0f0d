// Parameterized pointwise activations and their gradients (leaky ReLU, ELU, softplus,
// hardtanh, hardswish, hardsigmoid, mish, log-sigmoid, threshold, nan_to_num, soft and hard
// shrinkage, rounding to decimals), over the same
// operand layout as kernels/elementwise. Floating dtypes only; half types compute in float.
#pragma once

#include <array>
#include <cstdint>

#include "kernels/elementwise.h"

namespace torchneuron::kernels {

enum class ActivationOp : uint8_t {
  kLeakyRelu,    // p0: negative slope
  kElu,          // p0: alpha, p1: scale, p2: input scale
  kSoftplus,     // p0: beta, p1: threshold
  kHardtanh,     // p0: min, p1: max
  kHardswish,
  kHardsigmoid,
  kMish,
  kLogSigmoid,
  kThreshold,    // p0: threshold, p1: value
  kNanToNum,     // p0: nan, p1: +inf, p2: -inf replacements
  kScale,        // x * p0, with p0 in the compute type (not rounded to a half type first)
  kDivideBy,     // x / p0, likewise
  kSoftshrink,   // p0: lambda
  kHardshrink,   // p0: lambda
  kRoundDecimals,  // p0: 10^|decimals|, p1 != 0 for negative decimals (no gradient op)
};

using ActivationParams = std::array<double, 4>;

bool activation_supported(DType dtype);

// out = f(x): operands (out, x).
void activation(ActivationOp op, const ElementwiseArgs& args, const ActivationParams& params);

// grad_in = grad_out * f'(x): operands (grad_in, grad_out, x). For kElu, p3 != 0 means the saved
// operand is the forward's result rather than its input. kThreshold has no gradient op.
void activation_backward(ActivationOp op, const ElementwiseArgs& args, const ActivationParams& params);

}  // namespace torchneuron::kernels
