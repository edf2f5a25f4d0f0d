// Branch-free float math that the compiler vectorizes inside loops: exp (0.58 ulp), log, log1p,
// erf and tanh accurate to about one ulp, GELU's normal distribution function, and lane-split sums and
// maxima whose rounding depends only on the data, not on threads.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

namespace torchneuron::kernels {

// a * b + c, rounded once: the polynomials' fused multiply-adds, written out because the library
// is built with -ffp-contract=off (so that generated code, which includes this text, rounds the
// same) and unfused they cost twice the instructions. The x86-64 baseline has no FMA
// instructions, and there std::fma is a library call that does not vectorize (exp ran 40x
// slower than with AVX2); there the product, exact in double, is added in double and rounded to
// float. That rounds twice, so the baseline level may differ from the others in the last bit
// where the double sum falls exactly halfway between two floats (about one inexact sum in 2^29).
inline float fused(float a, float b, float c) {
#if defined(__x86_64__) && !defined(__FMA__)
  return static_cast<float>(static_cast<double>(a) * static_cast<double>(b) + static_cast<double>(c));
#else
  return std::fma(a, b, c);
#endif
}

// floor(x) for finite |x| < 2^31: one instruction with SSE4.1, else truncation corrected by one
// where it rounded up (the same result, but +0 for -0, where std::floor would be a library call;
// exp_reduced's argument x / ln 2 + 0.5 is never -0).
inline float floor_small(float x) {
#if defined(__x86_64__) && !defined(__SSE4_1__)
  const float truncated = static_cast<float>(static_cast<int32_t>(x));
  return truncated > x ? truncated - 1.0f : truncated;
#else
  return std::floor(x);
#endif
}

// exp(x) = 2^n exp(r): n the integer nearest x / ln 2, r = x - n ln 2, and exp(r) =
// 1 + r + r^2 / 2 + r^3 q(r). Returns exp(r); n is set. Every rounding but the last is kept small:
// r carries the error of its product with ln 2's low part (r + r_lo), 1 + r and r^2 are split
// exactly into a float and its error (Fast2Sum, an fma), and the small terms are added before
// the large. That leaves 0.58 ulp at worst and 0.09% of results not correctly rounded (CPU
// PyTorch's exp: 0.56 ulp, 0.13%); the plain form 1 + (r + r^2 p(r)) was 1.0 ulp and 0.77%, which
// drifts sinusoidal timestep embeddings (exp times t ~ 1000) visibly from float64.
inline float exp_reduced(float x, float& n) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  n = floor_small(x * kLog2e + 0.5f);
  const float r_hi = fused(-n, kLn2Hi, x);  // exact: n ln2_hi has few bits and is close to x
  const float t = -n * kLn2Lo;
  const float r = r_hi + t;
  const float r_lo = ((r_hi - r) + t) + fused(-n, kLn2Lo, -t);
  float q = 1.9875691500e-4f;
  q = fused(q, r, 1.3981999507e-3f);
  q = fused(q, r, 8.3334519073e-3f);
  q = fused(q, r, 4.1665795894e-2f);
  q = fused(q, r, 1.6666665459e-1f);
  const float r2 = r * r;
  const float r2_err = fused(r, r, -r2);
  const float one_plus_r = 1.0f + r;
  const float one_plus_r_err = (1.0f - one_plus_r) + r;
  // exp(r + r_lo) = exp(r) (1 + r_lo): r_lo's term is r_lo (1 + r).
  const float tail = fused(q * r, r2, fused(0.5f, r2_err, fused(r_lo, one_plus_r, one_plus_r_err)));
  return one_plus_r + (0.5f * r2 + tail);
}

