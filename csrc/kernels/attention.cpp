#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/floating.h"
#include "kernels/parallel.h"

namespace torchneuron::kernels {
namespace {

constexpr int64_t kQueryBlock = 64;
constexpr int64_t kKeyBlock = 64;

// One (batch, head) slice of the inputs, converted to the compute type A.
template <typename T, typename A>
struct HeadSlice {
  std::vector<A> q, k, v;  // [L, E], [S, E], [S, Ev]

  void load(const AttentionShape& s, int64_t bh, const T* pq, const T* pk, const T* pv) {
    auto convert = [](const T* from, int64_t n, std::vector<A>& to) {
      to.resize(n);
      for (int64_t i = 0; i < n; ++i) to[i] = static_cast<A>(up(from[i]));
    };
    convert(pq + bh * s.q_len * s.head_dim, s.q_len * s.head_dim, q);
    convert(pk + bh * s.kv_len * s.head_dim, s.kv_len * s.head_dim, k);
    convert(pv + bh * s.kv_len * s.value_dim, s.kv_len * s.value_dim, v);
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
                  std::vector<A>& key_t, std::vector<A>& scores) {
  const int64_t e = s.head_dim;
  key_t.assign(e * cols, A(0));  // K block transposed: the inner loops run over contiguous keys
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t d = 0; d < e; ++d) key_t[d * cols + c] = slice.k[(j0 + c) * e + d];
  }
  scores.assign(rows * cols, A(0));
  for (int64_t r = 0; r < rows; ++r) {
    A* row = scores.data() + r * cols;
    const A* qrow = slice.q.data() + (i0 + r) * e;
    for (int64_t d = 0; d < e; ++d) {
      const A qd = qrow[d];
      const A* kd = key_t.data() + d * cols;
      for (int64_t c = 0; c < cols; ++c) row[c] += qd * kd[c];
    }
    for (int64_t c = 0; c < cols; ++c) {
      A value = row[c] * scale;
      if (bias.data != nullptr) value += static_cast<A>(bias_at<T>(bias, batch, head, i0 + r, j0 + c));
      if (causal && j0 + c > i0 + r) value = -std::numeric_limits<A>::infinity();
      row[c] = value;
    }
  }
}

// Key blocks a query block [i0, i0 + rows) can see.
inline int64_t visible_keys(const AttentionShape& s, bool causal, int64_t i0, int64_t rows) {
  return causal ? std::min(s.kv_len, i0 + rows) : s.kv_len;
}

template <typename T>
void forward_typed(const AttentionShape& s, const T* q, const T* k, const T* v, const AttentionBias& bias, bool causal,
                   double scale_value, T* out, void* lse_out) {
  using A = Acc<T>;
  const A scale = static_cast<A>(scale_value);
  const int64_t q_blocks = (s.q_len + kQueryBlock - 1) / kQueryBlock;
  const int64_t heads = s.batch * s.heads;
  parallel_for(heads * q_blocks, 1, [&](int64_t begin, int64_t end) {
    HeadSlice<T, A> slice;
    int64_t loaded = -1;
    std::vector<A> key_t, scores, acc, row_max, row_sum;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bh = task / q_blocks, i0 = (task % q_blocks) * kQueryBlock;
      const int64_t rows = std::min(kQueryBlock, s.q_len - i0);
      if (bh != loaded) {
        slice.load(s, bh, q, k, v);
        loaded = bh;
      }
      acc.assign(rows * s.value_dim, A(0));
      row_max.assign(rows, -std::numeric_limits<A>::infinity());
      row_sum.assign(rows, A(0));
      const int64_t keys = visible_keys(s, causal, i0, rows);
      for (int64_t j0 = 0; j0 < keys; j0 += kKeyBlock) {
        const int64_t cols = std::min(kKeyBlock, keys - j0);
        block_scores(s, slice, bias, causal, scale, bh / s.heads, bh % s.heads, i0, rows, j0, cols, key_t, scores);
        for (int64_t r = 0; r < rows; ++r) {
          A* row = scores.data() + r * cols;
          A block_max = -std::numeric_limits<A>::infinity();
          for (int64_t c = 0; c < cols; ++c) block_max = std::max(block_max, row[c]);
          const A new_max = std::max(row_max[r], block_max);
          if (new_max == -std::numeric_limits<A>::infinity()) continue;  // nothing visible yet
          const A correction = std::exp(row_max[r] - new_max);
          A sum = 0;
          for (int64_t c = 0; c < cols; ++c) {
            row[c] = std::exp(row[c] - new_max);
            sum += row[c];
          }
          row_sum[r] = row_sum[r] * correction + sum;
          row_max[r] = new_max;
          A* o = acc.data() + r * s.value_dim;
          for (int64_t d = 0; d < s.value_dim; ++d) o[d] *= correction;
          for (int64_t c = 0; c < cols; ++c) {
            const A p = row[c];
            const A* vrow = slice.v.data() + (j0 + c) * s.value_dim;
            for (int64_t d = 0; d < s.value_dim; ++d) o[d] += p * vrow[d];
          }
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t row_index = bh * s.q_len + i0 + r;
        T* o = out + row_index * s.value_dim;
        // A row that sees no key (all masked, or no keys) outputs zeros, as CPU PyTorch's kernel.
        const A inverse = row_sum[r] > A(0) ? A(1) / row_sum[r] : A(0);
        for (int64_t d = 0; d < s.value_dim; ++d) o[d] = down<T>(acc[r * s.value_dim + d] * inverse);
        static_cast<A*>(lse_out)[row_index] = row_max[r] + std::log(row_sum[r]);
      }
    }
  });
}

template <typename T>
void backward_typed(const AttentionShape& s, const T* grad_out, const T* q, const T* k, const T* v,
                    const AttentionBias& bias, bool causal, double scale_value, const T* out, const void* lse_in,
                    T* grad_q, T* grad_k, T* grad_v, T* grad_bias) {
  using A = Acc<T>;
  const A scale = static_cast<A>(scale_value);
  const A* lse = static_cast<const A*>(lse_in);
  const int64_t heads = s.batch * s.heads;
  // delta[i] = grad_out[i] . out[i]: the softmax backward's row term.
  std::vector<A> delta(heads * s.q_len);
  parallel_for(heads * s.q_len, 1024, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      A sum = 0;
      for (int64_t d = 0; d < s.value_dim; ++d) sum += up(grad_out[row * s.value_dim + d]) * up(out[row * s.value_dim + d]);
      delta[row] = sum;
    }
  });
  // Probabilities and score gradients of one block, recomputed from the log-sum-exp.
  auto block = [&](const HeadSlice<T, A>& slice, std::vector<A>& key_t, std::vector<A>& probs, std::vector<A>& dscores,
                   int64_t bh, int64_t i0, int64_t rows, int64_t j0, int64_t cols) {
    block_scores(s, slice, bias, causal, scale, bh / s.heads, bh % s.heads, i0, rows, j0, cols, key_t, probs);
    dscores.assign(rows * cols, A(0));
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row_index = bh * s.q_len + i0 + r;
      const T* go = grad_out + row_index * s.value_dim;
      for (int64_t c = 0; c < cols; ++c) {
        A& p = probs[r * cols + c];
        p = lse[row_index] == -std::numeric_limits<A>::infinity() ? A(0) : std::exp(p - lse[row_index]);
        const A* vrow = slice.v.data() + (j0 + c) * s.value_dim;
        A dp = 0;
        for (int64_t d = 0; d < s.value_dim; ++d) dp += up(go[d]) * vrow[d];
        dscores[r * cols + c] = p * (dp - delta[row_index]);
      }
    }
  };
  const int64_t k_blocks = (s.kv_len + kKeyBlock - 1) / kKeyBlock;
  const int64_t q_blocks = (s.q_len + kQueryBlock - 1) / kQueryBlock;
  if (grad_k != nullptr || grad_v != nullptr) {  // key-block tasks own their rows of dK and dV
    parallel_for(heads * k_blocks, 1, [&](int64_t begin, int64_t end) {
      HeadSlice<T, A> slice;
      int64_t loaded = -1;
      std::vector<A> key_t, probs, dscores, dk, dv;
      for (int64_t task = begin; task < end; ++task) {
        const int64_t bh = task / k_blocks, j0 = (task % k_blocks) * kKeyBlock;
        const int64_t cols = std::min(kKeyBlock, s.kv_len - j0);
        if (bh != loaded) {
          slice.load(s, bh, q, k, v);
          loaded = bh;
        }
        dk.assign(cols * s.head_dim, A(0));
        dv.assign(cols * s.value_dim, A(0));
        for (int64_t i0 = causal ? (j0 / kQueryBlock) * kQueryBlock : 0; i0 < s.q_len; i0 += kQueryBlock) {
          const int64_t rows = std::min(kQueryBlock, s.q_len - i0);
          block(slice, key_t, probs, dscores, bh, i0, rows, j0, cols);
          for (int64_t r = 0; r < rows; ++r) {
            const T* go = grad_out + (bh * s.q_len + i0 + r) * s.value_dim;
            const A* qrow = slice.q.data() + (i0 + r) * s.head_dim;
            for (int64_t c = 0; c < cols; ++c) {
              const A p = probs[r * cols + c], ds = dscores[r * cols + c] * scale;
              A* dvrow = dv.data() + c * s.value_dim;
              for (int64_t d = 0; d < s.value_dim; ++d) dvrow[d] += p * up(go[d]);
              A* dkrow = dk.data() + c * s.head_dim;
              for (int64_t d = 0; d < s.head_dim; ++d) dkrow[d] += ds * qrow[d];
            }
          }
        }
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t key_index = bh * s.kv_len + j0 + c;
          if (grad_k != nullptr) {
            for (int64_t d = 0; d < s.head_dim; ++d) grad_k[key_index * s.head_dim + d] = down<T>(dk[c * s.head_dim + d]);
          }
          if (grad_v != nullptr) {
            for (int64_t d = 0; d < s.value_dim; ++d) grad_v[key_index * s.value_dim + d] = down<T>(dv[c * s.value_dim + d]);
          }
        }
      }
    });
  }
  if (grad_q == nullptr && grad_bias == nullptr) return;
  parallel_for(heads * q_blocks, 1, [&](int64_t begin, int64_t end) {  // query-block tasks own dQ rows
    HeadSlice<T, A> slice;
    int64_t loaded = -1;
    std::vector<A> key_t, probs, dscores, dq;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bh = task / q_blocks, i0 = (task % q_blocks) * kQueryBlock;
      const int64_t rows = std::min(kQueryBlock, s.q_len - i0);
      if (bh != loaded) {
        slice.load(s, bh, q, k, v);
        loaded = bh;
      }
      dq.assign(rows * s.head_dim, A(0));
      if (grad_bias != nullptr) {  // masked-out blocks get a zero gradient
        for (int64_t r = 0; r < rows; ++r) {
          T* gb = grad_bias + (bh * s.q_len + i0 + r) * s.kv_len;
          for (int64_t j = 0; j < s.kv_len; ++j) gb[j] = down<T>(A(0));
        }
      }
      const int64_t keys = visible_keys(s, causal, i0, rows);
      for (int64_t j0 = 0; j0 < keys; j0 += kKeyBlock) {
        const int64_t cols = std::min(kKeyBlock, keys - j0);
        block(slice, key_t, probs, dscores, bh, i0, rows, j0, cols);
        for (int64_t r = 0; r < rows; ++r) {
          A* dqrow = dq.data() + r * s.head_dim;
          for (int64_t c = 0; c < cols; ++c) {
            const A ds = dscores[r * cols + c];
            const A* krow = slice.k.data() + (j0 + c) * s.head_dim;
            for (int64_t d = 0; d < s.head_dim; ++d) dqrow[d] += ds * scale * krow[d];
          }
          if (grad_bias != nullptr) {
            T* gb = grad_bias + (bh * s.q_len + i0 + r) * s.kv_len + j0;
            for (int64_t c = 0; c < cols; ++c) gb[c] = down<T>(dscores[r * cols + c]);
          }
        }
      }
      if (grad_q != nullptr) {
        for (int64_t r = 0; r < rows; ++r) {
          T* out_row = grad_q + (bh * s.q_len + i0 + r) * s.head_dim;
          for (int64_t d = 0; d < s.head_dim; ++d) out_row[d] = down<T>(dq[r * s.head_dim + d]);
        }
      }
    }
  });
}

}  // namespace

void attention_forward(DType dtype, AttentionShape shape, const void* q, const void* k, const void* v,
                       AttentionBias bias, bool causal, double scale, void* out, void* logsumexp) {
  dispatch_floating(dtype, "attention", [&](auto tag) {
    using T = decltype(tag);
    forward_typed<T>(shape, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), bias, causal,
                     scale, static_cast<T*>(out), logsumexp);
  });
}

void attention_backward(DType dtype, AttentionShape shape, const void* grad_out, const void* q, const void* k,
                        const void* v, AttentionBias bias, bool causal, double scale, const void* out,
                        const void* logsumexp, void* grad_q, void* grad_k, void* grad_v, void* grad_bias) {
  dispatch_floating(dtype, "attention backward", [&](auto tag) {
    using T = decltype(tag);
    backward_typed<T>(shape, static_cast<const T*>(grad_out), static_cast<const T*>(q), static_cast<const T*>(k),
                      static_cast<const T*>(v), bias, causal, scale, static_cast<const T*>(out), logsumexp,
                      static_cast<T*>(grad_q), static_cast<T*>(grad_k), static_cast<T*>(grad_v), static_cast<T*>(grad_bias));
  });
}

}  // namespace torchneuron::kernels
