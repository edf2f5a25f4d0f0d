#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/floating.h"
#include "kernels/parallel.h"
#include "kernels/tile_gemm.h"
#include "kernels/vector_math.h"

namespace torchneuron::kernels {
namespace {

constexpr int64_t kQueryBlock = 32;   // query rows per block
constexpr int64_t kKeyBlock = 256;    // keys per block (the online softmax's step)
constexpr int64_t kKeyTask = 64;      // keys per dK/dV task when the backward splits heads

// Largest non-NaN value of x[0..n) (NaNs are skipped, as a fold of std::max does); -inf if none.
template <typename A>
inline A lane_max_of(const A* x, int64_t n) {
  constexpr int kLanes = 16;
  A lanes[kLanes];
  for (int l = 0; l < kLanes; ++l) lanes[l] = -std::numeric_limits<A>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] = x[i + l] > lanes[l] ? x[i + l] : lanes[l];
  }
  A result = -std::numeric_limits<A>::infinity();
  for (; i < n; ++i) result = x[i] > result ? x[i] : result;
  for (int l = 0; l < kLanes; ++l) result = lanes[l] > result ? lanes[l] : result;
  return result;
}

// row[c] = exp(row[c] - shift) for c < n, where row[c] <= shift, in whole 16-lane steps (a
// scalar exp costs as much as a vector one).
template <typename A>
inline void exp_shifted(A* row, int64_t n, A shift) {
  constexpr int kLanes = 16;
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) {
    for (int l = 0; l < kLanes; ++l) row[c + l] = exp_nonpositive_of(row[c + l] - shift);
  }
  for (; c < n; ++c) row[c] = exp_nonpositive_of(row[c] - shift);
}

// The end of a causal row's exps: its visible scores rounded up to whole 16-lane steps where
// the block has them. The masked scores in between are -inf, so their exps are zeros.
inline int64_t exp_end(int64_t visible, int64_t cols) {
  constexpr int64_t kLanes = 16;
  return std::min(cols, (visible + kLanes - 1) / kLanes * kLanes);
}

// `rows` rows of `cols` elements, `row_stride` apart, in the compute type A and packed: the
// memory itself when it already is, else a converted or gathered copy.
template <typename T, typename A>
const A* rows_view(const T* from, int64_t rows, int64_t cols, int64_t row_stride, std::vector<A>& buffer) {
  if constexpr (std::is_same_v<T, A>) {
    if (row_stride == cols || rows <= 1) return from;
  }
  buffer.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = from + r * row_stride;
    A* to = buffer.data() + r * cols;
    for (int64_t c = 0; c < cols; ++c) to[c] = static_cast<A>(up(row[c]));
  }
  return buffer.data();
}

// The start of (batch, head) slice `bh` of an operand.
template <typename P>
P* head_start(P* base, const HeadStrides& strides, const AttentionShape& s, int64_t bh) {
  return base + (bh / s.heads) * strides.batch + (bh % s.heads) * strides.head;
}

// to[c][r] = from[r][c] for a row-major [rows, cols] matrix.
template <typename A>
void transpose(const A* from, int64_t rows, int64_t cols, std::vector<A>& to) {
  constexpr int64_t kTile = 16;  // tiles keep the strided side within a few cache lines
  to.resize(static_cast<size_t>(rows * cols));
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c) {
        for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r) to[c * rows + r] = from[r * cols + c];
      }
    }
  }
}

// One (batch, head) slice of the operands in the compute type A, with K (and V) transposed so
// that score rows are contiguous axpy runs over keys.
template <typename T, typename A>
struct HeadSlice {
  const A* q = nullptr;   // [L, E]
  const A* k = nullptr;   // [S, E]
  const A* v = nullptr;   // [S, Ev]
  const A* go = nullptr;  // [L, Ev], the backward's grad_out
  std::vector<A> q_buffer, k_buffer, v_buffer, go_buffer;
  std::vector<A> key_t, value_t;  // [E, S], [Ev, S]

  void load_forward(const AttentionShape& s, const AttentionLayout& l, int64_t bh, const T* pq, const T* pk,
                    const T* pv) {
    q = rows_view(head_start(pq, l.q, s, bh), s.q_len, s.head_dim, l.q.row, q_buffer);
    k = rows_view(head_start(pk, l.k, s, bh), s.kv_len, s.head_dim, l.k.row, k_buffer);
    v = rows_view(head_start(pv, l.v, s, bh), s.kv_len, s.value_dim, l.v.row, v_buffer);
    transpose(k, s.kv_len, s.head_dim, key_t);
  }

