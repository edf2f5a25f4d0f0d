// Conversions between float32 and the float8 formats (e4m3fn, e5m2) with CPU PyTorch's
// rounding: to nearest, ties to even; e4m3fn has no infinity and saturates (everything past
// 448, infinities included, becomes +-448, as PyTorch 2.13's CPU conversion does); e5m2
// overflows to infinity. NaN stays NaN, with its sign. Contiguous runs.
#pragma once

#include <cstdint>

#include "kernels/gemm_lowp.h"

namespace torchneuron::kernels {

void float_to_float8(const float* src, uint8_t* dst, int64_t n, Float8Format format);
void float8_to_float(const uint8_t* src, float* dst, int64_t n, Float8Format format);

}  // namespace torchneuron::kernels
