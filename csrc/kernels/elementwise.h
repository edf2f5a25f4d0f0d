// Pointwise kernels: unary, binary and ternary maps over up to four same-shaped strided
// operands (output first), as the aten layer lays them out after broadcasting and promotion.
#pragma once

#include <array>
#include <cstdint>
#include <functional>

#include "kernels/strided.h"

namespace torchneuron::kernels {

constexpr int kMaxOperands = 4;

struct ElementwiseArgs {
  int ndim = 0;
  std::array<int64_t, kMaxDims> sizes{};  // outermost first
  int num_operands = 0;                   // operand 0 is the output
  std::array<char*, kMaxOperands> data{};
  std::array<std::array<int64_t, kMaxDims>, kMaxOperands> strides{};  // in bytes
  std::array<DType, kMaxOperands> dtypes{};
  // A host scalar operand travels by value inside the command (its stride is 0).
  std::array<std::array<unsigned char, 16>, kMaxOperands> scalar_bytes{};
  std::array<bool, kMaxOperands> is_scalar{};

  int64_t numel() const;
};

// The common layouts (up to 4 dims, up to 3 operands) in 220 bytes. A queued command copies
// its captures, and a full ElementwiseArgs (over 700 bytes) does not fit inside one: it was
// allocated on the host thread and freed on the queue's worker for every op.
class PackedElementwiseArgs {
 public:
  static constexpr int kDims = 4;
  static constexpr int kOperands = 3;

  static bool fits(const ElementwiseArgs& args) { return args.ndim <= kDims && args.num_operands <= kOperands; }

  explicit PackedElementwiseArgs(const ElementwiseArgs& args)  // requires fits(args)
      : ndim_(static_cast<int8_t>(args.ndim)), num_operands_(static_cast<int8_t>(args.num_operands)) {
    for (int d = 0; d < ndim_; ++d) sizes_[d] = args.sizes[d];
    for (int k = 0; k < num_operands_; ++k) {
      data_[k] = args.data[k];
      dtypes_[k] = args.dtypes[k];
      is_scalar_[k] = args.is_scalar[k];
      scalar_bytes_[k] = args.scalar_bytes[k];
      for (int d = 0; d < ndim_; ++d) strides_[k][d] = args.strides[k][d];
    }
  }

  ElementwiseArgs unpack() const {
    ElementwiseArgs args;
    args.ndim = ndim_;
    args.num_operands = num_operands_;
    for (int d = 0; d < ndim_; ++d) args.sizes[d] = sizes_[d];
    for (int k = 0; k < num_operands_; ++k) {
      args.data[k] = data_[k];
      args.dtypes[k] = dtypes_[k];
      args.is_scalar[k] = is_scalar_[k];
      args.scalar_bytes[k] = scalar_bytes_[k];
      for (int d = 0; d < ndim_; ++d) args.strides[k][d] = strides_[k][d];
    }
    return args;
  }

