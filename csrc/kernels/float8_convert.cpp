// See float8_convert.h. Normal values round by adding half an ulp of the target (plus one where
// the kept mantissa is odd, for ties to even) and shifting, as a float's bits; subnormal ones
// are scaled to the subnormal step and rounded to an integer by the float adder.
#include "kernels/float8_convert.h"

#include <bit>

#include "kernels/parallel.h"

namespace torchneuron::kernels {
namespace {

// The float8 bits of |f|'s magnitude (`magnitude` = its bits without the sign).
inline uint8_t e4m3fn_magnitude(uint32_t magnitude) {
  if (magnitude > 0x7f800000u) return 0x7f;   // NaN
  if (magnitude >= 0x43e00000u) return 0x7e;  // 448 and beyond, inf too: saturated
  if (magnitude < 0x3c800000u) {  // below 2^-6: multiples of 2^-9
    const float scaled = std::bit_cast<float>(magnitude) * 512.0f;
    return static_cast<uint8_t>((scaled + 8388608.0f) - 8388608.0f);  // ties to even: 0..8
  }
  const uint32_t odd = (magnitude >> 20) & 1u;
  const uint32_t rounded = (magnitude + 0x7ffffu + odd) >> 20;  // exponent and 3 mantissa bits
  return static_cast<uint8_t>(rounded - ((127u - 7u) << 3));      // to bias 7
}

inline uint8_t e5m2_magnitude(uint32_t magnitude) {
  if (magnitude > 0x7f800000u) return 0x7f;   // NaN
  if (magnitude >= 0x47800000u) return 0x7c;  // >= 65536 and inf: inf
  if (magnitude < 0x38800000u) {              // below 2^-14: multiples of 2^-16
    const float scaled = std::bit_cast<float>(magnitude) * 65536.0f;
    return static_cast<uint8_t>((scaled + 8388608.0f) - 8388608.0f);
  }
  const uint32_t odd = (magnitude >> 21) & 1u;
  const uint32_t rounded = (magnitude + 0xfffffu + odd) >> 21;
  return static_cast<uint8_t>(rounded - ((127u - 15u) << 2));
}

template <bool kE4M3>
void encode(const float* src, uint8_t* dst, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const uint32_t bits = std::bit_cast<uint32_t>(src[i]);
    const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
    const uint32_t magnitude = bits & 0x7fffffffu;
    dst[i] = sign | (kE4M3 ? e4m3fn_magnitude(magnitude) : e5m2_magnitude(magnitude));
  }
}

// Every float8 value as a float, one table per format.
struct DecodeTables {
  float e4m3fn[256], e5m2[256];
  DecodeTables() {
    for (int b = 0; b < 256; ++b) {
      const float sign = (b & 0x80) ? -1.0f : 1.0f;
      const int e4 = (b >> 3) & 0xf, m3 = b & 7;
      // NaNs keep their sign and, as CPU PyTorch's widening does, their mantissa bits (quieted).
      const uint32_t sign_bit = (b & 0x80) ? 0x80000000u : 0u;
      e4m3fn[b] = (b & 0x7f) == 0x7f ? std::bit_cast<float>(sign_bit | 0x7f800000u | (7u << 20))
                  : sign * (e4 == 0 ? m3 / 512.0f : (1.0f + m3 / 8.0f) * exp2_int(e4 - 7));
      const int e5 = (b >> 2) & 0x1f, m2 = b & 3;
      e5m2[b] = e5 == 31 ? (m2 == 0 ? sign * __builtin_inff()
                                    : std::bit_cast<float>(sign_bit | 0x7fc00000u | (static_cast<uint32_t>(m2) << 21)))
                : sign * (e5 == 0 ? m2 / 65536.0f : (1.0f + m2 / 4.0f) * exp2_int(e5 - 15));
    }
  }
  static float exp2_int(int e) { return std::bit_cast<float>(static_cast<uint32_t>(e + 127) << 23); }
};

const DecodeTables& decode_tables() {
  static const DecodeTables tables;
  return tables;
}

constexpr int64_t kGrain = 1 << 16;

}  // namespace

void float_to_float8(const float* src, uint8_t* dst, int64_t n, Float8Format format) {
  parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
    if (format == Float8Format::kE4M3FN) {
      encode<true>(src, dst, begin, end);
    } else {
      encode<false>(src, dst, begin, end);
    }
  });
}

void float8_to_float(const uint8_t* src, float* dst, int64_t n, Float8Format format) {
  const float* table = format == Float8Format::kE4M3FN ? decode_tables().e4m3fn : decode_tables().e5m2;
  parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) dst[i] = table[src[i]];
  });
}

}  // namespace torchneuron::kernels
