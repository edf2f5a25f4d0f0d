// Branch-free float math that the compiler vectorizes inside loops: an exp accurate to about
// one ulp (range reduction by ln 2 and a degree-6 polynomial), and lane-split sums and maxima
// whose rounding depends only on the data, not on threads.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace torchneuron::kernels {

inline float vector_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  const float clamped = x < -103.97f ? -103.97f : (x > 88.7228f ? 88.7228f : x);
  const float n = std::floor(clamped * kLog2e + 0.5f);
  const float r = clamped - n * kLn2Hi - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float poly = p * r * r + r + 1.0f;
  // 2^n in two factors, so that n down to -150 (subnormal results) stays representable.
  const int32_t k = static_cast<int32_t>(n);
  const int32_t half = k / 2;
  const float scale1 = std::bit_cast<float>((half + 127) << 23);
  const float scale2 = std::bit_cast<float>((k - half + 127) << 23);
  float result = poly * scale1 * scale2;
  result = x > 88.7228f ? std::numeric_limits<float>::infinity() : result;
  result = x < -103.97f ? 0.0f : result;
  return x != x ? x : result;
}

// Sum of n floats in 16 lanes (combined in double).
inline double lane_sum(const float* x, int64_t n) {
  constexpr int kLanes = 16;
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += x[i + l];
  }
  double total = 0;
  for (; i < n; ++i) total += x[i];
  for (int l = 0; l < kLanes; ++l) total += lanes[l];
  return total;
}

// Maximum of n floats; NaN if any is NaN.
inline float lane_max(const float* x, int64_t n) {
  constexpr int kLanes = 16;
  float lanes[kLanes];
  int nan_seen[kLanes] = {};
  for (int l = 0; l < kLanes; ++l) lanes[l] = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      lanes[l] = x[i + l] > lanes[l] ? x[i + l] : lanes[l];
      nan_seen[l] |= x[i + l] != x[i + l];
    }
  }
  float result = -std::numeric_limits<float>::infinity();
  int any_nan = 0;
  for (int l = 0; l < kLanes; ++l) {
    result = lanes[l] > result ? lanes[l] : result;
    any_nan |= nan_seen[l];
  }
  for (; i < n; ++i) {
    result = x[i] > result ? x[i] : result;
    any_nan |= x[i] != x[i];
  }
  return any_nan ? std::numeric_limits<float>::quiet_NaN() : result;
}

}  // namespace torchneuron::kernels
