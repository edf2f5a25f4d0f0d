#include "kernels/fft.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <numbers>

#include "kernels/cpu_capability.h"
#include "kernels/parallel.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {
namespace {

using cd = std::complex<double>;

// Lines transformed together: every butterfly runs over kLanes lines at once (split real and
// imaginary parts, lane innermost), one vector register of them at this library copy's level
// (AVX-512: 16 float or 8 double lines; AVX2: 8 or 4). Each line's arithmetic is the same
// whatever the lane count. complex64 and float32 transform in float, as CPU PyTorch's pocketfft
// does; float64 in double.
template <typename T>
constexpr int64_t kLanesOf = static_cast<int64_t>(kVectorBytes / sizeof(T));

// Prime factors above this take Bluestein's transform: Cooley-Tukey's butterfly for a factor p
// costs p^2 per group of p outputs.
constexpr int64_t kLargestRadix = 32;

// The kLanes values of one position.
template <typename T>
struct VecOf;
template <>
struct VecOf<float> {
  typedef float type __attribute__((vector_size(kVectorBytes)));
};
template <>
struct VecOf<double> {
  typedef double type __attribute__((vector_size(kVectorBytes)));
};
template <typename T>
using Vec = typename VecOf<T>::type;

template <typename T>
inline Vec<T> load(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof(Vec<T>));
  return v;
}
template <typename T>
inline void store(T* p, Vec<T> v) {
  std::memcpy(p, &v, sizeof(Vec<T>));
}

// Complex values of kLanes lines at n positions: re[j * kLanes + lane], im likewise.
template <typename T>
struct Lanes {
  T* re;
  T* im;
};

// A 1-D transform of length n over kLanes lines, in place.
template <typename T>
class Plan1d {
 public:
  static constexpr int64_t kLanes = kLanesOf<T>;

