#include "kernels/copy.h"

#include <algorithm>
#include <complex>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "kernels/dtype_dispatch.h"
#include "kernels/floating.h"
#include "kernels/half.h"
#include "kernels/parallel.h"
#include "kernels/strided_loop.h"

namespace torchneuron::kernels {

CoalescedShape coalesce(const StridedView* views, int count) {
  CoalescedShape shape;
  const StridedView& first = views[0];
  for (int d = 0; d < first.ndim; ++d) {
    if (first.sizes[d] == 1) continue;
    const int n = shape.ndim;
    bool merge = n > 0;
    for (int k = 0; k < count && merge; ++k) {
      const int64_t stride = views[k].strides[d] * static_cast<int64_t>(element_size(views[k].dtype));
      merge = shape.strides[k][n - 1] == stride * first.sizes[d];
    }
    if (merge) {
      shape.sizes[n - 1] *= first.sizes[d];
      for (int k = 0; k < count; ++k) {
        shape.strides[k][n - 1] =
            views[k].strides[d] * static_cast<int64_t>(element_size(views[k].dtype));
      }
    } else {
      shape.sizes[n] = first.sizes[d];
      for (int k = 0; k < count; ++k) {
        shape.strides[k][n] = views[k].strides[d] * static_cast<int64_t>(element_size(views[k].dtype));
      }
      shape.ndim = n + 1;
    }
  }
  return shape;
}

namespace {

template <typename T>
struct IsComplex : std::false_type {};
template <typename T>
struct IsComplex<std::complex<T>> : std::true_type {};

// Float-to-integer conversion with the result x86's cvtt* instructions give, without the
// undefined behaviour of a plain cast.
template <typename Int>
inline Int truncate_like_x86(double value) {
  constexpr double lower = -static_cast<double>(std::numeric_limits<Int>::min());  // 2^(bits-1)
  if (!(value > -lower - 1.0 && value < lower)) return std::numeric_limits<Int>::min();
  return static_cast<Int>(value);
}

// Float-like types go through float; the rest convert directly.
template <typename T>
using Arithmetic = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

template <typename Dst, typename Src>
inline Dst convert(Src value) {
  if constexpr (std::is_same_v<Dst, Src>) {
    return value;
  } else if constexpr (IsComplex<Dst>::value && IsComplex<Src>::value) {
    return Dst(static_cast<typename Dst::value_type>(value.real()),
               static_cast<typename Dst::value_type>(value.imag()));
  } else if constexpr (IsComplex<Dst>::value) {
    return Dst(static_cast<typename Dst::value_type>(static_cast<Arithmetic<Src>>(value)), 0);
  } else if constexpr (IsComplex<Src>::value) {
    return convert<Dst>(value.real());  // as torch does, after its warning
  } else {
    const auto wide = static_cast<Arithmetic<Src>>(value);
    if constexpr (std::is_same_v<Dst, bool>) {
      return wide != Arithmetic<Src>(0);
    } else if constexpr (std::is_integral_v<Dst> && std::is_floating_point_v<Arithmetic<Src>>) {
      // As torch's CPU kernels on x86: truncate to int32 (int64 for int64), out-of-range and
      // NaN give the minimum value, and narrower types keep the low bits.
      // uint32 from the 64-bit truncation, and uint64 exact up to 2^64, as their plain casts.
      if constexpr (sizeof(Dst) == 8) {
        if constexpr (std::is_unsigned_v<Dst>) {
          const auto v = static_cast<double>(wide);
          if (v >= 9223372036854775808.0 && v < 18446744073709551616.0) return static_cast<Dst>(v);
        }
        return static_cast<Dst>(truncate_like_x86<int64_t>(static_cast<double>(wide)));
      } else if constexpr (std::is_same_v<Dst, uint32_t>) {
        return static_cast<Dst>(truncate_like_x86<int64_t>(static_cast<double>(wide)));
      } else {
        return static_cast<Dst>(truncate_like_x86<int32_t>(static_cast<double>(wide)));
      }
    } else {
      return Dst(static_cast<Arithmetic<Dst>>(wide));
    }
  }
}

template <typename Dst, typename Src>
inline void copy_element(char* out, const char* in) {
  Src value;
  std::memcpy(&value, in, sizeof(Src));
  const Dst converted = convert<Dst>(value);
  std::memcpy(out, &converted, sizeof(Dst));
}

// The two innermost dimensions in 16 x 16 blocks, for copies where one side is strided in the
// innermost dimension and contiguous in the one before (a transposing copy): element by
// element, each read or write touched a new cache line.
template <typename Dst, typename Src>
void copy_blocked(char* out, const char* in, int64_t rows, int64_t cols, const int64_t* out_strides,
                  const int64_t* in_strides) {
  constexpr int64_t kBlock = 16;
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
    const int64_t r1 = std::min(rows, r0 + kBlock);
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
      const int64_t c1 = std::min(cols, c0 + kBlock);
      for (int64_t r = r0; r < r1; ++r) {
        char* o = out + r * out_strides[0] + c0 * out_strides[1];
        const char* i = in + r * in_strides[0] + c0 * in_strides[1];
        for (int64_t c = c0; c < c1; ++c, o += out_strides[1], i += in_strides[1]) copy_element<Dst, Src>(o, i);
      }
    }
  }
}

