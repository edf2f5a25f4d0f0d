// Random-number kernels over device buffers, drawing from a Philox stream position reserved
// on the host so that results depend only on (seed, offset), never on threads or timing.
#pragma once

#include "kernels/strided.h"
#include "runtime/philox.h"

namespace torchneuron::kernels {

// Elements are numbered in row-major order of dst's shape; element i uses Philox word i
// (two words for float64 and for each normal pair).
uint64_t uniform_words_needed(const StridedView& dst);
void uniform(const StridedView& dst, runtime::PhiloxStream stream, double from, double to);

uint64_t normal_words_needed(const StridedView& dst);
void normal(const StridedView& dst, runtime::PhiloxStream stream, double mean, double std);

// Integers from + (r mod range) for a 64-bit draw r (range 0: the full 2^64), written as dst's
// dtype (any real dtype). Two words per element.
uint64_t integer_words_needed(const StridedView& dst);
void random_integers(const StridedView& dst, runtime::PhiloxStream stream, int64_t from, uint64_t range);

// One uniform draw u in [0, 1) per element (uniform()'s words), transformed: kExponential
// -log(1 - u) / a; kGeometric floor(log(1 - u) / log(1 - a)) + 1 (trials to the first success
// of probability a); kCauchy a + b tan(pi (u - 1/2)).
enum class UniformTransform : uint8_t { kExponential, kGeometric, kCauchy };
void transformed_uniform(const StridedView& dst, runtime::PhiloxStream stream, UniformTransform kind, double a,
                         double b = 0.0);

// multinomial over the rows of a contiguous [rows, categories] probability buffer (unnormalized,
// any floating dtype), into int64 out [rows, samples]. Row r reads its own stretch of the stream
// (multinomial_row_words each), so rows run in parallel. Throws KernelError, with CPU PyTorch's
// messages, for negative, infinite or NaN entries, a row summing to 0, or (without replacement)
// fewer positive categories than samples.
uint64_t multinomial_row_words(int64_t categories, int64_t samples, bool replacement);
uint64_t multinomial_words_needed(int64_t rows, int64_t categories, int64_t samples, bool replacement);
void multinomial(DType dtype, int64_t rows, int64_t categories, const void* probs, int64_t samples, bool replacement,
                 runtime::PhiloxStream stream, int64_t* out);

// A uniformly random permutation of [0, n) into int64 out: Fisher-Yates, swap i with a
// position drawn from [0, i] by a 64-bit word each (a modulo bias under n / 2^64).
uint64_t randperm_words_needed(int64_t n);
void randperm(int64_t n, runtime::PhiloxStream stream, int64_t* out);

}  // namespace torchneuron::kernels
