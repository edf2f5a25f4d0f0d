#include "kernels/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/dtype_dispatch.h"
#include "kernels/floating.h"
#include "kernels/half.h"
#include "kernels/parallel.h"
#include "kernels/vector_math.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {
namespace {

constexpr int64_t kGrain = 16384;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool is_floating(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16 || dtype == DType::kFloat32 ||
         dtype == DType::kFloat64;
}


template <typename T>
using Acc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;

template <typename T>
inline Acc<T> to_acc(T value) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(value));
  } else {
    return static_cast<Acc<T>>(value);
  }
}

template <typename T>
inline Acc<T> load_acc(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return to_acc<T>(value);
}

template <typename Out, typename A>
inline void store_out(char* p, A value) {
  Out typed;
  if constexpr (std::is_same_v<Out, Half> || std::is_same_v<Out, BFloat16>) {
    typed = Out(static_cast<float>(value));
  } else if constexpr (std::is_same_v<Out, bool>) {
    typed = value != A(0);
  } else {
    typed = static_cast<Out>(value);
  }
  std::memcpy(p, &typed, sizeof(Out));
}

// How a norm folds: its mapped values are summed (p = 0, 1, 2) or compared (p = +-inf).
constexpr ReduceOp base_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kNorm0:
    case ReduceOp::kNorm1:
    case ReduceOp::kNorm2: return ReduceOp::kSum;
    case ReduceOp::kNormInf: return ReduceOp::kMax;
    case ReduceOp::kNormNegInf: return ReduceOp::kMin;
    default: return op;
  }
}

// The per-element map of a norm before it is folded (identity for the plain reductions).
template <ReduceOp kOp, typename V>
inline V map_value(V x) {
  if constexpr (kOp == ReduceOp::kNorm0) {
    return x != V(0) ? V(1) : V(0);
  } else if constexpr (kOp == ReduceOp::kNorm1 || kOp == ReduceOp::kNormInf || kOp == ReduceOp::kNormNegInf) {
    return x < V(0) ? -x : x;  // keeps NaN
  } else if constexpr (kOp == ReduceOp::kNorm2) {
    return x * x;
  } else {
    return x;
  }
}

// The op is a template parameter so that the inner loops vectorize.
template <typename A, ReduceOp kOp>
struct Reducer {
  static constexpr ReduceOp norm = kOp;
  static constexpr ReduceOp op = base_op(kOp);
  static constexpr A identity() {
    if constexpr (op == ReduceOp::kProd) {
      return A(1);
    } else if constexpr (op == ReduceOp::kMax) {
      return std::is_floating_point_v<A> ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::lowest();
    } else if constexpr (op == ReduceOp::kMin) {
      return std::is_floating_point_v<A> ? std::numeric_limits<A>::infinity() : std::numeric_limits<A>::max();
    } else {
      return A(0);
    }
  }
  static A combine(A acc, A value) {
    if constexpr (op == ReduceOp::kProd) {
      return acc * value;
    } else if constexpr (op == ReduceOp::kMax || op == ReduceOp::kMin) {
      if constexpr (std::is_floating_point_v<A>) {
        if (std::isnan(acc) || std::isnan(value)) return std::numeric_limits<A>::quiet_NaN();
      }
      return op == ReduceOp::kMax ? std::max(acc, value) : std::min(acc, value);
    } else {
      return acc + value;
    }
  }
};

// Float-family storage types (float and the half types) sum and compare in float lanes, which
// the compiler vectorizes; double and integers take the generic path.
template <typename T>
constexpr bool kFloatLanes = std::is_same_v<T, float> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// 64 float lanes: four independent vector accumulators, so that the adds of a row overlap
// instead of waiting on one register's latency.
constexpr int kLanes = 64;
constexpr int64_t kLaneChunk = 2048;  // elements summed in float before joining the double total

// Folds kLanes lanes into the first kShortLanes (each level a constant-count vector op).
static_assert(kLanes == 4 * kShortLanes, "two folding levels");
template <typename V, typename Combine>
inline void fold_lanes_to_short(V* lanes, Combine&& combine) {
  for (int l = 0; l < kLanes / 2; ++l) lanes[l] = combine(lanes[l], lanes[l + kLanes / 2]);
  for (int l = 0; l < kShortLanes; ++l) lanes[l] = combine(lanes[l], lanes[l + kShortLanes]);
}

