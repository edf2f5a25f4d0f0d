// What the pointwise kernels' translation units (elementwise*.cpp) share: dtype classes, sigmoid,
// the GELU constants, op scalars in the compute type, and the compare and complex entry points.
#pragma once

#include <type_traits>

#include "kernels/elementwise.h"
#include "kernels/elementwise_map.h"
#include "kernels/vector_math.h"

namespace torchneuron::kernels::elementwise_detail {

inline bool is_floating(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16 || dtype == DType::kFloat32 ||
         dtype == DType::kFloat64;
}
inline bool is_integral_or_bool(DType dtype) { return !is_floating(dtype) && !is_complex(dtype); }

template <typename C>
inline C sigmoid(C x) {
  return C(1) / (C(1) + exp_of(-x));
}

constexpr double kGeluBeta = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kGeluKappa = 0.044715;

template <typename T>
elementwise_map::Compute<T> scalar_as(OpScalar s) {
  if constexpr (std::is_floating_point_v<elementwise_map::Compute<T>>) {
    return static_cast<elementwise_map::Compute<T>>(s.real);
  } else {
    return static_cast<elementwise_map::Compute<T>>(s.integer);
  }
}

// Comparisons and logical ops, which write bool (elementwise_compare.cpp), instantiated there
// for every real dtype.
template <typename T>
void compare_typed(BinaryOp op, const ElementwiseArgs& a);

// The complex kernels (elementwise_complex.cpp), instantiated there for R = float and double.
template <typename R>
void complex_unary_typed(UnaryOp op, const ElementwiseArgs& args);
template <typename R>
void complex_binary_typed(BinaryOp op, const ElementwiseArgs& args, OpScalar alpha);
bool complex_unary_supported(UnaryOp op);
bool complex_binary_supported(BinaryOp op);

}  // namespace torchneuron::kernels::elementwise_detail
