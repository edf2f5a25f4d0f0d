#include "kernels/copy.h"

#include <complex>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/dtype_dispatch.h"
#include "kernels/half.h"
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
  } else {
    const auto wide = static_cast<Arithmetic<Src>>(value);
    if constexpr (std::is_same_v<Dst, bool>) {
      return wide != Arithmetic<Src>(0);
    } else if constexpr (std::is_integral_v<Dst> && std::is_floating_point_v<Arithmetic<Src>>) {
      // As torch's CPU kernels on x86: truncate to int32 (int64 for int64), out-of-range and
      // NaN give the minimum value, and narrower types keep the low bits.
      if constexpr (sizeof(Dst) == 8) {
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
void copy_typed(const CoalescedShape& shape, char* dst, const char* src) {
  char* const base[2] = {dst, const_cast<char*>(src)};
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
    for (int64_t i = 0; i < n; ++i, out += strides[0], in += strides[1]) {
      Src value;
      std::memcpy(&value, in, sizeof(Src));
      *reinterpret_cast<Dst*>(out) = convert<Dst>(value);
    }
  });
}


}  // namespace

bool copy_supported(DType dst, DType src) { return is_complex(dst) || !is_complex(src); }

void copy(const StridedView& dst, const StridedView& src) {
  if (dst.numel() == 0) return;
  const StridedView views[2] = {dst, src};
  const CoalescedShape shape = coalesce(views, 2);
  char* out = static_cast<char*>(dst.data);
  const char* in = static_cast<const char*>(src.data);
  dispatch_dtype(dst.dtype, "copy", [&](auto dst_tag) {
    using Dst = decltype(dst_tag);
    dispatch_dtype(src.dtype, "copy", [&](auto src_tag) {
      using Src = decltype(src_tag);
      if constexpr (IsComplex<Src>::value && !IsComplex<Dst>::value) {
        return;  // rejected by copy_supported on the host
      } else {
        copy_typed<Dst, Src>(shape, out, in);
      }
    });
  });
}

}  // namespace torchneuron::kernels

namespace torchneuron::kernels {

void fill(const StridedView& dst, FillValue value) {
  if (dst.numel() == 0) return;
  const CoalescedShape shape = coalesce(&dst, 1);
  char* const base[1] = {static_cast<char*>(dst.data)};
  dispatch_dtype(dst.dtype, "fill", [&](auto tag) {
    using T = decltype(tag);
    T typed;
    if constexpr (std::is_same_v<T, int64_t>) {
      typed = value.is_integer ? value.integer : static_cast<int64_t>(value.real);
    } else {
      typed = value.is_integer ? convert<T>(value.integer) : convert<T>(value.real);
    }
    for_each_run<1>(shape, base, [&](char* const* ptrs, int64_t n, const int64_t* strides) {
      char* out = ptrs[0];
      for (int64_t i = 0; i < n; ++i, out += strides[0]) std::memcpy(out, &typed, sizeof(T));
    });
  });
}

}  // namespace torchneuron::kernels
