#include "kernels/elementwise_common.h"

#include <cmath>
#include <complex>
#include <limits>
#include <type_traits>

#include "kernels/elementwise_map.h"
#include "runtime/errors.h"

namespace torchneuron::kernels::elementwise_detail {
namespace {

using namespace elementwise_map;

// ---- complex -------------------------------------------------------------------------------
// The textbook formulas on (real, imaginary) pairs, as CPU PyTorch's vectorized complex kernels
// compute them: std::complex's operator* checks for infinities after every product.

// |z| without overflow: float in double (exact squares, one rounding), double as hypot; an
// infinite part gives inf even beside a NaN, as hypot does.
template <typename R>
inline R complex_abs(R re, R im) {
  if constexpr (std::is_same_v<R, float>) {
    const double sum = static_cast<double>(re) * re + static_cast<double>(im) * im;
    const float magnitude = static_cast<float>(std::sqrt(sum));
    return std::isinf(re) || std::isinf(im) ? std::numeric_limits<float>::infinity() : magnitude;
  } else {
    return std::hypot(re, im);
  }
}

// x / y by Smith's algorithm, as CPU PyTorch divides complex numbers: the ratio of y's smaller
// part to its larger keeps |y|^2 from overflowing or underflowing, and a finite x over an
// infinite y gives 0. A zero y gives x's parts over zero (inf or NaN).
template <typename R>
inline std::complex<R> complex_divide(std::complex<R> x, std::complex<R> y) {
  const R a = x.real(), b = x.imag(), c = y.real(), d = y.imag();
  if (std::fabs(c) >= std::fabs(d)) {
    if (c == R(0) && d == R(0)) return {a / std::fabs(c), b / std::fabs(d)};
    const R ratio = d / c, scale = R(1) / (c + d * ratio);
    return {(a + b * ratio) * scale, (b - a * ratio) * scale};
  }
  const R ratio = c / d, scale = R(1) / (d + c * ratio);
  return {(a * ratio + b) * scale, (b * ratio - a) * scale};
}

}  // namespace

template <typename R>
void complex_unary_typed(UnaryOp op, const ElementwiseArgs& args) {
  using Z = std::complex<R>;
  switch (op) {
    case UnaryOp::kNeg: return map<Z, Z, 1>(args, [](Z z) { return Z(-z.real(), -z.imag()); });
    case UnaryOp::kConj: return map<Z, Z, 1>(args, [](Z z) { return Z(z.real(), -z.imag()); });
    case UnaryOp::kAbs: return map<R, Z, 1>(args, [](Z z) { return complex_abs(z.real(), z.imag()); });
    case UnaryOp::kAngle: return map<R, Z, 1>(args, [](Z z) { return std::atan2(z.imag(), z.real()); });
    // As CPU PyTorch's vectorized complex kernels, which map the C++ library's functions.
    case UnaryOp::kExp: return map<Z, Z, 1>(args, [](Z z) { return std::exp(z); });
    case UnaryOp::kLog: return map<Z, Z, 1>(args, [](Z z) { return std::log(z); });
    case UnaryOp::kSqrt: return map<Z, Z, 1>(args, [](Z z) { return std::sqrt(z); });
    case UnaryOp::kSin: return map<Z, Z, 1>(args, [](Z z) { return std::sin(z); });
    case UnaryOp::kCos: return map<Z, Z, 1>(args, [](Z z) { return std::cos(z); });
    case UnaryOp::kTanh: return map<Z, Z, 1>(args, [](Z z) { return std::tanh(z); });
    case UnaryOp::kSinh: return map<Z, Z, 1>(args, [](Z z) { return std::sinh(z); });
    case UnaryOp::kCosh: return map<Z, Z, 1>(args, [](Z z) { return std::cosh(z); });
    case UnaryOp::kReciprocal: return map<Z, Z, 1>(args, [](Z z) { return complex_divide(Z(1), z); });
    case UnaryOp::kIsNan:
      return map<bool, Z, 1>(args, [](Z z) { return std::isnan(z.real()) || std::isnan(z.imag()); });
    case UnaryOp::kIsInf:
      return map<bool, Z, 1>(args, [](Z z) { return std::isinf(z.real()) || std::isinf(z.imag()); });
    case UnaryOp::kIsFinite:
      return map<bool, Z, 1>(args, [](Z z) { return std::isfinite(z.real()) && std::isfinite(z.imag()); });
    case UnaryOp::kSign:  // sgn: z / |z|, 0 at 0
      return map<Z, Z, 1>(args, [](Z z) {
        const R magnitude = complex_abs(z.real(), z.imag());
        return magnitude == R(0) ? Z() : Z(z.real() / magnitude, z.imag() / magnitude);
      });
    default: throw runtime::KernelError("unary op is not supported for complex dtypes");
  }
}

template <typename R>
void complex_binary_typed(BinaryOp op, const ElementwiseArgs& args, OpScalar alpha) {
  using Z = std::complex<R>;
  const R scale = static_cast<R>(alpha.real);
  switch (op) {
    // x + alpha y with alpha the complex (alpha, 0), multiplied out as CPU PyTorch does (sub adds
    // -alpha): 0 times an infinite part of y is NaN, so an infinity in y's other part gives NaN.
    case BinaryOp::kAdd:
    case BinaryOp::kSub: {
      const R s = op == BinaryOp::kSub ? -scale : scale;
      return map<Z, Z, 2>(args, [s](Z x, Z y) {
        return Z(x.real() + (s * y.real() - R(0) * y.imag()), x.imag() + (s * y.imag() + R(0) * y.real()));
      });
    }
    case BinaryOp::kMul:
      return map<Z, Z, 2>(args, [](Z x, Z y) {
        return Z(x.real() * y.real() - x.imag() * y.imag(), x.real() * y.imag() + x.imag() * y.real());
      });
    case BinaryOp::kDiv: return map<Z, Z, 2>(args, [](Z x, Z y) { return complex_divide(x, y); });
    case BinaryOp::kPow:  // a square as a product, as CPU PyTorch computes it; other powers std::pow
      return map<Z, Z, 2>(args, [](Z x, Z y) {
        if (y.imag() == R(0) && y.real() == R(2)) {
          return Z(x.real() * x.real() - x.imag() * x.imag(), x.real() * x.imag() + x.imag() * x.real());
        }
        return std::pow(x, y);
      });
    case BinaryOp::kEq: return map<bool, Z, 2>(args, [](Z x, Z y) { return x.real() == y.real() && x.imag() == y.imag(); });
    case BinaryOp::kNe: return map<bool, Z, 2>(args, [](Z x, Z y) { return x.real() != y.real() || x.imag() != y.imag(); });
    default: throw runtime::KernelError("binary op is not supported for complex dtypes");
  }
}

bool complex_unary_supported(UnaryOp op) {
  switch (op) {
    case UnaryOp::kNeg: case UnaryOp::kConj: case UnaryOp::kAbs: case UnaryOp::kAngle: case UnaryOp::kSign:
    case UnaryOp::kExp: case UnaryOp::kLog: case UnaryOp::kSqrt: case UnaryOp::kReciprocal:
    case UnaryOp::kSin: case UnaryOp::kCos: case UnaryOp::kTanh: case UnaryOp::kSinh: case UnaryOp::kCosh:
    case UnaryOp::kIsNan: case UnaryOp::kIsInf: case UnaryOp::kIsFinite:
      return true;
    default:
      return false;
  }
}

bool complex_binary_supported(BinaryOp op) {
  return op == BinaryOp::kAdd || op == BinaryOp::kSub || op == BinaryOp::kMul || op == BinaryOp::kDiv ||
         op == BinaryOp::kPow || op == BinaryOp::kEq || op == BinaryOp::kNe;
}

template void complex_unary_typed<float>(UnaryOp op, const ElementwiseArgs& args);
template void complex_unary_typed<double>(UnaryOp op, const ElementwiseArgs& args);
template void complex_binary_typed<float>(BinaryOp op, const ElementwiseArgs& args, OpScalar alpha);
template void complex_binary_typed<double>(BinaryOp op, const ElementwiseArgs& args, OpScalar alpha);

}  // namespace torchneuron::kernels::elementwise_detail