  void load_backward(const AttentionShape& s, const AttentionLayout& l, int64_t bh, const T* pq, const T* pk,
                     const T* pv, const T* pgo) {
    load_forward(s, l, bh, pq, pk, pv);
    go = rows_view(head_start(pgo, l.grad_out, s, bh), s.q_len, s.value_dim, l.grad_out.row, go_buffer);
    transpose(v, s.kv_len, s.value_dim, value_t);
  }
};

template <typename T>
double bias_at(const AttentionBias& b, int64_t batch, int64_t head, int64_t i, int64_t j) {
  const T* data = static_cast<const T*>(b.data);
  return static_cast<double>(up(data[batch * b.stride_b + head * b.stride_h + i * b.stride_q + j * b.stride_k]));
}

// scores[r][c] = scale * q[i0 + r] . k[j0 + c] + bias, -inf where masked. Rows of width `cols`.
template <typename T, typename A>
void block_scores(const AttentionShape& s, const HeadSlice<T, A>& slice, const AttentionBias& bias, bool causal,
                  A scale, int64_t batch, int64_t head, int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                  std::vector<A>& scores) {
  const int64_t e = s.head_dim;
  scores.resize(static_cast<size_t>(rows * cols));
  multiply_into(rows, cols, e, slice.q + i0 * e, e, int64_t{1}, slice.key_t.data() + j0, s.kv_len, scores.data(), cols);
  for (int64_t r = 0; r < rows; ++r) {
    A* row = scores.data() + r * cols;
    for (int64_t c = 0; c < cols; ++c) row[c] *= scale;
    if (bias.data != nullptr) {
      for (int64_t c = 0; c < cols; ++c) row[c] += static_cast<A>(bias_at<T>(bias, batch, head, i0 + r, j0 + c));
    }
    if (causal) {
      for (int64_t c = std::max<int64_t>(0, i0 + r + 1 - j0); c < cols; ++c) row[c] = -std::numeric_limits<A>::infinity();
    }
  }
}

// Keys a query block [i0, i0 + rows) can see.
inline int64_t visible_keys(const AttentionShape& s, bool causal, int64_t i0, int64_t rows) {
  return causal ? std::min(s.kv_len, i0 + rows) : s.kv_len;
}

template <typename T>
void forward_typed(const AttentionShape& s, const AttentionLayout& layout, const T* q, const T* k, const T* v,
                   const AttentionBias& bias, bool causal, double scale_value, T* out, void* lse_out) {
  using A = Acc<T>;
  constexpr A kNegInf = -std::numeric_limits<A>::infinity();
  const A scale = static_cast<A>(scale_value);
  const int64_t ev = s.value_dim;
  const int64_t q_blocks = (s.q_len + kQueryBlock - 1) / kQueryBlock;
  const int64_t heads = s.batch * s.heads;
  parallel_for(heads * q_blocks, 1, [&](int64_t begin, int64_t end) {
    HeadSlice<T, A> slice;
    int64_t loaded = -1;
    std::vector<A> scores, acc, row_max, row_sum;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bh = task / q_blocks, i0 = (task % q_blocks) * kQueryBlock;
      const int64_t rows = std::min(kQueryBlock, s.q_len - i0);
      if (bh != loaded) {
        slice.load_forward(s, layout, bh, q, k, v);
        loaded = bh;
      }
      acc.assign(static_cast<size_t>(rows * ev), A(0));
      row_max.assign(static_cast<size_t>(rows), kNegInf);
      row_sum.assign(static_cast<size_t>(rows), A(0));
      const int64_t keys = visible_keys(s, causal, i0, rows);
      for (int64_t j0 = 0; j0 < keys; j0 += kKeyBlock) {
        const int64_t cols = std::min(kKeyBlock, keys - j0);
        block_scores(s, slice, bias, causal, scale, bh / s.heads, bh % s.heads, i0, rows, j0, cols, scores);
        for (int64_t r = 0; r < rows; ++r) {
          A* row = scores.data() + r * cols;
          // Causally masked scores are -inf and their exps zeros: only the visible ones (to the
          // end of their last 16-lane step) are computed; the exps are most of the kernel's time.
          const int64_t end = exp_end(causal ? std::clamp<int64_t>(i0 + r + 1 - j0, 0, cols) : cols, cols);
          std::fill(row + end, row + cols, A(0));
          const A new_max = std::max(row_max[r], lane_max_of(row, end));
          if (new_max == kNegInf) {  // nothing visible yet: this block adds nothing to the row
            std::fill(row, row + end, A(0));
            continue;
          }
          const A correction = exp_of(row_max[r] - new_max);
          exp_shifted(row, end, new_max);
          const A block_sum = static_cast<A>(lane_sum_of<A>(end, [&](int64_t c) { return row[c]; }));
          row_sum[r] = row_sum[r] * correction + block_sum;
          row_max[r] = new_max;
          A* o = acc.data() + r * ev;
          for (int64_t d = 0; d < ev; ++d) o[d] *= correction;
        }
        multiply_add(rows, ev, cols, scores.data(), cols, int64_t{1}, slice.v + j0 * ev, ev, acc.data(), ev);
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t row_index = bh * s.q_len + i0 + r;
        T* o = head_start(out, layout.out, s, bh) + (i0 + r) * layout.out.row;
        // A row that sees no key (all masked, or no keys) outputs zeros, as CPU PyTorch's kernel.
        const A inverse = row_sum[r] > A(0) ? A(1) / row_sum[r] : A(0);
        for (int64_t d = 0; d < ev; ++d) o[d] = down<T>(row_max[r] == kNegInf ? A(0) : acc[r * ev + d] * inverse);
        static_cast<A*>(lse_out)[row_index] = row_max[r] + std::log(row_sum[r]);
      }
    }
  });
}