inline float vector_exp(float x) {
  const float clamped = x < -103.97f ? -103.97f : (x > 88.7228f ? 88.7228f : x);
  float n;
  const float poly = exp_reduced(clamped, n);
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

// exp for x <= 0 (softmax's shifted scores), as accurate as vector_exp (exp_reduced's bounds over
// [-87.3, 0]); below -87.3, where exp leaves the normal floats, and at -inf, 0: a
// probability under 1.2e-38 beside the row's largest, 1. One power-of-two factor and no
// overflow checks: 20% fewer instructions.
inline float vector_exp_nonpositive(float x) {
  constexpr float kSmallest = -87.33654f;  // log of the smallest normal float
  const float clamped = x < kSmallest ? kSmallest : x;
  float n;
  const float poly = exp_reduced(clamped, n);
  const float result = poly * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return x != x ? x : (x < kSmallest ? 0.0f : result);
}

// erf for float arguments, within one ulp: |x| < 1 as x P(x^2), 1 <= |x| < 4 as
// 1 - exp(-x^2) Q(1/|x|) (P and Q least-squares fits of ours at Chebyshev nodes, evaluated in
// double), and +-1 beyond, where float erf rounds to 1.
inline float vector_erf(float x) {
  const float a = std::fabs(x);
  const double ad = a;
  const double t = ad * ad;
  double p = -9.7283040583208889e-06;
  p = p * t + 0.00011288140773966945;
  p = p * t - 0.00084872634059358399;
  p = p * t + 0.0052212612243523054;
  p = p * t - 0.026865517357652236;
  p = p * t + 0.1128378411052281;
  p = p * t - 0.37612638590355024;
  p = p * t + 1.1283791670822767;
  const double small = ad * p;
  const double u = 1.0 / (a > 1.0f ? ad : 1.0);
  double q = 0.028236368893914156;
  q = q * u - 0.22747909906632446;
  q = q * u + 0.83020932593532248;
  q = q * u - 1.8041033922983549;
  q = q * u + 2.5629217510213342;
  q = q * u - 2.4178276048378384;
  q = q * u + 1.3890168262992535;
  q = q * u - 0.25626508387317865;
  q = q * u - 0.2363922534824138;
  q = q * u - 0.0052644664307562785;
  q = q * u + 0.56454144169592402;
  q = q * u - 1.0237649306077401e-05;
  const double large = 1.0 - static_cast<double>(vector_exp(-a * a)) * q;
  const float magnitude = a < 1.0f ? static_cast<float>(small) : (a < 4.0f ? static_cast<float>(large) : 1.0f);
  const float result = std::copysign(magnitude, x);
  return x != x ? x : result;
}

// log for float arguments, within 0.91 ulp (every third float checked against double): x = 2^e m
// with m in [sqrt(1/2), sqrt(2)) read off the bits (subnormals scaled by 2^23 first), f = m - 1
// (exact), log(1 + f) = f - f^2 / 2 + f^3 Q(f) (Q a least-squares fit of ours), and e ln 2 added
// in two parts. glibc's scalar logf cost 8.6 times as much.
inline float vector_log(float x) {
  constexpr float kMinNormal = 1.17549435e-38f;
  const bool subnormal = x < kMinNormal;
  const float scaled = subnormal ? x * 8388608.0f : x;
  const int32_t bits = std::bit_cast<int32_t>(scaled);
  const int32_t e = (bits - 0x3f3504f3) >> 23;  // 0x3f3504f3: sqrt(1/2)
  const float m = std::bit_cast<float>(bits - (e << 23));
  const float ef = static_cast<float>(e) - (subnormal ? 23.0f : 0.0f);
  const float f = m - 1.0f;
  const float z = f * f;
  float q = -7.660818845e-02f;
  q = fused(q, f, 1.278633028e-01f);
  q = fused(q, f, -1.316160560e-01f);
  q = fused(q, f, 1.419787705e-01f);
  q = fused(q, f, -1.662275195e-01f);
  q = fused(q, f, 2.000141293e-01f);
  q = fused(q, f, -2.500084639e-01f);
  q = fused(q, f, 3.333332837e-01f);
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  const float tail = fused(z * f, q, fused(ef, kLn2Lo, -0.5f * z));
  float result = fused(ef, kLn2Hi, f + tail);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  result = x == kInf ? x : result;
  result = x == 0.0f ? -kInf : result;
  result = x < 0.0f ? std::numeric_limits<float>::quiet_NaN() : result;
  return x != x ? x : result;
}

// log1p for float arguments, within 1.5 ulp: log(u) of u = 1 + x, plus the rounding error of u
// over u (log(u + d) = log(u) + d / u to first order); x itself where u rounds to 1.
inline float vector_log1p(float x) {
  const float u = 1.0f + x;
  const float correction = (x - (u - 1.0f)) / u;
  float result = vector_log(u) + correction;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  result = u == 1.0f ? x : result;
  result = x == kInf ? x : result;
  result = x == -1.0f ? -kInf : result;
  result = x < -1.0f ? std::numeric_limits<float>::quiet_NaN() : result;
  return x != x ? x : result;
}

// erfinv for float arguments, within 1.1 ulp (every 97th float in (0, 1) checked against double):
// w = -log((1 - y)(1 + y)) (the product exact in double, rounded once for vector_log), then
// erfinv(y) = y P(w) for w < 5 (|y| < 0.9966) and y Q(sqrt w) beyond, P and Q least-squares fits
// of ours in double (relative error under 4e-9 up to the largest float below 1). NaN outside
// [-1, 1] and +-inf at +-1. The float rounding of w costs the half ulp beyond CPU PyTorch's
// (0.5 ulp by Newton steps in float; its speed depends on the argument: in one run each it took
// 0.56x our time over (0, 0.8) and 1.33x over tanh of normal samples).
inline float vector_erfinv(float y) {
  const double yd = y;
  const float product = static_cast<float>((1.0 - yd) * (1.0 + yd));
  const double w = -static_cast<double>(vector_log(product));
  const double t = (w - 2.5) * 0.4;
  double p = 4.149577245223773e-06;
  p = std::fma(p, t, -3.333980932773706e-05);
  p = std::fma(p, t, 2.5157435790539438e-05);
  p = std::fma(p, t, 0.00028407515290798516);
  p = std::fma(p, t, -0.0008364687385455645);
  p = std::fma(p, t, -0.0004843499507172286);
  p = std::fma(p, t, 0.008525934497911107);
  p = std::fma(p, t, -0.019574194007118618);
  p = std::fma(p, t, -0.026108280762088314);
  p = std::fma(p, t, 0.6166007234735245);
  p = std::fma(p, t, 1.5014093517282392);
  const double u = (std::sqrt(w) - 3.143033988749895) * (1.0 / 0.906966011250105);
  double q = -1.1940408111427933e-05;
  q = std::fma(q, u, 4.92777115608245e-05);
  q = std::fma(q, u, -4.2621096113242986e-05);
  q = std::fma(q, u, -0.0001666483296807788);
  q = std::fma(q, u, 0.0006840717378011611);
  q = std::fma(q, u, -0.0014667603272498922);
  q = std::fma(q, u, 0.0024164831231249764);
  q = std::fma(q, u, -0.0037561481216096147);
  q = std::fma(q, u, 0.005567675327234004);
  q = std::fma(q, u, 0.910564653178965);
  q = std::fma(q, u, 2.9764234616497247);
  float result = static_cast<float>(yd * (w < 5.0 ? p : q));
  const float a = std::fabs(y);
  result = a == 1.0f ? std::copysign(std::numeric_limits<float>::infinity(), y) : result;
  result = a > 1.0f ? std::numeric_limits<float>::quiet_NaN() : result;
  return y != y ? y : result;
}

// tanh for float arguments, within 1.1 ulp: |x| < 0.75 as x + x^3 P(x^2) (P a least-squares fit
// of ours), beyond as 1 - 2 / (exp(2|x|) + 1) with the sign put back; glibc's scalar tanhf cost
// 16 times as much.
inline float vector_tanh(float x) {
  const float a = std::fabs(x);
  const float t = a * a;
  float p = 0.00022977318957497633f;
  p = fused(p, t, -0.0011457643162798765f);
  p = fused(p, t, 0.0034336535754469887f);
  p = fused(p, t, -0.0088142034148112f);
  p = fused(p, t, 0.021860444953595858f);
  p = fused(p, t, -0.053967317554936806f);
  p = fused(p, t, 0.1333332858831354f);
  p = fused(p, t, -0.3333333325005565f);
  const float small = fused(a * t, p, a);
  const float e = vector_exp(2.0f * (a < 10.0f ? a : 10.0f));  // float tanh is 1 from 9.01 on
  const float large = 1.0f - 2.0f / (e + 1.0f);
  const float result = std::copysign(a < 0.75f ? small : large, x);
  return x != x ? x : result;
}

// The standard normal distribution function Phi(x) for GELU, and the density's exp(-x^2 / 2),
// which it computes anyway and GELU's backward needs. One form for every x: with w = |x| / sqrt 2,
// erfc(w) / 2 = exp(-w^2) H(v), v = w / (w + 2) in [0, 1) (H a least-squares fit of ours, 5e-9
// relative up to w = 9.3, where Phi leaves the normal floats), and Phi = 1 - that for x > 0.
// Against 1 + erf: no second polynomial branch (25% fewer instructions), and no cancellation for
// x < 0. x Phi(x) is within 2.8 ulp of exact from x = -0.5 up, within 11 down to -2.8; further
// out, the rounding of x / sqrt 2 (which CPU PyTorch's formula shares) dominates. Past w = 9.34
// exp(-w^2), and with it Phi for x < 0, is 0 rather than subnormal, as CPU PyTorch's GELU gives:
// vector_exp_nonpositive, 15-20% faster than vector_exp here.
inline float vector_normal_cdf(float x, float& gauss) {
  const float w = std::fabs(x * 0.70710678118654752440f);
  const float t = w * w;
  const float t_low = fused(w, w, -t);  // t + t_low == w * w exactly
  const float w_fit = w < 16.0f ? w : 16.0f;  // from 10.2 on exp(-t) is 0; and no inf / inf
  const float v = w_fit / (w_fit + 2.0f);
  float h = 1.558975985e-02f;
  h = fused(h, v, -4.125875954e-02f);
  h = fused(h, v, 1.404325369e-02f);
  h = fused(h, v, 1.935146697e-02f);
  h = fused(h, v, 3.569480961e-02f);
  h = fused(h, v, 7.071476171e-03f);
  h = fused(h, v, -1.564815950e-01f);
  h = fused(h, v, -1.372358643e-01f);
  h = fused(h, v, 8.716098347e-01f);
  h = fused(h, v, -1.128378865e+00f);
  h = fused(h, v, 4.999999986e-01f);
  const float e = vector_exp_nonpositive(-t);
  // exp(-t - t_low) to first order; where t overflows t_low is not finite, and e is 0.
  gauss = e > 0.0f ? fused(-t_low, e, e) : 0.0f;
  const float half_erfc = gauss * h;
  const float cdf = x > 0.0f ? 1.0f - half_erfc : half_erfc;
  return x != x ? x : cdf;
}

// exp and erf of a kernel's compute type: the vectorizable versions above for float, the C
// library's for double.
template <typename C>
inline C exp_of(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return vector_exp(x);
  } else {
    return std::exp(x);
  }
}
// exp of x <= 0: vector_exp_nonpositive for float, the C library's for double.
template <typename C>
inline C exp_nonpositive_of(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return vector_exp_nonpositive(x);
  } else {
    return std::exp(x);
  }
}
template <typename C>
inline C log_of(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return vector_log(x);
  } else {
    return std::log(x);
  }
}
template <typename C>
inline C log1p_of(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return vector_log1p(x);
  } else {
    return std::log1p(x);
  }
}
template <typename C>
inline C erf_of(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return vector_erf(x);
  } else {
    return std::erf(x);
  }
}

