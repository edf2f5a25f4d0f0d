#include "kernels/elementwise_common.h"

#include <cstdint>

#include "kernels/elementwise_map.h"
#include "kernels/half.h"
#include "runtime/errors.h"

namespace torchneuron::kernels::elementwise_detail {
namespace {

using namespace elementwise_map;

}  // namespace

template <typename T>
void compare_typed(BinaryOp op, const ElementwiseArgs& a) {
  using C = Compute<T>;
  switch (op) {
    case BinaryOp::kEq: return map<bool, T, 2>(a, [](C x, C y) { return x == y; });
    case BinaryOp::kNe: return map<bool, T, 2>(a, [](C x, C y) { return x != y; });
    case BinaryOp::kLt: return map<bool, T, 2>(a, [](C x, C y) { return x < y; });
    case BinaryOp::kLe: return map<bool, T, 2>(a, [](C x, C y) { return x <= y; });
    case BinaryOp::kGt: return map<bool, T, 2>(a, [](C x, C y) { return x > y; });
    case BinaryOp::kGe: return map<bool, T, 2>(a, [](C x, C y) { return x >= y; });
    case BinaryOp::kLogicalAnd: return map<bool, T, 2>(a, [](C x, C y) { return x != C(0) && y != C(0); });
    case BinaryOp::kLogicalOr: return map<bool, T, 2>(a, [](C x, C y) { return x != C(0) || y != C(0); });
    case BinaryOp::kLogicalXor: return map<bool, T, 2>(a, [](C x, C y) { return (x != C(0)) != (y != C(0)); });
    default:
      throw runtime::KernelError("not a comparison");
  }
}

template void compare_typed<bool>(BinaryOp op, const ElementwiseArgs& a);
template void compare_typed<uint8_t>(BinaryOp op, const ElementwiseArgs& a);
template void compare_typed<int8_t>(BinaryOp op, const ElementwiseArgs& a);
template void compare_typed<int16_t>(BinaryOp op, const ElementwiseArgs& a);
template void compare_typed<int32_t>(BinaryOp op, const ElementwiseArgs& a);
template void compare_typed<int64_t>(BinaryOp op, const ElementwiseArgs& a);
template void compare_typed<Half>(BinaryOp op, const ElementwiseArgs& a);
template void compare_typed<BFloat16>(BinaryOp op, const ElementwiseArgs& a);
template void compare_typed<float>(BinaryOp op, const ElementwiseArgs& a);
template void compare_typed<double>(BinaryOp op, const ElementwiseArgs& a);

}  // namespace torchneuron::kernels::elementwise_detail