template <typename T>
void backward_typed(const AttentionShape& s, const AttentionLayout& layout, const T* grad_out, const T* q, const T* k,
                    const T* v,
                    const AttentionBias& bias, bool causal, double scale_value, const T* out, const void* lse_in,
                    T* grad_q, T* grad_k, T* grad_v, T* grad_bias) {
  using A = Acc<T>;
  constexpr A kNegInf = -std::numeric_limits<A>::infinity();
  const A scale = static_cast<A>(scale_value);
  const A* lse = static_cast<const A*>(lse_in);
  const int64_t e = s.head_dim, ev = s.value_dim;
  const int64_t heads = s.batch * s.heads;
  // delta[i] = grad_out[i] . out[i]: the softmax backward's row term.
  std::vector<A> delta(static_cast<size_t>(heads * s.q_len));
  parallel_for(heads * s.q_len, 1024, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t bh = row / s.q_len, i = row % s.q_len;
      const T* go = head_start(grad_out, layout.grad_out, s, bh) + i * layout.grad_out.row;
      const T* o = head_start(out, layout.out, s, bh) + i * layout.out.row;
      delta[row] = static_cast<A>(lane_sum_of<A>(ev, [&](int64_t d) { return up(go[d]) * up(o[d]); }));
    }
  });
  // A block's probabilities (recomputed from the log-sum-exp) and score gradients: `dscores`
  // holds p * (dp - delta) and `scaled` the same times the scale.
  struct Block {
    std::vector<A> probs, dscores, scaled;
  };
  auto block = [&](const HeadSlice<T, A>& slice, Block& b, int64_t bh, int64_t i0, int64_t rows, int64_t j0,
                   int64_t cols) {
    block_scores(s, slice, bias, causal, scale, bh / s.heads, bh % s.heads, i0, rows, j0, cols, b.probs);
    b.dscores.resize(static_cast<size_t>(rows * cols));  // dp = grad_out . v
    multiply_into(rows, cols, ev, slice.go + i0 * ev, ev, int64_t{1}, slice.value_t.data() + j0, s.kv_len,
                  b.dscores.data(), cols);
    b.scaled.resize(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row_index = bh * s.q_len + i0 + r;
      const A row_lse = lse[row_index], row_delta = delta[row_index];
      A* p = b.probs.data() + r * cols;
      A* ds = b.dscores.data() + r * cols;
      A* dss = b.scaled.data() + r * cols;
      // As in the forward, only the causally visible probabilities (in whole steps) are computed.
      const int64_t end =
          row_lse == kNegInf ? 0 : exp_end(causal ? std::clamp<int64_t>(i0 + r + 1 - j0, 0, cols) : cols, cols);
      exp_shifted(p, end, row_lse);
      std::fill(p + end, p + cols, A(0));
      for (int64_t c = 0; c < cols; ++c) {
        ds[c] = p[c] * (ds[c] - row_delta);
        dss[c] = ds[c] * scale;
      }
    }
  };
  // dV[j0 + c] += sum_r p[r][c] grad_out[i0 + r]; dK[j0 + c] += sum_r ds[r][c] * scale * q[i0 + r].
  auto add_key_grads = [&](const HeadSlice<T, A>& slice, const Block& b, int64_t i0, int64_t rows, int64_t cols, A* dk,
                           A* dv) {
    if (grad_v != nullptr) multiply_add(cols, ev, rows, b.probs.data(), int64_t{1}, cols, slice.go + i0 * ev, ev, dv, ev);
    if (grad_k != nullptr) multiply_add(cols, e, rows, b.scaled.data(), int64_t{1}, cols, slice.q + i0 * e, e, dk, e);
  };
  // dQ[i0 + r] += sum_c ds[r][c] * scale * k[j0 + c]; grad_bias[i0 + r][j0 + c] = ds[r][c].
  auto add_query_grads = [&](const HeadSlice<T, A>& slice, const Block& b, int64_t bh, int64_t i0, int64_t rows,
                             int64_t j0, int64_t cols, A* dq) {
    if (grad_q != nullptr) multiply_add(rows, e, cols, b.scaled.data(), cols, int64_t{1}, slice.k + j0 * e, e, dq, e);
    if (grad_bias != nullptr) {
      for (int64_t r = 0; r < rows; ++r) {
        T* gb = grad_bias + (bh * s.q_len + i0 + r) * s.kv_len + j0;
        for (int64_t c = 0; c < cols; ++c) gb[c] = down<T>(b.dscores[r * cols + c]);
      }
    }
  };
  auto zero_bias_rows = [&](int64_t bh, int64_t i0, int64_t rows) {  // masked-out blocks get a zero gradient
    if (grad_bias == nullptr) return;
    T* gb = grad_bias + (bh * s.q_len + i0) * s.kv_len;
    std::fill(gb, gb + rows * s.kv_len, down<T>(A(0)));
  };
  // Packed rows of `width` values into rows `to_row` apart.
  auto store = [](const std::vector<A>& from, int64_t width, T* to, int64_t to_row) {
    const int64_t rows = width > 0 ? static_cast<int64_t>(from.size()) / width : 0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < width; ++c) to[r * to_row + c] = down<T>(from[r * width + c]);
    }
  };
  auto grad_rows = [&](T* base, const HeadStrides& strides, int64_t bh, int64_t first_row) {
    return head_start(base, strides, s, bh) + first_row * strides.row;
  };
  const bool want_keys = grad_k != nullptr || grad_v != nullptr;
  const bool want_queries = grad_q != nullptr || grad_bias != nullptr;
  const int64_t q_blocks = (s.q_len + kQueryBlock - 1) / kQueryBlock;
  if (heads >= 2 * compute_threads()) {
    // Enough heads for every thread: a task owns whole heads and computes each block once.
    parallel_for(heads, 1, [&](int64_t begin, int64_t end) {
      HeadSlice<T, A> slice;
      Block b;
      std::vector<A> dq, dk, dv;
      for (int64_t bh = begin; bh < end; ++bh) {
        slice.load_backward(s, layout, bh, q, k, v, grad_out);
        dq.assign(static_cast<size_t>(grad_q != nullptr ? s.q_len * e : 0), A(0));
        dk.assign(static_cast<size_t>(grad_k != nullptr ? s.kv_len * e : 0), A(0));
        dv.assign(static_cast<size_t>(grad_v != nullptr ? s.kv_len * ev : 0), A(0));
        zero_bias_rows(bh, 0, s.q_len);
        for (int64_t i0 = 0; i0 < s.q_len; i0 += kQueryBlock) {
          const int64_t rows = std::min(kQueryBlock, s.q_len - i0);
          const int64_t keys = visible_keys(s, causal, i0, rows);
          for (int64_t j0 = 0; j0 < keys; j0 += kKeyBlock) {
            const int64_t cols = std::min(kKeyBlock, keys - j0);
            block(slice, b, bh, i0, rows, j0, cols);
            add_key_grads(slice, b, i0, rows, cols, dk.data() + j0 * e, dv.data() + j0 * ev);
            add_query_grads(slice, b, bh, i0, rows, j0, cols, dq.data() + i0 * e);
          }
        }
        if (grad_q != nullptr) store(dq, e, grad_rows(grad_q, layout.grad_q, bh, 0), layout.grad_q.row);
        if (grad_k != nullptr) store(dk, e, grad_rows(grad_k, layout.grad_k, bh, 0), layout.grad_k.row);
        if (grad_v != nullptr) store(dv, ev, grad_rows(grad_v, layout.grad_v, bh, 0), layout.grad_v.row);
      }
    });
    return;
  }
  // Few heads: key-block tasks own their rows of dK and dV, query-block tasks their rows of dQ;
  // each recomputes the blocks it needs (with the same roundings as above).
  if (want_keys) {
    const int64_t k_blocks = (s.kv_len + kKeyTask - 1) / kKeyTask;
    parallel_for(heads * k_blocks, 1, [&](int64_t begin, int64_t end) {
      HeadSlice<T, A> slice;
      int64_t loaded = -1;
      Block b;
      std::vector<A> dk, dv;
      for (int64_t task = begin; task < end; ++task) {
        const int64_t bh = task / k_blocks, j0 = (task % k_blocks) * kKeyTask;
        const int64_t cols = std::min(kKeyTask, s.kv_len - j0);
        if (bh != loaded) {
          slice.load_backward(s, layout, bh, q, k, v, grad_out);
          loaded = bh;
        }
        dk.assign(static_cast<size_t>(grad_k != nullptr ? cols * e : 0), A(0));
        dv.assign(static_cast<size_t>(grad_v != nullptr ? cols * ev : 0), A(0));
        for (int64_t i0 = causal ? (j0 / kQueryBlock) * kQueryBlock : 0; i0 < s.q_len; i0 += kQueryBlock) {
          const int64_t rows = std::min(kQueryBlock, s.q_len - i0);
          block(slice, b, bh, i0, rows, j0, cols);
          add_key_grads(slice, b, i0, rows, cols, dk.data(), dv.data());
        }
        if (grad_k != nullptr) store(dk, e, grad_rows(grad_k, layout.grad_k, bh, j0), layout.grad_k.row);
        if (grad_v != nullptr) store(dv, ev, grad_rows(grad_v, layout.grad_v, bh, j0), layout.grad_v.row);
      }
    });
  }
  if (!want_queries) return;
  parallel_for(heads * q_blocks, 1, [&](int64_t begin, int64_t end) {
    HeadSlice<T, A> slice;
    int64_t loaded = -1;
    Block b;
    std::vector<A> dq;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bh = task / q_blocks, i0 = (task % q_blocks) * kQueryBlock;
      const int64_t rows = std::min(kQueryBlock, s.q_len - i0);
      if (bh != loaded) {
        slice.load_backward(s, layout, bh, q, k, v, grad_out);
        loaded = bh;
      }
      dq.assign(static_cast<size_t>(grad_q != nullptr ? rows * e : 0), A(0));
      zero_bias_rows(bh, i0, rows);
      const int64_t keys = visible_keys(s, causal, i0, rows);
      for (int64_t j0 = 0; j0 < keys; j0 += kKeyBlock) {
        const int64_t cols = std::min(kKeyBlock, keys - j0);
        block(slice, b, bh, i0, rows, j0, cols);
        add_query_grads(slice, b, bh, i0, rows, j0, cols, dq.data());
      }
      if (grad_q != nullptr) store(dq, e, grad_rows(grad_q, layout.grad_q, bh, i0), layout.grad_q.row);
    }
  });
}

}  // namespace

