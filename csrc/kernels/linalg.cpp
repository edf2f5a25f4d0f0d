#include "kernels/linalg.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/floating.h"
#include "kernels/parallel.h"

namespace torchneuron::kernels {

// Tasks are (matrix, block of columns of B): columns are independent systems.
void triangular_solve(DType dtype, int64_t batch, int64_t n, int64_t k, bool upper, bool unitriangular, const void* a,
                      void* b) {
  dispatch_floating(dtype, "triangular_solve", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* matrices = static_cast<const T*>(a);
    T* rhs = static_cast<T*>(b);
    constexpr int64_t kColumns = 64;
    const int64_t blocks = (k + kColumns - 1) / kColumns;
    const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, n * n * std::min(k, kColumns)));
    parallel_for(batch * blocks, grain, [&](int64_t begin, int64_t end) {
      std::vector<A> solved(static_cast<size_t>(n * kColumns));  // X's rows for this block, in A's precision
      std::vector<A> row(kColumns);
      for (int64_t task = begin; task < end; ++task) {
        const int64_t m = task / blocks, c0 = (task % blocks) * kColumns, width = std::min(kColumns, k - c0);
        const T* mat = matrices + m * n * n;
        T* x = rhs + m * n * k + c0;
        for (int64_t step = 0; step < n; ++step) {
          const int64_t i = upper ? n - 1 - step : step;
          for (int64_t c = 0; c < width; ++c) row[c] = up(x[i * k + c]);
          // The solved rows j: below i when upper, above it when lower, taken in increasing j.
          const int64_t j0 = upper ? i + 1 : 0, j1 = upper ? n : i;
          for (int64_t j = j0; j < j1; ++j) {
            const A aij = up(mat[i * n + j]);
            const A* xj = solved.data() + j * kColumns;
            for (int64_t c = 0; c < width; ++c) row[c] -= aij * xj[c];
          }
          A* xi = solved.data() + i * kColumns;
          if (unitriangular) {
            for (int64_t c = 0; c < width; ++c) xi[c] = row[c];
          } else {
            const A diagonal = up(mat[i * n + i]);
            for (int64_t c = 0; c < width; ++c) xi[c] = row[c] / diagonal;
          }
          for (int64_t c = 0; c < width; ++c) x[i * k + c] = down<T>(xi[c]);
        }
      }
    });
  });
}

namespace {

// p's family: each sums a different function of |d| and finishes the sum differently.
enum class Norm { kZero, kOne, kTwo, kInf, kGeneral };

Norm norm_of(double p) {
  if (p == 0.0) return Norm::kZero;
  if (p == 1.0) return Norm::kOne;
  if (p == 2.0) return Norm::kTwo;
  if (std::isinf(p)) return Norm::kInf;
  return Norm::kGeneral;
}

}  // namespace

// One task per (matrix, row of x1): the distances to every row of x2, accumulated in the
// accumulation type (double for double).
void pairwise_distance(DType dtype, int64_t batch, int64_t rows1, int64_t rows2, int64_t dim, double p, const void* x1,
                       const void* x2, void* out) {
  dispatch_floating(dtype, "cdist", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* a = static_cast<const T*>(x1);
    const T* b = static_cast<const T*>(x2);
    T* d = static_cast<T*>(out);
    const Norm norm = norm_of(p);
    const A power = static_cast<A>(p);
    parallel_for(batch * rows1, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, rows2 * dim)), [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t m = task / rows1;
        const T* u = a + task * dim;
        for (int64_t j = 0; j < rows2; ++j) {
          const T* v = b + (m * rows2 + j) * dim;
          A total = 0;
          for (int64_t k = 0; k < dim; ++k) {
            const A diff = std::abs(up(u[k]) - up(v[k]));
            switch (norm) {
              case Norm::kZero: total += diff != A(0) ? A(1) : A(0); break;
              case Norm::kOne: total += diff; break;
              case Norm::kTwo: total += diff * diff; break;
              case Norm::kInf: total = std::max(total, diff); break;
              case Norm::kGeneral: total += std::pow(diff, power); break;
            }
          }
          if (norm == Norm::kTwo) total = std::sqrt(total);
          if (norm == Norm::kGeneral) total = std::pow(total, A(1) / power);
          d[task * rows2 + j] = down<T>(total);
        }
      }
    });
  });
}

void pairwise_distance_backward(DType dtype, int64_t batch, int64_t rows1, int64_t rows2, int64_t dim, double p,
                                const void* grad, const void* x1, const void* x2, const void* dist, void* grad_x1) {
  dispatch_floating(dtype, "cdist_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* g = static_cast<const T*>(grad);
    const T* a = static_cast<const T*>(x1);
    const T* b = static_cast<const T*>(x2);
    const T* dd = static_cast<const T*>(dist);
    T* out = static_cast<T*>(grad_x1);
    const Norm norm = norm_of(p);
    const A power = static_cast<A>(p);
    parallel_for(batch * rows1, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, rows2 * dim)), [&](int64_t begin, int64_t end) {
      std::vector<A> sums(static_cast<size_t>(dim));
      for (int64_t task = begin; task < end; ++task) {
        const int64_t m = task / rows1;
        const T* u = a + task * dim;
        std::fill(sums.begin(), sums.end(), A(0));
        for (int64_t j = 0; j < rows2; ++j) {
          const A scale = up(g[task * rows2 + j]), distance = up(dd[task * rows2 + j]);
          if (norm == Norm::kZero || distance == A(0)) continue;
          const T* v = b + (m * rows2 + j) * dim;
          for (int64_t k = 0; k < dim; ++k) {
            const A diff = up(u[k]) - up(v[k]);
            const A sign = diff > A(0) ? A(1) : diff < A(0) ? A(-1) : A(0);
            switch (norm) {
              case Norm::kOne: sums[k] += sign * scale; break;
              case Norm::kTwo: sums[k] += diff * scale / distance; break;
              case Norm::kInf: sums[k] += std::abs(diff) == distance ? sign * scale : A(0); break;
              case Norm::kGeneral:
                if (power < A(1) && diff == A(0)) break;  // |d|^(p - 1) is infinite there; CPU gives 0
                sums[k] += sign * std::pow(std::abs(diff), power - A(1)) * scale / std::pow(distance, power - A(1));
                break;
              case Norm::kZero: break;
            }
          }
        }
        T* row = out + task * dim;
        for (int64_t k = 0; k < dim; ++k) row[k] = down<T>(sums[k]);
      }
    });
  });
}

}  // namespace torchneuron::kernels