  explicit Plan1d(int64_t n) : n_(n) {
    int64_t rest = n;
    for (int64_t p : {4, 2, 3, 5}) {
      while (rest % p == 0) {
        factors_.push_back(p);
        rest /= p;
      }
    }
    for (int64_t p = 7; p * p <= rest; p += 2) {
      while (rest % p == 0) {
        factors_.push_back(p);
        rest /= p;
      }
    }
    if (rest > 1) factors_.push_back(rest);
    const int64_t largest = factors_.empty() ? 1 : *std::max_element(factors_.begin(), factors_.end());
    if (largest > kLargestRadix) {
      init_bluestein();
      return;
    }
    radix_ = largest;
    cos_.resize(static_cast<size_t>(n));
    sin_.resize(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      const cd w = unit(-2.0 * static_cast<double>(k) / static_cast<double>(n));
      cos_[k] = static_cast<T>(w.real());
      sin_[k] = static_cast<T>(w.imag());
    }
    leaf_.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      int64_t rest_of_index = i, length = n, position = 0;
      for (int64_t f : factors_) {
        length /= f;
        position += (rest_of_index % f) * length;
        rest_of_index /= f;
      }
      leaf_[i] = position;
    }
  }

  // Elements of scratch that run() needs.
  int64_t scratch_size() const {
    return bluestein_ ? 2 * m_ * kLanes + inner_->scratch_size() : 2 * (n_ + radix_) * kLanes;
  }

  void run(Lanes<T> x, T* scratch, bool inverse) const {
    if (n_ <= 1) return;
    if (bluestein_) return run_bluestein(x, scratch, inverse);
    cooley_tukey(x, scratch, inverse);
  }

 private:
  // exp(i pi t) with t in [-2, 2].
  static cd unit(double t) {
    const double angle = std::numbers::pi * t;
    return {std::cos(angle), std::sin(angle)};
  }

  // Iterative Cooley-Tukey: each input placed where the recursion's leaves would leave it (the
  // digit reversal of its index over the factors), then one in-place pass per factor, innermost
  // first. At level l the blocks have length N_l = product of factors[l..], combined from p =
  // factors[l] sub-transforms of length m = N_l / p: X[k + q m] = sum_r W_N_l^(r k) W_p^(r q) Y_r[k].
  void cooley_tukey(Lanes<T> x, T* scratch, bool inverse) const {
    Lanes<T> work{scratch, scratch + n_ * kLanes};
    for (int64_t i = 0; i < n_; ++i) {
      store(work.re + leaf_[i] * kLanes, load<T>(x.re + i * kLanes));
      store(work.im + leaf_[i] * kLanes, load<T>(x.im + i * kLanes));
    }
    Lanes<T> group{scratch + 2 * n_ * kLanes, scratch + (2 * n_ + radix_) * kLanes};
    const T sign = inverse ? -1.0 : 1.0;  // the inverse's twiddles are the conjugates
    int64_t block = 1;
    for (size_t level = factors_.size(); level-- > 0;) {
      const int64_t p = factors_[level], m = block;
      block *= p;
      const int64_t step = n_ / block;
      for (int64_t base = 0; base < n_; base += block) {
        combine(Lanes<T>{work.re + base * kLanes, work.im + base * kLanes}, p, m, step, sign, group);
      }
    }
    std::copy(work.re, work.re + n_ * kLanes, x.re);
    std::copy(work.im, work.im + n_ * kLanes, x.im);
  }

  // v[lane] * (c + i s), in place on position j of x.
  static void rotate(Lanes<T> x, int64_t j, T c, T s) {
    const Vec<T> re = load<T>(x.re + j * kLanes), im = load<T>(x.im + j * kLanes);
    store(x.re + j * kLanes, re * c - im * s);
    store(x.im + j * kLanes, re * s + im * c);
  }

  void combine(Lanes<T> x, int64_t p, int64_t m, int64_t step, T sign, Lanes<T> group) const {
    for (int64_t k = 1; k < m; ++k) {  // twiddle W^(r k) onto sub-transform r's element k
      for (int64_t r = 1; r < p; ++r) rotate(x, r * m + k, cos_[r * k * step], sign * sin_[r * k * step]);
    }
    if (p == 2) {
      for (int64_t k = 0; k < m; ++k) {
        T *ar = x.re + k * kLanes, *ai = x.im + k * kLanes;
        T *br = x.re + (m + k) * kLanes, *bi = x.im + (m + k) * kLanes;
        const Vec<T> a_re = load<T>(ar), a_im = load<T>(ai), b_re = load<T>(br), b_im = load<T>(bi);
        store(ar, a_re + b_re);
        store(ai, a_im + b_im);
        store(br, a_re - b_re);
        store(bi, a_im - b_im);
      }
      return;
    }
    if (p == 4) {
      // W_4 = -i forward (sign 1), +i inverse: (b - d) W_4 = sign (im, -re).
      for (int64_t k = 0; k < m; ++k) {
        T *ar = x.re + k * kLanes, *ai = x.im + k * kLanes;
        T *br = x.re + (m + k) * kLanes, *bi = x.im + (m + k) * kLanes;
        T *cr = x.re + (2 * m + k) * kLanes, *ci = x.im + (2 * m + k) * kLanes;
        T *dr = x.re + (3 * m + k) * kLanes, *di = x.im + (3 * m + k) * kLanes;
        const Vec<T> a_re = load<T>(ar), a_im = load<T>(ai), b_re = load<T>(br), b_im = load<T>(bi);
        const Vec<T> c_re = load<T>(cr), c_im = load<T>(ci), d_re = load<T>(dr), d_im = load<T>(di);
        const Vec<T> s0r = a_re + c_re, s0i = a_im + c_im, s1r = a_re - c_re, s1i = a_im - c_im;
        const Vec<T> s2r = b_re + d_re, s2i = b_im + d_im;
        const Vec<T> s3r = sign * (b_im - d_im), s3i = -sign * (b_re - d_re);
        store(ar, s0r + s2r);
        store(ai, s0i + s2i);
        store(br, s1r + s3r);
        store(bi, s1i + s3i);
        store(cr, s0r - s2r);
        store(ci, s0i - s2i);
        store(dr, s1r - s3r);
        store(di, s1i - s3i);
      }
      return;
    }
    const int64_t turn = n_ / p;  // W_p = W_N^(N / p)
    for (int64_t k = 0; k < m; ++k) {
      for (int64_t r = 0; r < p; ++r) {
        store(group.re + r * kLanes, load<T>(x.re + (r * m + k) * kLanes));
        store(group.im + r * kLanes, load<T>(x.im + (r * m + k) * kLanes));
      }
      for (int64_t q = 0; q < p; ++q) {
        Vec<T> sum_re = load<T>(group.re), sum_im = load<T>(group.im);
        for (int64_t r = 1; r < p; ++r) {
          const T c = cos_[(r * q % p) * turn], s = sign * sin_[(r * q % p) * turn];
          const Vec<T> g_re = load<T>(group.re + r * kLanes), g_im = load<T>(group.im + r * kLanes);
          sum_re += g_re * c - g_im * s;
          sum_im += g_re * s + g_im * c;
        }
        store(x.re + (q * m + k) * kLanes, sum_re);
        store(x.im + (q * m + k) * kLanes, sum_im);
      }
    }
  }

  // X_k = c_k sum_j (x_j c_j) conj(c_{k-j}) with c_k = exp(-i pi k^2 / n): a circular
  // convolution of length m >= 2n - 1 (a power of two), by transforms of that length.
  void init_bluestein() {
    bluestein_ = true;
    m_ = 1;
    while (m_ < 2 * n_ - 1) m_ *= 2;
    inner_ = std::make_unique<Plan1d<T>>(m_);
    chirp_.resize(static_cast<size_t>(n_));
    for (int64_t k = 0; k < n_; ++k) {
      const int64_t square = (k * k) % (2 * n_);  // exact: the angle keeps its precision for large k
      chirp_[k] = unit(-static_cast<double>(square) / static_cast<double>(n_));
    }
    // The conjugate chirp, wrapped around, transformed (the same in every lane).
    std::vector<T> re(static_cast<size_t>(m_ * kLanes), T(0)), im(re.size(), T(0));
    for (int64_t k = 0; k < n_; ++k) {
      for (int64_t j : {k, (m_ - k) % m_}) {
        std::fill(re.begin() + j * kLanes, re.begin() + (j + 1) * kLanes, static_cast<T>(chirp_[k].real()));
        std::fill(im.begin() + j * kLanes, im.begin() + (j + 1) * kLanes, static_cast<T>(-chirp_[k].imag()));
      }
    }
    std::vector<T> scratch(static_cast<size_t>(inner_->scratch_size()));
    inner_->run(Lanes<T>{re.data(), im.data()}, scratch.data(), false);
    chirp_spectrum_.resize(static_cast<size_t>(m_));
    for (int64_t k = 0; k < m_; ++k) chirp_spectrum_[k] = cd(re[k * kLanes], im[k * kLanes]);
  }

  // The inverse is conj(forward(conj(x))).
  void run_bluestein(Lanes<T> x, T* scratch, bool inverse) const {
    const T sign = inverse ? -1.0 : 1.0;
    Lanes<T> a{scratch, scratch + m_ * kLanes};
    T* rest = scratch + 2 * m_ * kLanes;
    for (int64_t k = 0; k < n_; ++k) {
      const T c = static_cast<T>(chirp_[k].real()), s = static_cast<T>(chirp_[k].imag());
      for (int64_t l = 0; l < kLanes; ++l) {
        const T re = x.re[k * kLanes + l], im = sign * x.im[k * kLanes + l];
        a.re[k * kLanes + l] = re * c - im * s;
        a.im[k * kLanes + l] = re * s + im * c;
      }
    }
    std::fill(a.re + n_ * kLanes, a.re + m_ * kLanes, T(0));
    std::fill(a.im + n_ * kLanes, a.im + m_ * kLanes, T(0));
    inner_->run(a, rest, false);
    for (int64_t k = 0; k < m_; ++k) {  // times the chirp's spectrum, conjugated
      const T c = static_cast<T>(chirp_spectrum_[k].real()), s = static_cast<T>(chirp_spectrum_[k].imag());
      for (int64_t l = 0; l < kLanes; ++l) {
        const T re = a.re[k * kLanes + l], im = a.im[k * kLanes + l];
        a.re[k * kLanes + l] = re * c - im * s;
        a.im[k * kLanes + l] = -(re * s + im * c);
      }
    }
    inner_->run(a, rest, false);  // conj of this is m times the inverse transform
    const T inv_m = T(1) / static_cast<T>(m_);
    for (int64_t k = 0; k < n_; ++k) {
      const T c = static_cast<T>(chirp_[k].real()), s = static_cast<T>(chirp_[k].imag());
      for (int64_t l = 0; l < kLanes; ++l) {
        const T re = a.re[k * kLanes + l] * inv_m, im = -a.im[k * kLanes + l] * inv_m;
        x.re[k * kLanes + l] = re * c - im * s;
        x.im[k * kLanes + l] = sign * (re * s + im * c);
      }
    }
  }

  int64_t n_;
  std::vector<int64_t> factors_;
  std::vector<T> cos_, sin_;  // exp(-2 pi i k / n)
  std::vector<int64_t> leaf_;      // where input i starts the passes
  int64_t radix_ = 1;
  bool bluestein_ = false;
  int64_t m_ = 0;
  std::unique_ptr<Plan1d<T>> inner_;
  std::vector<cd> chirp_;
  std::vector<cd> chirp_spectrum_;
};