// GELU's Phi(x): vector_normal_cdf for float, (1 + erf(x / sqrt 2)) / 2 for double, as CPU PyTorch.
template <typename C>
inline C gelu_cdf_of(C x) {
  if constexpr (std::is_same_v<C, float>) {
    float unused;
    return vector_normal_cdf(x, unused);
  } else {
    return C(0.5) * (C(1) + std::erf(x * C(0.70710678118654752440)));
  }
}

// d/dx of x Phi(x) = Phi(x) + x phi(x), times grad (phi: the standard normal density), with
// Phi and phi's exp from one vector_normal_cdf for float.
template <typename C>
inline C gelu_backward_of(C grad, C x) {
  constexpr double kSqrt1_2 = 0.70710678118654752440, kInvSqrt2Pi = 0.39894228040143267794;
  C cdf, gauss;
  if constexpr (std::is_same_v<C, float>) {
    cdf = vector_normal_cdf(x, gauss);
  } else {
    const C z = x * C(kSqrt1_2);
    cdf = C(0.5) * (C(1) + std::erf(z));
    gauss = std::exp(-z * z);
  }
  return grad * (cdf + x * (gauss * C(kInvSqrt2Pi)));
}

template <typename C>
inline C tanh_of(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return vector_tanh(x);
  } else {
    return std::tanh(x);
  }
}

