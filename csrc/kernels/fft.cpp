#include "kernels/fft.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <memory>
#include <numbers>

#include "kernels/parallel.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {
namespace {

using cd = std::complex<double>;

// Prime factors above this take Bluestein's transform: Cooley-Tukey's butterfly for a factor p
// costs p^2 per group of p outputs.
constexpr int64_t kLargestRadix = 32;

// A 1-D transform of length n on contiguous data, in place.
class Plan1d {
 public:
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
    twiddles_.resize(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) twiddles_[k] = unit(-2.0 * static_cast<double>(k) / static_cast<double>(n));
    radix_ = largest;
  }

  // Elements of scratch that run() needs.
  int64_t scratch_size() const { return bluestein_ ? 2 * m_ + inner_->scratch_size() : n_ + radix_; }

  void run(cd* data, cd* scratch, bool inverse) const {
    if (n_ <= 1) return;
    if (bluestein_) return run_bluestein(data, scratch, inverse);
    std::copy(data, data + n_, scratch);
    cooley_tukey(scratch, 1, data, n_, 0, 1, inverse, scratch + n_);
  }

 private:
  // exp(i pi t) with t in [-2, 2], exact at the quarter turns.
  static cd unit(double t) {
    const double angle = std::numbers::pi * t;
    return {std::cos(angle), std::sin(angle)};
  }

  cd twiddle(int64_t k, bool inverse) const { return inverse ? std::conj(twiddles_[k]) : twiddles_[k]; }

  // out[0..n) = DFT of in[0], in[stride], ..., in[(n-1) stride], for the factors from `level`
  // on; W_n^j = twiddles_[j * step] (step = n_ / n).
  void cooley_tukey(const cd* in, int64_t stride, cd* out, int64_t n, size_t level, int64_t step, bool inverse,
                    cd* group) const {
    if (n == 1) {
      out[0] = in[0];
      return;
    }
    const int64_t p = factors_[level], m = n / p;
    for (int64_t r = 0; r < p; ++r) cooley_tukey(in + r * stride, stride * p, out + r * m, m, level + 1, step * p, inverse, group);
    if (p == 2) {
      for (int64_t k = 0; k < m; ++k) {
        const cd a = out[k], b = out[m + k] * twiddle(k * step, inverse);
        out[k] = a + b;
        out[m + k] = a - b;
      }
      return;
    }
    if (p == 4) {
      const cd minus_i = inverse ? cd(0, 1) : cd(0, -1);  // W_4
      for (int64_t k = 0; k < m; ++k) {
        const cd a = out[k], b = out[m + k] * twiddle(k * step, inverse);
        const cd c = out[2 * m + k] * twiddle(2 * k * step, inverse), d = out[3 * m + k] * twiddle(3 * k * step, inverse);
        const cd s0 = a + c, s1 = a - c, s2 = b + d, s3 = (b - d) * minus_i;
        out[k] = s0 + s2;
        out[m + k] = s1 + s3;
        out[2 * m + k] = s0 - s2;
        out[3 * m + k] = s1 - s3;
      }
      return;
    }
    const int64_t turn = n_ / p;  // W_p = W_N^(N / p)
    for (int64_t k = 0; k < m; ++k) {
      for (int64_t r = 0; r < p; ++r) group[r] = out[r * m + k] * twiddle(r * k * step, inverse);
      for (int64_t q = 0; q < p; ++q) {
        cd sum = group[0];
        for (int64_t r = 1; r < p; ++r) sum += group[r] * twiddle((r * q % p) * turn, inverse);
        out[q * m + k] = sum;
      }
    }
  }