// Sum of kOp's mapped values of a contiguous run: 64 float lanes per chunk of 2048 elements,
// chunks added in double, so that error grows with the chunk length, not the run length.
template <typename T, ReduceOp kOp>
double sum_run(const T* run, int64_t n) {
  double total = 0;
  for (int64_t start = 0; start < n; start += kLaneChunk) {
    const int64_t len = std::min(kLaneChunk, n - start);
    const T* chunk = run + start;
    float lanes[kLanes];
    int64_t i = 0;
    if (len >= kLanes) {
      std::fill(lanes, lanes + kLanes, 0.0f);
      for (; i + kLanes <= len; i += kLanes) {
        for (int l = 0; l < kLanes; ++l) lanes[l] += map_value<kOp>(static_cast<float>(chunk[i + l]));
      }
      fold_lanes_to_short(lanes, [](float a, float b) { return a + b; });
    } else {
      std::fill(lanes, lanes + kShortLanes, 0.0f);
    }
    // Short rows (a 7 x 7 plane, a row of 49) are mostly this step. Without it they went one by
    // one into the double after a fold of 64 empty lanes: a global average pool ran at a tenth
    // of CPU PyTorch's speed.
    for (; i + kShortLanes <= len; i += kShortLanes) {
      for (int l = 0; l < kShortLanes; ++l) lanes[l] += map_value<kOp>(static_cast<float>(chunk[i + l]));
    }
    fold_lane_tree<kShortLanes / 2>(lanes, [](float a, float b) { return a + b; });
    double chunk_total = lanes[0];
    for (; i < len; ++i) chunk_total += map_value<kOp>(static_cast<float>(chunk[i]));
    total += chunk_total;
  }
  return total;
}

// Maximum (or minimum) of kOp's mapped values of a contiguous run; NaN anywhere makes the
// result NaN.
template <typename T, bool kMax, ReduceOp kOp>
double extremum_run(const T* run, int64_t n) {
  constexpr float kIdentity = kMax ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  auto pick = [](float a, float b) { return kMax ? std::max(a, b) : std::min(a, b); };
  auto either = [](int a, int b) { return a | b; };
  float lanes[kLanes];
  int nan_seen[kLanes];
  int64_t i = 0;
  if (n >= kLanes) {
    std::fill(lanes, lanes + kLanes, kIdentity);
    std::fill(nan_seen, nan_seen + kLanes, 0);
    for (; i + kLanes <= n; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        const float x = map_value<kOp>(static_cast<float>(run[i + l]));
        lanes[l] = kMax ? (x > lanes[l] ? x : lanes[l]) : (x < lanes[l] ? x : lanes[l]);
        nan_seen[l] |= x != x;
      }
    }
    fold_lanes_to_short(lanes, pick);
    fold_lanes_to_short(nan_seen, either);
  } else {
    std::fill(lanes, lanes + kShortLanes, kIdentity);
    std::fill(nan_seen, nan_seen + kShortLanes, 0);
  }
  for (; i + kShortLanes <= n; i += kShortLanes) {
    for (int l = 0; l < kShortLanes; ++l) {
      const float x = map_value<kOp>(static_cast<float>(run[i + l]));
      lanes[l] = kMax ? (x > lanes[l] ? x : lanes[l]) : (x < lanes[l] ? x : lanes[l]);
      nan_seen[l] |= x != x;
    }
  }
  fold_lane_tree<kShortLanes / 2>(lanes, pick);
  fold_lane_tree<kShortLanes / 2>(nan_seen, either);
  float result = lanes[0];
  int any_nan = nan_seen[0];
  for (; i < n; ++i) {
    const float x = map_value<kOp>(static_cast<float>(run[i]));
    any_nan |= x != x;
    result = kMax ? std::max(result, x) : std::min(result, x);
  }
  return any_nan ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(result);
}

// The reduced part of `in`: sizes and byte strides of its trailing dimensions.
struct ReducedShape {
  int ndim = 0;
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims];
  int64_t numel = 1;
};

