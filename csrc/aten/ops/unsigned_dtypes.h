// uint16/32/64 on neuron: the kernels convert them (copy, fill) but compute on none of them, so
// their ops run on the signed type of the same width where the bits agree, or on int64 values.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/bitwise_xor.h>

#include <cstdint>

namespace torchneuron::aten {

inline bool is_wide_unsigned(c10::ScalarType type) {
  return type == c10::kUInt16 || type == c10::kUInt32 || type == c10::kUInt64;
}

// The signed type of an unsigned type's width (the type itself otherwise).
inline c10::ScalarType signed_twin(c10::ScalarType type) {
  switch (type) {
    case c10::kUInt16: return c10::kShort;
    case c10::kUInt32: return c10::kInt;
    case c10::kUInt64: return c10::kLong;
    default: return type;
  }
}

inline int64_t twin_min(c10::ScalarType type) {
  return type == c10::kUInt16 ? INT16_MIN : type == c10::kUInt32 ? INT32_MIN : INT64_MIN;
}

// Flipping the top bit maps unsigned order onto the signed twin's order, so sorts and max / min
// run on these keys; from_order_keys maps results back.
inline at::Tensor unsigned_order_keys(const at::Tensor& self) {
  return at::bitwise_xor(self.view(signed_twin(self.scalar_type())), twin_min(self.scalar_type()));
}
inline at::Tensor from_order_keys(const at::Tensor& keys, c10::ScalarType type) {
  return at::bitwise_xor(keys, twin_min(type)).view(type);
}

// The values as int64 (uint64 as its bits, which is what int64 sums and products of it give).
inline at::Tensor unsigned_as_long(const at::Tensor& self) {
  return self.scalar_type() == c10::kUInt64 ? self.view(c10::kLong) : self.to(c10::kLong);
}

}  // namespace torchneuron::aten