// The step of lane_sum's and lane_max's remainders: one AVX-512 vector of floats.
constexpr int kShortLanes = 16;

// Folds lanes[0, 2 * kWidth) into lanes[0] as a tree, pairing lane l with lane l + width.
// Each level has a constant trip count, so it becomes a few vector ops rather than a loop
// through memory (which cost as much as summing a 1024-element row).
template <int kWidth, typename V, typename Combine>
inline void fold_lane_tree(V* lanes, Combine&& combine) {
  if constexpr (kWidth >= 1) {
    for (int l = 0; l < kWidth; ++l) lanes[l] = combine(lanes[l], lanes[l + kWidth]);
    fold_lane_tree<kWidth / 2>(lanes, combine);
  }
}

// Sum of n floats in 64 lanes: four vector accumulators, so that the adds overlap instead of
// waiting on one register, folded as a tree of vector adds and then widened to double.
// What is left after the 64-lane steps adds into the first lanes in steps of kShortLanes (one
// vector) before the fold; only the last few elements go one by one into the double.
inline double lane_sum(const float* x, int64_t n) {
  constexpr int kLanes = 64;
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += x[i + l];
  }
  for (; i + kShortLanes <= n; i += kShortLanes) {
    for (int l = 0; l < kShortLanes; ++l) lanes[l] += x[i + l];
  }
  fold_lane_tree<kLanes / 2>(lanes, [](float a, float b) { return a + b; });
  double total = lanes[0];
  for (; i < n; ++i) total += x[i];
  return total;
}