#if defined(__AVX2__)
// out[i][0..8) = in[0..8)[i] for 8 rows of 8 32-bit elements, `out_row` / `in_row` elements apart.
inline void transpose_8x8(uint32_t* out, int64_t out_row, const uint32_t* in, int64_t in_row) {
  __m256 r[8], t[8];
  for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(reinterpret_cast<const float*>(in + k * in_row));
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
    t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
  }
  for (int k = 0; k < 8; k += 4) {
    r[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
    r[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
    r[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
    r[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
  }
  for (int k = 0; k < 4; ++k) {
    _mm256_storeu_ps(reinterpret_cast<float*>(out + k * out_row), _mm256_permute2f128_ps(r[k], r[k + 4], 0x20));
    _mm256_storeu_ps(reinterpret_cast<float*>(out + (k + 4) * out_row), _mm256_permute2f128_ps(r[k], r[k + 4], 0x31));
  }
}
#endif

// A same-dtype transposing copy: out[i * out_row + j] = in[i + j * in_row] for i < rows and
// j < cols, in tiles so that both sides stay in cache. Through copy_blocked's run-time strides a
// 256 x 1024 float transpose ran at half CPU PyTorch's speed.
template <typename T>
void transpose_copy(T* out, const T* in, int64_t rows, int64_t cols, int64_t out_row, int64_t in_row) {
  constexpr int64_t kTile = 32;
  for (int64_t i0 = 0; i0 < rows; i0 += kTile) {
    const int64_t i1 = std::min(rows, i0 + kTile);
    for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
      const int64_t j1 = std::min(cols, j0 + kTile);
      int64_t i = i0, j = j0;
#if defined(__AVX2__)
      if constexpr (sizeof(T) == 4) {
        for (i = i0; i + 8 <= i1; i += 8) {
          for (j = j0; j + 8 <= j1; j += 8) {
            transpose_8x8(reinterpret_cast<uint32_t*>(out + i * out_row + j), out_row,
                          reinterpret_cast<const uint32_t*>(in + i + j * in_row), in_row);
          }
          for (int64_t r = i; r < i + 8; ++r) {  // the tile's last columns
            for (int64_t c = j; c < j1; ++c) out[r * out_row + c] = in[r + c * in_row];
          }
        }
        j = j0;  // rows below the last full group of 8, every column
      }
#endif
      for (; i < i1; ++i) {
        for (int64_t c = j; c < j1; ++c) out[i * out_row + c] = in[i + c * in_row];
      }
    }
  }
}

template <typename Dst, typename Src>
void copy_typed(const CoalescedShape& shape, char* dst, const char* src) {
  char* const base[2] = {dst, const_cast<char*>(src)};
  const int last = shape.ndim - 1;
  if (last >= 1 && (shape.strides[0][last] != sizeof(Dst) || shape.strides[1][last] != sizeof(Src)) &&
      (shape.strides[0][last - 1] == sizeof(Dst) || shape.strides[1][last - 1] == sizeof(Src))) {
    const int64_t out_strides[2] = {shape.strides[0][last - 1], shape.strides[0][last]};
    const int64_t in_strides[2] = {shape.strides[1][last - 1], shape.strides[1][last]};
    auto block = [&](char* out, const char* in) {
      if constexpr (std::is_same_v<Dst, Src>) {
        constexpr int64_t size = sizeof(Dst);
        const bool strides_whole = out_strides[0] % size == 0 && out_strides[1] % size == 0 &&
                                   in_strides[0] % size == 0 && in_strides[1] % size == 0;
        if (strides_whole && out_strides[1] == size && in_strides[0] == size) {
          return transpose_copy(reinterpret_cast<Dst*>(out), reinterpret_cast<const Dst*>(in), shape.sizes[last - 1],
                                shape.sizes[last], out_strides[0] / size, in_strides[1] / size);
        }
        if (strides_whole && out_strides[0] == size && in_strides[1] == size) {
          return transpose_copy(reinterpret_cast<Dst*>(out), reinterpret_cast<const Dst*>(in), shape.sizes[last],
                                shape.sizes[last - 1], out_strides[1] / size, in_strides[0] / size);
        }
      }
      copy_blocked<Dst, Src>(out, in, shape.sizes[last - 1], shape.sizes[last], out_strides, in_strides);
    };
    if (last == 1) return block(dst, src);
    CoalescedShape outer = shape;  // the dimensions outside the blocked pair
    outer.ndim = last - 1;
    for_each_run<2>(outer, base, [&](char* const* ptrs, int64_t n, const int64_t* strides) {
      for (int64_t i = 0; i < n; ++i) block(ptrs[0] + i * strides[0], ptrs[1] + i * strides[1]);
    });
    return;
  }
  for_each_run<2>(shape, base, [](char* const* ptrs, int64_t n, const int64_t* strides) {
    if constexpr (std::is_same_v<Dst, Src>) {
      if (strides[0] == sizeof(Dst) && strides[1] == sizeof(Src)) {
        std::memcpy(ptrs[0], ptrs[1], static_cast<size_t>(n) * sizeof(Dst));
        return;
      }
    }
    if (strides[0] == sizeof(Dst) && strides[1] == sizeof(Src)) {
      auto* out = reinterpret_cast<Dst*>(ptrs[0]);
      const auto* in = reinterpret_cast<const Src*>(ptrs[1]);
      for (int64_t i = 0; i < n; ++i) out[i] = convert<Dst>(in[i]);
      return;
    }
    char* out = ptrs[0];
    const char* in = ptrs[1];
    for (int64_t i = 0; i < n; ++i, out += strides[0], in += strides[1]) copy_element<Dst, Src>(out, in);
  });
}

// Conversions to or from uint16/32/64 take only the element loop: they are rare, and the
// blocked and transposing variants for every such pair would add half again to this file's
// compile time at each instruction-set level.
template <typename T>
constexpr bool kWideUnsigned = std::is_same_v<T, uint16_t> || std::is_same_v<T, uint32_t> || std::is_same_v<T, uint64_t>;

template <typename Dst, typename Src>
void copy_converting(const CoalescedShape& shape, char* dst, const char* src) {
  char* const base[2] = {dst, const_cast<char*>(src)};
  for_each_run<2>(shape, base, [](char* const* ptrs, int64_t n, const int64_t* strides) {
    char* out = ptrs[0];
    const char* in = ptrs[1];
    for (int64_t i = 0; i < n; ++i, out += strides[0], in += strides[1]) copy_element<Dst, Src>(out, in);
  });
}

template <typename Dst, typename Src>
void copy_any(const CoalescedShape& shape, char* dst, const char* src) {
  if constexpr (kWideUnsigned<Dst> || kWideUnsigned<Src>) {
    copy_converting<Dst, Src>(shape, dst, src);
  } else {
    copy_typed<Dst, Src>(shape, dst, src);
  }
}

// The signed type of an unsigned dtype's width: a same-dtype copy moves the same bits.
DType same_bits(DType dtype) {
  switch (dtype) {
    case DType::kUInt16: return DType::kInt16;
    case DType::kUInt32: return DType::kInt32;
    case DType::kUInt64: return DType::kInt64;
    default: return dtype;
  }
}

// Copies this large are split along their outermost dimension across the compute engines.
constexpr int64_t kParallelCopyElements = 1 << 16;

}  // namespace

void copy(const StridedView& dst, const StridedView& src) {
  if (dst.numel() == 0) return;
  const StridedView views[2] = {dst, src};
  const CoalescedShape shape = coalesce(views, 2);
  char* out = static_cast<char*>(dst.data);
  const char* in = static_cast<const char*>(src.data);
  const bool same = dst.dtype == src.dtype;
  dispatch_convertible_dtype(same ? same_bits(dst.dtype) : dst.dtype, "copy", [&](auto dst_tag) {
    using Dst = decltype(dst_tag);
    dispatch_convertible_dtype(same ? same_bits(src.dtype) : src.dtype, "copy", [&](auto src_tag) {
      using Src = decltype(src_tag);
      const int64_t numel = dst.numel();
      if (numel < kParallelCopyElements || shape.ndim == 0) return copy_any<Dst, Src>(shape, out, in);
      const int64_t outer = shape.sizes[0], per_outer = numel / outer;
      parallel_for(outer, std::max<int64_t>(1, kParallelCopyElements / 4 / per_outer), [&](int64_t begin, int64_t end) {
        CoalescedShape part = shape;
        part.sizes[0] = end - begin;
        copy_any<Dst, Src>(part, out + begin * shape.strides[0][0], in + begin * shape.strides[1][0]);
      });
    });
  });
}

}  // namespace torchneuron::kernels