// The lines along dim d of a contiguous tensor: `outer` blocks of n x inner.
struct Lines {
  int64_t outer, n, inner;
  Lines(const std::vector<int64_t>& sizes, int64_t d) : outer(1), n(sizes[d]), inner(1) {
    for (int64_t i = 0; i < d; ++i) outer *= sizes[i];
    for (size_t i = static_cast<size_t>(d) + 1; i < sizes.size(); ++i) inner *= sizes[i];
  }
  int64_t count() const { return outer * inner; }
  int64_t start(int64_t line) const { return (line / inner) * n * inner + line % inner; }
};

// One batch of 1-D transforms of length n along a dim, kLanes lines at a time:
// load(line, re, im) writes a line's n values to re[j * kLanes], im[j * kLanes];
// store(line, re, im) reads the results from there.
// Plans by length, kept for later calls (a plan's twiddles and Bluestein's chirp spectrum
// cost more than a small transform); at most kCachedPlans lengths.
constexpr size_t kCachedPlans = 64;

template <typename T>
std::shared_ptr<const Plan1d<T>> plan_for(int64_t n) {
  static std::mutex mutex;
  static std::map<int64_t, std::shared_ptr<const Plan1d<T>>> plans;
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto found = plans.find(n);
    if (found != plans.end()) return found->second;
  }
  auto plan = std::make_shared<const Plan1d<T>>(n);
  std::lock_guard<std::mutex> lock(mutex);
  if (plans.size() >= kCachedPlans) plans.erase(plans.begin());
  plans.emplace(n, plan);
  return plan;
}