// Sum of term(0), ..., term(n - 1) in 16 lanes of A (float by default), folded as a tree (one
// by one into a double, the fold cost as much as a 64-wide row's terms), then the remainder in
// double. One accumulator per loop: GCC vectorizes that well, two in one loop it does not.
template <typename A = float, typename Term>
inline double lane_sum_of(int64_t n, Term&& term) {
  constexpr int kLanes = 16;
  A lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += term(i + l);
  }
  fold_lane_tree<kLanes / 2>(lanes, [](A a, A b) { return a + b; });
  double total = lanes[0];
  for (; i < n; ++i) total += term(i);
  return total;
}

// One native vector of floats at the level this text is compiled for: GCC's vector types wider
// than the machine's registers are lowered element by element where they select (lane_max
// over 64-byte vectors ran 26x slower with AVX2 than with AVX-512).
#if defined(__AVX512F__)
constexpr int kNativeLanes = 16;
#elif defined(__AVX__)
constexpr int kNativeLanes = 8;
#else
constexpr int kNativeLanes = 4;
#endif
typedef float NativeFloats __attribute__((vector_size(kNativeLanes * sizeof(float))));
typedef int32_t NativeMask __attribute__((vector_size(kNativeLanes * sizeof(float))));

// The shuffle that pairs lane l with lane l ^ kWidth, within one native vector.
template <int kWidth, int... kLane>
inline NativeMask xor_lanes(std::integer_sequence<int, kLane...>) {
  return NativeMask{(kLane ^ kWidth)...};
}