namespace torchneuron::kernels {

void fill(const StridedView& dst, FillValue value) {
  if (dst.numel() == 0) return;
  const CoalescedShape shape = coalesce(&dst, 1);
  char* const base[1] = {static_cast<char*>(dst.data)};
  dispatch_convertible_dtype(dst.dtype, "fill", [&](auto tag) {
    using T = decltype(tag);
    T typed;
    if constexpr (std::is_same_v<T, int64_t>) {
      typed = value.is_integer ? value.integer : static_cast<int64_t>(value.real);
    } else {
      typed = value.is_integer ? convert<T>(value.integer) : convert<T>(value.real);
    }
    if (shape.ndim == 1 && shape.strides[0][0] == static_cast<int64_t>(sizeof(T))) {
      // One dense run (zeros, ones, a full tensor): vector stores, over the compute pool when
      // large. Element by element through a run-time stride, zeroing 1 MiB took 90 us.
      T* out = reinterpret_cast<T*>(base[0]);
      parallel_for(shape.sizes[0], kParallelCopyElements, [&](int64_t begin, int64_t end) {
        std::fill(out + begin, out + end, typed);
      });
      return;
    }
    for_each_run<1>(shape, base, [&](char* const* ptrs, int64_t n, const int64_t* strides) {
      char* out = ptrs[0];
      for (int64_t i = 0; i < n; ++i, out += strides[0]) std::memcpy(out, &typed, sizeof(T));
    });
  });
}

}  // namespace torchneuron::kernels