// A thread's working memory, kept between calls: fresh pages cost more than the transforms.
template <typename T>
T* thread_buffer(size_t elements) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < elements) buffer.resize(elements);
  return buffer.data();
}

template <typename T, typename Load, typename Store>
void transform_lines(int64_t lines, int64_t n, bool inverse, Load load, Store store) {
  constexpr int64_t kLanes = kLanesOf<T>;
  const std::shared_ptr<const Plan1d<T>> shared_plan = plan_for<T>(n);
  const Plan1d<T>& plan = *shared_plan;
  const int64_t batches = (lines + kLanes - 1) / kLanes;
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(n * kLanes, 1));
  parallel_for(batches, grain, [&](int64_t begin, int64_t end) {
    T* values = thread_buffer<T>(static_cast<size_t>(2 * n * kLanes + plan.scratch_size()));
    T* scratch = values + 2 * n * kLanes;
    const Lanes<T> x{values, values + n * kLanes};
    for (int64_t batch = begin; batch < end; ++batch) {
      const int64_t first = batch * kLanes, count = std::min(kLanes, lines - first);
      for (int64_t l = 0; l < kLanes; ++l) {
        if (l < count) {
          load(first + l, x.re + l, x.im + l);
        } else {
          for (int64_t j = 0; j < n; ++j) x.re[j * kLanes + l] = x.im[j * kLanes + l] = T(0);
        }
      }
      plan.run(x, scratch, inverse);
      for (int64_t l = 0; l < count; ++l) store(first + l, x.re + l, x.im + l);
    }
  });
}