// Folds elements [begin, end) of the reduced index space that starts at `base`.
template <typename T, typename R>
Acc<T> fold(const char* base, const ReducedShape& shape, int64_t begin, int64_t end) {
  constexpr ReduceOp kNorm = R::norm;
  Acc<T> acc = R::identity();
  if (begin >= end) return acc;  // nothing to fold; an empty reduced dim would divide by zero below
  if (shape.ndim == 0) return R::combine(acc, map_value<kNorm>(load_acc<T>(base)));
  constexpr bool kLaneSum = kFloatLanes<T> && (R::op == ReduceOp::kSum || R::op == ReduceOp::kMean);
  if (kLaneSum && shape.ndim == 1 && shape.strides[0] == static_cast<int64_t>(sizeof(T))) {
    // A whole or partial contiguous row: no index bookkeeping.
    if constexpr (kLaneSum) return R::combine(acc, sum_run<T, kNorm>(reinterpret_cast<const T*>(base) + begin, end - begin));
  }
  const int last = shape.ndim - 1;
  int64_t index[kMaxDims];
  int64_t rest = begin;
  for (int d = last; d >= 0; --d) {
    index[d] = rest % shape.sizes[d];
    rest /= shape.sizes[d];
  }
  const char* p = base;
  for (int d = 0; d <= last; ++d) p += index[d] * shape.strides[d];
  int64_t remaining = end - begin;
  const int64_t stride = shape.strides[last];
  while (remaining > 0) {
    const int64_t n = std::min(shape.sizes[last] - index[last], remaining);
    constexpr bool kSumLike = R::op == ReduceOp::kSum || R::op == ReduceOp::kMean;
    constexpr bool kExtremum = R::op == ReduceOp::kMax || R::op == ReduceOp::kMin;
    if (kFloatLanes<T> && (kSumLike || kExtremum) && stride == static_cast<int64_t>(sizeof(T))) {
      const T* run = reinterpret_cast<const T*>(p);
      if constexpr (kFloatLanes<T> && kSumLike) acc = R::combine(acc, sum_run<T, kNorm>(run, n));
      if constexpr (kFloatLanes<T> && kExtremum) {
        acc = R::combine(acc, extremum_run<T, R::op == ReduceOp::kMax, kNorm>(run, n));
      }
    } else if (stride == static_cast<int64_t>(sizeof(T))) {
      // Contiguous run: typed loads and four independent accumulators.
      const T* run = reinterpret_cast<const T*>(p);
      Acc<T> lanes[4] = {R::identity(), R::identity(), R::identity(), R::identity()};
      int64_t i = 0;
      for (; i + 4 <= n; i += 4) {
        for (int l = 0; l < 4; ++l) lanes[l] = R::combine(lanes[l], map_value<kNorm>(to_acc<T>(run[i + l])));
      }
      for (; i < n; ++i) lanes[0] = R::combine(lanes[0], map_value<kNorm>(to_acc<T>(run[i])));
      for (int l = 0; l < 4; ++l) acc = R::combine(acc, lanes[l]);
    } else {
      for (int64_t i = 0; i < n; ++i) acc = R::combine(acc, map_value<kNorm>(load_acc<T>(p + i * stride)));
    }
    remaining -= n;
    if (remaining == 0) break;
    p += n * stride;
    index[last] += n;
    for (int d = last; d > 0 && index[d] == shape.sizes[d]; --d) {
      index[d] = 0;
      ++index[d - 1];
      p += shape.strides[d - 1] - shape.sizes[d] * shape.strides[d];
    }
  }
  return acc;
}

// Byte offset of output element `linear` (row-major over `sizes`) under `strides` (elements).
int64_t offset_of(int64_t linear, int ndim, const int64_t* sizes, const int64_t* strides, size_t item) {
  int64_t offset = 0;
  for (int d = ndim - 1; d >= 0; --d) {
    offset += (linear % sizes[d]) * strides[d];
    linear /= sizes[d];
  }
  return offset * static_cast<int64_t>(item);
}

template <typename T>
using ReduceAcc = Acc<T>;  // floating.h's Acc is visible outside this namespace too