 private:
  int8_t ndim_;
  int8_t num_operands_;
  std::array<DType, kOperands> dtypes_{};
  std::array<bool, kOperands> is_scalar_{};
  std::array<int64_t, kDims> sizes_{};
  std::array<char*, kOperands> data_{};
  std::array<std::array<int64_t, kDims>, kOperands> strides_{};
  std::array<std::array<unsigned char, 16>, kOperands> scalar_bytes_{};
};

enum class UnaryOp : uint8_t {
  kAbs, kNeg, kSign, kReciprocal, kSqrt, kRsqrt, kExp, kExp2, kExpm1, kLog, kLog2, kLog10,
  kLog1p, kSin, kCos, kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kTanh, kAsinh, kAcosh, kAtanh,
  kSigmoid, kErf, kErfc, kFloor, kCeil, kRound, kTrunc, kRelu, kSilu, kGeluErf, kGeluTanh,
  kLgamma, kDigamma, kErfinv,  // in double (kernels/special_functions.h)
  kI0, kI0e, kI1, kI1e,        // modified Bessel functions, likewise
  kFrac, kSinc, kEntr,         // x - trunc(x); sin(pi x) / (pi x); -x log x
  kBitwiseNot, kLogicalNot, kIsNan, kIsInf, kIsFinite, kSignbit,
  kConj, kAngle,  // complex only: conj_physical, and angle (a real output, as kAbs of complex)
};

enum class BinaryOp : uint8_t {
  kAdd, kSub, kMul, kDiv, kMaximum, kMinimum, kAtan2, kPow,
  kDivFloor, kDivTrunc,  // Python's // and C's truncating division (integers raise on zero)
  kRemainder, kFmod,     // Python's % (the sign of the divisor) and C's fmod (the dividend's)
  kXlogy,                // a log(b), 0 where a is 0 unless b is NaN
  kXlog1py,              // a log1p(b), likewise
  kLogaddexp, kLogaddexp2, kCopysign, kHypot,
  kFmax, kFmin,          // NaN-ignoring maximum and minimum
  kHeaviside,            // a == 0 ? b : a > 0
  kPrelu,                // a > 0 ? a : b * a
  // Loss terms of z = |a - b| with parameter alpha: z < beta ? z^2 / (2 beta) : z - beta / 2
  // (smooth L1), z < delta ? z^2 / 2 : delta (z - delta / 2) (Huber).
  kSmoothL1, kHuber,
  kEq, kNe, kLt, kLe, kGt, kGe,
  kLogicalAnd, kLogicalOr, kLogicalXor, kBitwiseAnd, kBitwiseOr, kBitwiseXor,
  // Gradients: grad (operand 1) times the derivative at the saved value (operand 2).
  kThresholdBackward, kSigmoidBackward, kTanhBackward, kSiluBackward, kGeluErfBackward,
  kGeluTanhBackward,
};

enum class TernaryOp : uint8_t {
  kWhere,     // out = cond ? a : b  (operands: out, cond, a, b)
  kAddcmul,   // out = self + alpha * t1 * t2
  kAddcdiv,   // out = self + alpha * t1 / t2
  kLerp,      // out = self + weight * (end - self)  (weight is operand 3)
  kClamp,     // out = min(max(x, lo), hi), NaN x kept  (operands: out, x, lo, hi)
  // PReLU's gradients (operands: out, x, weight, grad): x > 0 ? grad : weight * grad, and
  // x > 0 ? 0 : x * grad.
  kPreluGradInput, kPreluGradWeight,
  // Their gradients (operands: out, a, b, grad): grad times the slope at a - b, clipped to
  // [-1, 1] (smooth L1, alpha = beta) or [-delta, delta] (Huber, alpha = delta).
  kSmoothL1Backward, kHuberBackward,
};

// Scalar parameter of an op (alpha, threshold), held exactly for integer dtypes.
struct OpScalar {
  double real = 0.0;
  int64_t integer = 0;
};

bool unary_supported(UnaryOp op, DType dtype);
bool binary_supported(BinaryOp op, DType dtype);
bool ternary_supported(TernaryOp op, DType dtype);

// out = op(a). Output dtype equals the input's, or bool for predicates; kAbs and kAngle of a
// complex input write its real dtype (complex_to_real). Complex dtypes: kNeg, kConj, kAbs,
// kAngle, kExp, kLog, kSqrt, kReciprocal, kSin, kCos, kTanh, kSinh, kCosh, kSign (as torch.sgn:
// z / |z|) and the kIsNan, kIsInf and kIsFinite predicates.
void unary(UnaryOp op, const ElementwiseArgs& args);
bool complex_to_real(UnaryOp op);
// out = polygamma(n, a), n >= 0, for floating dtypes (operands: out, a).
void polygamma(int64_t n, const ElementwiseArgs& args);
// out = op(a, b) (kAdd/kSub: a + alpha * b). Inputs share a dtype; comparisons and logical
// ops write bool. Complex dtypes: kAdd, kSub (a real alpha), kMul, kDiv, kPow, kEq and kNe.
void binary(BinaryOp op, const ElementwiseArgs& args, OpScalar alpha);
// kWhere takes every dtype, complex included; the others real ones.
void ternary(TernaryOp op, const ElementwiseArgs& args, OpScalar alpha);

// Runs `body` on a copy of `args` whose inputs (from `first_input` on) are `input_dtype` and
// whose output is `output_dtype`: mismatched operands go through temporary buffers, as the
// device sees mixed dtypes that TensorIterator only casts for CPU tensors.
void with_dtypes(const ElementwiseArgs& args, DType input_dtype, DType output_dtype, int first_input,
                 const std::function<void(const ElementwiseArgs&)>& body);

// Clamps to [lo, hi]; either bound may be absent.
void clamp(const ElementwiseArgs& args, bool has_lo, OpScalar lo, bool has_hi, OpScalar hi);

}  // namespace torchneuron::kernels