void check_dims(const std::vector<int64_t>& sizes, const std::vector<int64_t>& dims) {
  for (int64_t d : dims) {
    if (d < 0 || d >= static_cast<int64_t>(sizes.size())) throw runtime::KernelError("fft: a dim is out of range");
  }
}

// In-place transforms of complex<S> data along dims[first..], the last one scaled, computed in
// C (S, or double for transforms over several dims of float data: rounding to float between
// dims, every pass is then rounded once).
template <typename S, typename C = S>
void c2c_in_place(std::complex<S>* data, const std::vector<int64_t>& sizes, const std::vector<int64_t>& dims,
                  size_t first, bool inverse, double scale) {
  constexpr int64_t kLanes = kLanesOf<C>;
  for (size_t k = first; k < dims.size(); ++k) {
    const Lines lines(sizes, dims[k]);
    const double factor = k + 1 == dims.size() ? scale : 1.0;
    transform_lines<C>(
        lines.count(), lines.n, inverse,
        [&](int64_t line, C* re, C* im) {
          const std::complex<S>* at = data + lines.start(line);
          for (int64_t j = 0; j < lines.n; ++j) {
            re[j * kLanes] = static_cast<C>(at[j * lines.inner].real());
            im[j * kLanes] = static_cast<C>(at[j * lines.inner].imag());
          }
        },
        [&](int64_t line, const C* re, const C* im) {
          std::complex<S>* at = data + lines.start(line);
          for (int64_t j = 0; j < lines.n; ++j) {
            at[j * lines.inner] = {static_cast<S>(re[j * kLanes] * factor), static_cast<S>(im[j * kLanes] * factor)};
          }
        });
  }
}

int64_t numel(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

}  // namespace

void fft_c2c(DType dtype, const std::vector<int64_t>& sizes, const std::vector<int64_t>& dims, bool forward,
             double scale, void* data) {
  check_dims(sizes, dims);
  if (numel(sizes) == 0) return;
  if (dtype == DType::kComplex64 && dims.size() > 1) {
    c2c_in_place<float, double>(static_cast<std::complex<float>*>(data), sizes, dims, 0, !forward, scale);
  } else if (dtype == DType::kComplex64) {
    c2c_in_place<float, float>(static_cast<std::complex<float>*>(data), sizes, dims, 0, !forward, scale);
  } else if (dtype == DType::kComplex128) {
    c2c_in_place<double, double>(static_cast<std::complex<double>*>(data), sizes, dims, 0, !forward, scale);
  } else {
    throw runtime::KernelError("fft_c2c: expected a complex dtype");
  }
}

