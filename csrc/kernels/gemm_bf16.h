// bfloat16 matrix multiply on AVX512-BF16 (vdpbf16ps): A and B packed into k-pair panels,
// register-tiled micro-kernels accumulating in float32, split over the compute pool.
#pragma once

#include "kernels/gemm.h"

namespace torchneuron::kernels {

// True when this build has the kernel and the host CPU runs AVX512-BF16.
bool bf16_gemm_available();

// True when bf16_gemm runs this bfloat16 GEMM: available, k >= 1, and A and B each with a unit
// stride. No size threshold: it beats the widening float path from 1x1x1 up.
bool bf16_gemm_suits(const GemmArgs& args);

// One batch entry (the caller loops over batches): C = alpha * A @ B + beta * C in float32,
// rounded to bfloat16 once. Needs k >= 1, A and B with a unit stride and bf16_gemm_available().
void bf16_gemm(const GemmArgs& args, const char* a, const char* b, char* c);

}  // namespace torchneuron::kernels