  // X_k = c_k sum_j (x_j c_j) conj(c_{k-j}) with c_k = exp(-i pi k^2 / n): a circular
  // convolution of length m >= 2n - 1 (a power of two), by transforms of that length.
  void init_bluestein() {
    bluestein_ = true;
    m_ = 1;
    while (m_ < 2 * n_ - 1) m_ *= 2;
    inner_ = std::make_unique<Plan1d>(m_);
    chirp_.resize(static_cast<size_t>(n_));
    for (int64_t k = 0; k < n_; ++k) {
      const int64_t square = (k * k) % (2 * n_);  // exact: the angle keeps its precision for large k
      chirp_[k] = unit(-static_cast<double>(square) / static_cast<double>(n_));
    }
    chirp_spectrum_.assign(static_cast<size_t>(m_), cd(0));
    chirp_spectrum_[0] = std::conj(chirp_[0]);
    for (int64_t k = 1; k < n_; ++k) chirp_spectrum_[k] = chirp_spectrum_[m_ - k] = std::conj(chirp_[k]);
    std::vector<cd> scratch(static_cast<size_t>(inner_->scratch_size()));
    inner_->run(chirp_spectrum_.data(), scratch.data(), false);
  }

  // The inverse is conj(forward(conj(x))).
  void run_bluestein(cd* data, cd* scratch, bool inverse) const {
    cd* a = scratch;
    cd* rest = scratch + m_;
    for (int64_t k = 0; k < n_; ++k) a[k] = (inverse ? std::conj(data[k]) : data[k]) * chirp_[k];
    std::fill(a + n_, a + m_, cd(0));
    inner_->run(a, rest, false);
    for (int64_t k = 0; k < m_; ++k) a[k] = std::conj(a[k] * chirp_spectrum_[k]);
    inner_->run(a, rest, false);  // conj of this is m times the inverse transform
    const double inv_m = 1.0 / static_cast<double>(m_);
    for (int64_t k = 0; k < n_; ++k) {
      const cd value = std::conj(a[k]) * inv_m * chirp_[k];
      data[k] = inverse ? std::conj(value) : value;
    }
  }

  int64_t n_;
  std::vector<int64_t> factors_;
  std::vector<cd> twiddles_;  // exp(-2 pi i k / n)
  int64_t radix_ = 1;
  bool bluestein_ = false;
  int64_t m_ = 0;
  std::unique_ptr<Plan1d> inner_;
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

// One batch of 1-D transforms along a dim: load(line, buffer) fills the line's n values,
// store(line, buffer) takes the n results.
template <typename Load, typename Store>
void transform_lines(int64_t lines, int64_t n, int64_t load_n, bool inverse, Load load, Store store) {
  const Plan1d plan(n);
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1));
  parallel_for(lines, grain, [&](int64_t begin, int64_t end) {
    std::vector<cd> buffer(static_cast<size_t>(std::max(n, load_n)));
    std::vector<cd> scratch(static_cast<size_t>(plan.scratch_size()));
    for (int64_t line = begin; line < end; ++line) {
      load(line, buffer.data());
      plan.run(buffer.data(), scratch.data(), inverse);
      store(line, buffer.data());
    }
  });
}

void check_dims(const std::vector<int64_t>& sizes, const std::vector<int64_t>& dims) {
  for (int64_t d : dims) {
    if (d < 0 || d >= static_cast<int64_t>(sizes.size())) throw runtime::KernelError("fft: a dim is out of range");
  }
}

