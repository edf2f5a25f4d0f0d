// What the random-number translation units share (random.cpp: the shared stream's kernels;
// random_samplers.cpp: per-element samplers): reading and writing elements as double.
#pragma once

#include <cstring>
#include <type_traits>

#include "kernels/half.h"

namespace torchneuron::kernels::random_detail {

template <typename T>
double as_double(const T& typed) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(typed));
  } else {
    return static_cast<double>(typed);
  }
}

template <typename T>
void store(char* out, double value) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    const T typed(static_cast<float>(value));
    std::memcpy(out, &typed, sizeof(T));
  } else {
    const T typed = static_cast<T>(value);
    std::memcpy(out, &typed, sizeof(T));
  }
}

}  // namespace torchneuron::kernels::random_detail