// Where a reduction writes its results: inline for an output of the input's dtype (the common
// case), else through a store picked at run time, once per output element. The folds are then
// instantiated per input dtype, not per (input, output) pair: the 500 pairs took this file six
// minutes to compile for each instruction-set level.
template <typename Out>
struct TypedStore {
  size_t size() const { return sizeof(Out); }
  template <typename A>
  void operator()(char* p, A value) const {
    store_out<Out>(p, value);
  }
};

template <typename A>
struct ErasedStore {
  void (*store)(char*, A);
  size_t item;
  size_t size() const { return item; }
  void operator()(char* p, A value) const { store(p, value); }
};

template <typename T, ReduceOp kOp, typename Store>
void reduce_typed(const Store& store_out_value, const StridedView& out, const StridedView& in, int reduced_dims) {
  using A = Acc<T>;
  using R = Reducer<A, kOp>;
  constexpr ReduceOp op = kOp;
  const int kept = in.ndim - reduced_dims;
  ReducedShape shape;
  shape.ndim = reduced_dims;
  for (int d = 0; d < reduced_dims; ++d) {
    shape.sizes[d] = in.sizes[kept + d];
    shape.strides[d] = in.strides[kept + d] * static_cast<int64_t>(sizeof(T));
    shape.numel *= shape.sizes[d];
  }
  const int64_t outputs = out.numel();
  auto finish = [&](A acc) {
    if (op == ReduceOp::kMean) return static_cast<A>(acc / static_cast<A>(shape.numel));
    if constexpr (op == ReduceOp::kNorm2) return static_cast<A>(std::sqrt(acc));
    return acc;
  };
  const char* in_base = static_cast<const char*>(in.data);
  char* out_base = static_cast<char*>(out.data);
  if (outputs == 1 && shape.numel > kGrain) {
    // One output: partial folds over chunks of the reduced range, combined in chunk order.
    const int64_t chunks = std::min<int64_t>(compute_threads() * 4, shape.numel / kGrain);
    const int64_t chunk = (shape.numel + chunks - 1) / chunks;
    std::vector<A> partial(static_cast<size_t>(chunks), R::identity());
    parallel_for(chunks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        partial[c] = fold<T, R>(in_base, shape, c * chunk, std::min(shape.numel, (c + 1) * chunk));
      }
    });
    A acc = R::identity();
    for (A value : partial) acc = R::combine(acc, value);
    store_out_value(out_base, finish(acc));
    return;
  }
  if (kept >= 1 && out.ndim == kept && in.strides[kept - 1] == 1 && shape.ndim > 0 &&
      shape.strides[shape.ndim - 1] != sizeof(T)) {
    // Reducing over dims of memory above the last kept one (a column sum, as in a bias
    // gradient; a sum over the T of [B, T, C]): for each index of the kept dims before it, walk
    // the input in memory order, one block of kColumns outputs at a time, whose sums stay in
    // registers across all rows (kept in memory, they were stored and reloaded at every row).
    constexpr int64_t kColumns = 64;
    const int64_t columns = in.sizes[kept - 1], blocks = ceil_div(columns, kColumns);
    parallel_for((outputs / columns) * blocks, 1, [&](int64_t first, int64_t last_block) {
      for (int64_t task = first; task < last_block; ++task) {
        const int64_t outer = task / blocks, block = task % blocks;
        const int64_t begin = block * kColumns, width = std::min(kColumns, columns - begin);
        const char* outer_in = in_base + offset_of(outer, kept - 1, in.sizes.data(), in.strides.data(), sizeof(T));
        char* outer_out = out_base + offset_of(outer, kept - 1, out.sizes.data(), out.strides.data(), store_out_value.size());
        A acc[kColumns];
        for (int64_t j = 0; j < kColumns; ++j) acc[j] = R::identity();
        const int last = shape.ndim - 1;
        int64_t index[kMaxDims] = {};
        const char* row = outer_in;
        auto next_row = [&] {
          for (int d = last; d >= 0; --d) {
            row += shape.strides[d];
            if (++index[d] < shape.sizes[d]) break;
            row -= shape.strides[d] * shape.sizes[d];
            index[d] = 0;
          }
        };
        constexpr bool kSumLike = R::op == ReduceOp::kSum || R::op == ReduceOp::kMean;
        if constexpr (kFloatLanes<T> && kSumLike) {
          // Float sums over runs of kColumnRun rows, each added into the double total: twice
          // the lanes per register of double sums, with error growing with the run, not the column.
          // Short runs: a sum over the tokens of [B, T, C] (a broadcast's gradient) drifted from
          // float64 ten times as far as CPU PyTorch's cascade sum with runs of 256.
          constexpr int64_t kColumnRun = 16;
          for (int64_t r0 = 0; r0 < shape.numel; r0 += kColumnRun) {
            float run_sum[kColumns] = {};
            const int64_t r1 = std::min(shape.numel, r0 + kColumnRun);
            for (int64_t r = r0; r < r1; ++r, next_row()) {
              const T* values = reinterpret_cast<const T*>(row) + begin;
              if (width == kColumns) {
                for (int64_t j = 0; j < kColumns; ++j) run_sum[j] += map_value<op>(static_cast<float>(values[j]));
              } else {
                for (int64_t j = 0; j < width; ++j) run_sum[j] += map_value<op>(static_cast<float>(values[j]));
              }
            }
            for (int64_t j = 0; j < kColumns; ++j) acc[j] += run_sum[j];
          }
        } else {
          for (int64_t r = 0; r < shape.numel; ++r, next_row()) {
            const T* values = reinterpret_cast<const T*>(row) + begin;
            if (width == kColumns) {  // a constant trip count: the sums become vector registers
              for (int64_t j = 0; j < kColumns; ++j) acc[j] = R::combine(acc[j], map_value<op>(to_acc<T>(values[j])));
            } else {
              for (int64_t j = 0; j < width; ++j) acc[j] = R::combine(acc[j], map_value<op>(to_acc<T>(values[j])));
            }
          }
        }
        const int64_t out_step = out.strides[kept - 1] * static_cast<int64_t>(store_out_value.size());
        for (int64_t j = 0; j < width; ++j) store_out_value(outer_out + (begin + j) * out_step, finish(acc[j]));
      }
    });
    return;
  }
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, shape.numel));
  parallel_for(outputs, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      // One kept dimension (rows of a matrix) needs no index arithmetic: 64-bit divisions cost
      // as much as summing a short row.
      const char* src = kept == 1 && out.ndim == 1
                            ? in_base + i * in.strides[0] * static_cast<int64_t>(sizeof(T))
                            : in_base + offset_of(i, kept, in.sizes.data(), in.strides.data(), sizeof(T));
      char* dst = kept == 1 && out.ndim == 1
                      ? out_base + i * out.strides[0] * static_cast<int64_t>(store_out_value.size())
                      : out_base + offset_of(i, out.ndim, out.sizes.data(), out.strides.data(), store_out_value.size());
      store_out_value(dst, finish(fold<T, R>(src, shape, 0, shape.numel)));
    }
  });
}

}  // namespace

