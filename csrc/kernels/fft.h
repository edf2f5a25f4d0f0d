// Discrete Fourier transforms over dims of contiguous tensors (torch.fft's _fft_c2c, _fft_r2c
// and _fft_c2r): each dim is a batch of 1-D transforms of any length — mixed-radix Cooley-Tukey
// over factors up to 32, Bluestein's chirp transform for lengths with a larger prime factor —
// in the data's precision (double per pass when float data is transformed over several dims).
// Forward transforms use exp(-2 pi i jk / n); nothing is normalized except by `scale`, which
// multiplies every result.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/strided.h"

namespace torchneuron::kernels {

// data: kComplex64 or kComplex128, contiguous with `sizes`; transformed in place along `dims`.
void fft_c2c(DType dtype, const std::vector<int64_t>& sizes, const std::vector<int64_t>& dims, bool forward,
             double scale, void* data);

// in: kFloat32 or kFloat64 with `sizes`; out: the matching complex dtype with the same sizes,
// the full (two-sided) forward transform along `dims`.
void fft_r2c(DType real_dtype, const std::vector<int64_t>& sizes, const std::vector<int64_t>& dims, double scale,
             const void* in, void* out);

// in: complex with `in_sizes`, the non-negative frequencies of dims.back() first; out: real,
// `in_sizes` with dims.back() of `last_dim_size`. The inverse transform along the other dims,
// then along dims.back() of the Hermitian spectrum those frequencies define (imaginary parts
// that a real signal cannot have are ignored, as pocketfft does).
void fft_c2r(DType complex_dtype, const std::vector<int64_t>& in_sizes, const std::vector<int64_t>& dims,
             int64_t last_dim_size, double scale, const void* in, void* out);

}  // namespace torchneuron::kernels
