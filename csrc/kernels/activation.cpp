#include "kernels/activation.h"

#include <cmath>

#include "kernels/dtype_dispatch.h"
#include "kernels/elementwise_map.h"
#include "kernels/floating.h"
#include "kernels/vector_math.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {
namespace {

using namespace elementwise_map;

// exp, log1p and tanh are the vectorizing exp_of, log1p_of and tanh_of: the C library's kept
// these activations scalar, 5-15x slower than CPU PyTorch.

template <typename C>
inline C softplus(C x, C beta, C threshold) {
  return x * beta > threshold ? x : log1p_of(exp_of(x * beta)) / beta;
}

// tanh(softplus(x)) = n / (n + 2) with n = e^x (e^x + 2): one exp and no log or tanh. From
// x = 20 on it is 1 in float (and n would overflow from 44 on). e: exp(min(x, 20)).
template <typename C>
inline C tanh_softplus(C e) {
  const C n = e * (e + C(2));
  return n / (n + C(2));
}

template <typename T>
void forward_typed(ActivationOp op, const ElementwiseArgs& a, const ActivationParams& p) {
  using C = Compute<T>;
  const C p0 = static_cast<C>(p[0]), p1 = static_cast<C>(p[1]), p2 = static_cast<C>(p[2]);
  switch (op) {
    case ActivationOp::kLeakyRelu: return map<T, T, 1>(a, [=](C x) { return x > C(0) ? x : x * p0; });
    case ActivationOp::kElu:
      return map<T, T, 1>(a, [=](C x) {
        const C e = exp_of(x * p2);  // computed for every x, so that the select vectorizes
        return x < C(0) ? (e - C(1)) * p0 * p1 : x * p1;  // -0.0 stays -0.0, as on CPU
      });
    case ActivationOp::kSoftplus: return map<T, T, 1>(a, [=](C x) { return softplus(x, p0, p1); });
    case ActivationOp::kHardtanh:
      return map<T, T, 1>(a, [=](C x) { return std::isnan(x) ? x : std::min(std::max(x, p0), p1); });
    case ActivationOp::kHardswish:
      return map<T, T, 1>(a, [](C x) { return x * std::min(std::max(x + C(3), C(0)), C(6)) / C(6); });
    case ActivationOp::kHardsigmoid:
      return map<T, T, 1>(a, [](C x) { return std::min(std::max(x + C(3), C(0)), C(6)) / C(6); });
    case ActivationOp::kMish:
      return map<T, T, 1>(a, [](C x) { return x > C(20) ? x : x * tanh_softplus(exp_of(x)); });
    case ActivationOp::kLogSigmoid:
      return map<T, T, 1>(a, [](C x) { return std::min(x, C(0)) - log1p_of(exp_of(-std::abs(x))); });
    case ActivationOp::kThreshold: return map<T, T, 1>(a, [=](C x) { return x <= p0 ? p1 : x; });
    case ActivationOp::kNanToNum:
      return map<T, T, 1>(a, [=](C x) {
        if (std::isnan(x)) return p0;
        if (std::isinf(x)) return x > C(0) ? p1 : p2;
        return x;
      });
    case ActivationOp::kScale: return map<T, T, 1>(a, [=](C x) { return x * p0; });
    case ActivationOp::kDivideBy: return map<T, T, 1>(a, [=](C x) { return x / p0; });
    case ActivationOp::kSoftshrink:
      // +0.0 between the bounds, NaN kept: CPU PyTorch's vectorized kernel.
      return map<T, T, 1>(a, [=](C x) { return x != x ? x : (x > p0 ? x - p0 : (x < -p0 ? x + p0 : C(0))); });
    case ActivationOp::kHardshrink: return map<T, T, 1>(a, [=](C x) { return x >= -p0 && x <= p0 ? C(0) : x; });
    case ActivationOp::kRoundDecimals:
      if (p1 != C(0)) return map<T, T, 1>(a, [=](C x) { return std::nearbyint(x / p0) * p0; });
      return map<T, T, 1>(a, [=](C x) { return std::nearbyint(x * p0) / p0; });
  }
}

template <typename T>
void backward_typed(ActivationOp op, const ElementwiseArgs& a, const ActivationParams& p) {
  using C = Compute<T>;
  const C p0 = static_cast<C>(p[0]), p1 = static_cast<C>(p[1]), p2 = static_cast<C>(p[2]);
  switch (op) {
    case ActivationOp::kLeakyRelu: return map<T, T, 2>(a, [=](C g, C x) { return x > C(0) ? g : g * p0; });
    case ActivationOp::kElu:
      if (p[3] != 0) {  // saved value is the result y: dy/dx = input_scale * (y + alpha * scale)
        return map<T, T, 2>(a, [=](C g, C y) { return y > C(0) ? g * p1 : g * p2 * (y + p0 * p1); });
      }
      // Tested as x > 0, as CPU PyTorch's vectorized kernel does: a NaN takes the exp branch.
      return map<T, T, 2>(a, [=](C g, C x) {
        const C e = exp_of(x * p2);
        return x > C(0) ? g * p1 : g * p2 * p0 * p1 * e;
      });
    case ActivationOp::kSoftplus:
      return map<T, T, 2>(a, [=](C g, C x) {
        const C z = exp_of(x * p0);
        return x * p0 > p1 ? g : g * z / (z + C(1));
      });
    // The NaN cases below follow CPU PyTorch's vectorized kernels (its scalar tails differ):
    // a NaN input gets a zero gradient from hardtanh and the shrinks, a NaN one from hardswish.
    case ActivationOp::kHardtanh: return map<T, T, 2>(a, [=](C g, C x) { return x > p0 && x < p1 ? g : C(0); });
    case ActivationOp::kHardswish:
      return map<T, T, 2>(a, [](C g, C x) {
        if (x <= C(-3)) return C(0);
        return x >= C(3) ? g : g * (x / C(3) + C(0.5));
      });
    case ActivationOp::kHardsigmoid:
      return map<T, T, 2>(a, [](C g, C x) { return x > C(-3) && x < C(3) ? g / C(6) : C(0); });
    case ActivationOp::kMish:
      return map<T, T, 2>(a, [](C g, C x) {
        const C e = exp_of(std::min(x, C(20)));
        const C sigmoid = e / (C(1) + e);
        const C t = tanh_softplus(e);
        return g * (t + x * sigmoid * (C(1) - t * t));
      });
    case ActivationOp::kLogSigmoid:
      return map<T, T, 2>(a, [](C g, C x) {
        const C z = exp_of(-std::abs(x));
        return x < C(0) ? g * (C(1) - z / (C(1) + z)) : g * z / (C(1) + z);
      });
    case ActivationOp::kSoftshrink:
    case ActivationOp::kHardshrink:
      return map<T, T, 2>(a, [=](C g, C x) { return x < -p0 || x > p0 ? g : C(0); });
    case ActivationOp::kThreshold:
    case ActivationOp::kNanToNum:
    case ActivationOp::kScale:
    case ActivationOp::kDivideBy:
    case ActivationOp::kRoundDecimals:
      break;
  }
  throw runtime::KernelError("this activation has no backward kernel");
}

}  // namespace

bool activation_supported(DType dtype) { return is_floating_dtype(dtype); }

void activation(ActivationOp op, const ElementwiseArgs& args, const ActivationParams& params) {
  dispatch_floating(args.dtypes[0], "activations", [&](auto tag) { forward_typed<decltype(tag)>(op, args, params); });
}

void activation_backward(ActivationOp op, const ElementwiseArgs& args, const ActivationParams& params) {
  dispatch_floating(args.dtypes[0], "activations", [&](auto tag) { backward_typed<decltype(tag)>(op, args, params); });
}

}  // namespace torchneuron::kernels
