#include "kernels/random.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/dtype_dispatch.h"
#include "kernels/floating.h"
#include "kernels/half.h"
#include "kernels/strided_loop.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {
namespace {

using runtime::PhiloxStream;

// Reads consecutive 32-bit words of a Philox stream, one block computation per four words.
class WordReader {
 public:
  explicit WordReader(PhiloxStream stream) : stream_(stream) {}
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
double as_double(const T& typed) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(typed));
  } else {
    return static_cast<double>(typed);
  }
}

template <typename T>
T to_typed(double value) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(value));
  } else {
    return static_cast<T>(value);
  }
}

template <typename T>
void store(char* out, double value) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    const T typed(static_cast<float>(value));
    std::memcpy(out, &typed, sizeof(T));
  } else {
    const T typed = static_cast<T>(value);
    std::memcpy(out, &typed, sizeof(T));
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

}  // namespace torchneuron::kernels
