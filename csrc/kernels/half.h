// 16-bit floating types of the kernel library (IEEE half and bfloat16) with float conversions
// that round to nearest even, as torch's CPU kernels do.
#pragma once

#include <cstdint>
#include <cstring>

namespace torchneuron::kernels {

inline uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float bits_float(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

struct BFloat16 {
  uint16_t bits;

  BFloat16() = default;
  explicit BFloat16(float value) {
    const uint32_t raw = float_bits(value);
    if ((raw & 0x7fffffffu) > 0x7f800000u) {
      bits = 0x7fc0;  // quiet NaN
    } else {
      const uint32_t rounding = 0x7fffu + ((raw >> 16) & 1u);
      bits = static_cast<uint16_t>((raw + rounding) >> 16);
    }
  }
  explicit operator float() const { return bits_float(static_cast<uint32_t>(bits) << 16); }
};

struct Half {
  uint16_t bits;

  Half() = default;
  explicit Half(float value) { bits = from_float(value); }
  explicit operator float() const { return to_float(bits); }

  static uint16_t from_float(float value) {
    const uint32_t raw = float_bits(value);
    const uint32_t sign = (raw >> 16) & 0x8000u;
    uint32_t magnitude = raw & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
    if (magnitude >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);  // 65536+ -> inf
    if (magnitude < 0x38800000u) {
      // Subnormal half (or zero): add 0.5 so that the FPU's rounding does the work.
      const float shifted = bits_float(magnitude) + 0.5f;
      return static_cast<uint16_t>(sign | (float_bits(shifted) - 0x3f000000u));
    }
    const uint32_t odd = (magnitude >> 13) & 1u;
    magnitude += 0xc8000fffu + odd;  // rebias exponent (-112 << 23) and round to nearest even
    return static_cast<uint16_t>(sign | (magnitude >> 13));
  }

  static float to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    const uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1f) return bits_float(sign | 0x7f800000u | (mantissa << 13));
    if (exponent == 0) {
      if (mantissa == 0) return bits_float(sign);
      const float value = static_cast<float>(mantissa) * (1.0f / 16777216.0f);  // m * 2^-24
      return (sign != 0u) ? -value : value;
    }
    return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
};

}  // namespace torchneuron::kernels