bool reduce_supported(ReduceOp op, DType in, DType out) {
  if (is_complex(in) || is_complex(out)) return false;
  if (op == ReduceOp::kMean) return is_floating(in) && is_floating(out);
  if (op >= ReduceOp::kNorm0) return is_floating(in) && is_floating(out);
  return true;
}

namespace {

// Merges adjacent kept dims that are one run in both the input and the output (in's kept dims
// come first, in out's order), so that summing a [b, m, n] tensor over b takes the column path
// above rather than a strided fold per output (10 times slower on [16, 64, 64]).
void merge_kept_dims(StridedView& out, StridedView& in, int reduced_dims) {
  if (out.ndim != in.ndim - reduced_dims) return;
  for (int d = out.ndim - 1; d > 0; --d) {
    const bool one_run = in.strides[d - 1] == in.strides[d] * in.sizes[d] &&
                         out.strides[d - 1] == out.strides[d] * out.sizes[d];
    if (!one_run) continue;
    for (StridedView* view : {&out, &in}) {
      view->sizes[d - 1] *= view->sizes[d];
      view->strides[d - 1] = view->strides[d];
      for (int e = d; e + 1 < view->ndim; ++e) {
        view->sizes[e] = view->sizes[e + 1];
        view->strides[e] = view->strides[e + 1];
      }
      --view->ndim;
    }
  }
}

// Merges adjacent reduced dims that are one run of the input (the H and W of a mean over an
// image's planes), so that a plane folds as one contiguous run. Returns the reduced dim count.
int merge_reduced_dims(StridedView& in, int reduced_dims) {
  const int first = in.ndim - reduced_dims;
  for (int d = in.ndim - 1; d > first; --d) {
    if (in.strides[d - 1] != in.strides[d] * in.sizes[d]) continue;
    in.sizes[d - 1] *= in.sizes[d];
    in.strides[d - 1] = in.strides[d];
    for (int e = d; e + 1 < in.ndim; ++e) {
      in.sizes[e] = in.sizes[e + 1];
      in.strides[e] = in.strides[e + 1];
    }
    --in.ndim;
    --reduced_dims;
  }
  return reduced_dims;
}

}  // namespace