void attention_forward(DType dtype, AttentionShape shape, const AttentionLayout& layout, const void* q, const void* k,
                       const void* v, AttentionBias bias, bool causal, double scale, void* out, void* logsumexp) {
  dispatch_floating(dtype, "attention", [&](auto tag) {
    using T = decltype(tag);
    forward_typed<T>(shape, layout, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), bias, causal,
                     scale, static_cast<T*>(out), logsumexp);
  });
}

void attention_backward(DType dtype, AttentionShape shape, const AttentionLayout& layout, const void* grad_out,
                        const void* q, const void* k, const void* v, AttentionBias bias, bool causal, double scale,
                        const void* out, const void* logsumexp, void* grad_q, void* grad_k, void* grad_v,
                        void* grad_bias) {
  dispatch_floating(dtype, "attention backward", [&](auto tag) {
    using T = decltype(tag);
    backward_typed<T>(shape, layout, static_cast<const T*>(grad_out), static_cast<const T*>(q), static_cast<const T*>(k),
                      static_cast<const T*>(v), bias, causal, scale, static_cast<const T*>(out), logsumexp,
                      static_cast<T*>(grad_q), static_cast<T*>(grad_k), static_cast<T*>(grad_v), static_cast<T*>(grad_bias));
  });
}

}  // namespace torchneuron::kernels