// In-place transforms of complex<T> data along dims[first..], the last one scaled.
template <typename T>
void c2c_in_place(std::complex<T>* data, const std::vector<int64_t>& sizes, const std::vector<int64_t>& dims,
                  size_t first, bool inverse, double scale) {
  for (size_t k = first; k < dims.size(); ++k) {
    const Lines lines(sizes, dims[k]);
    const double factor = k + 1 == dims.size() ? scale : 1.0;
    transform_lines(
        lines.count(), lines.n, lines.n, inverse,
        [&](int64_t line, cd* buffer) {
          const std::complex<T>* at = data + lines.start(line);
          for (int64_t j = 0; j < lines.n; ++j) buffer[j] = cd(at[j * lines.inner]);
        },
        [&](int64_t line, const cd* buffer) {
          std::complex<T>* at = data + lines.start(line);
          for (int64_t j = 0; j < lines.n; ++j) at[j * lines.inner] = std::complex<T>(buffer[j] * factor);
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
  if (dtype == DType::kComplex64) {
    c2c_in_place(static_cast<std::complex<float>*>(data), sizes, dims, 0, !forward, scale);
  } else if (dtype == DType::kComplex128) {
    c2c_in_place(static_cast<std::complex<double>*>(data), sizes, dims, 0, !forward, scale);
  } else {
    throw runtime::KernelError("fft_c2c: expected a complex dtype");
  }
}

namespace {

template <typename T>
void r2c_typed(const std::vector<int64_t>& sizes, const std::vector<int64_t>& dims, double scale, const T* in,
               std::complex<T>* out) {
  // The first dim reads the real input; the rest transform the result in place.
  const Lines lines(sizes, dims[0]);
  const double factor = dims.size() == 1 ? scale : 1.0;
  transform_lines(
      lines.count(), lines.n, lines.n, false,
      [&](int64_t line, cd* buffer) {
        const T* at = in + lines.start(line);
        for (int64_t j = 0; j < lines.n; ++j) buffer[j] = cd(static_cast<double>(at[j * lines.inner]), 0.0);
      },
      [&](int64_t line, const cd* buffer) {
        std::complex<T>* at = out + lines.start(line);
        for (int64_t j = 0; j < lines.n; ++j) at[j * lines.inner] = std::complex<T>(buffer[j] * factor);
      });
  c2c_in_place(out, sizes, dims, 1, false, scale);
}

template <typename T>
void c2r_typed(const std::vector<int64_t>& in_sizes, const std::vector<int64_t>& dims, int64_t last_dim_size,
               double scale, const std::complex<T>* in, T* out) {
  // The other dims first, on a copy; then the last, completed to its Hermitian spectrum.
  std::vector<std::complex<T>> partial(in, in + numel(in_sizes));
  std::vector<int64_t> others(dims.begin(), dims.end() - 1);
  c2c_in_place(partial.data(), in_sizes, others, 0, true, 1.0);
  const int64_t d = dims.back(), n = last_dim_size, given = in_sizes[d];
  const Lines in_lines(in_sizes, d);
  std::vector<int64_t> out_sizes = in_sizes;
  out_sizes[d] = n;
  const Lines out_lines(out_sizes, d);
  const int64_t kept = std::min(given, n / 2 + 1);
  transform_lines(
      in_lines.count(), n, n, true,
      [&](int64_t line, cd* buffer) {
        const std::complex<T>* at = partial.data() + in_lines.start(line);
        for (int64_t k = 0; k < kept; ++k) buffer[k] = cd(at[k * in_lines.inner]);
        for (int64_t k = kept; k <= n / 2; ++k) buffer[k] = cd(0);
        for (int64_t k = n / 2 + 1; k < n; ++k) buffer[k] = std::conj(buffer[n - k]);
      },
      [&](int64_t line, const cd* buffer) {
        T* at = out + out_lines.start(line);
        for (int64_t j = 0; j < n; ++j) at[j * out_lines.inner] = static_cast<T>(buffer[j].real() * scale);
      });
}

}  // namespace

void fft_r2c(DType real_dtype, const std::vector<int64_t>& sizes, const std::vector<int64_t>& dims, double scale,
             const void* in, void* out) {
  check_dims(sizes, dims);
  if (numel(sizes) == 0 || dims.empty()) return;
  if (real_dtype == DType::kFloat32) {
    r2c_typed(sizes, dims, scale, static_cast<const float*>(in), static_cast<std::complex<float>*>(out));
  } else if (real_dtype == DType::kFloat64) {
    r2c_typed(sizes, dims, scale, static_cast<const double*>(in), static_cast<std::complex<double>*>(out));
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
    c2r_typed(in_sizes, dims, last_dim_size, scale, static_cast<const std::complex<float>*>(in), static_cast<float*>(out));
  } else if (complex_dtype == DType::kComplex128) {
    c2r_typed(in_sizes, dims, last_dim_size, scale, static_cast<const std::complex<double>*>(in), static_cast<double*>(out));
  } else {
    throw runtime::KernelError("fft_c2r: expected a complex dtype");
  }
}

}  // namespace torchneuron::kernels
