// The loop machinery of the pointwise kernels: map(args, f) applies f to every element of up
// to three same-shaped strided inputs, writing operand 0, split over the compute engines, with
// dense (vectorizable) loops for contiguous and broadcast runs. Half types compute in float.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/elementwise.h"
#include "kernels/half.h"
#include "kernels/parallel.h"

namespace torchneuron::kernels::elementwise_map {

constexpr int64_t kGrain = 32768;

// Half types compute in float, as torch's CPU kernels do; the rest in their own type.
template <typename T>
struct ComputeOf {
  using type = T;
};
template <>
struct ComputeOf<Half> {
  using type = float;
};
template <>
struct ComputeOf<BFloat16> {
  using type = float;
};
template <typename T>
using Compute = typename ComputeOf<T>::type;

template <typename T>
inline Compute<T> load(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return static_cast<Compute<T>>(value);
}

template <typename T, typename V>
inline void store(char* p, V value) {
  const T typed = static_cast<T>(static_cast<Compute<T>>(value));
  std::memcpy(p, &typed, sizeof(T));
}

// Walks elements [begin, end) of the row-major index space, one innermost run at a time.
template <int N, typename Inner>
void run_range(const ElementwiseArgs& a, char* const* base, int64_t begin, int64_t end,
               Inner&& inner) {
  const int nd = a.ndim;
  if (nd == 0) {
    const int64_t zero[N] = {};
    char* ptrs[N];
    for (int k = 0; k < N; ++k) ptrs[k] = base[k];
    inner(ptrs, int64_t{1}, zero);
    return;
  }
  int64_t index[kMaxDims];
  int64_t rest = begin;
  for (int d = nd - 1; d >= 0; --d) {
    index[d] = rest % a.sizes[d];
    rest /= a.sizes[d];
  }
  char* ptrs[N];
  int64_t inner_strides[N];
  for (int k = 0; k < N; ++k) {
    ptrs[k] = base[k];
    for (int d = 0; d < nd; ++d) ptrs[k] += index[d] * a.strides[k][d];
    inner_strides[k] = a.strides[k][nd - 1];
  }
  int64_t remaining = end - begin;
  while (remaining > 0) {
    const int64_t n = std::min(a.sizes[nd - 1] - index[nd - 1], remaining);
    inner(ptrs, n, inner_strides);
    remaining -= n;
    if (remaining == 0) return;
    for (int k = 0; k < N; ++k) ptrs[k] += n * inner_strides[k];
    index[nd - 1] += n;
    for (int d = nd - 1; d > 0 && index[d] == a.sizes[d]; --d) {
      index[d] = 0;
      ++index[d - 1];
      for (int k = 0; k < N; ++k) ptrs[k] += a.strides[k][d - 1] - a.sizes[d] * a.strides[k][d];
    }
  }
}

// Splits the operands' index space over the compute engines.
template <int N, typename Inner>
void drive(const ElementwiseArgs& a, Inner&& inner) {
  char* base[N];
  for (int k = 0; k < N; ++k) {
    base[k] = a.is_scalar[k] ? const_cast<char*>(reinterpret_cast<const char*>(a.scalar_bytes[k].data()))
                             : a.data[k];
  }
  parallel_for(a.numel(), kGrain, [&](int64_t begin, int64_t end) {
    run_range<N>(a, base, begin, end, inner);
  });
}

// Contiguous runs, with broadcast (stride 0) inputs read once: each pattern is its own loop
// so that the compiler vectorizes it. Flattened: an op whose body GCC judged too large to inline
// (softplus: exp and log1p) stayed a call per element, so its loops ran scalar.
template <typename Out, typename In, int K, typename F>
[[gnu::flatten]] inline void dense_run(char* const* p, int64_t n, const int64_t* s, F& f) {
  using CI = Compute<In>;
  using CO = Compute<Out>;
  auto* out = reinterpret_cast<Out*>(p[0]);
  const auto* a = reinterpret_cast<const In*>(p[1]);
  if constexpr (K == 1) {
    if (s[1] != 0) {
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(static_cast<CO>(f(static_cast<CI>(a[i]))));
    } else {
      const Out value = static_cast<Out>(static_cast<CO>(f(static_cast<CI>(a[0]))));
      for (int64_t i = 0; i < n; ++i) out[i] = value;
    }
  } else if constexpr (K == 2) {
    const auto* b = reinterpret_cast<const In*>(p[2]);
    if (s[1] != 0 && s[2] != 0) {
      for (int64_t i = 0; i < n; ++i) {
        out[i] = static_cast<Out>(static_cast<CO>(f(static_cast<CI>(a[i]), static_cast<CI>(b[i]))));
      }
    } else if (s[1] != 0) {
      const CI y = static_cast<CI>(b[0]);
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(static_cast<CO>(f(static_cast<CI>(a[i]), y)));
    } else if (s[2] != 0) {
      const CI x = static_cast<CI>(a[0]);
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(static_cast<CO>(f(x, static_cast<CI>(b[i]))));
    } else {
      const Out value = static_cast<Out>(static_cast<CO>(f(static_cast<CI>(a[0]), static_cast<CI>(b[0]))));
      for (int64_t i = 0; i < n; ++i) out[i] = value;
    }
  } else {
    const auto* b = reinterpret_cast<const In*>(p[2]);
    const auto* c = reinterpret_cast<const In*>(p[3]);
    const int64_t sa = s[1] != 0, sb = s[2] != 0, sc = s[3] != 0;
    if (sa && sb && sc) {  // addcmul / addcdiv / lerp with a tensor weight
      for (int64_t i = 0; i < n; ++i) {
        out[i] = static_cast<Out>(static_cast<CO>(f(static_cast<CI>(a[i]), static_cast<CI>(b[i]), static_cast<CI>(c[i]))));
      }
    } else if (sa && sb) {  // lerp with a scalar weight
      const CI z = static_cast<CI>(c[0]);
      for (int64_t i = 0; i < n; ++i) {
        out[i] = static_cast<Out>(static_cast<CO>(f(static_cast<CI>(a[i]), static_cast<CI>(b[i]), z)));
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        out[i] = static_cast<Out>(static_cast<CO>(
            f(static_cast<CI>(a[i * sa]), static_cast<CI>(b[i * sb]), static_cast<CI>(c[i * sc]))));
      }
    }
  }
}

// out[i] = f(in_1[i], ..., in_K[i]): Out and In are storage types, f works on Compute<In>.
template <typename Out, typename In, int K, typename F>
void map(const ElementwiseArgs& a, F f) {
  drive<K + 1>(a, [&](char* const* p, int64_t n, const int64_t* s) {
    bool dense = s[0] == static_cast<int64_t>(sizeof(Out));
    for (int k = 1; k <= K; ++k) dense = dense && (s[k] == sizeof(In) || s[k] == 0);
    if (dense) {
      dense_run<Out, In, K>(p, n, s, f);
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (K == 1) {
        store<Out>(p[0] + i * s[0], f(load<In>(p[1] + i * s[1])));
      } else if constexpr (K == 2) {
        store<Out>(p[0] + i * s[0], f(load<In>(p[1] + i * s[1]), load<In>(p[2] + i * s[2])));
      } else {
        store<Out>(p[0] + i * s[0],
                   f(load<In>(p[1] + i * s[1]), load<In>(p[2] + i * s[2]), load<In>(p[3] + i * s[3])));
      }
    }
  });
}

}  // namespace torchneuron::kernels::elementwise_map
