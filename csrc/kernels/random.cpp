#include "kernels/random.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/dtype_dispatch.h"
#include "kernels/floating.h"
#include "kernels/half.h"
#include "kernels/parallel.h"
#include "kernels/random_common.h"
#include "kernels/strided_loop.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {
namespace {

using runtime::PhiloxStream;
using namespace random_detail;

// Reads consecutive 32-bit words of a Philox stream, one block computation per four words.
class WordReader {
 public:
  explicit WordReader(PhiloxStream stream) : stream_(stream.resolved()) {}
  uint32_t next() {
    if (used_ == 4) {
      const uint64_t block = stream_.offset / 4 + block_index_++;
      words_ = runtime::philox4x32(
          {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0, 0}, stream_.seed);
      used_ = 0;
    }
    return words_[used_++];
  }
  uint64_t next64() {
    const uint64_t lo = next();
    return (static_cast<uint64_t>(next()) << 32) | lo;
  }

 private:
  PhiloxStream stream_;
  uint64_t block_index_ = 0;
  runtime::PhiloxBlock words_{};
  int used_ = 4;
};

template <typename T>
T to_typed(double value) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(value));
  } else {
    return static_cast<T>(value);
  }
}

// Calls produce(out) for every element of dst in row-major order.
template <typename Produce>
void for_each_element(const StridedView& dst, Produce&& produce) {
  if (dst.numel() == 0) return;
  const CoalescedShape shape = coalesce(&dst, 1);
  char* const base[1] = {static_cast<char*>(dst.data)};
  for_each_run<1>(shape, base, [&](char* const* ptrs, int64_t n, const int64_t* strides) {
    char* out = ptrs[0];
    for (int64_t i = 0; i < n; ++i, out += strides[0]) produce(out);
  });
}

bool is_double(const StridedView& dst) { return dst.dtype == DType::kFloat64; }

}  // namespace

uint64_t uniform_words_needed(const StridedView& dst) {
  return static_cast<uint64_t>(dst.numel()) * (is_double(dst) ? 2 : 1);
}

void uniform(const StridedView& dst, PhiloxStream stream, double from, double to) {
  WordReader reader(stream);
  const double range = to - from;
  dispatch_floating(dst.dtype, "random kernels", [&](auto tag) {
    using T = decltype(tag);
    for_each_element(dst, [&](char* out) {
      const double unit = std::is_same_v<T, double> ? runtime::uint64_to_uniform_double(reader.next64())
                                                    : runtime::uint32_to_uniform_float(reader.next());
      // Rounding to a narrow type can reach `to`; the range is half-open, so wrap to `from`.
      T typed = to_typed<T>(from + unit * range);
      if (range > 0 && as_double(typed) >= to) typed = to_typed<T>(from);
      std::memcpy(out, &typed, sizeof(T));
    });
  });
}

uint64_t normal_words_needed(const StridedView& dst) {
  // Box-Muller turns two uniforms into two normals; an odd count still draws a full pair.
  const uint64_t pairs = (static_cast<uint64_t>(dst.numel()) + 1) / 2;
  return pairs * 2 * (is_double(dst) ? 2 : 1);
}

void normal(const StridedView& dst, PhiloxStream stream, double mean, double std) {
  WordReader reader(stream);
  const bool wide = is_double(dst);
  dispatch_floating(dst.dtype, "random kernels", [&](auto tag) {
    using T = decltype(tag);
    double spare = 0.0;
    bool has_spare = false;
    for_each_element(dst, [&](char* out) {
      if (has_spare) {
        has_spare = false;
        store<T>(out, mean + std * spare);
        return;
      }
      const double u1 = wide ? runtime::uint64_to_uniform_double(reader.next64())
                             : runtime::uint32_to_uniform_float(reader.next());
      const double u2 = wide ? runtime::uint64_to_uniform_double(reader.next64())
                             : runtime::uint32_to_uniform_float(reader.next());
      const double radius = std::sqrt(-2.0 * std::log(1.0 - u1));  // 1 - u1 is never 0
      const double angle = 2.0 * M_PI * u2;
      spare = radius * std::sin(angle);
      has_spare = true;
      store<T>(out, mean + std * radius * std::cos(angle));
    });
  });
}

uint64_t integer_words_needed(const StridedView& dst) { return static_cast<uint64_t>(dst.numel()) * 2; }

void random_integers(const StridedView& dst, PhiloxStream stream, int64_t from, uint64_t range) {
  WordReader reader(stream);
  dispatch_real_dtype(dst.dtype, "random_", [&](auto tag) {
    using T = decltype(tag);
    for_each_element(dst, [&](char* out) {
      const uint64_t draw = reader.next64();
      const int64_t value = static_cast<int64_t>(static_cast<uint64_t>(from) + (range == 0 ? draw : draw % range));
      if constexpr (std::is_same_v<T, bool>) {
        const bool typed = value != 0;
        std::memcpy(out, &typed, 1);
      } else if constexpr (std::is_integral_v<T>) {
        const T typed = static_cast<T>(value);  // exact, also past 2^53
        std::memcpy(out, &typed, sizeof(T));
      } else {
        store<T>(out, static_cast<double>(value));
      }
    });
  });
}

