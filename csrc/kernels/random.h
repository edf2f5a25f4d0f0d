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

// Samplers whose draw count varies per element (rejection methods). Element i of a call owns a
// private Philox stream: counters (block offset / 4 + i, draw j, kPerElementStream), which never
// meet the shared stream's counters (their last word is 0), so one Philox block per element is
// reserved and the values depend on (seed, offset, i) only. Buffers are contiguous, of dtype
// `dtype` (any floating dtype); arithmetic is in double.
uint64_t per_element_words_needed(int64_t n);

// Gamma(alpha, 1) samples: Marsaglia and Tsang's squeeze method, and for alpha < 1 the sample
// of alpha + 1 times u^(1 / alpha). As CPU PyTorch, results below the smallest normal number of
// the dtype (and those for alpha <= 0 or NaN) are that number, so that their logs stay finite.
void standard_gamma(DType dtype, int64_t n, const void* alpha, void* out, runtime::PhiloxStream stream);

// Dirichlet(alpha) samples over the last dim of [rows, k]: gamma samples divided by their sum.
void sample_dirichlet(DType dtype, int64_t rows, int64_t k, const void* alpha, void* out, runtime::PhiloxStream stream);

// Poisson(rate) counts: by multiplying uniforms below rate 10, Hormann's transformed rejection
// with squeeze (PTRS) from 10 on; infinity at an infinite rate. Throws KernelError, with CPU
// PyTorch's message, for a negative or NaN rate.
void poisson(DType dtype, int64_t n, const void* rate, void* out, runtime::PhiloxStream stream);

// Binomial(count, prob) counts: waiting times of the rarer outcome while count * that
// probability is below 10, Hormann's BTRS from 10 on. As CPU PyTorch: prob is clamped to
// [0, 1], a count <= 0 gives 0, and a NaN prob NaN (a NaN count too, where CPU never returns).
void binomial(DType dtype, int64_t n, const void* count, const void* prob, void* out, runtime::PhiloxStream stream);

// d sample / d alpha of a Gamma(alpha, 1) sample at a fixed quantile (the reparameterized
// gradient): -(d/d alpha P(alpha, x)) / density(x), with P the regularized incomplete gamma
// function (its series below alpha + 1, the continued fraction of 1 - P above) differenced
// centrally in double. Contiguous, equal-sized buffers of one floating dtype.
void standard_gamma_grad(DType dtype, int64_t n, const void* alpha, const void* sample, void* out);

// The Dirichlet reparameterization's per-component term, as torch.distributions' backward
// reads it: for x ~ Beta(alpha, total - alpha), -(d/d alpha I_x(alpha, beta)) / density(x) with
// beta held, over 1 - x (I the regularized incomplete beta function, by its continued fraction
// on the side of the smaller tail, differenced centrally in double).
void dirichlet_grad(DType dtype, int64_t n, const void* sample, const void* alpha, const void* total, void* out);

}  // namespace torchneuron::kernels