namespace torchneuron::kernels {
namespace {

// The element value of a fill, typed.
template <typename T>
T typed_value(FillValue value) {
  if constexpr (std::is_same_v<T, int64_t>) {
    return value.is_integer ? value.integer : static_cast<int64_t>(value.real);
  } else {
    return value.is_integer ? convert<T>(value.integer) : convert<T>(value.real);
  }
}

// Elements in one row of each padded tensor, and rows (every axis but the last) per plane.
struct PadRows {
  int64_t in_row, out_row, in_rows_per_plane = 1, out_rows_per_plane = 1;
  explicit PadRows(const PadPlan& plan) : in_row(plan.in.back()), out_row(plan.out.back()) {
    for (size_t a = 0; a + 1 < plan.in.size(); ++a) {
      in_rows_per_plane *= plan.in[a];
      out_rows_per_plane *= plan.out[a];
    }
  }
};

// For each output row of a plane, the input row (within its plane) it reads, or -1 for a
// padding row: computed once per call, as the divisions cost more than copying a short row.
std::vector<int64_t> source_rows(const PadPlan& plan, int64_t out_rows_per_plane) {
  std::vector<int64_t> rows(static_cast<size_t>(out_rows_per_plane));
  for (int64_t r = 0; r < out_rows_per_plane; ++r) {
    int64_t row = 0, scale = 1, rest = r;
    for (size_t a = plan.out.size() - 1; a-- > 0;) {
      const int64_t s = plan.source[a][rest % plan.out[a]];
      if (s < 0) {
        row = -1;
        break;
      }
      row += s * scale;
      scale *= plan.in[a];
      rest /= plan.out[a];
    }
    rows[r] = row;
  }
  return rows;
}

}  // namespace

void pad(DType dtype, const PadPlan& plan, FillValue value, const void* in, void* out) {
  const PadRows rows(plan);
  const size_t last = plan.out.size() - 1;
  const std::vector<int64_t>& columns = plan.source[last];
  // The run of input columns: output [run_begin, run_end) reads input from run_begin - before.
  const int64_t run_begin = std::clamp<int64_t>(plan.before[last], 0, rows.out_row);
  const int64_t run_end = std::clamp<int64_t>(plan.before[last] + rows.in_row, run_begin, rows.out_row);
  dispatch_dtype(dtype, "pad", [&](auto tag) {
    using T = decltype(tag);
    const T fill_value = typed_value<T>(value);
    const T* src = static_cast<const T*>(in);
    T* dst = static_cast<T*>(out);
    const int64_t total_rows = plan.planes * rows.out_rows_per_plane;
    const std::vector<int64_t> sources = source_rows(plan, rows.out_rows_per_plane);
    parallel_for(total_rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(rows.out_row, 1)), [&](int64_t begin, int64_t end) {
      int64_t plane = begin / rows.out_rows_per_plane, within = begin % rows.out_rows_per_plane;
      for (int64_t r = begin; r < end; ++r, ++within) {
        if (within == rows.out_rows_per_plane) {
          within = 0;
          ++plane;
        }
        T* out_row = dst + r * rows.out_row;
        const int64_t source = sources[within];
        if (source < 0) {
          std::fill(out_row, out_row + rows.out_row, fill_value);
          continue;
        }
        const T* in_row = src + (plane * rows.in_rows_per_plane + source) * rows.in_row;
        for (int64_t o = 0; o < run_begin; ++o) out_row[o] = columns[o] < 0 ? fill_value : in_row[columns[o]];
        std::copy(in_row + (run_begin - plan.before[last]), in_row + (run_end - plan.before[last]), out_row + run_begin);
        for (int64_t o = run_end; o < rows.out_row; ++o) out_row[o] = columns[o] < 0 ? fill_value : in_row[columns[o]];
      }
    });
  });
}