// Maximum of n floats; NaN if any is NaN. 64 lanes, then 16, as in lane_sum, folded as the tree
// of a 64-lane fold (lane l meets lane l + 32, then l + 16, ..., 1), so that the result, signed
// zeros included, is the same at every level: a level only changes how many native vectors
// hold the 16 lanes. A lane that meets a NaN keeps it (a second mask array for NaNs cost as much
// as the maxima themselves). The fold's narrow levels are shuffles of one vector: as scalars, the
// fold cost more than the maxima of a 96-element row. The last elements blend bit patterns, since
// GCC branched on each comparison and random data mispredicted half of them.
inline float lane_max(const float* x, int64_t n) {
  constexpr int kParts = kShortLanes / kNativeLanes;  // native vectors per 16 lanes
  using Vec = NativeFloats;
  // References, not vector values, in and out: a vector argument's ABI depends on the level.
  auto take_larger = [](Vec& m, const Vec& v) { m = (v > m) | (v != v) ? v : m; };
  auto take_larger_at = [x, &take_larger](Vec& m, int64_t at) {
    Vec v;
    std::memcpy(&v, x + at, sizeof(v));
    take_larger(m, v);
  };
  Vec lanes[4 * kParts];  // lanes[k] holds lanes k * kNativeLanes onwards of the 64
  for (Vec& lane : lanes) lane = Vec{} - std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + 4 * kShortLanes <= n; i += 4 * kShortLanes) {
    for (int k = 0; k < 4 * kParts; ++k) take_larger_at(lanes[k], i + k * kNativeLanes);
  }
  for (; i + kShortLanes <= n; i += kShortLanes) {
    for (int k = 0; k < kParts; ++k) take_larger_at(lanes[k], i + k * kNativeLanes);
  }
  // Lane l meets l + 32 and l + 16: whole native vectors.
  for (int k = 0; k < 2 * kParts; ++k) take_larger(lanes[k], lanes[k + 2 * kParts]);
  for (int k = 0; k < kParts; ++k) take_larger(lanes[k], lanes[k + kParts]);
  // Then l + 8, 4, 2, 1: between native vectors while the distance spans one, then shuffles.
  if constexpr (kParts >= 4) take_larger(lanes[1], lanes[3]);
  if constexpr (kParts >= 4) take_larger(lanes[0], lanes[2]);
  if constexpr (kParts >= 2) take_larger(lanes[0], lanes[1]);
  Vec& m = lanes[0];
  constexpr auto kLanes = std::make_integer_sequence<int, kNativeLanes>{};
  if constexpr (kNativeLanes > 8) take_larger(m, __builtin_shuffle(m, xor_lanes<8>(kLanes)));
  if constexpr (kNativeLanes > 4) take_larger(m, __builtin_shuffle(m, xor_lanes<4>(kLanes)));
  take_larger(m, __builtin_shuffle(m, xor_lanes<2>(kLanes)));
  take_larger(m, __builtin_shuffle(m, xor_lanes<1>(kLanes)));
  float result = m[0];
  auto blend = [](float r, float v) {
    const uint32_t take = 0u - static_cast<uint32_t>((v > r) | (v != v));
    return std::bit_cast<float>((std::bit_cast<uint32_t>(v) & take) | (std::bit_cast<uint32_t>(r) & ~take));
  };
  for (; i < n; ++i) result = blend(result, x[i]);
  return result;
}

}  // namespace torchneuron::kernels