void reduce(ReduceOp op, const StridedView& out_view, const StridedView& in_view, int reduced_dims_in) {
  if (out_view.numel() == 0) return;
  StridedView out = out_view, in = in_view;
  const int reduced_dims = merge_reduced_dims(in, reduced_dims_in);
  merge_kept_dims(out, in, reduced_dims);
  // The output's store: inline when it has the input's dtype, else picked here.
  auto reduce_into = [&](auto in_tag, auto dispatch_out, auto reduce_op) {
    using T = decltype(in_tag);
    if (out.dtype == in.dtype) return reduce_op(in_tag, TypedStore<T>{});
    ErasedStore<ReduceAcc<T>> store{nullptr, element_size(out.dtype)};
    dispatch_out([&](auto out_tag) { store.store = &store_out<decltype(out_tag), ReduceAcc<T>>; });
    reduce_op(in_tag, store);
  };
  if (op >= ReduceOp::kNorm0) {
    // Norms take floating dtypes only (reduce_supported); dispatching just those keeps the
    // instantiations, and this file's compile time, in check.
    dispatch_floating(in.dtype, "vector norm", [&](auto in_tag) {
      reduce_into(
          in_tag, [&](auto f) { dispatch_floating(out.dtype, "vector norm", f); },
          [&](auto tag, const auto& store) {
            using T = decltype(tag);
            switch (op) {
              case ReduceOp::kNorm0: return reduce_typed<T, ReduceOp::kNorm0>(store, out, in, reduced_dims);
              case ReduceOp::kNorm1: return reduce_typed<T, ReduceOp::kNorm1>(store, out, in, reduced_dims);
              case ReduceOp::kNorm2: return reduce_typed<T, ReduceOp::kNorm2>(store, out, in, reduced_dims);
              case ReduceOp::kNormInf: return reduce_typed<T, ReduceOp::kNormInf>(store, out, in, reduced_dims);
              case ReduceOp::kNormNegInf:
                return reduce_typed<T, ReduceOp::kNormNegInf>(store, out, in, reduced_dims);
              default: return;
            }
          });
    });
    return;
  }
  dispatch_real_dtype(in.dtype, "reduction", [&](auto in_tag) {
    reduce_into(
        in_tag, [&](auto f) { dispatch_real_dtype(out.dtype, "reduction", f); },
        [&](auto tag, const auto& store) {
          using T = decltype(tag);
          switch (op) {
            case ReduceOp::kSum: return reduce_typed<T, ReduceOp::kSum>(store, out, in, reduced_dims);
            case ReduceOp::kMean: return reduce_typed<T, ReduceOp::kMean>(store, out, in, reduced_dims);
            case ReduceOp::kProd: return reduce_typed<T, ReduceOp::kProd>(store, out, in, reduced_dims);
            case ReduceOp::kMax: return reduce_typed<T, ReduceOp::kMax>(store, out, in, reduced_dims);
            case ReduceOp::kMin: return reduce_typed<T, ReduceOp::kMin>(store, out, in, reduced_dims);
            default: return;
          }
        });
  });
}

}  // namespace torchneuron::kernels