void transformed_uniform(const StridedView& dst, PhiloxStream stream, UniformTransform kind, double a, double b) {
  WordReader reader(stream);
  const bool wide = is_double(dst);
  const double log_q = kind == UniformTransform::kGeometric ? std::log1p(-a) : 0.0;
  dispatch_floating(dst.dtype, "random kernels", [&](auto tag) {
    using T = decltype(tag);
    for_each_element(dst, [&](char* out) {
      const double u = wide ? runtime::uint64_to_uniform_double(reader.next64())
                            : runtime::uint32_to_uniform_float(reader.next());
      double value = 0.0;
      switch (kind) {
        case UniformTransform::kExponential: value = -std::log1p(-u) / a; break;  // u < 1: finite
        case UniformTransform::kGeometric: value = std::floor(std::log1p(-u) / log_q) + 1.0; break;
        case UniformTransform::kCauchy: value = a + b * std::tan(M_PI * (u - 0.5)); break;
      }
      store<T>(out, value);
    });
  });
}

uint64_t multinomial_words_needed(int64_t rows, int64_t categories, int64_t samples, bool replacement) {
  return static_cast<uint64_t>(rows) * multinomial_row_words(categories, samples, replacement);
}

uint64_t multinomial_row_words(int64_t categories, int64_t samples, bool replacement) {
  const uint64_t draws = static_cast<uint64_t>(replacement ? samples : categories);
  return (draws * 2 + 3) / 4 * 4;  // 64-bit draws; rows start on a Philox block
}

void multinomial(DType dtype, int64_t rows, int64_t categories, const void* probs, int64_t samples, bool replacement,
                 PhiloxStream stream, int64_t* out) {
  dispatch_floating(dtype, "multinomial", [&](auto tag) {
    using T = decltype(tag);
    const T* p = static_cast<const T*>(probs);
    const uint64_t row_words = multinomial_row_words(categories, samples, replacement);
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = p + r * categories;
      double total = 0.0;
      int64_t positive = 0;
      for (int64_t j = 0; j < categories; ++j) {
        const double v = as_double(row[j]);
        if (!(v >= 0.0) || std::isinf(v)) {
          throw runtime::KernelError("probability tensor contains either `inf`, `nan` or element < 0");
        }
        total += v;
        positive += v > 0.0;
      }
      if (!(total > 0.0)) throw runtime::KernelError("invalid multinomial distribution (sum of probabilities <= 0)");
      if (!replacement && positive < samples) {
        throw runtime::KernelError(
            "invalid multinomial distribution (with replacement=False, not enough non-negative category to sample)");
      }
    }
    parallel_for(rows, 1, [&](int64_t begin, int64_t end) {
      std::vector<double> key(static_cast<size_t>(categories));
      std::vector<int64_t> order(static_cast<size_t>(categories));
      for (int64_t r = begin; r < end; ++r) {
        const PhiloxStream base = stream.resolved();
        WordReader reader(PhiloxStream{base.seed, base.offset + static_cast<uint64_t>(r) * row_words});
        const T* row = p + r * categories;
        int64_t* dst = out + r * samples;
        if (replacement) {
          // Inverse of the cumulative distribution: the first category whose running sum passes u * total.
          for (int64_t j = 0; j < categories; ++j) key[j] = (j ? key[j - 1] : 0.0) + as_double(row[j]);
          const double total = key[categories - 1];
          for (int64_t s = 0; s < samples; ++s) {
            const double target = runtime::uint64_to_uniform_double(reader.next64()) * total;
            int64_t pick = std::upper_bound(key.begin(), key.end(), target) - key.begin();
            pick = std::min(pick, categories - 1);
            while (pick > 0 && as_double(row[pick]) == 0.0) --pick;  // rounding past the last positive one
            dst[s] = pick;
          }
        } else {
          // The samples largest keys p / E (E exponential draws): sampling without replacement in
          // proportion to p, in the order the draws would come.
          for (int64_t j = 0; j < categories; ++j) {
            const double e = -std::log1p(-runtime::uint64_to_uniform_double(reader.next64()));
            const double v = as_double(row[j]);
            key[j] = v > 0.0 ? v / e : -1.0;
            order[j] = j;
          }
          std::partial_sort(order.begin(), order.begin() + samples, order.end(),
                            [&](int64_t x, int64_t y) { return key[x] > key[y] || (key[x] == key[y] && x < y); });
          std::copy(order.begin(), order.begin() + samples, dst);
        }
      }
    });
  });
}

uint64_t randperm_words_needed(int64_t n) { return n > 1 ? (static_cast<uint64_t>(n - 1) * 2 + 3) / 4 * 4 : 0; }

void randperm(int64_t n, PhiloxStream stream, int64_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = i;
  WordReader reader(stream);
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(reader.next64() % static_cast<uint64_t>(i + 1));
    std::swap(out[i], out[j]);
  }
}

}  // namespace torchneuron::kernels
