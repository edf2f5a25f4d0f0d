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

}  // namespace torchneuron::kernels