void pad_backward(DType dtype, const PadPlan& plan, const void* grad_out, void* grad_in) {
  const PadRows rows(plan);
  const std::vector<int64_t>& columns = plan.source.back();
  dispatch_floating(dtype, "pad backward", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* go = static_cast<const T*>(grad_out);
    T* gi = static_cast<T*>(grad_in);
    const int64_t in_plane = rows.in_rows_per_plane * rows.in_row, out_plane = rows.out_rows_per_plane * rows.out_row;
    const std::vector<int64_t> sources = source_rows(plan, rows.out_rows_per_plane);
    // A plane's sums stay with one task: copies of an element lie in its own plane.
    parallel_for(plan.planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(out_plane, 1)), [&](int64_t begin, int64_t end) {
      std::vector<A> sums(static_cast<size_t>(in_plane));
      for (int64_t p = begin; p < end; ++p) {
        std::fill(sums.begin(), sums.end(), A(0));
        for (int64_t r = 0; r < rows.out_rows_per_plane; ++r) {
          A* sum_row = sums.data() + sources[r] * rows.in_row;
          const T* g = go + p * out_plane + r * rows.out_row;
          for (int64_t o = 0; o < rows.out_row; ++o) sum_row[columns[o]] += up(g[o]);
        }
        T* plane = gi + p * in_plane;
        for (int64_t i = 0; i < in_plane; ++i) plane[i] = down<T>(sums[i]);
      }
    });
  });
}

void triangle(DType dtype, int64_t batch, int64_t rows, int64_t cols, int64_t diagonal, bool lower, const void* in,
              void* out) {
  dispatch_dtype(dtype, "triangle", [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(in);
    T* dst = static_cast<T*>(out);
    const T zero = typed_value<T>(FillValue{});
    parallel_for(batch * rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t i = r % rows;
        // Row i keeps columns j with j - i <= diagonal (tril) or >= diagonal (triu).
        const int64_t edge = std::clamp<int64_t>(lower ? i + diagonal + 1 : i + diagonal, 0, cols);
        const T* from = src + r * cols;
        T* to = dst + r * cols;
        const int64_t keep_begin = lower ? 0 : edge, keep_end = lower ? edge : cols;
        if (from != to) std::copy(from + keep_begin, from + keep_end, to + keep_begin);
        std::fill(to + (lower ? edge : 0), to + (lower ? cols : edge), zero);
      }
    });
  });
}

}  // namespace torchneuron::kernels