namespace {

template <typename S, typename C>
void r2c_typed(const std::vector<int64_t>& sizes, const std::vector<int64_t>& dims, double scale, const S* in,
               std::complex<S>* out) {
  constexpr int64_t kLanes = kLanesOf<C>;
  // The first dim reads the real input; the rest transform the result in place.
  const Lines lines(sizes, dims[0]);
  const double factor = dims.size() == 1 ? scale : 1.0;
  const int64_t n = lines.n;
  if (n % 2 == 0 && n >= 4) {
    // A real line of even length n as a complex one of n / 2 (even samples real, odd ones
    // imaginary), then split: X[k] = E[k] + W_n^k O[k] with E = (Z[k] + conj Z[-k]) / 2 and
    // O = (Z[k] - conj Z[-k]) / 2i; X[n - k] = conj X[k].
    const int64_t half = n / 2;
    std::vector<double> cosines(static_cast<size_t>(half + 1)), sines(static_cast<size_t>(half + 1));
    for (int64_t k = 0; k <= half; ++k) {
      const double angle = 2.0 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(n);
      cosines[k] = std::cos(angle);
      sines[k] = std::sin(angle);
    }
    transform_lines<C>(
        lines.count(), half, false,
        [&](int64_t line, C* re, C* im) {
          const S* at = in + lines.start(line);
          for (int64_t j = 0; j < half; ++j) {
            re[j * kLanes] = static_cast<C>(at[2 * j * lines.inner]);
            im[j * kLanes] = static_cast<C>(at[(2 * j + 1) * lines.inner]);
          }
        },
        [&](int64_t line, const C* re, const C* im) {
          std::complex<S>* at = out + lines.start(line);
          for (int64_t k = 0; k <= half; ++k) {
            const int64_t here = (k == half ? 0 : k) * kLanes, mirror = (k == 0 ? 0 : half - k) * kLanes;
            const double even_re = 0.5 * (re[here] + re[mirror]), even_im = 0.5 * (im[here] - im[mirror]);
            const double odd_re = 0.5 * (im[here] + im[mirror]), odd_im = -0.5 * (re[here] - re[mirror]);
            const double x_re = even_re + cosines[k] * odd_re + sines[k] * odd_im;
            const double x_im = even_im + cosines[k] * odd_im - sines[k] * odd_re;
            at[k * lines.inner] = {static_cast<S>(x_re * factor), static_cast<S>(x_im * factor)};
            if (k > 0 && k < half) at[(n - k) * lines.inner] = {static_cast<S>(x_re * factor), static_cast<S>(-x_im * factor)};
          }
        });
    c2c_in_place<S, C>(out, sizes, dims, 1, false, scale);
    return;
  }
  transform_lines<C>(
      lines.count(), lines.n, false,
      [&](int64_t line, C* re, C* im) {
        const S* at = in + lines.start(line);
        for (int64_t j = 0; j < lines.n; ++j) {
          re[j * kLanes] = static_cast<C>(at[j * lines.inner]);
          im[j * kLanes] = C(0);
        }
      },
      [&](int64_t line, const C* re, const C* im) {
        std::complex<S>* at = out + lines.start(line);
        for (int64_t j = 0; j < lines.n; ++j) {
          at[j * lines.inner] = {static_cast<S>(re[j * kLanes] * factor), static_cast<S>(im[j * kLanes] * factor)};
        }
      });
  c2c_in_place<S, C>(out, sizes, dims, 1, false, scale);
}

template <typename S, typename C>
void c2r_typed(const std::vector<int64_t>& in_sizes, const std::vector<int64_t>& dims, int64_t last_dim_size,
               double scale, const std::complex<S>* in, S* out) {
  constexpr int64_t kLanes = kLanesOf<C>;
  // The other dims first, on a copy; then the last, completed to its Hermitian spectrum.
  std::vector<std::complex<S>> partial(in, in + numel(in_sizes));
  std::vector<int64_t> others(dims.begin(), dims.end() - 1);
  c2c_in_place<S, C>(partial.data(), in_sizes, others, 0, true, 1.0);
  const int64_t d = dims.back(), n = last_dim_size, given = in_sizes[d];
  const Lines in_lines(in_sizes, d);
  std::vector<int64_t> out_sizes = in_sizes;
  out_sizes[d] = n;
  const Lines out_lines(out_sizes, d);
  const int64_t kept = std::min(given, n / 2 + 1);
  if (n % 2 == 0 && n >= 4) {
    // The half-length step of r2c run backwards: Z[k] = E[k] + i O[k] from the even and odd
    // samples' spectra, E = (X[k] + conj X[n/2 - k]) / 2, O = (X[k] - conj X[n/2 - k]) W_n^-k / 2,
    // whose inverse of length n/2 holds the even samples in its real parts and the odd ones in
    // its imaginary parts (times n/2 where the full inverse gives n). The imaginary parts of
    // X[0] and X[n/2] are dropped, as the full transform's real part drops them.
    const int64_t half = n / 2;
    std::vector<double> cosines(static_cast<size_t>(half)), sines(static_cast<size_t>(half));
    for (int64_t k = 0; k < half; ++k) {
      const double angle = 2.0 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(n);
      cosines[k] = std::cos(angle);
      sines[k] = std::sin(angle);
    }
    transform_lines<C>(
        in_lines.count(), half, true,
        [&](int64_t line, C* re, C* im) {
          const std::complex<S>* at = partial.data() + in_lines.start(line);
          auto frequency = [&](int64_t k) {
            if (k >= kept) return cd(0.0, 0.0);
            const std::complex<S> value = at[k * in_lines.inner];
            return cd(value.real(), k == 0 || k == half ? 0.0 : static_cast<double>(value.imag()));
          };
          for (int64_t k = 0; k < half; ++k) {
            const cd a = frequency(k), b = std::conj(frequency(half - k));
            const cd even = 0.5 * (a + b), d = 0.5 * (a - b);
            const double odd_re = d.real() * cosines[k] - d.imag() * sines[k];
            const double odd_im = d.real() * sines[k] + d.imag() * cosines[k];
            re[k * kLanes] = static_cast<C>(even.real() - odd_im);
            im[k * kLanes] = static_cast<C>(even.imag() + odd_re);
          }
        },
        [&](int64_t line, const C* re, const C* im) {
          S* at = out + out_lines.start(line);
          for (int64_t j = 0; j < half; ++j) {
            at[2 * j * out_lines.inner] = static_cast<S>(2.0 * re[j * kLanes] * scale);
            at[(2 * j + 1) * out_lines.inner] = static_cast<S>(2.0 * im[j * kLanes] * scale);
          }
        });
    return;
  }
  transform_lines<C>(
      in_lines.count(), n, true,
      [&](int64_t line, C* re, C* im) {
        const std::complex<S>* at = partial.data() + in_lines.start(line);
        for (int64_t k = 0; k <= n / 2; ++k) {
          re[k * kLanes] = k < kept ? static_cast<C>(at[k * in_lines.inner].real()) : C(0);
          im[k * kLanes] = k < kept ? static_cast<C>(at[k * in_lines.inner].imag()) : C(0);
        }
        for (int64_t k = n / 2 + 1; k < n; ++k) {
          re[k * kLanes] = re[(n - k) * kLanes];
          im[k * kLanes] = -im[(n - k) * kLanes];
        }
      },
      [&](int64_t line, const C* re, const C*) {
        S* at = out + out_lines.start(line);
        for (int64_t j = 0; j < n; ++j) at[j * out_lines.inner] = static_cast<S>(re[j * kLanes] * scale);
      });
}

}  // namespace

void fft_r2c(DType real_dtype, const std::vector<int64_t>& sizes, const std::vector<int64_t>& dims, double scale,
             const void* in, void* out) {
  check_dims(sizes, dims);
  if (numel(sizes) == 0 || dims.empty()) return;
  if (real_dtype == DType::kFloat32) {
    if (dims.size() > 1) {
      r2c_typed<float, double>(sizes, dims, scale, static_cast<const float*>(in), static_cast<std::complex<float>*>(out));
    } else {
      r2c_typed<float, float>(sizes, dims, scale, static_cast<const float*>(in), static_cast<std::complex<float>*>(out));
    }
  } else if (real_dtype == DType::kFloat64) {
    r2c_typed<double, double>(sizes, dims, scale, static_cast<const double*>(in), static_cast<std::complex<double>*>(out));
  } else {
    throw runtime::KernelError("fft_r2c: expected float32 or float64 input");
  }
}

void fft_c2r(DType complex_dtype, const std::vector<int64_t>& in_sizes, const std::vector<int64_t>& dims,
             int64_t last_dim_size, double scale, const void* in, void* out) {
  check_dims(in_sizes, dims);
  if (dims.empty()) return;
  std::vector<int64_t> out_sizes = in_sizes;
  out_sizes[dims.back()] = last_dim_size;
  if (numel(out_sizes) == 0) return;
  if (complex_dtype == DType::kComplex64) {
    const auto* typed_in = static_cast<const std::complex<float>*>(in);
    if (dims.size() > 1) {
      c2r_typed<float, double>(in_sizes, dims, last_dim_size, scale, typed_in, static_cast<float*>(out));
    } else {
      c2r_typed<float, float>(in_sizes, dims, last_dim_size, scale, typed_in, static_cast<float*>(out));
    }
  } else if (complex_dtype == DType::kComplex128) {
    c2r_typed<double, double>(in_sizes, dims, last_dim_size, scale, static_cast<const std::complex<double>*>(in),
                              static_cast<double*>(out));
  } else {
    throw runtime::KernelError("fft_c2r: expected a complex dtype");
  }
}

}  // namespace torchneuron::kernels
